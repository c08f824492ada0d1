// gk_sgemm_batch_strided against a double reference: both layouts, every transpose pair,
// shared (stride 0) and strided operands, beta 0 over a NaN C, products run side by side
// and one after another, 1 and 2 threads; the floats between the C matrices (the stride's
// slack) untouched. Then invalid arguments: a status, a message naming the argument, and
// nothing written.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "gemmkit.h"

namespace {

using gktest::kNaN;
using gktest::kSentinel;

struct BatchCase {
  bool row_major;
  CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k, batch;
  bool share_a;  // stride_a 0: one A for every product
  float beta;
};

std::string describe(const BatchCase& t) {
  return std::string(t.row_major ? "row" : "col") + " " + (t.ta == CblasNoTrans ? "N" : "T") +
         (t.tb == CblasNoTrans ? "N" : "T") + " " + std::to_string(t.m) + "x" + std::to_string(t.n) + "x" +
         std::to_string(t.k) + " batch " + std::to_string(t.batch) + (t.share_a ? " shared A" : "") + " beta " +
         std::to_string(t.beta);
}

// Element (i, j) of a stored matrix with leading dimension ld.
float at(const float* p, bool row_major, int64_t ld, int64_t i, int64_t j) {
  return row_major ? p[i * ld + j] : p[j * ld + i];
}

void check_batch(const BatchCase& t) {
  SCOPED_TRACE(describe(t));
  const bool a_n = t.ta == CblasNoTrans, b_n = t.tb == CblasNoTrans;
  const int64_t a_rows = a_n ? t.m : t.k, a_cols = a_n ? t.k : t.m;
  const int64_t b_rows = b_n ? t.k : t.n, b_cols = b_n ? t.n : t.k;
  // Leading dimensions past the minimum, strides past the footprint (C's slack checked).
  const int64_t lda = (t.row_major ? a_cols : a_rows) + 2, ldb = (t.row_major ? b_cols : b_rows) + 1;
  const int64_t ldc = (t.row_major ? t.n : t.m) + 3;
  const int64_t a_one = (t.row_major ? a_rows : a_cols) * lda, b_one = (t.row_major ? b_rows : b_cols) * ldb;
  const int64_t c_one = (t.row_major ? t.m : t.n) * ldc;
  const int64_t stride_a = t.share_a ? 0 : a_one + 7, stride_b = b_one + 1, stride_c = c_one + 5;
  const std::vector<float> a = gktest::random_vector(size_t((t.share_a ? 0 : t.batch - 1) * stride_a + a_one), 1);
  const std::vector<float> b = gktest::random_vector(size_t((t.batch - 1) * stride_b + b_one), 2);
  std::vector<float> c(size_t((t.batch - 1) * stride_c + c_one), kSentinel);
  const std::vector<float> c0 = gktest::random_vector(c.size(), 3);
  const float alpha = 1.25f;
  auto c_index = [&](int64_t p, int64_t i, int64_t j) {
    return size_t(p * stride_c + (t.row_major ? i * ldc + j : j * ldc + i));
  };
  for (int64_t p = 0; p < t.batch; ++p)
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) c[c_index(p, i, j)] = t.beta == 0.0f ? kNaN : c0[c_index(p, i, j)];
  const std::vector<float> before = c;
  ASSERT_EQ(gk_sgemm_batch_strided(t.row_major ? CblasRowMajor : CblasColMajor, t.ta, t.tb, t.m, t.n, t.k, alpha,
                                   a.data(), lda, stride_a, b.data(), ldb, stride_b, t.beta, c.data(), ldc, stride_c,
                                   t.batch),
            GK_OK)
      << gk_last_error();
  std::vector<bool> in_c(c.size(), false);
  for (int64_t p = 0; p < t.batch; ++p) {
    const float* ap = a.data() + p * stride_a;
    const float* bp = b.data() + p * stride_b;
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t q = 0; q < t.k; ++q) {
          const double x = a_n ? at(ap, t.row_major, lda, i, q) : at(ap, t.row_major, lda, q, i);
          const double y = b_n ? at(bp, t.row_major, ldb, q, j) : at(bp, t.row_major, ldb, j, q);
          sum += x * y;
          mag += std::fabs(x * y);
        }
        const size_t idx = c_index(p, i, j);
        in_c[idx] = true;
        const double old = t.beta == 0.0f ? 0.0 : double(before[idx]);
        const double want = alpha * sum + t.beta * old;
        const double bound = (t.k + 4) * double(FLT_EPSILON) * (std::fabs(alpha) * mag + std::fabs(t.beta * old)) + 1e-30;
        if (!(std::fabs(c[idx] - want) <= bound)) {
          ADD_FAILURE() << "product " << p << " C(" << i << ", " << j << ") = " << c[idx] << ", expected " << want;
          return;
        }
      }
  }
  for (size_t idx = 0; idx < c.size(); ++idx)
    if (!in_c[idx] && c[idx] != kSentinel) {
      ADD_FAILURE() << "float " << idx << " outside every C matrix written";
      return;
    }
}

TEST(SgemmBatch, EveryLayoutTransposeAndStrideAgainstTheReference) {
  struct Shape {
    int64_t m, n, k, batch;
  };
  // Tiny products side by side (many of them, and fewer than the threads), one of the
  // tiny path's edges, a product large enough for two threads on its own, empty K.
  const Shape shapes[] = {{5, 7, 3, 17}, {1, 1, 1, 1}, {32, 32, 32, 40}, {13, 50, 9, 3}, {130, 70, 90, 3}, {6, 4, 0, 5}};
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    int pick = 0;
    for (const Shape& s : shapes)
      for (bool row_major : {true, false})
        for (CBLAS_TRANSPOSE ta : {CblasNoTrans, CblasTrans})
          for (CBLAS_TRANSPOSE tb : {CblasNoTrans, CblasTrans}) {
            ++pick;
            check_batch({row_major, ta, tb, s.m, s.n, s.k, s.batch, pick % 3 == 0, pick % 2 ? 0.0f : 0.5f});
            if (HasFailure()) return gk_set_num_threads(0);
          }
  }
  gk_set_num_threads(0);
}

// Refused calls: status, a message naming the argument, C untouched.
TEST(SgemmBatch, InvalidArgumentsRefusedWithNothingWritten) {
  const std::vector<float> a(64, 1.0f), b(64, 1.0f);
  std::vector<float> c(64, kSentinel);
  struct Bad {
    const char* what;
    const char* names;
    gk_status got;
  };
  auto call = [&](CBLAS_ORDER order, CBLAS_TRANSPOSE ta, int64_t m, int64_t lda, int64_t stride_a, const float* cp_a,
                  float* cp_c, int64_t stride_c, int64_t batch) {
    return gk_sgemm_batch_strided(order, ta, CblasNoTrans, m, 4, 4, 1.0f, cp_a, lda, stride_a, b.data(), 4, 0, 0.0f,
                                  cp_c, 4, stride_c, batch);
  };
  const Bad cases[] = {
      {"order", "order", call(CBLAS_ORDER(7), CblasNoTrans, 4, 4, 0, a.data(), c.data(), 16, 2)},
      {"transa", "transa", call(CblasRowMajor, CBLAS_TRANSPOSE(3), 4, 4, 0, a.data(), c.data(), 16, 2)},
      {"negative m", "m", call(CblasRowMajor, CblasNoTrans, -1, 4, 0, a.data(), c.data(), 16, 2)},
      {"negative batch", "batch", call(CblasRowMajor, CblasNoTrans, 4, 4, 0, a.data(), c.data(), 16, -1)},
      {"lda too small", "lda", call(CblasRowMajor, CblasNoTrans, 4, 3, 0, a.data(), c.data(), 16, 2)},
      {"negative stride", "stride_a", call(CblasRowMajor, CblasNoTrans, 4, 4, -16, a.data(), c.data(), 16, 2)},
      {"C matrices overlap", "stride_c", call(CblasRowMajor, CblasNoTrans, 4, 4, 0, a.data(), c.data(), 15, 2)},
      {"NULL c", "c is NULL", call(CblasRowMajor, CblasNoTrans, 4, 4, 0, a.data(), nullptr, 16, 2)},
      {"NULL a", "a is NULL", call(CblasRowMajor, CblasNoTrans, 4, 4, 0, nullptr, c.data(), 16, 2)},
      {"past the address space", "address space",
       call(CblasRowMajor, CblasNoTrans, 4, 4, int64_t{1} << 58, a.data(), c.data(), 16, 64)},
  };
  for (const Bad& t : cases) {
    SCOPED_TRACE(t.what);
    EXPECT_EQ(t.got, GK_ERR_INVALID_ARGUMENT);
  }
  // Messages, one by one (each call overwrites the last error).
  EXPECT_EQ(call(CblasRowMajor, CblasNoTrans, 4, 3, 0, a.data(), c.data(), 16, 2), GK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("lda"), std::string::npos) << gk_last_error();
  EXPECT_EQ(call(CblasRowMajor, CblasNoTrans, 4, 4, 0, a.data(), c.data(), 15, 2), GK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("stride_c"), std::string::npos) << gk_last_error();
  EXPECT_EQ(call(CblasRowMajor, CblasNoTrans, 4, 4, int64_t{1} << 58, a.data(), c.data(), 16, 64),
            GK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("address space"), std::string::npos) << gk_last_error();
  for (float v : c) ASSERT_EQ(v, kSentinel);
  // Nothing to do: batch 0, an empty C (NULL pointers allowed then), K 0 with alpha scaling C only.
  EXPECT_EQ(call(CblasRowMajor, CblasNoTrans, 4, 4, 0, a.data(), c.data(), 16, 0), GK_OK);
  EXPECT_EQ(gk_sgemm_batch_strided(CblasColMajor, CblasNoTrans, CblasNoTrans, 0, 4, 4, 1.0f, nullptr, 1, 0, nullptr, 4,
                                   0, 0.0f, nullptr, 1, 0, 5),
            GK_OK);
  for (float v : c) ASSERT_EQ(v, kSentinel);
}

}  // namespace

// ---------------------------------------------------------------- gk_sgemm_batch

namespace {

using gktest::Operand;

// One group of the pointer-array batch: its shape and arguments, and its products' operands.
struct Group {
  CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int64_t size;
  std::vector<Operand> a, b, c, c0;
};

// Groups of mixed shapes (small ones side by side, a large one on every thread, an empty
// group, an empty C, K 0), each product checked against the reference; 1 and 2 threads.
TEST(SgemmGroupBatch, MixedGroupsAgainstTheReference) {
  struct Spec {
    bool ta, tb;
    int64_t m, n, k;
    float alpha, beta;
    int64_t size;
  };
  const Spec specs[] = {{false, false, 5, 7, 3, 1.0f, 0.0f, 9},    {true, false, 32, 32, 32, 0.5f, 1.0f, 20},
                        {false, true, 1, 1, 1, 2.0f, 0.5f, 3},     {true, true, 13, 50, 9, -1.0f, 0.0f, 0},
                        {false, false, 130, 150, 90, 1.0f, 0.25f, 2}, {true, false, 0, 4, 4, 1.0f, 0.0f, 2},
                        {false, true, 6, 4, 0, 1.0f, 0.5f, 3},     {true, true, 17, 3, 40, 1.5f, 0.0f, 11}};
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    for (bool row_major : {true, false}) {
      SCOPED_TRACE(std::string(row_major ? "row-major" : "column-major") + ", threads " + std::to_string(threads));
      std::vector<Group> groups;
      uint32_t seed = 100;
      for (const Spec& s : specs) {
        Group g{s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, s.alpha, s.beta,
                s.size, {}, {}, {}, {}};
        for (int64_t p = 0; p < s.size; ++p) {
          g.a.emplace_back(s.ta ? s.k : s.m, s.ta ? s.m : s.k, 1, row_major, ++seed);
          g.b.emplace_back(s.tb ? s.n : s.k, s.tb ? s.k : s.n, 2, row_major, ++seed);
          g.c0.emplace_back(s.m, s.n, 3, row_major, ++seed);
          if (s.beta == 0.0f) g.c0.back().fill(kNaN);
          g.c.push_back(g.c0.back());
        }
        groups.push_back(std::move(g));
      }
      std::vector<CBLAS_TRANSPOSE> ta, tb;
      std::vector<int64_t> m, n, k, lda, ldb, ldc, size;
      std::vector<float> alpha, beta;
      std::vector<const float*> ap, bp;
      std::vector<float*> cp;
      for (Group& g : groups) {
        ta.push_back(g.ta), tb.push_back(g.tb), m.push_back(g.m), n.push_back(g.n), k.push_back(g.k);
        alpha.push_back(g.alpha), beta.push_back(g.beta), size.push_back(g.size);
        // Every product of a group has the same leading dimensions (the Operands' padding is fixed).
        const Operand pa(g.ta == CblasTrans ? g.k : g.m, g.ta == CblasTrans ? g.m : g.k, 1, row_major, 0);
        const Operand pb(g.tb == CblasTrans ? g.n : g.k, g.tb == CblasTrans ? g.k : g.n, 2, row_major, 0);
        const Operand pc(g.m, g.n, 3, row_major, 0);
        lda.push_back(pa.ld), ldb.push_back(pb.ld), ldc.push_back(pc.ld);
        for (int64_t p = 0; p < g.size; ++p) {
          ap.push_back(g.a[size_t(p)].data.data());
          bp.push_back(g.b[size_t(p)].data.data());
          cp.push_back(g.c[size_t(p)].data.data());
        }
      }
      ASSERT_EQ(gk_sgemm_batch(row_major ? CblasRowMajor : CblasColMajor, ta.data(), tb.data(), m.data(), n.data(),
                               k.data(), alpha.data(), ap.data(), lda.data(), bp.data(), ldb.data(), beta.data(),
                               cp.data(), ldc.data(), int64_t(groups.size()), size.data()),
                GK_OK)
          << gk_last_error();
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const Group& g = groups[gi];
        for (int64_t p = 0; p < g.size; ++p)
          ASSERT_TRUE(gktest::matches_reference(g.a[size_t(p)], g.ta == CblasTrans, g.b[size_t(p)], g.tb == CblasTrans,
                                                g.alpha, g.beta, g.c0[size_t(p)], g.c[size_t(p)], g.k))
              << "group " << gi << " product " << p;
      }
    }
  }
  gk_set_num_threads(0);
}

// Refused calls: status, a message naming the argument (and group / product), C untouched.
TEST(SgemmGroupBatch, InvalidArgumentsRefusedWithNothingWritten) {
  const std::vector<float> a(64, 1.0f), b(64, 1.0f);
  std::vector<float> c0(16, kSentinel), c1(16, kSentinel);
  const CBLAS_TRANSPOSE ta[] = {CblasNoTrans, CblasNoTrans}, tb[] = {CblasNoTrans, CblasNoTrans};
  const int64_t m[] = {4, 4}, n[] = {4, 4}, k[] = {4, 4}, ld[] = {4, 4};
  const float alpha[] = {1.0f, 1.0f}, beta[] = {0.0f, 0.0f};
  const float* ap[] = {a.data(), a.data()};
  const float* bp[] = {b.data(), b.data()};
  float* cp[] = {c0.data(), c1.data()};
  const int64_t sizes[] = {1, 1};
  struct Args {
    CBLAS_ORDER order = CblasRowMajor;
    const CBLAS_TRANSPOSE* ta;
    const int64_t *m, *lda;
    const float* const* ap;
    float* const* cp;
    int64_t count = 2;
    const int64_t* sizes;
  };
  auto call = [&](const Args& x) {
    return gk_sgemm_batch(x.order, x.ta, tb, x.m, n, k, alpha, x.ap, x.lda, bp, ld, beta, x.cp, ld, x.count, x.sizes);
  };
  const Args good{CblasRowMajor, ta, m, ld, ap, cp, 2, sizes};
  auto expect_refused = [&](Args x, const char* names) {
    EXPECT_EQ(call(x), GK_ERR_INVALID_ARGUMENT) << names;
    EXPECT_NE(std::string(gk_last_error()).find(names), std::string::npos) << gk_last_error();
  };
  Args x = good;
  x.order = CBLAS_ORDER(9);
  expect_refused(x, "order");
  x = good, x.count = -1;
  expect_refused(x, "group_count -1");
  const int64_t negative[] = {1, -3};
  x = good, x.sizes = negative;
  expect_refused(x, "group_size[1] -3");
  const int64_t huge[] = {int64_t{1} << 62, int64_t{1} << 62};
  x = good, x.sizes = huge;
  expect_refused(x, "add up");
  x = good, x.sizes = nullptr;
  expect_refused(x, "group_size is NULL");
  x = good, x.ta = nullptr;
  expect_refused(x, "transa_array is NULL");
  const CBLAS_TRANSPOSE bad_t[] = {CblasNoTrans, CBLAS_TRANSPOSE(1)};
  x = good, x.ta = bad_t;
  expect_refused(x, "transa 1 is not a CBLAS_TRANSPOSE (group 1)");
  const int64_t neg_m[] = {4, -4};
  x = good, x.m = neg_m;
  expect_refused(x, "(group 1)");
  const int64_t small_ld[] = {4, 3};
  x = good, x.lda = small_ld;
  expect_refused(x, "lda 3");
  const int64_t huge_ld[] = {4, int64_t{1} << 62};
  x = good, x.lda = huge_ld;
  expect_refused(x, "address space");
  const float* null_a[] = {a.data(), nullptr};
  x = good, x.ap = null_a;
  expect_refused(x, "a_array[1] (group 1) is NULL");
  float* null_c[] = {c0.data(), nullptr};
  x = good, x.cp = null_c;
  expect_refused(x, "c_array[1]");
  x = good, x.ap = nullptr;
  expect_refused(x, "a_array is NULL");
  for (float v : c0) ASSERT_EQ(v, kSentinel);
  for (float v : c1) ASSERT_EQ(v, kSentinel);
  // Nothing to do: no groups (NULL arrays allowed), groups of size 0.
  EXPECT_EQ(gk_sgemm_batch(CblasRowMajor, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                           nullptr, nullptr, nullptr, nullptr, 0, nullptr),
            GK_OK);
  const int64_t zeros[] = {0, 0};
  x = good, x.sizes = zeros, x.ap = nullptr, x.cp = nullptr;
  EXPECT_EQ(call(x), GK_OK) << gk_last_error();
  EXPECT_EQ(call(good), GK_OK) << gk_last_error();
  EXPECT_EQ(c0[0], 4.0f);
}

}  // namespace
