// AVX2 vector pieces shared by the tiny and micro paths: the first n lanes as a mask,
// stores of the first n lanes, the sum of 8 lanes.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace gk {

#define GK_LANES_TARGET __attribute__((target("avx2,fma"), always_inline)) inline

// Lanes [0, n) of a vector, n in 1..8.
GK_LANES_TARGET __m256i lane_mask(int64_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes);
}

// The first n (1..8) lanes of v to c, without `vmaskmovps`: a masked store is microcoded
// on AMD cores (a 560x6x5 GEMM spent most of its time in its four per block).
GK_LANES_TARGET void store_first(float* c, __m256 v, int64_t n) {
  if (n == 8) return _mm256_storeu_ps(c, v);
  __m128 part = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(c, part);
    part = _mm256_extractf128_ps(v, 1);
    c += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(c), part);
    part = _mm_movehl_ps(part, part);
    c += 2;
  }
  if (n & 1) _mm_store_ss(c, part);
}

// The sum of v's 8 lanes, by halving.
GK_LANES_TARGET float sum8(__m256 v) {
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

#undef GK_LANES_TARGET

}  // namespace gk
#endif
