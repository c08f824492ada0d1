// GK_CONV_FLAG_ADD_TO_OUTPUT, the residual join output = act(conv(input) + bias + output),
// against the double reference convolution plus the residual: every algorithm (forced,
// AUTO, FASTRUN) in every layout, with and without GK_CONV_FLAG_NCHW_INPUT, each
// activation, with and without bias, 1 and 2 threads, on shapes with partial tiles, K split
// into blocks, strides, groups and depthwise; each kernel of the CPU; both depthwise
// vectorizations. Residuals are drawn so that adding after the activation, or not at all,
// fails (checked). Also: without the flag an output full of NaN is never read, and two
// runs add twice.
#include <cfloat>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/fastrun.h"
#include "conv_test_util.h"

namespace {

using gktest::ScopedEnv;

using gktest::ConvCase;

const gk_layout kLayouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW4, GK_LAYOUT_NCHW8,
                              GK_LAYOUT_NCHW16};
const gk_conv_algo kAlgos[] = {GK_CONV_ALGO_IM2COL_GEMM,     GK_CONV_ALGO_GEMM_1X1,     GK_CONV_ALGO_DIRECT,
                               GK_CONV_ALGO_DEPTHWISE,       GK_CONV_ALGO_WINOGRAD_F23, GK_CONV_ALGO_WINOGRAD_F43,
                               GK_CONV_ALGO_WINOGRAD_F63,    GK_CONV_ALGO_AUTO,         GK_CONV_ALGO_FASTRUN,
                               GK_CONV_ALGO_POINTWISE_NCHW8, GK_CONV_ALGO_DIRECT_NCHW8};

gk_conv_desc conv(int64_t batch, int64_t ic, int64_t h, int64_t w, int64_t oc, int64_t k, int64_t stride,
                  int64_t pad, int64_t groups = 1) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = batch, d.in_channels = ic, d.in_height = h, d.in_width = w, d.out_channels = oc;
  d.kernel_h = d.kernel_w = k, d.stride_h = d.stride_w = stride;
  d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = pad;
  d.groups = groups;
  return d;
}

// Whether `algo` serves `d` (the tests' statement of each algorithm's domain).
bool usable(gk_conv_algo algo, const gk_conv_desc& d) {
  const bool padded = d.pad_top || d.pad_left || d.pad_bottom || d.pad_right;
  switch (algo) {
    case GK_CONV_ALGO_GEMM_1X1: return d.kernel_h == 1 && d.kernel_w == 1 && !padded;
    case GK_CONV_ALGO_DEPTHWISE: return d.groups == d.in_channels;
    case GK_CONV_ALGO_POINTWISE_NCHW8:
    case GK_CONV_ALGO_DIRECT_NCHW8: {
      // The pointwise kernels' engines (x86-64): NCHW8, or NHWC in and out with 8+ input
      // channels (through NCHW8 copies), groups that merge into whole blocks, direct under 8
      // input channels unless a 1x1 reads the image in place.
      const bool in_place = d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 && !padded;
      const bool direct = d.in_channels < 8 && !in_place;
      return gktest::engine_runs_layout(d) && gktest::engine_serves_groups(d) &&
             gk::pointwise_kernel().pointwise[0].fn &&
             direct == (algo == GK_CONV_ALGO_DIRECT_NCHW8);
    }
    case GK_CONV_ALGO_WINOGRAD_F23:
    case GK_CONV_ALGO_WINOGRAD_F43:
    case GK_CONV_ALGO_WINOGRAD_F63:
      return d.kernel_h == 3 && d.kernel_w == 3 && d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 &&
             d.dilation_w == 1 && d.groups == 1;
    default: return true;
  }
}

// Small shapes, each output dimension odd or not a multiple of the tiles somewhere:
// channels not multiples of 8, strides 1 and 2, asymmetric padding, dilation, groups,
// depthwise (multipliers 1 and 2), stems (the pointwise kernels' direct path, NCHW or NHWC
// input read in place), more output channels than one MC block. Some large enough for 2 threads.
std::vector<gk_conv_desc> small_shapes() {
  std::vector<gk_conv_desc> v;
  v.push_back(conv(2, 13, 11, 9, 19, 3, 1, 1));   // Winograd, partial tiles, batch 2
  v.push_back(conv(1, 32, 20, 19, 40, 3, 1, 1));  // 2 threads for every algorithm
  gk_conv_desc d = conv(1, 5, 13, 10, 12, 3, 2, 1);
  d.pad_left = 0, d.pad_bottom = 2;  // asymmetric
  v.push_back(d);
  v.push_back(conv(2, 20, 7, 9, 30, 1, 1, 0));   // 1x1 (pointwise in place)
  v.push_back(conv(1, 17, 9, 11, 13, 1, 2, 0));  // 1x1 stride 2
  d = conv(1, 10, 9, 8, 14, 3, 1, 1, 2);         // two groups, dilated
  d.dilation_h = d.dilation_w = 2;
  v.push_back(d);
  v.push_back(conv(2, 32, 9, 10, 48, 3, 2, 1, 4));    // groups of 8 in, 12 out (merged in pairs)
  v.push_back(conv(1, 64, 12, 30, 64, 3, 1, 1, 4));   // groups of whole blocks, direct, 2 threads
  v.push_back(conv(1, 21, 24, 26, 21, 3, 1, 1, 21));  // depthwise
  v.push_back(conv(1, 9, 17, 15, 18, 5, 2, 2, 9));    // depthwise, multiplier 2, stride 2
  v.push_back(conv(1, 3, 23, 21, 24, 7, 2, 3));       // a stem: border pixels
  v.push_back(conv(3, 3, 30, 31, 32, 3, 2, 1));       // a stem, batch 3 (NHWC: stored into the rows)
  // Panels of 24 and 16 channels (4- and 6-pixel tiles): last tiles that would read past
  // the image (31 columns, no padding).
  v.push_back(conv(1, 5, 6, 33, 40, 3, 1, 0));
  v.push_back(conv(1, 16, 5, 5, 530, 1, 1, 0));  // more output channels than MC
  return v;
}

// K large enough to be split into several K blocks: im2col's GEMM (3x3 x 320 channels
// against KC), and the NCHW8 pointwise kernels' weights past half of L2, in place (1x1)
// and on im2col chunks (3x3), which accumulate in the output block by block.
std::vector<gk_conv_desc> large_k_shapes() {
  const int64_t half_l2 = gk::caches().l2 / 2;
  const int64_t in_place = half_l2 / (24 * 4) + 9, gathered = half_l2 / (9 * 64 * 4) + 9;
  return {conv(1, 320, 6, 7, 20, 3, 1, 1), conv(1, in_place, 1, 5, 13, 1, 1, 0), conv(1, gathered, 4, 5, 60, 3, 1, 1)};
}

// The convolution without bias and activation, in double, for every output (NCHW), the
// magnitude sums for the error bound, and a residual (NCHW) for the shape.
struct Reference {
  ConvCase c;  // c.bias: the bias used when a run has one
  std::vector<double> conv, magnitude;
  std::vector<float> residual;
  int64_t k;
};

Reference make_reference(gk_conv_desc d, uint32_t seed) {
  d.layout = GK_LAYOUT_NCHW, d.activation = GK_ACT_NONE, d.flags = 0;
  Reference r;
  r.c = gktest::make_conv_case(d, false, seed);
  r.k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  const int64_t total = d.batch * d.out_channels * r.c.oh * r.c.ow;
  r.conv.resize(size_t(total));
  r.magnitude.resize(size_t(total));
  for (int64_t idx = 0; idx < total; ++idx) {
    const int64_t ow = idx % r.c.ow, oh = idx / r.c.ow % r.c.oh, oc = idx / (r.c.ow * r.c.oh) % d.out_channels,
                  n = idx / (r.c.ow * r.c.oh * d.out_channels);
    r.conv[size_t(idx)] = gktest::reference_output(r.c, n, oc, oh, ow, &r.magnitude[size_t(idx)]);
  }
  // Outputs are about +-2: residuals of either sign and past 6 put sums on both sides of
  // 0 and 6 (TheChecksTellTheOrderApart).
  r.residual = gktest::random_vector(size_t(total), seed + 7, -5.0f, 7.0f);
  return r;
}

double activate(double v, gk_activation act) {
  if (act != GK_ACT_NONE) v = std::max(v, 0.0);
  return act == GK_ACT_RELU6 ? std::min(v, 6.0) : v;
}

// What a run is checked under besides the shape.
struct RunSetup {
  gk_layout layout = GK_LAYOUT_NCHW;
  uint32_t flags = 0;  // GK_CONV_FLAG_NCHW_INPUT, GK_CONV_FLAG_HIGH_ACCURACY (ADD_TO_OUTPUT: `add`)
  gk_activation act = GK_ACT_NONE;
  bool bias = false;
  int threads = 1;
  bool add = true;  // GK_CONV_FLAG_ADD_TO_OUTPUT, the output holding the residual; else NaN
  int runs = 1;     // runs in a row on the same output
};

std::string describe(const gk_conv_desc& d, const RunSetup& st) {
  return gktest::describe(d) + " bias " + std::to_string(st.bias) + " threads " + std::to_string(st.threads) +
         " runs " + std::to_string(st.runs);
}

gk_conv_desc desc_for(const Reference& ref, const RunSetup& st) {
  gk_conv_desc d = ref.c.d;
  d.layout = st.layout, d.activation = st.act;
  d.flags = st.flags | (st.add ? GK_CONV_FLAG_ADD_TO_OUTPUT : 0u);
  return d;
}

// Max error / max |conv + bias| allowed for an algorithm by its plan's name: Winograd's
// measure and bounds (test_winograd.cpp); 0 for the others, held to (K + 4) eps per output.
double relative_bound(const std::string& name) {
  if (name.rfind("winograd_f23", 0) == 0) return 3e-6;
  if (name.rfind("winograd_f43", 0) == 0) return 2e-5;
  if (name.rfind("winograd_f63", 0) == 0) return 5e-5;
  return 0;
}

// Fills `out` (the plan's output, in st.layout) with the residual, its NCHWx padding
// channels NaN (the caller's buffer may not keep the layout's zeros; they must not leak),
// or with NaN everywhere when not adding.
void prefill_output(const Reference& ref, const gk_conv_desc& d, const RunSetup& st, std::vector<float>* out) {
  std::fill(out->begin(), out->end(), gktest::kNaN);
  if (!st.add) return;
  ASSERT_EQ(gk_convert_layout(ref.residual.data(), GK_LAYOUT_NCHW, out->data(), d.layout, d.batch, d.out_channels,
                              ref.c.oh, ref.c.ow), GK_OK);
  const int64_t x = gk::conv::channel_block(d.layout), blocks = (d.out_channels + x - 1) / x;
  const int64_t pixels = ref.c.oh * ref.c.ow;
  if (x == 1) return;
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t l = d.out_channels % x; l > 0 && l < x; ++l)
        (*out)[size_t(((n * blocks + blocks - 1) * pixels + p) * x + l)] = gktest::kNaN;
}

// Runs `run` (input in the plan's input layout, output in st.layout) st.runs times on the
// prefilled output and checks every output against act(conv + bias + residual), the
// residual being the previous run's expected output from the second run on; and that the
// padding channels of an NCHWx output are zero.
void check_run(const Reference& ref, const RunSetup& st, const std::string& name,
               const std::function<void(const float*, float*)>& run) {
  const gk_conv_desc d = desc_for(ref, st);
  SCOPED_TRACE(name + " " + describe(d, st));
  const gk_layout in_layout = d.flags & GK_CONV_FLAG_NCHW_INPUT ? GK_LAYOUT_NCHW : d.layout;
  gktest::GuardedFloats in(size_t(gk_tensor_size(in_layout, d.batch, d.in_channels, d.in_height, d.in_width)));
  ASSERT_TRUE(in.data());
  ASSERT_EQ(gk_convert_layout(ref.c.x.data(), GK_LAYOUT_NCHW, in.data(), in_layout, d.batch, d.in_channels,
                              d.in_height, d.in_width), GK_OK);
  std::vector<float> out(size_t(gk_tensor_size(d.layout, d.batch, d.out_channels, ref.c.oh, ref.c.ow)));
  prefill_output(ref, d, st, &out);
  for (int r = 0; r < st.runs; ++r) run(in.data(), out.data());
  std::vector<float> got(ref.conv.size());
  ASSERT_EQ(gk_convert_layout(out.data(), d.layout, got.data(), GK_LAYOUT_NCHW, d.batch, d.out_channels, ref.c.oh,
                              ref.c.ow), GK_OK);
  const int64_t pixels = ref.c.oh * ref.c.ow;
  auto biased = [&](size_t idx) {
    return ref.conv[idx] + (st.bias ? ref.c.bias[size_t(int64_t(idx) / pixels % d.out_channels)] : 0.0);
  };
  double max_conv = 0;
  for (size_t idx = 0; idx < got.size(); ++idx) max_conv = std::max(max_conv, std::fabs(biased(idx)));
  const double rel = relative_bound(name), eps = double(FLT_EPSILON);
  for (size_t idx = 0; idx < got.size(); ++idx) {
    double want = st.add ? double(ref.residual[idx]) : 0.0, bound = (ref.k + 4) * eps * std::fabs(want);
    const double conv_bound = rel > 0 ? rel * max_conv : (ref.k + 4) * eps * (ref.magnitude[idx] + std::fabs(biased(idx)));
    for (int r = 0; r < st.runs; ++r) {
      want = activate(biased(idx) + want, d.activation);
      bound += conv_bound + 4 * eps * std::fabs(want);
    }
    if (!(std::fabs(got[idx] - want) <= bound + 1e-30)) {
      const int64_t i = int64_t(idx);
      ADD_FAILURE() << "output (n=" << i / pixels / d.out_channels << ", oc=" << i / pixels % d.out_channels
                    << ", pixel " << i % pixels << ") = " << got[idx] << ", expected " << want << " (bound " << bound
                    << ")";
      return;
    }
  }
  const int64_t x = gk::conv::channel_block(d.layout), blocks = (d.out_channels + x - 1) / x;
  for (int64_t n = 0; x > 1 && n < d.batch; ++n)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t l = d.out_channels % x; l > 0 && l < x; ++l)
        if (out[size_t(((n * blocks + blocks - 1) * pixels + p) * x + l)] != 0.0f) {
          ADD_FAILURE() << "padding channel " << (blocks - 1) * x + l << " not zero";
          return;
        }
}

// The same through the public API: plans `algo` (it must serve the shape exactly when
// usable() says so), runs and checks it.
void check_algo(const Reference& ref, gk_conv_algo algo, const RunSetup& st) {
  gk_set_num_threads(st.threads);
  const gk_conv_desc d = desc_for(ref, st);
  gk_conv_plan* plan = nullptr;
  const gk_status status =
      gk_conv_plan_create(&d, ref.c.w.data(), st.bias ? ref.c.bias.data() : nullptr, algo, &plan);
  if (!usable(algo, d)) {
    EXPECT_EQ(status, GK_ERR_UNSUPPORTED) << "algo " << int(algo) << " " << gktest::describe(d);
    gk_conv_plan_destroy(plan);
    return;
  }
  EXPECT_EQ(status, GK_OK) << gk_last_error() << " algo " << int(algo) << " " << gktest::describe(d);
  if (status != GK_OK) return;
  const std::string name = gk_conv_plan_algo_name(plan);
  check_run(ref, st, name, [&](const float* in, float* out) {
    EXPECT_EQ(gk_conv_run(plan, in, out), GK_OK) << gk_last_error();
  });
  gk_conv_plan_destroy(plan);
}

// The activation / bias combinations to run, on 1 or 2 threads by `turn`: all 6, or when
// `one` (and under GEMMKIT_TEST_QUICK) the `turn`th, so that a sweep still visits each.
std::vector<RunSetup> combinations(int turn, bool one) {
  std::vector<RunSetup> all;
  for (bool bias : {false, true})
    for (gk_activation act : {GK_ACT_NONE, GK_ACT_RELU, GK_ACT_RELU6}) {
      RunSetup st;
      st.act = act, st.bias = bias, st.threads = 1 + turn % 2;
      all.push_back(st);
    }
  if (one || gktest::quick()) return {all[size_t(turn / 2) % all.size()]};
  return all;
}

// Fast-Run profiles every candidate (in the plan's layout, with the plan's flags), once per
// descriptor: a short budget, and the process's cache cleared so that it does profile.
struct FastRunScope {
  FastRunScope() : budget("GEMMKIT_FASTRUN_BUDGET_MS", "2") { gk::conv::clear_cache(); }
  ScopedEnv budget;
};

// Every algorithm on every shape in every layout, with and without an NCHW input (the
// quick mode: one in turn); each activation and bias (or with `rotate`, FASTRUN, which
// profiles each descriptor, and the quick mode, one combination in turn), 1 and 2 threads
// in turn; AUTO and FASTRUN under HIGH_ACCURACY every other time.
void sweep(const std::vector<gk_conv_desc>& shapes, uint32_t seed, bool rotate) {
  const FastRunScope fastrun;
  int turn = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Reference ref = make_reference(shapes[i], seed + uint32_t(i));
    for (gk_conv_algo algo : kAlgos)
      for (gk_layout layout : kLayouts)
        for (uint32_t input : {0u, unsigned(GK_CONV_FLAG_NCHW_INPUT)}) {
          // An NCHW plan's input is NCHW either way; the quick mode takes one in turn.
          if (input && (layout == GK_LAYOUT_NCHW || (gktest::quick() && turn / 2 % 2))) continue;
          const bool automatic = algo == GK_CONV_ALGO_AUTO || algo == GK_CONV_ALGO_FASTRUN;
          for (RunSetup st : combinations(turn, rotate || algo == GK_CONV_ALGO_FASTRUN)) {
            st.layout = layout;
            st.flags = input | (automatic && turn / 3 % 2 ? GK_CONV_FLAG_HIGH_ACCURACY : 0u);
            check_algo(ref, algo, st);
            if (::testing::Test::HasFailure()) return gk_set_num_threads(0);
          }
          ++turn;
        }
  }
  gk_set_num_threads(0);
}

}  // namespace

TEST(ConvResidual, DescriptorValidationAcceptsTheFlag) {
  gk_conv_desc d = conv(1, 4, 8, 8, 4, 3, 1, 1);
  const std::vector<float> w(4 * 4 * 9, 0.5f);
  for (uint32_t flags : {GK_CONV_FLAG_ADD_TO_OUTPUT, GK_CONV_FLAG_ADD_TO_OUTPUT | GK_CONV_FLAG_NCHW_INPUT,
                         GK_CONV_FLAG_ADD_TO_OUTPUT | GK_CONV_FLAG_HIGH_ACCURACY,
                         GK_CONV_FLAG_ADD_TO_OUTPUT | GK_CONV_FLAG_NCHW_INPUT | GK_CONV_FLAG_HIGH_ACCURACY}) {
    d.flags = flags;
    int64_t oh = 0, ow = 0;
    EXPECT_EQ(gk_conv_output_size(&d, &oh, &ow), GK_OK) << gk_last_error();
    gk_conv_plan* plan = nullptr;
    EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_AUTO, &plan), GK_OK) << gk_last_error();
    gk_conv_plan_destroy(plan);
  }
  d.flags = GK_CONV_FLAG_ADD_TO_OUTPUT | 8u;  // still no unknown flags
  gk_conv_plan* plan = nullptr;
  EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_AUTO, &plan), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr);
}

// The residuals drawn make the order observable: on every shape, with ReLU and ReLU6, the
// residual added after the activation, or not added, is far off on many outputs.
TEST(ConvResidual, TheChecksTellTheOrderApart) {
  std::vector<gk_conv_desc> shapes = small_shapes();
  for (const gk_conv_desc& d : large_k_shapes()) shapes.push_back(d);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Reference ref = make_reference(shapes[i], 40 + uint32_t(i));
    for (gk_activation act : {GK_ACT_RELU, GK_ACT_RELU6}) {
      size_t after = 0, missing = 0;
      for (size_t idx = 0; idx < ref.conv.size(); ++idx) {
        const double right = activate(ref.conv[idx] + ref.residual[idx], act);
        after += std::fabs(right - (activate(ref.conv[idx], act) + ref.residual[idx])) > 0.1;
        missing += std::fabs(right - activate(ref.conv[idx], act)) > 0.1;
      }
      EXPECT_GT(after, ref.conv.size() / 4) << gktest::describe(ref.c.d) << " act " << int(act);
      EXPECT_GT(missing, ref.conv.size() / 4) << gktest::describe(ref.c.d) << " act " << int(act);
    }
  }
}

TEST(ConvResidual, EveryAlgorithmLayoutActivationAndThreads) { sweep(small_shapes(), 100, false); }

// K split into blocks: the GEMM's beta applies at the first K block and the epilogue at
// the last; the pointwise kernels add the residual on their first K block.
TEST(ConvResidual, KSplitIntoBlocks) { sweep(large_k_shapes(), 200, true); }

// Direct on NCHW8 channel blocks (16 super-groups or more): the residual transposed into
// the output planes with the input. 4-channel groups in pairs; 8-channel groups, batch 2,
// 2 rows apart.
TEST(ConvResidual, DirectOnChannelBlocks) {
  gk_conv_desc strided = conv(2, 64, 9, 21, 64, 3, 1, 1, 8);
  strided.stride_h = 2;
  sweep({conv(1, 128, 7, 19, 128, 3, 1, 1, 32), strided}, 400, true);
}

// Without the flag the output is never read: it starts as NaN everywhere.
TEST(ConvResidual, WithoutTheFlagNothingReadsTheOutput) {
  const FastRunScope fastrun;
  const std::vector<gk_conv_desc> shapes = small_shapes();
  int turn = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Reference ref = make_reference(shapes[i], 300 + uint32_t(i));
    for (gk_conv_algo algo : kAlgos)
      for (gk_layout layout : kLayouts) {
        if ((algo == GK_CONV_ALGO_FASTRUN && turn % 5) || (gktest::quick() && turn % 2)) {
          ++turn;
          continue;
        }
        RunSetup st;
        st.act = gk_activation(turn % 3), st.bias = turn % 2, st.threads = 1 + turn / 2 % 2;
        st.layout = layout, st.add = false, st.flags = turn % 4 < 2 ? 0u : unsigned(GK_CONV_FLAG_NCHW_INPUT);
        check_algo(ref, algo, st);
        ++turn;
        if (HasFailure()) return gk_set_num_threads(0);
      }
  }
  gk_set_num_threads(0);
}

// Two runs in a row: the second adds to the first's output (so the output really is read).
TEST(ConvResidual, ARunTwiceAddsTwice) {
  const std::vector<gk_conv_desc> shapes = small_shapes();
  int turn = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Reference ref = make_reference(shapes[i], 400 + uint32_t(i));
    for (gk_conv_algo algo : kAlgos) {
      if (algo == GK_CONV_ALGO_FASTRUN) continue;  // as AUTO once chosen
      for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW8}) {
        if (gktest::quick() && layout == GK_LAYOUT_NHWC) continue;  // a copy, as in NCHW
        RunSetup st;
        st.layout = layout, st.runs = 2, st.act = turn % 2 ? GK_ACT_RELU : GK_ACT_NONE, st.bias = turn % 3 != 0;
        st.threads = 1 + turn % 2;
        check_algo(ref, algo, st);
        ++turn;
        if (HasFailure()) return gk_set_num_threads(0);
      }
    }
  }
  gk_set_num_threads(0);
}

// Each kernel of this CPU forced (fused and separate epilogues, NCHW8 GEMMs with C stored
// blocked or pointwise kernels, Winograd's M stored blocked), NCHW, NCHW8 and NHWC (where
// Winograd runs in place on whole 8-channel blocks), 1 and 2 threads.
TEST(ConvResidual, EveryKernel) {
  const std::vector<gk_conv_desc> all = small_shapes();
  const std::vector<gk_conv_desc> shapes = {all[1], all[3], all[9], all[10], large_k_shapes()[0]};
  std::vector<Reference> refs;
  for (size_t i = 0; i < shapes.size(); ++i) refs.push_back(make_reference(shapes[i], 500 + uint32_t(i)));
  int turn = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    for (const Reference& ref : refs)
      for (gk_conv_algo algo : {GK_CONV_ALGO_IM2COL_GEMM, GK_CONV_ALGO_GEMM_1X1, GK_CONV_ALGO_WINOGRAD_F23,
                                GK_CONV_ALGO_WINOGRAD_F43, GK_CONV_ALGO_AUTO})
        for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8, GK_LAYOUT_NHWC})
          for (int threads : {1, 2}) {
            if (gktest::quick() && (turn++ % 2)) continue;
            RunSetup st;
            st.layout = layout, st.threads = threads, st.act = gk_activation(turn % 3), st.bias = turn % 2;
            st.flags = turn % 4 == 3 ? unsigned(GK_CONV_FLAG_NCHW_INPUT) : 0u;
            ++turn;
            check_algo(ref, algo, st);
            if (::testing::Test::HasFailure()) return;
          }
  });
  gk_set_num_threads(0);
}

// Depthwise in both vectorizations (forced through the internal tuning): output rows
// narrower than 8, of whole 8- and 32-column blocks, and with a tail that the rows'
// vectorization would otherwise compute again overlapping; strides 1 and 2, multipliers 1
// and 2, NCHW, NCHW8 (in place with multiplier 1) and NHWC.
TEST(ConvResidual, DepthwiseBothVectorizations) {
  int turn = 0;
  for (int64_t ow : {3, 8, 13, 40, 45})
    for (int64_t stride : {1, 2})
      for (int64_t multiplier : {1, 2}) {
        const int64_t c = 9 + turn % 3 * 4;
        gk_conv_desc d = conv(1, c, 5, (ow - 1) * stride + 3 - 2, c * multiplier, 3, stride, 1, c);
        const Reference ref = make_reference(d, 600 + uint32_t(turn));
        ASSERT_EQ(ref.c.ow, ow);
        for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8, GK_LAYOUT_NHWC})
          for (int64_t vectorize : {1, 2}) {
            RunSetup st;
            st.layout = layout, st.act = gk_activation(turn % 3), st.bias = turn % 2, st.threads = 1 + turn / 3 % 2;
            ++turn;
            gk_set_num_threads(st.threads);
            gk::conv::Shape shape;
            ASSERT_TRUE(gk::conv::validate(desc_for(ref, st), &shape)) << gk_last_error();
            const auto prepared = gk::conv::depthwise_algorithm()->prepare(
                shape, ref.c.w.data(), st.bias ? ref.c.bias.data() : nullptr, vectorize);
            ASSERT_TRUE(prepared);
            check_run(ref, st, "depthwise:vectorize=" + std::to_string(vectorize), [&](const float* in, float* out) {
              EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, in, out), GK_OK);
            });
            if (HasFailure()) return gk_set_num_threads(0);
          }
      }
  gk_set_num_threads(0);
}

// NCHW8 depthwise on outputs of 56x56 and more, whose threads split rows into bands,
// adding to the output: a partial last block at stride 1 on 2 threads, stride 2 at batch 2
// on 3 threads, run twice.
TEST(ConvResidual, DepthwiseNchw8RowBands) {
  int turn = 0;
  for (const gk_conv_desc& d : {conv(1, 20, 56, 56, 20, 3, 1, 1, 20), conv(2, 12, 113, 112, 12, 3, 2, 1, 12)}) {
    const Reference ref = make_reference(d, 750 + uint32_t(turn));
    RunSetup st;
    st.layout = GK_LAYOUT_NCHW8, st.act = gk_activation(1 + turn), st.bias = turn == 0;
    st.threads = 2 + turn, st.runs = 2;
    EXPECT_GT(gk::conv::depthwise_nchw8_bands(ref.c.oh, ref.c.ow, st.threads), 1);
    ++turn;
    gk_set_num_threads(st.threads);
    gk::conv::Shape shape;
    ASSERT_TRUE(gk::conv::validate(desc_for(ref, st), &shape)) << gk_last_error();
    const auto prepared =
        gk::conv::depthwise_algorithm()->prepare(shape, ref.c.w.data(), st.bias ? ref.c.bias.data() : nullptr, 0);
    ASSERT_TRUE(prepared);
    check_run(ref, st, "depthwise NCHW8 row bands", [&](const float* in, float* out) {
      EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, in, out), GK_OK);
    });
    if (HasFailure()) return gk_set_num_threads(0);
  }
  gk_set_num_threads(0);
}

// Depthwise NHWC whole blocks in pairs (16 lanes on AVX-512 CPUs, on 64-byte aligned
// tensors) adding to the output: 16 channels (a pair) and 48 (two pairs at a time, then
// one), strides 1 and 2, outputs 3, 13 and 45 wide, 6 and 30 rows (the 48-channel rows
// on 2 threads).
TEST(ConvResidual, DepthwiseNhwcChannelPairs) {
  int turn = 0;
  for (int64_t c : {16, 48})
    for (int64_t stride : {1, 2})
      for (int64_t ow : {3, 13, 45}) {
        gk_conv_desc d = conv(1 + turn % 2, c, c == 48 ? 30 : 6, (ow - 1) * stride + 1, c, 3, stride, 1, c);
        const Reference ref = make_reference(d, 700 + uint32_t(turn));
        ASSERT_EQ(ref.c.ow, ow);
        RunSetup st;
        st.layout = GK_LAYOUT_NHWC, st.act = gk_activation(turn % 3), st.bias = turn % 2;
        st.threads = c == 48 ? 2 : 1;
        ++turn;
        gk_set_num_threads(st.threads);
        const gk_conv_desc dd = desc_for(ref, st);
        gk::conv::Shape shape;
        ASSERT_TRUE(gk::conv::validate(dd, &shape)) << gk_last_error();
        const auto prepared =
            gk::conv::depthwise_algorithm()->prepare(shape, ref.c.w.data(), st.bias ? ref.c.bias.data() : nullptr, 0);
        ASSERT_TRUE(prepared);
        const int64_t out_floats = gk_tensor_size(dd.layout, dd.batch, dd.out_channels, ref.c.oh, ref.c.ow);
        check_run(ref, st, "depthwise NHWC pairs", [&](const float* in, float* out) {
          gktest::run_on_aligned_output(in, out, out_floats, [&](const float* x, float* y) {
            EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, x, y), GK_OK);
          });
        });
        if (HasFailure()) return gk_set_num_threads(0);
      }
  gk_set_num_threads(0);
}

// A plan that runs in another layout than its own converts the residual into its output
// copy: the workspace it reports covers that copy.
TEST(ConvResidual, WorkspaceCoversTheOutputCopy) {
  gk_conv_desc d = conv(1, 6, 9, 11, 10, 3, 1, 1);
  d.layout = GK_LAYOUT_NHWC, d.flags = GK_CONV_FLAG_ADD_TO_OUTPUT;
  const std::vector<float> w(10 * 6 * 9, 0.1f);
  gk_conv_plan* plan = nullptr;
  ASSERT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_DIRECT, &plan), GK_OK);  // NCHW only
  EXPECT_GE(gk_conv_plan_workspace_size(plan), int64_t(4 * (6 * 9 * 11 + 10 * 9 * 11)));
  gk_conv_plan_destroy(plan);
}
