// GEMMs computed straight from the operands, nothing packed: small
// products (up to about 96^3 multiply-adds, any K, one thread), C of one row block with
// B's rows contiguous at any size, and products of at most 24 columns at any M (the
// tiny-narrow path; choose_gemm_path in path.cpp says when).
//
// On the no-pack path a 5x5x5 GEMM took 305 ns against OpenBLAS's 190, and 13x17x19 ran
// at 0.6x: packing the A panel, copying the partial B panel, the local tile of every
// partial C tile and the column-panel list cost more than the multiply-adds. Here each
// block of up to 4 rows x 24 columns of C is computed straight from the operands: B's rows
// read in place as up to three vectors (the last one a masked load, so nothing past the
// matrix is read), A's elements broadcast from wherever its strides put them, and C's
// partial vector stored in 4-, 2- and 1-float pieces (read, masked, only when beta != 0).
// Against the no-pack path, same process, alternating, median GFLOP/s: 32^3 68.6 / 56.4,
// 48^3 58.9 / 53.5, 96^3 83.0 / 76.6, 8x8x512 70.8 / 47.8, 256x16x64 51.2 / 38.8, 32^3
// with A transposed 68.6 / 45.9; within noise at 64x128x64 (75.5 / 78.0). From 128^3 on it
// falls behind (B's rows leave L1). A B with strided columns (a transposed B) is first
// gathered into contiguous rows, once: 20^3 NT 0.89x OpenBLAS before (when that buffer
// cannot be had, the call runs on the no-heap path); or, with A's columns contiguous too,
// C^T = B^T A^T is computed into a staged buffer and added back transposed
// (tiny_transposed_pays). With AVX-512 active, blocks of up to
// 8 rows x 48 columns on 16-float vectors (Xeon model 207, 1 thread, against OpenBLAS on
// its SkylakeX kernels: 32^3 0.31 -> 0.85x, 64^3 0.45 -> 0.89x, 96^3 0.44 -> 0.79x on the
// AVX2 blocks before), and blocks of at most 8 columns on 8-float vectors. x86-64 only:
// elsewhere the no-pack and packed paths serve.
#include <algorithm>

#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/lanes_x86.h"
#include "gemm/partition.h"

namespace gk {

#if defined(__x86_64__)
namespace {

#define GK_TINY_TARGET __attribute__((target("avx2,fma"), always_inline)) inline

// One k step into one accumulator set; a and b move to the next.
template <int kRows, int kVectors>
GK_TINY_TARGET void k_step(__m256 (&acc)[kRows][kVectors], const float*& a, int64_t rs_a, int64_t cs_a,
                           const float*& b, int64_t rs_b, __m256i last) {
  __m256 row[kVectors];
  #pragma GCC unroll 4
  for (int v = 0; v + 1 < kVectors; ++v) row[v] = _mm256_loadu_ps(b + 8 * v);
  row[kVectors - 1] = _mm256_maskload_ps(b + 8 * (kVectors - 1), last);
  #pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    const __m256 x = _mm256_broadcast_ss(a + r * rs_a);
    #pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm256_fmadd_ps(x, row[v], acc[r][v]);
  }
  a += cs_a, b += rs_b;
}

// C[i0 .. i0 + kRows) x [j0 .. j0 + 8 * kVectors), the last vector's lanes limited by
// `last`: alpha * A B + beta * C. (The loops over rows and vectors are unrolled so the
// accumulators stay in registers; GCC -O2 left them on the stack.)
template <int kRows, int kVectors>
GK_TINY_TARGET void tiny_block(int64_t k, float alpha, const float* a, int64_t rs_a, int64_t cs_a,
                               const float* b, int64_t rs_b, float beta, float* c, int64_t rs_c,
                               __m256i last, int64_t last_lanes) {
  // One vector per row would make each accumulator a chain of dependent FMAs, a k step
  // per FMA latency: odd k steps go to a second set, added at the end.
  constexpr int kSets = kVectors == 1 ? 2 : 1;
  __m256 acc[kSets][kRows][kVectors];
  #pragma GCC unroll 2
  for (int s = 0; s < kSets; ++s)
    #pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r)
      #pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[s][r][v] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + kSets <= k; p += kSets) {
    #pragma GCC unroll 2
    for (int s = 0; s < kSets; ++s) k_step<kRows, kVectors>(acc[s], a, rs_a, cs_a, b, rs_b, last);
  }
  if (p < k) k_step<kRows, kVectors>(acc[0], a, rs_a, cs_a, b, rs_b, last);
  if (kSets == 2) {
    #pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) acc[0][r][0] = _mm256_add_ps(acc[0][r][0], acc[kSets - 1][r][0]);
  }
  const __m256 alpha_v = _mm256_set1_ps(alpha), beta_v = _mm256_set1_ps(beta);
  #pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r, c += rs_c) {
    #pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      __m256 out = _mm256_mul_ps(acc[0][r][v], alpha_v);
      const bool whole = v + 1 < kVectors;
      if (beta != 0.0f) {  // beta == 0: C is not read (it may hold NaN)
        const __m256 old = whole ? _mm256_loadu_ps(c + 8 * v) : _mm256_maskload_ps(c + 8 * v, last);
        out = _mm256_fmadd_ps(old, beta_v, out);
      }
      if (whole) {
        _mm256_storeu_ps(c + 8 * v, out);
      } else {
        store_first(c + 8 * v, out, last_lanes);
      }
    }
  }
}

// `blocks` blocks of kRows rows of C, one after the other (one call: its set-up was a
// fifth of a 256x7x5 product when each block was a call).
template <int kRows>
__attribute__((target("avx2,fma"))) void tiny_rows(int64_t blocks, int64_t n, int64_t k, float alpha, const float* a,
                                                   int64_t rs_a, int64_t cs_a, const float* b, int64_t rs_b,
                                                   float beta, float* c, int64_t rs_c) {
  // 3 vectors (12 accumulators at 4 rows) while more are left, but 16 where
  // takes_16_not_24.
  for (; blocks > 0; --blocks, a += kRows * rs_a, c += kRows * rs_c)
  for (int64_t j = 0, cols; j < n; j += cols) {
    const int64_t left = n - j;
    cols = takes_16_not_24(24, left) ? 16 : std::min<int64_t>(24, left);
    const int64_t vectors = (cols + 7) / 8, last_lanes = cols - 8 * (vectors - 1);
    const __m256i last = lane_mask(last_lanes);
    if (vectors == 3) {
      tiny_block<kRows, 3>(k, alpha, a, rs_a, cs_a, b + j, rs_b, beta, c + j, rs_c, last, last_lanes);
    } else if (vectors == 2) {
      tiny_block<kRows, 2>(k, alpha, a, rs_a, cs_a, b + j, rs_b, beta, c + j, rs_c, last, last_lanes);
    } else {
      tiny_block<kRows, 1>(k, alpha, a, rs_a, cs_a, b + j, rs_b, beta, c + j, rs_c, last, last_lanes);
    }
  }
}

// AVX-512: the same blocks with 16-float vectors, up to 8 rows x 48 columns (4 rows of 2
// vectors would be 8 accumulators, too few chains for two FMA ports of latency 4). Partial
// vectors are masked loads and stores, which AVX-512 runs at full speed (no microcoded
// vmaskmovps).
#define GK_TINY512_TARGET __attribute__((target("avx512f,avx2,fma"), always_inline)) inline

template <int kRows, int kVectors>
GK_TINY512_TARGET void k_step512(__m512 (&acc)[kRows][kVectors], const float*& a, int64_t rs_a, int64_t cs_a,
                                 const float*& b, int64_t rs_b, __mmask16 last) {
  __m512 row[kVectors];
  #pragma GCC unroll 4
  for (int v = 0; v + 1 < kVectors; ++v) row[v] = _mm512_loadu_ps(b + 16 * v);
  row[kVectors - 1] = _mm512_maskz_loadu_ps(last, b + 16 * (kVectors - 1));
  #pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    const __m512 x = _mm512_set1_ps(a[r * rs_a]);
    #pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(x, row[v], acc[r][v]);
  }
  a += cs_a, b += rs_b;
}

template <int kRows, int kVectors>
GK_TINY512_TARGET void tiny_block512(int64_t k, float alpha, const float* a, int64_t rs_a, int64_t cs_a,
                                     const float* b, int64_t rs_b, float beta, float* c, int64_t rs_c,
                                     __mmask16 last) {
  // As tiny_block, one vector a row takes two chains, but 8 rows are chains enough; and
  // with two sets at 8 rows GCC spilled in the whole of tiny_rows512<8>, whatever the
  // block (us, two sets / one: 96^3 18.4 / 11.4, 85x36x239 TT 21.6 / 14.9).
  constexpr int kSets = kVectors == 1 && kRows < 8 ? 2 : 1;
  __m512 acc[kSets][kRows][kVectors];
  #pragma GCC unroll 2
  for (int s = 0; s < kSets; ++s)
    #pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
      #pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[s][r][v] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + kSets <= k; p += kSets) {
    #pragma GCC unroll 2
    for (int s = 0; s < kSets; ++s) k_step512<kRows, kVectors>(acc[s], a, rs_a, cs_a, b, rs_b, last);
  }
  if (p < k) k_step512<kRows, kVectors>(acc[0], a, rs_a, cs_a, b, rs_b, last);
  if (kSets == 2) {
    #pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) acc[0][r][0] = _mm512_add_ps(acc[0][r][0], acc[kSets - 1][r][0]);
  }
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
  #pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r, c += rs_c) {
    #pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      const __mmask16 lanes = v + 1 < kVectors ? __mmask16(0xffff) : last;
      __m512 out = _mm512_mul_ps(acc[0][r][v], alpha_v);
      if (beta != 0.0f) out = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, c + 16 * v), beta_v, out);
      _mm512_mask_storeu_ps(c + 16 * v, lanes, out);
    }
  }
}

// A block of at most 8 columns on 8-float vectors: a 16-float vector leaves half of each
// FMA's lanes or more unused (us, 16- / 8-float: 256x7x5 0.63 / 0.48, 465x5x32 4.7 / 3.7,
// 200x5x59 3.2 / 2.6, 44x6x30 TT 0.54 / 0.43). Two chains, even and odd k steps, as
// tiny_block's one-vector blocks; B's row and C's lanes through AVX-512VL masks. VL also
// gives the 8-float vectors registers 16-31: without them GCC spilled the accumulators.
#define GK_TINY512VL_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma"), always_inline)) inline

template <int kRows>
GK_TINY512VL_TARGET void tiny_block512_half(int64_t k, float alpha, const float* a, int64_t rs_a, int64_t cs_a,
                                          const float* b, int64_t rs_b, float beta, float* c, int64_t rs_c,
                                          __mmask8 last) {
  __m256 even[kRows], odd[kRows];
  #pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) even[r] = odd[r] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 2 <= k; p += 2, a += 2 * cs_a, b += 2 * rs_b) {
    const __m256 b0 = _mm256_maskz_loadu_ps(last, b), b1 = _mm256_maskz_loadu_ps(last, b + rs_b);
    #pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      even[r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * rs_a]), b0, even[r]);
      odd[r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * rs_a + cs_a]), b1, odd[r]);
    }
  }
  if (p < k) {
    const __m256 b0 = _mm256_maskz_loadu_ps(last, b);
    #pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) even[r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * rs_a]), b0, even[r]);
  }
  const __m256 alpha_v = _mm256_set1_ps(alpha), beta_v = _mm256_set1_ps(beta);
  #pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r, c += rs_c) {
    __m256 out = _mm256_mul_ps(_mm256_add_ps(even[r], odd[r]), alpha_v);
    if (beta != 0.0f) out = _mm256_fmadd_ps(_mm256_maskz_loadu_ps(last, c), beta_v, out);
    _mm256_mask_storeu_ps(c, last, out);
  }
}

template <int kRows>
__attribute__((target("avx512f,avx2,fma"))) void tiny_rows512(int64_t blocks, int64_t n, int64_t k,
                                                                       float alpha, const float* a, int64_t rs_a,
                                                                       int64_t cs_a, const float* b, int64_t rs_b,
                                                                       float beta, float* c, int64_t rs_c) {
  for (; blocks > 0; --blocks, a += kRows * rs_a, c += kRows * rs_c)
  for (int64_t j = 0, cols; j < n; j += cols) {  // 32 + 32 rather than 48 + 16
    const int64_t left = n - j;
    cols = left > 48 && left <= 64 ? 32 : std::min<int64_t>(48, left);
    const int64_t vectors = (cols + 15) / 16, last_lanes = cols - 16 * (vectors - 1);
    const __mmask16 last = __mmask16((1u << last_lanes) - 1);
    if (vectors == 3) {
      tiny_block512<kRows, 3>(k, alpha, a, rs_a, cs_a, b + j, rs_b, beta, c + j, rs_c, last);
    } else if (vectors == 2) {
      tiny_block512<kRows, 2>(k, alpha, a, rs_a, cs_a, b + j, rs_b, beta, c + j, rs_c, last);
    } else {
      tiny_block512<kRows, 1>(k, alpha, a, rs_a, cs_a, b + j, rs_b, beta, c + j, rs_c, last);
    }
  }
}

// As tiny_rows512 where C has at most 8 columns: one 8-float vector a block. (Apart, since
// the VL target on tiny_rows512 made GCC's 16-float blocks of 7 rows 1.6x slower.)
template <int kRows>
__attribute__((target("avx512f,avx512vl,avx2,fma"))) void tiny_rows512_half(int64_t blocks, int64_t n, int64_t k,
                                                                            float alpha, const float* a,
                                                                            int64_t rs_a, int64_t cs_a,
                                                                            const float* b, int64_t rs_b, float beta,
                                                                            float* c, int64_t rs_c) {
  const __mmask8 lanes = __mmask8((1u << n) - 1);
  for (; blocks > 0; --blocks, a += kRows * rs_a, c += kRows * rs_c)
    tiny_block512_half<kRows>(k, alpha, a, rs_a, cs_a, b, rs_b, beta, c, rs_c, lanes);
}

// Rows [begin, end) of C: whole blocks of tiny_rows_per_block rows, then the rest as one
// block of its own.
void tiny_row_range(SimdLevel simd, int64_t begin, int64_t end, int64_t n, int64_t k, float alpha,
                    const MatrixView& a, const MatrixView& b, float beta, float* c, int64_t rs_c) {
  const bool wide = simd == SimdLevel::Avx512;
  const int64_t block = tiny_rows_per_block(simd);
  static_assert(tiny_rows_per_block(SimdLevel::Avx512) == 8 && tiny_rows_per_block(SimdLevel::Avx2) == 4,
                "the switch below has 8- and 4-row kernels");
  const int block_shift = __builtin_ctzll(block);  // (a division was 2 ns of a 4x4x4 call)
  for (int64_t i = begin; i < end;) {
    const int64_t rows = std::min(block, end - i), blocks = rows < block ? 1 : (end - i) >> block_shift;
    const float* a_rows = a.p + i * a.rs;
    float* c_rows = c + i * rs_c;
    i += rows * blocks;
#define GK_TINY_ROWS(fn, r) fn<r>(blocks, n, k, alpha, a_rows, a.rs, a.cs, b.p, b.rs, beta, c_rows, rs_c)
    switch (wide ? (n <= 8 ? 12 : 4) + rows : rows) {
      case 20: GK_TINY_ROWS(tiny_rows512_half, 8); break;
      case 19: GK_TINY_ROWS(tiny_rows512_half, 7); break;
      case 18: GK_TINY_ROWS(tiny_rows512_half, 6); break;
      case 17: GK_TINY_ROWS(tiny_rows512_half, 5); break;
      case 16: GK_TINY_ROWS(tiny_rows512_half, 4); break;
      case 15: GK_TINY_ROWS(tiny_rows512_half, 3); break;
      case 14: GK_TINY_ROWS(tiny_rows512_half, 2); break;
      case 13: GK_TINY_ROWS(tiny_rows512_half, 1); break;
      case 12: GK_TINY_ROWS(tiny_rows512, 8); break;
      case 11: GK_TINY_ROWS(tiny_rows512, 7); break;
      case 10: GK_TINY_ROWS(tiny_rows512, 6); break;
      case 9: GK_TINY_ROWS(tiny_rows512, 5); break;
      case 8: GK_TINY_ROWS(tiny_rows512, 4); break;
      case 7: GK_TINY_ROWS(tiny_rows512, 3); break;
      case 6: GK_TINY_ROWS(tiny_rows512, 2); break;
      case 5: GK_TINY_ROWS(tiny_rows512, 1); break;
      case 4: GK_TINY_ROWS(tiny_rows, 4); break;
      case 3: GK_TINY_ROWS(tiny_rows, 3); break;
      case 2: GK_TINY_ROWS(tiny_rows, 2); break;
      default: GK_TINY_ROWS(tiny_rows, 1); break;
    }
#undef GK_TINY_ROWS
  }
}

// Rows [0, m) of C = alpha A B + beta C on B's contiguous rows, threads sharing the row blocks.
void tiny_rows_threaded(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b,
                        float beta, float* c, int64_t rs_c, int threads, SimdLevel simd) {
  const int64_t kRowsPerBlock = tiny_rows_per_block(simd);
  if (threads > 1) threads = static_cast<int>(std::min<int64_t>(threads, ceil_div(m, kRowsPerBlock)));
  if (threads == 1) {  // (share()'s and ceil_div's divisions were a tenth of a 5x5x5 call)
    tiny_row_range(simd, 0, m, n, k, alpha, a, b, beta, c, rs_c);
    return;
  }
  parallel_parts(threads, [&](int tid, int nt) {
    const Range rows = share(ceil_div(m, kRowsPerBlock), tid, nt, kRowsPerBlock, m);
    tiny_row_range(simd, rows.begin, rows.end, n, k, alpha, a, b, beta, c, rs_c);
  });
}

// Whether C^T = B^T A^T (vectors along M, C staged and added transposed: M x N floats
// moved) beats gathering B's rows (vectors along N, K x N floats moved), A's columns and
// B's columns contiguous (row-major TT): where K is at least 3 M (a margin: even at K = M),
// and A within L2, since each 8-row block of C^T reads all of A. us, gathered /
// transposed, 1 thread: 71x10x942 24.0 / 15.0, 30x30x300 6.4 / 4.1, 46x58x175 9.9 / 7.1,
// 16x48x100 1.52 / 1.28; even at 64^3 and 32^3; 20x40x40 0.68 / 0.86, 96^3 12.1 / 13.1,
// 10000x8x100 306 / 420 (80000 floats transposed against 800). 2 threads (tiny-narrow):
// 100x16x1000 37 / 20, 40x7x3000 40 / 14.5; A past L2: 500x20x1500 253 / 300,
// 1000x24x4000 2030 / 2250 (1 thread: 200x16x5000 500 / 534).
bool tiny_transposed_pays(int64_t m, int64_t k) {
  return m >= 16 && k >= 3 * m && m * k * static_cast<int64_t>(sizeof(float)) <= caches().l2;
}

// An 8 x 8 block transposed in registers: on return r[q] holds what was column q.
GK_TINY_TARGET void transpose_8x8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int q = 0; q < 8; q += 2) {
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
    t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
  }
#pragma GCC unroll 2
  for (int q = 0; q < 8; q += 4) {
    u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
    u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xee);
    u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x31);
  }
}

// C = staged^T + beta C, staged n x m (its rows are C's columns), in 8 x 8 blocks
// transposed in registers, the edges float by float; beta == 0 never reads C.
__attribute__((target("avx2,fma"))) void add_transposed(int64_t m, int64_t n, const float* staged, float beta,
                                                       float* c, int64_t rs_c) {
  const auto add = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {  // C[i0, i1) x [j0, j1)
    for (int64_t i = i0; i < i1; ++i) {
      float* out = c + i * rs_c;
      if (beta == 0.0f) {
        for (int64_t j = j0; j < j1; ++j) out[j] = staged[j * m + i];
      } else {
        for (int64_t j = j0; j < j1; ++j) out[j] = staged[j * m + i] + beta * out[j];
      }
    }
  };
  const __m256 beta_v = _mm256_set1_ps(beta);
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(staged + (j + q) * m + i);
      transpose_8x8(r);
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        float* out = c + (i + q) * rs_c + j;
        _mm256_storeu_ps(out, beta == 0.0f ? r[q] : _mm256_fmadd_ps(_mm256_loadu_ps(out), beta_v, r[q]));
      }
    }
    add(i, i + 8, j, n);
  }
  add(i, m, 0, n);
}

}  // namespace

bool gemm_tiny(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b,
               float beta, float* c, int64_t rs_c, int threads, SimdLevel simd) {
  if (b.cs == 1) {
    tiny_rows_threaded(m, n, k, alpha, a, b, beta, c, rs_c, threads, simd);
    return true;
  }
  if (a.rs == 1 && tiny_transposed_pays(m, k)) {
    // C^T = B^T A^T: A^T's rows are A's contiguous columns, so nothing is gathered; C^T
    // staged, then added transposed.
    float* staged = scratch(ScratchSlot::Edge, m * n);
    if (!staged) return workspace_unavailable("the staged C^T of the tiny path", m * n);
    tiny_rows_threaded(n, m, k, alpha, b.transposed(), a.transposed(), 0.0f, staged, m, threads, simd);
    add_transposed(m, n, staged, beta, c, rs_c);
    return true;
  }
  // B's rows gathered once into contiguous rows (the packing transpose).
  float* rows = scratch(ScratchSlot::Edge, k * n);
  if (!rows) return workspace_unavailable("the transposed B of the tiny path", k * n);
  PlainB(b).pack_panel(0, k, 0, n, static_cast<int>(n), rows);
  tiny_rows_threaded(m, n, k, alpha, a, {rows, n, 1}, beta, c, rs_c, threads, simd);
  return true;
}
#else
// Never called: path_limits() gives no tiny blocks without x86-64 (were it
// called, the caller would run the product on its no-heap path).
bool gemm_tiny(int64_t, int64_t, int64_t, float, const MatrixView&, const MatrixView&, float, float*, int64_t, int,
               SimdLevel) {
  return false;
}
#endif

}  // namespace gk
