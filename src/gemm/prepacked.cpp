// The inference-side SGEMM entry points: gk_sgemm_ex (an epilogue applied as C is stored),
// gk_sgemm_pack / gk_sgemm_compute (an operand packed once, oneMKL's pack / compute).
//
// A packed operand is the library's own micro-panels for the active kernel, over the whole
// K, so the driver reads them where they are (as conv reads its weights): packing that
// operand leaves every call. Internally C is row-stored: a row-major call's A, and a
// column-major call's B (its op(B)^T is the internal A), become MR-row panels; the other
// two become NR-wide panels of the internal B, which the driver copies rather than packs.
#include "gemm/prepacked.h"

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <omp.h>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "common/simd.h"
#include "gemm/partition.h"
#include "gemmkit.h"

#define GK_EXPORT extern "C" __attribute__((visibility("default")))

namespace gk {

int64_t packed_panel_floats(const KernelInfo& kernel, int64_t rows, int64_t k) {
  // Plus a vector's slack: the narrow loop reads whole vectors from a panel's last K step.
  return std::max(round_up(rows, kernel.mr), round_up(rows, kernel.nr)) * k + kPackSlackFloats;
}

void PrepackedB::pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const {
  if (j0 % nr_ == 0 && nr == nr_) {  // one panel's rows [k0, k0 + kc): a contiguous run
    std::memcpy(dst, data_ + (j0 / nr_) * k_ * nr_ + k0 * nr_, size_t(kc * nr_) * sizeof(float));
    return;
  }
  // A narrower kernel's panel, or one that starts inside a packed panel (16 + 16 of a
  // 24-wide kernel): each row in runs that stay within one packed panel. Columns past the
  // matrix are zeros in the packed panels; past `cols` they are written as zeros.
  for (int64_t p = 0; p < kc; ++p) {
    float* d = dst + p * nr;
    for (int64_t t = 0; t < cols;) {
      const int64_t j = j0 + t, q = j / nr_, off = j % nr_;
      const int64_t run = std::min<int64_t>(cols - t, nr_ - off);
      std::memcpy(d + t, data_ + q * k_ * nr_ + (k0 + p) * nr_ + off, size_t(run) * sizeof(float));
      t += run;
    }
    std::fill(d + cols, d + nr, 0.0f);
  }
}

// Into L2 (prefetcht1), as PlainB's: part `part` of the cache lines of the region's panels.
void PrepackedB::prefetch(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t part, int64_t parts) const {
  constexpr int64_t kLineFloats = 16;
  if (part >= parts || cols <= 0) return;
  const int64_t q0 = j0 / nr_, q1 = (j0 + cols - 1) / nr_;
  const int64_t lines = ceil_div(kc * nr_, kLineFloats), total = lines * (q1 - q0 + 1);
  for (int64_t l = total * part / parts; l < total * (part + 1) / parts; ++l)
    __builtin_prefetch(data_ + (q0 + l / lines) * k_ * nr_ + k0 * nr_ + (l % lines) * kLineFloats, 0, 2);
}

namespace {

// ---- A few columns against packed MR-row panels (or a few rows against NR-wide panels).
//
// The driver runs such a product on its MR x NR kernel, most of whose columns are then
// padding (n = 1 on AVX-512's 14x32: 1 in 32), and packs B for it. Here each packed panel
// is streamed once: for every K step, its row of W floats (one or two vectors) times each
// of S values of the small operand, the S x W sums in registers. The small operand is
// gathered once per call into rows of S floats. A panel's rows run W = MR (C's rows: the
// packed internal A) or W = NR (C's columns: the packed internal B).


template <typename V>
GK_INLINE V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The sums of P panels, R x C vectors each, from out + t * out_stride (accumulate) or zero.
template <typename V, int P, int R, int C>
GK_INLINE void start_sums(V (&acc)[P][R][C], const float* out, int64_t out_stride, bool accumulate) {
  constexpr int kLanes = int(sizeof(V) / sizeof(float));
#pragma GCC unroll 4
  for (int t = 0; t < P; ++t)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[t][r][c] = accumulate ? load_v<V>(out + t * out_stride + (r * C + c) * kLanes) : V{};
}

// For each of P panels side by side (panel t at panel + t * panel_stride, its sums at
// out + t * out_stride): acc[s][w] = sum over K of panel[p][w * lanes + ...] * x[p * ldx +
// s], for s < S and WV vectors of lanes; a panel's K steps `width` floats apart (vectors
// may read past a step's width into the next one, and up to a vector past the last
// panel: the buffer's slack). accumulate: the sums start from out.
template <typename V, int WV, int S, int P>
GK_INLINE void panels_times_values(const float* panel, int64_t panel_stride, int64_t width, int64_t k,
                                   const float* x, int64_t ldx, bool accumulate, float* out, int64_t out_stride) {
  constexpr int kLanes = int(sizeof(V) / sizeof(float));
  // Unrolled, so that the sums stay in registers (a loop over S kept them in memory: 1024 x
  // 8 x 1024 ran 4x below the FMA rate).
  V acc[P][S][WV];
  start_sums(acc, out, out_stride, accumulate);
  for (int64_t p = 0; p < k; ++p) {
#pragma GCC unroll 4
    for (int t = 0; t < P; ++t) {
      V a[WV];
#pragma GCC unroll 4
      for (int w = 0; w < WV; ++w) a[w] = load_v<V>(panel + t * panel_stride + p * width + w * kLanes);
#pragma GCC unroll 16
      for (int s = 0; s < S; ++s) {
        const float xv = x[p * ldx + s];
#pragma GCC unroll 4
        for (int w = 0; w < WV; ++w) acc[t][s][w] += a[w] * xv;
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < P; ++t) std::memcpy(out + t * out_stride, acc[t], sizeof acc[t]);
}

// The same for a runtime S (1..kNarrowMaxS), on as many of `avail` panels as it takes
// together (returned). With few sums, several panels side by side: one panel's sums are
// chains of dependent FMAs (4 cycles a step: a layer on one token ran at the FMA latency),
// and one stream of panels fetched from memory ran 12-15% below GEMV's several rows.
constexpr int kNarrowMaxS = 16;
template <typename V, int WV, int S = 1>
GK_INLINE int panels_times_values_any(int s, int64_t avail, const float* panel, int64_t panel_stride,
                                      int64_t width, int64_t k, const float* x, int64_t ldx, bool accumulate,
                                      float* out, int64_t out_stride) {
  if constexpr (S < kNarrowMaxS) {
    if (s != S)
      return panels_times_values_any<V, WV, S + 1>(s, avail, panel, panel_stride, width, k, x, ldx, accumulate,
                                                   out, out_stride);
  }
  constexpr int P = S * WV <= 2 ? 4 : S * WV <= 4 ? 2 : 1;
  if (P > 1 && avail >= P) {
    panels_times_values<V, WV, S, P>(panel, panel_stride, width, k, x, ldx, accumulate, out, out_stride);
    return P;
  }
  panels_times_values<V, WV, S, 1>(panel, panel_stride, width, k, x, ldx, accumulate, out, out_stride);
  return 1;
}

using PanelTimesValues = int (*)(int, int64_t, const float*, int64_t, int64_t, int64_t, const float*, int64_t, bool,
                                 float*, int64_t);

#define GK_NARROW_VARIANT(suffix, target_attr, vec, wv)                                                         \
  target_attr int panel_times_values_##suffix(int s, int64_t avail, const float* panel, int64_t panel_stride,  \
                                              int64_t width, int64_t k, const float* x, int64_t ldx, bool acc, \
                                              float* out, int64_t out_stride) {                                \
    return panels_times_values_any<vec, wv>(s, avail, panel, panel_stride, width, k, x, ldx, acc, out,         \
                                            out_stride);                                                        \
  }
GK_NARROW_VARIANT(v8x1, , v8, 1)
GK_NARROW_VARIANT(v8x2, , v8, 2)
GK_NARROW_VARIANT(v8x3, , v8, 3)
GK_NARROW_VARIANT(v8x4, , v8, 4)
#if defined(__x86_64__)
GK_NARROW_VARIANT(avx2x1, __attribute__((target("avx2,fma"))), v8, 1)
GK_NARROW_VARIANT(avx2x2, __attribute__((target("avx2,fma"))), v8, 2)
GK_NARROW_VARIANT(avx2x3, __attribute__((target("avx2,fma"))), v8, 3)
GK_NARROW_VARIANT(avx2x4, __attribute__((target("avx2,fma"))), v8, 4)
GK_NARROW_VARIANT(avx512x1, __attribute__((target("avx512f,avx2,fma"))), v16, 1)
GK_NARROW_VARIANT(avx512x2, __attribute__((target("avx512f,avx2,fma"))), v16, 2)
#endif

// The loop for a panel width on this kernel's ISA, and its vector width in floats; nullptr
// when the panel takes more than the variants cover.
PanelTimesValues narrow_loop(const KernelInfo& ker, int64_t width, int* lanes) {
  (void)ker;  // the ISA level matters on x86-64 only
#if defined(__x86_64__)
  if (ker.simd == SimdLevel::Avx512 && width <= 32) {
    *lanes = 16;
    return width <= 16 ? panel_times_values_avx512x1 : panel_times_values_avx512x2;
  }
  if (ker.simd != SimdLevel::Baseline && width <= 32) {
    *lanes = 8;
    const PanelTimesValues f[] = {panel_times_values_avx2x1, panel_times_values_avx2x2, panel_times_values_avx2x3,
                                  panel_times_values_avx2x4};
    return f[ceil_div(width, 8) - 1];
  }
#endif
  if (width > 32) return nullptr;
  *lanes = 8;
  const PanelTimesValues f[] = {panel_times_values_v8x1, panel_times_values_v8x2, panel_times_values_v8x3,
                                panel_times_values_v8x4};
  return f[ceil_div(width, 8) - 1];
}

// ---- The other orientation, for packed A: each of C's W rows of a panel as vectors of the
// small operand's values. Per K step, the row of S values is loaded as SV vectors and each
// of the panel's W floats broadcast against them, so every lane computes a sum whenever S
// fills the vectors, where the loop above leaves lanes idle on a W that does not (14 of 16
// on AVX-512's 14x32, 4 of 8 on AVX2's 4x24). Row r of panel t sums at out + t *
// out_stride + r * SV * lanes; the rows of values are SV * lanes floats, zero-padded.
template <typename V, int W, int SV, int P>
GK_INLINE void panels_rows_times_vectors(const float* panel, int64_t panel_stride, int64_t k, const float* x,
                                         int64_t ldx, bool accumulate, float* out, int64_t out_stride) {
  constexpr int kLanes = int(sizeof(V) / sizeof(float));
  V acc[P][W][SV];
  start_sums(acc, out, out_stride, accumulate);
  for (int64_t p = 0; p < k; ++p) {
    V xv[SV];
#pragma GCC unroll 2
    for (int v = 0; v < SV; ++v) xv[v] = load_v<V>(x + p * ldx + v * kLanes);
#pragma GCC unroll 4
    for (int t = 0; t < P; ++t)
#pragma GCC unroll 16
      for (int r = 0; r < W; ++r) {
        const float a = panel[t * panel_stride + p * W + r];
#pragma GCC unroll 2
        for (int v = 0; v < SV; ++v) acc[t][r][v] += a * xv[v];
      }
  }
#pragma GCC unroll 4
  for (int t = 0; t < P; ++t) std::memcpy(out + t * out_stride, acc[t], sizeof acc[t]);
}

// On P panels side by side when `avail` has them (returned: the panels done), else one.
// Its signature is PanelTimesValues' (s and width are the template's).
template <typename V, int W, int SV, int P>
GK_INLINE int panels_rows_any(int, int64_t avail, const float* panel, int64_t panel_stride, int64_t, int64_t k,
                              const float* x, int64_t ldx, bool accumulate, float* out, int64_t out_stride) {
  if (P > 1 && avail >= P) {
    panels_rows_times_vectors<V, W, SV, P>(panel, panel_stride, k, x, ldx, accumulate, out, out_stride);
    return P;
  }
  panels_rows_times_vectors<V, W, SV, 1>(panel, panel_stride, k, x, ldx, accumulate, out, out_stride);
  return 1;
}

#if defined(__x86_64__)
// P: as many rows of sums as the registers hold beside the values (32 zmm, 16 ymm).
#define GK_ROWS_VARIANT(suffix, target_attr, vec, w, sv, p)                                                      \
  target_attr int panel_rows_##suffix(int s, int64_t avail, const float* panel, int64_t panel_stride,           \
                                      int64_t width, int64_t k, const float* x, int64_t ldx, bool acc,          \
                                      float* out, int64_t out_stride) {                                        \
    return panels_rows_any<vec, w, sv, p>(s, avail, panel, panel_stride, width, k, x, ldx, acc, out, out_stride); \
  }
GK_ROWS_VARIANT(avx512_14x1, __attribute__((target("avx512f,avx2,fma"))), v16, 14, 1, 2)
GK_ROWS_VARIANT(avx2_4x1, __attribute__((target("avx2,fma"))), v8, 4, 1, 3)
GK_ROWS_VARIANT(avx2_4x2, __attribute__((target("avx2,fma"))), v8, 4, 2, 1)
GK_ROWS_VARIANT(avx2_6x1, __attribute__((target("avx2,fma"))), v8, 6, 1, 2)
#endif

// The rows loop for `small` values against W-row packed A panels when it keeps more lanes
// busy than the narrow loop (nullptr otherwise), with its vectors' floats per row of values.
PanelTimesValues rows_loop(const KernelInfo& ker, int64_t small, int64_t* row_floats) {
  (void)ker, (void)small, (void)row_floats;
#if defined(__x86_64__)
  const int lanes = ker.simd == SimdLevel::Avx512 ? 16 : ker.simd == SimdLevel::Avx2 ? 8 : 0;
  if (!lanes) return nullptr;
  const int64_t vectors = ceil_div(small, lanes), w = ker.mr;
  // Busy lanes: small / (vectors * lanes) here against w / (ceil(w / lanes) * lanes) there.
  if (small * ceil_div(w, lanes) <= w * vectors) return nullptr;
  *row_floats = vectors * lanes;
  if (lanes == 16 && w == 14 && vectors == 1) return panel_rows_avx512_14x1;
  if (lanes == 8 && w == 4) return vectors == 1 ? panel_rows_avx2_4x1 : vectors == 2 ? panel_rows_avx2_4x2 : nullptr;
  if (lanes == 8 && w == 6 && vectors == 1) return panel_rows_avx2_6x1;
#endif
  return nullptr;
}

// Up to this many columns (rows) against packed A (B) panels, the narrow loop rather than
// the driver. See narrow_serves().
constexpr int64_t kNarrowMaxColumns = 16;
constexpr int64_t kNarrowKBlock = 256;

// The most values the narrow loop takes at once on panels of `vectors` vectors of `lanes`:
// sums in half of AVX-512's 32 registers, or 12 of AVX2's 16 (the panel's vectors and a
// broadcast need the rest).
int64_t narrow_chunk_max(int64_t vectors, int lanes) {
  return std::max<int64_t>(1, (lanes == 16 ? kNarrowMaxS : 12) / vectors);
}

// The values of one chunk: at most narrow_chunk_max, in chunks of equal size.
int64_t narrow_chunk(int64_t small, int64_t vectors, int lanes) {
  return ceil_div(small, ceil_div(small, narrow_chunk_max(vectors, lanes)));
}

// A packed operand's panels of width W against `small` <= kNarrowMaxColumns columns (A side)
// or rows (B side) of a plain operand: whether the narrow loop takes it. The driver's
// kernel computes NR (MR) of them at once whatever their number, the narrow loop only those
// there are. A side: from about half the kernel's NR the driver is as fast. B side: while
// the narrow loop takes the rows in at most two chunks (each streams the panel again).
// Column-major 1024 x N x 1024 with A packed (internally N rows against packed B), 1
// thread, ms, driver / narrow: AVX-512 N 16 0.47 / 0.20, N 12 0.31 / 0.17; AVX2 6x16 N 12
// 0.40 / 0.36, N 16 0.53 / 0.53; AVX2 4x24 (5 rows a chunk) N 12 0.42 / 0.41, N 16 0.47 / 0.61.
bool narrow_serves(const KernelInfo& ker, int64_t small, bool a_side) {
  int lanes = 0;
  const int64_t width = a_side ? ker.mr : ker.nr;
  if (!narrow_loop(ker, width, &lanes) || small > kNarrowMaxColumns) return false;
  // (The baseline code's vectors take two registers each: its sums would not fit.)
  if (a_side || ker.simd == SimdLevel::Baseline) return small <= (a_side ? ker.nr : ker.mr) / 2 + 1;
  return ceil_div(small, narrow_chunk_max(ceil_div(width, lanes), lanes)) <= 2;
}

// Where the narrow loop finds its panels: packed ones (panel q at q * K * W, K steps W
// apart), or a plain B's own rows (panel q at q * W, K steps ldb apart) with its last,
// partial panel packed into `tail`.
struct NarrowPanels {
  const float* data;
  int64_t q_stride, k_stride;
  const float* tail = nullptr;
};

// C (m x n, row stride rs_c) = act(alpha A B + beta C + bias) with one operand in panels and
// the other's `small` dimension (n for packed A, m for B's panels) narrow. Panels of width
// W over `wide` rows (A side) or columns (B side); `plain` the other operand's view.
bool gemm_narrow(int64_t m, int64_t n, int64_t k, float alpha, const NarrowPanels& panels, bool a_side,
                 const MatrixView& plain, float beta, float* c, int64_t rs_c, const Epilogue& e) {
  const KernelInfo& ker = *active_config().kernel;
  const int64_t width = a_side ? ker.mr : ker.nr;
  const int64_t small = a_side ? n : m, wide = a_side ? m : n;
  int lanes = 0;
  int64_t row_floats = 0;  // the rows loop's: values per padded row, sums per row of C
  const PanelTimesValues rows = a_side ? rows_loop(ker, small, &row_floats) : nullptr;
  const PanelTimesValues loop = rows ? rows : narrow_loop(ker, width, &lanes);
  // The small operand as k rows of `small` floats (the rows loop's padded to row_floats):
  // B (k x n) as it is when its rows are contiguous and need no padding, else gathered;
  // A (m x k) transposed.
  const int64_t padded = rows ? row_floats : small;
  const float* x = nullptr;
  int64_t ldx = padded;
  if (a_side && plain.cs == 1 && padded == small) {
    x = plain.p, ldx = plain.rs;
  } else {
    float* g = scratch(ScratchSlot::Edge, k * padded);
    if (!g) return workspace_unavailable("the narrow operand", k * padded);
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t s = 0; s < small; ++s) g[p * padded + s] = a_side ? plain.at(p, s) : plain.at(s, p);
      std::fill(g + p * padded + small, g + (p + 1) * padded, 0.0f);
    }
    x = g;
  }
  const int64_t count = ceil_div(wide, width);
  const int threads = static_cast<int>(std::min<int64_t>(
      threads_for(std::max(2.0 * double(m) * double(n) * double(k), 32.0 * double(wide) * double(k))), count));
  // K in blocks whose rows of the small operand stay in L1 (kNarrowKBlock rows of at most a
  // cache line or two: 16 KiB) while every panel of the thread runs through them: without them
  // each panel read all of it again from L2 (1024 x 16 x 1024: 0.33 ms, blocked 0.2x ms).
  // The sums of each panel wait in a buffer of the thread's between blocks: (s, w) at
  // out[s * stride + w] from the narrow loop, out[w * row_floats + s] from the rows loop.
  // The narrow loop takes the values in chunks whose sums fit in registers.
  const int64_t vectors = rows ? 0 : ceil_div(width, lanes), stride = vectors * lanes;
  const int64_t s_step = rows ? small : narrow_chunk(small, vectors, lanes);
  const int64_t per_panel = rows ? width * row_floats : small * stride;
  // On B's own rows each K step of a panel is another row, often another page: 128 of them
  // a block keep their translations near while every panel of the thread passes (row-major
  // 16x1024x1024, 1 thread: 0.35 ms in blocks of 256, 0.29 / 0.27 / 0.26 in 32 / 64 / 128).
  const int64_t k_block = panels.k_stride != width ? kNarrowKBlock / 2
                                                   : std::max<int64_t>(kNarrowKBlock, kNarrowKBlock * 16 / small);
  const ThreadParts sums = thread_parts(ScratchSlot::PackedB, threads, ceil_div(count, threads) * per_panel);
  if (!sums.parts) return workspace_unavailable("the narrow sums", threads * ceil_div(count, threads) * per_panel);
  parallel_region(threads, [&] {
    const Range mine = share(count, omp_get_thread_num(), omp_get_num_threads(), 1, count);
    float* part = sums.part(omp_get_thread_num());
    for_each_balanced_block(k, k_block, 1, [&](int64_t k0, int64_t kc) {
      for (int64_t s0 = 0; s0 < small; s0 += s_step)
        for (int64_t q = mine.begin; q < mine.end;) {
          const bool tail = panels.tail && q == count - 1;
          const float* panel = tail ? panels.tail + k0 * width : panels.data + q * panels.q_stride + k0 * panels.k_stride;
          const int64_t avail = tail ? 1 : std::min(mine.end, panels.tail ? count - 1 : count) - q;
          q += loop(int(std::min<int64_t>(s_step, small - s0)), avail, panel, panels.q_stride,
                    tail ? width : panels.k_stride, kc, x + k0 * ldx + s0, ldx, k0 > 0,
                    part + (q - mine.begin) * per_panel + s0 * stride, per_panel);
        }
    });
    for (int64_t q = mine.begin; q < mine.end; ++q) {
      const int64_t w0 = q * width, wn = std::min(width, wide - w0);
      const float* out = part + (q - mine.begin) * per_panel;
      if (rows) {  // C's rows w0.. from rows of sums, then the epilogue on them
        for (int64_t w = 0; w < wn; ++w) {
          float* c_row = c + (w0 + w) * rs_c;
          const float* sum = out + w * row_floats;
          if (beta == 0.0f)
            for (int64_t s = 0; s < small; ++s) c_row[s] = alpha * sum[s];
          else
            for (int64_t s = 0; s < small; ++s) c_row[s] = alpha * sum[s] + beta * c_row[s];
        }
        if (e.active()) apply_epilogue(e, c + w0 * rs_c, rs_c, wn, small, w0, 0);
        continue;
      }
      for (int64_t s = 0; s < small; ++s)
        for (int64_t w = 0; w < wn; ++w) {
          const int64_t i = a_side ? w0 + w : s, j = a_side ? s : w0 + w;
          float& cv = c[i * rs_c + j];
          float v = alpha * out[s * stride + w];
          if (beta != 0.0f) v += beta * cv;
          if (e.bias_mode != BiasMode::None) v += e.bias[e.bias_mode == BiasMode::PerRow ? i : j];
          if (e.act != Activation::None) v = std::max(v, 0.0f);
          if (e.act == Activation::Relu6) v = std::min(v, 6.0f);
          cv = v;
        }
    }
  });
  return true;
}

}  // namespace

bool few_rows_b_in_place_serves(const KernelConfig& cfg, int64_t m, int64_t n, const MatrixView& b) {
  const KernelInfo& ker = *cfg.kernel;
  int lanes = 0;
  // Whole vectors per panel row (the loop reads no further), at least one whole panel, and
  // a kernel whose driver reads B in place too (panel rows of whole cache lines; 4x24's
  // straddle lines and keep the driver here as well).
  return ker.simd != SimdLevel::Baseline && b.cs == 1 && n >= ker.nr && cfg.paths.b_in_place_min_panel_bytes > 0 &&
         narrow_serves(ker, m, false) && narrow_loop(ker, ker.nr, &lanes) && ker.nr % lanes == 0;
}

bool gemm_few_rows_b_in_place(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b,
                              float beta, float* c, int64_t rs_c, const Epilogue& e) {
  const int64_t nr = active_config().kernel->nr, full = n / nr * nr;
  float* tail = nullptr;
  if (full < n) {
    tail = scratch(ScratchSlot::PackedA, k * nr);
    if (!tail) return workspace_unavailable("the last panel of B", k * nr);
    PlainB(b).pack_panel(0, k, full, n - full, int(nr), tail);
  }
  return gemm_narrow(m, n, k, alpha, {b.p, nr, b.rs, tail}, false, a, beta, c, rs_c, e);
}

namespace {

uint64_t header_checksum(const PackHeader& h) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(&h);
  uint64_t x = 1469598103934665603ull;
  for (size_t i = 0; i < offsetof(PackHeader, checksum); ++i) x = (x ^ p[i]) * 1099511628211ull;
  return x;
}

bool valid_trans(int t) { return t == CblasNoTrans || t == CblasTrans || t == CblasConjTrans; }

// rows x k of the operand `which` (op(A) m x k, op(B) k x n), or false when too large.
int64_t packed_rows(gk_pack_operand which, int64_t m, int64_t n) { return which == GK_PACK_A ? m : n; }

bool size_in_range(const char* fn, const KernelInfo& kernel, int64_t rows, int64_t k, int64_t* bytes) {
  // Below 2^62 bytes whatever the rounding: rows and k each below 2^29 would be too
  // strict for a long K, so the product is checked.
  int64_t floats = 0;
  const int64_t padded = round_up(std::max<int64_t>(rows, 0), int64_t{64});
  if (rows > (int64_t{1} << 40) || k > (int64_t{1} << 40) || __builtin_mul_overflow(padded, k, &floats) ||
      floats > (int64_t{1} << 59)) {
    set_last_error("%s: a packed %" PRId64 " x %" PRId64 " operand is too large", fn, rows, k);
    return false;
  }
  *bytes = kPackHeaderBytes + packed_panel_floats(kernel, rows, k) * int64_t(sizeof(float));
  return true;
}

Activation activation_of(gk_activation a) {
  return a == GK_ACT_RELU ? Activation::Relu : a == GK_ACT_RELU6 ? Activation::Relu6 : Activation::None;
}

// The caller's epilogue as the internal problem's (row-stored C: a column-major call's
// rows are its columns), or false with a message.
bool internal_epilogue(const char* fn, const gk_epilogue* e, bool row_major, Epilogue* out) {
  *out = Epilogue{};
  if (!e) return true;
  const int bias_mode = raw_enum(e->bias_mode), activation = raw_enum(e->activation);
  if (bias_mode != GK_BIAS_NONE && bias_mode != GK_BIAS_PER_ROW && bias_mode != GK_BIAS_PER_COLUMN) {
    set_last_error("%s: epilogue->bias_mode %d is not a gk_bias_mode", fn, bias_mode);
    return false;
  }
  if (activation != GK_ACT_NONE && activation != GK_ACT_RELU && activation != GK_ACT_RELU6) {
    set_last_error("%s: epilogue->activation %d is not a gk_activation", fn, activation);
    return false;
  }
  if (e->bias_mode != GK_BIAS_NONE && !e->bias) {
    set_last_error("%s: epilogue->bias is NULL with a bias mode", fn);
    return false;
  }
  out->act = activation_of(e->activation);
  if (e->bias_mode != GK_BIAS_NONE) {
    out->bias = e->bias;
    out->bias_mode = (e->bias_mode == GK_BIAS_PER_ROW) == row_major ? BiasMode::PerRow : BiasMode::PerColumn;
  }
  return true;
}

// ld >= max(1, what the stored matrix needs) for a rows x cols operand stored in `row_major`.
bool check_ld(const char* fn, const char* name, int64_t ld, bool row_major, int64_t rows, int64_t cols) {
  const int64_t need = std::max<int64_t>(1, row_major ? cols : rows);
  if (ld < need) {
    set_last_error("%s: %s %" PRId64 " is less than max(1, %" PRId64 ")", fn, name, ld, row_major ? cols : rows);
    return false;
  }
  return true;
}

// One operand of the internal row-stored problem: a plain view, or packed panels.
struct Side {
  const float* panels = nullptr;  // non-null: packed
  MatrixView view{nullptr, 0, 0};
};

// C (m x n, row stride rs_c) = act(alpha A B + beta C + bias) on the internal operands.
// Both plain: the path sgemm_rowstored would take, with the epilogue fused where that path
// has one (packed and no-pack paths) and applied after it elsewhere (GEMV, tiny, in-place
// A: few columns or small C). Any packed: the driver, reading those panels in place.
void run_rowstored(int64_t m, int64_t n, int64_t k, float alpha, const Side& a, const Side& b, float beta, float* c,
                   int64_t rs_c, const Epilogue& e) {
  if (m == 0 || n == 0) return;
  if (alpha == 0.0f || k == 0) {  // C = act(beta C + bias), A and B not read
    if (beta != 1.0f || e.active()) scale_c(beta, c, rs_c, m, n, e);
    return;
  }
  const KernelConfig& cfg = active_config();
  const PlainA plain_a(a.view);
  const PlainB plain_b(b.view);
  const PrepackedA packed_a(a.panels, k, cfg.kernel->mr);
  const PrepackedB packed_b(b.panels, k, cfg.kernel->nr);
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
  p.a = a.panels ? static_cast<const ASource*>(&packed_a) : &plain_a;
  p.b = b.panels ? static_cast<const BPacker*>(&packed_b) : &plain_b;
  p.c = c, p.rs_c = rs_c, p.epilogue = e;
  if (!a.panels && !b.panels) {
    const GemmPathChoice choice = choose_gemm_path(p, a.view, b.view, cfg);
    if (choice.path == GemmPath::Small) {
      if (!gemm_small(p, a.view, b.view, cfg)) gemm_no_heap(p, cfg);
      return;
    }
    if (choice.path == GemmPath::FewRowsBInPlace &&
        gemm_few_rows_b_in_place(m, n, k, alpha, a.view, b.view, beta, c, rs_c, e))
      return;
    if (choice.path != GemmPath::PackedPerPanel && choice.path != GemmPath::PackedSharedB) {
      sgemm_rowstored(m, n, k, alpha, a.view, b.view, beta, c, rs_c);
      if (e.active()) apply_epilogue(e, c, rs_c, m, n, 0, 0);
      return;
    }
    gemm_packed(p, cfg, choice.threads);
    return;
  }
  // One operand packed, the other narrow: the narrow loop (the driver if it lacks memory).
  if ((a.panels != nullptr) != (b.panels != nullptr)) {
    const bool a_side = a.panels != nullptr;
    const int64_t width = a_side ? cfg.kernel->mr : cfg.kernel->nr;
    if (narrow_serves(*cfg.kernel, a_side ? n : m, a_side) &&
        gemm_narrow(m, n, k, alpha, {a_side ? a.panels : b.panels, k * width, width}, a_side, a_side ? b.view : a.view,
                    beta, c, rs_c, e))
      return;
  }
  const int threads = threads_for(2.0 * double(m) * double(n) * double(k));
  // B packed, A plain with its rows along K: the in-place-A path reads A where it is and
  // takes B through its packer, as the unpacked call would (column-major 64x3136x576 with
  // the weight packed: the driver, packing the activation, ran 0.73x the unpacked call).
  if (!a.panels && in_place_a_serves(cfg.paths, p, a.view) && gemm_in_place_a(p, a.view, cfg, threads)) return;
  gemm_packed(p, cfg, threads);
}

// A packed buffer's header, checked against what the call says it is; nullptr with a message.
const PackHeader* checked_header(const char* fn, const char* name, const void* buffer, gk_pack_operand which,
                                 bool row_major, int64_t rows, int64_t k) {
  if (!buffer) {
    set_last_error("%s: packed %s is NULL", fn, name);
    return nullptr;
  }
  if (reinterpret_cast<uintptr_t>(buffer) % 64) {
    set_last_error("%s: packed %s at %p is not 64-byte aligned (as gk_sgemm_pack requires)", fn, name, buffer);
    return nullptr;
  }
  const PackHeader* h = static_cast<const PackHeader*>(buffer);
  if (h->magic != kPackMagic || h->header_bytes != kPackHeaderBytes) {
    set_last_error("%s: %s is not a buffer from gk_sgemm_pack (no header)", fn, name);
    return nullptr;
  }
  if (h->version != kPackVersion) {
    set_last_error("%s: %s was packed in format version %u, this library reads %u: pack again", fn, name,
                   unsigned(h->version), unsigned(kPackVersion));
    return nullptr;
  }
  if (h->checksum != header_checksum(*h)) {
    set_last_error("%s: the header of packed %s is corrupted (checksum mismatch)", fn, name);
    return nullptr;
  }
  if (h->operand != which) {
    set_last_error("%s: %s holds a packed %s", fn, name, h->operand == GK_PACK_A ? "A" : "B");
    return nullptr;
  }
  if (bool(h->row_major) != row_major) {
    set_last_error("%s: %s was packed for %s order, the call is %s", fn, name, h->row_major ? "row-major" : "column-major",
                   row_major ? "row-major" : "column-major");
    return nullptr;
  }
  const KernelInfo& ker = *active_config().kernel;
  if (std::strncmp(h->kernel, ker.name, sizeof h->kernel) != 0 || h->mr != ker.mr || h->nr != ker.nr) {
    set_last_error("%s: %s was packed for kernel %.32s (%dx%d), this call runs %s (%dx%d): pack again", fn, name,
                   h->kernel, int(h->mr), int(h->nr), ker.name, ker.mr, ker.nr);
    return nullptr;
  }
  if (h->rows != rows || h->k != k) {
    const bool a = which == GK_PACK_A;
    set_last_error("%s: %s was packed as %" PRId64 " x %" PRId64 ", the call needs %" PRId64 " x %" PRId64, fn, name,
                   a ? h->rows : h->k, a ? h->k : h->rows, a ? rows : k, a ? k : rows);
    return nullptr;
  }
  if (h->panel_floats != packed_panel_floats(ker, rows, k)) {
    set_last_error("%s: the header of packed %s is inconsistent (%" PRId64 " panel floats)", fn, name, h->panel_floats);
    return nullptr;
  }
  return h;
}

const float* panels_of(const PackHeader* h) {
  return reinterpret_cast<const float*>(reinterpret_cast<const char*>(h) + kPackHeaderBytes);
}

// The arguments gk_sgemm_compute and gk_sgemm_ex share, as the caller passed them: order
// and trans by their values until checked (GK_PACKED, 151, is no CBLAS_TRANSPOSE value).
struct CallArgs {
  int order, transa, transb;
  int64_t m, n, k;
  float alpha;  // gk_sgemm_ex's; gk_sgemm_compute's is its packed operands'
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
  const gk_epilogue* epilogue;
};

// What the checks found: the packed operands' headers (null: a plain operand), the
// internal epilogue and the alpha that applies.
struct CheckedCall {
  bool row_major = true;
  const PackHeader* ha = nullptr;
  const PackHeader* hb = nullptr;
  Epilogue e;
  float alpha = 1.0f;
};

bool check_trans(const char* fn, const char* name, int t, bool packed_allowed) {
  if (valid_trans(t) || (packed_allowed && t == GK_PACKED)) return true;
  set_last_error(packed_allowed ? "%s: %s %d is neither a CBLAS_TRANSPOSE nor GK_PACKED" : "%s: %s %d is not a CBLAS_TRANSPOSE",
                 fn, name, t);
  return false;
}

// Every argument of a call, in order: order, transa / transb (GK_PACKED too when
// packed_allowed), m, n and k, the packed operands' headers, the plain operands' and C's
// leading dimensions, the epilogue, then the pointers the call will read or write. false
// with a message naming the first bad one.
bool check_operands(const char* fn, const CallArgs& x, bool packed_allowed, CheckedCall* out) {
  if (x.order != CblasRowMajor && x.order != CblasColMajor) {
    set_last_error("%s: order %d is not a CBLAS_ORDER", fn, x.order);
    return false;
  }
  if (!check_trans(fn, "transa", x.transa, packed_allowed) || !check_trans(fn, "transb", x.transb, packed_allowed))
    return false;
  if (x.m < 0 || x.n < 0 || x.k < 0) {
    set_last_error("%s: m %" PRId64 ", n %" PRId64 " and k %" PRId64 " must be >= 0", fn, x.m, x.n, x.k);
    return false;
  }
  const bool row_major = out->row_major = x.order == CblasRowMajor;
  const bool pa = x.transa == GK_PACKED, pb = x.transb == GK_PACKED;
  const bool ta = x.transa != CblasNoTrans, tb = x.transb != CblasNoTrans;
  if (pa && !(out->ha = checked_header(fn, "a", x.a, GK_PACK_A, row_major, x.m, x.k))) return false;
  if (pb && !(out->hb = checked_header(fn, "b", x.b, GK_PACK_B, row_major, x.n, x.k))) return false;
  if ((!pa && !check_ld(fn, "lda", x.lda, row_major, ta ? x.k : x.m, ta ? x.m : x.k)) ||
      (!pb && !check_ld(fn, "ldb", x.ldb, row_major, tb ? x.n : x.k, tb ? x.k : x.n)) ||
      !check_ld(fn, "ldc", x.ldc, row_major, x.m, x.n) || !internal_epilogue(fn, x.epilogue, row_major, &out->e))
    return false;
  out->alpha = x.alpha * (out->ha ? out->ha->alpha : 1.0f) * (out->hb ? out->hb->alpha : 1.0f);
  if (x.m == 0 || x.n == 0) return true;  // nothing is read or written
  if (!x.c) {
    set_last_error("%s: c is NULL", fn);
    return false;
  }
  if (x.k > 0 && out->alpha != 0.0f && (!x.a || !x.b)) {
    set_last_error("%s: %s is NULL", fn, x.a ? "b" : "a");
    return false;
  }
  return true;
}

// A checked call as the internal row-stored problem: op(A) and op(B) as strided views for
// the plain operands, panels read in place for the packed ones.
void run_checked(const CallArgs& x, const CheckedCall& y) {
  const bool ta = x.transa != CblasNoTrans, tb = x.transb != CblasNoTrans;
  const float* af = static_cast<const float*>(x.a);
  const float* bf = static_cast<const float*>(x.b);
  const MatrixView opa = (ta != !y.row_major) ? MatrixView{af, 1, x.lda} : MatrixView{af, x.lda, 1};
  const MatrixView opb = (tb != !y.row_major) ? MatrixView{bf, 1, x.ldb} : MatrixView{bf, x.ldb, 1};
  Side sa, sb;
  if (y.row_major) {  // C = op(A) op(B)
    sa.view = opa, sb.view = opb;
    if (y.ha) sa.panels = panels_of(y.ha);
    if (y.hb) sb.panels = panels_of(y.hb);
    run_rowstored(x.m, x.n, x.k, y.alpha, sa, sb, x.beta, x.c, x.ldc, y.e);
  } else {  // C^T = op(B)^T op(A)^T, row-stored with row stride ldc
    sa.view = opb.transposed(), sb.view = opa.transposed();
    if (y.hb) sa.panels = panels_of(y.hb);
    if (y.ha) sb.panels = panels_of(y.ha);
    run_rowstored(x.n, x.m, x.k, y.alpha, sa, sb, x.beta, x.c, x.ldc, y.e);
  }
}

}  // namespace
}  // namespace gk

GK_EXPORT int64_t gk_sgemm_pack_get_size(gk_pack_operand which, int64_t m, int64_t n, int64_t k) {
  const char* fn = "gk_sgemm_pack_get_size";
  int64_t bytes = -1;
  const gk_status s = gk::guard_c_boundary(fn, [&] {
    if (gk::raw_enum(which) != GK_PACK_A && gk::raw_enum(which) != GK_PACK_B) {
      gk::set_last_error("%s: which %d is not a gk_pack_operand", fn, gk::raw_enum(which));
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (m < 0 || n < 0 || k < 0) {
      gk::set_last_error("%s: m %" PRId64 ", n %" PRId64 " and k %" PRId64 " must be >= 0", fn, m, n, k);
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (!gk::size_in_range(fn, *gk::active_config().kernel, gk::packed_rows(which, m, n), k, &bytes))
      return GK_ERR_INVALID_ARGUMENT;
    gk::clear_last_error();
    return GK_OK;
  });
  return s == GK_OK ? bytes : -1;
}

GK_EXPORT gk_status gk_sgemm_pack(CBLAS_ORDER order, gk_pack_operand which, CBLAS_TRANSPOSE trans, int64_t m,
                                  int64_t n, int64_t k, float alpha, const float* src, int64_t ld, void* dest,
                                  int64_t dest_bytes) {
  const char* fn = "gk_sgemm_pack";
  return gk::guard_c_boundary(fn, [&] {
    using namespace gk;
    if (raw_enum(order) != CblasRowMajor && raw_enum(order) != CblasColMajor) {
      set_last_error("%s: order %d is not a CBLAS_ORDER", fn, raw_enum(order));
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (raw_enum(which) != GK_PACK_A && raw_enum(which) != GK_PACK_B) {
      set_last_error("%s: which %d is not a gk_pack_operand", fn, raw_enum(which));
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (!valid_trans(raw_enum(trans))) {
      set_last_error("%s: trans %d is not a CBLAS_TRANSPOSE", fn, raw_enum(trans));
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (m < 0 || n < 0 || k < 0) {
      set_last_error("%s: m %" PRId64 ", n %" PRId64 " and k %" PRId64 " must be >= 0", fn, m, n, k);
      return GK_ERR_INVALID_ARGUMENT;
    }
    const bool row_major = order == CblasRowMajor, t = trans != CblasNoTrans, is_a = which == GK_PACK_A;
    const int64_t rows = packed_rows(which, m, n);
    // The stored src: op(A) is m x k, op(B) k x n; trans swaps them.
    const int64_t op_rows = is_a ? m : k, op_cols = is_a ? k : n;
    if (!check_ld(fn, "ld", ld, row_major, t ? op_cols : op_rows, t ? op_rows : op_cols))
      return GK_ERR_INVALID_ARGUMENT;
    const KernelConfig& cfg = active_config();
    const KernelInfo& ker = *cfg.kernel;
    int64_t need = 0;
    if (!size_in_range(fn, ker, rows, k, &need)) return GK_ERR_INVALID_ARGUMENT;
    if (!dest) {
      set_last_error("%s: dest is NULL", fn);
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (reinterpret_cast<uintptr_t>(dest) % 64) {
      set_last_error("%s: dest %p is not 64-byte aligned", fn, dest);
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (dest_bytes < need) {
      set_last_error("%s: dest_bytes %" PRId64 " is less than the %" PRId64 " bytes gk_sgemm_pack_get_size gives",
                     fn, dest_bytes, need);
      return GK_ERR_INVALID_ARGUMENT;
    }
    if (!src && rows > 0 && k > 0) {
      set_last_error("%s: src is NULL", fn);
      return GK_ERR_INVALID_ARGUMENT;
    }
    // The stored view of op(src) as (rows of C's side) x k or k x (columns): element (i, j)
    // of op(src) at src[i * rs + j * cs].
    const MatrixView op = (t != !row_major) ? MatrixView{src, 1, ld} : MatrixView{src, ld, 1};
    // Row-major A and column-major B are the internal A (rows x k: op(A), or op(B)^T).
    const bool internal_a = is_a == row_major;
    float* panels = reinterpret_cast<float*>(static_cast<char*>(dest) + kPackHeaderBytes);
    const int64_t floats = packed_panel_floats(ker, rows, k);
    if (rows > 0 && k > 0) {
      if (internal_a) {
        const MatrixView av = is_a ? op : op.transposed();  // rows x k
        PlainA(av).block(0, rows, 0, k, ker.mr, panels);
        const int64_t written = round_up(rows, ker.mr) * k;
        std::fill(panels + written, panels + floats, 0.0f);
      } else {
        const MatrixView bv = is_a ? op.transposed() : op;  // k x rows
        PlainB(bv).pack_panels(0, k, 0, rows, ker.nr, panels);
        const int64_t written = round_up(rows, ker.nr) * k;
        std::fill(panels + written, panels + floats, 0.0f);
      }
    } else {
      std::fill(panels, panels + floats, 0.0f);
    }
    PackHeader h;
    std::memset(&h, 0, sizeof h);
    h.magic = kPackMagic;
    h.version = kPackVersion;
    h.header_bytes = kPackHeaderBytes;
    std::strncpy(h.kernel, ker.name, sizeof h.kernel - 1);
    h.mr = ker.mr, h.nr = ker.nr, h.kc = cfg.kc;
    h.rows = rows, h.k = k, h.panel_floats = floats, h.alpha = alpha;
    h.operand = uint8_t(which), h.row_major = row_major, h.trans = t, h.internal_b = !internal_a;
    h.checksum = header_checksum(h);
    std::memset(dest, 0, kPackHeaderBytes);
    std::memcpy(dest, &h, sizeof h);
    clear_last_error();
    return GK_OK;
  });
}

GK_EXPORT gk_status gk_sgemm_compute(CBLAS_ORDER order, int transa, int transb, int64_t m, int64_t n, int64_t k,
                                     const void* a, int64_t lda, const void* b, int64_t ldb, float beta, float* c,
                                     int64_t ldc, const gk_epilogue* epilogue) {
  const char* fn = "gk_sgemm_compute";
  return gk::guard_c_boundary(fn, [&] {
    const gk::CallArgs x{gk::raw_enum(order), transa, transb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc, epilogue};
    gk::CheckedCall y;
    if (!gk::check_operands(fn, x, true, &y)) return GK_ERR_INVALID_ARGUMENT;
    gk::clear_last_error();
    gk::run_checked(x, y);
    return GK_OK;
  });
}

GK_EXPORT gk_status gk_sgemm_ex(CBLAS_ORDER order, CBLAS_TRANSPOSE transa, CBLAS_TRANSPOSE transb, int64_t m,
                                int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                                int64_t ldb, float beta, float* c, int64_t ldc, const gk_epilogue* epilogue) {
  const char* fn = "gk_sgemm_ex";
  return gk::guard_c_boundary(fn, [&] {
    const gk::CallArgs x{gk::raw_enum(order), gk::raw_enum(transa), gk::raw_enum(transb), m, n, k, alpha, a, lda, b,
                         ldb, beta, c, ldc, epilogue};
    gk::CheckedCall y;
    if (!gk::check_operands(fn, x, false, &y)) return GK_ERR_INVALID_ARGUMENT;
    gk::clear_last_error();
    gk::run_checked(x, y);
    return GK_OK;
  });
}
