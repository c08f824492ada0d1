// Matrix-vector path for GEMMs with one output row or column (a fully connected layer at
// batch 1 is 1000x1x512). Memory-bound, so the work is to stream the matrix once at full
// width. Two shapes of loop, by which dimension of the matrix is contiguous:
//   dot form  (rows contiguous):    y[i] = <M[i, :], x>, four rows per pass;
//   axpy form (columns contiguous): y[chunk] += x[j] * M[chunk, j], a chunk of y kept in
//                                   registers while every column streams by.
// The loops are written once with GCC vector types and compiled per ISA (AVX-512,
// AVX2+FMA, baseline SSE2 / NEON); the variant follows the active micro-kernel so that
// GEMMKIT_KERNEL also selects the GEMV code under test.
// Vector types only cross always-inline calls, so the ABI note about them does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/runtime.h"
#include "gemm/gemm.h"

namespace gk {
namespace {

typedef float v16 __attribute__((vector_size(64)));

#define GK_INLINE inline __attribute__((always_inline))

GK_INLINE v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
GK_INLINE void store16(float* p, const v16& v) { std::memcpy(p, &v, sizeof v); }
GK_INLINE float hsum(const v16& v) {
  float s = 0.0f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}
GK_INLINE float finish(float alpha, float acc, float beta, float y) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * y;
}

// Rows [r0, r1) in dot form; x is contiguous. Four rows per pass with kUnroll vectors of
// 16 each: 4 * kUnroll accumulators must stay in registers (8 ymm on AVX2, 8 zmm on AVX-512).
template <int kUnroll>
GK_INLINE void gemv_dot(int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m,
                        int64_t rs, const float* x, float beta, float* y, int64_t incy) {
  constexpr int kStep = 16 * kUnroll;
  int64_t i = r0;
  for (; i + 4 <= r1; i += 4) {
    const float* row[4] = {m + i * rs, m + (i + 1) * rs, m + (i + 2) * rs, m + (i + 3) * rs};
    v16 acc[4][kUnroll] = {};
    int64_t j = 0;
    for (; j + kStep <= cols; j += kStep) {
      for (int u = 0; u < kUnroll; ++u) {
        const v16 xv = load16(x + j + 16 * u);
        for (int r = 0; r < 4; ++r) acc[r][u] += load16(row[r] + j + 16 * u) * xv;
      }
    }
    for (int r = 0; r < 4; ++r) {
      v16 sum = acc[r][0];
      for (int u = 1; u < kUnroll; ++u) sum += acc[r][u];
      float s = hsum(sum);
      for (int64_t t = j; t < cols; ++t) s += row[r][t] * x[t];
      y[(i + r) * incy] = finish(alpha, s, beta, y[(i + r) * incy]);
    }
  }
  for (; i < r1; ++i) {
    const float* row = m + i * rs;
    v16 acc = {};
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) acc += load16(row + j) * load16(x + j);
    float s = hsum(acc);
    for (; j < cols; ++j) s += row[j] * x[j];
    y[i * incy] = finish(alpha, s, beta, y[i * incy]);
  }
}

// Rows [r0, r1) in axpy form, kChunk rows of y at a time in registers.
template <int kChunk>
GK_INLINE void gemv_axpy(int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m,
                         int64_t cs, const float* x, int64_t incx, float beta, float* y,
                         int64_t incy) {
  constexpr int kVecs = kChunk / 16;
  int64_t i = r0;
  for (; i + kChunk <= r1; i += kChunk) {
    v16 acc[kVecs] = {};
    for (int64_t j = 0; j < cols; ++j) {
      const float* col = m + j * cs + i;
      const float xj = x[j * incx];
      for (int v = 0; v < kVecs; ++v) acc[v] += load16(col + 16 * v) * xj;
    }
    alignas(64) float out[kChunk];
    for (int v = 0; v < kVecs; ++v) store16(out + 16 * v, acc[v]);
    for (int t = 0; t < kChunk; ++t) y[(i + t) * incy] = finish(alpha, out[t], beta, y[(i + t) * incy]);
  }
  for (; i < r1; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < cols; ++j) s += m[j * cs + i] * x[j * incx];
    y[i * incy] = finish(alpha, s, beta, y[i * incy]);
  }
}

// Any strides: plain loops.
void gemv_strided(int64_t r0, int64_t r1, int64_t cols, float alpha, const MatrixView& m,
                  const float* x, int64_t incx, float beta, float* y, int64_t incy) {
  for (int64_t i = r0; i < r1; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < cols; ++j) s += m.at(i, j) * x[j * incx];
    y[i * incy] = finish(alpha, s, beta, y[i * incy]);
  }
}

using GemvDot = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t,
                         const float*, float, float*, int64_t);
using GemvAxpy = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);

// One instance of each loop per ISA; the always-inline bodies take the caller's target.
#define GK_GEMV_VARIANT(suffix, target_attr, dot_unroll, chunk)                                        \
  target_attr void gemv_dot_##suffix(int64_t r0, int64_t r1, int64_t cols, float alpha,    \
                                     const float* m, int64_t rs, const float* x,           \
                                     float beta, float* y, int64_t incy) {                 \
    gemv_dot<dot_unroll>(r0, r1, cols, alpha, m, rs, x, beta, y, incy);                    \
  }                                                                                        \
  target_attr void gemv_axpy_##suffix(int64_t r0, int64_t r1, int64_t cols, float alpha,   \
                                      const float* m, int64_t cs, const float* x,          \
                                      int64_t incx, float beta, float* y, int64_t incy) {  \
    gemv_axpy<chunk>(r0, r1, cols, alpha, m, cs, x, incx, beta, y, incy);                  \
  }

GK_GEMV_VARIANT(portable, , 1, 32)
#if defined(__x86_64__)
GK_GEMV_VARIANT(avx2, __attribute__((target("avx2,fma"))), 1, 64)
GK_GEMV_VARIANT(avx512, __attribute__((target("avx512f,avx2,fma"))), 2, 128)
#endif

struct GemvImpl {
  GemvDot dot;
  GemvAxpy axpy;
};
GemvImpl gemv_impl() {
#if defined(__x86_64__)
  switch (active_config().kernel->simd) {
    case SimdLevel::Avx512: return {gemv_dot_avx512, gemv_axpy_avx512};
    case SimdLevel::Avx2: return {gemv_dot_avx2, gemv_axpy_avx2};
    case SimdLevel::Baseline: break;
  }
#endif
  return {gemv_dot_portable, gemv_axpy_portable};
}

}  // namespace

void gemv(int64_t rows, int64_t cols, float alpha, const MatrixView& mat, const float* x,
          int64_t incx, float beta, float* y, int64_t incy, int threads) {
  const GemvImpl impl = gemv_impl();
  const bool dot_form = mat.cs == 1 && mat.rs != 1;
  const bool axpy_form = mat.rs == 1;
  // The dot form needs x contiguous; a strided x is gathered once (cols floats).
  std::vector<float> x_copy;
  if (dot_form && incx != 1) {
    x_copy.resize(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) x_copy[j] = x[j * incx];
    x = x_copy.data();
    incx = 1;
  }
  if (threads > 1) note_parallel_region();
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    // Split rows in multiples of 128 so every thread runs whole register chunks.
    const int64_t units = (rows + 127) / 128;
    const int64_t r0 = std::min(rows, units * tid / nt * 128);
    const int64_t r1 = std::min(rows, units * (tid + 1) / nt * 128);
    if (dot_form) {
      impl.dot(r0, r1, cols, alpha, mat.p, mat.rs, x, beta, y, incy);
    } else if (axpy_form) {
      impl.axpy(r0, r1, cols, alpha, mat.p, mat.cs, x, incx, beta, y, incy);
    } else {
      gemv_strided(r0, r1, cols, alpha, mat, x, incx, beta, y, incy);
    }
  }
}

}  // namespace gk
