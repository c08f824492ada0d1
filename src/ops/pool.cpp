// Max and average pooling with PyTorch's semantics, and global average pooling.
//
// Each thread takes a contiguous share of the output rows (image, channel block, row).
// Blocked layouts (NCHWx, NHWC) pool a pixel's lanes as vectors, one output pixel at a
// time with the accumulators in registers, except max pooling over whole vectors of lanes,
// which runs up to 4 output pixels side by side (max_columns); planar rows (NCHW)
// accumulate whole output rows tap by tap, vectorized along the width.
#include <algorithm>
#include <cinttypes>
#include <limits>
#include <utility>

#include "ops/ops.h"

namespace gk {
namespace ops {
namespace {

constexpr const char* kPool = "gk_pool2d";
constexpr const char* kGlobal = "gk_global_avg_pool";
// Pads beyond this are refused (a padded extent stays below 2^62: no overflow anywhere).
constexpr int64_t kMaxPad = int64_t{1} << 60;

// The pooling along one axis: kernel, stride, pads, input and output sizes.
struct Axis {
  int64_t k, s, pad_before, pad_after, in, out;
};

// One output position's window along an axis: the input range [lo, hi) it covers, and its
// length clipped to the padded input (count_include_pad's divisor), as PyTorch's
// hend = min(hstart + k, H + pad).
struct Window {
  int64_t lo, hi, padded;
};
GK_INLINE Window window(const Axis& a, int64_t o) {
  const int64_t start = o * a.s - a.pad_before, end = start + a.k;
  return {std::max<int64_t>(start, 0), std::min(end, a.in), std::min(end, a.in + a.pad_after) - start};
}

struct PoolGeometry {
  Axis h, w;
  bool max, include_pad;
};

// Output size along an axis, PyTorch's pooling_output_shape (dilation 1). The caller has
// checked 0 <= pads <= k / 2 <= kMaxPad and k <= in + pads.
int64_t output_extent(int64_t in, int64_t k, int64_t s, int64_t pad_before, int64_t pad_after, bool ceil_mode) {
  const int64_t span = in - (k - pad_before - pad_after);  // in + pads - k >= 0
  int64_t out = (ceil_mode ? span / s + (span % s != 0) : span / s) + 1;
  // ceil_mode: the last window must start inside the input or the leading padding.
  int64_t last_start;
  if (ceil_mode && (__builtin_mul_overflow(out - 1, s, &last_start) || last_start >= in + pad_before)) --out;
  return out;
}

// Checks what gk_pool2d_output_size needs (the input and the descriptor) and derives the
// output size.
bool check_pool(const char* fn, const gk_tensor_desc* in, const gk_pool_desc* p, PoolGeometry* g) {
  if (!check_tensor(fn, "in", in) || !check_pointer(fn, "pool", p)) return false;
  const int kind = conv::raw_enum(p->kind);
  if (kind != GK_POOL_MAX && kind != GK_POOL_AVG) {
    set_last_error("%s: pool->kind %d is not a gk_pool_kind", fn, kind);
    return false;
  }
  if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1) {
    set_last_error("%s: kernel %" PRId64 "x%" PRId64 " stride %" PRId64 "x%" PRId64 " (each must be >= 1)", fn,
                   p->kernel_h, p->kernel_w, p->stride_h, p->stride_w);
    return false;
  }
  const int64_t pads[4] = {p->pad_top, p->pad_bottom, p->pad_left, p->pad_right};
  const char* names[4] = {"pad_top", "pad_bottom", "pad_left", "pad_right"};
  for (int i = 0; i < 4; ++i) {
    const int64_t k = i < 2 ? p->kernel_h : p->kernel_w;
    if (pads[i] < 0 || pads[i] > k / 2 || pads[i] > kMaxPad) {
      set_last_error("%s: pool->%s %" PRId64 " must be in [0, kernel / 2 = %" PRId64 "]", fn, names[i], pads[i],
                     std::min(k / 2, kMaxPad));
      return false;
    }
  }
  if ((p->ceil_mode != 0 && p->ceil_mode != 1) || (p->count_include_pad != 0 && p->count_include_pad != 1)) {
    set_last_error("%s: pool->ceil_mode %d and count_include_pad %d must be 0 or 1", fn, p->ceil_mode,
                   p->count_include_pad);
    return false;
  }
  // k - pads >= 0 as pads <= k / 2: the padded input (in + pads) is never formed.
  if (p->kernel_h - p->pad_top - p->pad_bottom > in->h || p->kernel_w - p->pad_left - p->pad_right > in->w) {
    set_last_error("%s: window %" PRId64 "x%" PRId64 " larger than the padded input %" PRId64 "x%" PRId64, fn,
                   p->kernel_h, p->kernel_w, in->h + p->pad_top + p->pad_bottom, in->w + p->pad_left + p->pad_right);
    return false;
  }
  const bool ceil_mode = p->ceil_mode == 1;
  g->h = {p->kernel_h, p->stride_h, p->pad_top, p->pad_bottom, in->h,
          output_extent(in->h, p->kernel_h, p->stride_h, p->pad_top, p->pad_bottom, ceil_mode)};
  g->w = {p->kernel_w, p->stride_w, p->pad_left, p->pad_right, in->w,
          output_extent(in->w, p->kernel_w, p->stride_w, p->pad_left, p->pad_right, ceil_mode)};
  g->max = kind == GK_POOL_MAX;
  g->include_pad = p->count_include_pad == 1;
  if (g->h.out < 1 || g->w.out < 1) {  // cannot happen after the checks above; kept as the rule
    set_last_error("%s: output %" PRId64 "x%" PRId64 " is empty", fn, g->h.out, g->w.out);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- vector helpers
// The loops below are templates over V = float, v4 or v8 (the lanes pooled at once).

template <typename V>
GK_INLINE V load(const float* p) {
  if constexpr (sizeof(V) == sizeof(float)) {
    return *p;
  } else {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
}
template <typename V>
GK_INLINE void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename V>
GK_INLINE V splat(float s) {
  if constexpr (sizeof(V) == sizeof(float)) {
    return s;
  } else {
    V v;
    for (size_t l = 0; l < sizeof(V) / sizeof(float); ++l) v[l] = s;
    return v;
  }
}
// max that propagates NaN, as PyTorch's max pooling does ((v > m) || isnan(v)).
template <typename V>
GK_INLINE V max_nan(V m, V v) {
  return (v > m) | (v != v) ? v : m;
}
template <bool kMax, typename V>
GK_INLINE V combine(V acc, V v) {
  if constexpr (kMax) {
    return max_nan(acc, v);
  } else {
    return acc + v;
  }
}
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------- blocked layouts

// One output pixel, lanes [0, N * |V|) from x (the window's first row and column of the
// pixel's block, lanes at offset 0): the window's rows [0, rows) x columns [0, cols) of
// pixels `lanes` floats apart in rows `row_floats` apart.
template <bool kMax, typename V, int N>
GK_INLINE void pool_pixel(const float* x, int64_t rows, int64_t cols, int64_t row_floats, int64_t lanes,
                          float divisor, float* y) {
  constexpr int64_t kWidth = sizeof(V) / sizeof(float);
  V acc[N];
  for (int k = 0; k < N; ++k) acc[k] = splat<V>(kMax ? kNegInf : 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < cols; ++q) {
      const float* px = x + r * row_floats + q * lanes;
      for (int k = 0; k < N; ++k) acc[k] = combine<kMax>(acc[k], load<V>(px + k * kWidth));
    }
  for (int k = 0; k < N; ++k) store(y + k * kWidth, kMax ? acc[k] : acc[k] / splat<V>(divisor));
}

// All lanes of one output pixel: 16 at a time, then 8, 4, 1.
template <bool kMax>
GK_INLINE void pool_pixel_lanes(const float* x, int64_t rows, int64_t cols, int64_t row_floats, int64_t lanes,
                                float divisor, float* y) {
  int64_t l = 0;
  for (; l + 16 <= lanes; l += 16) pool_pixel<kMax, v8, 2>(x + l, rows, cols, row_floats, lanes, divisor, y + l);
  if (l + 8 <= lanes) pool_pixel<kMax, v8, 1>(x + l, rows, cols, row_floats, lanes, divisor, y + l), l += 8;
  if (l + 4 <= lanes) pool_pixel<kMax, v4, 1>(x + l, rows, cols, row_floats, lanes, divisor, y + l), l += 4;
  for (; l < lanes; ++l) pool_pixel<kMax, float, 1>(x + l, rows, cols, row_floats, lanes, divisor, y + l);
}

// The divisor of an average pool's output pixel (1 for max pooling, unused).
GK_INLINE float divisor(const PoolGeometry& g, const Window& wh, const Window& ww) {
  return g.include_pad ? float(wh.padded * ww.padded) : float((wh.hi - wh.lo) * (ww.hi - ww.lo));
}

// Max pooling of P output pixels side by side, lanes [0, 8): their windows rows x cols,
// whole, `step` floats apart (KH, KW > 0 fix the window at compile time). P independent
// chains: one pixel's KH * KW dependent max_nan steps held NCHW8's 3x3/2 pool to 12.7 GB/s
// (memcpy: 72). The max is v > m ? v : m (one vmaxps: the first of equals stays, -0 before
// 0 gives -0), which skips NaNs; where the input may hold one (kNaN), a second chain keeps
// the last NaN in window order and wins at the end: exactly max_nan's fold either way.
template <bool kNaN, int P, int KH = 0, int KW = 0>
GK_INLINE void max_pixels(const float* x, int64_t rows, int64_t cols, int64_t row_floats, int64_t lanes,
                          int64_t step, float* y) {
  if (KH) rows = KH;
  if (KW) cols = KW;
  // Unrolled whole, or GCC keeps the accumulators in a stack array (a load and a store per step).
  v8 m[P], nan[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) m[p] = splat<v8>(kNegInf), nan[p] = splat<v8>(0.0f);
#pragma GCC unroll 3
  for (int64_t r = 0; r < rows; ++r)
#pragma GCC unroll 3
    for (int64_t q = 0; q < cols; ++q)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const v8 v = load8(x + r * row_floats + q * lanes + p * step);
        m[p] = v > m[p] ? v : m[p];
        if (kNaN) nan[p] = v != v ? v : nan[p];
      }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) store(y + p * lanes, kNaN ? (nan[p] != nan[p] ? nan[p] : m[p]) : m[p]);
}

// The windows max_columns unrolls at compile time.
enum FixedWindow { kRuntimeWindow, k3x3, k2x2 };

// P pixels of max_columns, lanes [0, 8).
template <bool kNaN, int P>
GK_INLINE void max_block_lanes8(FixedWindow fixed, const float* x, int64_t rows, int64_t cols, int64_t row_floats,
                                int64_t lanes, int64_t step, float* y) {
  if (fixed == k3x3) max_pixels<kNaN, P, 3, 3>(x, rows, cols, row_floats, lanes, step, y);
  else if (fixed == k2x2) max_pixels<kNaN, P, 2, 2>(x, rows, cols, row_floats, lanes, step, y);
  else max_pixels<kNaN, P>(x, rows, cols, row_floats, lanes, step, y);
}

// P pixels of max_columns, all their lanes, 8 at a time. NCHW8 skips the loop: through it,
// ShuffleNetV2's pool ran at 21 GB/s instead of 27.
template <bool kNaN, int P>
GK_INLINE void max_block(FixedWindow fixed, const float* x, int64_t rows, int64_t cols, int64_t row_floats,
                         int64_t lanes, int64_t step, float* y) {
  if (lanes == 8) return max_block_lanes8<kNaN, P>(fixed, x, rows, cols, row_floats, 8, step, y);
  for (int64_t l = 0; l < lanes; l += 8)
    max_block_lanes8<kNaN, P>(fixed, x + l, rows, cols, row_floats, lanes, step, y + l);
}

// Max pooling of output columns [ow0, ow1) of a row, whose windows are whole along the
// width (the rows may be clipped to `rows`), `lanes` a multiple of 8: pixels 4 side by
// side, then 2, then 1, each block all its lanes before the next (NHWC's 64 lanes a chunk
// at a time along the whole row ran 17.7 -> 13 GB/s: the rows left L1 between chunks).
template <bool kNaN>
GK_INLINE void max_columns(const PoolGeometry& g, int64_t lanes, const float* x_rows, int64_t rows,
                           int64_t row_floats, int64_t ow0, int64_t ow1, float* y) {
  const int64_t step = g.w.s * lanes, cols = g.w.k;
  const bool square = rows == g.h.k && g.h.k == g.w.k;  // and not clipped by the padding
  const FixedWindow fixed = square && g.h.k == 3 ? k3x3 : square && g.h.k == 2 ? k2x2 : kRuntimeWindow;
  const float* px = x_rows + (ow0 * g.w.s - g.w.pad_before) * lanes;
  float* py = y + ow0 * lanes;
  int64_t ow = ow0;
  for (; ow + 4 <= ow1; ow += 4, px += 4 * step, py += 4 * lanes)
    max_block<kNaN, 4>(fixed, px, rows, cols, row_floats, lanes, step, py);
  if (ow + 2 <= ow1) {
    max_block<kNaN, 2>(fixed, px, rows, cols, row_floats, lanes, step, py);
    ow += 2, px += 2 * step, py += 2 * lanes;
  }
  if (ow < ow1) max_block<kNaN, 1>(fixed, px, rows, cols, row_floats, lanes, step, py);
}

// Whether n floats from x (n a multiple of 8) may hold a NaN: their sum is NaN if one is,
// for one add per vector (four chains; a compare and an or per vector cost ShuffleNetV2's
// pool a third of its time). +inf with -inf also sums to NaN: such rows take the NaN
// path for nothing, and nothing is missed.
GK_INLINE bool may_hold_nan(const float* x, int64_t n) {
  v8 acc[4] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc[k] += load8(x + i + 8 * k);
  for (; i < n; i += 8) acc[0] += load8(x + i);
  const v8 sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  bool nan = false;
  for (int l = 0; l < 8; ++l) nan = nan || sum[l] != sum[l];
  return nan;
}

// The output columns whose windows lie whole inside the input width: [first, last).
GK_INLINE std::pair<int64_t, int64_t> whole_columns(const Axis& a) {
  const int64_t first = std::min(a.out, (a.pad_before + a.s - 1) / a.s);
  const int64_t last = a.in - a.k + a.pad_before < 0 ? 0 : std::min(a.out, (a.in - a.k + a.pad_before) / a.s + 1);
  return {first, std::max(first, last)};
}

// One output row of a blocked layout: x is the block's first input row, y the output row.
// Max pooling with lanes in whole vectors runs the whole windows as max_columns' blocks
// (with the NaN chain only when the rows hold a NaN), the clipped ones at the edges pixel by
// pixel.
template <bool kMax>
GK_INLINE void pool_row_blocked_body(const PoolGeometry& g, int64_t lanes, const float* x, int64_t oh, float* y) {
  const Window wh = window(g.h, oh);
  const int64_t row_floats = g.w.in * lanes, rows = wh.hi - wh.lo;
  const float* x_rows = x + wh.lo * row_floats;
  std::pair<int64_t, int64_t> blocks = {g.w.out, g.w.out};  // none
  if (kMax && lanes % 8 == 0) {
    blocks = whole_columns(g.w);
    if (may_hold_nan(x_rows, rows * row_floats))
      max_columns<true>(g, lanes, x_rows, rows, row_floats, blocks.first, blocks.second, y);
    else
      max_columns<false>(g, lanes, x_rows, rows, row_floats, blocks.first, blocks.second, y);
  }
  for (int64_t ow = 0; ow < g.w.out; ++ow) {
    if (ow == blocks.first) ow = blocks.second;
    if (ow == g.w.out) break;
    const Window ww = window(g.w, ow);
    pool_pixel_lanes<kMax>(x_rows + ww.lo * lanes, rows, ww.hi - ww.lo, row_floats, lanes,
                           kMax ? 1.0f : divisor(g, wh, ww), y + ow * lanes);
  }
}

// ---------------------------------------------------------------- planar layout

// y[j] = combine(y[j], x[j * s + off]) for j in [j0, j1): stride 1 and 2 by vectors (the
// stride-2 loads stay inside the input row of `width` floats), others one at a time.
template <bool kMax>
GK_INLINE void combine_tap(float* y, const float* x, int64_t off, int64_t s, int64_t width, int64_t j0, int64_t j1) {
  int64_t j = j0;
  if (s == 1) {
    for (; j + 8 <= j1; j += 8) store(y + j, combine<kMax>(load8(y + j), load8(x + j + off)));
  } else if (s == 2) {
    const v8i even = {0, 2, 4, 6, 8, 10, 12, 14};
    for (; j + 8 <= j1 && 2 * j + off + 16 <= width; j += 8) {
      const float* p = x + 2 * j + off;
      store(y + j, combine<kMax>(load8(y + j), __builtin_shuffle(load8(p), load8(p + 8), even)));
    }
  }
  for (; j < j1; ++j) y[j] = combine<kMax>(y[j], x[j * s + off]);
}

// One output row of an NCHW plane: x is the plane's first input row. The row is built tap
// by tap: each tap (kernel column q of an input row) adds x[j * s + q - pad] to the outputs
// j whose column lies inside the input.
template <bool kMax>
GK_INLINE void pool_row_planar_body(const PoolGeometry& g, int64_t, const float* x, int64_t oh, float* y) {
  const Window wh = window(g.h, oh);
  const Axis& a = g.w;
  for (int64_t j = 0; j < a.out; ++j) y[j] = kMax ? kNegInf : 0.0f;
  for (int64_t ih = wh.lo; ih < wh.hi; ++ih)
    for (int64_t q = 0; q < a.k; ++q) {
      const int64_t off = q - a.pad_before;  // input column of output 0
      const int64_t j0 = off >= 0 ? 0 : (-off + a.s - 1) / a.s;
      if (a.in - 1 - off < 0) break;  // this and later taps lie past the input for every j
      const int64_t j1 = std::min(a.out, (a.in - 1 - off) / a.s + 1);
      combine_tap<kMax>(y, x + ih * a.in, off, a.s, a.in, j0, j1);
    }
  if (kMax) return;
  for (int64_t j = 0; j < a.out; ++j) y[j] /= divisor(g, wh, window(a, j));
}

// The row functions per ISA (the active kernel's; see use_avx2).
using PoolRowFn = void (*)(const PoolGeometry&, int64_t, const float*, int64_t, float*);
#define GK_POOL_ROW_VARIANTS(body, suffix, attr)                                                              \
  attr void body##_max_##suffix(const PoolGeometry& g, int64_t l, const float* x, int64_t oh, float* y) { \
    body<true>(g, l, x, oh, y);                                                                           \
  }                                                                                                       \
  attr void body##_avg_##suffix(const PoolGeometry& g, int64_t l, const float* x, int64_t oh, float* y) { \
    body<false>(g, l, x, oh, y);                                                                          \
  }
GK_POOL_ROW_VARIANTS(pool_row_blocked_body, baseline, )
GK_POOL_ROW_VARIANTS(pool_row_planar_body, baseline, )
#if defined(__x86_64__)
GK_POOL_ROW_VARIANTS(pool_row_blocked_body, avx2, GK_OPS_AVX2)
GK_POOL_ROW_VARIANTS(pool_row_planar_body, avx2, GK_OPS_AVX2)
#endif

PoolRowFn pool_row_fn(bool max, bool planar) {
#if defined(__x86_64__)
  if (use_avx2()) {
    if (planar) return max ? pool_row_planar_body_max_avx2 : pool_row_planar_body_avg_avx2;
    return max ? pool_row_blocked_body_max_avx2 : pool_row_blocked_body_avg_avx2;
  }
#endif
  if (planar) return max ? pool_row_planar_body_max_baseline : pool_row_planar_body_avg_baseline;
  return max ? pool_row_blocked_body_max_baseline : pool_row_blocked_body_avg_baseline;
}

void run_pool(const PoolGeometry& g, const Blocked& in, const Blocked& out, const float* x, float* y) {
  const PoolRowFn row = pool_row_fn(g.max, in.lanes == 1);
  const int64_t rows = out.rows();
  // Traffic, plus the window's taps (read from L1) at a byte each.
  const double work = 4.0 * double(in.floats() + out.floats()) + double(out.floats()) * double(g.h.k * g.w.k);
  parallel_region(threads_for_bytes(work), [&] {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t oh = r % out.h, ib = r / out.h, img = ib / out.blocks, b = ib % out.blocks;
      float* yr = y + out.row_offset(img, b, oh);
      row(g, in.lanes, x + in.row_offset(img, b, 0), oh, yr);
      if (b == out.blocks - 1) zero_padding_lanes(yr, out.w, out.lanes, out.real_lanes(b));
    }
  });
}

// ---------------------------------------------------------------- global average

// Sums run in blocks of this many pixels, added up at the end: the rounding error bound
// grows with the block length plus the block count rather than with the plane's size.
constexpr int64_t kSumBlock = 256;

// The mean of `pixels` pixels `lanes` floats apart, for lanes [0, N * |V|). Even and odd
// pixels sum apart: two addition chains instead of one.
template <typename V, int N>
GK_INLINE void mean_pixels(const float* x, int64_t pixels, int64_t lanes, float* y) {
  constexpr int64_t kWidth = sizeof(V) / sizeof(float);
  V total[N];
  for (int k = 0; k < N; ++k) total[k] = splat<V>(0.0f);
  for (int64_t p0 = 0; p0 < pixels; p0 += kSumBlock) {
    const int64_t p1 = std::min(pixels, p0 + kSumBlock);
    V even[N], odd[N];
    for (int k = 0; k < N; ++k) even[k] = odd[k] = splat<V>(0.0f);
    int64_t p = p0;
    for (; p + 2 <= p1; p += 2)
      for (int k = 0; k < N; ++k) {
        even[k] += load<V>(x + p * lanes + k * kWidth);
        odd[k] += load<V>(x + (p + 1) * lanes + k * kWidth);
      }
    if (p < p1)
      for (int k = 0; k < N; ++k) even[k] += load<V>(x + p * lanes + k * kWidth);
    for (int k = 0; k < N; ++k) total[k] += even[k] + odd[k];
  }
  for (int k = 0; k < N; ++k) store(y + k * kWidth, total[k] / splat<V>(float(pixels)));
}

// Lanes [0, count) of a blocked image's block (count <= kGlobalChunk): 16 at a time, 8, 4, 1.
GK_INLINE void mean_lanes_body(const float* x, int64_t pixels, int64_t lanes, int64_t count, float* y) {
  int64_t l = 0;
  for (; l + 16 <= count; l += 16) mean_pixels<v8, 2>(x + l, pixels, lanes, y + l);
  if (l + 8 <= count) mean_pixels<v8, 1>(x + l, pixels, lanes, y + l), l += 8;
  if (l + 4 <= count) mean_pixels<v4, 1>(x + l, pixels, lanes, y + l), l += 4;
  for (; l < count; ++l) mean_pixels<float, 1>(x + l, pixels, lanes, y + l);
}

// The mean of a contiguous plane (NCHW): four vector sums per block of kSumBlock * 4
// floats, then their lanes.
GK_INLINE float mean_plane_body(const float* x, int64_t count) {
  float total = 0.0f;
  for (int64_t i0 = 0; i0 < count; i0 += 4 * kSumBlock) {
    const int64_t i1 = std::min(count, i0 + 4 * kSumBlock);
    v8 acc[4] = {};
    int64_t i = i0;
    for (; i + 32 <= i1; i += 32)
      for (int k = 0; k < 4; ++k) acc[k] += load8(x + i + 8 * k);
    for (; i + 8 <= i1; i += 8) acc[0] += load8(x + i);
    const v8 s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < i1; ++i) sum += x[i];
    total += sum;
  }
  return total / float(count);
}

void mean_lanes_baseline(const float* x, int64_t pixels, int64_t lanes, int64_t count, float* y) {
  mean_lanes_body(x, pixels, lanes, count, y);
}
float mean_plane_baseline(const float* x, int64_t count) { return mean_plane_body(x, count); }
#if defined(__x86_64__)
GK_OPS_AVX2 void mean_lanes_avx2(const float* x, int64_t pixels, int64_t lanes, int64_t count, float* y) {
  mean_lanes_body(x, pixels, lanes, count, y);
}
GK_OPS_AVX2 float mean_plane_avx2(const float* x, int64_t count) { return mean_plane_body(x, count); }
#endif

// NHWC's one block is cut into chunks of lanes so that a single image still spreads over
// threads; 64 lanes keep a chunk's pixel a whole number of cache lines.
constexpr int64_t kGlobalChunk = 64;

void run_global_avg(const Blocked& in, const Blocked& out, const float* x, float* y) {
  auto lanes_fn = mean_lanes_baseline;
  auto plane_fn = mean_plane_baseline;
#if defined(__x86_64__)
  if (use_avx2()) lanes_fn = mean_lanes_avx2, plane_fn = mean_plane_avx2;
#endif
  const int64_t pixels = in.h * in.w, chunks = (in.lanes + kGlobalChunk - 1) / kGlobalChunk;
  const int64_t units = in.n * in.blocks * chunks;
  parallel_region(threads_for_bytes(4.0 * double(in.floats())), [&] {
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t chunk = u % chunks, ib = u / chunks, img = ib / in.blocks, b = ib % in.blocks;
      const float* xb = x + in.row_offset(img, b, 0);
      float* yb = y + out.row_offset(img, b, 0);
      if (in.lanes == 1) {
        yb[0] = plane_fn(xb, pixels);
        continue;
      }
      const int64_t l0 = chunk * kGlobalChunk, count = std::min(kGlobalChunk, in.lanes - l0);
      lanes_fn(xb + l0, pixels, in.lanes, count, yb + l0);
      if (b == in.blocks - 1 && l0 + count == in.lanes) zero_padding_lanes(yb, 1, out.lanes, out.real_lanes(b));
    }
  });
}

}  // namespace
}  // namespace ops
}  // namespace gk

using gk::ops::Blocked;
using gk::ops::PoolGeometry;

GK_OPS_EXPORT gk_status gk_pool2d_output_size(const gk_tensor_desc* in, const gk_pool_desc* pool, int64_t* out_h,
                                              int64_t* out_w) {
  const char* fn = "gk_pool2d_output_size";
  return gk::ops::guarded(fn, [&] {
    PoolGeometry g;
    if (!gk::ops::check_pool(fn, in, pool, &g) || !gk::ops::check_pointer(fn, "out_h", out_h) ||
        !gk::ops::check_pointer(fn, "out_w", out_w))
      return GK_ERR_INVALID_ARGUMENT;
    *out_h = g.h.out;
    *out_w = g.w.out;
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_pool2d(const gk_tensor_desc* in, const gk_pool_desc* pool, const float* x, float* y) {
  const char* fn = gk::ops::kPool;
  return gk::ops::guarded(fn, [&] {
    PoolGeometry g;
    if (!gk::ops::check_pool(fn, in, pool, &g)) return GK_ERR_INVALID_ARGUMENT;
    const gk_tensor_desc out_desc = {in->n, in->c, g.h.out, g.w.out, in->layout};
    if (!gk::ops::check_tensor(fn, "the output", &out_desc) || !gk::ops::check_pointer(fn, "x", x) ||
        !gk::ops::check_pointer(fn, "y", y))
      return GK_ERR_INVALID_ARGUMENT;
    const Blocked bi = gk::ops::blocked(*in), bo = gk::ops::blocked(out_desc);
    if (!gk::ops::check_disjoint(fn, "y", y, bo.floats(), "x", x, bi.floats())) return GK_ERR_INVALID_ARGUMENT;
    gk::ops::run_pool(g, bi, bo, x, y);
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_global_avg_pool(const gk_tensor_desc* in, const float* x, float* y) {
  const char* fn = gk::ops::kGlobal;
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_tensor(fn, "in", in) || !gk::ops::check_pointer(fn, "x", x) ||
        !gk::ops::check_pointer(fn, "y", y))
      return GK_ERR_INVALID_ARGUMENT;
    const gk_tensor_desc out_desc = {in->n, in->c, 1, 1, in->layout};
    const Blocked bi = gk::ops::blocked(*in), bo = gk::ops::blocked(out_desc);
    if (!gk::ops::check_disjoint(fn, "y", y, bo.floats(), "x", x, bi.floats())) return GK_ERR_INVALID_ARGUMENT;
    gk::ops::run_global_avg(bi, bo, x, y);
    return GK_OK;
  });
}
