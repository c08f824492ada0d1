// Convolution against a naive double-precision convolution: a random sweep of descriptors
// with every usable algorithm forced and every layout; every layer of the five networks
// with the default algorithm; layout round trips; invalid descriptors; forced algorithms
// that cannot serve; concurrent runs on one plan.
#include <cmath>
#include <thread>

#include "conv/conv.h"
#include "conv_test_util.h"

namespace {

using gktest::ConvCase;

// Where check_depthwise runs NHWC plans with whole channel pairs (16 channels): on a
// 64-byte aligned output, where the AVX-512 functions take them in pairs; or on the
// tensors as check_conv_run gives them, which keeps the 8-lane path of the same channel
// counts covered.
enum class PairsOutput { Aligned, AsGiven };

// Checks the depthwise algorithm (Fast-Run's `tuning`, 0: its default) on `d` against the
// double reference (every output, or `samples` of them), on `threads` threads.
void check_depthwise(const gk_conv_desc& d, bool with_bias, uint32_t seed, int threads, const std::string& name,
                     PairsOutput pairs = PairsOutput::Aligned, int64_t samples = 0, int64_t tuning = 0) {
  gk::conv::Shape shape;
  ASSERT_TRUE(gk::conv::validate(d, &shape)) << gk_last_error();
  const ConvCase c = gktest::make_conv_case(d, with_bias, seed);
  const auto prepared =
      gk::conv::depthwise_algorithm()->prepare(shape, c.w.data(), with_bias ? c.bias.data() : nullptr, tuning);
  ASSERT_TRUE(prepared);
  if (d.layout == GK_LAYOUT_NHWC) {
    EXPECT_TRUE(prepared->native_layout(GK_LAYOUT_NHWC));  // no NCHW copies
  }
  const int64_t out_floats = gk_tensor_size(d.layout, d.batch, d.out_channels, c.oh, c.ow);
  gk_set_num_threads(threads);
  gktest::check_conv_run(c, name + " " + gktest::describe(d), [&](const float* in, float* out) {
    if (pairs == PairsOutput::AsGiven || d.layout != GK_LAYOUT_NHWC || d.in_channels % 16) {
      EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, in, out), GK_OK);
      return;
    }
    gktest::run_on_aligned_output(in, out, out_floats, [&](const float* x, float* y) {
      EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, x, y), GK_OK);
    });
  }, samples);
  gk_set_num_threads(0);
}

const gk_layout kLayouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW4, GK_LAYOUT_NCHW8,
                              GK_LAYOUT_NCHW16};
const gk_conv_algo kAlgos[] = {GK_CONV_ALGO_AUTO,   GK_CONV_ALGO_IM2COL_GEMM, GK_CONV_ALGO_GEMM_1X1,
                               GK_CONV_ALGO_DIRECT, GK_CONV_ALGO_DEPTHWISE,   GK_CONV_ALGO_POINTWISE_NCHW8,
                               GK_CONV_ALGO_DIRECT_NCHW8};

// The NCHW8 engine on the pointwise kernels that serves `d`: direct under 8 input channels
// unless a 1x1 reads the image in place.
gk_conv_algo nchw8_engine(const gk_conv_desc& d) {
  const bool in_place = d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 && !d.pad_top &&
                        !d.pad_bottom && !d.pad_left && !d.pad_right;
  return d.in_channels < 8 && !in_place ? GK_CONV_ALGO_DIRECT_NCHW8 : GK_CONV_ALGO_POINTWISE_NCHW8;
}
// Whether the kernel NCHW8 convolutions run on has pointwise kernels (x86-64).
bool has_pointwise_kernels() { return gk::pointwise_kernel().pointwise[0].fn != nullptr; }

gk_conv_desc random_desc(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return int64_t(lo + int(rng() % unsigned(hi - lo + 1))); };
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = pick(1, 3);
  const int64_t channels[] = {1, 3, 5, 8, 17};
  const int grouping = int(rng() % 5);  // 0-2 plain, 3 two groups, 4 depthwise
  if (grouping == 4) {
    d.in_channels = channels[rng() % 5];
    d.groups = d.in_channels;
    d.out_channels = d.in_channels * pick(1, 2);
  } else if (grouping == 3) {
    d.groups = 2;
    d.in_channels = 2 * pick(1, 5);
    d.out_channels = 2 * pick(1, 9);
  } else {
    d.in_channels = channels[rng() % 5];
    d.out_channels = pick(1, 40);
  }
  d.kernel_h = pick(1, 7), d.kernel_w = pick(1, 7);
  d.stride_h = pick(1, 3), d.stride_w = pick(1, 3);
  d.dilation_h = pick(1, 3), d.dilation_w = pick(1, 3);
  d.pad_top = pick(0, 3), d.pad_bottom = pick(0, 3), d.pad_left = pick(0, 3), d.pad_right = pick(0, 3);
  d.in_height = pick(5, 20), d.in_width = pick(5, 20);
  // Keep the dilated kernel inside the padded input.
  d.in_height = std::max(d.in_height, d.dilation_h * (d.kernel_h - 1) + 1 - d.pad_top - d.pad_bottom);
  d.in_width = std::max(d.in_width, d.dilation_w * (d.kernel_w - 1) + 1 - d.pad_left - d.pad_right);
  d.layout = kLayouts[rng() % 5];
  d.activation = gk_activation(rng() % 3);
  return d;
}

// Whether `algo` should accept `d` (the tests' own statement of each algorithm's domain).
bool expect_usable(gk_conv_algo algo, const gk_conv_desc& d) {
  switch (algo) {
    case GK_CONV_ALGO_GEMM_1X1:
      return d.kernel_h == 1 && d.kernel_w == 1 && !d.pad_top && !d.pad_bottom && !d.pad_left && !d.pad_right;
    case GK_CONV_ALGO_DEPTHWISE: return d.groups == d.in_channels;
    case GK_CONV_ALGO_POINTWISE_NCHW8:
    case GK_CONV_ALGO_DIRECT_NCHW8: {
      return gktest::engine_runs_layout(d) && gktest::engine_serves_groups(d) &&
             has_pointwise_kernels() &&
             nchw8_engine(d) == algo;
    }
    default: return true;
  }
}

}  // namespace

TEST(Conv, RandomDescriptorsEveryUsableAlgorithmAndLayout) {
  std::mt19937 rng(2024);
  const int cases = gktest::quick() ? 40 : 150;
  for (int i = 0; i < cases; ++i) {
    gk_conv_desc d = random_desc(rng);
    if (i % 4 == 1) d.flags = GK_CONV_FLAG_NCHW_INPUT;
    const bool with_bias = i % 3 != 0;
    const ConvCase c = gktest::make_conv_case(d, with_bias, uint32_t(i));
    for (gk_conv_algo algo : kAlgos) {
      SCOPED_TRACE("case " + std::to_string(i) + " algo " + std::to_string(int(algo)) + " " + gktest::describe(d));
      gk_conv_plan* plan = nullptr;
      const gk_status st = gk_conv_plan_create(&d, c.w.data(), nullptr, algo, &plan);
      gk_conv_plan_destroy(plan);
      if (!expect_usable(algo, d)) {
        EXPECT_EQ(st, GK_ERR_UNSUPPORTED);
        EXPECT_STRNE(gk_last_error(), "");
        continue;
      }
      ASSERT_EQ(st, GK_OK) << gk_last_error();
      gktest::check_conv(c, algo);
      if (HasFailure()) return;
    }
  }
}

// Every algorithm in every layout on a few fixed shapes (the sweep picks layouts at random).
TEST(Conv, EveryLayoutWithEveryAlgorithm) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 2, d.in_channels = 6, d.in_height = 9, d.in_width = 11, d.out_channels = 10;
  d.kernel_h = d.kernel_w = 1;
  for (int shape = 0; shape < 3; ++shape) {
    if (shape == 1) d.kernel_h = 3, d.kernel_w = 3, d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    if (shape == 2) d.groups = 6, d.out_channels = 6, d.stride_h = d.stride_w = 2;
    for (gk_layout layout : kLayouts) {
      for (gk_conv_algo algo : kAlgos) {
        d.layout = layout;
        d.activation = GK_ACT_RELU6;
        if (!expect_usable(algo, d)) continue;
        SCOPED_TRACE("shape " + std::to_string(shape) + " layout " + std::to_string(int(layout)) +
                     " algo " + std::to_string(int(algo)));
        gktest::check_conv(gktest::make_conv_case(d, true, 5), algo);
      }
    }
  }
}

// GK_CONV_FLAG_NCHW_INPUT (an NCHW image into a blocked network): stems and other shapes
// under and over 8 input channels, every algorithm including Fast-Run, every output
// layout, with each kernel in turn (the AVX2 ones read the planes in place, the others
// convert; Fast-Run on the automatic one); output widths around the 6- and 4-pixel tiles, taps above, below, left and
// right of the image, dilation, kernels wider than 7 columns.
TEST(Conv, NchwInputIntoEveryLayout) {
  struct Stem {
    int64_t c, h, w, k, kh, kw, stride, pad, dilation;
  };
  const Stem stems[] = {{3, 23, 29, 32, 3, 3, 2, 1, 1}, {3, 21, 20, 24, 3, 3, 2, 1, 1},
                        {3, 19, 31, 64, 7, 7, 2, 3, 1}, {1, 12, 27, 16, 5, 5, 1, 2, 2},
                        {5, 9, 30, 40, 1, 9, 1, 4, 1},  {7, 10, 17, 8, 3, 2, 3, 0, 1},
                        {3, 8, 9, 10, 1, 1, 1, 0, 1},   {12, 9, 13, 20, 3, 3, 1, 1, 1}};
  const gk_conv_algo algos[] = {GK_CONV_ALGO_AUTO, GK_CONV_ALGO_FASTRUN, GK_CONV_ALGO_IM2COL_GEMM,
                                GK_CONV_ALGO_DIRECT, GK_CONV_ALGO_GEMM_1X1, GK_CONV_ALGO_WINOGRAD_F23};
  for (const char* kernel : {"", "avx2-6x16", "generic"}) {
    if (gk_set_kernel(kernel) != GK_OK) continue;  // not this CPU's
    for (const Stem& t : stems)
      for (gk_layout layout : kLayouts)
        for (gk_conv_algo algo : algos) {
          gk_conv_desc d;
          gk_conv_desc_init(&d);
          d.batch = 2, d.in_channels = t.c, d.in_height = t.h, d.in_width = t.w, d.out_channels = t.k;
          d.kernel_h = t.kh, d.kernel_w = t.kw, d.stride_h = d.stride_w = t.stride;
          d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = t.pad;
          d.dilation_h = d.dilation_w = t.dilation;
          d.layout = layout, d.activation = GK_ACT_RELU, d.flags = GK_CONV_FLAG_NCHW_INPUT;
          // Fast-Run profiles every candidate: once per shape, on the automatic kernel.
          if (algo == GK_CONV_ALGO_FASTRUN && (*kernel || layout != GK_LAYOUT_NCHW8)) continue;
          gk_conv_plan* plan = nullptr;
          const gk_status st = gk_conv_plan_create(&d, gktest::make_conv_case(d, true, 3).w.data(), nullptr, algo, &plan);
          gk_conv_plan_destroy(plan);
          if (st == GK_ERR_UNSUPPORTED) continue;  // 1x1 or Winograd on other shapes
          SCOPED_TRACE(std::string("kernel '") + kernel + "' algo " + std::to_string(int(algo)) + " " +
                       gktest::describe(d));
          gktest::check_conv(gktest::make_conv_case(d, true, 9), algo);
          if (HasFailure()) break;
        }
    if (HasFailure()) break;
  }
  gk_set_kernel(nullptr);
}

// Every conv layer of ResNet-18/50, MobileNetV2, ShuffleNetV2 and VGG-16 (batch 1, 224x224)
// with the default algorithm under GK_CONV_FLAG_HIGH_ACCURACY (so held to the strict
// bound), ReLU and bias, checked on 300 sampled outputs. Under
// emulation only the layers under 60 MFLOP run (VGG's and ResNet's big layers would take
// minutes each at 0.25 GFLOP/s).
TEST(Conv, EveryNetworkLayerWithDefaultAlgorithm) {
  const std::vector<gktest::NetworkLayer> layers = gktest::network_layers();
  ASSERT_EQ(layers.size(), 89u) << "perf/networks.csv not found or incomplete (run from the repository root)";
  for (size_t i = 0; i < layers.size(); ++i) {
    gk_conv_desc d = layers[i].d;
    d.activation = GK_ACT_RELU;
    d.flags = GK_CONV_FLAG_HIGH_ACCURACY;  // lossy Winograd variants: test_winograd.cpp
    const ConvCase c = gktest::make_conv_case(d, true, uint32_t(i));
    const double flops = 2.0 * d.out_channels * c.oh * c.ow * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w;
    if (gktest::quick() && flops > 60e6) continue;
    SCOPED_TRACE(layers[i].net + " " + layers[i].layer);
    const std::string algo = gktest::check_conv(c, GK_CONV_ALGO_AUTO, 300);
    if (d.groups == d.in_channels) {
      EXPECT_EQ(algo, "depthwise");
    } else if (d.kernel_h == 1 && d.pad_top == 0) {
      EXPECT_EQ(algo, "gemm_1x1");
    } else if (d.kernel_h == 3 && d.stride_h == 1 && d.groups == 1 &&
               std::min(d.in_channels, d.out_channels) >= 16 && ((c.oh + 1) / 2) * ((c.ow + 1) / 2) >= 16) {
      EXPECT_EQ(algo, "winograd_f23");  // the accurate variant (HIGH_ACCURACY is set)
    } else if (gktest::engine_runs_layout(d) && gk::pointwise_kernel().pointwise[0].fn) {
      EXPECT_EQ(algo, "pointwise_nchw8");  // on NCHW8 copies
    } else {
      EXPECT_EQ(algo, "im2col_gemm");
    }
    if (HasFailure()) return;
  }
}

// Depthwise in both vectorizations (across 8 channels; along the rows of one channel),
// forced through the internal tuning: channel counts around the 8-lane blocks, channel
// multipliers 1 and 2, kernels 1..5 (non-square), strides 1..3, dilation 1..2, paddings
// 0..3, output rows from 1 to over 8 columns wide (the 1-, 4- and 8-column blocks and
// their overlapping tails), NCHW, NCHW8 (native when the multiplier is 1) and NHWC.
TEST(Conv, DepthwiseBothVectorizations) {
  std::mt19937 rng(99);
  auto pick = [&](int lo, int hi) { return int64_t(lo + int(rng() % unsigned(hi - lo + 1))); };
  const gk_layout layouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8, GK_LAYOUT_NHWC};
  const int cases = gktest::quick() ? 12 : 60;
  for (int i = 0; i < cases; ++i) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    const int64_t channels[] = {1, 7, 8, 9, 16, 20};
    d.batch = pick(1, 2), d.in_channels = channels[i % 6], d.groups = d.in_channels;
    d.out_channels = d.in_channels * (i % 5 == 4 ? 2 : 1);
    d.kernel_h = i % 4 == 0 ? 3 : pick(1, 5), d.kernel_w = i % 4 == 0 ? 3 : pick(1, 5);
    d.stride_h = pick(1, 3), d.stride_w = pick(1, 3), d.dilation_h = pick(1, 2), d.dilation_w = pick(1, 2);
    d.pad_top = pick(0, 3), d.pad_left = pick(0, 3), d.pad_bottom = pick(0, 3), d.pad_right = pick(0, 3);
    d.in_height = pick(6, 14), d.in_width = i % 3 == 0 ? pick(2, 9) : pick(10, 60);
    d.in_height = std::max(d.in_height, d.dilation_h * (d.kernel_h - 1) + 1);
    d.in_width = std::max(d.in_width, d.dilation_w * (d.kernel_w - 1) + 1);
    d.layout = layouts[i % 3];
    d.activation = gk_activation(i % 3);
    gk::conv::Shape shape;
    ASSERT_TRUE(gk::conv::validate(d, &shape)) << gk_last_error();
    const ConvCase c = gktest::make_conv_case(d, i % 2 == 0, uint32_t(500 + i));
    for (int64_t vectorize : {1, 2}) {
      const auto prepared = gk::conv::depthwise_algorithm()->prepare(shape, c.w.data(),
                                                                     c.with_bias ? c.bias.data() : nullptr, vectorize);
      ASSERT_TRUE(prepared);
      const std::string name = "depthwise:vectorize=" + std::to_string(vectorize) + " " + gktest::describe(d);
      gktest::check_conv_run(c, name, [&](const float* in, float* out) {
        EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, in, out), GK_OK);
      });
    }
    if (HasFailure()) return;
  }
}

// Depthwise on NHWC tensors runs where they are (no NCHW copies): channel counts from 1 to
// 127 (partial last blocks: staged under 8 channels, else a tail window; with a
// multiplier, groups of blocks and more than one group), multipliers 1..3, kernels from
// 1x1 to 17 rows tall (more input rows than the 16 an NCHW band keeps pointers for),
// strides 1..3, dilation 1..2, paddings 0..3, planes taller than one band of output rows
// (16), batch 1..5, 1 and 2 threads. Then rows computed in segments of
// columns through all blocks: rows wider than a segment (1004 channels, a tail window, 200
// columns past half of an L2 up to 2 MiB) and rows of more than 64 column pieces (9
// channels at 700 columns; 40 channels at 550, stride 2), 1 and 2 threads.
TEST(Conv, DepthwiseOnNhwcInPlace) {
  std::mt19937 rng(2207);
  auto pick = [&](int lo, int hi) { return int64_t(lo + int(rng() % unsigned(hi - lo + 1))); };
  const int64_t channels[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 31, 33, 61, 127};
  const int cases = gktest::quick() ? 15 : 45;
  for (int i = 0; i < cases; ++i) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = i % 7 == 3 ? 5 : pick(1, 2);
    d.in_channels = channels[i % 15], d.groups = d.in_channels;
    d.out_channels = d.in_channels * (i % 4 == 3 ? pick(2, 3) : 1);
    const int64_t sizes[][2] = {{3, 3}, {5, 5}, {1, 1}, {7, 1}, {17, 3}};
    d.kernel_h = sizes[i % 5][0], d.kernel_w = sizes[i % 5][1];
    d.stride_h = pick(1, 3), d.stride_w = pick(1, 3), d.dilation_h = pick(1, 2), d.dilation_w = pick(1, 2);
    d.pad_top = pick(0, 3), d.pad_left = pick(0, 3), d.pad_bottom = pick(0, 3), d.pad_right = pick(0, 3);
    d.in_height = pick(3, 40), d.in_width = pick(1, 30);
    d.in_height = std::max(d.in_height, d.dilation_h * (d.kernel_h - 1) + 1);
    d.in_width = std::max(d.in_width, d.dilation_w * (d.kernel_w - 1) + 1);
    d.layout = GK_LAYOUT_NHWC;
    d.activation = gk_activation(i % 3);
    check_depthwise(d, i % 2 == 0, uint32_t(2300 + i), 1 + i % 2, "depthwise NHWC", PairsOutput::AsGiven);
    if (HasFailure()) return;
  }
  struct Wide {
    int64_t channels, width, kernel, stride;
  };
  int wide_case = 0;
  for (const Wide& wide : {Wide{1004, 200, 3, 1}, Wide{9, 700, 3, 1}, Wide{40, 1100, 5, 2}}) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.in_channels = d.out_channels = d.groups = wide.channels;
    d.kernel_h = d.kernel_w = wide.kernel, d.stride_h = d.stride_w = wide.stride;
    d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = wide.kernel / 2;
    d.batch = 1, d.in_height = 5, d.in_width = wide.width;
    d.layout = GK_LAYOUT_NHWC;
    d.activation = GK_ACT_RELU;
    check_depthwise(d, true, uint32_t(2400 + wide.width), 1 + wide_case++ % 2, "depthwise NHWC wide rows",
                    PairsOutput::AsGiven);
    if (HasFailure()) return;
  }
}

// NHWC stems (under 8 input channels, output channels in whole 8-channel blocks) run
// direct_nchw8 on the image's pixels in place, storing into the output's NHWC rows: no
// copies in the workspace. 2 and 3 input channels, 8 to 64 outputs, 3x3, 5x5 dilated and
// 7x7 kernels, strides 1 and 2, batch 1..3, rows narrower than a tile (a staged tile whose
// reads would pass the image's end), AUTO and forced, 1 and 2 threads (each kernel of the
// CPU: its pointwise kernels store at the row's pixel stride).
TEST(Conv, NhwcStemsStoreIntoTheRows) {
  struct Stem {
    int64_t c, h, w, k, kernel, stride, pad, dilation, batch;
  };
  const Stem stems[] = {{3, 30, 31, 16, 3, 2, 1, 1, 3}, {3, 40, 41, 24, 7, 2, 3, 1, 1}, {3, 20, 20, 32, 3, 1, 1, 1, 2},
                        {2, 17, 23, 8, 5, 1, 4, 2, 2},  {3, 45, 47, 64, 3, 2, 1, 1, 1}, {3, 9, 7, 16, 3, 1, 0, 1, 2}};
  int i = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    if (!gk::pointwise_kernel().pointwise[0].fn) return;  // no engine (the generic kernel)
    for (const Stem& t : stems)
      for (gk_conv_algo algo : {GK_CONV_ALGO_AUTO, GK_CONV_ALGO_DIRECT_NCHW8}) {
        gk_conv_desc d;
        gk_conv_desc_init(&d);
        d.batch = t.batch, d.in_channels = t.c, d.in_height = t.h, d.in_width = t.w, d.out_channels = t.k;
        d.kernel_h = d.kernel_w = t.kernel, d.stride_h = d.stride_w = t.stride;
        d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = t.pad, d.dilation_h = d.dilation_w = t.dilation;
        d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
        const ConvCase c = gktest::make_conv_case(d, i % 2 == 0, uint32_t(2600 + i));
        gk_set_num_threads(1 + i++ % 2);
        SCOPED_TRACE(gktest::describe(d));
        // Its workspace: no more than the NCHW8 plan's reading the NCHW image in place
        // (which copies nothing), give or take less than one input copy.
        gk_conv_desc d8 = d;
        d8.layout = GK_LAYOUT_NCHW8, d8.flags = GK_CONV_FLAG_NCHW_INPUT;
        gk_conv_plan *plan = nullptr, *plan8 = nullptr;
        ASSERT_EQ(gk_conv_plan_create(&d, c.w.data(), c.bias.data(), algo, &plan), GK_OK) << gk_last_error();
        ASSERT_EQ(gk_conv_plan_create(&d8, c.w.data(), c.bias.data(), algo, &plan8), GK_OK) << gk_last_error();
        EXPECT_STREQ(gk_conv_plan_algo_name(plan), "direct_nchw8");
        EXPECT_LT(gk_conv_plan_workspace_size(plan),
                  gk_conv_plan_workspace_size(plan8) + 4 * d.in_channels * d.in_height * d.in_width);
        gk_conv_plan_destroy(plan);
        gk_conv_plan_destroy(plan8);
        EXPECT_EQ(gktest::check_conv(c, algo), "direct_nchw8");
        gk_set_num_threads(0);
        if (HasFailure()) return;
      }
  });
}

// Depthwise on a batch whose input is past 8 L2s, where the new input rows are fetched
// ahead of each output row: NCHW8 (strides 1 and 2, 1 and 2 threads; at stride 1 on 2
// threads the threads split rows, at stride 2 channel blocks) and NHWC in place (per
// segment of columns, where each thread's share is past 8 L2s: channel pairs at 48
// channels, a tail window at 44, strides 1 and 2, 1 and 2 threads), padding, sampled
// outputs against the double reference.
TEST(Conv, DepthwiseFetchesRowsAhead) {
  struct Case {
    gk_layout layout;
    int64_t channels, stride;
    int threads;
  };
  const Case cases[] = {{GK_LAYOUT_NCHW8, 32, 1, 1}, {GK_LAYOUT_NCHW8, 32, 2, 2}, {GK_LAYOUT_NCHW8, 32, 1, 2},
                        {GK_LAYOUT_NHWC, 48, 1, 1},  {GK_LAYOUT_NHWC, 44, 2, 2},  {GK_LAYOUT_NHWC, 48, 2, 1},
                        {GK_LAYOUT_NHWC, 44, 1, 2}};
  int i = 0;
  for (const Case& t : cases) {
    const int64_t image_bytes = t.channels * 64 * 64 * 4;
    const int64_t sharing = t.layout == GK_LAYOUT_NHWC ? t.threads : 1;
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = 8 * gk::caches().l2 * sharing / image_bytes + 1;
    d.in_channels = d.out_channels = d.groups = t.channels;
    d.in_height = d.in_width = 64, d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = t.stride;
    d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
    d.layout = t.layout, d.activation = gk_activation(1 + i % 2);
    if (t.layout == GK_LAYOUT_NCHW8) {
      const int64_t out_side = (64 - 1) / t.stride + 1;
      EXPECT_EQ(gk::conv::depthwise_nchw8_bands(out_side, out_side, t.threads) > 1, t.stride == 1 && t.threads == 2);
    }
    const uint32_t seed = t.layout == GK_LAYOUT_NCHW8 ? 2800 + uint32_t(i) : 2850 + uint32_t(i);
    check_depthwise(d, true, seed, t.threads, "depthwise fetching rows ahead", PairsOutput::Aligned, 4000);
    ++i;
    if (HasFailure()) return;
  }
}

// NCHW8 depthwise on images of at least 56x56 output pixels, where the threads split
// output rows into one band each (the channel blocks within a band): 2 and 3 threads
// (bands of unequal rows), a partial last block, strides 1 and 2, 3x3 and 5x5, dilation,
// batch 2 (each thread a band of both images), every activation; and at 56x55 and at 2
// threads on 12 rows, the channel-block split beside it; all against the double reference.
TEST(Conv, DepthwiseNchw8RowBands) {
  struct Case {
    int64_t channels, k, stride, dilation, pad, h, w, batch;
    int threads;
    bool banded;
  };
  const Case cases[] = {{20, 3, 1, 1, 1, 56, 56, 1, 2, true},     {24, 3, 2, 1, 1, 112, 112, 2, 2, true},
                        {16, 5, 1, 1, 2, 61, 57, 1, 3, true},     {8, 3, 1, 2, 2, 60, 64, 1, 2, true},
                        {44, 3, 2, 1, 1, 113, 120, 1, 3, true},   {20, 3, 1, 1, 1, 56, 55, 1, 2, false},
                        {24, 3, 1, 1, 1, 12, 300, 1, 2, false}};
  int i = 0;
  for (const Case& t : cases) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = t.batch, d.in_channels = d.out_channels = d.groups = t.channels;
    d.in_height = t.h, d.in_width = t.w, d.kernel_h = d.kernel_w = t.k;
    d.stride_h = d.stride_w = t.stride, d.dilation_h = d.dilation_w = t.dilation;
    d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = t.pad;
    d.layout = GK_LAYOUT_NCHW8, d.activation = gk_activation(i % 3);
    int64_t oh = 0, ow = 0;
    ASSERT_EQ(gk_conv_output_size(&d, &oh, &ow), GK_OK);
    EXPECT_EQ(gk::conv::depthwise_nchw8_bands(oh, ow, t.threads) > 1, t.banded) << gktest::describe(d);
    check_depthwise(d, i % 2 == 0, uint32_t(2900 + i), t.threads, "depthwise NCHW8 row bands");
    ++i;
    if (HasFailure()) return;
  }
}

// Depthwise NHWC whole blocks two at a time (16 lanes: AVX-512 CPUs, channel counts a
// multiple of 16, 64-byte aligned tensors; elsewhere the same cases run 8 lanes): one to
// 64 pairs, 3x3 and 5x5 at strides 1 and 2 (sizes compiled in), 3x3 and 5x5 dilated, 3x1
// dilated and 2x2 (run-time sizes), outputs from 1 to past two 8-column blocks wide, rows
// in several segments (1024 channels, 300 columns; 16 rows of 20 at 1024 channels; 1004,
// 8 lanes and the tail window, at stride 2), padding or none, every activation, with and
// without bias, batch 1..3; the odd cases large enough for 2 threads.
TEST(Conv, DepthwiseOnNhwcChannelPairs) {
  struct Case {
    int64_t channels, kh, kw, stride, dilation, pad, h, w, batch;
  };
  const Case cases[] = {{16, 3, 3, 1, 1, 1, 9, 13, 2},   {32, 3, 3, 2, 1, 1, 30, 29, 2},    {48, 5, 5, 1, 1, 2, 7, 21, 3},
                        {144, 3, 3, 1, 1, 1, 28, 28, 1}, {32, 5, 5, 2, 1, 2, 12, 17, 2},    {64, 3, 3, 1, 2, 2, 20, 20, 1},
                        {64, 3, 3, 1, 1, 0, 3, 3, 1},    {160, 3, 3, 2, 1, 1, 28, 28, 1},   {32, 2, 2, 1, 1, 0, 5, 20, 2},
                        {1024, 3, 3, 1, 1, 1, 4, 300, 1}, {16, 3, 1, 1, 2, 1, 9, 3, 1},     {32, 5, 5, 1, 2, 4, 30, 30, 1},
                        {1024, 3, 3, 1, 1, 1, 16, 20, 1}, {1004, 3, 3, 2, 1, 1, 33, 20, 1}};
  int i = 0;
  for (const Case& t : cases) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = t.batch, d.in_channels = d.out_channels = d.groups = t.channels;
    d.in_height = t.h, d.in_width = t.w, d.kernel_h = t.kh, d.kernel_w = t.kw;
    d.stride_h = d.stride_w = t.stride, d.dilation_h = d.dilation_w = t.dilation;
    d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = t.pad;
    d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
    check_depthwise(d, i % 2 == 0, uint32_t(2500 + i), 1 + i % 2, "depthwise NHWC pairs");
    ++i;
    if (HasFailure()) return;
  }
}

// Depthwise NHWC pairs two at a time (32 channels side by side: column_block's CV == 2
// on AVX-512 CPUs; elsewhere the same cases run 8 lanes): every output width from 1 to 19,
// so that each block of 4 to 8 columns runs two vectors wide and the narrower ones, border
// columns and edge rows a vector at a time; 3x3 at strides 1 and 2 and 5x5, by turns, on
// 32 channels (one pair of pairs), 64 (two) and 80 (two, then a single pair), batch 1
// and 2, every activation, with and without bias; and 17x17 (taller than 16 rows, the
// second vector's row pointers as many) on 12 to 14 columns.
TEST(Conv, DepthwiseOnNhwcTwoPairsAtATime) {
  const int64_t channels[] = {32, 64, 80};
  int i = 0;
  for (int64_t ow = 1; ow <= 19; ++ow)
    for (int64_t variant = 0; variant < 4; ++variant) {
      if (variant == 3 && (ow < 12 || ow > 14)) continue;
      const int64_t k = variant == 3 ? 17 : variant == 2 ? 5 : 3, stride = variant == 1 ? 2 : 1, pad = k / 2;
      gk_conv_desc d;
      gk_conv_desc_init(&d);
      d.batch = 1 + i % 2, d.in_channels = d.out_channels = d.groups = channels[(ow + variant) % 3];
      d.in_height = 4 + i % 3, d.in_width = (ow - 1) * stride + k - 2 * pad, d.kernel_h = d.kernel_w = k;
      d.stride_h = d.stride_w = stride;
      d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = pad;
      d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
      check_depthwise(d, i % 2 == 0, uint32_t(3100 + i), 1, "depthwise NHWC two pairs at a time");
      ++i;
      if (HasFailure()) return;
    }
}

// Depthwise 3x3 at stride 1 with padding 1 on rows of 1 to 8 columns as wide as the input
// (edge rows: each row one block of its columns, the loads outside it left out) in NCHW,
// NHWC in place (in pairs, 8 lanes, a tail window) and NCHW8 (in place, no zero-padded
// copy): every width in every layout, channel counts and heights by turns; 7-wide rows
// (MobileNetV2's and ShuffleNetV2's last stages) in each kind of block; 2 threads on
// 256 channels at batch 2 and 64 channels at 24 rows; their neighbours that are not
// edge rows (9 columns, a right padding of 0, NHWC rows staged with a multiplier or
// under 8 channels, whose staged rows carry their padding).
TEST(Conv, DepthwiseEdgeRows) {
  struct Case {
    gk_layout layout;
    int64_t channels, multiplier, width, height, batch, pad_right;
    int threads;
  };
  std::vector<Case> cases;
  const gk_layout layouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW8};
  const int64_t channels[] = {8, 13, 64, 24, 3, 44};
  for (int64_t w = 1; w <= 9; ++w)
    for (int l = 0; l < 3; ++l) cases.push_back({layouts[l], channels[(w + 2 * l) % 6], 1, w, w + 1 + (w + l) % 3, 1 + w % 2, 1, 1});
  for (int64_t c : {64, 24, 13, 3}) cases.push_back({GK_LAYOUT_NHWC, c, 1, 7, 7, 1, 1, 1});
  cases.push_back({GK_LAYOUT_NHWC, 16, 2, 7, 7, 1, 1, 1});
  cases.push_back({GK_LAYOUT_NHWC, 64, 1, 7, 7, 1, 0, 1});
  cases.push_back({GK_LAYOUT_NCHW8, 232, 1, 7, 7, 1, 1, 1});
  cases.push_back({GK_LAYOUT_NCHW8, 16, 1, 7, 7, 1, 0, 1});
  cases.push_back({GK_LAYOUT_NCHW, 8, 2, 7, 7, 1, 1, 1});
  for (gk_layout layout : layouts) cases.push_back({layout, 256, 1, 7, 7, 2, 1, 2});
  cases.push_back({GK_LAYOUT_NHWC, 64, 1, 8, 24, 1, 1, 2});
  int i = 0;
  for (const Case& t : cases) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = t.batch, d.in_channels = d.groups = t.channels, d.out_channels = t.channels * t.multiplier;
    d.in_height = t.height, d.in_width = t.width, d.kernel_h = d.kernel_w = 3;
    d.stride_h = d.stride_w = 1;
    d.pad_top = d.pad_left = d.pad_bottom = 1, d.pad_right = t.pad_right;
    d.layout = t.layout, d.activation = gk_activation(i % 3);
    check_depthwise(d, i % 2 == 0, uint32_t(2800 + i), t.threads, "depthwise edge rows");
    ++i;
    if (HasFailure()) return;
  }
}

// NHWC depthwise on images whose input and output are past L2, at stride 1 even shared by
// 2 threads: the in-place blocks run rows in segments of 8 columns (segment_columns), or
// with Fast-Run's tuning 3 in long ones. Channel pairs (48, aligned), single blocks (40)
// and a partial last block (44); 3x3 at strides 2 (1 thread) and 1, 5x5 at stride 1 (2
// threads); against the double reference.
TEST(Conv, DepthwiseOnNhwcImagesPastL2) {
  struct Case {
    int64_t channels, k, stride;
  };
  int i = 0;
  for (const Case& t : {Case{48, 3, 2}, Case{48, 3, 1}, Case{40, 3, 2}, Case{44, 5, 1}}) {
    // Pixels for 2.5 L2s of input and output (an output pixel per input pixel at stride 1).
    const int64_t side = int64_t(std::sqrt(2.5 * double(gk::caches().l2) / double(2 * t.channels * 4))) + 3;
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = 1, d.in_channels = d.out_channels = d.groups = t.channels;
    d.in_height = side, d.in_width = side + 5, d.kernel_h = d.kernel_w = t.k;
    d.stride_h = d.stride_w = t.stride;
    d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = t.k / 2;
    d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
    for (int64_t tuning : {0, 3})
      check_depthwise(d, i % 2 == 0, uint32_t(2700 + i), 1 + i % 2,
                      "depthwise NHWC past L2, tuning " + std::to_string(tuning), PairsOutput::Aligned, 0, tuning);
    ++i;
    if (HasFailure()) return;
  }
}

// The direct algorithm's register tiles (algo_direct.cpp), forced, on every kernel this CPU
// has (16 lanes, 4 vectors a tile, on AVX-512 where a row has more than 8 columns, else 8
// lanes and 3 vectors; a CPU without AVX-512 runs only the second): output widths across
// whole tiles and every remainder (1-4 vectors, partial lanes), bands of 1-4 narrow rows
// with a partial last band, vertical strides 1-5 (bands only up to 4), output channels past
// a 4-channel tile and a 32-channel work item, input channels past one panel (summed in the
// output, the activation after the last: grouped, 3x3, strided, ReLU6), horizontal strides
// 1-3 (stride phases), dilation, asymmetric padding, groups, batch 2, 1 and 2 threads.
// Then AUTO in NCHW: direct
// for grouped layers of small groups, the NCHW8 engine (on copies) for narrow rows, a GEMM
// for wide groups and ungrouped layers.
TEST(Conv, DirectRegisterTiles) {
  const int64_t widths[] = {1, 5, 8, 9, 16, 17, 23, 33, 47, 56, 63, 70, 113};
  const int64_t heights[] = {1, 2, 3, 5, 6, 7};
  struct Channels {
    int64_t icg, ocg, groups;
  };
  const Channels channels[] = {{1, 1, 1}, {3, 5, 2}, {2, 9, 3}, {5, 36, 1}, {4, 33, 2}, {1, 4, 3}};
  int i = 0;
  for (const char* kernel : {"", "avx2-6x16", "generic"}) {
    if (gk_set_kernel(kernel) != GK_OK) continue;  // not this CPU's
    for (int64_t ow : widths)
      for (int r = 0; r < 2; ++r, ++i) {
        const Channels& ch = channels[i % 6];
        gk_conv_desc d;
        gk_conv_desc_init(&d);
        d.batch = 1 + i % 2, d.groups = ch.groups;
        d.in_channels = ch.icg * ch.groups, d.out_channels = ch.ocg * ch.groups;
        // i = 0, 30: 400 input channels a group: more than one panel of input channels.
        if (i % 30 == 0) d.in_channels = 400 * d.groups;
        d.kernel_h = 1 + 2 * (i % 3), d.kernel_w = 1 + 2 * ((i + r) % 3);
        d.stride_h = 1 + (i + 1) % 2, d.stride_w = 1 + i % 3;
        d.dilation_h = 1 + i % 2, d.dilation_w = 1 + (i / 2) % 2;
        d.pad_top = i % 2, d.pad_bottom = d.kernel_h / 2, d.pad_left = d.kernel_w / 2, d.pad_right = i % 3 == 0 ? 0 : 1;
        const int64_t oh = heights[(i + r) % 6];
        d.in_height = std::max<int64_t>(1, (oh - 1) * d.stride_h + d.dilation_h * (d.kernel_h - 1) + 1 - d.pad_top - d.pad_bottom);
        d.in_width = std::max<int64_t>(1, (ow - 1) * d.stride_w + d.dilation_w * (d.kernel_w - 1) + 1 - d.pad_left - d.pad_right);
        d.layout = i % 7 == 0 ? GK_LAYOUT_NCHW8 : GK_LAYOUT_NCHW;
        d.activation = gk_activation(i % 3);
        gk_set_num_threads(1 + i % 2);
        SCOPED_TRACE(std::string("kernel '") + kernel + "' " + gktest::describe(d));
        EXPECT_EQ(gktest::check_conv(gktest::make_conv_case(d, i % 4 != 0, uint32_t(i)), GK_CONV_ALGO_DIRECT), "direct");
        if (HasFailure()) break;
      }
    // Several panels of a group's input channels, then vertical strides past a band's.
    struct Extra {
      int64_t groups, icg, ocg, h, w, k, stride_h, stride_w, pad;
      gk_activation act;
    };
    const Extra extras[] = {{2, 300, 6, 9, 21, 3, 2, 2, 1, GK_ACT_RELU6}, {3, 200, 5, 6, 12, 3, 1, 3, 1, GK_ACT_RELU},
                            {1, 3, 8, 23, 6, 3, 3, 1, 1, GK_ACT_RELU},    {2, 2, 5, 27, 13, 3, 5, 2, 0, GK_ACT_NONE},
                            {1, 4, 4, 19, 20, 3, 4, 1, 1, GK_ACT_RELU6}};
    for (const Extra& e : extras) {
      gk_conv_desc d;
      gk_conv_desc_init(&d);
      d.batch = 2, d.groups = e.groups, d.in_channels = e.icg * e.groups, d.out_channels = e.ocg * e.groups;
      d.in_height = e.h, d.in_width = e.w, d.kernel_h = d.kernel_w = e.k;
      d.stride_h = e.stride_h, d.stride_w = e.stride_w;
      d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = e.pad;
      d.layout = GK_LAYOUT_NCHW, d.activation = e.act;
      SCOPED_TRACE(std::string("kernel '") + kernel + "' " + gktest::describe(d));
      EXPECT_EQ(gktest::check_conv(gktest::make_conv_case(d, true, 77), GK_CONV_ALGO_DIRECT), "direct");
    }
    if (HasFailure()) break;
  }
  gk_set_kernel(nullptr);
  gk_set_num_threads(0);

  auto plan_name = [](int64_t channels, int64_t hw, int64_t groups, int64_t kernel) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = 1, d.in_channels = d.out_channels = channels, d.in_height = d.in_width = hw, d.groups = groups;
    d.kernel_h = d.kernel_w = kernel, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = kernel / 2;
    d.layout = GK_LAYOUT_NCHW;
    return gktest::check_conv(gktest::make_conv_case(d, true, 5), GK_CONV_ALGO_AUTO, 200);
  };
  // Rows of 28 columns or more read in place; narrower ones on the NCHW8 engine's copies
  // where the CPU has pointwise kernels and the groups make whole blocks.
  const std::string engine = has_pointwise_kernels() ? "pointwise_nchw8" : "im2col_gemm";
  EXPECT_EQ(plan_name(64, 30, 16, 3), "direct");       // groups of 4
  EXPECT_EQ(plan_name(96, 28, 3, 3), "direct");        // groups of 32
  EXPECT_EQ(plan_name(24, 10, 8, 1), "direct");        // 1x1, groups of 3: no whole blocks
  EXPECT_EQ(plan_name(20, 12, 4, 3), "direct");        // groups of 5: no whole blocks
  EXPECT_EQ(plan_name(512, 14, 32, 3), "direct");      // 16 channels a group: whole-image panels
  EXPECT_EQ(plan_name(64, 12, 16, 3), has_pointwise_kernels() ? "pointwise_nchw8" : "direct");
  EXPECT_EQ(plan_name(128, 30, 2, 3), engine);         // groups of 64
  EXPECT_EQ(plan_name(64, 10, 8, 1), has_pointwise_kernels() ? "pointwise_nchw8" : "gemm_1x1");
  EXPECT_NE(plan_name(32, 30, 1, 3), "direct");        // ungrouped
}

// Direct on NCHW8 tensors without copies: a super-group of whole channel blocks per item,
// its input transposed into a whole-image panel, its output computed into planes and
// transposed back (16 pixels at a time with AVX-512, then 8, then one by one). Group
// widths 1..16 (merged by 2 to 8; input and output widths apart), widths 1..57 around
// those steps and the vector widths, kernels 1x1 to 5x3, vertical strides and dilations,
// asymmetric padding, batch 1..2, 1 and 2 threads, every kernel of the CPU. The workspace
// is a thread's panel and planes, not copies of the tensors.
TEST(Conv, DirectOnChannelBlocks) {
  struct Groups {
    int64_t icg, ocg, groups;
  };
  const Groups groups[] = {{4, 4, 32}, {8, 8, 16}, {8, 16, 16}, {16, 8, 16}, {1, 1, 128},
                           {3, 3, 128}, {2, 6, 64}, {12, 4, 32}, {5, 8, 128}};
  const int64_t widths[] = {1, 3, 7, 8, 9, 15, 16, 17, 24, 28, 31, 33, 40, 57};
  int i = 0;
  for (const char* kernel : {"", "avx2-6x16", "generic"}) {
    if (gk_set_kernel(kernel) != GK_OK) continue;  // not this CPU's
    for (int64_t w : widths)
      for (int r = 0; r < 2; ++r, ++i) {
        const Groups& g = groups[i % 9];
        gk_conv_desc d;
        gk_conv_desc_init(&d);
        d.batch = 1 + i % 2, d.groups = g.groups;
        d.in_channels = g.icg * g.groups, d.out_channels = g.ocg * g.groups;
        d.in_height = 1 + (i * 7 + r * 3) % 12, d.in_width = w;
        d.kernel_h = 1 + 2 * (i % 3), d.kernel_w = 1 + 2 * (i / 2 % 3 % 2);  // 5x3 too
        d.stride_h = 1 + i / 2 % 2, d.dilation_h = 1 + i / 4 % 2, d.dilation_w = 1 + (i / 3) % 2;
        d.pad_top = d.kernel_h / 2, d.pad_bottom = i % 2 ? d.kernel_h / 2 : d.kernel_h - 1;
        d.pad_left = i / 2 % 5 == 0 ? 0 : d.kernel_w / 2 * d.dilation_w, d.pad_right = i % 5 == 1 ? 0 : d.kernel_w / 2 * d.dilation_w;
        int64_t oh = 0, ow = 0;
        if (gk_conv_output_size(&d, &oh, &ow) != GK_OK) {  // a window past the padded input
          d.in_height += d.kernel_h * d.dilation_h;
          d.in_width += d.kernel_w * d.dilation_w;
        }
        d.layout = i % 5 < 2 ? GK_LAYOUT_NCHW : GK_LAYOUT_NCHW8;  // whole-image panels in NCHW too
        d.activation = gk_activation(i % 3);
        gk_set_num_threads(1 + (i / 2) % 2);
        SCOPED_TRACE(std::string("kernel '") + kernel + "' " + gktest::describe(d));
        const gktest::ConvCase c = gktest::make_conv_case(d, i % 4 != 0, uint32_t(i));
        EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_DIRECT), "direct");
        // In a workspace of NaNs, the same output: nothing reads what the run did not write.
        gk_conv_plan* plan = nullptr;
        ASSERT_EQ(gk_conv_plan_create(&d, c.w.data(), nullptr, GK_CONV_ALGO_DIRECT, &plan), GK_OK);
        std::vector<float> x(size_t(gk_tensor_size(d.layout, d.batch, d.in_channels, d.in_height, d.in_width)));
        ASSERT_EQ(gk_convert_layout(c.x.data(), GK_LAYOUT_NCHW, x.data(), d.layout, d.batch, d.in_channels,
                                    d.in_height, d.in_width), GK_OK);
        const size_t out = size_t(gk_tensor_size(d.layout, d.batch, d.out_channels, c.oh, c.ow));
        std::vector<float> cached(out, 1.0f), nans(out, 2.0f);
        std::vector<float> ws(size_t(gk_conv_plan_workspace_size(plan) / 4 + 16), std::nanf(""));
        float* ws64 = ws.data() + (16 - reinterpret_cast<uintptr_t>(ws.data()) / 4 % 16) % 16;
        EXPECT_EQ(gk_conv_run(plan, x.data(), cached.data()), GK_OK);
        EXPECT_EQ(gk_conv_run_with_workspace(plan, x.data(), nans.data(), ws64, gk_conv_plan_workspace_size(plan)),
                  GK_OK) << gk_last_error();
        EXPECT_EQ(cached, nans);
        gk_conv_plan_destroy(plan);
        if (HasFailure()) break;
      }
    // ResNeXt's 4-channel groups at 56x56: a thread's panel and planes (8 channels each)
    // take 240 KiB, the copies of the tensors 3.1 MiB.
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = 1, d.in_channels = d.out_channels = 128, d.groups = 32, d.in_height = d.in_width = 56;
    d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
    d.layout = GK_LAYOUT_NCHW8;
    const std::vector<float> w(128 * 4 * 9, 0.01f);
    gk_conv_plan* plan = nullptr;
    ASSERT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_DIRECT, &plan), GK_OK);
    EXPECT_LE(gk_conv_plan_workspace_size(plan), int64_t{300} * 1024 * std::max(1, gk_get_num_threads()));
    gk_conv_plan_destroy(plan);
    if (HasFailure()) break;
  }
  gk_set_kernel(nullptr);
  gk_set_num_threads(0);
  // AUTO in NCHW8 and NHWC: with AVX-512, direct on the blocks for groups of up to 8
  // channels; the engine for wider groups (and AVX2's engine for any).
  auto plan_name = [](int64_t channels, int64_t hw, gk_layout layout) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = 1, d.in_channels = d.out_channels = channels, d.in_height = d.in_width = hw, d.groups = 32;
    d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
    d.layout = layout;
    return gktest::check_conv(gktest::make_conv_case(d, true, 9), GK_CONV_ALGO_AUTO, 300);
  };
  const bool avx512 = std::string(gk_kernel_name()) == "avx512";
  const std::string small_groups = avx512 || !has_pointwise_kernels() ? "direct" : "pointwise_nchw8";
  EXPECT_EQ(plan_name(128, 30, GK_LAYOUT_NCHW8), small_groups);  // 4 channels a group
  EXPECT_EQ(plan_name(256, 14, GK_LAYOUT_NCHW8), small_groups);  // 8
  EXPECT_EQ(plan_name(128, 20, GK_LAYOUT_NHWC), small_groups);
  // The engine where direct does not take whole images on 16 lanes: 8 super-groups (4
  // channels a group, 16 groups), stride 2 across, rows of 8; or wider output groups.
  const std::string engine = has_pointwise_kernels() ? "pointwise_nchw8" : "direct";
  auto plan_of = [](gk_conv_desc d) { return gktest::check_conv(gktest::make_conv_case(d, true, 11), GK_CONV_ALGO_AUTO, 300); };
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = d.out_channels = 64, d.groups = 16, d.in_height = d.in_width = 30;
  d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
  d.layout = GK_LAYOUT_NCHW8;
  EXPECT_EQ(plan_of(d), engine);
  d.batch = 2;  // 16 super-groups
  EXPECT_EQ(plan_of(d), small_groups);
  d.stride_w = 2;
  EXPECT_EQ(plan_of(d), engine);
  d.stride_w = 1, d.in_width = 8;
  EXPECT_EQ(plan_of(d), engine);
  d.in_width = 30, d.out_channels = 128;  // 4 in, 8 out: still direct; 4 in, 16 out: the engine
  EXPECT_EQ(plan_of(d), small_groups);
  d.out_channels = 256;
  EXPECT_EQ(plan_of(d), engine);
  // NCHW: direct from rows of 14 where it takes whole images (16 groups in the batch).
  d.layout = GK_LAYOUT_NCHW, d.out_channels = 64, d.in_width = 14;
  EXPECT_EQ(plan_of(d), "direct");
  d.in_width = 13;
  EXPECT_EQ(plan_of(d), engine);
  if (has_pointwise_kernels()) {
    EXPECT_EQ(plan_name(512, 14, GK_LAYOUT_NCHW8), "pointwise_nchw8");  // 16
  }
}

// Grouped convolutions on the NCHW8 engine (a super-group of whole channel blocks at a
// time, direct or on im2col chunks), forced and chosen by AUTO: channels per group 1..64
// with odd ones, input and output group widths apart, groups merged in pairs and fours,
// 1x1 and 3x3 with strides, padding and dilation, NCHW8, NHWC and NCHW (through NCHW8 copies),
// batch 1..3, 1 and 2 threads (the residual: ConvResidual's grouped shapes). Shapes the
// engine does not serve are refused.
TEST(Conv, GroupedOnTheNchw8Engine) {
  std::mt19937 rng(1931);
  auto pick = [&](int lo, int hi) { return int64_t(lo + int(rng() % unsigned(hi - lo + 1))); };
  const int64_t group_widths[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 64};
  const int cases = gktest::quick() ? 24 : 60;
  int served = 0;
  for (int i = 0; i < cases; ++i) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = pick(1, 3);
    const int64_t icg = group_widths[i % 12], ocg = i % 3 == 0 ? group_widths[pick(0, 11)] : icg;
    d.groups = icg * ocg > 512 ? 2 : pick(2, 8);
    d.in_channels = icg * d.groups, d.out_channels = ocg * d.groups;
    const bool pointwise = i % 4 == 1;
    d.kernel_h = d.kernel_w = pointwise ? 1 : 3;
    d.stride_h = d.stride_w = pick(1, 2);
    if (!pointwise) {
      d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = pick(0, 1);
      d.dilation_h = d.dilation_w = i % 5 == 4 ? 2 : 1;
    }
    // Rows up to 40 wide: the engine runs a super-group direct on rows with a whole 12-pixel
    // tile inside the image, on im2col chunks otherwise.
    d.in_height = pick(5, 16), d.in_width = i % 2 ? pick(26, 40) : pick(5, 16);
    d.layout = i % 3 == 2 ? GK_LAYOUT_NHWC : i % 4 == 3 ? GK_LAYOUT_NCHW : GK_LAYOUT_NCHW8;
    d.activation = gk_activation(i % 3);
    SCOPED_TRACE(gktest::describe(d));
    int64_t oh = 0, ow = 0;
    ASSERT_EQ(gk_conv_output_size(&d, &oh, &ow), GK_OK);
    // In NCHW, AUTO reads rows of 28 columns or more in place with direct (groups of up to
    // 32 channels, or a 1x1 of up to 4), of 14 or more where direct takes whole images (16
    // groups in the batch, stride 1 across); in NCHW8 and NHWC with AVX-512, direct on the
    // blocks for groups of up to 8 channels where 16 super-groups of whole blocks make the
    // batch: plan.cpp's rules, stated here independently (these images fit the panels).
    auto items = [&](bool blocks) -> int64_t {
      for (int64_t k = 1; k <= 8; ++k)
        if (d.groups % k == 0 && (!blocks || ((k * icg) % 8 == 0 && (k * ocg) % 8 == 0))) return d.batch * d.groups / k;
      return 0;
    };
    const bool small = pointwise ? icg <= 4 : icg <= 32;
    const bool direct_in_place = d.layout == GK_LAYOUT_NCHW && small &&
                                 (ow >= 28 || (ow >= 14 && d.stride_w == 1 && items(false) >= 16));
    const bool on_blocks = d.layout != GK_LAYOUT_NCHW && std::string(gk_kernel_name()) == "avx512" && small &&
                           std::max(icg, ocg) <= 8 && d.stride_w == 1 && items(true) >= 16;
    const ConvCase c = gktest::make_conv_case(d, i % 2 == 0, uint32_t(1900 + i));
    gk_set_num_threads(1 + i % 2);
    if (expect_usable(GK_CONV_ALGO_POINTWISE_NCHW8, d)) {
      ++served;
      gktest::check_conv(c, GK_CONV_ALGO_POINTWISE_NCHW8);
      if (d.groups != d.in_channels) {
        EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_AUTO), direct_in_place || on_blocks ? "direct" : "pointwise_nchw8");
      }
    } else {
      gk_conv_plan* plan = nullptr;
      EXPECT_EQ(gk_conv_plan_create(&d, c.w.data(), nullptr, GK_CONV_ALGO_POINTWISE_NCHW8, &plan), GK_ERR_UNSUPPORTED);
      gk_conv_plan_destroy(plan);
      gktest::check_conv(c, GK_CONV_ALGO_AUTO);
    }
    gk_set_num_threads(0);
    if (HasFailure()) return;
  }
  if (has_pointwise_kernels()) {
    EXPECT_GE(served, cases / 3);
  }
}

// Across channels, every output row width from 1 to 27 at strides 1 and 2, with and
// without padding, 3x3 and 5x5 (their sizes compiled in; at stride 1 each input vector
// loaded once per kernel row): the blocks of 8 columns, the blocks of exactly the 1..7
// columns left and the split of a last whole block with 1..3 more (9 = 5 + 4 .. 11 =
// 6 + 5), next to the border columns. NCHW8 (in place) and NCHW (staged bands), 9
// channels (a partial block).
TEST(Conv, DepthwiseEveryRowWidth) {
  int i = 0;
  for (gk_layout layout : {GK_LAYOUT_NCHW8, GK_LAYOUT_NCHW})
    for (int64_t k : {3, 5})
      for (int64_t stride : {1, 2})
        for (int64_t pad : {int64_t(0), k / 2})
          for (int64_t ow = 1; ow <= 27; ++ow) {
            gk_conv_desc d;
            gk_conv_desc_init(&d);
            d.batch = 1, d.in_channels = 9, d.groups = 9, d.out_channels = 9;
            d.kernel_h = d.kernel_w = k, d.stride_h = d.stride_w = stride;
            d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = pad;
            d.in_height = 6;
            d.in_width = (ow - 1) * stride + k - 2 * pad;  // gives ow output columns
            if (d.in_width < k) continue;
            d.layout = layout;
            d.activation = gk_activation(i % 3);
            gk::conv::Shape shape;
            ASSERT_TRUE(gk::conv::validate(d, &shape)) << gk_last_error();
            ASSERT_EQ(shape.ow, ow);
            const ConvCase c = gktest::make_conv_case(d, i % 2 == 0, uint32_t(900 + i));
            const auto prepared = gk::conv::depthwise_algorithm()->prepare(shape, c.w.data(),
                                                                           c.with_bias ? c.bias.data() : nullptr, 1);
            ASSERT_TRUE(prepared);
            gktest::check_conv_run(c, "depthwise:vectorize=1 " + gktest::describe(d), [&](const float* in, float* out) {
              EXPECT_EQ(gk::conv::run_in_layout(shape, *prepared, in, out), GK_OK);
            });
            ++i;
            if (HasFailure()) return;
          }
}

namespace {
// Forces `algo` on each descriptor in NCHW8 with every kernel this CPU has forced, at 1
// and 2 threads, the activation cycling and bias on every other run (1x1 and im2col below),
// then the NCHW8 engine that serves it (nchw8_engine), or, where the kernel has no
// pointwise kernels, checks that the engine refuses it.
void check_nchw8_in_place(const std::vector<gk_conv_desc>& descs, gk_conv_algo algo, const char* name,
                          uint32_t seed) {
  int i = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (gk_conv_desc d : descs) {
        if (gktest::quick() && d.in_channels > 100) continue;
        d.layout = GK_LAYOUT_NCHW8;
        d.activation = gk_activation(i % 3);
        SCOPED_TRACE(gktest::describe(d) + " threads " + std::to_string(threads));
        const gktest::ConvCase c = gktest::make_conv_case(d, i % 2 == 0, seed + uint32_t(i));
        EXPECT_EQ(gktest::check_conv(c, algo), name);
        const gk_conv_algo engine = nchw8_engine(d);
        if (has_pointwise_kernels()) {
          EXPECT_EQ(gktest::check_conv(c, engine), engine == GK_CONV_ALGO_DIRECT_NCHW8 ? "direct_nchw8" : "pointwise_nchw8");
        } else {
          gk_conv_plan* plan = nullptr;
          EXPECT_EQ(gk_conv_plan_create(&d, c.w.data(), nullptr, engine, &plan), GK_ERR_UNSUPPORTED);
          gk_conv_plan_destroy(plan);
        }
        ++i;
      }
    }
  });
  gk_set_num_threads(0);
}
}  // namespace

// gemm_1x1 in NCHW8 runs in place, with each kernel forced, as a GEMM with B packed from
// the blocked input and C tiles stored blocked (strided ones from a subsampled copy), and
// pointwise_nchw8 on the pointwise kernels (x86-64; strided ones on im2col chunks): channels past
// the KC block (the C tiles accumulate, beta = 1), output channels past the MC block and
// not a multiple of MR or 8, pixel counts not a multiple of 8, batch 2, 1 and 2 threads;
// padding channels of the output stay zero (checked).
TEST(Conv, Gemm1x1BlockedInPlace) {
  struct Case { int64_t batch, c, h, w, k, sh, sw; };
  // Output channels 13, 203, 8, 64, 30: every pointwise panel width (24, 16, 8) and the
  // padding channels; pixel counts that leave partial (staged) tiles; 400 channels: more
  // than one panel group and pixel chunk; 2805 channels, and as many as this machine's L2
  // needs: a panel's weights past half of L2, so K blocks accumulating in the output (the
  // last one partial). Strided ones: im2col chunks (pointwise) or the subsampled copy (GEMM).
  const int64_t past_half_l2 = gk::caches().l2 / 2 / (24 * 4) + 9;  // rows of panels 24+ wide
  const Case cases[] = {{2, 20, 5, 7, 13, 1, 1},  {1, 400, 7, 9, 203, 2, 2}, {1, 8, 3, 3, 8, 1, 1},
                        {2, 33, 11, 6, 64, 2, 3}, {1, 17, 9, 5, 30, 1, 1},   {1, 2805, 3, 5, 20, 1, 1},
                        {1, past_half_l2, 2, 3, 20, 1, 1}};
  std::vector<gk_conv_desc> descs;
  for (const Case& k : cases) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = k.batch, d.in_channels = k.c, d.in_height = k.h, d.in_width = k.w, d.out_channels = k.k;
    d.kernel_h = d.kernel_w = 1, d.stride_h = k.sh, d.stride_w = k.sw;
    descs.push_back(d);
  }
  check_nchw8_in_place(descs, GK_CONV_ALGO_GEMM_1X1, "gemm_1x1", 700);
}

// im2col_gemm on NCHW8 in place with each kernel forced (GEMMs on a phase image built
// from the blocked input), and pointwise_nchw8 / direct_nchw8 where the kernel has
// pointwise kernels. Pointwise:
// im2col chunks in whole blocks with the lanes past the last channel masked; weights past
// half of L2 (64 -> 256 and 512 -> 20 channels) in K blocks accumulating in the output, a
// chunk's panels split between threads. Under 8 channels direct: taps above and below the
// image on the zero row, padding wider than the kernel (rows with no tap inside), the
// border pixels of many rows in several batches (64x40 7x7), a last partial tile that
// would read past the image (5 channels, no padding, 29 columns), a row's last pixels in
// one-pixel calls or a staged tile (40 channels: 24 + 16 wide panels; 8 channels). Kernels 3x3 and 7x7
// (stems), 5x5, asymmetric padding, dilation, strides 2 and 3, more than one pixel chunk,
// partial pixel tiles, each activation, 1 and 2 threads.
TEST(Conv, Im2colBlockedInPlace) {
  struct Case { int64_t batch, c, h, w, k, kh, kw, sh, sw, pt, pl, pb, pr, dil; };
  const Case cases[] = {
      {1, 3, 23, 21, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1},    {2, 3, 20, 19, 13, 7, 7, 2, 2, 3, 3, 3, 3, 1},
      {1, 20, 9, 11, 30, 3, 3, 1, 1, 1, 0, 2, 1, 1},    {1, 64, 9, 11, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 17, 12, 10, 40, 5, 5, 2, 3, 2, 2, 2, 2, 1},   {1, 9, 13, 13, 16, 3, 3, 1, 1, 2, 2, 2, 2, 2},
      {1, 512, 5, 6, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1},    {1, 5, 6, 31, 24, 3, 3, 1, 1, 0, 0, 0, 0, 1},
      {1, 2, 4, 5, 16, 5, 5, 1, 1, 4, 4, 4, 4, 1},      {1, 1, 17, 19, 8, 3, 3, 3, 3, 0, 2, 1, 0, 2},
      {1, 3, 64, 40, 40, 7, 7, 2, 2, 3, 3, 3, 3, 1},    {1, 4, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 3, 7, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      // The weights past half of this machine's L2 (the fixed ones above assume 512 KiB);
      // 52 and 40 outputs: a last panel one block past them (AVX-512: 32 + 32 and 32 + 16
      // wide; AVX2: 24 + 24 + 8 and 24 + 16), packed K block by K block.
      {1, gk::caches().l2 / 2 / (9 * 64 * 4) + 9, 4, 5, 60, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, gk::caches().l2 / 2 / (9 * 56 * 4) + 9, 5, 4, 52, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, gk::caches().l2 / 2 / (9 * 40 * 4) + 9, 4, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1}};
  std::vector<gk_conv_desc> descs;
  for (const Case& k : cases) {
    gk_conv_desc d;
    gk_conv_desc_init(&d);
    d.batch = k.batch, d.in_channels = k.c, d.in_height = k.h, d.in_width = k.w, d.out_channels = k.k;
    d.kernel_h = k.kh, d.kernel_w = k.kw, d.stride_h = k.sh, d.stride_w = k.sw;
    d.pad_top = k.pt, d.pad_left = k.pl, d.pad_bottom = k.pb, d.pad_right = k.pr;
    d.dilation_h = d.dilation_w = k.dil;
    descs.push_back(d);
  }
  check_nchw8_in_place(descs, GK_CONV_ALGO_IM2COL_GEMM, "im2col_gemm", 900);
}

// gemm_1x1 on NHWC tensors runs where they are, as one GEMM over the batch (no NCHW
// copies): channel counts 1..33, 61 and 127 in and out, strides 1 and 2 (the strided pixels
// gathered), batch 1..3, bias or none, each activation, 1 and 2 threads (adding to the
// output: test_conv_residual.cpp).
TEST(Conv, Gemm1x1OnNhwcInPlace) {
  int i = 0;
  for (int64_t ic : {1, 2, 7, 8, 9, 16, 17, 31, 33, 61, 127})
    for (int64_t oc : {1, 5, 8, 24, 33, 61, 127})
      for (int64_t stride : {1, 2}) {
        gk_conv_desc d;
        gk_conv_desc_init(&d);
        d.batch = 1 + i % 3, d.in_channels = ic, d.out_channels = oc;
        d.in_height = 5 + i % 4, d.in_width = 6 + i % 5, d.stride_h = d.stride_w = stride;
        d.kernel_h = d.kernel_w = 1, d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
        SCOPED_TRACE(gktest::describe(d));
        gk::conv::Shape shape;
        ASSERT_TRUE(gk::conv::validate(d, &shape));
        const gktest::ConvCase c = gktest::make_conv_case(d, i % 2 == 0, 800 + uint32_t(i));
        const auto prepared = gk::conv::gemm_1x1_algorithm()->prepare(shape, c.w.data(), nullptr);
        ASSERT_TRUE(prepared);
        EXPECT_TRUE(prepared->native_layout(GK_LAYOUT_NHWC));
        gk_set_num_threads(1 + i % 2);
        EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_GEMM_1X1), "gemm_1x1");
        ++i;
        if (HasFailure()) return;
      }
  gk_set_num_threads(0);
}

// pointwise_nchw8 on NHWC rows in place (a 1x1 of stride 1, 8+ input channels): panels of
// real channels only are stored straight into the rows (whole tiles, then 4- and 1-pixel
// calls), a last panel past the output channels through the staged tile. Output channels
// that make whole panels and ones that do not; pixel counts that leave 0, 5, 4, 3 and 1
// pixels past the 12-pixel tiles (each at batch 1, then at batch 2 and 3, the batch one
// image); weights past half of L2 per panel, so the K blocks accumulate in the rows (two
// threads splitting the pixels, and for 3 pixels the panels); 1024 input channels (each
// chunk's rows copied apart); bias or none, each activation, 1 and 2 threads (adding to the
// output: ConvResidual).
TEST(Conv, PointwiseOnNhwcRowsInPlace) {
  struct Case {
    int64_t ic, oc, pixels;
    int threads;  // 0: from the case index
  };
  const int64_t pixel_counts[] = {36, 41, 40, 39, 37};
  std::vector<Case> cases;
  for (int64_t ic : {8, 13, 64})
    for (int64_t oc : {8, 16, 24, 32, 61, 96, 144, 520})
      cases.push_back({ic, oc, pixel_counts[cases.size() % 5], 0});
  const int64_t k_blocked = gk::caches().l2 / 2 / (16 * 4) + 9;  // panels of 16 or more channels
  for (int threads : {1, 2}) {
    cases.push_back({k_blocked, 64, 41, threads});
    cases.push_back({k_blocked, 61, 40, threads});
  }
  cases.push_back({k_blocked, 64, 3, 2});
  for (int threads : {1, 2}) cases.push_back({1024, 61, 41, threads});  // rows copied (4 KiB apart)
  int i = 0, tested = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    if (!has_pointwise_kernels()) return;
    for (const Case& k : cases) {
      if (gktest::quick() && k.ic == k_blocked) continue;
      gk_conv_desc d;
      gk_conv_desc_init(&d);
      d.batch = k.ic == k_blocked ? 1 : 1 + (i / 5) % 3, d.in_channels = k.ic, d.out_channels = k.oc;
      d.in_height = k.pixels % 2 ? 1 : 2, d.in_width = k.pixels % 2 ? k.pixels : k.pixels / 2;
      d.kernel_h = d.kernel_w = 1, d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation((i / 3) % 3);
      const int threads = k.threads ? k.threads : 1 + (i / 7) % 2;
      SCOPED_TRACE(gktest::describe(d) + " threads " + std::to_string(threads));
      const gktest::ConvCase c = gktest::make_conv_case(d, (i / 2) % 2 == 0, 2600 + uint32_t(i));
      gk_set_num_threads(threads);
      EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_POINTWISE_NCHW8), "pointwise_nchw8");
      ++i, ++tested;
      if (HasFailure()) break;
    }
  });
  gk_set_num_threads(0);
#if defined(__x86_64__)
  if (gk::cpu().x86_avx2_fma) {
    EXPECT_GT(tested, 0);  // the AVX2 kernels have pointwise kernels
  }
#endif
}

// pointwise_nchw8 on NHWC tensors larger than a 1x1 in place (8+ input channels): im2col
// chunks gathered from the rows pixel-major (a copy of a pixel's channels per tap, zeros
// for the padding and past the channels), the outputs stored into the NHWC rows; no NCHW8
// copies (the prepared plan runs NHWC natively). Channel counts that fill whole blocks and
// ones that do not, strided 1x1 and 3x3, dilation, a 5x1 kernel, asymmetric padding,
// output channels past the last whole panel, batch 1..3; weights past half of L2, so the
// K blocks (not a multiple of a tap's rows) split taps and accumulate in the rows; 256+
// output channels on few pixels, whose panels two threads split; each kernel, 1 and 2
// threads (adding to the output: ConvResidual).
TEST(Conv, PointwiseOnNhwcChunks) {
  struct Case {
    int64_t c, h, w, k, kh, kw, stride, pad, dilation, batch;
  };
  const int64_t k_blocked = gk::caches().l2 / 2 / (9 * 64 * 4) + 13;
  const Case cases[] = {{8, 9, 11, 8, 3, 3, 2, 1, 1, 1},     {9, 10, 7, 16, 3, 3, 1, 1, 1, 2},
                        {13, 12, 13, 61, 1, 1, 2, 0, 1, 3},  {17, 11, 9, 24, 3, 3, 1, 2, 2, 1},
                        {64, 14, 14, 96, 3, 3, 2, 1, 1, 2},  {24, 9, 20, 32, 5, 1, 1, 2, 1, 1},
                        {k_blocked, 5, 6, 64, 3, 3, 1, 1, 1, 1}, {k_blocked, 7, 6, 61, 3, 3, 2, 1, 1, 2},
                        {64, 7, 7, 264, 3, 3, 2, 1, 1, 1},   {40, 9, 8, 260, 1, 1, 2, 0, 1, 2}};
  int i = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    if (!has_pointwise_kernels()) return;
    for (const Case& t : cases) {
      gk_conv_desc d;
      gk_conv_desc_init(&d);
      d.batch = t.batch, d.in_channels = t.c, d.in_height = t.h, d.in_width = t.w, d.out_channels = t.k;
      d.kernel_h = t.kh, d.kernel_w = t.kw, d.stride_h = d.stride_w = t.stride;
      d.dilation_h = d.dilation_w = t.dilation;
      d.pad_top = d.pad_bottom = t.pad, d.pad_left = t.kw > 1 ? t.pad : 0, d.pad_right = t.kw > 1 ? t.pad : 0;
      if (i % 3 == 1 && t.pad > 0) d.pad_bottom = 0, d.pad_right = d.pad_left ? d.pad_left - 1 : 0;  // asymmetric
      d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
      const int threads = t.k >= 256 ? 2 : 1 + i % 2;  // 256+ outputs: panels split between threads
      SCOPED_TRACE(gktest::describe(d) + " threads " + std::to_string(threads));
      gk::conv::Shape shape;
      ASSERT_TRUE(gk::conv::validate(d, &shape)) << gk_last_error();
      const gktest::ConvCase c = gktest::make_conv_case(d, i % 2 == 0, 2700 + uint32_t(i));
      const gk::conv::Algorithm* engine = gk::conv::pointwise_nchw8_algorithm();
      EXPECT_TRUE(engine->runs_nhwc(shape));
      const auto prepared = engine->prepare(shape, c.w.data(), nullptr, 0);
      ASSERT_TRUE(prepared);
      EXPECT_TRUE(prepared->native_layout(GK_LAYOUT_NHWC));
      gk_set_num_threads(threads);
      EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_POINTWISE_NCHW8), "pointwise_nchw8");
      gk_set_num_threads(0);
      ++i;
      if (HasFailure()) return;
    }
  });
}

// Every layout from and back to NCHW, each element checked at the offset the layout
// defines, the padding channels zero; channel counts for the vectorized 8-channel path
// (19 channels, 35 pixels), 3 channels (RGB: shuffled 8 pixels at a time, 35 pixels),
// whole blocks only (16), NHWC rows wider than 64 channels (70), a tensor large enough
// for two threads, and a conversion between two non-planar layouts.
TEST(Conv, LayoutRoundTripsAndPadding) {
  struct Dims { int64_t n, c, h, w; };
  gk_set_num_threads(2);
  struct RestoreThreads {
    ~RestoreThreads() { gk_set_num_threads(0); }
  } restore;
  for (const Dims& dims : {Dims{2, 5, 3, 4}, Dims{1, 19, 5, 7}, Dims{1, 70, 3, 3}, Dims{2, 3, 5, 7}, Dims{1, 16, 3, 5},
                           Dims{2, 19, 80, 80}}) {
    const int64_t n = dims.n, c = dims.c, h = dims.h, w = dims.w, hw = h * w;
    const std::vector<float> src = gktest::random_vector(size_t(n * c * hw), 9);
    for (gk_layout layout : kLayouts) {
      SCOPED_TRACE("c " + std::to_string(c) + " layout " + std::to_string(int(layout)));
      const int64_t size = gk_tensor_size(layout, n, c, h, w);
      const int64_t x = layout == GK_LAYOUT_NCHW4 ? 4 : layout == GK_LAYOUT_NCHW8 ? 8 : layout == GK_LAYOUT_NCHW16 ? 16 : 1;
      const int64_t cp = (c + x - 1) / x * x;
      EXPECT_EQ(size, n * cp * hw);
      std::vector<float> mid(size_t(size), gktest::kNaN), back(src.size(), gktest::kNaN);
      ASSERT_EQ(gk_convert_layout(src.data(), GK_LAYOUT_NCHW, mid.data(), layout, n, c, h, w), GK_OK);
      ASSERT_EQ(gk_convert_layout(mid.data(), layout, back.data(), GK_LAYOUT_NCHW, n, c, h, w), GK_OK);
      EXPECT_EQ(back, src);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t ch = 0; ch < cp; ++ch)
          for (int64_t p = 0; p < hw; ++p) {
            const int64_t at = layout == GK_LAYOUT_NHWC ? (b * hw + p) * c + ch
                               : layout == GK_LAYOUT_NCHW ? (b * c + ch) * hw + p
                                                          : ((b * (cp / x) + ch / x) * hw + p) * x + ch % x;
            if (layout == GK_LAYOUT_NHWC && ch >= c) continue;
            const float want = ch < c ? src[size_t((b * c + ch) * hw + p)] : 0.0f;  // padding channels: zero
            ASSERT_EQ(mid[size_t(at)], want) << "n " << b << " c " << ch << " pixel " << p;
          }
    }
    // NCHWx <-> NHWC (neither planar, a blocked copy per pixel) agree with going through
    // NCHW, both ways, the padding channels of the blocked result zero (it starts as NaN).
    std::vector<float> nhwc(src.size()), direct(src.size());
    ASSERT_EQ(gk_convert_layout(src.data(), GK_LAYOUT_NCHW, nhwc.data(), GK_LAYOUT_NHWC, n, c, h, w), GK_OK);
    for (gk_layout blocked_layout : {GK_LAYOUT_NCHW4, GK_LAYOUT_NCHW8, GK_LAYOUT_NCHW16}) {
      SCOPED_TRACE("c " + std::to_string(c) + " NHWC and layout " + std::to_string(int(blocked_layout)));
      const size_t size = size_t(gk_tensor_size(blocked_layout, n, c, h, w));
      std::vector<float> blocked(size), from_nhwc(size, gktest::kNaN);
      ASSERT_EQ(gk_convert_layout(src.data(), GK_LAYOUT_NCHW, blocked.data(), blocked_layout, n, c, h, w), GK_OK);
      ASSERT_EQ(gk_convert_layout(blocked.data(), blocked_layout, direct.data(), GK_LAYOUT_NHWC, n, c, h, w), GK_OK);
      EXPECT_EQ(direct, nhwc);
      ASSERT_EQ(gk_convert_layout(nhwc.data(), GK_LAYOUT_NHWC, from_nhwc.data(), blocked_layout, n, c, h, w), GK_OK);
      EXPECT_EQ(from_nhwc, blocked);
    }
  }
  EXPECT_EQ(gk_tensor_size(gk_layout(99), 1, 1, 1, 1), -1);
  EXPECT_STREQ(gk_status_string(gk_status(99)), "unknown status");
  EXPECT_STREQ(gk_status_string(GK_ERR_UNSUPPORTED), "unsupported");
  EXPECT_EQ(gk_convert_layout(nullptr, GK_LAYOUT_NCHW, nullptr, GK_LAYOUT_NHWC, 1, 1, 1, 1),
            GK_ERR_INVALID_ARGUMENT);
}

TEST(Conv, InvalidDescriptorsAreRejectedWithAMessage) {
  gk_conv_desc good;
  gk_conv_desc_init(&good);
  good.batch = 1, good.in_channels = 4, good.in_height = 8, good.in_width = 8, good.out_channels = 4;
  good.kernel_h = good.kernel_w = 3;
  const std::vector<float> w(4 * 4 * 9, 0.5f);
  std::vector<void (*)(gk_conv_desc&)> breakers = {
      [](gk_conv_desc& d) { d.batch = 0; },        [](gk_conv_desc& d) { d.in_channels = -1; },
      [](gk_conv_desc& d) { d.in_height = 0; },    [](gk_conv_desc& d) { d.in_width = -3; },
      [](gk_conv_desc& d) { d.out_channels = 0; }, [](gk_conv_desc& d) { d.kernel_h = 0; },
      [](gk_conv_desc& d) { d.kernel_w = -1; },    [](gk_conv_desc& d) { d.stride_h = 0; },
      [](gk_conv_desc& d) { d.stride_w = -2; },    [](gk_conv_desc& d) { d.dilation_h = 0; },
      [](gk_conv_desc& d) { d.dilation_w = -1; },  [](gk_conv_desc& d) { d.pad_top = -1; },
      [](gk_conv_desc& d) { d.pad_right = -1; },   [](gk_conv_desc& d) { d.groups = 0; },
      [](gk_conv_desc& d) { d.groups = 3; },       // 4 channels not divisible by 3
      [](gk_conv_desc& d) { d.kernel_h = 9; },     // larger than the padded input
      [](gk_conv_desc& d) { d.kernel_w = 4, d.dilation_w = 3; },
      [](gk_conv_desc& d) { d.layout = gk_layout(7); },
      [](gk_conv_desc& d) { d.activation = gk_activation(5); },
      [](gk_conv_desc& d) { d.flags = 0x80; },
  };
  for (size_t i = 0; i < breakers.size(); ++i) {
    gk_conv_desc d = good;
    breakers[i](d);
    gk_conv_plan* plan = reinterpret_cast<gk_conv_plan*>(0x1);
    EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_AUTO, &plan),
              GK_ERR_INVALID_ARGUMENT) << "breaker " << i;
    EXPECT_EQ(plan, nullptr);
    EXPECT_NE(std::string(gk_last_error()).find("invalid"), std::string::npos) << gk_last_error();
    int64_t oh = -7, ow = -7;
    EXPECT_EQ(gk_conv_output_size(&d, &oh, &ow), GK_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(oh, -7);
  }
  gk_conv_plan* plan = nullptr;
  EXPECT_EQ(gk_conv_plan_create(nullptr, w.data(), nullptr, GK_CONV_ALGO_AUTO, &plan), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gk_conv_plan_create(&good, nullptr, nullptr, GK_CONV_ALGO_AUTO, &plan), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gk_conv_plan_create(&good, w.data(), nullptr, GK_CONV_ALGO_AUTO, nullptr), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gk_conv_plan_create(&good, w.data(), nullptr, gk_conv_algo(42), &plan), GK_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(gk_conv_plan_create(&good, w.data(), nullptr, GK_CONV_ALGO_AUTO, &plan), GK_OK);
  std::vector<float> in(4 * 64, 1.0f), out(4 * 36, gktest::kSentinel);
  EXPECT_EQ(gk_conv_run(plan, nullptr, out.data()), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gk_conv_run(nullptr, in.data(), out.data()), GK_ERR_INVALID_ARGUMENT);
  for (float v : out) ASSERT_EQ(v, gktest::kSentinel);
  gk_conv_plan_destroy(plan);
  gk_conv_plan_destroy(nullptr);
}

TEST(Conv, ForcedAlgorithmThatCannotServeIsUnsupported) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = 4, d.in_height = 8, d.in_width = 8, d.out_channels = 4;
  d.kernel_h = d.kernel_w = 3;
  const std::vector<float> w(4 * 4 * 9, 0.5f);
  for (gk_conv_algo algo : {GK_CONV_ALGO_GEMM_1X1, GK_CONV_ALGO_DEPTHWISE}) {
    gk_conv_plan* plan = nullptr;
    EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, algo, &plan), GK_ERR_UNSUPPORTED);
    EXPECT_EQ(plan, nullptr);
    EXPECT_STRNE(gk_last_error(), "");
  }
  // Winograd serves 3x3, stride 1, dilation 1, groups 1 only.
  const std::vector<float> big_w(4 * 4 * 25, 0.5f);
  for (int breaker = 0; breaker < 4; ++breaker) {
    gk_conv_desc e = d;
    if (breaker == 0) e.stride_h = e.stride_w = 2;
    if (breaker == 1) e.kernel_h = e.kernel_w = 5;
    if (breaker == 2) e.dilation_h = e.dilation_w = 2;
    if (breaker == 3) e.groups = 2;
    for (gk_conv_algo algo : {GK_CONV_ALGO_WINOGRAD_F23, GK_CONV_ALGO_WINOGRAD_F43, GK_CONV_ALGO_WINOGRAD_F63}) {
      gk_conv_plan* plan = nullptr;
      EXPECT_EQ(gk_conv_plan_create(&e, big_w.data(), nullptr, algo, &plan), GK_ERR_UNSUPPORTED) << breaker;
      EXPECT_EQ(plan, nullptr);
      EXPECT_STRNE(gk_last_error(), "");
    }
  }
}

TEST(Conv, ConcurrentRunsOnOnePlan) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = 16, d.in_height = 20, d.in_width = 20, d.out_channels = 24;
  d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
  d.layout = GK_LAYOUT_NHWC, d.activation = GK_ACT_RELU;
  const ConvCase c = gktest::make_conv_case(d, true, 3);
  gk_conv_plan* plan = nullptr;
  ASSERT_EQ(gk_conv_plan_create(&d, c.w.data(), c.bias.data(), GK_CONV_ALGO_AUTO, &plan), GK_OK);
  std::vector<float> in(size_t(gk_tensor_size(d.layout, 1, 16, 20, 20)));
  gk_convert_layout(c.x.data(), GK_LAYOUT_NCHW, in.data(), d.layout, 1, 16, 20, 20);
  std::vector<float> expected(size_t(gk_tensor_size(d.layout, 1, 24, 20, 20)));
  ASSERT_EQ(gk_conv_run(plan, in.data(), expected.data()), GK_OK);
  std::vector<int> same(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool all = true;
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<float> out(expected.size(), gktest::kNaN);
        all = all && gk_conv_run(plan, in.data(), out.data()) == GK_OK && out == expected;
      }
      same[size_t(t)] = all;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(same[size_t(t)]) << "thread " << t;
  gk_conv_plan_destroy(plan);
  gktest::check_conv(c, GK_CONV_ALGO_AUTO);  // and the result itself is right
}
