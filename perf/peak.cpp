// FMA peak: twelve independent accumulator chains (more than latency x pipes on any
// current core), nothing but FMAs in the loop, timed on each thread of a team.
#include "peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace gkbench {
namespace {

constexpr int64_t kIterations = 20'000'000;

__attribute__((target("avx2,fma"))) double fma_loop_256(int64_t iters) {
  __m256 acc[12];
  const __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i));
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12  // the accumulators stay in registers at any -O level (-O2 kept them in memory: 40%)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  return double(_mm256_cvtss_f32(s)) * 1e-30 + double(iters) * 12 * 16;
}

__attribute__((target("avx512f"))) double fma_loop_512(int64_t iters) {
  __m512 acc[12];
  const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12  // the accumulators stay in registers at any -O level (-O2 kept them in memory: 40%)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  return double(lanes[0]) * 1e-30 + double(iters) * 12 * 32;
}

}  // namespace

// GFLOP/s of one run of `iterations` on each of `threads` threads (0: the ISA is missing).
// Each thread times its own loop and the rates add up: the peak of `threads` cores. (One
// clock around the team measured the 2-thread peak at the 1-thread one when this VM ran
// its two vCPUs one after the other, and the table then showed 150% of "peak".)
static double fma_run_gflops(int vector_bits, int threads, int64_t iterations) {
  __builtin_cpu_init();
  if (vector_bits == 512 && !__builtin_cpu_supports("avx512f")) return 0.0;
  if (vector_bits == 256 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return 0.0;
  double gflops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : gflops)
  {
    const auto t0 = std::chrono::steady_clock::now();
    const double flops = vector_bits == 512 ? fma_loop_512(iterations) : fma_loop_256(iterations);
    gflops += flops / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e-9;
  }
  return gflops;
}

double measure_fma_peak_gflops(int vector_bits, int threads) {
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep)  // best of three: the loop has no noise of its own
    best = std::max(best, fma_run_gflops(vector_bits, threads, kIterations));
  return best;
}

double probe_fma_capacity_gflops(int threads) {
  // 1/10 of the peak's loop with the widest vectors (never slower per FLOP than the narrower
  // ones on a CPU that has both): 24 M FMAs per thread, about 4 ms on a current core.
  constexpr int64_t kProbeIterations = kIterations / 10;
  const double wide = fma_run_gflops(512, threads, kProbeIterations);
  return wide > 0 ? wide : fma_run_gflops(256, threads, kProbeIterations);
}

}  // namespace gkbench
