// GCC vector types and unaligned loads/stores shared by the C++ helpers around the kernels
// (packing, epilogue, convolution transforms). Compiled per ISA by the functions that
// include them (target("avx2") wrappers, else SSE2 on x86-64 and NEON on AArch64).
#pragma once
#pragma GCC diagnostic ignored "-Wpsabi"  // vectors only cross always-inline calls

#include <cstdint>
#include <cstring>

namespace gk {

typedef float v4 __attribute__((vector_size(16)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v16 __attribute__((vector_size(64)));  // AVX-512 helpers
typedef int v8i __attribute__((vector_size(32)));  // shuffle masks for v8
typedef int v4i __attribute__((vector_size(16)));  // shuffle masks for v4
#define GK_INLINE inline __attribute__((always_inline))

// All lanes = s. (Not v8{} + s: GCC must keep that addition, since 0 + -0 is +0, and
// then broadcasts from a register instead of straight from memory.)
GK_INLINE v8 splat8(float s) { return v8{s, s, s, s, s, s, s, s}; }

GK_INLINE v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
GK_INLINE void store8(float* p, const v8& v) { std::memcpy(p, &v, sizeof v); }
GK_INLINE v4 load4(const float* p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
GK_INLINE void store4(float* p, const v4& v) { std::memcpy(p, &v, sizeof v); }

// Zeros d[0, n) (nothing when n <= 0) with vector stores and at most 3 single floats. GCC
// turns a zeroing loop into `rep stos` (some 30 cycles to start, each call), over vectors
// too where n is not a constant; the empty asm hides the trip count. A 32-wide panel of 20
// columns zeroed its 12 padding floats per k step that way: 22x20x2725 took 80 us, 46
// with 32 columns (49 after).
GK_INLINE void zero_floats(float* d, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    store8(d + j, v8{});
    __asm__("" : "+r"(j));
  }
  if (j + 4 <= n) {
    store4(d + j, v4{});
    j += 4;
  }
  for (int q = 0; q < 3; ++q)  // a fixed trip count: no memset either
    if (j + q < n) d[j + q] = 0.0f;
}

}  // namespace gk
