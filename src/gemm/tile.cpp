// One micro-kernel call on a possibly partial tile, the epilogue, and C scaling.
#include <algorithm>

#include "gemm/gemm.h"

namespace gk {

void apply_epilogue(const Epilogue& e, float* c, int64_t rs_c, int64_t m, int64_t n,
                    int64_t row0, int64_t col0) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * rs_c;
    if (e.bias_mode == BiasMode::PerRow) {
      const float b = e.bias[row0 + i];
      for (int64_t j = 0; j < n; ++j) row[j] += b;
    } else if (e.bias_mode == BiasMode::PerColumn) {
      const float* b = e.bias + col0;
      for (int64_t j = 0; j < n; ++j) row[j] += b[j];
    }
    if (e.act == Activation::Relu) {
      for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j], 0.0f);
    } else if (e.act == Activation::Relu6) {
      for (int64_t j = 0; j < n; ++j) row[j] = std::min(std::max(row[j], 0.0f), 6.0f);
    }
  }
}

void run_ukernel(const KernelInfo& kernel, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, int64_t rs_b, float beta, float* c,
                 int64_t rs_c, const Epilogue* epilogue, int64_t row0, int64_t col0) {
  // Narrow tiles take the narrowest kernel that covers them: fewer wasted FMAs.
  gk_ukernel_fn fn = kernel.full_tile;
  int64_t tile_cols = kernel.nr;
  for (const NarrowKernel& narrow : kernel.narrower) {
    if (narrow.fn && n <= narrow.nr) {
      fn = narrow.fn;
      tile_cols = narrow.nr;
      break;
    }
  }
  if (m == kernel.mr && n == tile_cols) {
    const gk_ukernel_args args{a, b, c, k, rs_b, rs_c, alpha, beta};
    fn(&args);
  } else {
    // Partial tile: the kernel writes a full local tile with beta = 0, and only the m x n
    // part is merged into C, reading C only when beta != 0.
    alignas(64) float tile[kMaxTileFloats];
    const gk_ukernel_args args{a, b, tile, k, rs_b, kernel.nr, alpha, 0.0f};
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
