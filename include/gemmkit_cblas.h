/* gemmkit: CBLAS-compatible declarations (a drop-in for the sgemm part of cblas.h).
 * Enum values are the reference CBLAS ones, so a program written against cblas.h links
 * against gemmkit unchanged. */
#ifndef GEMMKIT_CBLAS_H
#define GEMMKIT_CBLAS_H

#ifdef __cplusplus
extern "C" {
#endif

#ifndef CBLAS_H /* reference cblas.h already defines these */
typedef enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_ORDER;
typedef enum CBLAS_TRANSPOSE {
  CblasNoTrans = 111,
  CblasTrans = 112,
  CblasConjTrans = 113
} CBLAS_TRANSPOSE;
typedef CBLAS_ORDER CBLAS_LAYOUT;
#endif

/* C = alpha * op(A) * op(B) + beta * C, with reference-BLAS semantics: beta == 0 never
 * reads C, alpha == 0 never reads A or B, bad arguments are reported through
 * cblas_xerbla and nothing is written. Neither this nor sgemm_ ends the process or lets
 * an exception out: when memory for its buffers cannot be had, the product is computed
 * on a slower path that needs no heap memory (said once under GEMMKIT_VERBOSE=1). */
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transa,
                 enum CBLAS_TRANSPOSE transb, const int m, const int n, const int k,
                 const float alpha, const float *a, const int lda, const float *b,
                 const int ldb, const float beta, float *c, const int ldc);

/* Fortran BLAS, column-major. Hidden string-length arguments are tolerated. */
void sgemm_(const char *transa, const char *transb, const int *m, const int *n,
            const int *k, const float *alpha, const float *a, const int *lda,
            const float *b, const int *ldb, const float *beta, float *c, const int *ldc);

/* Error handlers. The library defines both; a program that defines its own wins.
 * cblas_xerbla receives the number the reference CBLAS passes: for a row-major call, that
 * of the Fortran call it runs with the operands swapped (an illegal M is 5, N is 4, lda
 * is 11, ldb is 9), which handlers map back, as the library's own does when it prints.
 * Neither terminates the program. */
void cblas_xerbla(int p, const char *rout, const char *form, ...);
void xerbla_(const char *srname, const int *info, int srname_len);

#ifdef __cplusplus
}
#endif
#endif
