// Direct convolution. Depthwise (one input channel per group): each plane is copied once
// into a zero-padded, stride-phase-split buffer, then every output row is computed 8
// columns at a time with all taps accumulated in a register (no bounds checks). Other
// groupings: each output channel's plane is computed one output row at a time,
// tap by tap (ic, r, s), as y[ow] += w * x[ow * stride + offset] over the output columns
// whose input column is inside the image (padding contributes nothing, so no padded copy).
// The update is vectorized along the row: for stride 1 the input run is contiguous; for a
// larger stride the input row is first split into its `stride` phases (x[i*stride + ph]),
// after which every tap reads one phase contiguously.
//  - depthwise: groups == in_channels (one input channel per group), MobileNet/ShuffleNet.
//  - direct: any groups; worth it when each group is too small for a GEMM to pay off.
// Threads split the (batch, output channel) planes; bias and activation are applied to
// each row while it is in L1.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/vec.h"

namespace gk {
namespace conv {
namespace {

GK_INLINE void axpy_row(float* __restrict y, const float* __restrict x, float w, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8 a, b;
    std::memcpy(&a, y + i, sizeof a);
    std::memcpy(&b, x + i, sizeof b);
    a += b * w;
    std::memcpy(y + i, &a, sizeof a);
  }
  for (; i < n; ++i) y[i] += w * x[i];
}

GK_INLINE v8 max8(const v8& a, const v8& b) { return a > b ? a : b; }
GK_INLINE v8 min8(const v8& a, const v8& b) { return a < b ? a : b; }
GK_INLINE v8 activate8(const v8& v, gk_activation act) {
  if (act == GK_ACT_NONE) return v;
  const v8 relu = max8(v, v8{});
  return act == GK_ACT_RELU6 ? min8(relu, v8{} + 6.0f) : relu;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }


// Where tap column s reads: input column ow * sw + off = (ow + base) * sw + phase, so with
// the row split into stride phases it is element ow + base of phase `phase`, valid for
// output columns [lo, hi). Depends only on s and the shape: computed once per plan.
struct TapColumn {
  int64_t phase, base, lo, hi;
};

std::vector<TapColumn> tap_columns(const Shape& s) {
  const gk_conv_desc& d = s.d;
  const int64_t sw = d.stride_w;
  std::vector<TapColumn> taps(static_cast<size_t>(d.kernel_w));
  for (int64_t sx = 0; sx < d.kernel_w; ++sx) {
    const int64_t off = sx * d.dilation_w - d.pad_left;
    const int64_t phase = ((off % sw) + sw) % sw, base = floor_div(off - phase, sw);
    const int64_t len = (d.in_width - phase + sw - 1) / sw;  // elements in that phase
    taps[static_cast<size_t>(sx)] = {phase, base, std::max<int64_t>(0, -base), std::min(s.ow, len - base)};
  }
  return taps;
}

GK_INLINE float activate(float v, gk_activation act) {
  if (act == GK_ACT_NONE) return v;
  v = std::max(v, 0.0f);
  return act == GK_ACT_RELU6 ? std::min(v, 6.0f) : v;
}

// A channel plane zero-padded and split into stride phases, so that every tap of every
// output column reads inside it: element (ih, iw) of the padded plane is at
// ((ih * sw) + iw % sw) * len + iw / sw. Rows carry 8 floats of slack so an 8-wide read at
// the end of an output row stays inside the buffer.
struct PaddedPlane {
  int64_t hp, wp, sw, len;
  explicit PaddedPlane(const Shape& s)
      : hp(s.d.in_height + s.d.pad_top + s.d.pad_bottom),
        wp(s.d.in_width + s.d.pad_left + s.d.pad_right),
        sw(s.d.stride_w),
        len((wp + s.d.stride_w - 1) / s.d.stride_w + 8) {}
  int64_t floats() const { return hp * sw * len; }
};

GK_INLINE void fill_padded_plane(const Shape& s, const PaddedPlane& pp, const float* x, float* buf) {
  const gk_conv_desc& d = s.d;
  for (int64_t ihp = 0; ihp < pp.hp; ++ihp) {
    const int64_t ih = ihp - d.pad_top;
    const bool inside = ih >= 0 && ih < d.in_height;
    for (int64_t ph = 0; ph < pp.sw; ++ph) {
      float* row = buf + (ihp * pp.sw + ph) * pp.len;
      if (!inside) {
        zero_run(row, pp.len);
        continue;
      }
      // Element i is input column i * sw + ph - pad_left: inside for i in [lo, hi).
      const int64_t first = ph - d.pad_left;
      const int64_t lo = first >= 0 ? 0 : std::min(pp.len, (-first + pp.sw - 1) / pp.sw);
      const int64_t hi = std::max(lo, std::min(pp.len, (d.in_width - first + pp.sw - 1) / pp.sw));
      gather_padded(row, x + ih * d.in_width + first, pp.sw, lo, hi, pp.len);
    }
  }
}

// Everything about a plan's planes that depends only on the shape, computed once.
struct PlaneGeometry {
  Shape s;
  std::vector<TapColumn> taps;  // row-by-row path: where each tap column reads
  PaddedPlane padded;           // depthwise path: the padded, phase-split plane
  std::vector<int64_t> offsets;  // depthwise path: tap (r, s) of output (0, 0) in it
  explicit PlaneGeometry(const Shape& shape) : s(shape), taps(tap_columns(shape)), padded(shape) {
    const gk_conv_desc& d = shape.d;
    for (int64_t r = 0; r < d.kernel_h; ++r)
      for (int64_t sx = 0; sx < d.kernel_w; ++sx) {
        const int64_t col = sx * d.dilation_w;
        offsets.push_back((r * d.dilation_h * padded.sw + col % padded.sw) * padded.len + col / padded.sw);
      }
  }
};

// Channel-wise plane (one input channel): the plane is padded once, then each output row
// is computed 8 columns at a time, accumulated in a register over all R x S taps.
GK_INLINE void depthwise_plane(const PlaneGeometry& g, const float* x, const float* w, float bias,
                               float* y, float* buffer) {
  const Shape& s = g.s;
  const gk_conv_desc& d = s.d;
  const PaddedPlane& pp = g.padded;
  fill_padded_plane(s, pp, x, buffer);
  const int64_t taps = static_cast<int64_t>(g.offsets.size());
  const int64_t* offsets = g.offsets.data();
  const v8 bias8 = v8{} + bias;
  for (int64_t oh = 0; oh < s.oh; ++oh) {
    float* yrow = y + oh * s.ow;
    const float* origin = buffer + oh * d.stride_h * pp.sw * pp.len;
    int64_t ow = 0;
    // 32 columns per pass: each tap's weight feeds 4 independent FMAs.
    // (Four named accumulators: GCC keeps an array of them in memory.)
    for (; ow + 32 <= s.ow; ow += 32) {
      v8 a0 = bias8, a1 = bias8, a2 = bias8, a3 = bias8;
      for (int64_t t = 0; t < taps; ++t) {
        const float* src = origin + ow + offsets[t];
        const float wt = w[t];
        a0 += load8(src) * wt;
        a1 += load8(src + 8) * wt;
        a2 += load8(src + 16) * wt;
        a3 += load8(src + 24) * wt;
      }
      store8(yrow + ow, activate8(a0, d.activation));
      store8(yrow + ow + 8, activate8(a1, d.activation));
      store8(yrow + ow + 16, activate8(a2, d.activation));
      store8(yrow + ow + 24, activate8(a3, d.activation));
    }
    // The rest 8 at a time; the last chunk may be partial (its extra lanes read the row's
    // slack and are not stored).
    for (; ow < s.ow; ow += 8) {
      v8 acc = bias8;
      for (int64_t t = 0; t < taps; ++t) acc += load8(origin + ow + offsets[t]) * w[t];
      acc = activate8(acc, d.activation);
      const int64_t n = std::min<int64_t>(8, s.ow - ow);
      if (n == 8) {
        store8(yrow + ow, acc);
      } else {
        for (int64_t q = 0; q < n; ++q) yrow[ow + q] = acc[q];
      }
    }
  }
}

// Any grouping: output rows tap by tap (y[lo:hi] += w * x[...]), several input channels.
GK_INLINE void direct_plane(const PlaneGeometry& g, const float* x, const float* w, float bias,
                            float* y, float* buffer) {
  const Shape& s = g.s;
  const gk_conv_desc& d = s.d;
  if (s.icg == 1) return depthwise_plane(g, x, w, bias, y, buffer);
  const TapColumn* taps = g.taps.data();
  const int64_t H = d.in_height, W = d.in_width, sw = d.stride_w;
  const int64_t phase_len = (W + sw - 1) / sw;
  for (int64_t oh = 0; oh < s.oh; ++oh) {
    float* yrow = y + oh * s.ow;
    std::fill(yrow, yrow + s.ow, bias);
    for (int64_t ic = 0; ic < s.icg; ++ic) {
      for (int64_t r = 0; r < d.kernel_h; ++r) {
        const int64_t ih = oh * d.stride_h - d.pad_top + r * d.dilation_h;
        if (ih < 0 || ih >= H) continue;
        const float* xrow = x + (ic * H + ih) * W;
        if (sw > 1) {  // split into phases: buffer[ph * phase_len + i] = xrow[i * sw + ph]
          for (int64_t ph = 0; ph < sw; ++ph)
            for (int64_t i = 0; i * sw + ph < W; ++i) buffer[ph * phase_len + i] = xrow[i * sw + ph];
        }
        const float* src_row = sw > 1 ? buffer : xrow;
        for (int64_t sx = 0; sx < d.kernel_w; ++sx) {
          const TapColumn& t = taps[sx];
          const float wv = w[(ic * d.kernel_h + r) * d.kernel_w + sx];
          if (t.lo < t.hi) axpy_row(yrow + t.lo, src_row + t.phase * phase_len + t.lo + t.base, wv, t.hi - t.lo);
        }
      }
    }
    for (int64_t j = 0; j < s.ow; ++j) yrow[j] = activate(yrow[j], d.activation);
  }
}

using PlaneFn = void (*)(const PlaneGeometry&, const float*, const float*, float, float*, float*);
void direct_plane_baseline(const PlaneGeometry& g, const float* x, const float* w, float b, float* y,
                           float* buffer) {
  direct_plane(g, x, w, b, y, buffer);
}
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void direct_plane_avx2(const PlaneGeometry& g, const float* x,
                                                          const float* w, float b, float* y,
                                                          float* buffer) {
  direct_plane(g, x, w, b, y, buffer);
}
#endif

class DirectConv final : public Prepared {
 public:
  DirectConv(const Shape& s, const float* weights, const float* bias)
      : s_(s), w_(weights, weights + s.d.out_channels * s.k_gemm), geometry_(s) {
    if (bias) bias_.assign(bias, bias + s.d.out_channels);
    plane_ = direct_plane_baseline;
#if defined(__x86_64__)
    if (active_config().kernel->simd != SimdLevel::Baseline) plane_ = direct_plane_avx2;
#endif
  }

  // Depthwise: one padded, phase-split plane; otherwise one input row split into phases.
  int64_t workspace_bytes() const override {
    return 4 * (s_.icg == 1 ? geometry_.padded.floats() : s_.d.in_width + s_.d.stride_w);
  }

  void run(const float* input, float* output) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t planes = d.batch * d.out_channels, in_plane = d.in_height * d.in_width;
    const int threads = threads_for(s_.flops());
    if (threads > 1) note_parallel_region();
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      float* phases = scratch(ScratchSlot::ConvRow, workspace_bytes() / 4);
#pragma omp for schedule(static)
      for (int64_t idx = 0; idx < planes; ++idx) {
        const int64_t n = idx / d.out_channels, oc = idx % d.out_channels, g = oc / s_.ocg;
        plane_(geometry_, input + (n * d.in_channels + g * s_.icg) * in_plane, w_.data() + oc * s_.k_gemm,
               bias_.empty() ? 0.0f : bias_[static_cast<size_t>(oc)],
               output + (n * d.out_channels + oc) * s_.pixels(), phases);
      }
    }
  }

 private:
  Shape s_;
  std::vector<float> w_, bias_;
  PlaneGeometry geometry_;
  PlaneFn plane_;
};

class Direct final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_DIRECT; }
  const char* name() const override { return "direct"; }
  std::string unusable_reason(const Shape&) const override { return ""; }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return std::unique_ptr<Prepared>(new DirectConv(s, w, b));
  }
};

class Depthwise final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_DEPTHWISE; }
  const char* name() const override { return "depthwise"; }
  std::string unusable_reason(const Shape& s) const override {
    return s.depthwise() ? "" : "not channel-wise (groups != in_channels)";
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return std::unique_ptr<Prepared>(new DirectConv(s, w, b));
  }
};

}  // namespace

const Algorithm* direct_algorithm() {
  static const Direct a;
  return &a;
}
const Algorithm* depthwise_algorithm() {
  static const Depthwise a;
  return &a;
}

}  // namespace conv
}  // namespace gk
