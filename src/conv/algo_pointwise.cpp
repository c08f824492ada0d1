// The NCHW8 engines on the ISA's pointwise kernels (conv/pointwise.h), as algorithms of
// their own so that plans, GEMMKIT_VERBOSE and Fast-Run name what runs:
//  - pointwise_nchw8: a 1x1 read in place, other kernels and strides from im2col chunks;
//  - direct_nchw8: under 8 input channels (RGB stems), the image read through tap offsets.
// AUTO prefers them to gemm_1x1 and im2col_gemm in NCHW8 (plan.cpp); those then run the
// same layers as GEMMs with B packed from the blocked image, which Fast-Run times beside.
#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/pointwise.h"

namespace gk {
namespace conv {
namespace {

class PointwisePrepared final : public Prepared {
 public:
  PointwisePrepared(const Shape& s, const float* weights, const float* bias)
      : s_(s), engine_(pointwise_kernel(), s, weights, bias) {}

  bool native_layout(gk_layout layout) const override { return layout == GK_LAYOUT_NCHW8; }
  bool reads_nchw_input() const override { return engine_.reads_nchw_input(); }
  WorkspaceNeed need() const override { return {0, engine_.workspace_floats()}; }

  // Per image; the engine zeroes the padding channels of the output's last block.
  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t pixels = s_.pixels();
    const bool planar_in = s_.in_layout == GK_LAYOUT_NCHW && engine_.reads_nchw_input();
    const int64_t in_image = (planar_in ? d.in_channels : round_up8(d.in_channels)) * d.in_height * d.in_width;
    const int64_t out_image = round_up8(d.out_channels) * pixels;
    const int threads = ws.cap(threads_for(2.0 * s_.ocg * pixels * s_.k_gemm));
    for (int64_t n = 0; n < d.batch; ++n) engine_.run(input + n * in_image, output + n * out_image, threads, ws);
  }

 private:
  static int64_t round_up8(int64_t c) { return (c + 7) / 8 * 8; }
  Shape s_;
  PointwiseNchw8 engine_;
};

// The shape the engines run: an NCHW8 one, or an NHWC one's NCHW8 form (through NCHW8
// copies, prepare_in_layout); false when neither.
bool engine_shape(const Shape& s, Shape* engine) {
  if (s.d.layout == GK_LAYOUT_NCHW8) {
    *engine = s;
    return true;
  }
  return nchw8_form(s, engine);
}

// What both engines need: NCHW8 (or NHWC with an NCHW8 form), one group, pointwise kernels
// that serve the shape.
std::string engine_unusable(const Shape& s) {
  Shape e;
  if (!engine_shape(s, &e)) return "runs NCHW8, or NHWC of 8+ input channels through NCHW8 copies";
  if (s.d.groups != 1) return "grouped";
  if (!PointwiseNchw8::usable(pointwise_kernel(), e)) return "no pointwise kernels in this CPU's kernel";
  return "";
}
bool engine_runs_direct(const Shape& s) {
  Shape e;
  return engine_shape(s, &e) && PointwiseNchw8::runs_direct(e);
}

class PointwiseAlgorithm final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_POINTWISE_NCHW8; }
  const char* name() const override { return "pointwise_nchw8"; }
  std::string unusable_reason(const Shape& s) const override {
    const std::string why = engine_unusable(s);
    if (!why.empty()) return why;
    return engine_runs_direct(s) ? "under 8 input channels (direct_nchw8 serves)" : "";
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return std::make_unique<PointwisePrepared>(s, w, b);
  }
};

class DirectAlgorithm final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_DIRECT_NCHW8; }
  const char* name() const override { return "direct_nchw8"; }
  std::string unusable_reason(const Shape& s) const override {
    const std::string why = engine_unusable(s);
    if (!why.empty()) return why;
    return engine_runs_direct(s) ? "" : "8 or more input channels, or a 1x1 in place (pointwise_nchw8 serves)";
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return std::make_unique<PointwisePrepared>(s, w, b);
  }
};

}  // namespace

const Algorithm* pointwise_nchw8_algorithm() {
  static const PointwiseAlgorithm a;
  return &a;
}
const Algorithm* direct_nchw8_algorithm() {
  static const DirectAlgorithm a;
  return &a;
}

}  // namespace conv
}  // namespace gk
