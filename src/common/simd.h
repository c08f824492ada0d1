// GCC vector types and unaligned loads/stores shared by the C++ helpers around the kernels
// (packing, epilogue, convolution transforms). Compiled per ISA by the functions that
// include them (target("avx2") wrappers, else SSE2 on x86-64 and NEON on AArch64).
#pragma once
#pragma GCC diagnostic ignored "-Wpsabi"  // vectors only cross always-inline calls

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

}  // namespace gk
