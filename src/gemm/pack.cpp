// Packing of plain strided matrices into micro-panels (the PlainA / PlainB sources).
// Two layouts matter: the panel's short dimension contiguous in memory (a straight copy
// per k step) or its long dimension contiguous (a transpose, done 8 k steps at a time so
// each source row is read as one contiguous run).
#include <cstring>

#include "gemm/gemm.h"

namespace gk {
namespace {

// dst[p * width + t] = src[t * s_t + p * s_p] for t < count, zero for count <= t < width.
// `s_t == 1`: each k step copies `count` contiguous floats.
// `s_p == 1`: each of the `count` sources is contiguous along p (transpose).
template <int kWidth>
void pack_panel_impl(const float* src, int64_t s_t, int64_t s_p, int64_t count, int64_t kc,
                     float* dst, int width_runtime) {
  const int width = kWidth > 0 ? kWidth : width_runtime;
  if (s_t == 1) {
    for (int64_t p = 0; p < kc; ++p, dst += width) {
      const float* s = src + p * s_p;
      if (count == width) {
        for (int t = 0; t < width; ++t) dst[t] = s[t];
      } else {
        for (int64_t t = 0; t < count; ++t) dst[t] = s[t];
        for (int64_t t = count; t < width; ++t) dst[t] = 0.0f;
      }
    }
    return;
  }
  if (s_p == 1) {
    constexpr int kStep = 8;
    int64_t p = 0;
    for (; p + kStep <= kc; p += kStep, dst += kStep * width) {
      for (int64_t t = 0; t < count; ++t) {
        const float* s = src + t * s_t + p;
        for (int q = 0; q < kStep; ++q) dst[q * width + t] = s[q];
      }
      for (int64_t t = count; t < width; ++t)
        for (int q = 0; q < kStep; ++q) dst[q * width + t] = 0.0f;
    }
    for (; p < kc; ++p, dst += width) {
      for (int64_t t = 0; t < count; ++t) dst[t] = src[t * s_t + p];
      for (int64_t t = count; t < width; ++t) dst[t] = 0.0f;
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
