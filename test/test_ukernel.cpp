// Every micro-kernel on every partial tile (m = 1..MR, n = 1..NR) and the K edges
// {0, 1, 2, 3, 7, KC-1, KC, KC+1, 2*KC+3}, for alpha/beta variants, beta == 0 with C
// prefilled by NaN, B packed (rs_b == NR) and in place (rs_b > NR, unaligned).
#include <cstdlib>

#include <cpuinfo.h>

#include "common/runtime.h"
#include "gemm_test_util.h"

namespace {

using gktest::Operand;

struct AlphaBeta {
  float alpha, beta;
};
const AlphaBeta kAlphaBeta[] = {{1.0f, 0.0f}, {-1.5f, 0.0f}, {1.0f, 1.0f}, {0.5f, -2.0f},
                                {2.0f, 0.5f}};

// 64-byte aligned storage for a packed A panel.
struct AlignedPanel {
  float* p;
  explicit AlignedPanel(size_t n) {
    if (posix_memalign(reinterpret_cast<void**>(&p), 64, (n + 16) * sizeof(float)) != 0) std::abort();
  }
  ~AlignedPanel() { std::free(p); }
};

void check_kernel(const gk::KernelInfo& ker, int64_t k, bool b_in_place) {
  const int mr = ker.mr, nr = ker.nr;
  // A panel: k steps of MR. Operand `a` holds the same values as an MR x k matrix.
  Operand a(mr, k, 0, false, 11 + static_cast<uint32_t>(k));
  AlignedPanel a_panel(static_cast<size_t>(mr * k));
  for (int64_t p = 0; p < k; ++p)
    for (int i = 0; i < mr; ++i) a_panel.p[p * mr + i] = a.at(i, p);
  // B: k rows of NR floats with row stride rs_b; offset by one float when in place so the
  // kernel sees unaligned rows, as on the no-pack path.
  const int64_t rs_b = b_in_place ? nr + 5 : nr;
  Operand b(k, nr, rs_b - nr, true, 23 + static_cast<uint32_t>(k));
  std::vector<float> b_store(b.data.size() + 1);
  const float* b_ptr = b_store.data() + (b_in_place ? 1 : 0);
  std::copy(b.data.begin(), b.data.end(), b_store.begin() + (b_in_place ? 1 : 0));

  for (const AlphaBeta& ab : kAlphaBeta) {
    for (int m = 1; m <= mr; ++m) {
      for (int n = 1; n <= nr; ++n) {
        Operand c(m, n, 3, true, 37);
        if (ab.beta == 0.0f) c.fill(gktest::kNaN);
        const Operand c0 = c;
        gk::run_ukernel(ker, m, n, k, ab.alpha, a_panel.p, b_ptr, rs_b, ab.beta, c.data.data(),
                        c.ld, nullptr, 0, 0);
        // Compare against the m x n corner of A * B.
        Operand a_m(m, k, 0, false, 1), b_n(k, n, 0, true, 1);
        for (int i = 0; i < m; ++i)
          for (int64_t p = 0; p < k; ++p) a_m.at(i, p) = a.at(i, p);
        for (int64_t p = 0; p < k; ++p)
          for (int j = 0; j < n; ++j) b_n.at(p, j) = b.at(p, j);
        ASSERT_TRUE(gktest::matches_reference(a_m, false, b_n, false, ab.alpha, ab.beta, c0, c, k))
            << ker.name << " m=" << m << " n=" << n << " k=" << k << " in_place=" << b_in_place;
      }
    }
    if (gktest::quick()) break;
  }
}

std::vector<int64_t> k_edges(const gk::KernelInfo& ker) {
  const int64_t kc = gk::derive_blocking(ker).kc;
  return {0, 1, 2, 3, 7, kc - 1, kc, kc + 1, 2 * kc + 3};
}

}  // namespace

TEST(MicroKernel, AllPartialTilesAndKEdgesPackedB) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    for (int64_t k : k_edges(ker)) check_kernel(ker, k, false);
  });
}

TEST(MicroKernel, AllPartialTilesUnpackedUnalignedB) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{7}, int64_t{33}})
      check_kernel(ker, k, true);
  });
}

// beta == 0 must not read C, and beta == NaN must propagate (it is not zero).
TEST(MicroKernel, BetaZeroIgnoresNaNButBetaNaNPropagates) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const int mr = ker.mr, nr = ker.nr, k = 5;
    AlignedPanel a(static_cast<size_t>(mr * k)), b(static_cast<size_t>(nr * k));
    for (int i = 0; i < mr * k; ++i) a.p[i] = 1.0f;
    for (int i = 0; i < nr * k; ++i) b.p[i] = 1.0f;
    std::vector<float> c(static_cast<size_t>(mr * nr), std::numeric_limits<float>::infinity());
    gk::run_ukernel(ker, mr, nr, k, 1.0f, a.p, b.p, nr, 0.0f, c.data(), nr, nullptr, 0, 0);
    for (float v : c) ASSERT_EQ(v, 5.0f);
    gk::run_ukernel(ker, mr, nr, k, 1.0f, a.p, b.p, nr, gktest::kNaN, c.data(), nr, nullptr, 0, 0);
    for (float v : c) ASSERT_TRUE(std::isnan(v));
  });
}

// The epilogue (bias per row or column, ReLU, ReLU6) applied to full and partial tiles,
// with beta 0 and 0.5 (the kernels that fuse it must add beta * C before the bias).
TEST(MicroKernel, EpilogueBiasAndActivations) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const int mr = ker.mr, nr = ker.nr, k = 9;
    AlignedPanel a(static_cast<size_t>(mr * k)), b(static_cast<size_t>(nr * k));
    std::vector<float> av = gktest::random_vector(static_cast<size_t>(mr * k), 5, -2, 2);
    std::vector<float> bv = gktest::random_vector(static_cast<size_t>(nr * k), 6, -2, 2);
    std::copy(av.begin(), av.end(), a.p);
    std::copy(bv.begin(), bv.end(), b.p);
    std::vector<float> bias = gktest::random_vector(64, 7, -3, 3);
    for (gk::BiasMode mode : {gk::BiasMode::None, gk::BiasMode::PerRow, gk::BiasMode::PerColumn}) {
      for (gk::Activation act : {gk::Activation::None, gk::Activation::Relu, gk::Activation::Relu6}) {
        for (int m : {mr, mr - 1}) {
          for (int n : {nr, 1}) {
           for (float beta : {0.0f, 0.5f}) {
            gk::Epilogue e;
            e.bias = bias.data(), e.bias_mode = mode, e.act = act;
            std::vector<float> c(static_cast<size_t>(mr * nr), gktest::kNaN);
            if (beta != 0.0f) c = gktest::random_vector(c.size(), 8, -4, 4);
            const std::vector<float> c0 = c;
            gk::run_ukernel(ker, m, n, k, 1.0f, a.p, b.p, nr, beta, c.data(), nr, &e, 3, 5);
            for (int i = 0; i < m; ++i) {
              for (int j = 0; j < n; ++j) {
                double v = beta != 0.0f ? double(beta) * c0[size_t(i * nr + j)] : 0.0;
                for (int p = 0; p < k; ++p) v += double(a.p[p * mr + i]) * b.p[p * nr + j];
                if (mode == gk::BiasMode::PerRow) v += bias[3 + i];
                if (mode == gk::BiasMode::PerColumn) v += bias[5 + j];
                if (act != gk::Activation::None) v = std::max(v, 0.0);
                if (act == gk::Activation::Relu6) v = std::min(v, 6.0);
                ASSERT_NEAR(c[i * nr + j], v, 1e-4) << ker.name << " i=" << i << " j=" << j << " beta=" << beta;
              }
            }
           }
          }
        }
      }
    }
  });
}

// The pointwise NCHW8 kernels (KernelInfo::pointwise, where an ISA has them) on their own:
// channel counts around the 8-channel blocks (the partial block's loop), block strides
// larger than the tiles, the input NCHW8 (pixel stride 8) or pixel-major (block stride 8,
// pixel stride past the channels: the dense im2col chunk), one call over 1 and 3 tiles,
// bias or none, each activation, accumulating into the output or not; the output's other
// pixels and channel blocks (NaN sentinels) must stay untouched. A direct convolution's
// taps of one run of channels and no whole block (an RGB stem: the unrolled entries for
// 1-7 channels; an NCHW image: kernel columns, or channels a stride apart, over 7 too);
// the output NCHW8 or NHWC rows (y_row_stride past the tile's channels); weights fetched
// ahead (w_next_offset), anywhere.
// Partial pixel tiles are staged by the caller (Conv.Gemm1x1BlockedInPlace and Conv.Im2colBlockedInPlace).
namespace {
struct PointwiseCase {
  int64_t channels, tiles;
  bool pixel_major, with_bias, accumulate;
  int act;
  int taps;  // 1: no offsets (null); more: a direct convolution's taps, offsets of either sign
  int64_t run_stride = 0;  // > 0: the channels one run (full_blocks 0), this many floats apart
  bool nhwc_out = false;   // the output NHWC rows (block stride 8, pixel stride past NR)
  bool skip_last = false;  // skip_last_block: the last 8 columns neither stored nor read
  // Weights fetched ahead (w_next_offset): 1, the next panel's, from the second tile; 2,
  // rows 1 GiB on (likely unmapped: prefetches must not fault), from the first tile.
  int fetch = 0;
};

// Runs one case on `pw` and checks every output float; false (with a failure) on a mismatch.
bool check_pointwise(const char* kernel, const gk::KernelInfo::Pointwise& pw, const PointwiseCase& t) {
  const int mr = pw.mr, nr = pw.nr;
  const int64_t covered = t.tiles * mr, pixels = covered + 3;  // the tiles cover pixels [1, 1 + covered)
  const int64_t blocks = (t.channels + 7) / 8;
  const int64_t block_stride = t.pixel_major ? 8 : pixels * 8, pixel_stride = t.pixel_major ? blocks * 8 + 3 : 8;
  // Tap t's input `tap_floats[t]` floats from the tiles' (the origin `margin` floats in).
  const int64_t tap_floats[] = {0, -13, 29}, margin = 16;
  const std::vector<int64_t> tap_bytes = {tap_floats[0] * 4, tap_floats[1] * 4, tap_floats[2] * 4};
  const int64_t rows = t.taps * t.channels;
  const std::vector<float> x =
      gktest::random_vector(size_t(margin + blocks * pixels * 8 + pixels * pixel_stride + t.channels * t.run_stride + 32), 3, -2, 2);
  const float* origin = x.data() + margin;
  const std::vector<float> w = gktest::random_vector(size_t(rows * nr), 4, -2, 2);
  const std::vector<float> bias = gktest::random_vector(size_t(nr), 5, -3, 3);
  // Output channel j of pixel q at y_at(q, j); NHWC rows have 5 floats past each pixel's NR.
  const int64_t y_block = t.nhwc_out ? 8 : pixels * 8, y_pixel = t.nhwc_out ? nr + 5 : 8;
  auto y_at = [&](int64_t q, int j) { return size_t((j / 8) * y_block + q * y_pixel + j % 8); };
  std::vector<float> y(size_t(t.nhwc_out ? pixels * y_pixel : nr / 8 * pixels * 8), gktest::kNaN);
  const int stored = t.skip_last ? nr - 8 : nr;  // the columns the kernel writes (a NaN past them)
  for (int j = 0; j < stored && t.accumulate; ++j)  // the tiles' partial sums
    for (int64_t q = 1; q <= covered; ++q) y[y_at(q, j)] = float(j - q) * 0.25f;
  const std::vector<float> y0 = y;
  gk_pointwise_args a;
  a.x = origin + pixel_stride, a.w = w.data(), a.y = y.data() + y_at(1, 0);
  a.full_blocks = t.channels / 8, a.tail_channels = t.channels % 8;
  if (t.run_stride > 0) a.full_blocks = 0, a.tail_channels = t.channels, a.x_channel_stride = t.run_stride;
  a.x_block_stride = block_stride, a.x_row_stride = pixel_stride, a.y_block_stride = y_block, a.y_row_stride = y_pixel;
  a.bias = t.with_bias ? bias.data() : nullptr, a.activation = t.act, a.accumulate = t.accumulate;
  a.tiles = t.tiles;
  if (t.taps > 1) a.taps = t.taps, a.tap_offsets = tap_bytes.data();
  a.skip_last_block = t.skip_last;
  a.w_next_offset = t.fetch == 1 ? rows * nr * 4 : t.fetch == 2 ? int64_t(1) << 30 : 0;
  a.w_next_from_first_tile = t.fetch == 2;
  if (t.skip_last && !t.nhwc_out) {
    // The blocks stored end where a PROT_NONE page begins: a load or store of the skipped
    // block faults.
    const size_t kept = size_t(y_block) * size_t(stored / 8);
    gktest::GuardedFloats guarded(kept);
    if (!guarded.data()) return false;
    std::copy(y.begin(), y.begin() + long(kept), guarded.data());
    a.y = guarded.data() + y_at(1, 0);
    pw.fn(&a);
    std::copy(guarded.data(), guarded.data() + kept, y.begin());
  } else {
    pw.fn(&a);
  }
  std::vector<bool> in_tiles(y.size(), false);
  for (int64_t q = 1; q <= covered; ++q)
    for (int j = 0; j < stored; ++j) in_tiles[y_at(q, j)] = true;
  for (size_t at = 0; at < y.size(); ++at)
    if (!in_tiles[at] && !std::isnan(y[at])) {
      ADD_FAILURE() << kernel << " pointwise " << mr << "x" << nr << (t.nhwc_out ? " NHWC" : "") << " wrote float "
                    << at << " outside the tiles";
      return false;
    }
  for (int64_t q = 1; q <= covered; ++q) {
    for (int j = 0; j < stored; ++j) {
      const size_t at = y_at(q, j);
      double v = (t.with_bias ? bias[size_t(j)] : 0.0) + (t.accumulate ? y0[at] : 0.0);
      for (int tap = 0; tap < t.taps; ++tap)
        for (int64_t c = 0; c < t.channels; ++c)
          v += double(origin[tap_floats[tap] + q * pixel_stride +
                             (t.run_stride > 0 ? c * t.run_stride : (c / 8) * block_stride + c % 8)]) *
               w[size_t((tap * t.channels + c) * nr + j)];
      if (t.act >= 1) v = std::max(v, 0.0);
      if (t.act == 2) v = std::min(v, 6.0);
      if (!(std::fabs(y[at] - v) <= 1e-4 * (1 + rows))) {
        ADD_FAILURE() << kernel << " pointwise " << mr << "x" << nr << " C=" << t.channels << " taps " << t.taps
                      << " tiles " << t.tiles << " run stride " << t.run_stride << " NHWC out " << t.nhwc_out
                      << " pixel_major " << t.pixel_major << " accumulate " << t.accumulate << " act " << t.act
                      << " skip last " << t.skip_last << " fetch " << t.fetch << ": pixel " << q << " oc " << j << " = " << y[at]
                      << ", expected " << v;
        return false;
      }
    }
  }
  return true;
}
}  // namespace

// The panels cover the columns' whole blocks once, in order, each storing its kernel's
// width; with past_last_block, a last 8 or 24 columns go one block wider where a kernel
// that skips its last block is that wide, and nothing runs on a narrower kernel then.
TEST(MicroKernel, PointwisePanelsCoverTheBlocksOnce) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    if (!ker.pointwise[0].fn) return;
    for (bool past : {false, true})
      for (int64_t columns = 1; columns <= 200; ++columns) {
        const std::vector<gk::PointwisePanel> panels = gk::pointwise_panels(ker, columns, past);
        int64_t next = 0;
        for (size_t i = 0; i < panels.size(); ++i) {
          const gk::PointwisePanel& p = panels[i];
          const int64_t nr = p.kernel->nr, left = (columns + 7) / 8 * 8 - p.j;
          ASSERT_EQ(p.j, next) << ker.name << " columns " << columns;
          const bool one_wider = [&] {
            for (const gk::KernelInfo::Pointwise& k : ker.pointwise)
              if (k.fn && k.skips_last_block && k.nr == left + 8) return true;
            return false;
          }();
          if (past && (left == 8 || left == 24) && one_wider) {
            EXPECT_EQ(nr, left + 8) << ker.name << " columns " << columns;
            EXPECT_EQ(p.blocks, nr / 8 - 1) << ker.name << " columns " << columns;
            EXPECT_TRUE(p.kernel->skips_last_block);
          } else {
            EXPECT_EQ(p.blocks, nr / 8) << ker.name << " columns " << columns << " past " << past;
          }
          next += p.blocks * 8;
        }
        EXPECT_EQ(next, (columns + 7) / 8 * 8) << ker.name << " columns " << columns << " past " << past;
      }
  });
}

TEST(MicroKernel, PointwiseNchw8AllChannelEdges) {
  int tested = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    std::vector<gk::KernelInfo::Pointwise> kernels;  // each kernel, and its one- and four-pixel variants
    for (const gk::KernelInfo::Pointwise& pw : ker.pointwise) {
      if (pw.fn) kernels.push_back(pw);
      if (pw.one_row) kernels.push_back({1, pw.nr, pw.one_row, nullptr, nullptr, pw.skips_last_block});
      if (pw.four_rows) kernels.push_back({4, pw.nr, pw.four_rows, nullptr, nullptr, pw.skips_last_block});
    }
    for (const gk::KernelInfo::Pointwise& pw : kernels) {
      EXPECT_TRUE(pw.mr <= gk::kMaxPointwiseMr && 12 % pw.mr == 0 && pw.nr <= gk::kMaxPointwiseNr && pw.nr % 8 == 0) << ker.name;
      for (int64_t channels : {1, 2, 7, 8, 9, 16, 23, 67})
        for (int64_t tiles : {1, 3})
          for (bool pixel_major : {false, true})
            for (int act = 0; act <= 2; ++act)
              for (int mode = 0; mode < 8; ++mode)
                for (int taps : {1, 3}) {
                  PointwiseCase c{channels, tiles, pixel_major, (mode & 1) != 0, (mode & 2) != 0, act, taps};
                  c.nhwc_out = (mode & 4) != 0;
                  if (!check_pointwise(ker.name, pw, c)) return;
                  ++tested;
                }
      // Skipping the last block (a last panel past the output's channels), in every output
      // form, with and without adding to the output.
      for (int64_t channels : {7, 16, 23})
        for (int mode = 0; mode < 8 && pw.skips_last_block; ++mode)
          for (int taps : {1, 3}) {
            PointwiseCase c{channels, 3, (mode & 1) != 0, true, (mode & 2) != 0, 2, taps};
            c.nhwc_out = (mode & 4) != 0, c.skip_last = true;
            if (!check_pointwise(ker.name, pw, c)) return;
            ++tested;
          }
      // Weights fetched ahead: results unchanged, in calls of 1 and 5 tiles.
      for (int fetch : {1, 2})
        for (int64_t channels : {9, 67})
          for (int64_t tiles : {1, 5})
            for (int mode = 0; mode < 4; ++mode) {
              PointwiseCase c{channels, tiles, false, true, true, 1, 1 + 2 * (mode & 1)};
              c.fetch = fetch, c.nhwc_out = (mode & 2) != 0, c.skip_last = pw.skips_last_block && mode == 3;
              if (!check_pointwise(ker.name, pw, c)) return;
              ++tested;
            }
      for (int64_t channels = 1; channels <= 11; ++channels)
        for (int64_t run_stride : {1, 3})
          for (int64_t tiles : {1, 3}) {
            const PointwiseCase c{channels, tiles, false, true, false, 1, 3, run_stride};
            if (!check_pointwise(ker.name, pw, c)) return;
            ++tested;
          }
    }
  });
#if defined(__x86_64__)
  if (gk::cpu().x86_avx2_fma) {
    EXPECT_GT(tested, 0);  // the AVX2 entries have them
  }
#endif
}

#if defined(__x86_64__)
extern "C" unsigned char gk_weights_ahead_nta;

// The 12x32's rows fetched ahead (w_next_offset 0) under either hint: prefetcht2, and
// the non-temporal form set on AMD (and Hygon), whichever this CPU does not take.
TEST(MicroKernel, PointwiseWeightsAheadEitherHint) {
  const cpuinfo_vendor vendor = cpuinfo_initialize() ? cpuinfo_get_core(0)->vendor : cpuinfo_vendor_unknown;
  EXPECT_EQ(gk_weights_ahead_nta != 0, vendor == cpuinfo_vendor_amd || vendor == cpuinfo_vendor_hygon);
  int tested = 0;
  const unsigned char detected = gk_weights_ahead_nta;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    for (const gk::KernelInfo::Pointwise& pw : ker.pointwise) {
      if (!pw.fn || pw.mr != 12 || pw.nr != 32) continue;
      for (unsigned char nta : {0, 1}) {
        gk_weights_ahead_nta = nta;
        for (int64_t channels : {9, 67, 600})
          for (int64_t tiles : {1, 5})
            for (int mode = 0; mode < 4; ++mode) {
              PointwiseCase c{channels, tiles, false, (mode & 1) != 0, true, 1, 1};
              c.nhwc_out = (mode & 2) != 0;
              const bool ok = check_pointwise(ker.name, pw, c);
              EXPECT_TRUE(ok) << "nta " << int(nta);
              if (!ok) break;
              ++tested;
            }
      }
    }
  });
  gk_weights_ahead_nta = detected;
  if (gk::cpu().x86_avx512f && gk::cpu().x86_avx512vl) {
    EXPECT_GT(tested, 0);
  }
}
#endif
