/* A program written against cblas.h and the Fortran BLAS, knowing nothing of gemmkit:
 * its own enum values, and sgemm_ called with the hidden string-length arguments that
 * gfortran passes. Linked against the shared libgemmkit. Exit 0 and "ok" on success. */
#include <stddef.h>
#include <stdio.h>

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };
void cblas_sgemm(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int,
                 float, const float *, int, const float *, int, float, float *, int);
void sgemm_(const char *, const char *, const int *, const int *, const int *, const float *,
            const float *, const int *, const float *, const int *, const float *, float *,
            const int *, size_t, size_t);

int main(void) {
  /* Row-major 2x3 times 3x2. */
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
  const float want[4] = {58, 64, 139, 154};
  float c[4] = {0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  for (int i = 0; i < 4; ++i)
    if (c[i] != want[i]) { printf("cblas c[%d]=%g\n", i, c[i]); return 1; }
  /* The same product column-major through Fortran: C^T = B^T A^T, where the row-major
   * buffers read column-major are B^T (2x3) and A^T (3x2). */
  const int m = 2, n = 2, k = 3, lda = 2, ldb = 3, ldc = 2;
  const float one = 1.0f, zero = 0.0f;
  float ct[4] = {0};
  sgemm_("N", "N", &m, &n, &k, &one, b, &lda, a, &ldb, &zero, ct, &ldc, 1, 1);
  const float want_t[4] = {58, 64, 139, 154};
  for (int i = 0; i < 4; ++i)
    if (ct[i] != want_t[i]) { printf("sgemm_ c[%d]=%g\n", i, ct[i]); return 1; }
  printf("ok\n");
  return 0;
}
