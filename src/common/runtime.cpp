#include "common/runtime.h"

#include <cpuinfo.h>
#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "gemmkit.h"

namespace gk {

// ---------------------------------------------------------------- CPU description

static CpuInfo detect_cpu() {
  CpuInfo info;
  if (!cpuinfo_initialize()) return info;  // unknown CPU: portable kernel, default blocking
  if (const cpuinfo_package* pkg = cpuinfo_get_package(0)) info.model = pkg->name;
  // cpuinfo reports a made-up or missing hierarchy under emulation; callers treat 0 (and
  // implausible sizes) as "unknown" and fall back to the kernel's defaults.
  if (cpuinfo_get_l1d_caches_count() > 0) info.l1d_bytes = cpuinfo_get_l1d_cache(0)->size;
  if (cpuinfo_get_l2_caches_count() > 0) info.l2_bytes = cpuinfo_get_l2_cache(0)->size;
  if (cpuinfo_get_l3_caches_count() > 0) info.l3_bytes = cpuinfo_get_l3_cache(0)->size;
  info.cores = static_cast<int>(cpuinfo_get_cores_count());
  if (info.cores < 1) info.cores = 1;
#if defined(__x86_64__)
  info.x86_avx2_fma = cpuinfo_has_x86_avx2() && cpuinfo_has_x86_fma3();
  info.x86_avx512f = cpuinfo_has_x86_avx512f();
#elif defined(__aarch64__)
  info.arm_neon = true;  // Advanced SIMD is mandatory in AArch64
#endif
  if (info.model.empty()) info.model = "unknown";
  return info;
}

const CpuInfo& cpu() {
  static const CpuInfo info = detect_cpu();
  return info;
}

// ---------------------------------------------------------------- environment

int64_t env_int(const char* name, int64_t fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  return (end && *end == '\0') ? v : fallback;
}

std::string env_string(const char* name) {
  const char* s = std::getenv(name);
  return s ? std::string(s) : std::string();
}

bool verbose() {
  static const bool on = env_int("GEMMKIT_VERBOSE", 0) != 0;
  return on;
}

// ---------------------------------------------------------------- errors

static thread_local char t_last_error[512];

void set_last_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
  va_end(ap);
  if (verbose()) std::fprintf(stderr, "gemmkit: %s\n", t_last_error);
}

void clear_last_error() { t_last_error[0] = '\0'; }

// ---------------------------------------------------------------- scratch buffers

namespace {
struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
struct ScratchBuffer {
  std::unique_ptr<float, AlignedFree> data;
  int64_t capacity = 0;
};
thread_local ScratchBuffer t_scratch[static_cast<int>(ScratchSlot::Count)];
}  // namespace

float* scratch(ScratchSlot slot, int64_t floats) {
  ScratchBuffer& buf = t_scratch[static_cast<int>(slot)];
  if (floats <= buf.capacity) return buf.data.get();
  // Grow geometrically so a sequence of slightly larger calls does not reallocate each time.
  int64_t want = floats > 2 * buf.capacity ? floats : 2 * buf.capacity;
  size_t bytes = (static_cast<size_t>(want) * sizeof(float) + 63) & ~size_t(63);
  void* p = nullptr;
  if (posix_memalign(&p, 64, bytes) != 0) return nullptr;
  buf.data.reset(static_cast<float*>(p));
  buf.capacity = want;
  return buf.data.get();
}

void out_of_memory(const char* what, int64_t floats) {
  std::fprintf(stderr, "gemmkit: cannot allocate %lld bytes for %s\n", static_cast<long long>(floats) * 4, what);
  std::abort();
}

// ---------------------------------------------------------------- threads and fork safety

namespace {
std::atomic<int> g_max_threads{0};  // 0: not yet resolved from the environment
std::atomic<bool> g_parallel_used{false};
std::atomic<bool> g_child_serial{false};
std::atomic<bool> g_parent_threaded{false};

int default_threads() {
  int64_t n = env_int("GEMMKIT_NUM_THREADS", 0);
  if (n < 1) n = env_int("OMP_NUM_THREADS", 0);
  if (n < 1) n = omp_get_num_procs();
  return n < 1 ? 1 : static_cast<int>(n);
}

// The number of threads of this process, from /proc (read only around fork()).
int process_thread_count() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 1;
  char line[256];
  int threads = 1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "Threads:", 8) == 0) {
      threads = std::atoi(line + 8);
      break;
    }
  }
  std::fclose(f);
  return threads;
}

// libgomp keeps its worker pool across fork() without the threads: a child whose parent
// ever started OpenMP workers hangs at its first parallel region. We cannot ask libgomp
// whether its pool exists, so the child runs serially when the parent either opened a
// parallel region through us or had any other thread at fork time.
void before_fork() { g_parent_threaded = process_thread_count() > 1; }
void in_child_after_fork() {
  if (g_parallel_used.load() || g_parent_threaded.load()) g_child_serial = true;
}

struct ForkGuardRegistration {
  ForkGuardRegistration() { pthread_atfork(before_fork, nullptr, in_child_after_fork); }
} g_fork_guard_registration;
}  // namespace

int max_threads() {
  int n = g_max_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    g_max_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_max_threads(int n) { g_max_threads.store(n < 1 ? default_threads() : n); }

bool in_forked_child_serial_mode() { return g_child_serial.load(std::memory_order_relaxed); }

void note_parallel_region() {
  if (!g_parallel_used.load(std::memory_order_relaxed)) g_parallel_used = true;
}

int threads_for(double flops, double flops_per_extra_thread) {
  int n = max_threads();
  if (n <= 1 || omp_in_parallel() || in_forked_child_serial_mode()) return 1;
  double useful = flops / flops_per_extra_thread;
  if (useful < n) n = useful < 1 ? 1 : static_cast<int>(useful);
  return n;
}

}  // namespace gk

// ---------------------------------------------------------------- C API

extern "C" {

__attribute__((visibility("default"))) void gk_set_num_threads(int n) { gk::set_max_threads(n); }

__attribute__((visibility("default"))) int gk_get_num_threads(void) {
  return gk::in_forked_child_serial_mode() ? 1 : gk::max_threads();
}

__attribute__((visibility("default"))) const char* gk_status_string(gk_status status) {
  int s;  // read as an int: a C caller may pass any value, which the enum type may not hold
  std::memcpy(&s, &status, sizeof s);
  switch (s) {
    case GK_OK: return "success";
    case GK_ERR_INVALID_ARGUMENT: return "invalid argument";
    case GK_ERR_UNSUPPORTED: return "unsupported";
    case GK_ERR_OUT_OF_MEMORY: return "out of memory";
    case GK_ERR_IO: return "I/O error";
    case GK_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

__attribute__((visibility("default"))) const char* gk_last_error(void) {
  return gk::t_last_error;
}
}
