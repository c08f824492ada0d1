// Direct convolution for any grouping: each output channel's plane is computed one output
// row at a time, tap by tap (ic, r, s), as y[ow] += w * x[ow * stride + offset] over the
// output columns whose input column is inside the image (padding contributes nothing, so
// no padded copy). The update is vectorized along the row: for stride 1 the input run is
// contiguous; for a larger stride the input row is first split into its `stride` phases
// (x[i*stride + ph]), after which every tap reads one phase contiguously. Worth it when
// each group is too small for a GEMM to pay off. (Channel-wise convolutions have their
// own algorithm, vectorized over channels: algo_depthwise.cpp.)
// Threads split the (batch, output channel) planes; bias and activation are applied to
// each row while it is in L1. Adding to the output, a row starts from the residual in it.
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

// Everything about a plan's planes that depends only on the shape, computed once.
struct PlaneGeometry {
  Shape s;
  std::vector<TapColumn> taps;  // where each tap column reads
  explicit PlaneGeometry(const Shape& shape) : s(shape), taps(tap_columns(shape)) {}
};

// Any grouping: output rows tap by tap (y[lo:hi] += w * x[...]), several input channels.
GK_INLINE void direct_plane(const PlaneGeometry& g, const float* x, const float* w, float bias,
                            float* y, float* buffer) {
  const Shape& s = g.s;
  const gk_conv_desc& d = s.d;
  const TapColumn* taps = g.taps.data();
  const int64_t H = d.in_height, W = d.in_width, sw = d.stride_w;
  const int64_t phase_len = (W + sw - 1) / sw;
  for (int64_t oh = 0; oh < s.oh; ++oh) {
    float* yrow = y + oh * s.ow;
    if (s.adds_to_output()) {  // the row starts from the residual already there
      for (int64_t j = 0; j < s.ow; ++j) yrow[j] += bias;
    } else {
      std::fill(yrow, yrow + s.ow, bias);
    }
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
    if (conv_config().kernel->simd != SimdLevel::Baseline) plane_ = direct_plane_avx2;
#endif
  }

  // One input row split into phases.
  WorkspaceNeed need() const override { return {0, s_.d.in_width + s_.d.stride_w}; }

  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t planes = d.batch * d.out_channels, in_plane = d.in_height * d.in_width;
    const int threads = ws.cap(threads_for(s_.flops()));
    parallel_region(threads, [&] {
      float* phases = ws.block(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t idx = 0; idx < planes; ++idx) {
        const int64_t n = idx / d.out_channels, oc = idx % d.out_channels, g = oc / s_.ocg;
        plane_(geometry_, input + (n * d.in_channels + g * s_.icg) * in_plane, w_.data() + oc * s_.k_gemm,
               bias_.empty() ? 0.0f : bias_[static_cast<size_t>(oc)],
               output + (n * d.out_channels + oc) * s_.pixels(), phases);
      }
    });
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

}  // namespace

const Algorithm* direct_algorithm() {
  static const Direct a;
  return &a;
}

}  // namespace conv
}  // namespace gk
