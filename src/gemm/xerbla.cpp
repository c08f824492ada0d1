// Default BLAS error handlers. They live alone in this file so that a program defining
// its own xerbla_ / cblas_xerbla wins: with the shared library the program's definition
// interposes (calls from the library go through the PLT); with the static library this
// object is only pulled in when the program has none.
// Unlike the reference XERBLA (which STOPs), these print and return, as OpenBLAS does:
// a library must not end its host process.
#include <cstdarg>
#include <cstdio>

#define GK_EXPORT extern "C" __attribute__((visibility("default")))

GK_EXPORT void xerbla_(const char* srname, const int* info, int srname_len) {
  int len = 0;
  while (len < srname_len && srname[len] && srname[len] != ' ') ++len;
  std::fprintf(stderr, " ** On entry to %.*s parameter number %d had an illegal value\n", len,
               srname, *info);
}

GK_EXPORT void cblas_xerbla(int p, const char* rout, const char* form, ...) {
  if (p) std::fprintf(stderr, "Parameter %d to routine %s was incorrect\n", p, rout);
  va_list ap;
  va_start(ap, form);
  std::vfprintf(stderr, form, ap);
  va_end(ap);
}
