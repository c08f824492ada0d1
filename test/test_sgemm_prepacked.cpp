// gk_sgemm_pack / gk_sgemm_compute and gk_sgemm_ex against a double reference: both
// orders, every transpose pair, A packed, B packed and both, shapes around the kernel's MR,
// NR and KC (K blocked when k > KC), alpha and beta cases with beta == 0 over a NaN C, the
// epilogue's biases and activations, 1 and 2 threads, every kernel this CPU runs. Then bad
// input: a status, a message naming the problem, and nothing written.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gemm/gemm.h"
#include "gemm_test_util.h"
#include "gemmkit.h"

namespace {

using gktest::kNaN;
using gktest::kSentinel;
using gktest::Operand;

// A 64-byte aligned buffer of `bytes`, filled with 0xA5 (what a refused call must leave).
struct Aligned {
  explicit Aligned(int64_t bytes) : size(size_t(std::max<int64_t>(bytes, 64))) {
    void* p = nullptr;
    if (posix_memalign(&p, 64, size + 64) != 0) p = nullptr;
    data.reset(static_cast<unsigned char*>(p));
    if (p) std::memset(p, 0xA5, size + 64);
  }
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> data;
  size_t size;
  void* get() const { return data.get(); }
  bool untouched() const {
    for (size_t i = 0; i < size; ++i)
      if (data.get()[i] != 0xA5) return false;
    return true;
  }
};

// C (stored as c, c0 before the call; NaN allowed when beta == 0) against
// act(alpha op(A) op(B) + beta C0 + bias) in double, to the forward error bound of a
// length-k float dot product; padding of C untouched.
::testing::AssertionResult matches(const Operand& a, bool ta, const Operand& b, bool tb, float alpha, float beta,
                                   const Operand& c0, const Operand& c, int64_t k, const gk_epilogue* e) {
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) {
      double exact = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = gktest::op_at(a, ta, i, p) * gktest::op_at(b, tb, p, j);
        exact += x;
        mag += std::fabs(x);
      }
      exact *= alpha;
      mag *= std::fabs(alpha);
      if (beta != 0.0f) exact += double(beta) * c0.at(i, j), mag += std::fabs(double(beta) * c0.at(i, j));
      if (e && e->bias_mode != GK_BIAS_NONE) {
        const double bias = e->bias[e->bias_mode == GK_BIAS_PER_ROW ? i : j];
        exact += bias, mag += std::fabs(bias);
      }
      if (e && e->activation != GK_ACT_NONE) exact = std::max(exact, 0.0);
      if (e && e->activation == GK_ACT_RELU6) exact = std::min(exact, 6.0);
      const double bound = (k + 6) * double(FLT_EPSILON) * mag + 1e-30;
      if (!(std::fabs(c.at(i, j) - exact) <= bound))
        return ::testing::AssertionFailure() << "C(" << i << "," << j << ") = " << c.at(i, j) << ", expected " << exact
                                             << " (m=" << c.rows << " n=" << c.cols << " k=" << k << ")";
    }
  for (size_t idx = 0; idx < c.data.size(); ++idx)
    if (c.is_padding(idx) && c.data[idx] != kSentinel)
      return ::testing::AssertionFailure() << "padding of C written at " << idx;
  return ::testing::AssertionSuccess();
}

struct Case {
  bool row_major, ta, tb;
  int64_t m, n, k;
  bool pack_a, pack_b;
  float beta;
  const gk_epilogue* epilogue = nullptr;
};

std::string describe(const Case& t) {
  return std::string(t.row_major ? "row " : "col ") + (t.ta ? "T" : "N") + (t.tb ? "T" : "N") + " " +
         std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k) + (t.pack_a ? " packed A" : "") +
         (t.pack_b ? " packed B" : "") + " beta " + std::to_string(t.beta) +
         (t.epilogue ? " bias " + std::to_string(int(t.epilogue->bias_mode)) + " act " +
                           std::to_string(int(t.epilogue->activation))
                     : "");
}

// Packs the operands the case says, computes, checks; then computes again from the same
// buffers (a packed operand is reused, not consumed).
void check_compute(const Case& t) {
  SCOPED_TRACE(describe(t));
  const CBLAS_ORDER order = t.row_major ? CblasRowMajor : CblasColMajor;
  const CBLAS_TRANSPOSE ta = t.ta ? CblasTrans : CblasNoTrans, tb = t.tb ? CblasTrans : CblasNoTrans;
  const Operand a(t.ta ? t.k : t.m, t.ta ? t.m : t.k, 3, t.row_major, 11);
  const Operand b(t.tb ? t.n : t.k, t.tb ? t.k : t.n, 1, t.row_major, 12);
  Operand c0(t.m, t.n, 2, t.row_major, 13);
  if (t.beta == 0.0f) c0.fill(kNaN);
  const float alpha_a = t.pack_a ? 1.5f : 1.0f, alpha_b = t.pack_b ? -0.75f : 1.0f;
  std::unique_ptr<Aligned> pa, pb;
  if (t.pack_a) {
    const int64_t bytes = gk_sgemm_pack_get_size(GK_PACK_A, t.m, t.n, t.k);
    ASSERT_GT(bytes, 0) << gk_last_error();
    pa.reset(new Aligned(bytes));
    ASSERT_EQ(gk_sgemm_pack(order, GK_PACK_A, ta, t.m, t.n, t.k, alpha_a, a.data.data(), a.ld, pa->get(), bytes), GK_OK)
        << gk_last_error();
  }
  if (t.pack_b) {
    const int64_t bytes = gk_sgemm_pack_get_size(GK_PACK_B, t.m, t.n, t.k);
    ASSERT_GT(bytes, 0) << gk_last_error();
    pb.reset(new Aligned(bytes));
    ASSERT_EQ(gk_sgemm_pack(order, GK_PACK_B, tb, t.m, t.n, t.k, alpha_b, b.data.data(), b.ld, pb->get(), bytes), GK_OK)
        << gk_last_error();
  }
  for (int run = 0; run < 2; ++run) {
    Operand c = c0;
    const gk_status s =
        t.pack_a || t.pack_b
            ? gk_sgemm_compute(order, t.pack_a ? GK_PACKED : ta, t.pack_b ? GK_PACKED : tb, t.m, t.n, t.k,
                               t.pack_a ? pa->get() : static_cast<const void*>(a.data.data()), t.pack_a ? 0 : a.ld,
                               t.pack_b ? pb->get() : static_cast<const void*>(b.data.data()), t.pack_b ? 0 : b.ld,
                               t.beta, c.data.data(), c.ld, t.epilogue)
            : gk_sgemm_ex(order, ta, tb, t.m, t.n, t.k, 1.5f, a.data.data(), a.ld, b.data.data(), b.ld, t.beta,
                          c.data.data(), c.ld, t.epilogue);
    ASSERT_EQ(s, GK_OK) << gk_last_error();
    const float alpha = t.pack_a || t.pack_b ? alpha_a * alpha_b : 1.5f;
    ASSERT_TRUE(matches(a, t.ta, b, t.tb, alpha, t.beta, c0, c, t.k, t.epilogue)) << "run " << run;
  }
}

// Sizes at the kernel's edges: rows around MR, columns around NR (and NR + 8, the 16 + 16
// split of a 24-wide kernel), K across one and two KC blocks.
struct Dims {
  int64_t m, n, k;
};
std::vector<Dims> edge_dims(const gk::KernelConfig& cfg) {
  const int64_t mr = cfg.kernel->mr, nr = cfg.kernel->nr, kc = cfg.kc;
  if (gktest::quick()) return {{mr + 1, nr + 3, kc + 3}, {1, 1, 5}, {2 * mr, nr + 8, 7}};
  return {{1, 1, 1},          {mr - 1, nr - 1, 7},      {mr, nr, kc},          {mr + 1, nr + 1, kc + 1},
          {2 * mr + 3, nr + 8, 2 * kc + 5}, {3 * mr, 2 * nr + 5, 33}, {mr + 2, 3, 64},  {5, 2 * nr, 17}};
}

TEST(SgemmPrepacked, EveryOrderTransposeAndPackedOperandAgainstTheReference) {
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    int pick = 0;
    for (const Dims& d : edge_dims(gk::active_config()))
      for (bool row_major : {true, false})
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (int packed : {1, 2, 3}) {
              ++pick;
              // Not pick % 3: that would tie beta to which operand is packed.
              const float beta = (pick / 3) % 3 == 0 ? 0.0f : (pick / 3) % 3 == 1 ? 1.0f : 0.5f;
              check_compute({row_major, ta, tb, d.m, d.n, d.k, bool(packed & 1), bool(packed & 2), beta});
              if (HasFailure()) return gk_set_num_threads(0);
            }
  }
  gk_set_num_threads(0);
}

// Every kernel this CPU runs (their MR / NR differ, so do the formats), on shapes past one
// MC block (the shared-B driver) and within it (B per panel), 2 threads.
TEST(SgemmPrepacked, EveryKernelBothDriverPaths) {
  gk_set_num_threads(2);
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    const gk::KernelConfig& cfg = gk::active_config();
    // Past one MC block; a last panel on a narrower kernel; NR + 8 columns (a 24-wide
    // kernel's 16 + 16: a panel starting inside a packed B panel).
    const Dims dims[] = {{cfg.mc + cfg.kernel->mr + 1, 70, cfg.kc + 9},
                         {37, 3 * cfg.kernel->nr + 2, 100},
                         {9, cfg.kernel->nr + 8, 40}};
    for (const Dims& d : dims)
      for (bool row_major : {true, false})
        for (int packed : {1, 2}) {
          check_compute({row_major, row_major, false, d.m, d.n, d.k, packed == 1, packed == 2, 0.0f});
          if (::testing::Test::HasFailure()) return;
        }
  });
  gk_set_num_threads(0);
}

// A packed weight applied to any number of columns (tokens): one pack, several n; and a
// packed B against a few rows. K long enough for the narrow loop's K blocks (sums carried
// from block to block).
TEST(SgemmPrepacked, OnePackedOperandServesEveryNarrowSide) {
  const int64_t m = 40, k = 1100;
  const Operand a(m, k, 0, true, 5);
  const int64_t bytes = gk_sgemm_pack_get_size(GK_PACK_A, m, 0, k);
  Aligned pa(bytes);
  ASSERT_EQ(gk_sgemm_pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, 0, k, 1.0f, a.data.data(), a.ld, pa.get(), bytes),
            GK_OK);
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    for (int64_t n : {1, 2, 7, 16, 64}) {
      const Operand b(k, n, 0, true, 6);
      Operand c0(m, n, 0, true, 7), c = c0;
      ASSERT_EQ(gk_sgemm_compute(CblasRowMajor, GK_PACKED, CblasNoTrans, m, n, k, pa.get(), 0, b.data.data(), b.ld,
                                 0.5f, c.data.data(), c.ld, nullptr),
                GK_OK)
          << gk_last_error();
      EXPECT_TRUE(matches(a, false, b, false, 1.0f, 0.5f, c0, c, k, nullptr)) << "n " << n;
    }
    const int64_t n = 70;
    const Operand b(k, n, 0, true, 8);
    const int64_t bytes_b = gk_sgemm_pack_get_size(GK_PACK_B, 0, n, k);
    Aligned pb(bytes_b);
    ASSERT_EQ(gk_sgemm_pack(CblasRowMajor, GK_PACK_B, CblasNoTrans, 0, n, k, 1.0f, b.data.data(), b.ld, pb.get(),
                            bytes_b),
              GK_OK);
    for (int64_t rows : {1, 3, 8}) {
      const Operand a2(rows, k, 0, true, 9);
      Operand c0(rows, n, 0, true, 10), c = c0;
      ASSERT_EQ(gk_sgemm_compute(CblasRowMajor, CblasNoTrans, GK_PACKED, rows, n, k, a2.data.data(), a2.ld, pb.get(),
                                 0, 0.5f, c.data.data(), c.ld, nullptr),
                GK_OK)
          << gk_last_error();
      EXPECT_TRUE(matches(a2, false, b, false, 1.0f, 0.5f, c0, c, k, nullptr)) << "m " << rows;
    }
  }
  gk_set_num_threads(0);
}

// A packed operand against every count of the other's columns (packed A) or rows (packed
// B) that the few-column loops take, on every kernel: the narrow loop (the panels' rows or
// columns as vectors, values in one or two chunks) and the rows loop (the values as
// vectors: 15 and 16 columns on AVX-512's 14x32, 5 to 13 on AVX2's 4x24, 7 and 8 on 6x16),
// the plain operand read in place and gathered (transposed, or padded to whole vectors),
// panels in pairs and triples and a partial last one, K in several blocks, beta 0 over a
// NaN C and 0.5, an epilogue, 1 and 2 threads.
TEST(SgemmPrepacked, OnePackedOperandAgainstEveryFewCountOnEveryKernel) {
  const std::vector<float> bias = gktest::random_vector(200, 21, -2.0f, 2.0f);
  const gk_epilogue relu_row_bias{bias.data(), GK_BIAS_PER_ROW, GK_ACT_RELU};
  const gk_epilogue relu6_column_bias{bias.data(), GK_BIAS_PER_COLUMN, GK_ACT_RELU6};
  int pick = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (bool pack_a : {true, false})
        for (int64_t few = 1; few <= 17; ++few) {
          ++pick;
          const int64_t wide = (pick % 2 ? 5 : 3) * (pack_a ? ker.mr : ker.nr) + pick % 4;
          const int64_t k = gktest::quick() ? 300 : 1100;
          const bool transposed = pick % 3 == 0;  // the plain operand's
          const gk_epilogue* e = pick % 5 == 0 ? &relu_row_bias : pick % 5 == 2 ? &relu6_column_bias : nullptr;
          check_compute({true, !pack_a && transposed, pack_a && transposed, pack_a ? wide : few, pack_a ? few : wide, k,
                         pack_a, !pack_a, pick % 2 ? 0.0f : 0.5f, e});
          if (::testing::Test::HasFailure()) return gk_set_num_threads(0);
        }
    }
  });
  gk_set_num_threads(0);
}

// B's rows read in place: by the per-panel driver (M within one MC block) where the
// kernel's panel is large (AVX-512's and 6x16's), and, unpacked, by the few-rows path (9
// and 16 rows): full panels and a partial last one, K in two blocks (the second
// accumulating), unpacked and with A packed, a transposed B (packed as before), beta 0
// over a NaN C and 0.5, an epilogue, 1 and 2 threads, every kernel.
TEST(SgemmPrepacked, BsRowsInPlaceByTheDriverAndTheFewRowsPathOnEveryKernel) {
  const std::vector<float> bias = gktest::random_vector(400, 22, -2.0f, 2.0f);
  const gk_epilogue relu6_column_bias{bias.data(), GK_BIAS_PER_COLUMN, GK_ACT_RELU6};
  int pick = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::KernelConfig& cfg = gk::active_config();
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (bool tb : {false, true})
        for (bool pack_a : {false, true})
          for (int64_t m : {int64_t{9}, int64_t{16}, int64_t{2 * ker.mr + 3}, int64_t{64}}) {
            ++pick;
            const int64_t n = 3 * ker.nr + 5, k = 2 * cfg.kc + 1;
            check_compute({true, false, tb, m, n, k, pack_a, false, (pick / 4) % 2 ? 0.0f : 0.5f,
                           pick % 3 == 0 ? &relu6_column_bias : nullptr});
            if (::testing::Test::HasFailure()) return gk_set_num_threads(0);
          }
    }
  });
  gk_set_num_threads(0);
}

// Bias per row and per column and each activation, in both orders, on shapes the
// different paths take (tiny, no-pack, packed driver, GEMV, few columns), unpacked and packed.
TEST(SgemmPrepacked, EpilogueBiasAndActivationEverywhere) {
  const Dims dims[] = {{5, 7, 3}, {40, 48, 40}, {150, 130, 300}, {700, 1, 600}, {300, 9, 700}, {9, 300, 20}};
  int pick = 0;
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    for (const Dims& d : dims)
      for (bool row_major : {true, false})
        for (gk_bias_mode mode : {GK_BIAS_NONE, GK_BIAS_PER_ROW, GK_BIAS_PER_COLUMN})
          for (gk_activation act : {GK_ACT_NONE, GK_ACT_RELU, GK_ACT_RELU6}) {
            ++pick;
            if (mode == GK_BIAS_NONE && act == GK_ACT_NONE) continue;
            const std::vector<float> bias =
                gktest::random_vector(size_t(mode == GK_BIAS_PER_ROW ? d.m : d.n), uint32_t(pick), -4.0f, 4.0f);
            const gk_epilogue e{mode == GK_BIAS_NONE ? nullptr : bias.data(), mode, act};
            const int packed = pick % 3;  // none, A, B
            check_compute({row_major, pick % 2 == 0, pick % 5 == 0, d.m, d.n, d.k, packed == 1, packed == 2,
                           pick % 4 == 0 ? 0.0f : 0.5f, &e});
            if (HasFailure()) return gk_set_num_threads(0);
          }
  }
  gk_set_num_threads(0);
}

// alpha == 0 or K == 0: C = act(beta C + bias), A and B not read (NULL allowed).
TEST(SgemmPrepacked, KZeroAndAlphaZeroScaleCOnly) {
  const std::vector<float> bias = {1.0f, -2.0f, 3.0f};
  const gk_epilogue e{bias.data(), GK_BIAS_PER_ROW, GK_ACT_RELU};
  std::vector<float> c = {1, 2, 3, 4, 5, 6};  // 3 x 2 row-major
  ASSERT_EQ(gk_sgemm_ex(CblasRowMajor, CblasNoTrans, CblasNoTrans, 3, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 2.0f,
                        c.data(), 2, &e),
            GK_OK)
      << gk_last_error();
  EXPECT_EQ(c, (std::vector<float>{3, 5, 4, 6, 13, 15}));
  std::vector<float> c2(6, kNaN);
  ASSERT_EQ(gk_sgemm_ex(CblasRowMajor, CblasNoTrans, CblasNoTrans, 3, 2, 4, 0.0f, nullptr, 4, nullptr, 2, 0.0f,
                        c2.data(), 2, &e),
            GK_OK);
  EXPECT_EQ(c2, (std::vector<float>{1, 1, 0, 0, 3, 3}));
  // A packed with alpha 0: B is not read.
  const std::vector<float> a(12, 1.0f);
  const int64_t bytes = gk_sgemm_pack_get_size(GK_PACK_A, 3, 2, 4);
  Aligned pa(bytes);
  ASSERT_EQ(gk_sgemm_pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, 3, 2, 4, 0.0f, a.data(), 4, pa.get(), bytes), GK_OK);
  std::vector<float> c3(6, kNaN);
  ASSERT_EQ(gk_sgemm_compute(CblasRowMajor, GK_PACKED, CblasNoTrans, 3, 2, 4, pa.get(), 0, nullptr, 2, 0.0f, c3.data(),
                             2, nullptr),
            GK_OK)
      << gk_last_error();
  EXPECT_EQ(c3, std::vector<float>(6, 0.0f));
}

// Refused calls: GK_ERR_INVALID_ARGUMENT, a message naming the problem, nothing written.
TEST(SgemmPrepacked, BadInputRefusedWithNothingWritten) {
  const int64_t m = 9, n = 10, k = 11;
  const std::vector<float> a = gktest::random_vector(size_t(m * k), 1), b = gktest::random_vector(size_t(k * n), 2);
  const int64_t bytes_a = gk_sgemm_pack_get_size(GK_PACK_A, m, n, k), bytes_b = gk_sgemm_pack_get_size(GK_PACK_B, m, n, k);
  ASSERT_GT(bytes_a, 0);
  ASSERT_GT(bytes_b, 0);
  auto expect_refused = [](gk_status s, const char* names) {
    EXPECT_EQ(s, GK_ERR_INVALID_ARGUMENT) << names;
    EXPECT_NE(std::string(gk_last_error()).find(names), std::string::npos) << gk_last_error();
  };
  // The size query.
  EXPECT_EQ(gk_sgemm_pack_get_size(GK_PACK_A, -1, n, k), -1);
  EXPECT_EQ(gk_sgemm_pack_get_size(gk_pack_operand(5), m, n, k), -1);
  EXPECT_EQ(gk_sgemm_pack_get_size(GK_PACK_A, int64_t{1} << 40, n, int64_t{1} << 40), -1);
  EXPECT_NE(std::string(gk_last_error()).find("too large"), std::string::npos) << gk_last_error();
  // Packing.
  Aligned dest(bytes_a);
  auto pack = [&](CBLAS_ORDER o, gk_pack_operand w, int t, int64_t mm, const float* src, int64_t ld, void* d,
                  int64_t db) { return gk_sgemm_pack(o, w, CBLAS_TRANSPOSE(t), mm, n, k, 1.0f, src, ld, d, db); };
  expect_refused(pack(CBLAS_ORDER(3), GK_PACK_A, CblasNoTrans, m, a.data(), k, dest.get(), bytes_a), "order");
  expect_refused(pack(CblasRowMajor, gk_pack_operand(2), CblasNoTrans, m, a.data(), k, dest.get(), bytes_a), "which");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, GK_PACKED, m, a.data(), k, dest.get(), bytes_a), "trans");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, -2, a.data(), k, dest.get(), bytes_a), "m -2");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, a.data(), k - 1, dest.get(), bytes_a), "ld");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, a.data(), k, nullptr, bytes_a), "dest is NULL");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, a.data(), k,
                      static_cast<char*>(dest.get()) + 16, bytes_a - 16), "aligned");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, a.data(), k, dest.get(), bytes_a - 4), "dest_bytes");
  expect_refused(pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, nullptr, k, dest.get(), bytes_a), "src is NULL");
  EXPECT_TRUE(dest.untouched());

  // Computing.
  Aligned pa(bytes_a), pb(bytes_b);
  ASSERT_EQ(gk_sgemm_pack(CblasRowMajor, GK_PACK_A, CblasNoTrans, m, n, k, 1.0f, a.data(), k, pa.get(), bytes_a), GK_OK);
  ASSERT_EQ(gk_sgemm_pack(CblasRowMajor, GK_PACK_B, CblasNoTrans, m, n, k, 1.0f, b.data(), n, pb.get(), bytes_b), GK_OK);
  std::vector<float> c(size_t(m * n), kSentinel);
  auto compute = [&](CBLAS_ORDER o, int ta, int64_t mm, const void* ap, const void* bp, int tb = CblasNoTrans,
                     const gk_epilogue* e = nullptr) {
    return gk_sgemm_compute(o, ta, tb, mm, n, k, ap, k, bp, n, 0.0f, c.data(), n, e);
  };
  ASSERT_EQ(compute(CblasRowMajor, GK_PACKED, m, pa.get(), b.data()), GK_OK) << gk_last_error();
  std::fill(c.begin(), c.end(), kSentinel);
  expect_refused(compute(CblasRowMajor, 7, m, pa.get(), b.data()), "transa");
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, nullptr, b.data()), "packed a is NULL");
  // A copy of the packed A one float off 64-byte alignment.
  std::vector<unsigned char> shifted(size_t(bytes_a) + 128);
  unsigned char* at = shifted.data() + (64 - reinterpret_cast<uintptr_t>(shifted.data()) % 64) % 64 + 4;
  std::memcpy(at, pa.get(), size_t(bytes_a));
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, at, b.data()), "aligned");
  const Aligned junk(bytes_a);
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, junk.get(), b.data()), "not a buffer from gk_sgemm_pack");
  expect_refused(compute(CblasRowMajor, GK_PACKED, m - 1, pa.get(), b.data()), "packed as 9 x 11");
  expect_refused(compute(CblasColMajor, GK_PACKED, m, pa.get(), b.data()), "order");
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, pb.get(), b.data()), "holds a packed B");
  expect_refused(compute(CblasRowMajor, CblasNoTrans, m, a.data(), pa.get(), GK_PACKED), "holds a packed A");
  const std::vector<float> bias(size_t(m), 1.0f);
  const gk_epilogue no_bias{nullptr, GK_BIAS_PER_ROW, GK_ACT_NONE}, bad_act{bias.data(), GK_BIAS_PER_ROW, gk_activation(9)};
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, pa.get(), b.data(), CblasNoTrans, &no_bias), "bias is NULL");
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, pa.get(), b.data(), CblasNoTrans, &bad_act), "activation");
  // Corrupted headers: each byte of the header (its checksum included) flipped in turn is caught.
  Aligned bad(bytes_a);
  for (size_t byte = 0; byte < 96; ++byte) {
    std::memcpy(bad.get(), pa.get(), size_t(bytes_a));
    static_cast<unsigned char*>(bad.get())[byte] ^= 0x10;
    const gk_status s = compute(CblasRowMajor, GK_PACKED, m, bad.get(), b.data());
    EXPECT_EQ(s, GK_ERR_INVALID_ARGUMENT) << "header byte " << byte;
  }
  for (float v : c) ASSERT_EQ(v, kSentinel);
  // Packed for another kernel: pack under one, compute under another.
  int count = 0;
  const gk::KernelInfo* table = gk::arch_kernels(&count);
  const char* other = nullptr;
  for (int i = 0; i < count; ++i)
    if (table[i].cpu_supports() && std::strcmp(table[i].name, gk_kernel_name()) != 0) other = table[i].name;
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(gk_set_kernel(other), GK_OK);
  expect_refused(compute(CblasRowMajor, GK_PACKED, m, pa.get(), b.data()), "was packed for kernel");
  ASSERT_EQ(gk_set_kernel(nullptr), GK_OK);
  for (float v : c) ASSERT_EQ(v, kSentinel);
  // gk_sgemm_ex's own checks.
  expect_refused(gk_sgemm_ex(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n - 1,
                             0.0f, c.data(), n, nullptr),
                 "ldb");
  expect_refused(gk_sgemm_ex(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
                             nullptr, n, nullptr),
                 "c is NULL");
  const gk_epilogue bad_mode{bias.data(), gk_bias_mode(4), GK_ACT_NONE};
  expect_refused(gk_sgemm_ex(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
                             c.data(), n, &bad_mode),
                 "bias_mode");
  for (float v : c) ASSERT_EQ(v, kSentinel);
}

}  // namespace
