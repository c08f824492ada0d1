#include "common/runtime.h"

#include <cpuinfo.h>
#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>

#include "common/c_boundary.h"
#include "gemmkit.h"

namespace gk {

// ---------------------------------------------------------------- CPU description

#if defined(__x86_64__)
// Some hypervisors hide the cache-topology leaves cpuinfo reads (4, 0x8000001D) but keep
// the legacy AMD ones: 0x80000005 ECX[31:24] = L1d KiB, 0x80000006 ECX[31:16] = L2 KiB,
// EDX[31:18] = L3 in 512 KiB units. Intel fills only the L2 field; a zero stays unknown.
static void fill_caches_from_legacy_cpuid(CpuInfo& info) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d)) return;
  const unsigned max_ext = a;
  if (info.l1d_bytes == 0 && max_ext >= 0x80000005 && __get_cpuid(0x80000005, &a, &b, &c, &d))
    info.l1d_bytes = int64_t{c >> 24} << 10;
  if (max_ext >= 0x80000006 && __get_cpuid(0x80000006, &a, &b, &c, &d)) {
    if (info.l2_bytes == 0) info.l2_bytes = int64_t{c >> 16} << 10;
    if (info.l3_bytes == 0) info.l3_bytes = int64_t{d >> 18} << 19;
  }
}

// Entries of the second-level data TLB for 4 KiB pages: AMD's 0x80000006 EBX[27:16];
// Intel's leaf 0x18, the largest level-2 data, unified or load-only TLB with 4 KiB pages
// (ways x sets).
// Hypervisors often zero both: then the vendor's smallest of its recent cores (Intel's
// Golden Cove 2048, AMD's Zen 4 3072; Zen 5's 4096 does not fit the 12-bit field).
static void fill_l2_tlb_from_cpuid(CpuInfo& info) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000006 && __get_cpuid(0x80000006, &a, &b, &c, &d))
    info.l2_tlb_entries = (b >> 16) & 0xfff;
  if (info.l2_tlb_entries || !__get_cpuid(0, &a, &b, &c, &d)) return;
  const unsigned max_leaf = a;
  const bool intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "GenuineIntel"
  const bool amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;    // "AuthenticAMD"
  if (max_leaf >= 0x18) {
    __cpuid_count(0x18, 0, a, b, c, d);
    for (unsigned sub = 0, last = a; sub <= last && sub < 64; ++sub) {
      __cpuid_count(0x18, sub, a, b, c, d);
      const unsigned type = d & 31, level = (d >> 5) & 7;
      const bool data = type == 1 || type == 3 || type == 4;  // data, unified, load-only
      if (data && level == 2 && (b & 1)) info.l2_tlb_entries = std::max(info.l2_tlb_entries, int64_t{b >> 16} * c);
    }
  }
  if (!info.l2_tlb_entries) info.l2_tlb_entries = intel ? 2048 : amd ? 3072 : 0;
}
#endif

static CpuInfo detect_cpu() {
  CpuInfo info;
  if (!cpuinfo_initialize()) return info;  // unknown CPU: portable kernel, default blocking
  if (const cpuinfo_package* pkg = cpuinfo_get_package(0)) {
    // The name may need heap memory; without it the CPU stays "unknown" (the name only
    // describes it): the first GEMM of a process short of memory must still run.
    try {
      info.model = pkg->name;
    } catch (const std::bad_alloc&) {
    }
  }
  // cpuinfo reports a made-up or missing hierarchy under emulation: caches() judges them.
  if (cpuinfo_get_l1d_caches_count() > 0) info.l1d_bytes = cpuinfo_get_l1d_cache(0)->size;
  if (cpuinfo_get_l2_caches_count() > 0) info.l2_bytes = cpuinfo_get_l2_cache(0)->size;
  if (cpuinfo_get_l3_caches_count() > 0) info.l3_bytes = cpuinfo_get_l3_cache(0)->size;
#if defined(__x86_64__)
  fill_caches_from_legacy_cpuid(info);
  fill_l2_tlb_from_cpuid(info);
#endif
  info.cores = static_cast<int>(cpuinfo_get_cores_count());
  if (info.cores < 1) info.cores = 1;
#if defined(__x86_64__)
  info.x86_avx2_fma = cpuinfo_has_x86_avx2() && cpuinfo_has_x86_fma3();
  info.x86_avx512f = cpuinfo_has_x86_avx512f();
  info.x86_avx512vl = cpuinfo_has_x86_avx512vl();
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

namespace {
struct CacheLevel {
  int64_t bytes;
  bool detected;
};
CacheLevel plausible_or(int64_t reported, int64_t lo, int64_t hi, int64_t fallback) {
  const bool ok = reported >= lo && reported <= hi;
  return {ok ? reported : fallback, ok};
}
CacheSizes detect_caches() {
  const CpuInfo& c = cpu();
  const CacheLevel l1d = plausible_or(c.l1d_bytes, 16 << 10, 1 << 20, 32 << 10);
  const CacheLevel l2 = plausible_or(c.l2_bytes, 64 << 10, 64 << 20, 256 << 10);
  const CacheLevel l3 = plausible_or(c.l3_bytes, 1 << 20, int64_t{1} << 30, 8 << 20);
  // Unknown (no x86 vendor's figure): 1536 entries.
  const CacheLevel tlb = plausible_or(c.l2_tlb_entries << 12, 256 << 12, int64_t{1} << 30, 1536 << 12);
  return {l1d.bytes, l2.bytes, l3.bytes, tlb.bytes, l1d.detected, l2.detected, l3.detected};
}
}  // namespace

const CacheSizes& caches() {
  static const CacheSizes sizes = detect_caches();
  return sizes;
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

gk_status status_of_current_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    set_last_error("%s: out of memory", function);
    return GK_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error("%s: internal error: %s", function, e.what());
    return GK_ERR_INTERNAL;
  } catch (...) {
    set_last_error("%s: internal error (unknown exception)", function);
    return GK_ERR_INTERNAL;
  }
}

// ---------------------------------------------------------------- scratch buffers

namespace {
// Plain data, so that a thread's first use registers no TLS destructor: glibc allocates
// for that registration and aborts the process when it cannot ("failed to register TLS
// destructor"). The buffers are freed at thread exit through a pthread key instead, whose
// value lives in the thread descriptor (no allocation for the process's first keys).
struct ScratchBuffer {
  float* data;
  int64_t capacity;
};
thread_local ScratchBuffer t_scratch[static_cast<int>(ScratchSlot::Count)];
thread_local bool t_scratch_registered;

std::atomic<int64_t> g_scratch_growth_limit{-1};

void free_scratch(ScratchBuffer* buffers) {
  for (int s = 0; s < static_cast<int>(ScratchSlot::Count); ++s) {
    std::free(buffers[s].data);
    buffers[s] = {nullptr, 0};
  }
}

void free_scratch_at_thread_exit(void* buffers) { free_scratch(static_cast<ScratchBuffer*>(buffers)); }

// The key whose destructor frees a thread's buffers, made when the library is loaded.
struct ScratchKey {
  pthread_key_t key;
  bool made;
  ScratchKey() : made(pthread_key_create(&key, free_scratch_at_thread_exit) == 0) {}
  // Unloaded (dlclose), the library leaves no destructor behind for threads exiting later.
  ~ScratchKey() {
    if (made) pthread_key_delete(key);
    made = false;
  }
} g_scratch_key;

// Arranges for this thread's buffers to be freed when it exits; false when that cannot be
// arranged (the caller then takes no buffer, rather than leak it).
bool scratch_freed_at_exit() {
  if (t_scratch_registered) return true;
  if (!g_scratch_key.made || pthread_setspecific(g_scratch_key.key, t_scratch) != 0) return false;
  t_scratch_registered = true;
  return true;
}

// 64-byte aligned memory for `floats` floats, or nullptr.
float* allocate_floats(int64_t floats) {
  const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) & ~size_t(63);
  void* p = nullptr;
  return posix_memalign(&p, 64, bytes) == 0 ? static_cast<float*>(p) : nullptr;
}
}  // namespace

float* scratch(ScratchSlot slot, int64_t floats) {
  ScratchBuffer& buf = t_scratch[static_cast<int>(slot)];
  if (floats <= buf.capacity) return buf.data;
  const int64_t limit = g_scratch_growth_limit.load(std::memory_order_relaxed);
  if (limit >= 0 && floats * static_cast<int64_t>(sizeof(float)) > limit) return nullptr;
  if (!scratch_freed_at_exit()) return nullptr;
  // The old contents need not survive: freed first, so that old and new never coexist
  // when memory is short. Grown geometrically so a sequence of slightly larger calls does
  // not reallocate each time; when that much cannot be had, exactly what was asked.
  const int64_t old_capacity = buf.capacity;
  std::free(buf.data);
  buf = {nullptr, 0};
  int64_t size = floats > 2 * old_capacity ? floats : 2 * old_capacity;
  float* p = allocate_floats(size);
  if (!p && size > floats) p = allocate_floats(size = floats);
  if (!p) return nullptr;
  buf = {p, size};
  return p;
}

void release_scratch() { free_scratch(t_scratch); }

void set_scratch_growth_limit(int64_t bytes) { g_scratch_growth_limit.store(bytes); }

namespace {
std::atomic<int64_t> g_no_heap_fallbacks{0};
std::atomic<bool> g_no_heap_said{false};
thread_local int64_t t_no_heap_fallbacks = 0;
}  // namespace

void note_no_heap_fallback(const char* what, int64_t floats) {
  g_no_heap_fallbacks.fetch_add(1, std::memory_order_relaxed);
  ++t_no_heap_fallbacks;
  if (!verbose() || g_no_heap_said.exchange(true)) return;
  char cause[160];
  if (floats > 0) {
    std::snprintf(cause, sizeof cause, "cannot allocate %lld bytes for %s", static_cast<long long>(floats) * 4, what);
  } else {
    std::snprintf(cause, sizeof cause, "%s", what);
  }
  std::fprintf(stderr, "gemmkit: %s: GEMM runs on its no-heap path (slower) while memory is short (said once)\n",
               cause);
}

int64_t no_heap_fallbacks() { return g_no_heap_fallbacks.load(std::memory_order_relaxed); }
int64_t thread_no_heap_fallbacks() { return t_no_heap_fallbacks; }

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

namespace {
thread_local int t_local_threads = 0;  // 0: the process setting (gk_set_num_threads_local)
}

int max_threads() {
  if (t_local_threads > 0) return t_local_threads;
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
  // Under two threads' worth of work the answer is 1 whatever the setting: a tiny product
  // skips the checks (omp_in_parallel is a call into libgomp).
  if (flops < 2.0 * flops_per_extra_thread) return 1;
  int n = max_threads();
  if (n <= 1 || omp_in_parallel() || in_forked_child_serial_mode()) return 1;
  double useful = flops / flops_per_extra_thread;
  if (useful < n) n = useful < 1 ? 1 : static_cast<int>(useful);
  return n;
}

}  // namespace gk

// ---------------------------------------------------------------- C API

extern "C" {

__attribute__((visibility("default"))) void gk_set_num_threads(int n) {
  gk::guard_c_boundary("gk_set_num_threads", [&] {
    gk::set_max_threads(n);
    return GK_OK;
  });
}

__attribute__((visibility("default"))) int gk_set_num_threads_local(int n) {
  const int previous = gk::t_local_threads;
  gk::t_local_threads = n < 1 ? 0 : n;
  return previous;
}

__attribute__((visibility("default"))) int gk_get_num_threads(void) {
  int n = 1;
  gk::guard_c_boundary("gk_get_num_threads", [&] {
    n = gk::in_forked_child_serial_mode() ? 1 : gk::max_threads();
    return GK_OK;
  });
  return n;
}

// gk_status_string and gk_last_error call nothing that can throw: no guard needed.

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
