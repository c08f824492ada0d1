/* Linked against the shared libgemmkit: this program's cblas_xerbla and xerbla_ must
 * replace the library's (ELF interposition), get the reference numbers, and the bad
 * calls must write nothing. Exit 0 and print "ok" on success. */
#include <stdio.h>
#include <string.h>

#include "gemmkit_cblas.h"

static int last_param = -1, calls = 0;
static char last_routine[32];

void cblas_xerbla(int p, const char *rout, const char *form, ...) {
  (void)form;
  ++calls;
  last_param = p;
  snprintf(last_routine, sizeof last_routine, "%s", rout);
}

void xerbla_(const char *srname, const int *info, int len) {
  ++calls;
  last_param = *info;
  snprintf(last_routine, sizeof last_routine, "%.*s", len, srname);
}

int main(void) {
  float a[16] = {0}, b[16] = {0}, c[16];
  for (int i = 0; i < 16; ++i) c[i] = 7.0f;
  /* A row-major call's illegal M is reported as 5, as the reference CBLAS reports it: the
   * swapped Fortran call's N (LAPACK's CBLAS/src/cblas_sgemm.c; handlers map it back). */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  if (calls != 1 || last_param != 5 || strcmp(last_routine, "cblas_sgemm") != 0) {
    printf("cblas: calls=%d param=%d routine=%s\n", calls, last_param, last_routine);
    return 1;
  }
  const int m = 2, n = 2, k = 2, bad_lda = 1, ld = 2;
  const float one = 1.0f;
  sgemm_("N", "N", &m, &n, &k, &one, a, &bad_lda, b, &ld, &one, c, &ld);
  if (calls != 2 || last_param != 8 || strncmp(last_routine, "SGEMM", 5) != 0) {
    printf("fortran: calls=%d param=%d routine=%s\n", calls, last_param, last_routine);
    return 1;
  }
  for (int i = 0; i < 16; ++i)
    if (c[i] != 7.0f) {
      printf("C written by a bad call\n");
      return 1;
    }
  printf("ok\n");
  return 0;
}
