// Copy helpers shared by the convolution algorithms (vector basics: common/simd.h). Inline copies
// instead of memcpy/memset calls: the runs here are a few dozen floats, where a library
// call costs more than the copy.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/simd.h"
#include "gemmkit.h"

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

// Lanes [real, 8) of `pixels` consecutive 8-lane pixels set to 0: the padding channels of a
// blocked output's last block. Some paths leave them unwritten, and the pointwise kernels
// compute them from zero weights, which a NaN or Inf input still turns into NaN. One
// masked vector per pixel (lane by lane, this pass took 6% of a 24 -> 58 channel 1x1
// layer). The mask is built once from an array: from a vector comparison GCC rebuilt it
// in the loop, through the stack (25% of that layer).
GK_INLINE void zero_padding_lanes(float* block, int64_t pixels, int64_t real) {
  if (real >= 8) return;
  int32_t bits[8];  // all ones in the lanes kept
  for (int l = 0; l < 8; ++l) bits[l] = l < real ? -1 : 0;
  v8i keep;
  std::memcpy(&keep, bits, sizeof keep);
  for (int64_t q = 0; q < pixels; ++q) {
    v8i v;
    std::memcpy(&v, block + q * 8, sizeof v);
    v &= keep;
    std::memcpy(block + q * 8, &v, sizeof v);
  }
}

// Vectors of any width (v8, or v16 in the AVX-512 functions): all lanes = s, loads and
// stores of unaligned floats.
template <typename V>
GK_INLINE V splat(float s) {
  V v;
  for (size_t l = 0; l < sizeof(V) / sizeof(float); ++l) v[l] = s;
  return v;
}
template <typename V>
GK_INLINE V load_vec(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
GK_INLINE void store_vec(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// act(v) lane by lane: ReLU (a NaN becomes 0, as the kernels' vmaxps does) or ReLU6.
template <typename V>
GK_INLINE V activate(V v, gk_activation act) {
  if (act == GK_ACT_NONE) return v;
  const V zero = {};
  v = v > zero ? v : zero;
  if (act == GK_ACT_RELU6) {
    const V six = splat<V>(6.0f);
    v = v < six ? v : six;
  }
  return v;
}
GK_INLINE v8 activate8(v8 v, gk_activation act) { return activate(v, act); }

// How the algorithms that compute their outputs in C++ finish one: the value already at
// the output added first when the plan adds to its output (Shape::adds_to_output(): the
// residual joins before the activation), then the activation, then the store. Without
// `add` the output is never read (it may hold NaN).
struct Finish {
  gk_activation act;
  bool add;
};
template <typename V>
GK_INLINE void finish_vec(float* out, V v, const Finish& f) {
  if (f.add) v += load_vec<V>(out);
  store_vec(out, activate(v, f.act));
}
GK_INLINE void finish8(float* out, v8 v, const Finish& f) { finish_vec(out, v, f); }
// The same for the first n lanes of v, lane l at out[l * stride] (a row's last columns).
GK_INLINE void finish_lanes(float* out, int64_t stride, int64_t n, v8 v, const Finish& f) {
  if (f.add)
    for (int64_t l = 0; l < n; ++l) v[l] += out[l * stride];
  v = activate8(v, f.act);
  for (int64_t l = 0; l < n; ++l) out[l * stride] = v[l];
}

// dst[i] = src[i * stride] for the i in [0, n) with lo <= i < hi, 0 elsewhere: one row of
// an input plane, zero-padded, gathered at a stride.
GK_INLINE void gather_padded(float* dst, const float* src, int64_t stride, int64_t lo, int64_t hi,
                             int64_t n) {
  zero_floats(dst, lo);
  if (stride == 1) {
    copy_run(dst + lo, src + lo, hi - lo);
  } else {
    for (int64_t i = lo; i < hi; ++i) dst[i] = src[i * stride];
  }
  zero_floats(dst + hi, n - hi);
}

// r[i][j] -> r[j][i] for an 8 x 8 block held as 8 vectors.
GK_INLINE void transpose8x8(v8 (&r)[8]) {
  const v8i lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
  const v8i pair_lo = {0, 1, 8, 9, 4, 5, 12, 13}, pair_hi = {2, 3, 10, 11, 6, 7, 14, 15};
  const v8i half_lo = {0, 1, 2, 3, 8, 9, 10, 11}, half_hi = {4, 5, 6, 7, 12, 13, 14, 15};
  v8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], lo);
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], hi);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shuffle(t[i], t[i + 2], pair_lo);
    u[i + 1] = __builtin_shuffle(t[i], t[i + 2], pair_hi);
    u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], pair_lo);
    u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], pair_hi);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = __builtin_shuffle(u[i], u[i + 4], half_lo);
    r[i + 4] = __builtin_shuffle(u[i], u[i + 4], half_hi);
  }
}

// Three runs of 8 (an RGB image's planes) <-> 8 pixels of 3 interleaved floats, by
// two-input shuffles: lane i of output q is input float 8q + i of the interleaved order.
GK_INLINE void interleave3x8(const v8& c0, const v8& c1, const v8& c2, v8* out) {
  const v8 lo0 = __builtin_shuffle(c0, c1, (v8i){0, 8, 0, 1, 9, 0, 2, 10});
  out[0] = __builtin_shuffle(lo0, c2, (v8i){0, 1, 8, 3, 4, 9, 6, 7});
  const v8 lo1 = __builtin_shuffle(c0, c1, (v8i){0, 3, 11, 0, 4, 12, 0, 5});
  out[1] = __builtin_shuffle(lo1, c2, (v8i){10, 1, 2, 11, 4, 5, 12, 7});
  const v8 lo2 = __builtin_shuffle(c0, c1, (v8i){13, 0, 6, 14, 0, 7, 15, 0});
  out[2] = __builtin_shuffle(lo2, c2, (v8i){0, 13, 2, 3, 14, 5, 6, 15});
}
GK_INLINE void deinterleave3x8(const v8& f0, const v8& f8, const v8& f16, v8* out) {
  // Channel l of pixel i is float 3i + l (f0: floats 0-7, f8: 8-15, f16: 16-23): the first
  // 5 or 6 pixels of a channel from f0 and f8, the rest from f16.
  const v8 ab0 = __builtin_shuffle(f0, f8, (v8i){0, 3, 6, 9, 12, 15, 0, 0});
  out[0] = __builtin_shuffle(ab0, f16, (v8i){0, 1, 2, 3, 4, 5, 10, 13});
  const v8 ab1 = __builtin_shuffle(f0, f8, (v8i){1, 4, 7, 10, 13, 0, 0, 0});
  out[1] = __builtin_shuffle(ab1, f16, (v8i){0, 1, 2, 3, 4, 8, 11, 14});
  const v8 ab2 = __builtin_shuffle(f0, f8, (v8i){2, 5, 8, 11, 14, 0, 0, 0});
  out[2] = __builtin_shuffle(ab2, f16, (v8i){0, 1, 2, 3, 4, 9, 12, 15});
}

// dst[j * x + l] = src[l][j] for j < n, l < x: x runs interleaved into one (NCHW planes
// into NCHWx or NHWC); src[l] == nullptr gives zeros (padding channels). x == 8 goes by
// 8 x 8 transposes, x == 3 (RGB) by shuffles of 8 pixels.
GK_INLINE void interleave(const float* const* src, int64_t x, int64_t n, float* dst) {
  int64_t j = 0;
  if (x == 3 && src[0] && src[1] && src[2]) {
    for (; j + 8 <= n; j += 8) {
      v8 out[3];
      interleave3x8(load8(src[0] + j), load8(src[1] + j), load8(src[2] + j), out);
      for (int q = 0; q < 3; ++q) store8(dst + j * 3 + q * 8, out[q]);
    }
  }
  if (x == 8) {
    for (; j + 8 <= n; j += 8) {
      v8 v[8];
      for (int l = 0; l < 8; ++l) v[l] = src[l] ? load8(src[l] + j) : v8{};
      transpose8x8(v);
      for (int q = 0; q < 8; ++q) store8(dst + (j + q) * 8, v[q]);
    }
  }
  for (; j < n; ++j)
    for (int64_t l = 0; l < x; ++l) dst[j * x + l] = src[l] ? src[l][j] : 0.0f;
}

// dst[l][j] = src[j * x + l]: the inverse (dst[l] == nullptr: that run is dropped).
GK_INLINE void deinterleave(const float* src, int64_t x, int64_t n, float* const* dst) {
  int64_t j = 0;
  if (x == 3 && dst[0] && dst[1] && dst[2]) {
    for (; j + 8 <= n; j += 8) {
      v8 out[3];
      deinterleave3x8(load8(src + j * 3), load8(src + j * 3 + 8), load8(src + j * 3 + 16), out);
      for (int l = 0; l < 3; ++l) store8(dst[l] + j, out[l]);
    }
  }
  if (x == 8) {
    for (; j + 8 <= n; j += 8) {
      v8 v[8];
      for (int q = 0; q < 8; ++q) v[q] = load8(src + (j + q) * 8);
      transpose8x8(v);
      for (int l = 0; l < 8; ++l)
        if (dst[l]) store8(dst[l] + j, v[l]);
    }
  }
  for (; j < n; ++j)
    for (int64_t l = 0; l < x; ++l)
      if (dst[l]) dst[l][j] = src[j * x + l];
}

// dst[q * len + i] = row[i * M + q - pad] for q < M, i < len: one input row, zero-padded
// (pad on the left, zeros past `width`), split into its M column phases (M = 1: a padded
// copy), so that a stride-M access becomes M contiguous ones. Where all 8 * M inputs of 8
// indices lie inside the row they are loaded as M vectors and deinterleaved with shuffles
// (M = 2, 4); the edges, and other M, element by element.
// dst[q * len + i + j] = src[j * M + q], j < 8: 8 indices of every phase from 8 * M
// consecutive floats (M = 2, 4), by shuffles.
template <int M>
GK_INLINE void deinterleave_phases8(const float* src, int64_t len, float* dst) {
  if constexpr (M == 2) {
    const v8 a = load8(src), b = load8(src + 8);
    store8(dst, __builtin_shuffle(a, b, (v8i){0, 2, 4, 6, 8, 10, 12, 14}));
    store8(dst + len, __builtin_shuffle(a, b, (v8i){1, 3, 5, 7, 9, 11, 13, 15}));
  } else {
    const v8 a = load8(src), b = load8(src + 8), c = load8(src + 16), d = load8(src + 24);
    const v8i even = {0, 4, 8, 12, 1, 5, 9, 13}, odd = {2, 6, 10, 14, 3, 7, 11, 15};
    const v8 ab01 = __builtin_shuffle(a, b, even), ab23 = __builtin_shuffle(a, b, odd);
    const v8 cd01 = __builtin_shuffle(c, d, even), cd23 = __builtin_shuffle(c, d, odd);
    const v8i lo = {0, 1, 2, 3, 8, 9, 10, 11}, hi = {4, 5, 6, 7, 12, 13, 14, 15};
    store8(dst, __builtin_shuffle(ab01, cd01, lo));
    store8(dst + len, __builtin_shuffle(ab01, cd01, hi));
    store8(dst + 2 * len, __builtin_shuffle(ab23, cd23, lo));
    store8(dst + 3 * len, __builtin_shuffle(ab23, cd23, hi));
  }
}

// dst[q * len + i] = row[i * M + q - pad] for q < M, i < len: one input row, zero-padded
// (pad on the left, zeros past `width`), split into its M column phases (M = 1: a padded
// copy), so that a stride-M access becomes M contiguous ones. M = 2, 4: 8 indices at a
// time by shuffles, the chunk that straddles the row's end from a zero-padded local copy;
// the left edge and other M element by element; the slack past the row zeroed.
template <int M>
GK_INLINE void split_phases(const float* row, int64_t width, int64_t pad, int64_t len, float* dst) {
  auto element = [&](int64_t i, int64_t q) {
    const int64_t col = i * M + q - pad;
    dst[q * len + i] = col >= 0 && col < width ? row[col] : 0.0f;
  };
  if constexpr (M == 1) {
    const int64_t lo = std::min(len, pad), hi = std::max(lo, std::min(len, width + pad));
    gather_padded(dst, row - pad, 1, lo, hi, len);
    return;
  }
  // Indices with some phase inside the row end here; the rest is zeros.
  const int64_t inside_end = std::min(len, (width + pad + M - 1) / M);
  int64_t i = 0;
  if constexpr (M == 2 || M == 4) {
    const int64_t first = std::min(inside_end, (pad + M - 1) / M);  // the first i with i * M >= pad
    for (; i < first; ++i)
      for (int64_t q = 0; q < M; ++q) element(i, q);
    for (; i + 8 <= inside_end && (i + 8) * M - pad <= width; i += 8)
      deinterleave_phases8<M>(row + i * M - pad, len, dst + i);
    if (i < inside_end && i + 8 <= len) {  // the straddling chunk
      float tail[8 * M];
      const int64_t start = i * M - pad, valid = width - start;
      for (int64_t k = 0; k < 8 * M; ++k) tail[k] = k < valid ? row[start + k] : 0.0f;
      deinterleave_phases8<M>(tail, len, dst + i);
      i += 8;
    }
  }
  for (; i < inside_end; ++i)
    for (int64_t q = 0; q < M; ++q) element(i, q);
  for (int64_t q = 0; q < M; ++q) zero_floats(dst + q * len + i, len - i);
}

// The same with the phase count known at run time (a convolution's stride).
GK_INLINE void split_phases(int64_t m, const float* row, int64_t width, int64_t pad, int64_t len, float* dst) {
  switch (m) {
    case 1: return split_phases<1>(row, width, pad, len, dst);
    case 2: return split_phases<2>(row, width, pad, len, dst);
    case 4: return split_phases<4>(row, width, pad, len, dst);
    default:
      for (int64_t q = 0; q < m; ++q)
        for (int64_t i = 0; i < len; ++i) {
          const int64_t col = i * m + q - pad;
          dst[q * len + i] = col >= 0 && col < width ? row[col] : 0.0f;
        }
  }
}

}  // namespace conv
}  // namespace gk
