// Convolution plans: validate, choose an algorithm (forced, or the AUTO heuristic), prepare
// it (pack the weights), and run it in any layout. GEMMKIT_VERBOSE=1 prints, per plan,
// the algorithm chosen and why each other one was not.
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/fastrun.h"

struct gk_conv_plan {
  gk::conv::Shape shape;
  std::string name;  // the candidate: "im2col_gemm", "winograd_f43:nr_tiles=96", ...
  std::unique_ptr<gk::conv::Prepared> prepared;
  int threads;  // gk_get_num_threads() at creation: what gk_conv_plan_workspace_size counts
};

namespace gk {
namespace conv {

const std::vector<const Algorithm*>& algorithms() {
  static const std::vector<const Algorithm*> list = {
      depthwise_algorithm(),   direct_nchw8_algorithm(), gemm_1x1_algorithm(),       winograd_algorithm(4),
      winograd_algorithm(2),   winograd_algorithm(6),    pointwise_nchw8_algorithm(), im2col_gemm_algorithm(),
      direct_algorithm()};
  return list;
}

namespace {

// AUTO until Fast-Run measures instead: channel-wise convs go to depthwise; in NCHW8 and
// NHWC, the pointwise kernels' engines where they serve; grouped convs of small groups the
// engines do not take go direct; 1x1 stride-1 convs are a GEMM on the image; everything
// else is im2col_gemm.
constexpr int64_t kNhwcEngine1x1MaxPixels = 100;  // 7x7 planes, not 14x14

// Grouped (not channel-wise) convolutions whose groups are small: direct's register tiles
// against im2col's GEMM per group (Xeon model 207, 1 thread, NCHW, ResNeXt-50's grouped
// 3x3 layers, 32 groups): 4 channels a group at 56x56 1.10 against 3.46 ms, 8 at 28x28 1.03
// against 2.13, 16 at 14x14 0.83 against 1.65, 32 at 7x7 0.80 against 1.02; 64 channels a
// group lose (256 channels 28x28, 4 groups: 3.1 against 2.4 ms). A 1x1 of 8 channels a group
// is a GEMM's (0.10 against 0.066 ms), of 3 direct's (0.039 against 0.083).
constexpr int64_t kDirectMaxGroupChannels = 32, kDirectMax1x1K = 4;
bool auto_prefers_direct(const Shape& s) {
  if (s.d.groups == 1 || s.depthwise()) return false;
  return s.d.kernel_h * s.d.kernel_w > 1 ? s.icg <= kDirectMaxGroupChannels : s.k_gemm <= kDirectMax1x1K;
}
// In NCHW the engine runs grouped layers on NCHW8 copies; direct reads the rows in place
// and wins where they are this wide (ResNeXt-50, 1 thread: 56x56 1.10 against 1.82 ms,
// 28x28 1.03 against 1.18; 14x14 0.83 against 0.64, 7x7 0.80 against 0.37), or, copying a
// whole image's rows once (direct_takes_whole_images), this wide (Zen 5, ms at 1 / 2 threads:
// 16 channels a group at 14x14 0.24 / 0.12 against 0.30 / 0.19; 32 at 7x7 0.46 / 0.23
// against 0.27 / 0.15).
constexpr int64_t kDirectOverNchw8CopiesMinWidth = 28, kWholeImageDirectOverNchw8CopiesMinWidth = 14;
bool nchw_prefers_direct(const Shape& s) {
  return s.d.layout == GK_LAYOUT_NCHW && auto_prefers_direct(s) &&
         (s.ow >= kDirectOverNchw8CopiesMinWidth ||
          (s.ow >= kWholeImageDirectOverNchw8CopiesMinWidth && direct_takes_whole_images(s)));
}

// In NCHW8 (or NHWC, on its NCHW8 copies) with AVX-512, groups of up to 8 channels run
// direct on the channel blocks (direct_takes_whole_images) rather than on the engine (Zen 5,
// ResNeXt-50's 32 groups, 3x3 stride 1, ms at 1 / 2 threads, direct against the engine:
// 4 channels a group at 56x56 0.31 / 0.32 against 0.77 / 0.50, at 28x28 0.105 / 0.086
// against 0.21 / 0.14; 8 at 28x28 0.33 / 0.23 against 0.41 / 0.26, at 14x14 0.096 / 0.058
// against 0.100 / 0.053; 16 at 14x14 0.33 / 0.15 against 0.21 / 0.10). Direct on 8 lanes
// (AVX2's, as AVX-512's on rows up to 8 wide) lost to AVX2's engine but for 4-channel
// groups at one thread (0.74 against 0.79): 16 lanes only.
constexpr int64_t kDirectOnBlocksMaxGroupChannels = 8;
bool direct_on_blocks_preferred(const Shape& s) {
  Shape s8 = s;
  if (s.d.layout == GK_LAYOUT_NHWC && !nchw8_form(s, &s8)) return false;
  return s8.d.layout == GK_LAYOUT_NCHW8 && pointwise_kernel().simd == SimdLevel::Avx512 && auto_prefers_direct(s8) &&
         std::max(s8.icg, s8.ocg) <= kDirectOnBlocksMaxGroupChannels && direct_takes_whole_images(s8, /*wide=*/true);
}

std::string auto_reason_against(const Algorithm* a, const Shape& s) {
  switch (a->id()) {
    case GK_CONV_ALGO_GEMM_1X1:
    case GK_CONV_ALGO_IM2COL_GEMM:
      // The NCHW8 engines against these GEMMs on B packed from the blocked image (Xeon model
      // 207: AVX-512 pointwise kernels against AVX2 4x24, 1 thread, interleaved, the five
      // networks' layers that Winograd does not take): 2.0-2.4x faster per network
      // (ResNet-50 47 against 110 ms), the 3-channel stems 2.5-3.9x.
      // In NHWC too, where the engine reads a 1x1's rows in place and gathers a strided
      // 1x1's pixels (Zen 5, 1 thread, ms, engine against gemm_1x1: 64 -> 128 channels at
      // 56x56 stride 2 0.072 vs 0.115, 16 -> 96 at 112x112 0.096 vs 0.181, 256 -> 512 at
      // 56x56 0.96 vs 1.20; 2 threads 1.5-2.4x). A strided 1x1 it runs on NCHW8 copies
      // (grouped, or under 8 input channels) pays only on small planes (MobileNetV2's 1x1
      // layers through copies against gemm_1x1 in place, 1 thread: 7x7 0.21 vs 0.32 ms,
      // 14x14 0.105 vs 0.089, 112x112 1.15 vs 0.75).
      if (a->id() == GK_CONV_ALGO_GEMM_1X1 && s.d.layout == GK_LAYOUT_NHWC &&
          !pointwise_nchw8_algorithm()->runs_nhwc(s) && s.pixels() > kNhwcEngine1x1MaxPixels)
        return "";
      if (pointwise_nchw8_algorithm()->unusable_reason(s).empty() || direct_nchw8_algorithm()->unusable_reason(s).empty())
        return "AUTO prefers the pointwise kernels' engine";
      if (auto_prefers_direct(s)) return "AUTO prefers direct for groups this small";
      return "";
    case GK_CONV_ALGO_POINTWISE_NCHW8:
      if (nchw_prefers_direct(s)) return "AUTO prefers direct to NCHW8 copies on rows this wide";
      if (direct_on_blocks_preferred(s)) return "AUTO prefers direct on channel blocks for groups this small";
      return "";
    case GK_CONV_ALGO_DIRECT:
      return auto_prefers_direct(s) ? "" : "AUTO prefers a GEMM for this group size";
    case GK_CONV_ALGO_WINOGRAD_F23:
    case GK_CONV_ALGO_WINOGRAD_F43: {
      // From the bench's forced runs of every variant on the networks' 3x3 stride-1 layers
      // (Zen 3, 1 and 2 threads; make bench, "Winograd" table), and a few extra shapes:
      //  - F(4x4) is fastest wherever it has at least 16 tiles (14x14 and larger outputs),
      //    64 to 512 channels: 1.7-2.3x im2col_gemm; also at 16 and 32 channels on 112x112;
      //  - on 7x7 (F(4x4): 4 tiles) F(2x2) wins (16 tiles; 512 channels: 2.4 vs 4.4 ms
      //    im2col_gemm); on 4x4 im2col_gemm wins (F(2x2) 2.3 vs 1.3 ms): each block streams
      //    all alpha^2 transformed weights, which few tiles do not amortize;
      //  - 3 input channels (VGG's first layer): im2col_gemm and F(4x4) within noise.
      const int64_t m = a->id() == GK_CONV_ALGO_WINOGRAD_F43 ? 4 : 2;
      const int64_t tiles = ((s.oh + m - 1) / m) * ((s.ow + m - 1) / m);
      if (std::min(s.d.in_channels, s.d.out_channels) < 16) return "too few channels for Winograd";
      if (tiles < 16) return "too few output tiles for Winograd";
      return "";
    }
    // Alone and hot, F(6x6) beat F(4x4) on 112- and 224-wide layers (Zen 5, NCHW8, ms,
    // F(4x4) / F(6x6): 64 ch 112x112 2.10 / 1.87); in VGG-16's pass, weights and tensors
    // cold, it did not (gk-infer --time-ops, 1 thread, medians of 5: 64 ch 224x224 7.80 /
    // 7.94, 64 -> 128 at 112x112 3.40 / 3.87, 128 at 112x112 6.11 / 6.20).
    case GK_CONV_ALGO_WINOGRAD_F63:
      return "F(4x4) as fast or faster on the layers measured (Fast-Run may still pick it)";
    default: return "";
  }
}

bool is_known_algorithm(int algo) {
  return algo >= GK_CONV_ALGO_AUTO && algo <= GK_CONV_ALGO_DIRECT_NCHW8;
}

void describe_choice(const Shape& s, const Algorithm* chosen, const std::string& rejected) {
  if (!verbose()) return;
  const gk_conv_desc& d = s.d;
  std::fprintf(stderr,
               "gemmkit: conv %lldx%lldx%lldx%lld -> %lld, kernel %lldx%lld stride %lldx%lld "
               "groups %lld: %s%s\n",
               (long long)d.batch, (long long)d.in_channels, (long long)d.in_height,
               (long long)d.in_width, (long long)d.out_channels, (long long)d.kernel_h,
               (long long)d.kernel_w, (long long)d.stride_h, (long long)d.stride_w,
               (long long)d.groups, chosen->name(), rejected.c_str());
}

}  // namespace

const Algorithm* heuristic_choice(const Shape& s, std::string* rejected) {
  const Algorithm* chosen = nullptr;
  for (const Algorithm* a : algorithms()) {
    std::string why = a->unusable_reason(s);
    if (why.empty() && a->lossy() && (s.d.flags & GK_CONV_FLAG_HIGH_ACCURACY))
      why = "less accurate than direct (GK_CONV_FLAG_HIGH_ACCURACY)";
    if (why.empty()) why = auto_reason_against(a, s);
    if (why.empty() && !chosen) {
      chosen = a;
    } else if (rejected) {
      *rejected += std::string("; ") + a->name() + (why.empty() ? " usable, ranked lower" : " rejected: " + why);
    }
  }
  return chosen;
}

namespace {
// The copies run_in_layout makes: the input in the layout run() reads, when the plan's
// input is in another; the output in the layout run() writes, when the plan's is another.
struct LayoutCopies {
  gk_layout in, out;  // the layouts run() reads and writes
  bool copy_in, copy_out;
  int64_t in_floats, out_floats;
};
LayoutCopies layout_copies(const Shape& s, const Prepared& p) {
  const gk_conv_desc& d = s.d;
  LayoutCopies c;
  c.out = p.native_layout(d.layout) ? d.layout : GK_LAYOUT_NCHW;
  c.in = c.out == d.layout && s.in_layout != d.layout && p.reads_nchw_input() ? GK_LAYOUT_NCHW : c.out;
  c.copy_in = c.in != s.in_layout, c.copy_out = c.out != d.layout;
  c.in_floats = c.copy_in ? gk_tensor_size(c.in, d.batch, d.in_channels, d.in_height, d.in_width) : 0;
  c.out_floats = c.copy_out ? gk_tensor_size(c.out, d.batch, d.out_channels, s.oh, s.ow) : 0;
  return c;
}

// Adding to the output, run() finds the tensor to add where it writes: the caller's output
// converted into the output copy, or in place with the padding channels of an NCHWx output
// zeroed (the layout's convention, which the caller's buffer may not keep: run() adds them
// to zero sums, so they would come out as they went in).
void prepare_residual(const Shape& s, const LayoutCopies& c, float* output, float* out_copy) {
  const gk_conv_desc& d = s.d;
  if (c.copy_out) {
    gk_convert_layout(output, d.layout, out_copy, c.out, d.batch, d.out_channels, s.oh, s.ow);
  } else {
    zero_padding_channels(output, d.layout, d.batch, d.out_channels, s.pixels());
  }
}
}  // namespace

namespace {
constexpr int64_t kLineFloats = 16;  // 64 bytes: every part of a workspace starts on a line

int64_t round_to_line(int64_t floats) { return (floats + kLineFloats - 1) / kLineFloats * kLineFloats; }

// Where each part of a run's workspace lies, in floats from its start: one block per thread
// (at least min_stride floats apart), then the layout copies and the algorithm's shared
// buffers. total < 0: it overflows.
struct WorkspaceLayout {
  int64_t blocks = 0, stride = 0, in_copy = 0, out_copy = 0, shared = 0, total = -1;
};
WorkspaceLayout workspace_layout(const LayoutCopies& c, const WorkspaceNeed& need, int threads,
                                 int64_t min_stride) {
  WorkspaceLayout w;
  int64_t at = 0, bytes = 0;
  w.stride = std::max(round_to_line(need.thread_floats), round_to_line(min_stride));
  if (!mul_ok(w.stride, threads < 1 ? 1 : threads, &at)) return w;
  w.in_copy = at;
  if (!add_ok(at, round_to_line(c.in_floats), &at)) return w;
  w.out_copy = at;
  if (!add_ok(at, round_to_line(c.out_floats), &at)) return w;
  w.shared = at;
  if (!add_ok(at, round_to_line(need.shared_floats), &at) || !mul_ok(at, 4, &bytes)) return w;
  w.total = at;
  return w;
}
}  // namespace

void run_in_layout(const Shape& s, const Prepared& p, const float* input, float* output, void* memory,
                   int threads, int64_t min_stride) {
  const gk_conv_desc& d = s.d;
  const LayoutCopies c = layout_copies(s, p);
  const WorkspaceLayout w = workspace_layout(c, p.need(), threads, min_stride);
  float* const base = static_cast<float*>(memory);
  float* in_copy = base + w.in_copy;
  float* out_copy = base + w.out_copy;
  const Workspace ws{base + w.shared, base + w.blocks, w.stride, threads < 1 ? 1 : threads};
  if (c.copy_in)
    gk_convert_layout(input, s.in_layout, in_copy, c.in, d.batch, d.in_channels, d.in_height, d.in_width);
  if (s.adds_to_output()) prepare_residual(s, c, output, out_copy);
  p.run(c.copy_in ? in_copy : input, c.copy_out ? out_copy : output, ws);
  if (c.copy_out) gk_convert_layout(out_copy, c.out, output, d.layout, d.batch, d.out_channels, s.oh, s.ow);
}

int64_t workspace_in_layout(const Shape& s, const Prepared& p, int threads, int64_t min_stride) {
  const WorkspaceLayout w = workspace_layout(layout_copies(s, p), p.need(), threads, min_stride);
  return w.total < 0 ? -1 : 4 * w.total;
}

namespace {
// A plan (NHWC, or a grouped NCHW one) whose algorithm runs NCHW8 in place but not its
// layout: the input converted to NCHW8 in the workspace, the algorithm run there on its
// NCHW8 form, the output converted back. From NHWC, blocked copies move 8 contiguous floats
// a pixel, where NCHW copies are transposes, and NCHW8 brings the blocked forms
// (Winograd's in-place tiles, the GEMM's blocked C).
class ThroughNchw8 final : public Prepared {
 public:
  // inner: prepared for the NCHW8 form; it reads an NCHW copy of the input where the form's
  // input is NCHW and inner reads that in place (a stem), else an NCHW8 one.
  ThroughNchw8(const Shape& outer, const Shape& form, std::unique_ptr<Prepared> inner)
      : s_(outer),
        inner_(std::move(inner)),
        in_layout_(form.in_layout == GK_LAYOUT_NCHW && inner_->reads_nchw_input() ? GK_LAYOUT_NCHW : GK_LAYOUT_NCHW8) {}
  bool native_layout(gk_layout layout) const override { return layout == s_.d.layout; }
  WorkspaceNeed need() const override {
    const WorkspaceNeed n = inner_->need();
    return {copies() + n.shared_floats, n.thread_floats};
  }
  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    float* in8 = ws.shared;
    float* out8 = ws.shared + in_floats();
    gk_convert_layout(input, s_.in_layout, in8, in_layout_, d.batch, d.in_channels, d.in_height, d.in_width);
    if (s_.adds_to_output())
      gk_convert_layout(output, d.layout, out8, GK_LAYOUT_NCHW8, d.batch, d.out_channels, s_.oh, s_.ow);
    inner_->run(in8, out8, Workspace{ws.shared + copies(), ws.blocks, ws.stride, ws.threads});
    gk_convert_layout(out8, GK_LAYOUT_NCHW8, output, d.layout, d.batch, d.out_channels, s_.oh, s_.ow);
  }

 private:
  int64_t in_floats() const {
    return round_to_line(gk_tensor_size(in_layout_, s_.d.batch, s_.d.in_channels, s_.d.in_height, s_.d.in_width));
  }
  int64_t copies() const {
    return in_floats() + round_to_line(gk_tensor_size(GK_LAYOUT_NCHW8, s_.d.batch, s_.d.out_channels, s_.oh, s_.ow));
  }
  Shape s_;
  std::unique_ptr<Prepared> inner_;
  gk_layout in_layout_;  // of the input copy
};
}  // namespace

std::unique_ptr<Prepared> through_nchw8(const Shape& outer, const Shape& form, std::unique_ptr<Prepared> inner) {
  return std::make_unique<ThroughNchw8>(outer, form, std::move(inner));
}

bool nchw_as_nchw8(const Shape& s, Shape* s8) {
  if (s.d.layout != GK_LAYOUT_NCHW) return false;
  gk_conv_desc d8 = s.d;
  d8.layout = GK_LAYOUT_NCHW8, d8.flags &= ~GK_CONV_FLAG_NCHW_INPUT;
  return validate(d8, s8);
}

bool nchw8_form(const Shape& s, Shape* s8) {
  if (s.d.layout != GK_LAYOUT_NHWC || s.in_layout != GK_LAYOUT_NHWC) return false;
  gk_conv_desc d8 = s.d;
  d8.layout = GK_LAYOUT_NCHW8;
  // Under 8 input channels NCHW8 would pad them to 8; the form's input is NCHW instead
  // (GK_CONV_FLAG_NCHW_INPUT), 3 planes of an RGB image, which the stems' direct engine
  // reads in place.
  if (s.d.in_channels < 8) d8.flags |= GK_CONV_FLAG_NCHW_INPUT;
  return validate(d8, s8);
}

std::unique_ptr<Prepared> prepare_in_layout(const Algorithm& a, const Shape& s, const float* weights,
                                            const float* bias, int64_t tuning) {
  Shape s8;
  if (!a.runs_nhwc(s) && nchw8_form(s, &s8) && a.unusable_reason(s8).empty()) {
    std::unique_ptr<Prepared> p8 = a.prepare(s8, weights, bias, tuning);
    if (!p8) return nullptr;
    // Under 8 channels only where the NCHW copy is read in place: padded to NCHW8, an RGB
    // stem's im2col GEMM ran 1.7-2.5x slower than through NCHW (ResNet-18's conv1, 8.9
    // against 3.6-5.3 ms).
    const bool padded_stem = s8.in_layout == GK_LAYOUT_NCHW && !p8->reads_nchw_input();
    if (p8->native_layout(GK_LAYOUT_NCHW8) && !padded_stem) return through_nchw8(s, s8, std::move(p8));
  }
  return a.prepare(s, weights, bias, tuning);
}

// The threads a run started now may use: the current setting (a run inside a caller's
// parallel region or a forked child uses fewer, never more).
static int run_threads() { return max_threads(); }

// The per-thread block stride of this thread's cached workspace: the largest any run on
// it has had, so each worker's block stays where it was and its lines stay in that core's
// cache from one convolution to the next. Blocks packed at each plan's own stride moved a
// worker onto lines another core had just written: ResNet-18, NCHW8, 2 threads, Zen 5,
// 9.92 -> 9.60 ms a pass (medians of 10 alternations). t_rest_floats: the largest copies
// + shared part beside them, reserved with the blocks so that a plan run again after a
// larger stride was set finds the memory there (nothing grows in a second pass).
thread_local int64_t t_block_stride = 0, t_rest_floats = 0;

// This thread's cached workspace laid out at `min_stride` (reserving room for the largest
// rest seen when asked); nullptr when it cannot be had or overflows.
float* cached_workspace(const LayoutCopies& c, const WorkspaceNeed& need, int threads, int64_t min_stride,
                        bool reserve_rest, WorkspaceLayout* w) {
  *w = workspace_layout(c, need, threads, min_stride);
  if (w->total < 0) return nullptr;
  const int64_t rest = w->total - w->in_copy;
  int64_t floats = w->total;
  if (reserve_rest && !add_ok(w->in_copy, std::max(rest, t_rest_floats), &floats)) return nullptr;
  float* memory = scratch(ScratchSlot::ConvWork, floats);
  if (memory) t_rest_floats = std::max(t_rest_floats, rest);
  return memory;
}

gk_status run_with_cached_workspace(const Shape& s, const Prepared& p, const float* input, float* output,
                                    const char* function) {
  const int threads = run_threads();
  const LayoutCopies c = layout_copies(s, p);
  const WorkspaceNeed need = p.need();
  WorkspaceLayout w;
  float* memory = nullptr;
  if (threads > 1) {
    const int64_t stride = std::max(t_block_stride, round_to_line(need.thread_floats));
    memory = cached_workspace(c, need, threads, stride, true, &w);
    if (memory) t_block_stride = stride;
  }
  if (!memory) memory = cached_workspace(c, need, threads, 0, false, &w);  // the plan's own layout
  if (!memory) {
    set_last_error("%s: cannot allocate %lld bytes for the convolution workspace (%d threads)", function,
                   static_cast<long long>(w.total < 0 ? -1 : 4 * w.total), threads);
    return GK_ERR_OUT_OF_MEMORY;
  }
  run_in_layout(s, p, input, output, memory, threads, w.stride);
  return GK_OK;
}

std::vector<Candidate> candidates(const Shape& s, bool allow_lossy) {
  std::vector<Candidate> out;
  auto add = [&](const Algorithm* a) {  // the default, then the tuned alternatives
    out.push_back({a, 0, a->name()});
    for (int64_t t : a->tunings(s))
      out.push_back({a, t, std::string(a->name()) + ":" + a->tuning_name() + "=" + std::to_string(t)});
  };
  const Algorithm* first = heuristic_choice(s, nullptr);
  if (first) add(first);
  for (const Algorithm* a : algorithms())
    if (a != first && a->unusable_reason(s).empty() && (allow_lossy || !a->lossy())) add(a);
  return out;
}

}  // namespace conv
}  // namespace gk

using gk::conv::Algorithm;
using gk::conv::Shape;

namespace {

// `algo` by reference: a C caller may pass any int, and loading one outside the enum's
// range as gk_conv_algo is undefined (is_known_algorithm reads its bytes first).
gk_status create_plan(const gk_conv_desc* d, const float* weights, const float* bias, const gk_conv_algo& algo,
                      gk_conv_plan** plan) {
  if (!d || !weights || !plan) {
    gk::set_last_error("gk_conv_plan_create: NULL descriptor, weights or plan pointer");
    return GK_ERR_INVALID_ARGUMENT;
  }
  if (!gk::conv::is_known_algorithm(gk::conv::raw_enum(algo))) {
    gk::set_last_error("gk_conv_plan_create: unknown algorithm %d", gk::conv::raw_enum(algo));
    return GK_ERR_INVALID_ARGUMENT;
  }
  Shape s;
  if (!gk::conv::validate(*d, &s)) return GK_ERR_INVALID_ARGUMENT;

  const bool automatic = algo == GK_CONV_ALGO_AUTO || algo == GK_CONV_ALGO_FASTRUN;
  const bool allow_lossy = !(d->flags & GK_CONV_FLAG_HIGH_ACCURACY);
  std::unique_ptr<gk::conv::Prepared> prepared;
  std::string name, rejected;
  if (automatic) {
    // A cached Fast-Run choice serves both AUTO and FASTRUN; FASTRUN measures on a miss.
    const std::vector<gk::conv::Candidate> cands = gk::conv::candidates(s, allow_lossy);
    std::string cached;
    const gk::conv::Candidate* pick = nullptr;
    if (gk::conv::cached_choice(s, &cached))
      for (const auto& c : cands)
        if (c.name == cached) pick = &c;
    if (!pick && algo == GK_CONV_ALGO_FASTRUN && !cands.empty()) {
      gk::conv::Choice choice = gk::conv::profile_and_choose(s, cands, weights, bias);
      name = choice.candidate.name;
      prepared = std::move(choice.prepared);
    } else {
      const gk::conv::Candidate fallback = cands.empty() ? gk::conv::Candidate{nullptr, 0, ""} : cands.front();
      const gk::conv::Candidate& c = pick ? *pick : fallback;
      if (!c.algorithm) {
        gk::set_last_error("gk_conv_plan_create: no algorithm can serve this descriptor");
        return GK_ERR_UNSUPPORTED;
      }
      if (gk::verbose()) {  // the reasons are strings: built only to be printed
        gk::conv::heuristic_choice(s, &rejected);
        gk::conv::describe_choice(s, c.algorithm, pick ? "; from the Fast-Run cache" + rejected : rejected);
      }
      name = c.name;
      prepared = gk::conv::prepare_in_layout(*c.algorithm, s, weights, bias, c.tuning);
    }
  } else {
    const Algorithm* forced = nullptr;
    for (const Algorithm* a : gk::conv::algorithms())
      if (a->id() == algo) forced = a;
    const std::string why = forced ? forced->unusable_reason(s) : "unknown";
    if (!why.empty()) {
      gk::set_last_error("gk_conv_plan_create: the forced algorithm cannot serve this descriptor: %s",
                         why.c_str());
      return GK_ERR_UNSUPPORTED;
    }
    gk::conv::describe_choice(s, forced, "; forced");
    name = forced->name();
    prepared = gk::conv::prepare_in_layout(*forced, s, weights, bias, 0);
  }
  if (!prepared) return GK_ERR_OUT_OF_MEMORY;
  const int threads = gk::max_threads();
  if (gk::conv::workspace_in_layout(s, *prepared, threads) < 0) {
    gk::set_last_error("gk_conv_plan_create: the workspace size overflows int64");
    return GK_ERR_INVALID_ARGUMENT;
  }
  *plan = new gk_conv_plan{s, name, std::move(prepared), threads};
  gk::clear_last_error();
  return GK_OK;
}

// The caller's workspace: present, 64-byte aligned, and at least the plan's size.
bool valid_workspace(const gk_conv_plan* plan, const void* workspace, int64_t bytes) {
  const int64_t needed = gk::conv::workspace_in_layout(plan->shape, *plan->prepared, plan->threads);
  if (!workspace && needed > 0) {
    gk::set_last_error("gk_conv_run_with_workspace: NULL workspace (%lld bytes needed)", (long long)needed);
    return false;
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 64 != 0) {
    gk::set_last_error("gk_conv_run_with_workspace: the workspace is not 64-byte aligned");
    return false;
  }
  if (bytes < needed) {
    gk::set_last_error("gk_conv_run_with_workspace: workspace_bytes %lld is less than the %lld bytes the plan needs",
                       (long long)bytes, (long long)needed);
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) gk_status gk_conv_plan_create(const gk_conv_desc* d,
                                                                     const float* weights,
                                                                     const float* bias,
                                                                     gk_conv_algo algo,
                                                                     gk_conv_plan** plan) {
  if (plan) *plan = nullptr;
  return gk::guard_c_boundary("gk_conv_plan_create", [&] { return create_plan(d, weights, bias, algo, plan); });
}

__attribute__((visibility("default"))) gk_status gk_conv_run(const gk_conv_plan* plan,
                                                             const float* input, float* output) {
  return gk::guard_c_boundary("gk_conv_run", [&] {
    if (!plan || !input || !output) {
      gk::set_last_error("gk_conv_run: NULL plan, input or output");
      return GK_ERR_INVALID_ARGUMENT;
    }
    return gk::conv::run_with_cached_workspace(plan->shape, *plan->prepared, input, output, "gk_conv_run");
  });
}

__attribute__((visibility("default"))) gk_status gk_conv_run_with_workspace(const gk_conv_plan* plan,
                                                                            const float* input, float* output,
                                                                            void* workspace,
                                                                            int64_t workspace_bytes) {
  return gk::guard_c_boundary("gk_conv_run_with_workspace", [&] {
    if (!plan || !input || !output) {
      gk::set_last_error("gk_conv_run_with_workspace: NULL plan, input or output");
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (!valid_workspace(plan, workspace, workspace_bytes)) return GK_ERR_INVALID_ARGUMENT;
    gk::conv::run_in_layout(plan->shape, *plan->prepared, input, output, workspace, plan->threads);
    return GK_OK;
  });
}

__attribute__((visibility("default"))) const char* gk_conv_plan_algo_name(const gk_conv_plan* plan) {
  return plan ? plan->name.c_str() : "";
}

__attribute__((visibility("default"))) int64_t gk_conv_plan_workspace_size(const gk_conv_plan* plan) {
  return plan ? gk::conv::workspace_in_layout(plan->shape, *plan->prepared, plan->threads) : 0;
}

__attribute__((visibility("default"))) void gk_conv_plan_destroy(gk_conv_plan* plan) { delete plan; }
}
