// Packing of plain strided matrices into micro-panels (the PlainA / PlainB sources).
// Two layouts matter: the panel's short dimension contiguous in memory (a straight copy
// per k step) or its long dimension contiguous (a transpose in 4 x 8 register blocks).
// Written with GCC vector types so the same code compiles to AVX2, SSE or NEON.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/simd.h"
#include "common/weights_memory.h"
#include "gemm/gemm.h"

namespace gk {
namespace {

GK_INLINE v4 low_half(const v8& v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3); }
GK_INLINE v4 high_half(const v8& v) { return __builtin_shufflevector(v, v, 4, 5, 6, 7); }

// Transposes 4 source rows of 8 k steps: on return g[q] holds column q in its low half
// and column q + 4 in its high half, each as {row0, row1, row2, row3} (the 256-bit
// unpack/shuffle pattern; two 128-bit halves each on SSE and NEON).
GK_INLINE void transpose_4x8(const v8& r0, const v8& r1, const v8& r2, const v8& r3, v8 g[4]) {
  const v8 t0 = __builtin_shufflevector(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);
  const v8 t1 = __builtin_shufflevector(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
  const v8 t2 = __builtin_shufflevector(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13);
  const v8 t3 = __builtin_shufflevector(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
  g[0] = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
  g[1] = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
  g[2] = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
  g[3] = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
}

// Writes the 4 x 8 transposed block at dst (k step q at dst + q * width, rows at +0..3).
template <int kWidth>
GK_INLINE void store_transposed(const v8 g[4], float* dst, int width) {
  if (kWidth == 4) {  // the 8 k steps are 32 contiguous floats
    store8(dst, __builtin_shufflevector(g[0], g[1], 0, 1, 2, 3, 8, 9, 10, 11));
    store8(dst + 8, __builtin_shufflevector(g[2], g[3], 0, 1, 2, 3, 8, 9, 10, 11));
    store8(dst + 16, __builtin_shufflevector(g[0], g[1], 4, 5, 6, 7, 12, 13, 14, 15));
    store8(dst + 24, __builtin_shufflevector(g[2], g[3], 4, 5, 6, 7, 12, 13, 14, 15));
    return;
  }
  // Unrolled, so g stays in registers: with a width known only at run time GCC kept the
  // loop, wrote g to the stack and read it back (the tiny path's gather of B's 58 columns
  // was a third of 46x58x175 TT's time then: 10.4 -> 9.1 us).
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    store4(dst + q * width, low_half(g[q]));
    store4(dst + (q + 4) * width, high_half(g[q]));
  }
}

// n floats, n a compile-time width, in whole 32-byte vectors where it can: GCC expands a
// fixed-size memcpy into 16-byte moves under its generic tuning (a 24-float B row was 6).
template <int n>
GK_INLINE void copy_floats(const float* s, float* d) {
  int j = 0;
  for (; j + 8 <= n; j += 8) store8(d + j, load8(s + j));
  for (; j + 4 <= n; j += 4) store4(d + j, load4(s + j));
  for (; j < n; ++j) d[j] = s[j];
}

// The first n < width floats of a row, then zeros to the panel width (a libc memcpy call
// per k step took most of 6x6x100000's time).
GK_INLINE void copy_floats_padded(const float* s, float* d, int64_t n, int width) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) store8(d + j, load8(s + j));
  for (; j + 4 <= n; j += 4) store4(d + j, load4(s + j));
  for (int q = 0; q < 3; ++q)
    if (j + q < n) d[j + q] = s[j + q];
  zero_floats(d + n, width - n);
}

// The same for a row that may be read past n up to the next multiple of 8 (the matrix
// continues: later rows of this packing follow): whole vectors, the lanes past n masked
// off. The edge panel of a small GEMM (17 of 24 columns) was copied float by float and
// branch by branch, a third of a 13x17x19 GEMM's time. Same-process alternation, median
// GFLOP/s, ratio with / without: 13x17x19 1.09, 20^3 1.12, 7x300x300 1.12, 100x7x100
// 1.21, 6x6x100000 1.70, 64x3136x576 1.01.
GK_INLINE void copy_floats_overread(const float* s, float* d, int64_t n, int width, const v8i& tail) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) store8(d + j, load8(s + j));
  if (j < n) {
    store8(d + j, reinterpret_cast<v8>(reinterpret_cast<v8i>(load8(s + j)) & tail));
    j += 8;
  }
  zero_floats(d + j, width - j);
}

// dst[p * width + t] = src[t * s_t + p * s_p] for t < count, zero for count <= t < width.
// `s_t == 1`: each k step copies `count` contiguous floats; `count` may then exceed
//             `width`: panel q of the sources [q * width, (q + 1) * width) goes to dst + q *
//             kc * width, so each source row is read once, as one run (pack_panels).
// `s_p == 1`: each of the `count` sources is contiguous along p: a transpose, in blocks
//             of 4 sources x 8 k steps.
template <int kWidth>
GK_INLINE void pack_panel_impl(const float* src, int64_t s_t, int64_t s_p, int64_t count,
                               int64_t kc, float* dst, int width_runtime) {
  const int width = kWidth > 0 ? kWidth : width_runtime;
  if (s_t == 1) {
    // kSteps k steps at a time across all the panels: their source rows (kSteps runs of
    // `count` floats) stay in L1 while each panel gets kSteps * width contiguous floats.
    constexpr int64_t kSteps = 16;
    // An edge run of n floats may be read as whole vectors when the padded vector stays
    // inside the panel's row (width) and inside the matrix: the rows after p in this
    // packing hold at least the 7 floats it reads past the run.
    auto overread_ok = [&](int64_t p) { return width % 8 == 0 && (kc - 1 - p) * s_p >= 7; };
    auto tail_mask = [](int64_t n) {
      v8i m;
      for (int l = 0; l < 8; ++l) m[l] = l < n % 8 ? -1 : 0;
      return m;
    };
    for (int64_t p0 = 0; p0 < kc; p0 += kSteps) {
      const int64_t p1 = std::min(kc, p0 + kSteps);
      for (int64_t t = 0; t < count; t += width) {
        const int64_t n = std::min<int64_t>(width, count - t);
        const v8i tail = tail_mask(n);  // once per panel, not per k step
        float* d = dst + t * kc + p0 * width;  // panel t / width, k step p0
        for (int64_t p = p0; p < p1; ++p, d += width) {
          const float* s = src + p * s_p + t;
          if (kWidth > 0 && n == kWidth) {
            copy_floats<kWidth>(s, d);
          } else if (overread_ok(p)) {
            copy_floats_overread(s, d, n, width, tail);
          } else {
            copy_floats_padded(s, d, n, width);
          }
        }
      }
    }
    return;
  }
  if (s_p == 1) {
    const int64_t t4 = count / 4 * 4, p8 = kc / 8 * 8;
    for (int64_t p = 0; p < p8; p += 8) {
      float* d = dst + p * width;
      for (int64_t t = 0; t < t4; t += 4) {
        const float* r = src + t * s_t + p;
        v8 g[4];
        transpose_4x8(load8(r), load8(r + s_t), load8(r + 2 * s_t), load8(r + 3 * s_t), g);
        store_transposed<kWidth>(g, d + t, width);
      }
      int64_t done = t4;  // sources (and zero padding) written so far
      if (t4 < count && t4 + 4 <= width) {
        // The last 1-3 sources transposed with zero rows: the partial panel of every M
        // that is not a multiple of MR packed element by element before.
        const float* r = src + t4 * s_t + p;
        const int64_t left = count - t4;
        const v8 zero = {};
        v8 g[4];
        transpose_4x8(load8(r), left > 1 ? load8(r + s_t) : zero, left > 2 ? load8(r + 2 * s_t) : zero,
                      zero, g);
        store_transposed<kWidth>(g, d + t4, width);
        done = t4 + 4;
      }
      for (int64_t t = done; t < count; ++t)
        for (int q = 0; q < 8; ++q) d[q * width + t] = src[t * s_t + p + q];
      for (int64_t t = std::max(count, done); t < width; ++t)
        for (int q = 0; q < 8; ++q) d[q * width + t] = 0.0f;
    }
    for (int64_t p = p8; p < kc; ++p) {
      float* d = dst + p * width;
      for (int64_t t = 0; t < count; ++t) d[t] = src[t * s_t + p];
      zero_floats(d + count, width - count);
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p, dst += width) {
    for (int64_t t = 0; t < count; ++t) dst[t] = src[t * s_t + p * s_p];
    zero_floats(dst + count, width - count);
  }
}

// Dispatches on the panel width so the common kernel shapes get fully unrolled copies.
GK_INLINE void pack_panel_any_width(const float* src, int64_t s_t, int64_t s_p, int64_t count,
                                    int64_t kc, int width, float* dst) {
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

using PackFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int, float*);

// One instance per ISA; the always-inline bodies take the wrapper's target.
void pack_panel_baseline(const float* src, int64_t s_t, int64_t s_p, int64_t count, int64_t kc,
                         int width, float* dst) {
  pack_panel_any_width(src, s_t, s_p, count, kc, width, dst);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void pack_panel_avx2(const float* src, int64_t s_t, int64_t s_p,
                                                     int64_t count, int64_t kc, int width,
                                                     float* dst) {
  pack_panel_any_width(src, s_t, s_p, count, kc, width, dst);
}
#endif

// The AVX2 packing goes with the AVX2 and AVX-512 kernels, the baseline one with the
// others, so that forcing GEMMKIT_KERNEL=generic also tests the baseline packing.
void pack_panel(const float* src, int64_t s_t, int64_t s_p, int64_t count, int64_t kc,
                int width, float* dst) {
#if defined(__x86_64__)
  if (active_config().kernel->simd != SimdLevel::Baseline)
    return pack_panel_avx2(src, s_t, s_p, count, kc, width, dst);
#endif
  pack_panel_baseline(src, s_t, s_p, count, kc, width, dst);
}

// Panels of `width` over `count` sources (panel q at dst + q * kc * width). With the
// sources contiguous (s_t == 1) all at once, k step outermost: a panel at a time read the
// same cache lines once per panel, kc rows ld apart, and with a power-of-two ld those
// rows share a few cache sets, so each panel fetched them again from L3 (the A of a TN
// GEMM, 4 floats of each 16-float line per MR-row panel).
void pack_panels(const float* src, int64_t s_t, int64_t s_p, int64_t count, int64_t kc, int width,
                 float* dst) {
  if (s_t == 1) return pack_panel(src, s_t, s_p, count, kc, width, dst);
  for (int64_t t = 0; t < count; t += width)
    pack_panel(src + t * s_t, s_t, s_p, std::min<int64_t>(width, count - t), kc, width, dst + t * kc);
}

}  // namespace

APanels ASource::block(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr, float* scratch) const {
  for (int64_t r = 0; r < rows; r += mr) panel(i0 + r, std::min<int64_t>(mr, rows - r), k0, kc, mr, scratch + r * kc);
  return {scratch, kc * mr};
}

void BPacker::pack_panels(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const {
  for (int64_t j = 0; j < cols; j += nr) pack_panel(k0, kc, j0 + j, std::min<int64_t>(nr, cols - j), nr, dst + j * kc);
}

APanels PlainA::block(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr, float* scratch) const {
  pack_panels(&a_.at(i0, k0), a_.rs, a_.cs, rows, kc, mr, scratch);
  return {scratch, kc * mr};
}

void PlainB::pack_panels(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const {
  gk::pack_panels(&b_.at(k0, j0), b_.cs, b_.rs, cols, kc, nr, dst);
}

const float* PlainA::panel(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr,
                           float* scratch) const {
  pack_panel(&a_.at(i0, k0), a_.rs, a_.cs, rows, kc, mr, scratch);
  return scratch;
}

PackedA::PackedA(const MatrixView& a, int64_t m, int64_t k, int mr) : k_(k), mr_(mr) {
  const int64_t panels = (m + mr - 1) / mr;
  bytes_ = static_cast<size_t>(panels * mr * std::max<int64_t>(k, 1)) * sizeof(float);
  data_ = static_cast<float*>(allocate_weights(bytes_));
  if (!data_) return;
  for (int64_t i = 0; i < panels; ++i)
    gk::pack_panel(&a.at(i * mr, 0), a.rs, a.cs, std::min<int64_t>(mr, m - i * mr), k, mr,
                   data_ + i * k * mr);
}

PackedA::~PackedA() { free_weights(data_, bytes_); }

APanels PackedA::block(int64_t i0, int64_t, int64_t k0, int64_t, int, float*) const {
  return {data_ + (i0 / mr_) * k_ * mr_ + k0 * mr_, k_ * mr_};
}

const float* PackedA::panel(int64_t i0, int64_t, int64_t k0, int64_t, int mr, float*) const {
  (void)mr;  // equal to mr_: plans run with the kernel configuration they packed for
  return data_ + (i0 / mr_) * k_ * mr_ + k0 * mr_;
}

void PlainB::pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                        float* dst) const {
  gk::pack_panel(&b_.at(k0, j0), b_.cs, b_.rs, cols, kc, nr, dst);
}

// Into L2 (prefetcht1): a whole pass of panels ahead is more than L1 holds. Rows of B
// contiguous: a part is a range of rows; columns contiguous (a transposed B): a range of
// columns, each read along K. (Slicing by K rows there prefetched the line of each column
// once per slice, 16 times over: 27% of a 65x1390x45 TT GEMM.)
void PlainB::prefetch(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t part, int64_t parts) const {
  constexpr int64_t kLineFloats = 16;
  if (part >= parts) return;
  if (b_.cs == 1) {  // kc short rows
    for (int64_t p = k0 + kc * part / parts; p < k0 + kc * (part + 1) / parts; ++p)
      for (int64_t j = 0; j < cols; j += kLineFloats) __builtin_prefetch(&b_.at(p, j0 + j), 0, 2);
  } else {  // cols runs along K (or scattered: one element at a time)
    const int64_t step = b_.rs == 1 ? kLineFloats : 1;
    for (int64_t j = j0 + cols * part / parts; j < j0 + cols * (part + 1) / parts; ++j)
      for (int64_t p = k0; p < k0 + kc; p += step) __builtin_prefetch(&b_.at(p, j), 0, 2);
  }
}

}  // namespace gk
