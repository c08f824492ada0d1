// Fast-Run (after MegEngine): no fixed rule picks the best algorithm for every layer on
// every CPU, so measure. See fastrun.h; the file format:
//
//   gemmkit-fastrun 1                      format version
//   machine <machine key>                  entries are for this machine and library only
//   entry <descriptor key> <candidate>     one per layer
//
// Keys and names are single tokens of [A-Za-z0-9_=;:,.+-], at most 512 characters. A file
// is parsed whole or not at all: any other line, a missing header, an over-long token or a
// file over 16 MiB is rejected (GK_ERR_IO) without touching the cache. A file for another
// machine or version is ignored (GEMMKIT_VERBOSE says so). Saves write a temporary file
// beside the target and rename it over, so readers and concurrent savers always see a
// whole file.
#include "conv/fastrun.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <new>
#include <mutex>
#include <random>
#include <sstream>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "gemmkit.h"

namespace gk {
namespace conv {
namespace {

std::mutex g_mutex;  // guards everything below; held while profiling
std::map<std::string, std::string> g_cache;  // machine key + "|" + descriptor key -> name
std::function<double(const std::string&)> g_fake_durations;
bool g_env_loaded = false;
constexpr const char* kHeader = "gemmkit-fastrun 1";
constexpr size_t kMaxToken = 512;
constexpr long kMaxFileBytes = 16L << 20;
constexpr double kSwitchMargin = 0.95;  // a new best must be at least 5% faster
constexpr double kSampleSeconds = 1e-3;  // a timed sample batches runs up to about this
constexpr double kWarmupCutFactor = 3.0;  // a warm-up this many times the best ends a candidate

bool valid_token(const std::string& t) {
  if (t.empty() || t.size() > kMaxToken) return false;
  for (char c : t)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("_=;:,.+-").find(c) != std::string::npos))
      return false;
  return true;
}

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) c = '_';
  return s.empty() ? "unknown" : s;
}

// Loads `path` into the cache; the caller holds g_mutex.
gk_status load_locked(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    set_last_error("Fast-Run cache %s: cannot open", path);
    return GK_ERR_IO;
  }
  in.seekg(0, std::ios::end);
  const long size = static_cast<long>(in.tellg());
  if (size < 0 || size > kMaxFileBytes) {
    set_last_error("Fast-Run cache %s: not a cache file (size)", path);
    return GK_ERR_IO;
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(&text[0], size);
  std::istringstream lines(text);
  std::string line, machine;
  std::map<std::string, std::string> entries;
  int number = 0;
  auto reject = [&](const char* why) {
    set_last_error("Fast-Run cache %s: rejected at line %d: %s", path, number, why);
    return GK_ERR_IO;
  };
  while (std::getline(lines, line)) {
    ++number;
    if (number == 1) {
      if (line != kHeader) return reject("not a gemmkit Fast-Run cache (version 1)");
      continue;
    }
    std::istringstream words(line);
    std::string kind, a, b, extra;
    words >> kind >> a;
    if (number == 2) {
      if (kind != "machine" || !valid_token(a) || (words >> extra)) return reject("bad machine line");
      machine = a;
      continue;
    }
    words >> b;
    if (kind != "entry" || !valid_token(a) || !valid_token(b) || (words >> extra))
      return reject("bad entry line");
    entries[a] = b;
  }
  if (number < 2) return reject("truncated header");
  if (machine != machine_key()) {
    if (verbose())
      std::fprintf(stderr, "gemmkit: Fast-Run cache %s ignored: written for %s, this is %s\n", path,
                   machine.c_str(), machine_key().c_str());
    set_last_error("Fast-Run cache %s ignored: written for another machine or version", path);
    return GK_OK;
  }
  for (const auto& e : entries) g_cache[machine + "|" + e.first] = e.second;
  return GK_OK;
}

gk_status save_locked(const char* path) {
  static std::atomic<unsigned> counter{0};
  const std::string machine = machine_key(), prefix = machine + "|";
  const std::string tmp = std::string(path) + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      set_last_error("Fast-Run cache %s: cannot write %s", path, tmp.c_str());
      return GK_ERR_IO;
    }
    out << kHeader << "\nmachine " << machine << "\n";
    for (const auto& e : g_cache)
      if (e.first.compare(0, prefix.size(), prefix) == 0)
        out << "entry " << e.first.substr(prefix.size()) << " " << e.second << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      set_last_error("Fast-Run cache %s: write failed", path);
      return GK_ERR_IO;
    }
  }
  if (std::rename(tmp.c_str(), path) != 0) {
    std::remove(tmp.c_str());
    set_last_error("Fast-Run cache %s: cannot replace it", path);
    return GK_ERR_IO;
  }
  return GK_OK;
}

void load_env_once_locked() {
  if (g_env_loaded) return;
  g_env_loaded = true;
  const std::string path = env_string("GEMMKIT_FASTRUN_CACHE");
  if (!path.empty() && access(path.c_str(), F_OK) == 0 && load_locked(path.c_str()) != GK_OK && verbose())
    std::fprintf(stderr, "gemmkit: %s\n", gk_last_error());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

std::string machine_key() {
  const CpuInfo& c = cpu();
  int count = 0;
  const KernelInfo* table = arch_kernels(&count);
  std::string kernels;
  // The kernel set: every entry's name and its pointwise kernels (pixels x channels, "+1"
  // with a one-pixel variant, "+4" with a four-pixel one, "-" skipping a last block), so
  // a cache timed on another kernel set is not used.
  for (int i = 0; i < count; ++i) {
    kernels += std::string(i ? "," : "") + table[i].name;
    for (const KernelInfo::Pointwise& pw : table[i].pointwise)
      if (pw.fn) kernels += ":" + std::to_string(pw.mr) + "x" + std::to_string(pw.nr) + (pw.one_row ? "+1" : "") +
                    (pw.four_rows ? "+4" : "") + (pw.skips_last_block ? "-" : "");
  }
  // The algorithm list: a name may change what it runs when others join (gemm_1x1 ran the
  // pointwise kernels in NCHW8 before pointwise_nchw8 was listed).
  std::string algos;
  for (const Algorithm* a : algorithms()) algos += std::string(algos.empty() ? "" : ",") + a->name();
  std::ostringstream k;
  k << "cpu=" << sanitize(c.model) << ";kernel=" << active_config().kernel->name << ";kernels=" << kernels
    << ";algos=" << algos << ";l1=" << c.l1d_bytes << ";l2=" << c.l2_bytes << ";l3=" << c.l3_bytes
    << ";threads=" << gk_get_num_threads() << ";version=" << GEMMKIT_VERSION_STRING;
  return k.str();
}

std::string descriptor_key(const gk_conv_desc& d) {
  std::ostringstream k;
  k << "n=" << d.batch << ";c=" << d.in_channels << ";h=" << d.in_height << ";w=" << d.in_width
    << ";k=" << d.out_channels << ";r=" << d.kernel_h << ";s=" << d.kernel_w << ";sh=" << d.stride_h
    << ";sw=" << d.stride_w << ";pt=" << d.pad_top << ";pl=" << d.pad_left << ";pb=" << d.pad_bottom
    << ";pr=" << d.pad_right << ";dh=" << d.dilation_h << ";dw=" << d.dilation_w << ";g=" << d.groups
    << ";layout=" << raw_enum(d.layout) << ";act=" << raw_enum(d.activation) << ";flags=" << d.flags;
  return k.str();
}

bool cached_choice(const Shape& s, std::string* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  load_env_once_locked();
  auto it = g_cache.find(machine_key() + "|" + descriptor_key(s.d));
  if (it == g_cache.end()) return false;
  *name = it->second;
  return true;
}

double profile_budget_seconds() {
  return static_cast<double>(std::max<int64_t>(1, env_int("GEMMKIT_FASTRUN_BUDGET_MS", 250))) / 1000.0;
}

Choice profile_and_choose(const Shape& s, const std::vector<Candidate>& cands, const float* weights,
                          const float* bias) {
  std::lock_guard<std::mutex> lock(g_mutex);
  load_env_once_locked();
  // A scratch input with the statistics of a real one (post-ReLU), the plan's real weights.
  const gk_conv_desc& d = s.d;
  // In the plan's layout: candidates are timed as gk_conv_run runs them, layout copies
  // included for those that do not run it natively.
  std::vector<float> input(static_cast<size_t>(gk_tensor_size(s.in_layout, d.batch, d.in_channels, d.in_height, d.in_width)));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  for (float& x : input) x = dist(rng);
  // The plan's own scratch output, never the caller's: with GK_CONV_FLAG_ADD_TO_OUTPUT (in
  // s, so every candidate runs it, its layout copy included) each run adds to it, a sum
  // that grows from zero by a layer's outputs per run, far from overflowing.
  std::vector<float> output(static_cast<size_t>(gk_tensor_size(d.layout, d.batch, d.out_channels, s.oh, s.ow)));

  double virtual_clock = 0;
  const bool fake = static_cast<bool>(g_fake_durations);
  auto now = [&] {
    return fake ? virtual_clock
                : std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  auto run = [&](const Candidate& c, const Prepared& p) {
    if (fake) {
      virtual_clock += g_fake_durations(c.name);
    } else {
      // Out of memory: plan creation reports it (guard_c_boundary).
      if (run_with_cached_workspace(s, p, input.data(), output.data(), "gk_conv_plan_create") != GK_OK)
        throw std::bad_alloc();
    }
  };
  // The median over 3 samples of `reps` runs each, per run; stops early once a sample is
  // over `cut` (> 0), a candidate clearly slower than the best so far.
  auto time_samples = [&](const Candidate& c, const Prepared& p, int reps, double cut) {
    std::vector<double> times;
    for (int r = 0; r < 3; ++r) {
      const double t0 = now();
      for (int k = 0; k < reps; ++k) run(c, p);
      times.push_back((now() - t0) / reps);
      if (cut > 0 && times.back() > cut) break;
    }
    return median(times);
  };
  const double budget = profile_budget_seconds(), start = now();
  Choice best{cands.front(), nullptr};
  std::unique_ptr<Prepared> heuristic;  // AUTO's choice, once a challenger has beaten it
  double best_time = 0;
  int best_reps = 1;
  std::string report;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (i > 0 && now() - start > budget) {
      report += "; budget spent before " + cands[i].name;
      break;
    }
    std::unique_ptr<Prepared> p = prepare_in_layout(*cands[i].algorithm, s, weights, bias, cands[i].tuning);
    if (!p) continue;
    const double warm_start = now();
    run(cands[i], *p);  // warm-up: caches, page faults, the thread pool
    const double warm = now() - warm_start;
    // A warm-up far slower than the best so far ends the candidate there: its timed
    // samples would only confirm it (im2col_gemm through layout copies on a layer the
    // engine reads in place, or a forced fallback far from its shapes).
    if (best.prepared && warm > kWarmupCutFactor * best_time) {
      char line[160];
      std::snprintf(line, sizeof line, "; %s cut after a %.3f ms warm-up", cands[i].name.c_str(), warm * 1e3);
      report += line;
      continue;
    }
    // A sample is a batch of runs lasting about kSampleSeconds: one run of a 20-100 us
    // layer is at the mercy of a single interruption (it made FASTRUN pick worse than AUTO
    // on MobileNetV2 at 2 threads).
    // (+ 0.999: a ceiling that tolerates rounding in the clock, 10.0000001 runs is 10.)
    const int reps = int(std::clamp(kSampleSeconds / std::max(warm, 1e-9) + 0.999, 1.0, 32.0));
    const double t = time_samples(cands[i], *p, reps, best.prepared ? 1.5 * best_time : 0);
    char line[160];
    std::snprintf(line, sizeof line, "; %s %.3f ms", cands[i].name.c_str(), t * 1e3);
    report += line;
    // A challenger must be clearly faster: on a noisy machine a single profile can crown a
    // candidate that is not, and AUTO's choice (timed first) is the safer default.
    if (!best.prepared || t < kSwitchMargin * best_time) {
      if (best.prepared && best.candidate.name == cands.front().name) heuristic = std::move(best.prepared);
      best = {cands[i], std::move(p)};
      best_time = t;
      best_reps = reps;
    }
  }
  // A challenger that beat AUTO's choice is timed against it once more, alternately: two
  // vCPUs are not always two cores, and a profile taken while the other was busy once
  // crowned a candidate twice as slow (ResNet's 512-channel 7x7 at 2 threads).
  if (heuristic) {
    double challenger = 0, incumbent = 0;
    for (int round = 0; round < 2; ++round) {
      incumbent += time_samples(cands.front(), *heuristic, best_reps, 0);
      challenger += time_samples(best.candidate, *best.prepared, best_reps, 0);
    }
    char line[160];
    std::snprintf(line, sizeof line, "; confirmation %s %.3f ms vs %s %.3f ms", best.candidate.name.c_str(),
                  challenger / 2 * 1e3, cands.front().name.c_str(), incumbent / 2 * 1e3);
    report += line;
    if (!(challenger < kSwitchMargin * incumbent)) best = {cands.front(), std::move(heuristic)};
  }
  if (verbose())
    std::fprintf(stderr, "gemmkit: Fast-Run %s: chose %s%s\n", descriptor_key(d).c_str(),
                 best.candidate.name.c_str(), report.c_str());
  if (best.prepared) {
    g_cache[machine_key() + "|" + descriptor_key(d)] = best.candidate.name;
    const std::string path = env_string("GEMMKIT_FASTRUN_CACHE");
    if (!path.empty() && save_locked(path.c_str()) != GK_OK && verbose())
      std::fprintf(stderr, "gemmkit: %s\n", gk_last_error());
  }
  return best;
}

void set_fake_durations(std::function<double(const std::string&)> seconds_per_run) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_fake_durations = std::move(seconds_per_run);
}

void clear_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cache.clear();
  g_env_loaded = false;  // GEMMKIT_FASTRUN_CACHE is read again at the next use
}

}  // namespace conv
}  // namespace gk

extern "C" {

__attribute__((visibility("default"))) gk_status gk_fastrun_cache_load(const char* path) {
  return gk::guard_c_boundary("gk_fastrun_cache_load", [&] {
    if (!path) {
      gk::set_last_error("gk_fastrun_cache_load: NULL path");
      return GK_ERR_INVALID_ARGUMENT;
    }
    std::lock_guard<std::mutex> lock(gk::conv::g_mutex);
    return gk::conv::load_locked(path);
  });
}

__attribute__((visibility("default"))) gk_status gk_fastrun_cache_save(const char* path) {
  return gk::guard_c_boundary("gk_fastrun_cache_save", [&] {
    if (!path) {
      gk::set_last_error("gk_fastrun_cache_save: NULL path");
      return GK_ERR_INVALID_ARGUMENT;
    }
    std::lock_guard<std::mutex> lock(gk::conv::g_mutex);
    return gk::conv::save_locked(path);
  });
}
}
