// The NCHW8 engines on the ISA's pointwise kernels (conv/pointwise.h), as algorithms of
// their own so that plans, GEMMKIT_VERBOSE and Fast-Run name what runs:
//  - pointwise_nchw8: a 1x1 read in place (NCHW8, or NHWC rows), other kernels and strides
//    from im2col chunks (NHWC: gathered from the rows);
//  - direct_nchw8: under 8 input channels (RGB stems), the image read through tap offsets.
// AUTO prefers them to gemm_1x1 and im2col_gemm in NCHW8 and NHWC (plan.cpp); those then
// run the same layers as GEMMs, which Fast-Run times beside.
// pointwise_nchw8 also runs grouped convolutions, a super-group of channel blocks at a time
// (GroupedPrepared).
#include <algorithm>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/pointwise.h"
#include "gemm/partition.h"

namespace gk {
namespace conv {
namespace {

// An NHWC 1x1 read in place runs the whole batch as one image of batch x height rows:
// its pixels are consecutive rows either way.
Shape engine_image(const Shape& s) {
  if (!PointwiseNchw8::reads_nhwc(s) || s.d.batch == 1) return s;
  gk_conv_desc d = s.d;
  d.in_height *= d.batch, d.batch = 1;
  Shape one;
  validate(d, &one);  // the same tensor as s's
  return one;
}

class PointwisePrepared final : public Prepared {
 public:
  PointwisePrepared(const Shape& s, const float* weights, const float* bias)
      : s_(engine_image(s)),
        engine_(pointwise_kernel(), s_, weights, bias),
        nhwc_out_(PointwiseNchw8::nhwc_in_place(s_) || PointwiseNchw8::writes_nhwc_rows(s_)) {}

  bool native_layout(gk_layout layout) const override { return layout == (nhwc_out_ ? GK_LAYOUT_NHWC : GK_LAYOUT_NCHW8); }
  bool reads_nchw_input() const override { return engine_.reads_nchw_input(); }
  WorkspaceNeed need() const override { return {0, engine_.workspace_floats()}; }

  // Per image; the engine zeroes the padding channels of an NCHW8 output's last block.
  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t pixels = s_.pixels();
    const bool planar_in = s_.in_layout == GK_LAYOUT_NCHW && engine_.reads_nchw_input();
    const bool nhwc_in = s_.in_layout == GK_LAYOUT_NHWC && nhwc_out_;  // rows read in place
    const int64_t in_image = (planar_in || nhwc_in ? d.in_channels : round_up8(d.in_channels)) * d.in_height * d.in_width;
    const int64_t out_image = (nhwc_out_ ? d.out_channels : round_up8(d.out_channels)) * pixels;
    const int threads = ws.cap(threads_for(2.0 * s_.ocg * pixels * s_.k_gemm));
    for (int64_t n = 0; n < d.batch; ++n) engine_.run(input + n * in_image, output + n * out_image, threads, ws);
  }

 private:
  static int64_t round_up8(int64_t c) { return (c + 7) / 8 * 8; }
  Shape s_;
  PointwiseNchw8 engine_;
  bool nhwc_out_;  // NHWC rows out (nhwc_in_place, writes_nhwc_rows), else NCHW8
};

// Grouped convolutions: `merge` consecutive groups make a super-group whose input and
// output channels are whole 8-channel blocks, so that in NCHW8 its part of an image is an
// NCHW8 tensor of its own (contiguous); each super-group runs as an ungrouped convolution
// on that part, with block-diagonal weights (zeros between its groups: `merge` times the
// arithmetic, none where a group is whole blocks, as in ResNeXt's groups of 8 to 32).
// Measured against im2col_gemm per group (Xeon model 207, 1 thread, NCHW8, 32 groups):
// groups of 2 channels (merge 4) 0.83 vs 1.54 ms at 56x56, of 4 (merge 2) 1.6 vs 2.5-3.3,
// of 8 to 32 2.3-4.6x faster. Beyond 4 the zeros would cost more than they save.
constexpr int64_t kMaxGroupMerge = 4;

// The fewest consecutive groups that fill whole blocks on both sides; 0 when that takes
// more than kMaxGroupMerge. Groups of 8 channels in and out go in pairs with AVX-512's
// kernels: 16-channel panels of zmm vectors run twice the arithmetic faster than 8-channel
// ones of ymm (Zen 5, ResNeXt-50's 8-channel groups, ms at 1 / 2 threads, alone against
// paired: 28x28 0.455 / 0.245 against 0.380 / 0.194, 56x56 stride 2 0.448 / 0.263 against
// 0.408 / 0.229; 4-channel groups merged by 4 rather than 2 gained nothing).
int64_t group_merge(const Shape& s) {
  if (s.icg == 8 && s.ocg == 8 && s.d.groups % 2 == 0 && pointwise_kernel().simd == SimdLevel::Avx512) return 2;
  for (int64_t k = 1; k <= kMaxGroupMerge; ++k)
    if (s.d.groups % k == 0 && (k * s.icg) % 8 == 0 && (k * s.ocg) % 8 == 0) return k;
  return 0;
}

// One super-group of `s` as an ungrouped NCHW8 shape of one image.
Shape super_group_shape(const Shape& s, int64_t merge) {
  gk_conv_desc d = s.d;
  d.batch = 1, d.groups = 1, d.layout = GK_LAYOUT_NCHW8;
  d.in_channels = merge * s.icg, d.out_channels = merge * s.ocg;
  d.flags &= ~GK_CONV_FLAG_NCHW_INPUT;
  Shape sub;
  validate(d, &sub);  // a part of a valid shape
  return sub;
}

// Super-group j's OIHW weights: each of its groups' weights on the diagonal, zeros around.
std::vector<float> super_group_weights(const Shape& s, int64_t merge, int64_t j, const float* w) {
  const int64_t taps = s.d.kernel_h * s.d.kernel_w, oc = merge * s.ocg, ic = merge * s.icg;
  std::vector<float> dense(static_cast<size_t>(oc * ic * taps), 0.0f);
  for (int64_t o = 0; o < oc; ++o) {
    const float* group_row = w + (j * oc + o) * s.icg * taps;
    std::copy(group_row, group_row + s.icg * taps, dense.data() + (o * ic + o / s.ocg * s.icg) * taps);
  }
  return dense;
}

// Threads take whole super-groups of whole images (each engine on one thread), unless
// there are fewer of those than threads. The engines run direct where rows are wide enough
// (PointwiseNchw8::direct_on_blocks_pays), so a super-group's few channels are not
// gathered into im2col chunks first.
class GroupedPrepared final : public Prepared {
 public:
  GroupedPrepared(const Shape& s, const float* weights, const float* bias)
      : s_(s), merge_(group_merge(s)), sub_(super_group_shape(s, merge_)) {
    const int64_t supers = s.d.groups / merge_;
    engines_.reserve(static_cast<size_t>(supers));
    for (int64_t j = 0; j < supers; ++j)
      engines_.push_back(std::make_unique<PointwiseNchw8>(pointwise_kernel(), sub_,
                                                          super_group_weights(s, merge_, j, weights).data(),
                                                          bias ? bias + j * sub_.d.out_channels : nullptr,
                                                          /*direct_on_blocks=*/true));
  }

  bool native_layout(gk_layout layout) const override { return layout == GK_LAYOUT_NCHW8; }
  WorkspaceNeed need() const override { return {0, engines_[0]->workspace_floats()}; }

  void run(const float* input, float* output, const Workspace& ws) const override {
    const int64_t supers = static_cast<int64_t>(engines_.size()), items = s_.d.batch * supers;
    const int64_t in_part = sub_.d.in_channels * s_.d.in_height * s_.d.in_width;
    const int64_t out_part = sub_.d.out_channels * s_.pixels();
    const int threads = ws.cap(threads_for(s_.flops() * static_cast<double>(merge_)));
    auto run_item = [&](int64_t item, int engine_threads, const Workspace& w) {
      engines_[static_cast<size_t>(item % supers)]->run(input + item * in_part, output + item * out_part,
                                                        engine_threads, w);
    };
    if (items < threads) {
      for (int64_t item = 0; item < items; ++item) run_item(item, threads, ws);
      return;
    }
    parallel_parts(threads, [&](int tid, int nt) {
      Workspace mine = ws;
      mine.blocks = ws.block(tid), mine.threads = 1;
      const Range r = share(items, tid, nt, 1, items);
      for (int64_t item = r.begin; item < r.end; ++item) run_item(item, 1, mine);
    });
  }

 private:
  Shape s_;
  int64_t merge_;
  Shape sub_;
  std::vector<std::unique_ptr<PointwiseNchw8>> engines_;
};

// An NCHW shape as NCHW8, which the engines run on copies (through_nchw8): grouped ones;
// and, with AVX-512's pointwise kernels, ungrouped ones of 8 or more input channels and a
// kernel larger than 1x1. Zen 5, ResNet-18's layers in NCHW, AUTO, ms, 1 / 2 threads,
// im2col_gemm against the engine through copies: 3x3 stride 2 at 14x14 0.86 / 0.79 against
// 0.69 / 0.54, at 7x7 0.91 / 0.65 against 0.66 / 0.45, at 28x28 0.83 / 0.61 against
// 0.74 / 0.62. Not 1x1s (stride 2: gemm_1x1 0.099 / 0.095 against 0.18 / 0.39) nor RGB
// stems (im2col_gemm 1.69 against direct_nchw8's 1.72 with the output's copy).
bool nchw_engine_form(const Shape& s, Shape* s8) {
  const gk_conv_desc& d = s.d;
  if (d.groups == 1 && (d.kernel_h * d.kernel_w == 1 || d.in_channels < 8 ||
                        pointwise_kernel().simd != SimdLevel::Avx512))
    return false;
  return nchw_as_nchw8(s, s8);
}

std::unique_ptr<Prepared> engine_for(const Shape& s, const float* w, const float* b) {
  if (s.d.groups > 1) return std::make_unique<GroupedPrepared>(s, w, b);
  return std::make_unique<PointwisePrepared>(s, w, b);
}

// NCHW plans run on NCHW8 copies (through_nchw8); AUTO keeps direct for grouped layers
// whose rows are wide enough to read in place (plan.cpp, kDirectOverNchw8CopiesMinWidth).
std::unique_ptr<Prepared> prepare_engine(const Shape& s, const float* w, const float* b) {
  Shape s8;
  if (nchw_engine_form(s, &s8)) return through_nchw8(s, s8, engine_for(s8, w, b));
  return engine_for(s, w, b);
}

// The shape the engines run: an NCHW8 one, or an NHWC one on im2col chunks or a stem
// storing into its rows, or an NHWC one's NCHW8 form (on the copies of prepare_in_layout),
// or an NCHW one's (prepare_engine); false when none.
bool engine_shape(const Shape& s, Shape* engine) {
  if (s.d.layout == GK_LAYOUT_NCHW8 || PointwiseNchw8::gathers_nhwc(s) || PointwiseNchw8::writes_nhwc_rows(s)) {
    *engine = s;
    return true;
  }
  return nchw_engine_form(s, engine) || nchw8_form(s, engine);
}

// What both engines need: NCHW8 (or an NHWC or NCHW shape with an NCHW8 form), groups
// that merge into whole blocks, pointwise kernels that serve the shape.
std::string engine_unusable(const Shape& s) {
  Shape e;
  if (!engine_shape(s, &e))
    return "runs NCHW8, NHWC (input NHWC too; grouped ones through copies), grouped NCHW, or with AVX-512 NCHW "
           "larger than 1x1";
  if (s.d.layout == GK_LAYOUT_NHWC && e.in_layout == GK_LAYOUT_NCHW && !PointwiseNchw8::runs_direct(e) &&
      !PointwiseNchw8::reads_nhwc(s))
    return "NHWC under 8 input channels: only the direct engine reads the input's NCHW copy";
  if (s.d.groups > 1 && !group_merge(e))
    return "groups do not make whole 8-channel blocks within " + std::to_string(kMaxGroupMerge) + " groups";
  if (!PointwiseNchw8::usable(pointwise_kernel(), e.d.groups > 1 ? super_group_shape(e, group_merge(e)) : e))
    return "no pointwise kernels in this CPU's kernel";
  return "";
}
// Grouped shapes never run direct: a super-group has whole blocks of input channels.
bool engine_runs_direct(const Shape& s) {
  Shape e;
  return engine_shape(s, &e) && s.d.groups == 1 && PointwiseNchw8::runs_direct(e);
}

class PointwiseAlgorithm final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_POINTWISE_NCHW8; }
  const char* name() const override { return "pointwise_nchw8"; }
  bool runs_nhwc(const Shape& s) const override {
    return s.d.groups == 1 && PointwiseNchw8::nhwc_in_place(s);
  }
  std::string unusable_reason(const Shape& s) const override {
    const std::string why = engine_unusable(s);
    if (!why.empty()) return why;
    return engine_runs_direct(s) ? "under 8 input channels (direct_nchw8 serves)" : "";
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return prepare_engine(s, w, b);
  }
};

class DirectAlgorithm final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_DIRECT_NCHW8; }
  const char* name() const override { return "direct_nchw8"; }
  bool runs_nhwc(const Shape& s) const override { return PointwiseNchw8::writes_nhwc_rows(s); }
  std::string unusable_reason(const Shape& s) const override {
    const std::string why = engine_unusable(s);
    if (!why.empty()) return why;
    return engine_runs_direct(s) ? "" : "8 or more input channels, or a 1x1 in place (pointwise_nchw8 serves)";
  }
  // Its shapes are never an NCHW engine form (those have 8 or more input channels).
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return engine_for(s, w, b);
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
