// Default BLAS error handlers. They live alone in this file so that a program defining
// its own xerbla_ / cblas_xerbla wins: with the shared library the program's definition
// interposes (calls from the library go through the PLT); with the static library this
// object is only pulled in when the program has none.
// Unlike the reference XERBLA (which STOPs) and the reference cblas_xerbla (which exits),
// these print and return, as OpenBLAS does: a library must not end its host process.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#define GK_EXPORT extern "C" __attribute__((visibility("default")))

namespace gk {
bool reporting_row_major_call();  // blas.cpp
}

namespace {
// cblas_sgemm passes a row-major call's numbers as the reference does, those of the
// swapped Fortran call (blas.cpp); printed, they are the caller's, as the reference's
// cblas_xerbla prints them (LAPACK's CBLAS/src/cblas_xerbla.c).
int callers_parameter(int p, const char* rout) {
  if (!gk::reporting_row_major_call() || !std::strstr(rout, "gemm")) return p;
  switch (p) {
    case 4: return 5;
    case 5: return 4;
    case 9: return 11;
    case 11: return 9;
  }
  return p;
}
}  // namespace

// No guard for exceptions: these call only C library functions.
GK_EXPORT void xerbla_(const char* srname, const int* info, int srname_len) {
  int len = 0;
  while (len < srname_len && srname[len] && srname[len] != ' ') ++len;
  std::fprintf(stderr, " ** On entry to %.*s parameter number %d had an illegal value\n", len,
               srname, *info);
}

GK_EXPORT void cblas_xerbla(int p, const char* rout, const char* form, ...) {
  if (p) std::fprintf(stderr, "Parameter %d to routine %s was incorrect\n", callers_parameter(p, rout), rout);
  va_list ap;
  va_start(ap, form);
  std::vfprintf(stderr, form, ap);
  va_end(ap);
}
