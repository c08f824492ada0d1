// Packing of plain strided matrices into micro-panels (the PlainA / PlainB sources).
// Two layouts matter: the panel's short dimension contiguous in memory (a straight copy
// per k step) or its long dimension contiguous (a transpose in 4 x 4 register blocks).
// Written with 128-bit GCC vectors so the same code is SSE on x86-64 and NEON on arm64.
#include <cstring>

#include "gemm/gemm.h"

namespace gk {
namespace {

typedef float v4 __attribute__((vector_size(16)));

inline v4 load4(const float* p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4 v) { std::memcpy(p, &v, sizeof v); }

// Transposes the 4 x 4 block whose rows start at r0..r3 (row stride handled by the
// caller) into 4 vectors, one per column: out[q] = {r0[q], r1[q], r2[q], r3[q]}.
inline void transpose4(v4 r0, v4 r1, v4 r2, v4 r3, v4 out[4]) {
  const v4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
  const v4 t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
  const v4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
  const v4 t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  out[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  out[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  out[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  out[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

// dst[p * width + t] = src[t * s_t + p * s_p] for t < count, zero for count <= t < width.
// `s_t == 1`: each k step copies `count` contiguous floats.
// `s_p == 1`: each of the `count` sources is contiguous along p: a transpose, done in
//             4 x 4 register blocks.
template <int kWidth>
void pack_panel_impl(const float* src, int64_t s_t, int64_t s_p, int64_t count, int64_t kc,
                     float* dst, int width_runtime) {
  const int width = kWidth > 0 ? kWidth : width_runtime;
  if (s_t == 1) {
    for (int64_t p = 0; p < kc; ++p, dst += width) {
      const float* s = src + p * s_p;
      if (kWidth > 0 && count == kWidth) {
        std::memcpy(dst, s, sizeof(float) * (kWidth > 0 ? kWidth : 1));
      } else {
        std::memcpy(dst, s, sizeof(float) * static_cast<size_t>(count));
        for (int64_t t = count; t < width; ++t) dst[t] = 0.0f;
      }
    }
    return;
  }
  if (s_p == 1) {
    const int64_t t4 = count / 4 * 4, p4 = kc / 4 * 4;
    for (int64_t p = 0; p < p4; p += 4) {
      float* d = dst + p * width;
      for (int64_t t = 0; t < t4; t += 4) {
        const float* r = src + t * s_t + p;
        v4 cols[4];
        transpose4(load4(r), load4(r + s_t), load4(r + 2 * s_t), load4(r + 3 * s_t), cols);
        for (int q = 0; q < 4; ++q) store4(d + q * width + t, cols[q]);
      }
      for (int64_t t = t4; t < count; ++t)
        for (int q = 0; q < 4; ++q) d[q * width + t] = src[t * s_t + p + q];
      for (int64_t t = count; t < width; ++t)
        for (int q = 0; q < 4; ++q) d[q * width + t] = 0.0f;
    }
    for (int64_t p = p4; p < kc; ++p) {
      float* d = dst + p * width;
      for (int64_t t = 0; t < count; ++t) d[t] = src[t * s_t + p];
      for (int64_t t = count; t < width; ++t) d[t] = 0.0f;
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p, dst += width) {
    for (int64_t t = 0; t < count; ++t) dst[t] = src[t * s_t + p * s_p];
    for (int64_t t = count; t < width; ++t) dst[t] = 0.0f;
  }
}

// Dispatches on the panel width so the common kernel shapes get fully unrolled copies.
void pack_panel(const float* src, int64_t s_t, int64_t s_p, int64_t count, int64_t kc,
                int width, float* dst) {
  switch (width) {
    case 4: return pack_panel_impl<4>(src, s_t, s_p, count, kc, dst, width);
    case 6: return pack_panel_impl<6>(src, s_t, s_p, count, kc, dst, width);
    case 8: return pack_panel_impl<8>(src, s_t, s_p, count, kc, dst, width);
    case 12: return pack_panel_impl<12>(src, s_t, s_p, count, kc, dst, width);
    case 14: return pack_panel_impl<14>(src, s_t, s_p, count, kc, dst, width);
    case 16: return pack_panel_impl<16>(src, s_t, s_p, count, kc, dst, width);
    case 24: return pack_panel_impl<24>(src, s_t, s_p, count, kc, dst, width);
    case 32: return pack_panel_impl<32>(src, s_t, s_p, count, kc, dst, width);
    default: return pack_panel_impl<0>(src, s_t, s_p, count, kc, dst, width);
  }
}

}  // namespace

const float* PlainA::panel(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr,
                           float* scratch) const {
  pack_panel(&a_.at(i0, k0), a_.rs, a_.cs, rows, kc, mr, scratch);
  return scratch;
}

void PlainB::pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                        float* dst) const {
  gk::pack_panel(&b_.at(k0, j0), b_.cs, b_.rs, cols, kc, nr, dst);
}

}  // namespace gk
