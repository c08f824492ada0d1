// Copy helpers shared by the convolution algorithms (vector basics: common/simd.h). Inline copies
// instead of memcpy/memset calls: the runs here are a few dozen floats, where a library
// call costs more than the copy.
#pragma once
#include <cstdint>

#include "common/simd.h"

namespace gk {
namespace conv {

// dst[0, n) = src[0, n), 8 at a time (the last move overlapping), no library call.
GK_INLINE void copy_run(float* __restrict dst, const float* __restrict src, int64_t n) {
  if (n < 8) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (int64_t i = 0; i + 8 <= n; i += 8) store8(dst + i, load8(src + i));
  store8(dst + n - 8, load8(src + n - 8));
}

GK_INLINE void zero_run(float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(dst + i, v8{});
  for (; i < n; ++i) dst[i] = 0.0f;
}

// dst[i] = src[i * stride] for the i in [0, n) with lo <= i < hi, 0 elsewhere: one row of
// an input plane, zero-padded, gathered at a stride.
GK_INLINE void gather_padded(float* dst, const float* src, int64_t stride, int64_t lo, int64_t hi,
                             int64_t n) {
  zero_run(dst, lo);
  if (stride == 1) {
    copy_run(dst + lo, src + lo, hi - lo);
  } else {
    for (int64_t i = lo; i < hi; ++i) dst[i] = src[i * stride];
  }
  zero_run(dst + hi, n - hi);
}

}  // namespace conv
}  // namespace gk
