// Process-wide runtime services: CPU description, environment settings, errors, scratch
// buffers and the thread policy. Everything above (arch, gemm, conv) depends on this.
#pragma once
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gk {

// What the CPU offers, detected once (cpuinfo). Cache sizes as reported (0: none); the
// blocking reads caches().
struct CpuInfo {
  std::string model;  // package name as cpuinfo reports it
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  int64_t l2_tlb_entries = 0;  // second-level data TLB, 4 KiB pages (0: unknown)
  int cores = 1;
  bool x86_avx2_fma = false;
  bool x86_avx512f = false;
  bool x86_avx512vl = false;  // AVX-512's 8-float (ymm) forms and registers 16-31 for them
  bool arm_neon = false;
};
const CpuInfo& cpu();
// The cache sizes blocking and thresholds are derived from: cpuinfo's where plausible, else
// a typical size (cpuinfo reports nothing, or a made-up hierarchy, under VMs and qemu; a
// smaller guess only costs speed, a larger one cache misses). The one place that rule lives.
struct CacheSizes {
  int64_t l1d, l2, l3;  // bytes
  int64_t tlb_reach;      // bytes the second-level data TLB maps in 4 KiB pages (CPUID's, or the
                          // vendor's smallest recent core's; never detected under qemu)
  bool l1d_detected, l2_detected, l3_detected;
};
const CacheSizes& caches();

// Integer from the environment, or `fallback` when unset or not a number.
int64_t env_int(const char* name, int64_t fallback);
// String from the environment, or "" when unset.
std::string env_string(const char* name);
bool verbose();  // GEMMKIT_VERBOSE=1

// Thread-local last error message (gk_last_error).
void set_last_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void clear_last_error();

// Per-thread scratch buffers, 64-byte aligned, grown on demand and reused across calls,
// so the hot path does not allocate (and does not page-fault fresh mmap'ed memory).
// Each slot is an independent buffer; the contents do not survive another call on the
// same slot. Returns nullptr if memory is exhausted.
// Slots used within one call must differ (a slot may be reallocated by the next request).
enum class ScratchSlot {
  PackedA, PackedB, Edge,           // GEMM driver
  ConvWork,                         // gk_conv_run's workspace: every thread's part
  Count
};
float* scratch(ScratchSlot slot, int64_t floats);
// Frees this thread's scratch buffers (the next request allocates again).
void release_scratch();
// Tests: scratch() fails every request that would grow a buffer past `bytes` (-1: no
// limit), so the paths that run without it can be reached at will.
void set_scratch_growth_limit(int64_t bytes);
// A GEMM ran on its no-heap path because `what` (`floats` floats) could not be had: counted
// (no_heap_fallbacks, for tests), and said once per process under GEMMKIT_VERBOSE=1.
void note_no_heap_fallback(const char* what, int64_t floats);
int64_t no_heap_fallbacks();
int64_t thread_no_heap_fallbacks();  // the calling thread's

// Thread policy. max_threads(): the calling thread's local setting, else the process's.
// threads_for(work): how many threads a call with `flops` floating-point operations
// should use right now, respecting nesting (1 inside a parallel region) and fork safety
// (1 in a child of a threaded parent).
int max_threads();
void set_max_threads(int n);
// Each extra thread needs ~0.8 MFLOP of GEMM work to pay for waking it and splitting the
// packing (Zen 3, 2 threads: 64^3 runs 63 GFLOP/s on one thread and 55 on two; 96^3
// runs 61 on one and 83 on two; 128^3 63 and 101). Slower work passes its own figure.
constexpr double kGemmFlopsPerExtraThread = 0.8e6;
int threads_for(double flops, double flops_per_extra_thread = kGemmFlopsPerExtraThread);
// Called by every parallel region we open, for the fork-safety rule.
void note_parallel_region();
bool in_forked_child_serial_mode();

// Every parallel region of the library: body() on `threads` OpenMP threads (inside it,
// omp_get_thread_num() / omp_get_num_threads() say which), or called directly when
// threads <= 1. A `#pragma omp parallel if (false)` region still builds a one-thread team
// in libgomp: about 0.5 us and a futex system call per region here, most of a 9x1x6 GEMV.
// Worksharing (`omp for`) and barriers inside body() then bind to the calling thread
// alone, except inside a user's parallel region, where they would bind to the user's
// team: there body() gets a team of its own, as before.
template <typename Body>
void parallel_region(int threads, const Body& body) {
  if (threads <= 1 && !omp_in_parallel()) {
    body();
    return;
  }
  if (threads > 1) note_parallel_region();
#pragma omp parallel num_threads(threads > 1 ? threads : 1)
  body();
}

// The same for a body that takes its part as arguments, body(tid, nt), and shares no work
// through OpenMP (no worksharing; a barrier only when nt > 1): with threads <= 1 it is
// body(0, 1) on the calling thread even inside a parallel region (a batch's team, a
// user's), where a nested one-thread team would cost a libgomp allocation per call.
template <typename Body>
void parallel_parts(int threads, const Body& body) {
  if (threads <= 1) {
    body(0, 1);
    return;
  }
  note_parallel_region();
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace gk
