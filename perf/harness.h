// Shared benchmark machinery: OpenBLAS loaded with dlopen (RTLD_LOCAL, so its cblas_sgemm
// never clashes with ours), and the interleaved runner: every point is one group of
// google-benchmark benchmarks (one per library), run back to back, the order rotating by
// round, with a pause after libraries whose threads spin after a call.
#pragma once
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gemmkit_cblas.h"

namespace gkbench {

using SgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float,
                         const float*, int, const float*, int, float, float*, int);

struct OpenBlas {
  SgemmFn sgemm = nullptr;
  void (*set_threads)(int) = nullptr;
  std::string description = "not found";
  bool ok() const { return sgemm && set_threads; }
};

// OpenBLAS 0.3.21's DYNAMIC_ARCH does not know recent Xeons (Sapphire / Emerald Rapids)
// and falls back to its SSE3 "Prescott" kernels: 32 GFLOP/s where its SkylakeX kernels run
// 120-150. Measured against that, any AVX-512 library looks 4x faster. So on a CPU with
// AVX-512F, unless the user chose a core, OpenBLAS gets its AVX-512 kernels (the table's
// header names the core it ran).
inline void choose_openblas_core() {
#if defined(__x86_64__)
  if (!std::getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
#endif
}

inline OpenBlas load_openblas(const std::string& path) {
  OpenBlas ob;
  choose_openblas_core();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    ob.description = std::string("not found: ") + dlerror();
    return ob;
  }
  ob.sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
  ob.set_threads = reinterpret_cast<void (*)(int)>(dlsym(handle, "openblas_set_num_threads"));
  auto core = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_corename"));
  auto config = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_config"));
  if (core && config) ob.description = std::string(core()) + " (" + config() + ")";
  return ob;
}

// Seconds per iteration of each run, by benchmark name.
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.iterations > 0)
        seconds[r.run_name.function_name] = r.real_accumulated_time / double(r.iterations);
    ConsoleReporter::ReportRuns(runs);
  }
};

inline std::string escape_regex(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) out += '\\';
    out += ch;
  }
  return out;
}

// Runs each group's benchmarks back to back, `rounds` times, rotating who goes first;
// sleeps 0.2 s after any benchmark named in `spinners`. Returns the samples by name.
inline std::map<std::string, std::vector<double>> run_interleaved(
    const std::vector<std::vector<std::string>>& groups, int rounds,
    const std::set<std::string>& spinners) {
  std::map<std::string, std::vector<double>> samples;
  Collector collector;
  for (int r = 0; r < rounds; ++r)
    for (const auto& group : groups)
      for (size_t i = 0; i < group.size(); ++i) {
        const std::string& name = group[(i + size_t(r)) % group.size()];
        collector.seconds.clear();
        benchmark::RunSpecifiedBenchmarks(&collector, "^" + escape_regex(name) + "(/|$)");
        if (collector.seconds.count(name)) samples[name].push_back(collector.seconds[name]);
        if (spinners.count(name)) usleep(200 * 1000);  // let its workers go to sleep
      }
  return samples;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// --key=value from the command line, "1" for a bare --key, else `fallback`.
inline std::string arg(int argc, char** argv, const std::string& key, const std::string& fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--" + key) return "1";
    if (s.rfind("--" + key + "=", 0) == 0) return s.substr(key.size() + 3);
  }
  return fallback;
}

// --threads=1,2 (the default): the thread counts to measure.
inline std::vector<int> thread_list(int argc, char** argv) {
  std::vector<int> counts;
  std::stringstream ss(arg(argc, argv, "threads", "1,2"));
  for (std::string t; std::getline(ss, t, ',');) counts.push_back(std::stoi(t));
  return counts;
}

}  // namespace gkbench
