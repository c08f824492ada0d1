// Winograd F(2x2), F(4x4), F(6x6) (3x3, stride 1): against the double reference with the
// accuracy measure of the issue (max error / max |output|): tiles and tails, channels,
// layouts, bias and activations, batch, threads, concurrent runs; and the accuracy on
// every 3x3 stride-1 layer of the five networks with realistic data.
#include <memory>
#include <thread>

#include "conv_test_util.h"
#include "conv/conv.h"
#include "conv/winograd_matrices.h"

namespace {

struct Variant {
  gk_conv_algo algo;
  int m;
  double bound;  // max error / max |output|; measured on the networks: 7.0e-7, 5.5e-6, 8.9e-6
};
const Variant kVariants[] = {{GK_CONV_ALGO_WINOGRAD_F23, 2, 3e-6},
                             {GK_CONV_ALGO_WINOGRAD_F43, 4, 2e-5},
                             {GK_CONV_ALGO_WINOGRAD_F63, 6, 5e-5}};

gk_conv_desc desc3x3(int64_t batch, int64_t ic, int64_t h, int64_t w, int64_t oc, int64_t pad) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = batch, d.in_channels = ic, d.in_height = h, d.in_width = w, d.out_channels = oc;
  d.kernel_h = d.kernel_w = 3;
  d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = pad;
  return d;
}

}  // namespace

// The 1-D identity behind every variant, in double: A^T [(G g) .* (B^T d)] = correlation.
TEST(Winograd, TransformMatricesComputeCorrelation) {
  for (const Variant& v : kVariants) {
    const gk::conv::WinogradMatrices w = gk::conv::winograd_matrices(v.m);
    ASSERT_EQ(w.alpha, v.m + 2);
    const int a = w.alpha;
    std::vector<float> d = gktest::random_vector(size_t(a), 1), g = gktest::random_vector(3, 2);
    for (int i = 0; i < v.m; ++i) {
      double y = 0, ref = 0;
      for (int j = 0; j < a; ++j) {
        double gg = 0, bd = 0;
        for (int k = 0; k < 3; ++k) gg += w.g[size_t(j * 3 + k)] * g[size_t(k)];
        for (int k = 0; k < a; ++k) bd += w.bt[size_t(j * a + k)] * d[size_t(k)];
        y += w.at[size_t(i * a + j)] * gg * bd;
      }
      for (int k = 0; k < 3; ++k) ref += double(d[size_t(i + k)]) * g[size_t(k)];
      EXPECT_NEAR(y, ref, 1e-12) << "F(" << v.m << ",3) output " << i;
    }
  }
}

// Odd and even sizes, sizes smaller than one tile, tile counts at every residue of the
// 8-tile groups, channels 1..9 and large, asymmetric and zero padding, every layout, bias
// and each activation, batch 2.
TEST(Winograd, ShapesTailsLayoutsAgainstReference) {
  struct Shape { int64_t batch, ic, h, w, oc, pad; };
  std::vector<Shape> shapes = {{1, 1, 3, 3, 1, 0},    {1, 2, 4, 5, 3, 1},   {2, 3, 7, 9, 5, 1},
                               {1, 9, 13, 11, 8, 1},  {1, 4, 2, 2, 4, 1},   {1, 5, 30, 6, 7, 0},
                               {1, 8, 17, 34, 9, 1},  {2, 6, 26, 26, 6, 1}, {1, 64, 14, 14, 48, 1}};
  if (gktest::quick()) shapes.resize(7);
  const gk_layout layouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW8};
  int i = 0;
  for (const auto& sh : shapes) {
    for (const Variant& v : kVariants) {
      gk_conv_desc d = desc3x3(sh.batch, sh.ic, sh.h, sh.w, sh.oc, sh.pad);
      if (i % 3 == 1) d.pad_left = 0, d.pad_bottom = 2;  // asymmetric
      d.layout = layouts[i % 3];
      d.activation = gk_activation(i % 3);
      SCOPED_TRACE("shape " + std::to_string(&sh - shapes.data()) + " F" + std::to_string(v.m));
      gktest::check_conv(gktest::make_conv_case(d, i % 2 == 0, uint32_t(i)), v.algo, 0, v.bound);
      ++i;
    }
  }
}

// Tile counts around the tile-block size (several blocks, every residue of 8 in the last).
TEST(Winograd, ManyTileBlocksAndTwoThreads) {
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    for (int64_t w : {int64_t{37}, int64_t{64}, int64_t{70}}) {
      for (const Variant& v : kVariants) {
        gk_conv_desc d = desc3x3(1, 3, 45, w, 4, 1);
        SCOPED_TRACE("threads " + std::to_string(threads) + " w " + std::to_string(w));
        gktest::check_conv(gktest::make_conv_case(d, true, 3), v.algo, 0, v.bound);
      }
    }
  }
  gk_set_num_threads(0);
}

using gktest::ScopedEnv;

// Blocks of one micro-panel of tiles and channel blocks of 16, forced through the
// blocking overrides: many tile blocks with the last panel at every width up to two
// panels (narrow kernels, zeroed tail columns), and channel blocks accumulating into M
// (17 and 40 channels: a short last block, balanced blocks); every other case in NCHW8,
// which runs in place (transforms over channels, M stored channel-blocked).
TEST(Winograd, ForcedTileAndChannelBlocks) {
  const ScopedEnv tiles("GEMMKIT_WINOGRAD_TILES", "1"), channels("GEMMKIT_WINOGRAD_IC_BLOCK", "16");
  std::vector<int64_t> counts;
  for (int64_t t = 1; t <= 49; ++t)
    if (!gktest::quick() || t % 6 == 1 || t % 8 == 0) counts.push_back(t);
  int i = 0;
  for (const Variant& v : kVariants)
    for (int64_t t : counts) {
      const int64_t ic = i % 3 == 0 ? 16 : i % 3 == 1 ? 17 : 40;
      // One tile row of t tiles, or for even t two rows of t / 2.
      const int64_t rows = t % 2 == 0 ? 2 : 1;
      gk_conv_desc d = desc3x3(1, ic, rows * v.m, t / rows * v.m - i % 2, 5 + i % 5, 1);
      if (i % 2) d.layout = GK_LAYOUT_NCHW8, d.out_channels += 6;  // in place, several channel blocks
      SCOPED_TRACE("F" + std::to_string(v.m) + " tiles " + std::to_string(t) + " ic " + std::to_string(ic) +
                   " layout " + std::to_string(int(d.layout)));
      gktest::check_conv(gktest::make_conv_case(d, i % 2 == 0, uint32_t(i)), v.algo, 0, v.bound);
      ++i;
    }
}

// Every left and top padding up to 3 on rows wide enough for the vectorized phase split,
// and asymmetric right and bottom padding; and paddings wider than a tile's window (whole
// tiles of zeros). NCHW (3 channels: the padded phase copy; 12: the same, or on x86-64
// the NCHW8 form on copies) and NCHW8 (tiles read in place, border tiles from their
// window's copy; 12 channels: a partial second block), with every kernel: on x86-64 the
// pointwise GEMMs, and the blocked GEMMs forced (GEMMKIT_WINOGRAD_POINTWISE=0, what the
// other targets run).
TEST(Winograd, PaddingsOnWideRows) {
  int i = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& k) {
    for (bool blocked_gemms : {false, true})
      for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8})
        for (int64_t ic : {3, 12}) {
          if ((layout == GK_LAYOUT_NCHW8 || blocked_gemms) && ic == 3) continue;
          std::unique_ptr<ScopedEnv> form;
          if (blocked_gemms) form = std::make_unique<ScopedEnv>("GEMMKIT_WINOGRAD_POINTWISE", "0");
          for (const Variant& v : kVariants)
            for (int64_t pad : {0, 1, 2, 3, 9}) {
              gk_conv_desc d = desc3x3(1, ic, 11, 83, 4, pad);
              d.pad_right = pad == 9 ? 1 : 3 - pad, d.pad_bottom = (pad + 1) % 4;
              d.layout = layout;
              SCOPED_TRACE(std::string(k.name) + " F" + std::to_string(v.m) + " ic " + std::to_string(ic) + " pad " +
                           std::to_string(pad) + " layout " + std::to_string(layout) +
                           (blocked_gemms ? " blocked GEMMs" : ""));
              gktest::check_conv(gktest::make_conv_case(d, true, uint32_t(40 + i++)), v.algo, 0, v.bound);
            }
        }
  });
}

// Channel blocks that are not a multiple of 8 (GEMMKIT_WINOGRAD_IC_BLOCK=20, as a 256 KiB
// L2 gave 682 with NR = 24): in NCHW8 each block is rounded up to whole 8-channel blocks,
// which the transforms read one at a time. 41 to 100 channels: 2 to 5 blocks.
TEST(Winograd, ChannelBlocksNotAMultipleOf8) {
  const ScopedEnv channels("GEMMKIT_WINOGRAD_IC_BLOCK", "20");
  int i = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& k) {
    for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8})
      for (int64_t ic : {41, 61, 100})
        for (const Variant& v : kVariants) {
          gk_conv_desc d = desc3x3(1, ic, 9, 13, 11, 1);
          d.layout = layout;
          SCOPED_TRACE(std::string(k.name) + " F" + std::to_string(v.m) + " ic " + std::to_string(ic) + " layout " +
                       std::to_string(layout));
          gktest::check_conv(gktest::make_conv_case(d, true, uint32_t(90 + i++)), v.algo, 0, v.bound);
        }
  });
}

// Fewer tile blocks than threads (a 7x7 output): the two threads split the output
// channels, each transforming the input itself; batch 2; NCHW, NCHW8 (whole blocks) and
// NHWC in place (pairs of blocks: 48 channels, three pairs).
TEST(Winograd, ThreadsSplitOutputChannels) {
  gk_set_num_threads(2);
  for (const Variant& v : kVariants)
    for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8, GK_LAYOUT_NHWC}) {
      gk_conv_desc d = desc3x3(2, 256, 7, 7, layout == GK_LAYOUT_NHWC ? 48 : 44, 1);
      d.layout = layout;
      SCOPED_TRACE("F" + std::to_string(v.m) + " layout " + std::to_string(int(layout)));
      gktest::check_conv(gktest::make_conv_case(d, true, 77), v.algo, gktest::quick() ? 200 : 0, v.bound);
    }
  gk_set_num_threads(0);
}

// NHWC of whole 8-channel blocks in and out runs in place, the transforms reading and
// writing the pixels (C floats apart) as NCHW8's read blocks: its workspace is no larger
// than the NCHW8 plan's (no layout copies). Every kernel of the CPU (on x86-64 the
// pointwise GEMMs, in every fourth case the blocked ones forced), each variant; channels 8 to 64 in and out, every left and
// top padding up to 3 and asymmetric ones (border tiles from their window's copy), sizes
// smaller than a tile, batch 1..3, 1 and 2 threads; forced one-panel tile blocks and
// 16-channel blocks (several blocks accumulating into M).
TEST(Winograd, NhwcInPlace) {
  struct Case {
    int64_t batch, ic, h, w, oc, pad;
  };
  const Case cases[] = {{1, 8, 11, 83, 8, 0},  {2, 16, 9, 13, 24, 1}, {1, 40, 17, 34, 16, 2},
                        {3, 24, 5, 3, 32, 1},  {1, 64, 14, 14, 48, 3}, {1, 32, 2, 2, 16, 1}};
  int i = 0, in_place = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& k) {
    for (const Case& t : cases)
      for (const Variant& v : kVariants) {
        if (gktest::quick() && i % 2) {
          ++i;
          continue;
        }
        gk_conv_desc d = desc3x3(t.batch, t.ic, t.h, t.w, t.oc, t.pad);
        d.pad_right = (t.pad + 2) % 4, d.pad_bottom = t.pad == 3 ? 0 : t.pad;
        d.layout = GK_LAYOUT_NHWC, d.activation = gk_activation(i % 3);
        std::unique_ptr<ScopedEnv> tiles, channels, form;
        if (i % 4 == 1) form = std::make_unique<ScopedEnv>("GEMMKIT_WINOGRAD_POINTWISE", "0");
        if (i % 4 == 3)
          tiles = std::make_unique<ScopedEnv>("GEMMKIT_WINOGRAD_TILES", "1"),
          channels = std::make_unique<ScopedEnv>("GEMMKIT_WINOGRAD_IC_BLOCK", "16");
        gk_set_num_threads(1 + i % 2);
        SCOPED_TRACE(std::string(k.name) + " F" + std::to_string(v.m) + " " + gktest::describe(d) +
                     (form ? " blocked GEMMs" : ""));
        const gktest::ConvCase c = gktest::make_conv_case(d, i % 2 == 0, uint32_t(300 + i));
        // In place where the GEMM kernel keeps a tile's rows in one block (the pointwise
        // kernels, blocked ones of MR 1, 2, 4 or 8): the algorithm says so and its plan
        // runs NHWC natively.
        gk::conv::Shape shape;
        ASSERT_TRUE(gk::conv::validate(d, &shape)) << gk_last_error();
        const gk::conv::Algorithm* algo = gk::conv::winograd_algorithm(v.m);
        if (algo->runs_nhwc(shape)) {
          ++in_place;
          const auto prepared = algo->prepare(shape, c.w.data(), nullptr, 0);
          ASSERT_TRUE(prepared);
          EXPECT_TRUE(prepared->native_layout(GK_LAYOUT_NHWC));
        }
        gk_conv_desc d8 = d;
        d8.layout = GK_LAYOUT_NCHW8;
        gk_conv_plan *plan = nullptr, *plan8 = nullptr;
        ASSERT_EQ(gk_conv_plan_create(&d, c.w.data(), nullptr, v.algo, &plan), GK_OK) << gk_last_error();
        ASSERT_EQ(gk_conv_plan_create(&d8, c.w.data(), nullptr, v.algo, &plan8), GK_OK) << gk_last_error();
        EXPECT_LE(gk_conv_plan_workspace_size(plan), gk_conv_plan_workspace_size(plan8));
        gk_conv_plan_destroy(plan);
        gk_conv_plan_destroy(plan8);
        gktest::check_conv(c, v.algo, 0, v.bound);
        gk_set_num_threads(0);
        ++i;
        if (HasFailure()) return;
      }
  });
  EXPECT_GT(in_place, 0);
}

TEST(Winograd, ConcurrentRunsOnOnePlan) {
  gk_conv_desc d = desc3x3(1, 16, 20, 20, 24, 1);
  const gktest::ConvCase c = gktest::make_conv_case(d, true, 9);
  gk_conv_plan* plan = nullptr;
  ASSERT_EQ(gk_conv_plan_create(&d, c.w.data(), c.bias.data(), GK_CONV_ALGO_WINOGRAD_F43, &plan), GK_OK);
  std::vector<float> expected(size_t(24 * 400));
  ASSERT_EQ(gk_conv_run(plan, c.x.data(), expected.data()), GK_OK);
  std::vector<int> same(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool all = true;
      for (int rep = 0; rep < 10; ++rep) {
        std::vector<float> out(expected.size(), gktest::kNaN);
        all = all && gk_conv_run(plan, c.x.data(), out.data()) == GK_OK && out == expected;
      }
      same[size_t(t)] = all;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(same[size_t(t)]) << "thread " << t;
  gk_conv_plan_destroy(plan);
}

// AUTO and FASTRUN never pick F(4x4) or F(6x6) under GK_CONV_FLAG_HIGH_ACCURACY.
TEST(Winograd, HighAccuracyFlagExcludesLossyVariants) {
  gk_conv_desc d = desc3x3(1, 128, 28, 28, 128, 1);  // AUTO would pick F(4x4) without the flag
  const std::vector<float> w(128 * 128 * 9, 0.01f);
  for (gk_conv_algo algo : {GK_CONV_ALGO_AUTO, GK_CONV_ALGO_FASTRUN}) {
    gk_conv_plan* plan = nullptr;
    d.flags = GK_CONV_FLAG_HIGH_ACCURACY;
    ASSERT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, algo, &plan), GK_OK);
    const std::string name = gk_conv_plan_algo_name(plan);
    EXPECT_TRUE(name != "winograd_f43" && name != "winograd_f63") << name;
    gk_conv_plan_destroy(plan);
  }
}

// The accuracy of each variant on every 3x3 stride-1 layer of the networks, inputs in
// [0, 1) as after ReLU and He-initialised weights, 300 sampled outputs per layer. Under
// emulation only the layers under 60 MFLOP run.
TEST(Winograd, AccuracyOnEveryNetworkLayer) {
  double worst[3] = {0, 0, 0};
  int layers = 0;
  for (const gktest::NetworkLayer& l : gktest::network_layers()) {
    const gk_conv_desc& nd = l.d;
    if (nd.kernel_h != 3 || nd.kernel_w != 3 || nd.stride_h != 1 || nd.dilation_h != 1 || nd.groups != 1) continue;
    const double flops = 2.0 * nd.out_channels * nd.in_height * nd.in_width * nd.in_channels * 9;
    if (gktest::quick() && flops > 250e6) continue;
    gk_conv_desc d = desc3x3(nd.batch, nd.in_channels, nd.in_height, nd.in_width, nd.out_channels, nd.pad_top);
    const gktest::ConvCase c = gktest::make_conv_case(d, false, uint32_t(layers++));
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(l.net + " " + l.layer + " F" + std::to_string(kVariants[i].m));
      double rel = 0;
      gktest::check_conv(c, kVariants[i].algo, 300, kVariants[i].bound, &rel);
      worst[i] = std::max(worst[i], rel);
    }
  }
  EXPECT_GT(layers, 0);
  std::printf("Winograd max error / max |output| over %d layers: F(2x2) %.2e, F(4x4) %.2e, F(6x6) %.2e\n",
              layers, worst[0], worst[1], worst[2]);
}
