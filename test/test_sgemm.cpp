// The whole SGEMM through cblas_sgemm and sgemm_, against the double reference: both
// layouts, all transpose pairs, padded leading dimensions, alpha/beta variants with NaN in
// C for beta == 0, shapes at and around every blocking size, each kernel, 1 and 2 threads.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "common/runtime.h"
#if defined(__x86_64__)
#include <cpuid.h>
#include <cpuinfo.h>
#endif
#include "gemm/partition.h"
#include "gemm_test_util.h"

namespace {

using gktest::Operand;

struct Case {
  int64_t m, n, k;
  bool row_major, ta, tb;
  float alpha, beta;
  int64_t extra_ld;
};

std::string describe(const Case& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s m=%lld n=%lld k=%lld %c%c alpha=%g beta=%g extra_ld=%lld",
                c.row_major ? "row" : "col", (long long)c.m, (long long)c.n, (long long)c.k,
                c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.alpha, c.beta, (long long)c.extra_ld);
  return buf;
}

// The path choose_gemm_path's one-thread GEMV rules (dot products within L1 or, with long
// K, within half of L2; few vectors) name for a row-stored problem whose matrix is within
// L2, or Tiny where neither applies (5-8 columns against A's contiguous columns or rows,
// few_columns_axpy and wide_dot, are not modelled: callers stay below their sizes).
// A column-major case's row-stored problem is C^T = op(B)^T op(A)^T: (n, m, k, tb, ta).
// `unpadded`: leading dimensions without padding, so that with K 1 a matrix stored by rows
// has its columns contiguous too (and runs the axpy form).
gk::GemmPath few_vectors_path(const gk::PathLimits& l, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                              bool unpadded = false) {
  const int64_t vectors = std::min(m, n), rows = std::max(m, n);
  const bool few_rows = m < n;  // B^T is the matrix
  const gk::GemmPath gemv = few_rows ? gk::GemmPath::GemvRows : gk::GemmPath::GemvColumns;
  if (vectors < 2) return gk::GemmPath::Tiny;
  if (!ta && tb && k >= l.dot_long_min_k && rows * k * 4 <= l.dot_long_max_matrix_bytes &&
      vectors <= (few_rows ? l.dot_long_max_rows : l.dot_long_max_columns))
    return gemv;
  if (vectors > l.dot_max_vectors) return gk::GemmPath::Tiny;
  if (!ta && tb && k >= l.dot_min_k && rows * k * 4 <= l.dot_max_matrix_bytes) return gemv;
  if (!l.tiny_blocks || rows < (few_rows ? l.few_rows_min_columns : l.few_vectors_min_rows)) return gk::GemmPath::Tiny;
  const bool rows_contiguous = few_rows ? tb : !ta;  // the matrix's, along K
  const bool dot_form = rows_contiguous && !(k == 1 && unpadded);
  const int64_t dot_min_k = few_rows && vectors >= 3 ? l.few_rows_dot_min_k : l.few_vectors_dot_min_k;
  const bool serves =
      dot_form ? k >= dot_min_k : !few_rows || rows_contiguous || vectors <= l.few_rows_axpy_max_vectors;
  return serves ? gemv : gk::GemmPath::Tiny;
}
gk::GemmPath few_vectors_path(const gk::PathLimits& l, const Case& c) {
  const bool unpadded = c.extra_ld == 0;
  return c.row_major ? few_vectors_path(l, c.m, c.n, c.k, c.ta, c.tb, unpadded)
                     : few_vectors_path(l, c.n, c.m, c.k, c.tb, c.ta, unpadded);
}

// Runs one case through cblas_sgemm (or sgemm_ for column-major when `fortran`).
::testing::AssertionResult run_case(const Case& c, bool fortran = false) {
  const bool rm = c.row_major;
  // Stored shapes: op(A) is m x k, so A is k x m when transposed.
  Operand a(c.ta ? c.k : c.m, c.ta ? c.m : c.k, c.extra_ld, rm, 101);
  Operand b(c.tb ? c.n : c.k, c.tb ? c.k : c.n, c.extra_ld, rm, 202);
  Operand cm(c.m, c.n, c.extra_ld, rm, 303);
  if (c.beta == 0.0f) cm.fill(gktest::kNaN);
  const Operand c0 = cm;
  if (fortran) {
    const char ta = c.ta ? 'T' : 'N', tb = c.tb ? 't' : 'n';
    const int m = int(c.m), n = int(c.n), k = int(c.k), lda = int(a.ld), ldb = int(b.ld),
              ldc = int(cm.ld);
    sgemm_(&ta, &tb, &m, &n, &k, &c.alpha, a.data.data(), &lda, b.data.data(), &ldb, &c.beta,
           cm.data.data(), &ldc);
  } else {
    cblas_sgemm(rm ? CblasRowMajor : CblasColMajor, c.ta ? CblasTrans : CblasNoTrans,
                c.tb ? CblasTrans : CblasNoTrans, int(c.m), int(c.n), int(c.k), c.alpha,
                a.data.data(), int(a.ld), b.data.data(), int(b.ld), c.beta, cm.data.data(),
                int(cm.ld));
  }
  auto r = gktest::matches_reference(a, c.ta, b, c.tb, c.alpha, c.beta, c0, cm, c.k);
  if (!r) r << " [" << describe(c) << (fortran ? " sgemm_" : " cblas") << "]";
  return r;
}

const float kAlphas[] = {0.0f, 1.0f, -1.5f};
const float kBetas[] = {0.0f, 1.0f, 0.5f};
#if defined(__x86_64__)
constexpr bool kHasTinyBlocks = true;  // the tiny paths' vector blocks (src/gemm/tiny.cpp)
#else
constexpr bool kHasTinyBlocks = false;
#endif

// Dimension values worth testing for a kernel and its blocking: tiny, primes, around MR
// and NR multiples, around MC and KC.
std::vector<int64_t> interesting_sizes(const gk::KernelInfo& ker) {
  const gk::KernelConfig cfg = gk::derive_blocking(ker);
  std::vector<int64_t> v = {1, 2, 3, 7, 13, 31, 61, 97, ker.mr - 1, ker.mr + 1, 2 * ker.mr + 1,
                            ker.nr - 1, ker.nr + 1, 3 * ker.nr + 5};
  if (!gktest::quick()) {
    for (int64_t d : {cfg.mc, cfg.kc}) v.insert(v.end(), {d - 1, d, d + 1});
    v.push_back(cfg.kc * 2 + 1);
  }
  v.erase(std::remove_if(v.begin(), v.end(), [](int64_t x) { return x < 1; }), v.end());
  return v;
}

// Every layout x transpose pair x alpha x beta x ld padding, on one odd shape.
void exhaustive_small(int threads) {
  gk_set_num_threads(threads);
  for (bool rm : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float alpha : kAlphas)
          for (float beta : kBetas)
            for (int64_t extra : {int64_t{0}, int64_t{3}}) {
              Case c{19, 37, 23, rm, ta, tb, alpha, beta, extra};
              ASSERT_TRUE(run_case(c));
              Case big{131, 77, 150, rm, ta, tb, alpha, beta, extra};  // packed path
              ASSERT_TRUE(run_case(big));
            }
  gk_set_num_threads(0);
}

// Random shapes drawn from the interesting sizes, with at most one large dimension so the
// double reference stays cheap.
void random_shapes(const gk::KernelInfo& ker, int threads, int cases, uint32_t seed) {
  gk_set_num_threads(threads);
  std::mt19937 rng(seed);
  const std::vector<int64_t> sizes = interesting_sizes(ker);
  auto pick = [&](auto& list) { return list[rng() % list.size()]; };
  for (int i = 0; i < cases; ++i) {
    Case c{pick(sizes), pick(sizes), pick(sizes), bool(rng() & 1), bool(rng() & 1),
           bool(rng() & 1), kAlphas[rng() % 3], kBetas[rng() % 3], int64_t(rng() % 2 ? 0 : 5)};
    while (c.m * c.n * c.k > 3'000'000) {  // shrink the smallest-impact dimension
      int64_t& d = (c.m >= c.n && c.m >= c.k) ? c.n : (c.n >= c.k ? c.k : c.m);
      d = std::max<int64_t>(1, d / 3);
    }
    ASSERT_TRUE(run_case(c, /*fortran=*/!c.row_major && (i % 4 == 0)));
  }
  gk_set_num_threads(0);
}

}  // namespace

TEST(Sgemm, AllLayoutsTransposesAlphaBetaOneThread) {
  gktest::for_each_kernel([](const gk::KernelInfo&) { exhaustive_small(1); });
}

TEST(Sgemm, AllLayoutsTransposesAlphaBetaTwoThreads) {
  gktest::for_each_kernel([](const gk::KernelInfo&) { exhaustive_small(2); });
}

TEST(Sgemm, RandomShapesAroundBlockingSizes) {
  const int cases = gktest::quick() ? 40 : 200;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    random_shapes(ker, 1, cases, 1);
    random_shapes(ker, 2, cases, 2);
  });
}

// Wide problems cross the NC boundary (a second jc block, balanced halves).
TEST(Sgemm, AcrossNcBlocks) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const gk::KernelConfig cfg = gk::derive_blocking(ker);
    for (int64_t n : {cfg.nc - 1, cfg.nc + 1, 2 * cfg.nc + 3}) {
      if (gktest::quick() && n > 600) continue;
      for (int threads : {1, 2}) {
        gk_set_num_threads(threads);
        ASSERT_TRUE(run_case({2 * ker.mr + 3, n, 17, false, false, false, 1.0f, 0.0f, 1}));
        ASSERT_TRUE(run_case({ker.mr + 1, n, 9, true, true, true, -1.5f, 0.5f, 0}));
      }
    }
    gk_set_num_threads(0);
  });
}

// GEMV shapes (m == 1 or n == 1) in every layout and transpose, strided vectors included.
TEST(Sgemm, MatrixVectorShapes) {
  gktest::for_each_kernel([](const gk::KernelInfo&) {
    // 259 rows, K past the sizes from which two threads share the rows (in either form) and
    // 3 past a multiple of 16.
    const gk::PathLimits& l = gk::active_config().paths;
    const int64_t threaded_bytes = std::max(l.gemv_threads_min_matrix_bytes, l.gemv_axpy_threads_min_matrix_bytes);
    const int64_t threaded_k = std::max<int64_t>(531, gk::round_up(threaded_bytes / (259 * 4) + 1, 16) + 3);
    // Rows of one column past that size, a multiple of 16.
    const int64_t threaded_rows = gk::round_up(threaded_bytes / 4 + 1, 16);
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (bool rm : {false, true})
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (float beta : kBetas) {
              ASSERT_TRUE(run_case({1000, 1, 512, rm, ta, tb, 1.0f, beta, 0}));
              ASSERT_TRUE(run_case({1, 333, 77, rm, ta, tb, -1.5f, beta, 2}));
              ASSERT_TRUE(run_case({7, 1, 1, rm, ta, tb, 1.0f, beta, 1}));
              ASSERT_TRUE(run_case({1, 1, 129, rm, ta, tb, 1.0f, beta, 0}));
              // K of 1 to 7: the axpy form's own loop for one or two columns (beta 0 into
              // contiguous rows), also past the size that splits the rows between threads
              // (below); the dot form's for rows of 1-7 floats. Tails of 6, 13 and 3 rows.
              ASSERT_TRUE(run_case({3350, 1, 1, rm, ta, tb, 1.5f, beta, 0}));
              ASSERT_TRUE(run_case({1, 1037, 2, rm, ta, tb, -0.5f, beta, 1}));
              for (int64_t k = 3; k <= 7; ++k) ASSERT_TRUE(run_case({611, 1, k, rm, ta, tb, 1.0f, beta, k % 2}));
              // Large enough for two threads (on one, the same loops as above; emulated,
              // beta 0 only); every tail: rows % 4, % 16 and % 32, columns % 8 and % 16, a
              // row split between threads.
              if (threads == 1 || (gktest::quick() && beta != 0.0f)) continue;
              for (int64_t k = 1; k <= 2; ++k)
                ASSERT_TRUE(run_case({threaded_rows / k + 5, 1, k, rm, ta, tb, 1.0f, beta, 0}));
              ASSERT_TRUE(run_case({259, 1, threaded_k, rm, ta, tb, 0.5f, beta, 3}));
              ASSERT_TRUE(run_case({1, 259, threaded_k, rm, ta, tb, 1.0f, beta, 0}));
            }
    }
    gk_set_num_threads(0);
  });
}

// One row or column of C with few elements (the GEMV path's rows past its last whole
// vector: halves of it, then single rows): every count from 1 to 40 (each tail of 16-, 8-
// and 4-float vectors), K short of, at and past the direct columns (16) and odd, in every
// layout and transpose by turns, beta 0 with C NaN.
TEST(Sgemm, MatrixVectorShortRowsEveryTail) {
  const gktest::WithoutMicroPath paths_below_micro;
  gktest::for_each_kernel([](const gk::KernelInfo&) {
    gk_set_num_threads(1);
    int pick = 0;
    for (int64_t len = 1; len <= 40; ++len)
      for (int64_t k : {1, 2, 7, 16, 17, 41, 100}) {
        const bool rm = pick % 2 == 0, ta = pick / 2 % 2 == 1, tb = pick / 4 % 2 == 1;
        const float beta = kBetas[pick / 3 % 3];
        ++pick;
        ASSERT_TRUE(run_case({1, len, k, rm, ta, tb, -1.5f, beta, int64_t(pick % 5 == 0 ? 3 : 0)}));
        ASSERT_TRUE(run_case({len, 1, k, !rm, tb, ta, 1.0f, beta, 0}));
      }
    gk_set_num_threads(0);
  });
}

// At most 4 rows or columns of C with A's rows and B's columns contiguous along K (row-major
// NT, column-major TN): dot products on the GEMV path, the larger operand as its matrix.
// Both orientations, 1-4 vectors, rows around the dot form's 4-row passes, K from its
// threshold through every tail of 16-, 8- and 4-float vectors, padded leading dimensions,
// alpha (not 0: a quick return) and beta by turns (beta 0 with C NaN); the path is
// asserted where the matrix fits L1.
TEST(Sgemm, DotProductsEveryEdge) {
  const gktest::WithoutMicroPath paths_below_micro;
  const int64_t l1 = gk::caches().l1d;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    gk_set_num_threads(1);
    int pick = 0;
    for (int64_t vectors = 1; vectors <= 4; ++vectors)
      for (int64_t rows : {2, 3, 4, 5, 7, 8, 9, 13, 33})
        for (int64_t k : {32, 33, 39, 44, 47, 63, 64, 95, 100}) {
          const bool wide = pick % 2 == 0, rm = pick / 2 % 2 == 0;
          const int64_t m = wide ? vectors : rows, n = wide ? rows : vectors;
          const float alpha = kAlphas[1 + pick % 2], beta = kBetas[pick / 2 % 3];
          const int64_t extra = pick % 4 == 1 ? 3 : 0;
          ++pick;
          // Row-major NT and column-major TN are the same row-stored problem.
          ASSERT_TRUE(run_case({m, n, k, rm, /*ta=*/!rm, /*tb=*/rm, alpha, beta, extra}));
          if (std::min(m, n) >= 2 && std::max(m, n) * k * 4 <= l1) {
            const gk::GemmPath ran = gk::last_gemm_path();
            EXPECT_TRUE(ran == gk::GemmPath::GemvRows || ran == gk::GemmPath::GemvColumns)
                << m << "x" << n << "x" << k << " ran " << gk::path_name(ran);
          }
        }
    gk_set_num_threads(0);
  });
}

// Dot products with long K (PathLimits' dot_long rules): up to 16 rows of C against more
// columns, up to 8 columns against more rows, A's rows and B's columns contiguous
// (row-major NT, column-major TN): the GEMV's dot form in groups of vectors (8 on 32
// registers, 4 on 16), where the tiny path gathered all of B. Every vector count in both
// orientations and both layouts, rows around the passes, K with and without tails of 16-
// and 8-float vectors, alpha, beta (0 with C NaN) and padded leading dimensions by turns;
// the path asserted, and asserted off the GEMV for 9-16 columns; the micro path off.
TEST(Sgemm, DotProductsLongK) {
  const gktest::WithoutMicroPath paths_below_micro;
  const std::vector<int64_t> ks = gktest::quick() ? std::vector<int64_t>{137, 1003} : std::vector<int64_t>{128, 137, 143, 1003};
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    gk_set_num_threads(1);
    int pick = 0, dots = 0;
    for (int64_t vectors = 2; vectors <= gk::kGemvMaxVectors; ++vectors)
      for (int64_t rows : {17, 61})
        for (int64_t k : ks)
          for (int orientation = 0; orientation < 4; ++orientation) {
            const bool wide = orientation % 2 == 0, rm = orientation / 2 == 0;
            const int64_t m = wide ? vectors : rows, n = wide ? rows : vectors;
            const Case c{m, n, k, rm, /*ta=*/!rm, /*tb=*/rm, kAlphas[1 + pick % 2], kBetas[pick / 2 % 3],
                         int64_t(pick % 5 == 1 ? 5 : 0)};
            ++pick;
            ASSERT_TRUE(run_case(c));
            const gk::GemmPath ran = gk::last_gemm_path();
            // Column-major runs C^T: few rows of C there are few columns of the row-stored C.
            const bool few_rows = wide == rm;
            const bool dot = rows * k * 4 <= l.dot_long_max_matrix_bytes &&
                             vectors <= (few_rows ? l.dot_long_max_rows : l.dot_long_max_columns);
            const gk::GemmPath want = few_rows ? gk::GemmPath::GemvRows : gk::GemmPath::GemvColumns;
            dots += dot;
            if (dot) {
              EXPECT_EQ(ran, want) << describe(c) << " ran " << gk::path_name(ran);
            } else if (!few_rows && vectors > std::max(l.dot_max_vectors, l.wide_dot_max_vectors)) {
              EXPECT_NE(ran, want) << describe(c) << " ran " << gk::path_name(ran);
            }
          }
    if (l.tiny_blocks) {
      EXPECT_GT(dots, 0);
    }
    gk_set_num_threads(0);
  });
}

// 5-8 columns of C against A's contiguous columns (row-major A transposed; column-major
// B transposed with few rows of C), C long enough (PathLimits' few_columns_axpy rules):
// the GEMV's axpy form, C's rows stored from a 16 x 8 transpose in registers on 16-float
// vectors. Columns 4..9 around the limits, rows around the 16-row vectors, the 128-row
// threshold and the aligned heads from 256 rows, K at and past the direct columns (the
// partial sums then, C within half of L1 or past it), layouts, alpha, beta (0 with C NaN)
// and padded leading dimensions by turns; the path asserted both ways, the micro path off
// (its columns form serves some of these products first: MicroPathPastItsBounds).
TEST(Sgemm, FewColumnsAgainstContiguousColumnsOfA) {
  const gktest::WithoutMicroPath paths_below_micro;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    gk_set_num_threads(1);
    int pick = 0, transposed = 0;
    for (int64_t cols = 4; cols <= 9; ++cols)
      for (int64_t rows : {17, 127, 128, 143, 300, 1001})
        for (int64_t k : {1, 5, 16, 17, 40}) {
          const bool rm = pick % 3 != 2, other_transposed = pick / 3 % 2 == 1;
          const float alpha = kAlphas[1 + pick / 2 % 2], beta = kBetas[pick / 6 % 3];
          const int64_t extra = pick % 4 == 1 ? 3 : 0;
          // Column-major: the row-stored problem is C^T, so few rows of C and B transposed.
          const Case c = rm ? Case{rows, cols, k, true, true, other_transposed, alpha, beta, extra}
                            : Case{cols, rows, k, false, other_transposed, true, alpha, beta, extra};
          ++pick;
          ASSERT_TRUE(run_case(c, /*fortran=*/!rm && pick % 2 == 0));
          const gk::GemmPath ran = gk::last_gemm_path();
          const bool serves = cols > l.dot_max_vectors && cols <= l.few_columns_axpy_max_columns &&
                              rows >= l.few_columns_axpy_min_rows &&
                              (k <= gk::kGemvAxpyDirectColumns || rows * cols * 4 <= l.few_columns_axpy_max_sums_bytes);
          transposed += serves;
          if (serves) {
            EXPECT_EQ(ran, gk::GemmPath::GemvColumns) << describe(c) << " ran " << gk::path_name(ran);
          } else if (cols > l.dot_max_vectors) {  // (A far within L2: no other GEMV rule applies)
            EXPECT_NE(ran, gk::GemmPath::GemvColumns) << describe(c) << " ran " << gk::path_name(ran);
          }
        }
    if (l.few_columns_axpy_max_columns > 0) {
      EXPECT_GT(transposed, 0);
    }
    gk_set_num_threads(0);
  });
}

// At most 4 columns of C (or rows, by PathLimits' few-vector rules) against a longer other
// side, the matrix within L2, one thread: the GEMV loops, the matrix read once for all
// vectors (dot form: 4-row passes for 2 vectors, 2-row for 3 and 4 (4-row with AVX-512),
// then single rows, the last vector of K masked; vectors gathered when not contiguous;
// axpy form: a row-major C's rows stored as interleaved vectors, then halves of vectors
// and single rows). Every transpose and layout by turns, rows around the passes, K below,
// at and past the dot form's threshold and through the vector tails, alpha and beta by
// turns (beta 0 with C NaN), padded leading dimensions; the path asserted in every case
// (few_vectors_path).
TEST(Sgemm, FewVectorsReadTheMatrixOnce) {
  const gktest::WithoutMicroPath paths_below_micro;
  const std::vector<int64_t> ks = gktest::quick() ? std::vector<int64_t>{10, 16, 17, 20, 63, 279}
                                                  : std::vector<int64_t>{1, 10, 15, 16, 17, 19, 20, 31, 32, 47, 63, 64, 100, 279};
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    const bool tiny_blocks = l.tiny_blocks;
    gk_set_num_threads(1);
    int pick = 0;
    for (int64_t vectors = 1; vectors <= 4; ++vectors)
      for (int64_t rows : {7, 8, 13, 37, 64, 65, 67, 131})
        for (int64_t k : ks) {
          const bool wide = pick % 2 == 1;
          const int64_t m = wide ? vectors : rows, n = wide ? rows : vectors;
          const Case c{m, n, k, pick % 5 != 4, pick / 2 % 2 == 1, pick / 4 % 2 == 1, kAlphas[1 + pick / 8 % 2],
                       kBetas[pick / 3 % 3], int64_t(pick % 3 == 0 ? 3 : 0)};
          ++pick;
          ASSERT_TRUE(run_case(c, /*fortran=*/!c.row_major && pick % 2 == 0));
          if (!tiny_blocks || vectors == 1) continue;
          // Where no GEMV rule applies (too few rows, or in dot form K below the
          // threshold), the tiny path.
          const gk::GemmPath ran = gk::last_gemm_path();
          EXPECT_EQ(ran, few_vectors_path(l, c)) << describe(c) << " ran " << gk::path_name(ran);
        }
    gk_set_num_threads(0);
  });
}

// 2-4 columns of C against A's contiguous rows (the dot form) past half of L2, on two
// threads: the GEMV loops on two threads, not the tiny-narrow path, whose two threads ran
// slower than the GEMV on one. Row-major A plain (the few-columns rule); column-major A
// transposed (the same product on C's transpose: the few-rows rule); B either way, beta 0
// (C NaN) and 0.5, a padded leading dimension; the path asserted.
TEST(Sgemm, FewColumnsOnTwoThreadsStayOnTheGemv) {
  const Case cases[] = {{1024, 2, 1024, true, false, false, 1.0f, 0.0f, 0},
                        {2000, 4, 300, true, false, true, -1.5f, 0.5f, 3},
                        {1031, 3, 517, false, true, false, 1.0f, 0.5f, 0},
                        {1024, 4, 1024, false, true, true, 0.5f, 0.0f, 5},
                        {8000, 2, 64, true, false, false, 1.0f, 0.0f, 0}};
  int kernels = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    if (!gk::derive_blocking(ker).paths.tiny_blocks) return;  // (the rule needs the tiny paths)
    ++kernels;
    gk_set_num_threads(2);
    for (const Case& c : cases) {
      ASSERT_TRUE(run_case(c));
      const gk::GemmPath expected = c.row_major ? gk::GemmPath::GemvColumns : gk::GemmPath::GemvRows;
      EXPECT_EQ(gk::last_gemm_path(), expected) << describe(c) << " ran " << gk::path_name(gk::last_gemm_path());
    }
    gk_set_num_threads(0);
  });
  if (kernels == 0) GTEST_SKIP() << "no kernel of this CPU has the tiny paths' vector blocks";
}

// 5-8 columns of C against A's contiguous rows, A past wide_dot_min_matrix_bytes and
// within wide_dot_max_matrix_bytes: one dot-form pass (the GEMV loops) where the kernel has
// 16-float vectors. Just inside both ends of the window, and just outside them (another
// path); row-major, A plain, B either way, every column count, odd K, 1 and 2 threads,
// beta 0 (C NaN) and 0.5, padded leading dimensions; the path asserted. (Few rows of C
// against B's rows contiguous, as a column-major call with A transposed is here, take the
// dot form past L2 by gemv_serves.) The micro path, tested first, takes some of the
// window's smaller products where L2 is 1 MiB (its dots form up to L2 and 96^3
// multiply-adds: 254x5x517 NT on Zen 5): so the window is asserted with it off, and with it
// on the path is the micro one or the window's.
TEST(Sgemm, FiveToEightColumnsInOneDotPass) {
  int kernels = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits l = gk::derive_blocking(ker).paths;
    if (!l.tiny_blocks || l.wide_dot_max_vectors < 8) return;
    ++kernels;
    const int64_t k = 517, row_bytes = k * 4;
    const int64_t first = l.wide_dot_min_matrix_bytes / row_bytes + 1, last = l.wide_dot_max_matrix_bytes / row_bytes;
    int pick = 0;
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (int64_t n = 5; n <= 8; ++n)
        for (int64_t m : {first - 1, first, last, last + 1}) {
          const bool inside = m >= first && m <= last;
          const Case c{m, n, k, true, false, pick % 2 == 1, 1.5f, pick % 3 == 0 ? 0.0f : 0.5f, pick % 4};
          ++pick;
          for (bool micro : {false, true}) {
            std::optional<gktest::WithoutMicroPath> off;  // restored on every exit
            if (!micro) off.emplace();
            ASSERT_TRUE(run_case(c));
            const gk::GemmPath path = gk::last_gemm_path();
            const std::string ran = describe(c) + " ran " + gk::path_name(path) + (micro ? "" : " (micro path off)");
            if (inside && !micro)
              EXPECT_EQ(path, gk::GemmPath::GemvColumns) << ran;
            else if (inside)
              EXPECT_TRUE(path == gk::GemmPath::GemvColumns || path == gk::GemmPath::Micro) << ran;
            else
              EXPECT_NE(path, gk::GemmPath::GemvColumns) << ran;
          }
        }
    }
    gk_set_num_threads(0);
  });
  if (kernels == 0) GTEST_SKIP() << "no kernel of this CPU has 16-float vectors and the tiny paths";
}

// A GEMV's threads (asked of choose_gemm_path at two threads, row-major views): one
// vector in dot form on one thread within gemv_dot_threads_min_matrix_bytes and on two
// past it; in axpy form the same at gemv_axpy_threads_min_matrix_bytes. K = 293 and 1031,
// the matrix just inside and just past each limit, where the rows past it make more than
// one row unit.
TEST(Sgemm, GemvThreadsFollowTheirLimits) {
  gktest::for_each_kernel([](const gk::KernelInfo&) {
    gk_set_num_threads(2);
    const gk::KernelConfig& cfg = gk::active_config();
    const gk::PathLimits& l = cfg.paths;
    auto threads_of = [&](int64_t m, int64_t n, int64_t k, bool ta) {
      gk::GemmProblem p;
      p.m = m, p.n = n, p.k = k;
      const gk::MatrixView a = ta ? gk::MatrixView{nullptr, 1, m} : gk::MatrixView{nullptr, k, 1};
      const gk::GemmPathChoice choice = gk::choose_gemm_path(p, a, gk::MatrixView{nullptr, n, 1}, cfg);
      EXPECT_EQ(choice.path, gk::GemmPath::GemvColumns) << m << "x" << n << "x" << k << (ta ? " TN" : " NN");
      return choice.threads;
    };
    const std::pair<int64_t, bool> limits[] = {{l.gemv_dot_threads_min_matrix_bytes, false},
                                               {l.gemv_axpy_threads_min_matrix_bytes, true}};
    for (const auto& limit : limits)
      for (int64_t k : {293, 1031}) {
        const int64_t inside = limit.first / (4 * k), past = inside + 16;
        if (past <= gk::kGemvRowUnit) continue;  // (one row unit: one thread whatever the size; small L2s)
        EXPECT_EQ(threads_of(inside, 1, k, limit.second), 1) << inside << "x1x" << k << (limit.second ? " axpy" : " dot");
        EXPECT_EQ(threads_of(past, 1, k, limit.second), 2) << past << "x1x" << k << (limit.second ? " axpy" : " dot");
      }
    gk_set_num_threads(0);
  });
}

// A copy of `values` starting `offset` floats past a 64-byte line, NaN around it (a read
// past either end would show).
// Offsets from a 64-byte line's start: every one, or (emulated) those that give each
// vector width (4, 8 and 16 floats) a head of every parity and none.
std::vector<int64_t> line_offsets() {
  if (gktest::quick()) return {0, 1, 2, 3, 7, 12};
  std::vector<int64_t> all(16);
  for (int64_t o = 0; o < 16; ++o) all[size_t(o)] = o;
  return all;
}

struct OffsetCopy {
  std::vector<float> storage;
  float* p;
  OffsetCopy(const std::vector<float>& values, int64_t offset) : storage(values.size() + 64, gktest::kNaN) {
    p = storage.data();
    while (reinterpret_cast<uintptr_t>(p) % 64) ++p;
    p += offset;
    std::copy(values.begin(), values.end(), p);
  }
};

// Matrix lines (rows in dot form, columns in axpy form, of at least 256 floats; in axpy
// form per thread's part) whose stride is a whole number of vectors start their vector
// loads at the first aligned element, the elements before it summed apart (dot form: one
// masked vector for 2-4 vectors, scalars for one; axpy form: one vector per column from
// the part's first row, and the rows past the last whole vector one vector per column
// ending at its last row, whatever the stride). Through cblas_sgemm, one thread: row-major
// B as the matrix (transposed: dot form, 67 rows of K; not: axpy form, K lines of N) at
// every offset from a 64-byte line's start, the long side through the vector tails,
// strides that are whole vectors (aligned loads) and one that is not, lines too short, 1
// to 4 vectors, each kernel; the GEMV path asserted where the path rules name it.
TEST(Sgemm, GemvLongLinesAtEveryOffsetFromACacheLine) {
  const gktest::WithoutMicroPath paths_below_micro;
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    const bool tiny_blocks = l.tiny_blocks;
    int gemv_2_to_4 = 0;
    gk_set_num_threads(1);
    const std::pair<int64_t, int64_t> lengths_lds[] = {{1040, 1040}, {1037, 1040}, {1031, 1040},
                                                       {297, 304},   {255, 256},   {1101, 1101}};
    for (bool dot_form : {true, false})
      for (int64_t offset : line_offsets())
        for (int64_t vectors = 1; vectors <= 4; ++vectors)
          for (size_t li = 0; li < std::size(lengths_lds); ++li) {
            // The long side is K in dot form and N in axpy form, whose K is short (9: each
            // line added directly; 37: in blocks through the partial sums).
            const int64_t length = lengths_lds[li].first, ld = lengths_lds[li].second;
            const int64_t m = vectors, n = dot_form ? 67 : length;
            const int64_t k = dot_form ? length : (offset % 2 ? 37 : 9);
            const float alpha = kAlphas[1 + (offset + li) % 2], beta = kBetas[(offset + vectors + li) % 3];
            Operand a(m, k, 0, true, 101), cm(m, n, 0, true, 303);
            Operand b(dot_form ? n : k, dot_form ? k : n, ld - length, true, 202);
            ASSERT_EQ(b.ld, ld);
            if (beta == 0.0f) cm.fill(gktest::kNaN);
            const Operand c0 = cm;
            const OffsetCopy matrix(b.data, offset);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, dot_form ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                        alpha, a.data.data(), int(a.ld), matrix.p, int(b.ld), beta, cm.data.data(), int(cm.ld));
            ASSERT_TRUE(gktest::matches_reference(a, false, b, dot_form, alpha, beta, c0, cm, k))
                << (dot_form ? "dot" : "axpy") << " form, offset " << offset << ", ld " << b.ld;
            const gk::GemmPath ran = gk::last_gemm_path();
            if (m == 1) {
              EXPECT_EQ(ran, gk::GemmPath::GemvRows) << n << "x" << k;
            } else if (tiny_blocks) {  // the few-vector rules, where they serve
              EXPECT_EQ(ran, few_vectors_path(l, m, n, k, false, dot_form))
                  << m << "x" << n << "x" << k << " ran " << gk::path_name(ran);
            }
            gemv_2_to_4 += m > 1 && ran == gk::GemmPath::GemvRows;
          }
    if (tiny_blocks) {
      EXPECT_GT(gemv_2_to_4, 0) << "no case of 2-4 vectors ran the GEMV loops";
    }
    gk_set_num_threads(0);
  });
}

// Y = alpha * M X + beta * Y0 (Y(i, v) at y[i * incy + v * ldy]) against a double
// reference, within (cols + 4) ulps of the terms' magnitudes.
testing::AssertionResult gemv_matches(int64_t rows, int64_t cols, int64_t vectors, float alpha, const gk::MatrixView& mat,
                                      const gk::MatrixView& xv, float beta, const std::vector<float>& y0,
                                      const std::vector<float>& y, int64_t incy, int64_t ldy) {
  for (int64_t v = 0; v < vectors; ++v)
    for (int64_t i = 0; i < rows; ++i) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        const double prod = double(mat.at(i, j)) * xv.at(j, v);
        exact += prod;
        magnitude += std::fabs(prod);
      }
      exact *= alpha;
      magnitude *= alpha;
      const size_t at = size_t(i * incy + v * ldy);
      if (beta != 0.0f) {
        exact += double(beta) * y0[at];
        magnitude += std::fabs(double(beta) * y0[at]);
      }
      const double got = y[at];
      if (!(std::fabs(got - exact) <= (cols + 4) * double(FLT_EPSILON) * magnitude + 1e-30))
        return testing::AssertionFailure() << "Y(" << i << ", " << v << ") = " << got << ", expected " << exact;
    }
  return testing::AssertionSuccess();
}

// The dot form's passes take a row from each of their lanes (a part's rows split into as
// many runs as a pass has rows: 4 with one vector, 2-4 with more), the rows past the last
// whole pass one at a time. On the GEMV loops directly, every ISA's variant, 1 and 2
// threads: 1-40 rows and 97 (on two threads one part: the parts are whole 128-row units),
// 129-135 and 259-263 (a second part starting at row 128 with 1-7 and 131-135 rows), so
// each part has 0-3 rows past its passes and lanes of 0 to 33 rows; K 3 and 7 (shorter
// than a vector), 8-70 at odd points, 257 and 1037 (stride 1040: aligned starts), the
// matrix at a few offsets from a line with NaN around it; 1-11 vectors (5-8 in one pass
// with 16-float vectors, 9-11 as 8 and 1-3); beta 0 over NaN and 0.5 by turns.
TEST(Sgemm, GemvDotRowsInLanes) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const gk::KernelConfig cfg = gk::derive_blocking(ker);
    std::vector<int64_t> row_counts;
    for (int64_t r = 1; r <= 40; ++r) row_counts.push_back(r);
    for (int64_t r : {97, 129, 130, 131, 132, 133, 134, 135, 259, 260, 261, 262, 263}) row_counts.push_back(r);
    int pick = 0;
    for (int64_t cols : {3, 7, 8, 13, 31, 37, 70, 257, 1037}) {
      const int64_t stride = cols < 257 ? cols + 1 : 1040;
      for (int64_t rows : row_counts)
        for (int64_t vectors = 1; vectors <= 11; ++vectors)
          for (int threads : {1, 2}) {
            ++pick;
            if (gktest::quick() ? pick % 7 != 0 : pick % 3 == 0) continue;
            const std::vector<float> values = gktest::random_vector(size_t(stride * rows), 7);
            const OffsetCopy matrix(values, pick % 4);
            const gk::MatrixView mat{matrix.p, stride, 1};
            const std::vector<float> x = gktest::random_vector(size_t(cols * vectors), 11);
            const gk::MatrixView xv{x.data(), 1, cols};
            const float beta = pick / 4 % 2 ? 0.5f : 0.0f;
            std::vector<float> y = gktest::random_vector(size_t(rows * vectors), 13);
            if (beta == 0.0f) std::fill(y.begin(), y.end(), gktest::kNaN);
            const std::vector<float> y0 = y;
            ASSERT_TRUE(gk::gemv(rows, cols, vectors, 1.5f, mat, xv, beta, y.data(), 1, rows, threads, cfg));
            ASSERT_TRUE(gemv_matches(rows, cols, vectors, 1.5f, mat, xv, beta, y0, y, 1, rows))
                << rows << " rows, " << cols << " columns, " << vectors << " vectors, " << threads << " threads, offset "
                << pick % 4;
          }
    }
  });
}

// The same on the GEMV loops directly, for every ISA's variant (the portable one too,
// which the path rules give few vectors only past L2) on two threads, each thread's part
// starting its aligned loads on its own: dot form, 300 rows of 1037 (stride 1040) in two
// parts, 1 to 4 vectors; axpy form, 4200 rows (stride 4208; parts of 2048 and 2152) and
// 701 (stride 704; parts of 384 and 317: at some offset, for every vector width, a part
// with a head and no tail, one with both, one with a tail alone), by 9 and 37 columns
// (added directly; in blocks through the partial sums), 1 to 4, 7 and 16 vectors, Y by
// vector or interleaved (a row-major C's rows); every offset, beta 0 over NaN and 0.5.
// Then infinities in every column of the first vector of a row one float past a line, so
// that for each vector width the lanes the head's masked vector zeroes hold one: they
// must count once (+inf, not NaN).
TEST(Sgemm, GemvLoopsAlignEachThreadsPart) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const gk::KernelConfig cfg = gk::derive_blocking(ker);
    for (int form = 0; form < 3; ++form)
      for (int64_t offset : line_offsets())
        for (int64_t vectors : {1, 2, 3, 4, 7, 16})
          for (int64_t axpy_cols : {9, 37}) {
            const bool dot_form = form == 0, short_columns = form == 2;
            if (dot_form && (vectors > 4 || axpy_cols == 37)) continue;
            const int64_t rows = dot_form ? 300 : short_columns ? 701 : 4200, cols = dot_form ? 1037 : axpy_cols;
            const int64_t stride = dot_form ? 1040 : short_columns ? 704 : 4208;
            const std::vector<float> values = gktest::random_vector(size_t(stride * (dot_form ? rows : cols)), 7);
            const OffsetCopy matrix(values, offset);
            const gk::MatrixView mat = dot_form ? gk::MatrixView{matrix.p, stride, 1} : gk::MatrixView{matrix.p, 1, stride};
            // X (cols x vectors): in dot form each vector contiguous, in axpy form by column.
            const std::vector<float> x = gktest::random_vector(size_t(cols * vectors), 11);
            const gk::MatrixView xv = dot_form ? gk::MatrixView{x.data(), 1, cols} : gk::MatrixView{x.data(), vectors, 1};
            const float beta = offset % 2 ? 0.5f : 0.0f, alpha = 1.5f;
            // Y(i, v) at y[i * incy + v * ldy].
            const bool interleaved = !dot_form && (offset + vectors) % 2 == 1;
            const int64_t incy = interleaved ? vectors : 1, ldy = interleaved ? 1 : rows;
            std::vector<float> y = gktest::random_vector(size_t(rows * vectors), 13);
            if (beta == 0.0f) std::fill(y.begin(), y.end(), gktest::kNaN);
            const std::vector<float> y0 = y;
            ASSERT_TRUE(gk::gemv(rows, cols, vectors, alpha, mat, xv, beta, y.data(), incy, ldy, 2, cfg));
            ASSERT_TRUE(gemv_matches(rows, cols, vectors, alpha, mat, xv, beta, y0, y, incy, ldy))
                << (dot_form ? "dot" : "axpy") << " form, " << rows << " rows, offset " << offset << ", " << vectors
                << " vectors, " << cols << " columns";
          }
    const int64_t rows = 67, cols = 1040;
    for (int64_t vectors = 1; vectors <= 4; ++vectors) {
      std::vector<float> values(size_t(rows * cols), 0.5f), x(size_t(cols * vectors), 0.25f);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < 16; ++j) values[size_t(i * cols + j)] = std::numeric_limits<float>::infinity();
      for (int64_t v = 0; v < vectors; ++v)
        for (int64_t j = 0; j < 16; ++j) x[size_t(v * cols + j)] = std::numeric_limits<float>::infinity();
      const OffsetCopy matrix(values, 1);
      std::vector<float> y(size_t(rows * vectors), gktest::kNaN);
      ASSERT_TRUE(gk::gemv(rows, cols, vectors, 1.0f, gk::MatrixView{matrix.p, cols, 1}, gk::MatrixView{x.data(), 1, cols},
                           0.0f, y.data(), 1, rows, 1, cfg));
      for (size_t e = 0; e < y.size(); ++e)
        ASSERT_EQ(y[e], std::numeric_limits<float>::infinity()) << vectors << " vectors, element " << e;
    }
  });
}

// The dot form's last vector ends at the row's end and sets the lanes already summed to
// zero, in the matrix's row as well as in the vectors: infinities among those lanes (in A
// and in B) must count once (C = +inf), not also as 0 x inf (NaN). Row-major NN, 2-4 columns, K = 17
// and 40 (with 16-float vectors the last one overlaps 15 and 8 summed lanes, with 8-float
// ones 7 at K = 17), infinities in the last 15 columns of A but its last and in the same
// rows of B, each kernel.
TEST(Sgemm, FewVectorsDotTailCountsInfinitiesOnce) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const bool tiny_blocks = gk::derive_blocking(ker).paths.tiny_blocks;
    gk_set_num_threads(1);
    for (int64_t n = 2; n <= 4; ++n)
      for (int64_t k : {17, 40}) {
        const int64_t m = 67;
        std::vector<float> a(size_t(m * k), 0.5f), b(size_t(k * n), 0.25f), c(size_t(m * n), gktest::kNaN);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t p = k - 16; p < k - 1; ++p) a[size_t(i * k + p)] = std::numeric_limits<float>::infinity();
        for (int64_t p = k - 16; p < k - 1; ++p)
          for (int64_t j = 0; j < n; ++j) b[size_t(p * n + j)] = std::numeric_limits<float>::infinity();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a.data(), int(k), b.data(),
                    int(n), 0.0f, c.data(), int(n));
        if (tiny_blocks) {
          EXPECT_EQ(gk::last_gemm_path(), gk::GemmPath::GemvColumns) << m << "x" << n << "x" << k;
        }
        for (size_t e = 0; e < c.size(); ++e)
          ASSERT_EQ(c[e], std::numeric_limits<float>::infinity()) << m << "x" << n << "x" << k << " element " << e;
      }
    gk_set_num_threads(0);
  });
}

// A GEMM with a few rows (or columns) against a matrix that outgrows L2 runs as that
// matrix times R vectors (the GEMV path) when the matrix's columns are contiguous, and for
// few rows of C also when B's columns are (the dot form; row-major: every few-row case is
// GemvRows); past 4 columns against A's contiguous rows, other paths, but for 5-8
// columns with 16-float vectors and A within the window of wide_dot_serves (on one
// thread, up to 4 vectors, the GEMV loops: FewVectorsReadTheMatrixOnce). Every transpose and layout,
// R from 2 to kGemvMaxVectors, rows and columns with tails, 1 and 2 threads.
TEST(Sgemm, FewRowsOrColumnsAgainstALargeMatrix) {
  const int64_t l2 = gk::caches().l2;
  const int64_t k = 1031;
  std::vector<int64_t> vector_counts = {2, 3, 5, 8, 12, gk::kGemvMaxVectors};
  if (gktest::quick()) vector_counts = {2, 5, 12};
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (int64_t r : vector_counts) {
        // Just past the size where the streamed path takes over.
        const int64_t wide = l2 * std::max<int64_t>(1, r / 4) / (k * 4) + r + 1;
        for (bool rm : {false, true})
          for (bool ta : {false, true})
            for (bool tb : {false, true}) {
              ASSERT_TRUE(run_case({r, wide, k, rm, ta, tb, -1.5f, 0.0f, 1}));
              if (rm) {
                EXPECT_EQ(gk::last_gemm_path(), gk::GemmPath::GemvRows) << r << " rows, tb " << tb;
              }
              ASSERT_TRUE(run_case({wide, r, k, rm, ta, tb, 1.0f, 0.5f, 0}));
              if (rm && r > 4) {
                const gk::PathLimits& l = gk::active_config().paths;
                const int64_t bytes = wide * k * 4;
                const bool wide_dot = l.tiny_blocks && r <= l.wide_dot_max_vectors && bytes > l.wide_dot_min_matrix_bytes &&
                                      bytes <= l.wide_dot_max_matrix_bytes;
                EXPECT_EQ(gk::last_gemm_path() == gk::GemmPath::GemvColumns, ta || wide_dot) << r << " columns";
              }
            }
      }
    }
    gk_set_num_threads(0);
  });
}

// The driver itself with tiny blocking: many jc/pc/ic blocks and balanced tails, the
// epilogue applied once per element, and the thread grid.
TEST(Driver, TinyBlockingManyBlocksWithEpilogue) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const int64_t m = 5 * ker.mr + 3, n = 7 * ker.nr + 5, k = 47;
    std::vector<float> a = gktest::random_vector(size_t(m * k), 1);
    std::vector<float> b = gktest::random_vector(size_t(k * n), 2);
    std::vector<float> bias = gktest::random_vector(size_t(m), 3);
    for (int threads : {1, 2, 3}) {
      for (int64_t kc : {int64_t{5}, int64_t{16}}) {
        std::vector<float> c(size_t(m * n), gktest::kNaN);
        const gk::PlainA pa({a.data(), k, 1});
        const gk::PlainB pb({b.data(), 1, k});  // B stored column by column: transposing pack
        gk::GemmProblem p;
        p.m = m, p.n = n, p.k = k, p.alpha = 1.0f, p.beta = 0.0f, p.a = &pa, p.b = &pb;
        p.c = c.data(), p.rs_c = n;
        p.epilogue.bias = bias.data(), p.epilogue.bias_mode = gk::BiasMode::PerRow;
        p.epilogue.act = gk::Activation::Relu;
        gk::KernelConfig cfg = gk::derive_blocking(ker);
        cfg.mc = 2 * ker.mr, cfg.kc = kc, cfg.nc = 2 * ker.nr;
        gk::gemm_packed(p, cfg, threads);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double v = bias[i];
            for (int64_t q = 0; q < k; ++q) v += double(a[i * k + q]) * b[j * k + q];
            ASSERT_NEAR(c[i * n + j], std::max(v, 0.0), 1e-4)
                << "i=" << i << " j=" << j << " threads=" << threads << " kc=" << kc;
          }
      }
    }
  });
}

// When the per-panel driver reads B's rows in place (b_panel_rows_in_place): a panel past
// half of L1, rows spread over L2's sets, the rows of B and C within the TLB's reach.
TEST(Driver, PanelRowsInPlaceOnlyWhereTheyStayInCache) {
  gk::PathLimits l;
  l.b_in_place_min_panel_bytes = 24 << 10, l.b_in_place_max_span_bytes = 4608 << 10;
  l.l2_set_period_bytes = 128 << 10;
  const int nr = 32;
  EXPECT_TRUE(gk::b_panel_rows_in_place(l, 256, nr, 2000, 64 * 2000));   // 8000 bytes apart
  EXPECT_FALSE(gk::b_panel_rows_in_place(l, 128, nr, 2000, 64 * 2000));  // 16 KiB: stays in L1
  EXPECT_TRUE(gk::b_panel_rows_in_place(l, 192, nr, 2000, 64 * 2000));   // 24 KiB: half of L1
  EXPECT_FALSE(gk::b_panel_rows_in_place(l, 256, nr, 2048, 64 * 2048));  // 8 KiB: 16 rows per L2 set
  EXPECT_TRUE(gk::b_panel_rows_in_place(l, 192, nr, 2048, 64 * 2048));   // 12 rows per set
  EXPECT_FALSE(gk::b_panel_rows_in_place(l, 208, nr, 2048, 64 * 2048));  // 13
  EXPECT_TRUE(gk::b_panel_rows_in_place(l, 256, nr, 768, 64 * 768));     // 3 KiB: 2 rows per set
  EXPECT_FALSE(gk::b_panel_rows_in_place(l, 640, nr, 2000, 0));          // B's rows alone 5.1 MB
  EXPECT_TRUE(gk::b_panel_rows_in_place(l, 576, nr, 2000, 0));           // 4.6 MB, within 4.7
  EXPECT_FALSE(gk::b_panel_rows_in_place(l, 576, nr, 2000, 64 * 2000));  // with C's strip, past it
  l.b_in_place_min_panel_bytes = 0;
  EXPECT_FALSE(gk::b_panel_rows_in_place(l, 256, nr, 2000, 64 * 2000));  // the kernel never reads in place
}

// The per-panel driver (M within one MC block) with B's rows a power of two apart (4 KiB:
// packed), near it (in place where the kernel reads B in place) and padded, and a last
// panel part-wide; K one whole KC block and two and a part (balanced halves); against the
// double reference. Which way each panel goes is b_panel_rows_in_place's (tested above).
TEST(Driver, PerPanelWithBsRowsPackedOrInPlace) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const gk::KernelConfig cfg = gk::derive_blocking(ker);
    for (int64_t n : {int64_t{1024}, int64_t{1000}, int64_t{1541}})
      for (int64_t k : {cfg.kc, 2 * cfg.kc + 29})
        for (int64_t extra_ld : {int64_t{0}, int64_t{16}}) {
          Case c{std::min<int64_t>(std::max<int64_t>(2 * ker.mr + 3, 37), cfg.mc), n, k, true, false, false, 1.0f, 0.5f, extra_ld};
          ASSERT_TRUE(run_case(c));
          EXPECT_EQ(gk::last_gemm_path(), gk::GemmPath::PackedPerPanel) << describe(c);
        }
  });
}

// The in-place-A path (src/gemm/in_place_a.cpp): few columns, A's rows read in place by
// the pointwise kernels. Rows past the last whole tile (4-row calls where the kernel has
// them, one-row calls) and across the 12-row thread shares, columns around the 8/16/24-wide panels up to the limit,
// K at its lower bound (max(128, 2N)), odd, over two KC blocks (balanced halves, not
// multiples of 8), and long enough that the product is past the small paths' size;
// row-major A (B plain or transposed) and column-major with B's rows as the inner A; ld
// padding, alpha/beta with NaN C, 1 and 2 threads, each kernel. Where the kernel has
// pointwise kernels (with AVX-512, past 8 columns) every case runs the path but those
// small enough for the tiny or small path, or for dot products (row-major NT, few columns,
// A within L1), which choose_gemm_path tries first, and every M x N runs it with some K;
// elsewhere none does. The micro path off.
TEST(Sgemm, InPlaceAEveryRowAndColumnEdge) {
  const gktest::WithoutMicroPath paths_below_micro;
  const std::vector<int64_t> columns =
      gktest::quick() ? std::vector<int64_t>{2, 9, 25, 49} : std::vector<int64_t>{2, 8, 9, 16, 17, 24, 25, 32, 33, 40, 49, 57, 72, 100, 256};
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::KernelConfig cfg = gk::derive_blocking(ker);
    const double small = cfg.paths.small_multiply_adds;
    int index = 0;
    for (int64_t n : columns)
      for (int64_t m : {12, 20, 23, 61}) {
        bool ran_in_place = false, all_few_vectors = true;
        for (int64_t k : {std::max<int64_t>(128, 2 * n) + 3, 2 * cfg.kc + 3,
                          std::max<int64_t>(128, std::max<int64_t>(2 * n, int64_t(small / double(m * n)))) + 3}) {
          const int pick = index++;
          const bool rm = pick % 3 != 2, tb = pick % 2 == 1;
          Case c{m, n, k, rm, false, tb && rm, kAlphas[1 + pick % 2], kBetas[pick % 3], int64_t(pick % 4 == 0 ? 3 : 0)};
          if (!rm) std::swap(c.m, c.n);  // column-major: C^T = B^T A^T, B's rows are the inner A
          const bool avx512_few_columns = ker.simd == gk::SimdLevel::Avx512 && n <= 8;  // the packed path's
          const bool expected = cfg.paths.in_place_a_kernels && !avx512_few_columns;
          gk_set_num_threads(1 + pick % 2);
          ASSERT_TRUE(run_case(c, /*fortran=*/!rm && pick % 4 == 1));
          const gk::GemmPath ran = gk::last_gemm_path();
          const bool small_path = (ran == gk::GemmPath::Tiny || ran == gk::GemmPath::Small) && double(m) * n * k <= small;
          const gk::PathLimits& l = cfg.paths;
          const bool dots = ran == gk::GemmPath::GemvColumns && rm && tb && n <= l.dot_max_vectors &&
                            k >= l.dot_min_k && m * k * 4 <= l.dot_max_matrix_bytes;
          // (Or, on one thread, the few-vector GEMV loops.)
          const gk::GemmPath few_vectors_choice = few_vectors_path(l, c);
          const bool few_vectors = few_vectors_choice != gk::GemmPath::Tiny && ran == few_vectors_choice;
          all_few_vectors &= few_vectors_choice != gk::GemmPath::Tiny;
          ran_in_place |= ran == gk::GemmPath::InPlaceA;
          EXPECT_TRUE(expected ? ran == gk::GemmPath::InPlaceA || small_path || dots || few_vectors
                               : ran != gk::GemmPath::InPlaceA)
              << describe(c) << " ran " << gk::path_name(ran);
        }
        // (Unless the few-vector loops may take every K.)
        const bool expected = cfg.paths.in_place_a_kernels && !(ker.simd == gk::SimdLevel::Avx512 && n <= 8);
        if (!all_few_vectors) {
          EXPECT_EQ(ran_in_place, expected) << ker.name << " " << m << " x " << n << ": whether some K ran the in-place-A path";
        }
      }
    gk_set_num_threads(0);
  });
}

// The no-pack path, B read in place and B packed, compared with the packed driver.
TEST(Driver, SmallPathMatchesPackedPath) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const gk::KernelConfig cfg = gk::derive_blocking(ker);
    for (int64_t m : {int64_t{1}, int64_t{ker.mr}, int64_t{3 * ker.mr + 1}})
      for (int64_t n : {int64_t{ker.nr}, int64_t{2 * ker.nr + 3}})
        for (bool b_contiguous_rows : {true, false}) {
          const int64_t k = 29;
          std::vector<float> a = gktest::random_vector(size_t(m * k), 4);
          std::vector<float> b = gktest::random_vector(size_t(k * n), 5);
          const gk::MatrixView av{a.data(), k, 1};
          const gk::MatrixView bv = b_contiguous_rows ? gk::MatrixView{b.data(), n, 1}
                                                      : gk::MatrixView{b.data(), 1, k};
          const gk::PlainA pa(av);
          const gk::PlainB pb(bv);
          std::vector<float> c_small(size_t(m * n), 2.0f), c_packed = c_small;
          gk::GemmProblem p;
          p.m = m, p.n = n, p.k = k, p.alpha = -1.5f, p.beta = 0.5f, p.a = &pa, p.b = &pb;
          p.rs_c = n;
          p.c = c_small.data();
          gk::gemm_small(p, av, bv, cfg);
          p.c = c_packed.data();
          gk::gemm_packed(p, cfg, 1);
          for (size_t i = 0; i < c_small.size(); ++i) ASSERT_NEAR(c_small[i], c_packed[i], 1e-4);
        }
  });
}

// The small problems (at most kSmallMultiplyAdds) through cblas_sgemm, each kernel
// forced: on x86-64 the kernels take the unpacked tiny path (src/gemm/tiny.cpp), whose
// blocks are 1-4 rows x 1-3 8-float vectors (AVX2) or 1-8 rows x 1-3 16-float vectors or
// one 8-float vector of at most 8 columns (AVX-512), the last vector masked, with a second
// accumulator set when a block is one vector wide (but for 16-float blocks of 8 rows),
// whole blocks one after the other in one call, then the rest. Every row remainder, several
// whole blocks, column counts around each vector and the 24 / 16 + 16 split, odd and even
// K, and K past the no-pack path's limit; layouts, transposes (a transposed B is gathered
// first, or with A transposed too and a long K the product runs transposed), alpha, beta
// and padded leading dimensions by turns.
TEST(Sgemm, TinyPathEveryBlockEdge) {
  const gktest::WithoutMicroPath paths_below_micro;
  const bool q = gktest::quick();
  const std::vector<int64_t> rows =
      q ? std::vector<int64_t>{1, 3, 4, 5, 7, 21} : std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 21, 31};
  const std::vector<int64_t> cols = q ? std::vector<int64_t>{1, 7, 9, 17, 25, 33}
                                      : std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 41, 48, 49};
  std::vector<std::array<int64_t, 3>> shapes;
  for (int64_t m : rows)
    for (int64_t n : cols)
      for (int64_t k : {1, 2, 3, 8, 17}) shapes.push_back({m, n, k});
  for (int64_t k : {1025, 3001}) shapes.insert(shapes.end(), {{5, 9, k}, {2, 2, 10 * k}, {7, 17, k}, {4, 24, k}});
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    gk_set_num_threads(1);
    int index = 0;
    for (const auto& [m, n, k] : shapes) {
      const int pick = index++;
      const Case c{m, n, k, pick % 2 == 0, pick / 2 % 2 == 1, pick / 4 % 2 == 1, kAlphas[1 + pick % 2],
                   kBetas[pick / 3 % 3], int64_t(pick % 5 == 0 ? 3 : 0)};
      ASSERT_TRUE(run_case(c, /*fortran=*/!c.row_major && pick % 7 == 0));
      // One row or column of C streams the other operand (GEMV) on every ISA.
      const gk::GemmPath ran = gk::last_gemm_path();
      // (At most 4 rows or columns: the GEMV rules first, see few_vectors_path.)
      if (m == 1 || n == 1) {
        EXPECT_TRUE(ran == gk::GemmPath::GemvRows || ran == gk::GemmPath::GemvColumns)
            << describe(c) << " ran " << gk::path_name(ran);
      } else if (kHasTinyBlocks && ker.simd != gk::SimdLevel::Baseline) {
        EXPECT_EQ(ran, few_vectors_path(l, c)) << describe(c) << " ran " << gk::path_name(ran);
      } else {
        EXPECT_NE(ran, gk::GemmPath::Tiny) << describe(c);
      }
    }
  });
  gk_set_num_threads(0);
}

// A's and B's columns contiguous (row-major TT, column-major TT) with K at least 3 M from
// 16 rows, A within L2: the tiny path computes C^T = B^T A^T into a staged buffer (nothing
// gathered) and adds it back transposed in 8 x 8 blocks, the edges float by float. Rows and
// columns around the 8 x 8 blocks and the kernel's row blocks, K at the threshold and past
// it, alpha, beta (0 with C NaN: C not read) for each K, padded leading dimensions; on two
// threads, the tiny-narrow path's products of up to 24 columns (row blocks of C^T shared).
// Where K is under 3 M (or M under 16) B is gathered as before; both run the tiny paths
// (one column of C: the GEMV).
TEST(Sgemm, TinyPathTransposedProductAddedBack) {
  const gktest::WithoutMicroPath paths_below_micro;
  const std::vector<int64_t> rows = gktest::quick() ? std::vector<int64_t>{16, 23} : std::vector<int64_t>{15, 16, 17, 23, 24, 40};
  const std::vector<int64_t> cols = gktest::quick() ? std::vector<int64_t>{5, 13, 24} : std::vector<int64_t>{1, 2, 7, 8, 9, 13, 16, 17, 24, 31};
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    int pick = 0;
    std::vector<std::array<int64_t, 3>> shapes;
    for (int64_t m : rows)
      for (int64_t n : cols)
        for (int64_t k : {3 * m - 1, 3 * m, 3 * m + 5}) shapes.push_back({m, n, k});
    shapes.insert(shapes.end(), {{64, 24, 600}, {96, 20, 600}});  // past the small products: two threads
    for (const auto& [m, n, k] : shapes) {
      const bool rm = pick % 2 == 0;
      Case c{m, n, k, rm, true, true, kAlphas[1 + pick / 2 % 2], kBetas[pick / 3 % 3], int64_t(pick % 4 == 3 ? 2 : 0)};
      if (!rm) std::swap(c.m, c.n);  // column-major TT: the row-stored product is C^T = B^T A^T of m x n
      gk_set_num_threads(2);  // the small products take one thread whatever the setting
      ++pick;
      ASSERT_TRUE(run_case(c, /*fortran=*/!rm && pick % 5 == 0));
      if (!l.tiny_blocks) continue;
      const gk::GemmPath ran = gk::last_gemm_path();
      if (n == 1) {  // one column of C: A streamed once (GEMV)
        EXPECT_EQ(ran, gk::GemmPath::GemvColumns) << describe(c);
      } else if (double(m) * n * k > l.small_multiply_adds) {
        EXPECT_EQ(ran, gk::GemmPath::TinyNarrow) << describe(c) << " ran " << gk::path_name(ran);
      } else {
        EXPECT_TRUE(ran == gk::GemmPath::Tiny || ran == gk::GemmPath::TinyNarrow || ran == few_vectors_path(l, c))
            << describe(c) << " ran " << gk::path_name(ran);
      }
    }
  });
  gk_set_num_threads(0);
}

// At most one tiny row block (8 rows with AVX-512, 4 with AVX2) with B's rows contiguous
// runs the tiny path at any size on one thread: B read once, in place. Every row count up
// to a block and past it, each product past the small ones, columns ending in a masked
// 16-float vector, two vectors and the 32 + 24 split; row-major with A plain or
// transposed, and column-major (A not transposed: the row-stored B); alpha and beta by
// turns (beta 0 with C NaN), padded leading dimensions. Where a GEMV rule comes first (one
// row, a few rows, B past L2) that path runs; with B's columns contiguous (row-major,
// B transposed) never the tiny path.
TEST(Sgemm, OneTinyRowBlockAnySize) {
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    gk_set_num_threads(1);
    int pick = 0;
    const int64_t k = 400;
    for (int64_t m = 1; m <= 9; ++m)
      for (int64_t tail : {5, 27, 56}) {
        const int64_t n = (int64_t(l.small_multiply_adds / double(m * k)) + 48) / 48 * 48 + tail;
        ASSERT_GT(double(m) * n * k, l.small_multiply_adds);
        const int variant = pick % 4;  // row-major NN, TN, NT; column-major
        const bool b_rows_contiguous = variant != 2;
        Case c{m, n, k, variant != 3, variant == 1, variant == 2, kAlphas[1 + pick / 2 % 2], kBetas[pick % 3],
               int64_t(pick % 5 == 4 ? 3 : 0)};
        if (!c.row_major) c = {n, m, k, false, false, pick % 8 == 7, c.alpha, c.beta, c.extra_ld};
        ++pick;
        ASSERT_TRUE(run_case(c));
        const gk::GemmPath ran = gk::last_gemm_path();
        if (!l.tiny_blocks || m > l.tiny_block_rows || !b_rows_contiguous) {
          EXPECT_NE(ran, gk::GemmPath::Tiny) << describe(c);
          continue;
        }
        // The row-stored problem: m x n, A transposed for row-major TN and column-major NT.
        const bool ta = c.row_major ? c.ta : c.tb;
        const bool b_past_l2 = n * k * 4 > l.gemv_min_matrix_bytes * std::max<int64_t>(1, m / 4);
        const gk::GemmPath want = m == 1 || b_past_l2 ? gk::GemmPath::GemvRows : few_vectors_path(l, m, n, k, ta, false);
        EXPECT_EQ(ran, want) << describe(c) << " ran " << gk::path_name(ran);
      }
    gk_set_num_threads(0);
  });
}

// Few columns at any M (the tiny-narrow path): the unpacked path with its 4-row blocks
// split between threads, every column count mod 8 up to one block, K short and long, each
// layout and transpose by turns, 1 and 2 threads. A case the path does not run took one
// that choose_gemm_path tries first (GEMV, tiny on one thread, A in place); at least a
// third of the cases run it where the tiny blocks exist, none elsewhere.
TEST(Sgemm, NarrowProductsManyRowsAnyThreads) {
  const bool q = gktest::quick();
  const int64_t m = q ? 901 : 1001;  // quick: most cases still past the tiny path's 96^3 multiply-adds
  int index = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const bool tiny_blocks = kHasTinyBlocks && ker.simd != gk::SimdLevel::Baseline;
    int cases = 0, narrow = 0;
    for (int64_t n : {2, 7, 11, 17, 24})
      for (int64_t k : {5, 108, q ? 150 : 333}) {
        const int pick = index++;
        gk_set_num_threads(1 + pick % 2);
        Case c{m, n, k, true, pick % 3 != 0, pick % 4 == 1, kAlphas[1 + pick % 2], kBetas[pick % 3], int64_t(pick % 5 == 0 ? 3 : 0)};
        if (pick % 6 == 5) {  // column-major: the row-stored problem is C^T = B^T A^T, n columns
          c.row_major = false;
          std::swap(c.m, c.n);
          std::swap(c.ta, c.tb);
        }
        ASSERT_TRUE(run_case(c, /*fortran=*/!c.row_major && pick % 4 == 0));
        const gk::GemmPath ran = gk::last_gemm_path();
        ++cases, narrow += ran == gk::GemmPath::TinyNarrow;
        const bool tried_first = ran == gk::GemmPath::GemvColumns || ran == gk::GemmPath::GemvRows ||
                                 ran == gk::GemmPath::Tiny || ran == gk::GemmPath::InPlaceA;
        EXPECT_TRUE(tiny_blocks ? ran == gk::GemmPath::TinyNarrow || tried_first : ran != gk::GemmPath::TinyNarrow)
            << describe(c) << " ran " << gk::path_name(ran);
      }
    if (tiny_blocks) {
      EXPECT_GE(3 * narrow, cases) << ker.name << ": the tiny-narrow path ran " << narrow << " of " << cases;
    }
  });
  gk_set_num_threads(0);
}

// Few rows of C against B's rows in place (the few-rows-b-in-place path): every row count
// to 17, row-major (B's rows) and column-major (op(A)^T's rows: a layer on a few tokens),
// whole panels and a partial last one (packed), K in several blocks, 1 and 2 threads,
// beta 0 over a NaN C, 1 and 0.5, sgemm_ too; on each x86-64 SIMD kernel whose panel rows
// are whole cache lines (32 or 16 columns) the path must run.
TEST(Sgemm, FewRowsAgainstBsRowsInPlaceEveryCount) {
  int pick = 0;
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    int in_place = 0;
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (int64_t rows = 1; rows <= 17; ++rows) {
        ++pick;
        const int64_t wide = (pick % 2 ? 3 : 12) * ker.nr + ((pick / 3) % 2 ? 5 : 0), k = 700;
        Case c{rows, wide, k, true, pick % 4 == 1, false, kAlphas[1 + pick % 2], kBetas[(pick / 2) % 3],
               int64_t(pick % 5 == 0 ? 3 : 0)};
        if (pick % 2 == 0) {  // column-major: the row-stored problem's rows are C's columns
          c.row_major = false;
          std::swap(c.m, c.n);
          c.ta = false, c.tb = pick % 4 == 0;
        }
        ASSERT_TRUE(run_case(c, /*fortran=*/!c.row_major && (pick / 4) % 2 == 0)) << describe(c);
        in_place += gk::last_gemm_path() == gk::GemmPath::FewRowsBInPlace;
      }
    }
    if (kHasTinyBlocks && ker.simd != gk::SimdLevel::Baseline && ker.nr % 16 == 0) {
      EXPECT_GT(in_place, 0) << ker.name << ": the few-rows-b-in-place path never ran";
    }
  });
  gk_set_num_threads(0);
}

// The tiny and micro paths load the operands' rows and C's through lane masks: nothing
// past an operand is read or written. Each operand ends where a PROT_NONE page begins, so a
// stray access faults (the sanitizers do not see masked vector loads). Every transpose
// pair, K 1 (one masked lane of a dot product) and below and past the micro path's sets of
// accumulators; with the micro path (asserted to run) and without (the tiny and GEMV paths
// beneath it).
TEST(Sgemm, TinyAndMicroPathsStayInsideTheirOperands) {
  gk_set_num_threads(1);
  // Row-major C (m x n) = op(A) op(B) + beta * 2, against the double reference.
  int micro_runs = 0;
  const auto check = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, float beta) {
    gktest::GuardedFloats a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n));
    if (!a.data() || !b.data() || !c.data()) return;
    const std::vector<float> av = gktest::random_vector(a.size(), 11), bv = gktest::random_vector(b.size(), 12);
    std::copy(av.begin(), av.end(), a.data());
    std::copy(bv.begin(), bv.end(), b.data());
    std::fill(c.data(), c.data() + c.size(), beta == 0.0f ? gktest::kNaN : 2.0f);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                1.0f, a.data(), int(ta ? m : k), b.data(), int(tb ? k : n), beta, c.data(), int(n));
    micro_runs += gk::last_gemm_path() == gk::GemmPath::Micro;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double exact = beta * 2.0, magnitude = std::fabs(exact);
        for (int64_t p = 0; p < k; ++p) {
          const double prod = double(av[size_t(ta ? p * m + i : i * k + p)]) * bv[size_t(tb ? j * k + p : p * n + j)];
          exact += prod;
          magnitude += std::fabs(prod);
        }
        ASSERT_NEAR(c.data()[i * n + j], exact, (k + 4) * FLT_EPSILON * magnitude) << "C(" << i << "," << j << ")";
      }
  };
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{5, 1},  {5, 5},  {5, 13}, {5, 17}, {5, 30},
                                                           {21, 5}, {21, 8}, {21, 30}, {1, 9}, {9, 1}};
  for (const int64_t k : {1, 7, 23})
    for (const auto& [m, n] : shapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (float beta : {0.0f, 0.5f}) {
            SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                         (ta ? " A^T" : "") + (tb ? " B^T" : "") + " beta=" + std::to_string(beta));
            check(m, n, k, ta, tb, beta);
            const gktest::WithoutMicroPath paths_below_micro;
            SCOPED_TRACE("without the micro path");
            check(m, n, k, ta, tb, beta);
          }
  if (gk::active_config().paths.micro_lanes > 0) {
    EXPECT_GT(micro_runs, 100) << "the micro path should serve most of these";
  }
  gk_set_num_threads(0);
}

// The row-stored problem cblas_sgemm or sgemm_ hands the paths for a case: its operands'
// strides (the leading dimensions as Operand pads them), for asking a path's rule.
struct RowStored {
  int64_t m, n, k;
  gk::MatrixView a, b;
  int64_t rs_c;
};
RowStored row_stored(const Case& c) {
  const auto ld = [&](int64_t rows, int64_t cols) { return std::max<int64_t>(1, c.row_major ? cols : rows) + c.extra_ld; };
  const int64_t lda = c.ta ? ld(c.k, c.m) : ld(c.m, c.k), ldb = c.tb ? ld(c.n, c.k) : ld(c.k, c.n);
  // Row-major op(A) is m x k with (i, p) at i * rs + p * cs. Column-major op(A) has the
  // strides swapped, and the product runs as C^T = op(B)^T op(A)^T: swapped back.
  const gk::MatrixView a = c.ta ? gk::MatrixView{nullptr, 1, lda} : gk::MatrixView{nullptr, lda, 1};
  const gk::MatrixView b = c.tb ? gk::MatrixView{nullptr, 1, ldb} : gk::MatrixView{nullptr, ldb, 1};
  if (c.row_major) return {c.m, c.n, c.k, a, b, ld(c.m, c.n)};
  return {c.n, c.m, c.k, b, a, ld(c.m, c.n)};
}

// The micro path (src/gemm/micro.cpp) in each of its forms: B's rows contiguous (rows),
// A's rows and B's columns contiguous (dots), A's columns contiguous (columns), in both
// layouts and every transpose pair, through cblas_sgemm and sgemm_; rows, columns and K
// around the 8- and 16-float vectors, the groups of vectors and the 4-, 2- and 1-row (or
// column) blocks, K below and past the sets of accumulators; alpha, beta (0 with C NaN:
// C not read) and padded leading dimensions by turns, against the double reference. The
// path is asserted where micro_serves says so (and not elsewhere), every layout and
// transpose pair reaches it, and so does each form with no dimension of 1 (row-major NN:
// rows, NT: dots, TT: columns; column-major the same products transposed).
TEST(Sgemm, MicroPathEveryForm) {
  const bool q = gktest::quick();
  const std::vector<int64_t> dims = q ? std::vector<int64_t>{1, 2, 3, 5, 8, 9, 17, 33}
                                      : std::vector<int64_t>{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 65};
  const std::vector<int64_t> ks =
      q ? std::vector<int64_t>{1, 2, 7, 8, 17, 57} : std::vector<int64_t>{1, 2, 3, 7, 8, 9, 16, 17, 33, 57, 64, 65};
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    gk_set_num_threads(1);
    int turn = 0, reached[2][2][2] = {}, reached_whole[2][2][2] = {};
    for (bool rm : {true, false})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (int64_t m : dims)
            for (int64_t n : dims)
              for (int64_t k : ks) {
                if (m * n * k > l.micro_max_multiply_adds) continue;
                const int pick = turn++;
                const Case c{m, n, k, rm, ta, tb, kAlphas[1 + pick % 2], kBetas[pick / 2 % 3],
                             int64_t(pick % 5 == 1 ? 3 : 0)};
                ASSERT_TRUE(run_case(c, /*fortran=*/!rm && pick % 3 == 0));
                const RowStored r = row_stored(c);
                const bool serves = gk::micro_serves(l, r.m, r.n, r.k, r.a, r.b, r.rs_c);
                const gk::GemmPath ran = gk::last_gemm_path();
                EXPECT_EQ(ran == gk::GemmPath::Micro, serves) << describe(c) << " ran " << gk::path_name(ran);
                reached[rm][ta][tb] += ran == gk::GemmPath::Micro;
                reached_whole[rm][ta][tb] += ran == gk::GemmPath::Micro && m > 1 && n > 1 && k > 1;
              }
    if (l.micro_lanes == 0) return;
    for (bool rm : {false, true})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          EXPECT_GT(reached[rm][ta][tb], 20) << (rm ? "row" : "col") << "-major " << ta << tb;
          EXPECT_GT(reached_whole[rm][ta][tb], 3) << (rm ? "row" : "col") << "-major " << ta << tb << ", no dimension 1";
        }
  });
  gk_set_num_threads(0);
}

// The micro path past its bounds. Columns form (wide_columns_serve): A's columns
// contiguous, 4 to 12 columns of C stored as rows of 4 and 2 floats after a transpose in
// registers (and a last column lane by lane), rows around the vectors and groups of
// vectors up to the 256-row bound and past it. Dots form (wide_dots_serve): A's rows and
// B's columns contiguous, blocks of 4 (AVX2: 2), 2 and 1 rows by 4, 2 and 1 columns, K
// around the vectors and the 4-per-row bound. K past the sets; beta 0 (C NaN), beta
// nonzero and padded leading dimensions by turns; both layouts, against the double
// reference. The path is asserted against micro_serves, and where the rules are on (16-
// float vectors) products past the small bounds reach it in each form.
TEST(Sgemm, MicroPathPastItsBounds) {
  const bool q = gktest::quick();
  gktest::for_each_kernel([&](const gk::KernelInfo& ker) {
    const gk::PathLimits& l = gk::derive_blocking(ker).paths;
    gk_set_num_threads(1);
    int turn = 0;
    // One row-stored product m x n x k, A's columns contiguous (columns) or A's rows and B's
    // columns (dots), in either layout: column-major runs C^T = op(B)^T op(A)^T.
    const auto run = [&](bool columns, bool rm, bool other_transposed, int64_t m, int64_t n, int64_t k) {
      const int pick = turn++;
      const float alpha = kAlphas[1 + pick % 2], beta = kBetas[pick % 3];
      const int64_t extra = pick % 4 == 1 ? 5 : 0;
      const bool ta = columns ? true : false, tb = columns ? other_transposed : true;
      const Case c = rm ? Case{m, n, k, true, ta, tb, alpha, beta, extra}
                        : Case{n, m, k, false, tb, ta, alpha, beta, extra};
      EXPECT_TRUE(run_case(c)) << describe(c);
      const RowStored r = row_stored(c);
      const bool serves = gk::micro_serves(l, r.m, r.n, r.k, r.a, r.b, r.rs_c);
      const gk::GemmPath ran = gk::last_gemm_path();
      EXPECT_EQ(ran == gk::GemmPath::Micro, serves) << describe(c) << " ran " << gk::path_name(ran);
      return ran == gk::GemmPath::Micro && (r.m * r.n > l.micro_max_c_elements || r.m * r.n * r.k > l.micro_max_multiply_adds);
    };
    int wide_columns[2] = {}, wide_dots[2] = {};
    for (bool rm : {true, false})
      for (bool other_transposed : {false, true}) {
        for (int64_t m : q ? std::vector<int64_t>{17, 100, 256, 300} : std::vector<int64_t>{17, 64, 100, 129, 256, 300})
          for (int64_t n : q ? std::vector<int64_t>{4, 6, 7, 12, 13} : std::vector<int64_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
            for (int64_t k : {8, 15, 47}) wide_columns[rm] += run(true, rm, other_transposed, m, n, k);
        if (other_transposed) continue;  // (the dots form has one transpose pair per layout)
        for (int64_t m : q ? std::vector<int64_t>{1, 3, 6, 9} : std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 9, 13})
          for (int64_t n : q ? std::vector<int64_t>{2, 5, 40, 130} : std::vector<int64_t>{1, 2, 3, 4, 5, 7, 9, 40, 130})
            for (int64_t k : {31, 32, 33, 47, 100, 257, 600}) wide_dots[rm] += run(false, rm, false, m, n, k);
      }
    for (bool rm : {true, false}) {
      if (l.micro_columns_max_n > 0) {
        EXPECT_GT(wide_columns[rm], 20) << (rm ? "row" : "col") << "-major";
      }
      if (l.micro_dots_k_per_row > 0) {
        EXPECT_GT(wide_dots[rm], 20) << (rm ? "row" : "col") << "-major";
      }
    }
  });
  gk_set_num_threads(0);
}

// The axpy form's last 1-3 rows (under a 4-float vector) read every column but the last
// as a vector reaching past them; the last column, where the caller's matrix may end, alone:
// A^T's columns packed (lda == m) up to a PROT_NONE page, K of 2 to 5, beta 0 and not.
TEST(Sgemm, MatrixVectorLastRowsStayInsideTheMatrix) {
  const gktest::WithoutMicroPath paths_below_micro;
  gk_set_num_threads(1);
  for (int64_t m : {17, 18, 19, 35, 5, 6, 7})
    for (int64_t k = 2; k <= 5; ++k)
      for (float beta : {0.0f, 0.5f}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k) + " beta=" + std::to_string(beta));
        gktest::GuardedFloats a{size_t(k * m)}, b{size_t(k)}, c{size_t(m)};
        if (!a.data() || !b.data() || !c.data()) return;
        const std::vector<float> av = gktest::random_vector(a.size(), 13), bv = gktest::random_vector(b.size(), 14);
        std::copy(av.begin(), av.end(), a.data());
        std::copy(bv.begin(), bv.end(), b.data());
        std::fill(c.data(), c.data() + c.size(), beta == 0.0f ? gktest::kNaN : 2.0f);
        // Row-major C = A^T B: A is k x m, its rows (A^T's columns) m floats apart.
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(m), 1, int(k), 1.0f, a.data(), int(m), b.data(), 1,
                    beta, c.data(), 1);
        const gk::GemmPath ran = gk::last_gemm_path();
        EXPECT_TRUE(ran == gk::GemmPath::GemvRows || ran == gk::GemmPath::GemvColumns) << gk::path_name(ran);
        for (int64_t i = 0; i < m; ++i) {
          double exact = beta * 2.0, magnitude = std::fabs(exact);
          for (int64_t p = 0; p < k; ++p) {
            const double prod = double(av[size_t(p * m + i)]) * bv[size_t(p)];
            exact += prod;
            magnitude += std::fabs(prod);
          }
          ASSERT_NEAR(c.data()[i], exact, (k + 4) * FLT_EPSILON * magnitude) << "C(" << i << ")";
        }
      }
  gk_set_num_threads(0);
}

// Quick returns and alpha == 0: A and B are never read (NULL is fine), C scaled by beta.
TEST(Sgemm, QuickReturnsAndAlphaZeroDoNotReadAB) {
  std::vector<float> c(12, 3.0f);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 3, 4, 5, 0.0f, nullptr, 3, nullptr, 5,
              0.5f, c.data(), 3);
  for (float v : c) EXPECT_EQ(v, 1.5f);
  std::fill(c.begin(), c.end(), gktest::kNaN);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 3, 4, 0, 2.0f, nullptr, 3, nullptr, 4,
              0.0f, c.data(), 4);
  for (float v : c) EXPECT_EQ(v, 0.0f);
  std::fill(c.begin(), c.end(), gktest::kNaN);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 3, 4, 5, 0.0f, nullptr, 3, nullptr, 5,
              1.0f, c.data(), 3);  // alpha == 0, beta == 1: nothing touched
  for (float v : c) EXPECT_TRUE(std::isnan(v));
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 0, 4, 5, 1.0f, nullptr, 1, nullptr, 5,
              0.0f, c.data(), 1);  // M == 0
  for (float v : c) EXPECT_TRUE(std::isnan(v));
}

// NaN and Inf in A or B propagate (only C is exempt when beta == 0).
TEST(Sgemm, NaNInOperandsPropagates) {
  for (int64_t n : {int64_t{1}, int64_t{40}, int64_t{300}}) {
    Operand a(20, 30, 0, false, 1), b(30, n, 0, false, 2), c(20, n, 0, false, 3);
    a.at(4, 7) = gktest::kNaN;
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 20, int(n), 30, 1.0f, a.data.data(),
                20, b.data.data(), 30, 0.0f, c.data.data(), 20);
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_TRUE(std::isnan(c.at(4, j)));
      EXPECT_FALSE(std::isnan(c.at(5, j)));
    }
  }
}

#if defined(__x86_64__)
// Where cpuinfo finds no L2 (some hypervisors hide the topology leaves it reads) but the
// legacy extended leaf names one (AMD's and Intel's 0x80000006 ECX[31:16], KiB), the
// blocking uses that L2: the 256 KiB fallback would size every block for a quarter of a
// 1 MiB L2. Skipped where cpuinfo reports the L2 itself.
TEST(Config, CachesDetectedFromLegacyCpuidLeaves) {
  if (!cpuinfo_initialize() || cpuinfo_get_l2_caches_count() > 0) GTEST_SKIP() << "cpuinfo reports the L2";
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000006) GTEST_SKIP() << "no leaf 0x80000006";
  __get_cpuid(0x80000006, &a, &b, &c, &d);
  const int64_t legacy_l2 = int64_t{c >> 16} << 10;
  if (legacy_l2 < (64 << 10) || legacy_l2 > (64 << 20)) GTEST_SKIP() << "leaf names no plausible L2";
  EXPECT_TRUE(gk::caches().l2_detected);
  EXPECT_EQ(gk::caches().l2, legacy_l2);
}
#endif

TEST(Config, DescribesKernelBlockingCachesAndThreads) {
  const std::string s = gk_config_string();
  EXPECT_NE(s.find(std::string("kernel ") + gk_kernel_name()), std::string::npos) << s;
  EXPECT_NE(s.find("MC="), std::string::npos) << s;
  EXPECT_NE(s.find("L2="), std::string::npos) << s;
  EXPECT_NE(s.find("threads="), std::string::npos) << s;
  EXPECT_EQ(gk_set_kernel("no-such-kernel"), GK_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(gk_last_error()).find("no-such-kernel"), std::string::npos);
  gk_set_num_threads(3);
  EXPECT_EQ(gk_get_num_threads(), 3);
  gk_set_num_threads(0);
  EXPECT_GE(gk_get_num_threads(), 1);
}
