// One micro-kernel call on a possibly partial tile, the epilogue, and C scaling.
#include <algorithm>
#include <cstring>

#include "common/simd.h"
#include "gemm/gemm.h"

namespace gk {

namespace {

// row[0, n) = act(row + bias), bias a vector (per column) or a scalar (per row): 8 at a
// time, scalar tail. It runs on every C tile of a conv layer, where K can be as small as
// 16, so a scalar loop here would cost more than the micro-kernel.
GK_INLINE void epilogue_row(float* row, int64_t n, const float* col_bias, float row_bias, Activation act) {
  const v8 zero = {}, six = zero + 6.0f;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    v8 v = load8(row + j) + (col_bias ? load8(col_bias + j) : zero + row_bias);
    if (act != Activation::None) v = v > zero ? v : zero;
    if (act == Activation::Relu6) v = v < six ? v : six;
    store8(row + j, v);
  }
  for (; j < n; ++j) {
    float v = row[j] + (col_bias ? col_bias[j] : row_bias);
    if (act != Activation::None) v = std::max(v, 0.0f);
    if (act == Activation::Relu6) v = std::min(v, 6.0f);
    row[j] = v;
  }
}

GK_INLINE void epilogue_block(const Epilogue& e, float* c, int64_t rs_c, int64_t m, int64_t n,
                              int64_t row0, int64_t col0) {
  const float* col_bias = e.bias_mode == BiasMode::PerColumn ? e.bias + col0 : nullptr;
  for (int64_t i = 0; i < m; ++i)
    epilogue_row(c + i * rs_c, n, col_bias, e.bias_mode == BiasMode::PerRow ? e.bias[row0 + i] : 0.0f,
                 e.act);
}

void epilogue_baseline(const Epilogue& e, float* c, int64_t rs_c, int64_t m, int64_t n, int64_t row0,
                       int64_t col0) {
  epilogue_block(e, c, rs_c, m, n, row0, col0);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void epilogue_avx2(const Epilogue& e, float* c, int64_t rs_c, int64_t m,
                                                   int64_t n, int64_t row0, int64_t col0) {
  epilogue_block(e, c, rs_c, m, n, row0, col0);
}
#endif

}  // namespace

void apply_epilogue(const Epilogue& e, float* c, int64_t rs_c, int64_t m, int64_t n,
                    int64_t row0, int64_t col0) {
#if defined(__x86_64__)
  if (active_config().kernel->simd != SimdLevel::Baseline) return epilogue_avx2(e, c, rs_c, m, n, row0, col0);
#endif
  epilogue_baseline(e, c, rs_c, m, n, row0, col0);
}

gk_ukernel_fn kernel_for_columns(const KernelInfo& kernel, int64_t n, int64_t* width) {
  // Narrow tiles take the narrowest kernel that covers them: fewer wasted FMAs.
  for (const NarrowKernel& narrow : kernel.narrower) {
    if (narrow.fn && n <= narrow.nr) {
      *width = narrow.nr;
      return narrow.fn;
    }
  }
  *width = kernel.nr;
  return kernel.full_tile;
}

void run_ukernel(const KernelInfo& kernel, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, int64_t rs_b, float beta, float* c,
                 int64_t rs_c, const Epilogue* epilogue, int64_t row0, int64_t col0) {
  int64_t tile_cols = 0;
  const gk_ukernel_fn fn = kernel_for_columns(kernel, n, &tile_cols);
  if (m == kernel.mr && n == tile_cols) {
    gk_ukernel_args args{a, b, c, k, rs_b, rs_c, alpha, beta, nullptr, 0};
    const bool fused = epilogue && epilogue->active() && kernel.fused_epilogue &&
                       epilogue->bias_mode != BiasMode::PerColumn;
    if (fused) {
      args.row_bias = epilogue->bias_mode == BiasMode::PerRow ? epilogue->bias + row0 : nullptr;
      args.activation = static_cast<int32_t>(epilogue->act);
    }
    fn(&args);
    if (fused) return;
  } else {
    // Partial tile: the kernel writes a full local tile with beta = 0, and only the m x n
    // part is merged into C, reading C only when beta != 0.
    alignas(64) float tile[kMaxTileFloats];
    const gk_ukernel_args args{a, b, tile, k, rs_b, kernel.nr, alpha, 0.0f, nullptr, 0};
    fn(&args);
    for (int64_t i = 0; i < m; ++i) {
      float* crow = c + i * rs_c;
      const float* trow = tile + i * kernel.nr;
      if (beta == 0.0f) {
        for (int64_t j = 0; j < n; ++j) crow[j] = trow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) crow[j] = trow[j] + beta * crow[j];
      }
    }
  }
  if (epilogue && epilogue->active()) apply_epilogue(*epilogue, c, rs_c, m, n, row0, col0);
}

void scale_c(float beta, float* c, int64_t rs_c, int64_t m, int64_t n, const Epilogue& e) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * rs_c;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
  if (e.active()) apply_epilogue(e, c, rs_c, m, n, 0, 0);
}

}  // namespace gk
