// Invalid arguments: reported with the reference parameter numbers and routine names, in
// the reference order, and nothing written. This binary defines its own xerbla_ and
// cblas_xerbla, which must replace the library's (static link; the shared-library case
// is test/programs/xerbla_override.c).
#include <cstdarg>
#include <string>

#include "gemm_test_util.h"

namespace {
struct Reported {
  int count = 0;
  int param = 0;
  std::string routine;
} g_reported;
}  // namespace

extern "C" void cblas_xerbla(int p, const char* rout, const char*, ...) {
  ++g_reported.count;
  g_reported.param = p;
  g_reported.routine = rout;
}

extern "C" void xerbla_(const char* srname, const int* info, int len) {
  ++g_reported.count;
  g_reported.param = *info;
  g_reported.routine.assign(srname, static_cast<size_t>(len));
}

namespace {

struct Args {
  int order = CblasColMajor, ta = CblasNoTrans, tb = CblasNoTrans;
  int m = 4, n = 5, k = 6, lda = 4, ldb = 6, ldc = 4;
};

// Calls cblas_sgemm with `args`; expects exactly one report of `param` and C untouched.
void expect_cblas_error(const Args& x, int param) {
  g_reported = {};
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, gktest::kSentinel);
  cblas_sgemm(static_cast<CBLAS_ORDER>(x.order), static_cast<CBLAS_TRANSPOSE>(x.ta),
              static_cast<CBLAS_TRANSPOSE>(x.tb), x.m, x.n, x.k, 1.0f, a.data(), x.lda,
              b.data(), x.ldb, 0.0f, c.data(), x.ldc);
  EXPECT_EQ(g_reported.count, 1);
  EXPECT_EQ(g_reported.param, param);
  EXPECT_EQ(g_reported.routine, "cblas_sgemm");
  for (float v : c) ASSERT_EQ(v, gktest::kSentinel) << "C written on a bad call";
}

void expect_fortran_error(char ta, char tb, int m, int n, int k, int lda, int ldb, int ldc,
                          int info) {
  g_reported = {};
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, gktest::kSentinel);
  const float one = 1.0f, zero = 0.0f;
  sgemm_(&ta, &tb, &m, &n, &k, &one, a.data(), &lda, b.data(), &ldb, &zero, c.data(), &ldc);
  EXPECT_EQ(g_reported.count, 1);
  EXPECT_EQ(g_reported.param, info);
  EXPECT_EQ(g_reported.routine, "SGEMM ");
  for (float v : c) ASSERT_EQ(v, gktest::kSentinel) << "C written on a bad call";
}

}  // namespace

TEST(BlasArguments, CblasColumnMajorNumbers) {
  Args x;
  x.order = 100; expect_cblas_error(x, 1);
  x = Args(); x.ta = 110; expect_cblas_error(x, 2);
  x = Args(); x.tb = 114; expect_cblas_error(x, 3);
  x = Args(); x.m = -1; expect_cblas_error(x, 4);
  x = Args(); x.n = -1; expect_cblas_error(x, 5);
  x = Args(); x.k = -1; expect_cblas_error(x, 6);
  x = Args(); x.lda = 3; expect_cblas_error(x, 9);           // lda < M
  x = Args(); x.ta = CblasTrans; x.lda = 5; expect_cblas_error(x, 9);  // lda < K
  x = Args(); x.ldb = 5; expect_cblas_error(x, 11);          // ldb < K
  x = Args(); x.tb = CblasTrans; x.ldb = 4; expect_cblas_error(x, 11);  // ldb < N
  x = Args(); x.ldc = 3; expect_cblas_error(x, 14);          // ldc < M
  x = Args(); x.m = 0; x.lda = 0; expect_cblas_error(x, 9);   // lda >= max(1, M)
  // Reference order: M before N before K before the leading dimensions.
  x = Args(); x.m = -1; x.n = -1; x.lda = 0; expect_cblas_error(x, 4);
}

// Row-major calls report what the reference CBLAS reports (LAPACK's CBLAS/src/cblas_sgemm.c
// runs Fortran SGEMM on the swapped call (N, M, K, B, ldb, A, lda) and its xerbla passes
// that call's INFO + 1 unmapped): an illegal M is 5, N is 4, lda is 11, ldb is 9. The
// handlers map them back (the reference's cblas_xerbla and its tester's c_xerbla.c, under
// RowMajorStrg); Debian's xscblat3 checks exactly these numbers.
TEST(BlasArguments, CblasRowMajorNumbersAreTheSwappedFortranCalls) {
  Args x;
  x.order = CblasRowMajor, x.lda = 6, x.ldb = 5, x.ldc = 5;  // valid row-major baseline
  Args y = x; y.m = -1; expect_cblas_error(y, 5);  // M is the swapped call's N
  y = x; y.n = -1; expect_cblas_error(y, 4);       // N is its M
  y = x; y.k = -1; expect_cblas_error(y, 6);
  y = x; y.lda = 5; expect_cblas_error(y, 11);   // lda < K: A is its B
  y = x; y.ta = CblasTrans; y.lda = 3; expect_cblas_error(y, 11);  // lda < M
  y = x; y.ldb = 4; expect_cblas_error(y, 9);    // ldb < N: B is its A
  y = x; y.ldc = 4; expect_cblas_error(y, 14);   // ldc < N
  y = x; y.ta = 0; expect_cblas_error(y, 2);
  y = x; y.tb = 0; expect_cblas_error(y, 3);
  // The swapped call checks N (its M) before M, ldb (its lda) before lda.
  y = x; y.m = -1; y.n = -1; expect_cblas_error(y, 4);
  y = x; y.lda = 1; y.ldb = 1; expect_cblas_error(y, 9);
}

TEST(BlasArguments, FortranNumbers) {
  expect_fortran_error('X', 'N', 4, 5, 6, 4, 6, 4, 1);
  expect_fortran_error('N', '?', 4, 5, 6, 4, 6, 4, 2);
  expect_fortran_error('N', 'N', -1, 5, 6, 4, 6, 4, 3);
  expect_fortran_error('N', 'N', 4, -1, 6, 4, 6, 4, 4);
  expect_fortran_error('n', 'n', 4, 5, -1, 4, 6, 4, 5);
  expect_fortran_error('N', 'N', 4, 5, 6, 3, 6, 4, 8);
  expect_fortran_error('t', 'N', 4, 5, 6, 5, 6, 4, 8);
  expect_fortran_error('N', 'N', 4, 5, 6, 4, 5, 4, 10);
  expect_fortran_error('N', 'C', 4, 5, 6, 4, 4, 4, 10);
  expect_fortran_error('N', 'N', 4, 5, 6, 4, 6, 3, 13);
}

TEST(BlasArguments, ValidCallsReportNothing) {
  g_reported = {};
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  cblas_sgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, 4, 5, 6, 1.0f, a.data(), 6, b.data(),
              6, 0.0f, c.data(), 4);
  EXPECT_EQ(g_reported.count, 0);
  EXPECT_EQ(c[0], 6.0f);
}
