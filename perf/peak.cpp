// FMA peak: twelve independent accumulator chains (more than latency x pipes on any
// current core), nothing but FMAs in the loop, timed on each thread of a team.
#include "peak.h"

#include <immintrin.h>
#include <omp.h>

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

double measure_fma_peak_gflops(int vector_bits, int threads) {
  __builtin_cpu_init();
  if (vector_bits == 512 && !__builtin_cpu_supports("avx512f")) return 0.0;
  if (vector_bits == 256 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return 0.0;
  // Each thread times its own loop and the rates add up: the peak of `threads` cores. (One
  // clock around the team measured the 2-thread peak at the 1-thread one when this VM ran
  // its two vCPUs one after the other, and the table then showed 150% of "peak".)
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {  // best of three: the loop has no noise of its own
    double gflops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : gflops)
    {
      const auto t0 = std::chrono::steady_clock::now();
      const double flops = vector_bits == 512 ? fma_loop_512(kIterations) : fma_loop_256(kIterations);
      gflops += flops / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e-9;
    }
    if (gflops > best) best = gflops;
  }
  return best;
}

}  // namespace gkbench
