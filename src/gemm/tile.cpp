// One micro-kernel call on a possibly partial tile, the epilogue, and C scaling.
#include <algorithm>
#include <vector>
#include <cstring>

#include "common/simd.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {

namespace {

// row[0, n) = act(row + bias), bias a vector (per column) or a scalar (per row): 8 at a
// time, scalar tail. It runs on every C tile of a conv layer, where K can be as small as
// 16, so a scalar loop here would cost more than the micro-kernel.
GK_INLINE void epilogue_row(float* row, int64_t n, const float* col_bias, float row_bias, Activation act) {
  const v8 zero = {}, six = zero + 6.0f;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    v8 v = load8(row + j) + (col_bias ? load8(col_bias + j) : splat8(row_bias));
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

ColumnPanels::ColumnPanels(const KernelInfo& ker, int64_t n) : nr_(ker.nr) {
  if (n <= 0) return;
  // The narrowest width of the family that covers `cols` (the full width if none does).
  auto covering = [&](int64_t cols) {
    int64_t width = ker.nr;
    for (const NarrowKernel& narrow : ker.narrower)
      if (narrow.fn && narrow.nr >= cols && narrow.nr < width) width = narrow.nr;
    return width;
  };
  bool has16 = ker.nr == 16;
  for (const NarrowKernel& narrow : ker.narrower) has16 |= narrow.fn && narrow.nr == 16;
  full_ = (n - 1) / nr_;  // panels that start with more than NR columns left
  const int64_t left = n - full_ * nr_;  // 1..NR
  if (has16 && full_ > 0 && takes_16_not_24(nr_, left + nr_)) {
    --full_;
    const int64_t rest = left + nr_ - 16;
    tail_[0] = {full_ * nr_, 16, 16};
    tail_[1] = {full_ * nr_ + 16, covering(rest), rest};
    tail_count_ = 2;
    return;
  }
  tail_[0] = {full_ * nr_, covering(left), left};
  tail_count_ = 1;
}

int pointwise_panels(const KernelInfo& ker, int64_t columns, PointwisePanel* panels, int capacity,
                     bool past_last_block) {
  static_assert(kMaxPointwiseNr % 8 == 0, "panels are whole 8-column blocks");
  auto one_block_wider = [&](int64_t left) -> const KernelInfo::Pointwise* {
    if (past_last_block && (left == 8 || left == 24))
      for (const KernelInfo::Pointwise& k : ker.pointwise)
        if (k.fn && k.skips_last_block && k.nr == left + 8) return &k;
    return nullptr;
  };
  auto widest = [&](int64_t left) -> const KernelInfo::Pointwise* {
    for (const KernelInfo::Pointwise& k : ker.pointwise)
      if (k.fn && k.nr <= left && !takes_16_not_24(k.nr, left)) return &k;
    for (const KernelInfo::Pointwise& k : ker.pointwise)  // an ISA without 16-wide ones
      if (k.fn && k.nr <= left) return &k;
    return nullptr;
  };
  int count = 0;
  const int64_t padded = round_up(columns, 8);
  for (int64_t j = 0; j < padded && count < capacity;) {
    if (const KernelInfo::Pointwise* wider = one_block_wider(padded - j)) {
      panels[count++] = {j, wider, wider->nr / 8 - 1};
      break;
    }
    const KernelInfo::Pointwise* k = widest(padded - j);
    if (!k) break;  // no pointwise kernels, or none 8 wide
    panels[count++] = {j, k, k->nr / 8};
    j += k->nr;
  }
  return count;
}

int64_t pointwise_k_block(const KernelInfo& kernel, int64_t k_rows, int64_t widest) {
  const int64_t budget = kernel.simd == SimdLevel::Avx512 ? caches().l2 / 16 : caches().l1d / 2;
  const int64_t max_rows = std::max<int64_t>(8, budget / (widest * 4) / 8 * 8);
  return round_up(ceil_div(k_rows, ceil_div(k_rows, max_rows)), 8);
}

std::vector<PointwisePanel> pointwise_panels(const KernelInfo& ker, int64_t columns, bool past_last_block) {
  std::vector<PointwisePanel> panels(static_cast<size_t>(ceil_div(std::max<int64_t>(columns, 0), 8)));
  panels.resize(static_cast<size_t>(
      pointwise_panels(ker, columns, panels.data(), static_cast<int>(panels.size()), past_last_block)));
  return panels;
}

namespace {

// Hands the epilogue to the kernel when it can apply it itself (per-row bias and
// activation); returns false when the caller must apply it. A tile of m < MR rows gets
// its biases through `spare` (MR floats, zeros past the last row): the kernel reads MR.
bool fuse_epilogue(const KernelInfo& kernel, const Epilogue* e, int64_t m, int64_t row0, float* spare,
                   gk_ukernel_args* args) {
  if (!e || !e->active() || !kernel.fused_epilogue || e->bias_mode == BiasMode::PerColumn) return false;
  if (e->bias_mode == BiasMode::PerRow) {
    args->row_bias = e->bias + row0;
    if (m < kernel.mr) {
      for (int64_t i = 0; i < kernel.mr; ++i) spare[i] = i < m ? e->bias[row0 + i] : 0.0f;
      args->row_bias = spare;
    }
  }
  args->activation = static_cast<int32_t>(e->act);
  return true;
}

}  // namespace

FullTiles::FullTiles(const KernelInfo& kernel, int64_t n, int64_t k, float alpha, const float* b,
                     int64_t rs_b, float beta, int64_t rs_c, const Epilogue* epilogue) {
  int64_t tile_cols = 0;
  fn_ = kernel_for_columns(kernel, n, &tile_cols);
  args_ = {nullptr, b, nullptr, k, rs_b, rs_c, alpha, beta, nullptr, 0};
  const bool fused = fuse_epilogue(kernel, epilogue, kernel.mr, 0, nullptr, &args_);
  if (fused) bias_ = args_.row_bias;  // e->bias + 0: run() adds each tile's first row
  ready_ = n == tile_cols && (fused || !epilogue || !epilogue->active());
}

void run_ukernel(const KernelInfo& kernel, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, int64_t rs_b, float beta, float* c,
                 int64_t rs_c, const Epilogue* epilogue, int64_t row0, int64_t col0) {
  int64_t tile_cols = 0;
  const gk_ukernel_fn fn = kernel_for_columns(kernel, n, &tile_cols);
  if (m == kernel.mr && n == tile_cols) {
    // The epilogue fused into the kernel where it can be, else applied below.
    FullTiles full(kernel, n, k, alpha, b, rs_b, beta, rs_c, epilogue);
    if (full.ready()) return full.run(a, c, row0);
    FullTiles(kernel, n, k, alpha, b, rs_b, beta, rs_c, nullptr).run(a, c, row0);
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

namespace {

// Stores the m x n corner of a row-stored tile (row stride ts) into a channel-blocked C
// at base (element (i, j) at base[j * 8 + i]): 4 rows by 4x4 transposes, else one by one.
GK_INLINE void store_tile_blocked(const float* tile, int64_t ts, int64_t m, int64_t n, float* base) {
  int64_t j = 0;
  if (m == 4) {
    for (; j + 4 <= n; j += 4) {
      const v4 r0 = load4(tile + j), r1 = load4(tile + ts + j), r2 = load4(tile + 2 * ts + j),
               r3 = load4(tile + 3 * ts + j);
      const v4i lo = {0, 4, 1, 5}, hi = {2, 6, 3, 7};
      const v4 t0 = __builtin_shuffle(r0, r1, lo), t1 = __builtin_shuffle(r0, r1, hi);
      const v4 t2 = __builtin_shuffle(r2, r3, lo), t3 = __builtin_shuffle(r2, r3, hi);
      const v4i first = {0, 1, 4, 5}, second = {2, 3, 6, 7};
      store4(base + j * 8, __builtin_shuffle(t0, t2, first));
      store4(base + (j + 1) * 8, __builtin_shuffle(t0, t2, second));
      store4(base + (j + 2) * 8, __builtin_shuffle(t1, t3, first));
      store4(base + (j + 3) * 8, __builtin_shuffle(t1, t3, second));
    }
  }
  for (; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) base[j * 8 + i] = tile[i * ts + j];
}

void store_tile_blocked_baseline(const float* t, int64_t ts, int64_t m, int64_t n, float* base) {
  store_tile_blocked(t, ts, m, n, base);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void store_tile_blocked_avx2(const float* t, int64_t ts, int64_t m, int64_t n,
                                                             float* base) {
  store_tile_blocked(t, ts, m, n, base);
}
#endif

}  // namespace

void run_ukernel_blocked_c(const KernelInfo& kernel, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, const float* b, int64_t rs_b, float beta, float* c,
                           int64_t block_stride, const Epilogue* epilogue, int64_t row0, int64_t col0) {
  int64_t tile_cols = 0;
  const gk_ukernel_fn fn = kernel_for_columns(kernel, n, &tile_cols);
  const int64_t ts = kernel.nr;
  alignas(64) float tile[kMaxTileFloats];
  float* base = c + (row0 / 8) * block_stride + col0 * 8 + row0 % 8;
  if (beta != 0.0f) {
    std::fill(tile, tile + kernel.mr * ts, 0.0f);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) tile[i * ts + j] = base[j * 8 + i];
  }
  gk_ukernel_args args{a, b, tile, k, rs_b, ts, alpha, beta, nullptr, 0};
  float spare_bias[16];
  const bool fused = fuse_epilogue(kernel, epilogue, m, row0, spare_bias, &args);
  fn(&args);
  if (epilogue && epilogue->active() && !fused) apply_epilogue(*epilogue, tile, ts, m, n, row0, col0);
#if defined(__x86_64__)
  if (kernel.simd != SimdLevel::Baseline) return store_tile_blocked_avx2(tile, ts, m, n, base);
#endif
  store_tile_blocked_baseline(tile, ts, m, n, base);
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
