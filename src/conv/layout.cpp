// Tensor layouts: NCHW, NHWC and NCHWx (channels in blocks of x, zero-padded), and the
// conversions between them. Every conversion goes through the element's (n, c, h, w).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/vec.h"

namespace gk {
namespace conv {

bool valid_layout(int layout) { return layout >= GK_LAYOUT_NCHW && layout <= GK_LAYOUT_NCHW16; }

int64_t channel_block(gk_layout layout) {
  switch (layout) {
    case GK_LAYOUT_NCHW4: return 4;
    case GK_LAYOUT_NCHW8: return 8;
    case GK_LAYOUT_NCHW16: return 16;
    default: return 1;
  }
}

void zero_padding_channels(float* t, gk_layout layout, int64_t n, int64_t c, int64_t pixels) {
  const int64_t x = channel_block(layout), blocks = (c + x - 1) / x;
  if (c % x == 0) return;
  for (int64_t b = 0; b < n; ++b) {
    float* last = t + ((b + 1) * blocks - 1) * pixels * x;  // image b's last channel block
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t l = c % x; l < x; ++l) last[p * x + l] = 0.0f;
  }
}

namespace {

// Offset of element (n, c, h, w) in a tensor of `layout` with c_pad channels (padded).
struct Indexer {
  gk_layout layout;
  int64_t c_pad, h, w, x;
  int64_t at(int64_t n, int64_t c, int64_t i, int64_t j) const {
    switch (layout) {
      case GK_LAYOUT_NHWC: return ((n * h + i) * w + j) * c_pad + c;
      case GK_LAYOUT_NCHW: return ((n * c_pad + c) * h + i) * w + j;
      default: return (((n * (c_pad / x) + c / x) * h + i) * w + j) * x + c % x;
    }
  }
};

Indexer indexer(gk_layout layout, int64_t c, int64_t h, int64_t w) {
  const int64_t x = channel_block(layout);
  return {layout, (c + x - 1) / x * x, h, w, x};
}

// NCHW <-> NCHWx / NHWC, the conversions gk_conv_run makes: per image and channel block,
// the block's x planes (NHWC: all c) interleaved into one run, or back.
struct Grouping {
  int64_t x, blocks;  // channels per interleaved group, groups per image
};
bool planar_grouping(gk_layout layout, int64_t c, Grouping* g) {
  if (layout == GK_LAYOUT_NHWC) {
    *g = {c, 1};
    return c <= 64;  // wider rows: the per-element path below is as good
  }
  const int64_t x = channel_block(layout);
  *g = {x, (c + x - 1) / x};
  return x > 1;
}

// One image's channel block: its x planes interleaved into one run, or back.
GK_INLINE void convert_planar_block(const float* src, float* dst, bool to_planar, int64_t c, int64_t hw,
                                    Grouping g, int64_t b, int64_t blk) {
  const float* rows_in[64];
  float* rows_out[64];
  for (int64_t l = 0; l < g.x; ++l) {
    const int64_t ch = blk * g.x + l;
    const int64_t plane = (b * c + ch) * hw;
    rows_in[l] = ch < c ? (to_planar ? nullptr : src + plane) : nullptr;
    rows_out[l] = ch < c && to_planar ? dst + plane : nullptr;
  }
  const int64_t run = (b * g.blocks + blk) * hw * g.x;
  if (to_planar) {
    deinterleave(src + run, g.x, hw, rows_out);
  } else {
    interleave(rows_in, g.x, hw, dst + run);
  }
}

// The one region not opened through parallel_region(): this body is compiled once per ISA
// (the target("avx2") wrapper below), and a lambda would not inherit the target. As there,
// one thread runs without a region: libgomp builds (and allocates) a team even for one.
GK_INLINE void convert_planar(const float* src, float* dst, bool to_planar, int64_t n, int64_t c, int64_t hw,
                              Grouping g, int threads) {
  if (threads <= 1 && !omp_in_parallel()) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t blk = 0; blk < g.blocks; ++blk) convert_planar_block(src, dst, to_planar, c, hw, g, b, blk);
    return;
  }
#pragma omp parallel for collapse(2) num_threads(threads > 1 ? threads : 1)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t blk = 0; blk < g.blocks; ++blk) convert_planar_block(src, dst, to_planar, c, hw, g, b, blk);
}

void convert_planar_baseline(const float* src, float* dst, bool to_planar, int64_t n, int64_t c, int64_t hw,
                             Grouping g, int threads) {
  convert_planar(src, dst, to_planar, n, c, hw, g, threads);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void convert_planar_avx2(const float* src, float* dst, bool to_planar, int64_t n,
                                                         int64_t c, int64_t hw, Grouping g, int threads) {
  convert_planar(src, dst, to_planar, n, c, hw, g, threads);
}
#endif

// NHWC <-> NCHWx: per image and pixel, each channel block's X contiguous floats copied
// (the padding channels of an NCHWx destination zero). Through (n, c, h, w) one element at
// a time these took longer than the convolutions they serve. The whole blocks move as
// fixed-size copies (vector moves) with the block pointers stepped, not recomputed: per
// block a run of copy_run's length checks and index products made 112x112x64 NCHW8 ->
// NHWC 5.5x a memcpy of its bytes (Zen 4, one thread, 0.41 ms).
template <int X>
GK_INLINE void convert_nhwc_pixels(const float* src, float* dst, bool to_nhwc, int64_t c, int64_t hw, int64_t b,
                                   int64_t p0, int64_t p1) {
  const int64_t blocks = (c + X - 1) / X, whole = c / X, tail = c - whole * X, plane = hw * X;
  const int64_t first = (b * blocks * hw + p0) * X;  // pixel p0 of the image's first block
  for (int64_t p = p0; p < p1; ++p) {
    float* nhwc_out = dst + (b * hw + p) * c;
    const float* nhwc_in = src + (b * hw + p) * c;
    const int64_t at = first + (p - p0) * X;
    if (to_nhwc) {
      const float* blk = src + at;
      for (int64_t q = 0; q < whole; ++q, blk += plane) std::memcpy(nhwc_out + q * X, blk, X * sizeof(float));
      for (int64_t l = 0; l < tail; ++l) nhwc_out[whole * X + l] = blk[l];
    } else {
      float* blk = dst + at;
      for (int64_t q = 0; q < whole; ++q, blk += plane) std::memcpy(blk, nhwc_in + q * X, X * sizeof(float));
      if (tail) {
        for (int64_t l = 0; l < X; ++l) blk[l] = l < tail ? nhwc_in[whole * X + l] : 0.0f;
      }
    }
  }
}
// Compiled per ISA as convert_planar, for the same reason; a pixel range per image per
// thread.
template <int X>
GK_INLINE void convert_nhwc_x(const float* src, float* dst, bool to_nhwc, int64_t n, int64_t c, int64_t hw,
                              int threads) {
  if (threads <= 1 && !omp_in_parallel()) {
    for (int64_t b = 0; b < n; ++b) convert_nhwc_pixels<X>(src, dst, to_nhwc, c, hw, b, 0, hw);
    return;
  }
  constexpr int64_t kPixels = 256;  // per work item
  const int64_t chunks = (hw + kPixels - 1) / kPixels;
#pragma omp parallel for collapse(2) num_threads(threads > 1 ? threads : 1)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < chunks; ++k)
      convert_nhwc_pixels<X>(src, dst, to_nhwc, c, hw, b, k * kPixels, std::min(hw, (k + 1) * kPixels));
}
// x: the NCHWx layout's block, 4, 8 or 16.
GK_INLINE void convert_nhwc(const float* src, float* dst, bool to_nhwc, int64_t n, int64_t c, int64_t hw, int64_t x,
                            int threads) {
  switch (x) {
    case 4: return convert_nhwc_x<4>(src, dst, to_nhwc, n, c, hw, threads);
    case 8: return convert_nhwc_x<8>(src, dst, to_nhwc, n, c, hw, threads);
    default: return convert_nhwc_x<16>(src, dst, to_nhwc, n, c, hw, threads);  // x == 16
  }
}
void convert_nhwc_baseline(const float* src, float* dst, bool to_nhwc, int64_t n, int64_t c, int64_t hw, int64_t x,
                           int threads) {
  convert_nhwc(src, dst, to_nhwc, n, c, hw, x, threads);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void convert_nhwc_avx2(const float* src, float* dst, bool to_nhwc, int64_t n,
                                                       int64_t c, int64_t hw, int64_t x, int threads) {
  convert_nhwc(src, dst, to_nhwc, n, c, hw, x, threads);
}
#endif

}  // namespace

}  // namespace conv
}  // namespace gk

extern "C" {

__attribute__((visibility("default"))) int64_t gk_tensor_size(gk_layout layout, int64_t n,
                                                              int64_t c, int64_t h, int64_t w) {
  if (!gk::conv::valid_layout(gk::conv::raw_enum(layout)) || n < 0 || c < 0 || h < 0 || w < 0) return -1;
  if (c > (int64_t{1} << 56)) return -1;  // past any addressable tensor; keeps the rounding below from overflowing
  const int64_t x = gk::conv::channel_block(layout);
  // c rounded up without overflow; a tensor past what a process can address is no tensor.
  const int64_t c_pad = c / x * x + (c % x ? x : 0);
  int64_t bytes = 0;
  if (!gk::conv::float_bytes_within_limit({n, c_pad, h, w}, &bytes)) return -1;
  return bytes / 4;
}

__attribute__((visibility("default"))) gk_status gk_convert_layout(const float* src,
                                                                   gk_layout src_layout, float* dst,
                                                                   gk_layout dst_layout, int64_t n,
                                                                   int64_t c, int64_t h, int64_t w) {
  return gk::guard_c_boundary("gk_convert_layout", [&] {
  if (!src || !dst || !gk::conv::valid_layout(gk::conv::raw_enum(src_layout)) ||
      !gk::conv::valid_layout(gk::conv::raw_enum(dst_layout)) ||
      n < 0 || c < 0 || h < 0 || w < 0) {
    gk::set_last_error("gk_convert_layout: NULL pointer, unknown layout or negative size");
    return GK_ERR_INVALID_ARGUMENT;
  }
  if (gk_tensor_size(src_layout, n, c, h, w) < 0 || gk_tensor_size(dst_layout, n, c, h, w) < 0) {
    gk::set_last_error("gk_convert_layout: n x c x h x w (%lld x %lld x %lld x %lld) exceeds 2^56 bytes",
                       (long long)n, (long long)c, (long long)h, (long long)w);
    return GK_ERR_INVALID_ARGUMENT;
  }
  const auto from = gk::conv::indexer(src_layout, c, h, w);
  const auto to = gk::conv::indexer(dst_layout, c, h, w);
  if (src_layout == dst_layout) {
    std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(gk_tensor_size(dst_layout, n, c, h, w)));
    return GK_OK;
  }
  const int threads = gk::threads_for(8.0 * n * c * h * w);
  if (threads > 1) gk::note_parallel_region();
  gk::conv::Grouping g;
  const bool from_planar = src_layout == GK_LAYOUT_NCHW, to_planar = dst_layout == GK_LAYOUT_NCHW;
  if ((from_planar && gk::conv::planar_grouping(dst_layout, c, &g)) ||
      (to_planar && gk::conv::planar_grouping(src_layout, c, &g))) {
#if defined(__x86_64__)
    if (gk::conv_config().kernel->simd != gk::SimdLevel::Baseline) {
      gk::conv::convert_planar_avx2(src, dst, to_planar, n, c, h * w, g, threads);
      return GK_OK;
    }
#endif
    gk::conv::convert_planar_baseline(src, dst, to_planar, n, c, h * w, g, threads);
    return GK_OK;
  }
  const bool from_nhwc = src_layout == GK_LAYOUT_NHWC, to_nhwc = dst_layout == GK_LAYOUT_NHWC;
  const int64_t x = gk::conv::channel_block(from_nhwc ? dst_layout : src_layout);
  if ((from_nhwc || to_nhwc) && x > 1) {
#if defined(__x86_64__)
    if (gk::conv_config().kernel->simd != gk::SimdLevel::Baseline) {
      gk::conv::convert_nhwc_avx2(src, dst, to_nhwc, n, c, h * w, x, threads);
      return GK_OK;
    }
#endif
    gk::conv::convert_nhwc_baseline(src, dst, to_nhwc, n, c, h * w, x, threads);
    return GK_OK;
  }
  // Padding channels of an NCHWx destination are zero.
  if (to.c_pad != c)
    std::memset(dst, 0, sizeof(float) * static_cast<size_t>(gk_tensor_size(dst_layout, n, c, h, w)));
  gk::parallel_region(threads, [&] {
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < h; ++i)
          for (int64_t j = 0; j < w; ++j) dst[to.at(b, ch, i, j)] = src[from.at(b, ch, i, j)];
  });
  return GK_OK;
  });
}
}
