// Shared benchmark machinery: OpenBLAS and BLIS loaded with dlopen (RTLD_LOCAL, so their
// cblas_sgemm never clashes with ours), and the interleaved runner: every point is one
// group of google-benchmark benchmarks (one per library), run back to back, the order
// rotating by round, with a pause after libraries whose threads spin after a call.
#pragma once
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
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

// BLIS (Debian's libblis4-openmp, 0.9): its CBLAS cblas_sgemm and its thread setting.
// The OpenMP build runs its threads in the process's libgomp pool, the one gemmkit uses:
// its idle threads wait as gemmkit's do (GOMP_SPINCOUNT, then a futex), so it needs no
// pause after a call; each call runs exactly the threads bli_thread_set_num_threads set.
struct Blis {
  SgemmFn sgemm = nullptr;
  void (*set_threads)(int) = nullptr;
  std::string description = "not found";
  bool ok() const { return sgemm && set_threads; }
};

// BLIS's setter takes its dim_t (int64_t); the table calls set_threads(int).
inline void (*blis_set_num_threads_fn)(int64_t) = nullptr;
inline void blis_set_threads(int n) { blis_set_num_threads_fn(n); }

// BLIS 0.9 picks its sub-configuration by CPU model and, on Xeons it does not know
// (Sapphire / Emerald Rapids: "Number of FMA units unknown"), falls back to its AVX2
// 'haswell' kernels: half the speed of its AVX-512 'skx' ones there. As for OpenBLAS, on a
// CPU with the AVX-512 subsets skx needs, unless the user chose one (BLIS_ARCH_TYPE), BLIS
// gets its AVX-512 kernels; the table's header names the configuration it ran. BLIS reads
// BLIS_ARCH_TYPE once, at its initialisation: this runs before the first call.
inline void choose_blis_arch() {
#if defined(__x86_64__)
  if (!std::getenv("BLIS_ARCH_TYPE") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    setenv("BLIS_ARCH_TYPE", "skx", 0);
#endif
}

// `path`: the library, by default Debian's OpenMP build under its own directory (the
// libblis.so.4 alternative may name the pthread or serial build instead).
inline Blis load_blis(const std::string& path) {
  Blis blis;
  choose_blis_arch();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    blis.description = std::string("not found: ") + dlerror();
    return blis;
  }
  auto sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
  blis_set_num_threads_fn = reinterpret_cast<void (*)(int64_t)>(dlsym(handle, "bli_thread_set_num_threads"));
  auto init = reinterpret_cast<void (*)()>(dlsym(handle, "bli_init"));
  auto version = reinterpret_cast<const char* (*)()>(dlsym(handle, "bli_info_get_version_str"));
  auto arch_id = reinterpret_cast<int64_t (*)()>(dlsym(handle, "bli_arch_query_id"));
  auto arch_name = reinterpret_cast<const char* (*)(int64_t)>(dlsym(handle, "bli_arch_string"));
  auto openmp = reinterpret_cast<int64_t (*)()>(dlsym(handle, "bli_info_get_enable_openmp"));
  auto pthreads = reinterpret_cast<int64_t (*)()>(dlsym(handle, "bli_info_get_enable_pthreads"));
  if (!sgemm || !blis_set_num_threads_fn || !init) {
    blis.description = "no cblas_sgemm / bli_thread_set_num_threads / bli_init in " + path;
    return blis;
  }
  init();  // reads BLIS_ARCH_TYPE and picks the kernels (bli_arch_query_id needs it)
  blis.sgemm = sgemm;
  blis.set_threads = blis_set_threads;
  blis.description = "BLIS " + std::string(version ? version() : "?");
  if (arch_id && arch_name) blis.description += std::string(", ") + arch_name(arch_id()) + " kernels";
  if (openmp && pthreads)
    blis.description += openmp() ? ", OpenMP threads" : pthreads() ? ", pthreads" : ", single-threaded build";
  if (const char* chosen = std::getenv("BLIS_ARCH_TYPE")) blis.description += std::string(" (BLIS_ARCH_TYPE=") + chosen + ")";
  blis.description += " (" + path + ")";
  return blis;
}

// A library in the tables: gemmkit or a peer.
struct Library {
  std::string name;
  SgemmFn sgemm;
  void (*set_threads)(int);
  bool spins_after_call;  // OpenBLAS's pthread workers spin ~0.1 s after each call
};

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
// `around(group, round, after)`, when given, runs just before (after = false) and just
// after (true) each group's benchmarks in each round: the FMA capacity probes.
inline std::map<std::string, std::vector<double>> run_interleaved(
    const std::vector<std::vector<std::string>>& groups, int rounds,
    const std::set<std::string>& spinners,
    const std::function<void(size_t group, int round, bool after)>& around = {}) {
  std::map<std::string, std::vector<double>> samples;
  Collector collector;
  for (int r = 0; r < rounds; ++r)
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& group = groups[g];
      if (around) around(g, r, false);
      for (size_t i = 0; i < group.size(); ++i) {
        const std::string& name = group[(i + size_t(r)) % group.size()];
        collector.seconds.clear();
        benchmark::RunSpecifiedBenchmarks(&collector, "^" + escape_regex(name) + "(/|$)");
        if (collector.seconds.count(name)) samples[name].push_back(collector.seconds[name]);
        if (spinners.count(name)) usleep(200 * 1000);  // let its workers go to sleep
      }
      if (around) around(g, r, true);
    }
  return samples;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// The 1, 5 and 15 minute load averages (/proc/loadavg), "?" where unreadable: the tables
// print them, since other processes on the cores move every figure, the 2-thread ones most.
inline std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(f >> one >> five >> fifteen)) return "?";
  return one + " " + five + " " + fifteen;
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
