// The BLAS interfaces: Fortran sgemm_ and CBLAS cblas_sgemm. Arguments are checked as the
// reference BLAS does (same order, same parameter numbers); an invalid call reports
// through xerbla_ / cblas_xerbla and writes nothing. No exception leaves them, and they
// have no status to return: should anything throw before C is written (the paths allocate
// nothing once they run), the product is computed on the no-heap path.
#include <algorithm>
#include <cstdint>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemmkit_cblas.h"

#define GK_EXPORT extern "C" __attribute__((visibility("default")))

namespace gk {
namespace {

bool is_notrans(char t) { return t == 'N' || t == 'n'; }
bool is_trans(char t) { return t == 'T' || t == 't' || t == 'C' || t == 'c'; }

// Reference SGEMM's checks, in its order. Returns the Fortran INFO (0 when valid).
int sgemm_info(char transa, char transb, int64_t m, int64_t n, int64_t k, int64_t lda,
               int64_t ldb, int64_t ldc) {
  const int64_t rows_a = is_notrans(transa) ? m : k;
  const int64_t rows_b = is_notrans(transb) ? k : n;
  if (!is_notrans(transa) && !is_trans(transa)) return 1;
  if (!is_notrans(transb) && !is_trans(transb)) return 2;
  if (m < 0) return 3;
  if (n < 0) return 4;
  if (k < 0) return 5;
  if (lda < std::max<int64_t>(1, rows_a)) return 8;
  if (ldb < std::max<int64_t>(1, rows_b)) return 10;
  if (ldc < std::max<int64_t>(1, m)) return 13;
  return 0;
}

// Column-major C (m x n) = alpha op(A) op(B) + beta C, run as the row-stored problem
// C^T (n x m, row stride ldc) = op(B)^T op(A)^T on the same memory.
void sgemm_colmajor(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) {
  // op(B)^T is n x k: element (j, p) = op(B)(p, j).
  const MatrixView bt = is_notrans(transb) ? MatrixView{b, ldb, 1} : MatrixView{b, 1, ldb};
  // op(A)^T is k x m: element (p, i) = op(A)(i, p).
  const MatrixView at = is_notrans(transa) ? MatrixView{a, lda, 1} : MatrixView{a, 1, lda};
  if (guard_c_boundary("sgemm", [&] {
        sgemm_rowstored(n, m, k, alpha, bt, at, beta, c, ldc);
        return GK_OK;
      }) != GK_OK) {
    note_no_heap_fallback("the GEMM setup failed (gk_last_error says why)", 0);
    sgemm_rowstored_no_heap(n, m, k, alpha, bt, at, beta, c, ldc);
  }
}

// Whether this thread is reporting a row-major cblas_sgemm call's error: the default
// cblas_xerbla (xerbla.cpp) then prints the caller's parameter number, as the reference's
// does with its RowMajorStrg (but per thread).
thread_local bool t_reporting_row_major = false;
struct RowMajorReport {
  RowMajorReport() { t_reporting_row_major = true; }
  ~RowMajorReport() { t_reporting_row_major = false; }
};

char cblas_trans_char(CBLAS_TRANSPOSE t) {
  switch (t) {
    case CblasNoTrans: return 'N';
    case CblasTrans: return 'T';
    case CblasConjTrans: return 'C';
  }
  return '\0';
}

}  // namespace

bool reporting_row_major_call() { return t_reporting_row_major; }

}  // namespace gk

GK_EXPORT void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                      const int* k, const float* alpha, const float* a, const int* lda,
                      const float* b, const int* ldb, const float* beta, float* c,
                      const int* ldc) {
  const int info = gk::sgemm_info(*transa, *transb, *m, *n, *k, *lda, *ldb, *ldc);
  if (info != 0) {
    xerbla_("SGEMM ", &info, 6);
    return;
  }
  gk::sgemm_colmajor(*transa, *transb, *m, *n, *k, *alpha, a, *lda, b, *ldb, *beta, c, *ldc);
}

GK_EXPORT void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE transa, CBLAS_TRANSPOSE transb,
                           const int m, const int n, const int k, const float alpha,
                           const float* a, const int lda, const float* b, const int ldb,
                           const float beta, float* c, const int ldc) {
  static const char kName[] = "cblas_sgemm";
  if (order != CblasRowMajor && order != CblasColMajor) {
    cblas_xerbla(1, kName, "Illegal Order setting, %d\n", static_cast<int>(order));
    return;
  }
  const char ta = gk::cblas_trans_char(transa), tb = gk::cblas_trans_char(transb);
  if (!ta) {
    cblas_xerbla(2, kName, "Illegal TransA setting, %d\n", static_cast<int>(transa));
    return;
  }
  if (!tb) {
    cblas_xerbla(3, kName, "Illegal TransB setting, %d\n", static_cast<int>(transb));
    return;
  }
  if (order == CblasColMajor) {
    // CBLAS counts one more argument (order) than Fortran.
    if (int info = gk::sgemm_info(ta, tb, m, n, k, lda, ldb, ldc)) {
      cblas_xerbla(info + 1, kName, "");
      return;
    }
    gk::sgemm_colmajor(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the reference CBLAS
  // (LAPACK's CBLAS/src/cblas_sgemm.c) runs Fortran SGEMM on the swapped call (N, M, K,
  // B, ldb, A, lda), whose checks come in that order, and its xerbla hands cblas_xerbla
  // that call's INFO + 1 as it is: an illegal M is reported as 5, N as 4, lda as 11, ldb
  // as 9. Handlers map them back themselves (the reference's default cblas_xerbla, and
  // its tester's c_xerbla.c, which flagged gemmkit's mapped numbers: "XERBLA WAS CALLED
  // WITH INFO = 5 INSTEAD OF 4"), so gemmkit passes them unmapped too.
  if (int info = gk::sgemm_info(tb, ta, n, m, k, ldb, lda, ldc)) {
    const gk::RowMajorReport row_major;
    cblas_xerbla(info + 1, kName, "");
    return;
  }
  gk::sgemm_colmajor(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}
