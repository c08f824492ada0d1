// Winograd F(m x m, 3 x 3) for 3x3 stride-1 convolutions (groups == 1), m = 2, 4, 6,
// alpha = m + 2. Multiplications per output: 9 direct; alpha^2 / m^2 with Winograd
// (F(2): 4, F(4): 2.25, F(6): 1.78). Accuracy falls with m (points further from 0): F(2)
// is as accurate as direct; F(4) and F(6) are excluded by GK_CONV_FLAG_HIGH_ACCURACY.
//
// Plan time: the weights become U[xi] = (G g G^T)[xi] (in double), packed for the
// micro-kernel as A panels (MR output channels x IC) per position xi < alpha^2.
//
// Run time, per image: in NCHW the input is copied once into a zero-padded plane split
// into m column phases (no tile needs bounds checks; the 8 tiles of a vector are one load);
// NCHW8 and NHWC (whole 8-channel blocks) read the image in place, and a tile reaching
// into the padding from a copy of its alpha x alpha window (so the workspace is a block,
// whatever the image size). The output tiles, numbered row-major, are cut into blocks of
// at most `nr_tiles` tiles (whole micro-panels of NR tiles); each block runs, on one thread:
//   for each input-channel block [ic0, ic0 + icb):
//     1. input transform: V = B^T d B of every tile and channel, written straight in the
//        micro-kernel's packed-B order: V[xi] is icb x nb, as nb / NR panels of icb rows
//        of NR tiles, so no packing pass runs;
//     2. the alpha^2 GEMMs M[xi] (+)= U[xi] V[xi], micro-kernel calls on the packed
//        operands (the first channel block writes M, the others accumulate);
//   3. output transform: Y = A^T M A per tile, + bias, + the output already there when
//      adding to it (GK_CONV_FLAG_ADD_TO_OUTPUT), activation, into the output.
//
// Blocking (derived at plan time from the caches, see blocking()):
//   icb: all channels unless one B micro-panel (icb x NR floats) would exceed a quarter
//        of L2 (splitting costs a pass over M per block, measured dearer than B from L2);
//   nb:  the V and M blocks alpha^2 x (icb + OC) x nb floats in L2 when they fit, but
//        at least 4 panels when the transformed weights do not fit L2 (each block streams
//        them once).
// Threads take whole blocks (each with its own V and M); with fewer blocks than threads
// they split the output channels instead (each transforms the block's input itself).
// The transforms are compiled against constexpr matrices: zeros cost nothing, +-1 no
// multiplication, and the points +-p share their sums (Factoring); they run on 8 tiles of
// a tile row at a time, one per vector lane (NCHW), or on 8 channels of a tile.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/runtime.h"
#include "common/weights_memory.h"
#include "conv/conv.h"
#include "conv/pointwise.h"
#include "conv/vec.h"
#include "conv/winograd_matrices.h"
#include "gemm/partition.h"

namespace gk {
namespace conv {

namespace {
thread_local PhaseTimes* g_phase_sink = nullptr;
}
void set_phase_times(PhaseTimes* sink) { g_phase_sink = sink; }

namespace {

// ---- Transforms with compile-time coefficients -------------------------------------

typedef long long v4q __attribute__((vector_size(32)));

template <int M>
struct InputMatrix {  // B^T
  static constexpr double at(int i, int k) { return kWinograd<M>.bt[i][k]; }
};
template <int M>
struct OutputMatrix {  // A^T
  static constexpr double at(int i, int k) { return kWinograd<M>.at[i][k]; }
};

// acc (+)= c * x for the constant c = Mat(Row, K): nothing for 0, no multiplication for
// +-1. `started` is a constant after inlining, so the first term initializes acc. Unit
// selects the +-1 terms (true) or the others (false): summing the +-1 terms first makes
// the first term a copy rather than a multiplication.
template <typename Mat, int Row, int K, bool Unit>
GK_INLINE void add_term(v8& acc, bool& started, const v8& x) {
  constexpr float c = float(Mat::at(Row, K));
  if constexpr (c != 0.0f && (c == 1.0f || c == -1.0f) == Unit) {
    if constexpr (c == 1.0f) {
      acc = started ? acc + x : x;
    } else if constexpr (c == -1.0f) {
      acc = started ? acc - x : -x;
    } else {
      acc = started ? acc + x * c : x * c;
    }
    started = true;
  }
}

// sum_k Mat(Row, k) * x[k].
template <typename Mat, int Row, int... K>
GK_INLINE v8 combine(const v8* x, std::integer_sequence<int, K...>) {
  v8 acc = {};
  bool started = false;
  (add_term<Mat, Row, K, true>(acc, started, x[K]), ...);
  (add_term<Mat, Row, K, false>(acc, started, x[K]), ...);
  return acc;
}

// The factorings of the Toom-Cook matrices at the points +-p (winograd_matrices.h). The
// rows of B^T for p and -p agree on some inputs and are opposite on the others, so they
// are e + o and e - o of two half sums; the columns of A^T for p and -p (1 + 2q and 2 + 2q)
// agree in some rows and are opposite in the others, so every row reads their sum or
// their difference. Either cuts the adds and multiply-adds of a 1-D transform (F(6x6)'s
// input: 36 -> 26, its output 32 -> 20), the part of Winograd's time that is not the GEMMs.
// Entries compare as the floats the transforms are compiled with: B^T comes from an
// inverse in double, whose +-p entries differ in their last bits.
enum class Pairing { Same, Opposite, Neither };
constexpr Pairing pairing(double a, double b) {
  const float x = float(a), y = float(b);
  return x == y ? Pairing::Same : x == -y ? Pairing::Opposite : Pairing::Neither;
}
template <typename Mat, int Rows, int A>
struct Factoring {
  // Rows r and r + 1 are e + o and e - o.
  static constexpr bool row_pair(int r) {
    if (r + 1 >= Rows) return false;
    bool opposite = false;
    for (int k = 0; k < A; ++k) {
      const Pairing p = pairing(Mat::at(r, k), Mat::at(r + 1, k));
      if (p == Pairing::Neither) return false;
      opposite = opposite || p == Pairing::Opposite;
    }
    return opposite;
  }
  // Every pair of columns (1 + 2q, 2 + 2q), 2 + 2q < A - 1, agrees or is opposite in each
  // row, and some pair is opposite somewhere.
  static constexpr bool column_pairs() {
    bool opposite = false;
    for (int k = 1; k + 1 < A - 1; k += 2)
      for (int r = 0; r < Rows; ++r) {
        const Pairing p = pairing(Mat::at(r, k), Mat::at(r, k + 1));
        if (p == Pairing::Neither) return false;
        opposite = opposite || p == Pairing::Opposite;
      }
    return opposite;
  }
};
// The terms of rows r and r + 1 they agree on (Odd = false) or are opposite on (true).
template <typename Mat, bool Odd>
struct RowPairPart {
  static constexpr double at(int r, int k) {
    return (pairing(Mat::at(r, k), Mat::at(r + 1, k)) == Pairing::Opposite) == Odd ? Mat::at(r, k) : 0.0;
  }
};
// Mat over the inputs y[k]: y[1 + 2q] = x[1 + 2q] + x[2 + 2q], y[2 + 2q] = their
// difference, the first and last x as they are.
template <typename Mat, int A>
struct PairedColumns {
  static constexpr double at(int r, int k) {
    if (k == 0 || k == A - 1) return Mat::at(r, k);
    const int first = k % 2 ? k : k - 1;
    const bool opposite = pairing(Mat::at(r, first), Mat::at(r, first + 1)) == Pairing::Opposite;
    return (k % 2 ? !opposite : opposite) ? Mat::at(r, first) : 0.0;
  }
};
// The pairs F(4x4) and F(6x6) are built on, found.
static_assert(Factoring<InputMatrix<4>, 6, 6>::row_pair(1) && Factoring<InputMatrix<4>, 6, 6>::row_pair(3));
static_assert(Factoring<InputMatrix<6>, 8, 8>::row_pair(1) && Factoring<InputMatrix<6>, 8, 8>::row_pair(3) &&
              Factoring<InputMatrix<6>, 8, 8>::row_pair(5));
static_assert(Factoring<OutputMatrix<4>, 4, 6>::column_pairs() && Factoring<OutputMatrix<6>, 6, 8>::column_pairs());

// out[J] = sum_k Mat(J, k) x[k] for J < Rows: one 1-D transform.
template <typename Mat, int Rows, int A, int J = 0>
GK_INLINE void transform_rows(const v8* x, v8* out) {
  if constexpr (J < Rows) {
    using Seq = std::make_integer_sequence<int, A>;
    if constexpr (Factoring<Mat, Rows, A>::row_pair(J)) {
      const v8 e = combine<RowPairPart<Mat, false>, J>(x, Seq{});
      const v8 o = combine<RowPairPart<Mat, true>, J>(x, Seq{});
      out[J] = e + o;
      out[J + 1] = e - o;
      transform_rows<Mat, Rows, A, J + 2>(x, out);
    } else {
      out[J] = combine<Mat, J>(x, Seq{});
      transform_rows<Mat, Rows, A, J + 1>(x, out);
    }
  }
}
template <typename Mat, int Rows, int A>
GK_INLINE void transform_1d(const v8 (&x)[A], v8* out) {
  if constexpr (Factoring<Mat, Rows, A>::column_pairs()) {
    v8 y[A];
    y[0] = x[0];
    y[A - 1] = x[A - 1];
    for (int k = 1; k + 1 < A - 1; k += 2) {
      y[k] = x[k] + x[k + 1];
      y[k + 1] = x[k] - x[k + 1];
    }
    transform_rows<PairedColumns<Mat, A>, Rows, A>(y, out);
  } else {
    transform_rows<Mat, Rows, A>(x, out);
  }
}

// out[i][j] = sum_k Mat(i, k) in[k][j] for rows i < Rows of Mat: Mat times the A x A `in`.
template <typename Mat, int Rows, int A>
GK_INLINE void left_multiply(const v8 (&in)[A][A], v8 (&out)[A][A]) {
  for (int j = 0; j < A; ++j) {
    v8 column[A], r[Rows];
    for (int k = 0; k < A; ++k) column[k] = in[k][j];
    transform_1d<Mat, Rows, A>(column, r);
    for (int i = 0; i < Rows; ++i) out[i][j] = r[i];
  }
}

// The same with `in` in memory, element (k, j) at p + k * k_stride + j * j_stride: a column
// at a time straight into registers, as copying the window or block onto the stack first
// costs 2-10% of F(4x4) and F(6x6) at 64 channels.
template <typename Mat, int Rows, int A>
GK_INLINE void left_multiply_from(const float* p, int64_t k_stride, int64_t j_stride, v8 (&out)[A][A]) {
#pragma GCC unroll 8
  for (int j = 0; j < A; ++j) {
    v8 column[A], r[Rows];
#pragma GCC unroll 8
    for (int k = 0; k < A; ++k) column[k] = load8(p + k * k_stride + j * j_stride);
    transform_1d<Mat, Rows, A>(column, r);
#pragma GCC unroll 8
    for (int i = 0; i < Rows; ++i) out[i][j] = r[i];
  }
}

// out[i][j] = sum_k Mat(j, k) in[i][k] for rows i < rows: `in` times Mat^T, columns j < Cols.
template <typename Mat, int Cols, int A>
GK_INLINE void right_multiply(const v8 (&in)[A][A], int rows, v8 (&out)[A][A]) {
  for (int i = 0; i < rows; ++i) transform_1d<Mat, Cols, A>(in[i], out[i]);
}

// dst[j * stride] = sum_k Mat(j, k) in[k] for j < Cols (one row of `in` times Mat^T), as
// whole vectors or their first `lanes` floats.
template <typename Mat, int Cols, int A>
GK_INLINE void right_multiply_store(const v8 (&in)[A], float* dst, int64_t stride, int lanes) {
  v8 r[Cols];
  transform_1d<Mat, Cols, A>(in, r);
  for (int j = 0; j < Cols; ++j) {
    if (lanes == 8) {
      store8(dst + j * stride, r[j]);
    } else {
      for (int l = 0; l < lanes; ++l) dst[j * stride + l] = r[j][l];
    }
  }
}

// V = B^T d B for 8 tiles of a tile row. The padded input is split into M column phases
// (element column i * M + q at phase q, index i), so element (k, j) of the 8 tiles is one
// contiguous load: base[(k * M + j % M) * len + j / M + lane]. V[xi] goes to
// v + xi * xi_stride (lanes contiguous).
template <int M>
GK_INLINE void input_tile8(const float* base, int64_t len, int lanes, float* v, int64_t xi_stride) {
  constexpr int A = M + 2;
  v8 d[A][A], t[A][A];
  for (int k = 0; k < A; ++k)
    for (int j = 0; j < A; ++j) d[k][j] = load8(base + (k * M + j % M) * len + j / M);
  left_multiply<InputMatrix<M>, A>(d, t);
  for (int i = 0; i < A; ++i) right_multiply_store<InputMatrix<M>, A>(t[i], v + i * A * xi_stride, xi_stride, lanes);
}


// One output row of 8 whole tiles in memory order: lane l's M values at out[l * M, l * M +
// M), 8 * M contiguous floats as M vectors. The M vectors of y (one per column, lanes =
// tiles) are interleaved with shuffles, so the row is finished (residual, activation: both
// per element, and the bias per channel) and stored as M whole vectors.
template <int M>
GK_INLINE void interleave_row(const v8 (&y)[M], v8 (&out)[M]) {
  const v8i lo = {0, 8, 1, 9, 2, 10, 3, 11}, hi = {4, 12, 5, 13, 6, 14, 7, 15};
  if constexpr (M == 2) {
    out[0] = __builtin_shuffle(y[0], y[1], lo);
    out[1] = __builtin_shuffle(y[0], y[1], hi);
  } else if constexpr (M == 4) {
    const v8 a0 = __builtin_shuffle(y[0], y[1], lo), a1 = __builtin_shuffle(y[0], y[1], hi);
    const v8 b0 = __builtin_shuffle(y[2], y[3], lo), b1 = __builtin_shuffle(y[2], y[3], hi);
    const v8i pair_lo = {0, 1, 8, 9, 2, 3, 10, 11}, pair_hi = {4, 5, 12, 13, 6, 7, 14, 15};
    out[0] = __builtin_shuffle(a0, b0, pair_lo);
    out[1] = __builtin_shuffle(a0, b0, pair_hi);
    out[2] = __builtin_shuffle(a1, b1, pair_lo);
    out[3] = __builtin_shuffle(a1, b1, pair_hi);
  } else {
    // Pairs (y[2k][l], y[2k+1][l]) as 64-bit units q_k[l]; lane l's row is q0, q1, q2.
    for (int half = 0; half < 2; ++half) {
      const v8i sel = half ? hi : lo;
      const v4q q0 = (v4q)__builtin_shuffle(y[0], y[1], sel), q1 = (v4q)__builtin_shuffle(y[2], y[3], sel),
                q2 = (v4q)__builtin_shuffle(y[4], y[5], sel);
      v8* o = out + half * 3;
      o[0] = (v8)__builtin_shuffle(__builtin_shuffle(q0, q1, (v4q){0, 4, 1, 5}), q2, (v4q){0, 1, 4, 2});
      o[1] = (v8)__builtin_shuffle(__builtin_shuffle(q1, q2, (v4q){1, 5, 2, 6}), q0, (v4q){0, 1, 6, 2});
      o[2] = (v8)__builtin_shuffle(__builtin_shuffle(q0, q1, (v4q){3, 7, 2, 6}), q2, (v4q){6, 0, 1, 7});
    }
  }
}

// y[0:M][0:M] = A^T m A, m[k][j] loaded from mt + (k * alpha + j) * xi_stride (one vector
// each: 8 tiles, or 8 channels of one tile); shared by both output transforms.
template <int M>
GK_INLINE void output_transform(const float* mt, int64_t xi_stride, v8 (&y)[M + 2][M + 2]) {
  constexpr int A = M + 2;
  v8 t[A][A];
  left_multiply_from<OutputMatrix<M>, M>(mt, A * xi_stride, xi_stride, t);
  right_multiply<OutputMatrix<M>, M>(t, M, y);
}

// Y = A^T M A for 8 tiles (M[xi] at mt + xi * xi_stride, lanes contiguous), + bias,
// finished (Finish: the residual, activation) into the output rows (lane l's column
// offset l * M), only inside [0, oh_n) x [0, ow_n).
template <int M>
GK_INLINE void output_tile8(const float* mt, int64_t xi_stride, int lanes, float bias, Finish f, float* out,
                            int64_t row, int64_t oh_n, int64_t ow_n) {
  v8 y[M + 2][M + 2];
  output_transform<M>(mt, xi_stride, y);
  const bool whole_row = lanes == 8 && ow_n >= 8 * M;
  for (int i = 0; i < M && i < oh_n; ++i) {
    v8 row_out[M];
    for (int j = 0; j < M; ++j) row_out[j] = y[i][j] + bias;
    float* dst = out + i * row;
    if (whole_row) {
      v8 in_order[M];
      interleave_row<M>(row_out, in_order);
      for (int q = 0; q < M; ++q) finish8(dst + q * 8, in_order[q], f);
      continue;
    }
    for (int j = 0; j < M && j < ow_n; ++j)  // column j of the tiles inside [0, ow_n)
      finish_lanes(dst + j, M, std::min<int64_t>(lanes, (ow_n - j + M - 1) / M), row_out[j], f);
  }
}

// NCHW8 and NHWC: the transforms vectorized over 8 channels instead of over tiles.

// Where one tile's alpha x alpha window of 8 channels lies: its top-left pixel, and the
// floats from one row to the next and from one pixel to the next (8 in NCHW8 and in a
// border tile's copy, the channel count in NHWC).
struct Window {
  const float* at;
  int64_t row, pixel;
};

// V = B^T d B for `count` (<= 8) tiles of one channel block (tiles[q]: tile q's window).
// Computed per tile with vectors over channels, then turned by one 8 x 8 transpose per xi
// into the packed-B order: channel l's row of tiles at v + xi * xi_stride + l * row_stride,
// the first `channels` channels and `count` tiles written.
template <int M>
GK_INLINE void input_tiles_blocked(const Window* tiles, int count, int channels, float* v, int64_t row_stride,
                                   int64_t xi_stride) {
  constexpr int A = M + 2;
  alignas(32) float tmp[A * A][8][8];  // [xi][tile][channel]
  for (int q = 0; q < 8; ++q) {
    if (q >= count) {
      for (int xi = 0; xi < A * A; ++xi) store8(tmp[xi][q], v8{});
      continue;
    }
    v8 t[A][A];
    left_multiply_from<InputMatrix<M>, A>(tiles[q].at, tiles[q].row, tiles[q].pixel, t);
    for (int i = 0; i < A; ++i) right_multiply_store<InputMatrix<M>, A>(t[i], tmp[i * A][q], 64, 8);
  }
  for (int xi = 0; xi < A * A; ++xi) {
    v8 r[8];
    for (int q = 0; q < 8; ++q) r[q] = load8(tmp[xi][q]);
    transpose8x8(r);
    for (int l = 0; l < channels; ++l) {
      float* dst = v + xi * xi_stride + l * row_stride;
      if (count == 8) {
        store8(dst, r[l]);
      } else {
        for (int q = 0; q < count; ++q) dst[q] = r[l][q];
      }
    }
  }
}

// Y = A^T M A for one tile of 8 channels (M[xi] at mt + xi * xi_stride, one vector over
// the channels), + bias, finished (Finish) as pixels of 8 channels (`row` floats from one
// row to the next, `pixel` from one pixel to the next), only inside [0, oh_n) x [0, ow_n).
template <int M>
GK_INLINE void output_tile_blocked(const float* mt, int64_t xi_stride, const float* bias, Finish f, float* out,
                                   int64_t row, int64_t pixel, int64_t oh_n, int64_t ow_n) {
  v8 y[M + 2][M + 2];
  output_transform<M>(mt, xi_stride, y);
  const v8 b = load8(bias);
  for (int i = 0; i < M && i < oh_n; ++i)
    for (int j = 0; j < M && j < ow_n; ++j) finish8(out + i * row + j * pixel, y[i][j] + b, f);
}

// The transforms compiled for AVX2 (x86-64 with AVX2) and for the baseline (SSE, NEON).
template <int M>
struct TransformFns {
  void (*in)(const float*, int64_t, int, float*, int64_t);
  void (*out)(const float*, int64_t, int, float, Finish, float*, int64_t, int64_t, int64_t);
  void (*split)(const float*, int64_t, int64_t, int64_t, float*);
  void (*in_blocked)(const Window*, int, int, float*, int64_t, int64_t);
  void (*out_blocked)(const float*, int64_t, const float*, Finish, float*, int64_t, int64_t, int64_t, int64_t);
  void (*in_pixel_major)(const Window*, int, float*, int64_t);
};
template <int M>
void input_baseline(const float* b, int64_t len, int lanes, float* v, int64_t st) {
  input_tile8<M>(b, len, lanes, v, st);
}
template <int M>
void output_baseline(const float* mt, int64_t st, int lanes, float bias, Finish f, float* out,
                     int64_t row, int64_t oh_n, int64_t ow_n) {
  output_tile8<M>(mt, st, lanes, bias, f, out, row, oh_n, ow_n);
}
// The same for the pointwise kernels (KernelInfo::pointwise): V[xi] as an NCHW8 image of
// tiles, tile q's 8 channels at v + xi * xi_stride + q * 8, straight from the per-tile
// vectors (no transpose).
template <int M>
GK_INLINE void input_tiles_pixel_major(const Window* tiles, int count, float* v, int64_t xi_stride) {
  constexpr int A = M + 2;
  for (int q = 0; q < count; ++q) {
    v8 t[A][A];
    left_multiply_from<InputMatrix<M>, A>(tiles[q].at, tiles[q].row, tiles[q].pixel, t);
    for (int i = 0; i < A; ++i)
      right_multiply_store<InputMatrix<M>, A>(t[i], v + i * A * xi_stride + q * 8, xi_stride, 8);
  }
}

template <int M>
void in_pixel_major_baseline(const Window* tiles, int count, float* v, int64_t xs) {
  input_tiles_pixel_major<M>(tiles, count, v, xs);
}
template <int M>
void in_blocked_baseline(const Window* tiles, int count, int channels, float* v, int64_t rs, int64_t xs) {
  input_tiles_blocked<M>(tiles, count, channels, v, rs, xs);
}
template <int M>
void out_blocked_baseline(const float* mt, int64_t xs, const float* bias, Finish f, float* out, int64_t row,
                          int64_t pixel, int64_t oh_n, int64_t ow_n) {
  output_tile_blocked<M>(mt, xs, bias, f, out, row, pixel, oh_n, ow_n);
}
template <int M>
void split_baseline(const float* row, int64_t width, int64_t pad, int64_t len, float* dst) {
  split_phases<M>(row, width, pad, len, dst);
}
#if defined(__x86_64__)
// The same transforms compiled for an ISA. AVX-512VL gives them 32 vector registers
// (NCHW8 F(4x4), Zen 5: 3-8% faster than the AVX2 build).
#define GK_WINOGRAD_TRANSFORMS(isa, target_isa)                                                              \
  template <int M>                                                                                          \
  __attribute__((target(target_isa))) void in_pixel_major_##isa(const Window* tiles, int count, float* v,   \
                                                                int64_t xs) {                               \
    input_tiles_pixel_major<M>(tiles, count, v, xs);                                                        \
  }                                                                                                         \
  template <int M>                                                                                          \
  __attribute__((target(target_isa))) void in_blocked_##isa(const Window* tiles, int count, int channels,   \
                                                            float* v, int64_t rs, int64_t xs) {             \
    input_tiles_blocked<M>(tiles, count, channels, v, rs, xs);                                              \
  }                                                                                                         \
  template <int M>                                                                                          \
  __attribute__((target(target_isa))) void out_blocked_##isa(const float* mt, int64_t xs, const float* bias, \
                                                             Finish f, float* out, int64_t row,             \
                                                             int64_t pixel, int64_t oh_n, int64_t ow_n) {   \
    output_tile_blocked<M>(mt, xs, bias, f, out, row, pixel, oh_n, ow_n);                                   \
  }                                                                                                         \
  template <int M>                                                                                          \
  __attribute__((target(target_isa))) void split_##isa(const float* row, int64_t width, int64_t pad,        \
                                                       int64_t len, float* dst) {                           \
    split_phases<M>(row, width, pad, len, dst);                                                             \
  }                                                                                                         \
  template <int M>                                                                                          \
  __attribute__((target(target_isa))) void input_##isa(const float* b, int64_t len, int lanes, float* v,    \
                                                       int64_t st) {                                        \
    input_tile8<M>(b, len, lanes, v, st);                                                                   \
  }                                                                                                         \
  template <int M>                                                                                          \
  __attribute__((target(target_isa))) void output_##isa(const float* mt, int64_t st, int lanes, float bias, \
                                                        Finish f, float* out, int64_t row, int64_t oh_n,    \
                                                        int64_t ow_n) {                                     \
    output_tile8<M>(mt, st, lanes, bias, f, out, row, oh_n, ow_n);                                          \
  }                                                                                                         \
  template <int M>                                                                                          \
  TransformFns<M> transform_fns_##isa() {                                                                   \
    return {input_##isa<M>, output_##isa<M>, split_##isa<M>, in_blocked_##isa<M>, out_blocked_##isa<M>,     \
            in_pixel_major_##isa<M>};                                                                       \
  }
GK_WINOGRAD_TRANSFORMS(avx2, "avx2,fma")
GK_WINOGRAD_TRANSFORMS(avx512, "avx512f,avx512vl,avx2,fma")
#undef GK_WINOGRAD_TRANSFORMS
#endif
template <int M>
TransformFns<M> transform_fns() {
#if defined(__x86_64__)
  // AVX-512VL: the kernel table's AVX-512 entry asks for it.
  if (active_config().kernel->simd == SimdLevel::Avx512)
    return transform_fns_avx512<M>();
  if (conv_config().kernel->simd != SimdLevel::Baseline) return transform_fns_avx2<M>();
#endif
  return {input_baseline<M>, output_baseline<M>, split_baseline<M>, in_blocked_baseline<M>, out_blocked_baseline<M>,
          in_pixel_major_baseline<M>};
}

// ---- Blocking -----------------------------------------------------------------------

struct Blocking {
  int64_t tiles;     // nb: tiles per block, a multiple of NR
  int64_t channels;  // icb: input channels per channel block (before balancing)
  int64_t room;      // the tiles a block could hold before the cap at one image's (images_per_block)
};

// Measured on Zen 3 (32 KiB L1d, 512 KiB L2), F(4x4), layers of 64..512 channels:
//  - icb: splitting the channels costs a read-modify-write pass over M per extra channel
//    block, which cost 15-40% more than streaming a B micro-panel of all channels from L2
//    (the kernel's B loads are sequential and prefetched). So channels are blocked only
//    when one B micro-panel (icb x NR floats) would exceed a quarter of L2: above 1365
//    channels with NR = 24 here, 680 with the 256 KiB fallback.
//  - nb: the V and M blocks, alpha^2 x (icb + OC) x nb floats, in L2 (64-channel layers:
//    one 24-tile panel, 20-30% faster than four). But a block streams every transformed
//    weight (alpha^2 x OC x IC floats) once: when those do not fit L2 they come from L3,
//    and blocks of at least kPanelsForWeightReuse panels amortize them (256-channel 56x56:
//    four panels 15-25% faster than one).
// GEMMKIT_WINOGRAD_IC_BLOCK and GEMMKIT_WINOGRAD_TILES override icb and nb (at plan time);
// Fast-Run's nr_tiles tuning overrides nb.
constexpr int64_t kPanelsForWeightReuse = 4;

// NCHW8 layers run their GEMMs on the pointwise kernels (pointwise_gemms) in 24-tile
// units, as if NR were 24, with M's rows in whole 8-channel blocks.
constexpr int64_t kPointwiseTileUnit = 24;

// An NHWC layer the channel-vector transforms run in place: whole 8-channel blocks in and
// out, so no vector reads or writes past a pixel's channels.
bool nhwc_in_place(const Shape& s) {
  return s.d.layout == GK_LAYOUT_NHWC && s.in_layout == GK_LAYOUT_NHWC && s.d.in_channels % 8 == 0 &&
         s.d.out_channels % 8 == 0;
}

// Whether the transforms run vectorized over 8 channels of a pixel: NCHW8, and NHWC in
// place (the same code, the pixels C floats apart instead of 8).
bool channel_vectors(const Shape& s) { return s.d.layout == GK_LAYOUT_NCHW8 || nhwc_in_place(s); }

// The GEMM kernel of a layer: channel-vector layouts run NCHW8's.
const KernelConfig& gemm_config(const Shape& s) {
  return conv_gemm_config(channel_vectors(s) ? GK_LAYOUT_NCHW8 : s.d.layout);
}

// Whether a channel-vector layer's (NCHW8, NHWC in place) GEMMs run on the pointwise
// kernels (KernelInfo::pointwise of gk::pointwise_kernel()): tiles as pixels, V an NCHW8
// image of tiles, U[xi] rows of output channels, M stored channel-blocked by the kernels
// themselves. x86-64 only (AVX2 or AVX-512 pointwise kernels); GEMMKIT_WINOGRAD_POINTWISE=0
// or 1 overrides. Measured, 1 thread, F(4x4) NCHW8, 4x24 GEMMs -> pointwise, ms: Intel
// Xeon (model 207) with AVX-512, 64 ch 56x56 1.41 -> 0.85; Zen 3 (AVX2 6x16), 64 ch 56x56
// 1.24-1.27 -> 0.95-1.01, 128 ch 28x28 1.06-1.09 -> 0.77-0.92, 256 ch 14x14 1.02-1.06 ->
// 0.89-0.95, 512 ch 7x7 3.5 -> 1.9 (F(6x6) 64 ch 1.39-1.51 -> 0.88-0.91); only 512 ch
// 14x14 lost there (4.2 -> 4.5).
bool pointwise_gemms(const Shape& s) {
  if (!channel_vectors(s) || !pointwise_kernel().pointwise[0].fn) return false;
  const int64_t forced = env_int("GEMMKIT_WINOGRAD_POINTWISE", -1);
  if (forced >= 0) return forced != 0;
  return pointwise_kernel().simd != SimdLevel::Baseline;
}

// The GEMMs' output channels per kernel tile: the pointwise kernels' 8, else the kernel's MR.
int64_t gemm_mr(const Shape& s) { return pointwise_gemms(s) ? 8 : gemm_config(s).kernel->mr; }

// Whether a channel-vector layer runs in place: each kernel tile's rows (output channels)
// lie in one 8-channel block, so M can be stored channel-blocked.
bool runs_in_place(const Shape& s) { return channel_vectors(s) && 8 % gemm_mr(s) == 0; }

// The tile unit: the GEMM kernel's NR, or kPointwiseTileUnit.
int64_t tile_unit(const Shape& s) {
  return pointwise_gemms(s) ? kPointwiseTileUnit : gemm_config(s).kernel->nr;
}

template <int M>
Blocking blocking(const Shape& s, int64_t nr, int64_t mr, int64_t nr_tiles) {
  constexpr int64_t A2 = (M + 2) * (M + 2);
  const int64_t l2 = caches().l2;
  const int64_t oc = round_up(s.d.out_channels, mr), ic = s.d.in_channels;
  const int64_t icb = std::min(ic, std::max<int64_t>(16, env_int("GEMMKIT_WINOGRAD_IC_BLOCK", l2 / 4 / (nr * 4))));
  const int64_t panels_all = ceil_div(ceil_div(s.oh, M) * ceil_div(s.ow, M), nr);
  int64_t panels = std::max<int64_t>(1, l2 / (A2 * (icb + oc) * nr * 4));
  if (A2 * oc * ic * 4 > l2) panels = std::max(panels, kPanelsForWeightReuse);
  if (nr_tiles <= 0) nr_tiles = env_int("GEMMKIT_WINOGRAD_TILES", 0);
  if (nr_tiles > 0) panels = ceil_div(nr_tiles, nr);
  return {std::min(panels, panels_all) * nr, icb, panels * nr};
}

// Images whose tiles one block takes together: where an image has fewer tiles than a block
// holds and the GEMMs run on the pointwise kernels (whose V holds tiles at any column),
// several images share each stream of the transformed weights, which otherwise come from
// L3 or memory once per image (ResNet's 7x7 and 14x14 layers: 16 tiles an image).
int64_t images_per_block(const Shape& s, bool pointwise, const Blocking& b, int64_t image_tiles) {
  if (!pointwise || s.d.batch < 2) return 1;
  return std::clamp<int64_t>(b.room / image_tiles, 1, s.d.batch);
}

// ---- The prepared convolution -------------------------------------------------------

// Adds the time since the last lap to one phase of the sink (when there is one).
class PhaseClock {
 public:
  explicit PhaseClock(PhaseTimes* sink) : sink_(sink) {
    if (sink_) last_ = std::chrono::steady_clock::now();
  }
  void lap(double PhaseTimes::*phase) {
    if (!sink_) return;
    const auto now = std::chrono::steady_clock::now();
    sink_->*phase += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  PhaseTimes* sink_;
  std::chrono::steady_clock::time_point last_;
};

template <int M>
class WinogradConv final : public Prepared {
  static constexpr int A = M + 2;

 public:
  WinogradConv(const Shape& s, const float* weights, const float* bias, int64_t nr_tiles)
      : s_(s), cfg_(gemm_config(s)), pointwise_(pointwise_gemms(s)), mr_(gemm_mr(s)),
        nr_(tile_unit(s)) {
    const WinogradConstants<M>& w = kWinograd<M>;
    if (bias) bias_.assign(bias, bias + s.d.out_channels);
    const int64_t oc = s.d.out_channels, ic = s.d.in_channels;
    // U[xi][oc][ic] = (G g G^T)[xi], in double, then packed per xi.
    std::vector<float> u(size_t(A * A * oc * ic));
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t c = 0; c < ic; ++c) {
        const float* g = weights + (o * ic + c) * 9;
        double gg[A][3];
        for (int i = 0; i < A; ++i)
          for (int k = 0; k < 3; ++k) {
            gg[i][k] = 0;
            for (int r = 0; r < 3; ++r) gg[i][k] += w.g[i][r] * g[r * 3 + k];
          }
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j) {
            double v = 0;
            for (int k = 0; k < 3; ++k) v += gg[i][k] * w.g[j][k];
            u[size_t(((i * A + j) * oc + o) * ic + c)] = float(v);
          }
      }
    if (pointwise_) {
      pack_pointwise(u);
    } else {
      for (int xi = 0; xi < A * A; ++xi)
        // Owned before the vector grows: a growth that throws must not leak it.
        packed_.push_back(std::make_unique<PackedA>(MatrixView{u.data() + xi * oc * ic, ic, 1}, oc, ic, mr_));
    }
    th_ = ceil_div(s.oh, M), tw_ = ceil_div(s.ow, M);
    // Padded rows th*M + 2; each split into M phases of len_ = tw + 1 (+ 8: the lanes past
    // the last tile of a row read zeros) elements.
    hp_ = th_ * M + 2, len_ = tw_ + 1 + 8;
    fns_ = transform_fns<M>();
    blocking_ = blocking<M>(s, nr_, mr_, nr_tiles);
    images_per_block_ = images_per_block(s, pointwise_, blocking_, th_ * tw_);
    if (images_per_block_ > 1) blocking_.tiles = round_up(images_per_block_ * th_ * tw_, nr_);
    // NCHW8: the bias per 8-channel block.
    bias_blocked_.assign(size_t(round_up(oc, 8)), 0.0f);
    if (bias) std::copy(bias, bias + oc, bias_blocked_.begin());
  }
  bool ok() const {
    for (const auto& p : packed_)
      if (!p->ok()) return false;
    return true;
  }

  // NCHW: the padded input (shared by the threads). Per thread: V, M and, in NCHW8 and
  // NHWC in place, the copies of up to 8 border tiles.
  WorkspaceNeed need() const override {
    return {blocked() ? 0 : padded_floats(),
            round_up(v_floats(), 16) + round_up(m_floats(s_.d.out_channels), 16) + (blocked() ? kBorderFloats : 0)};
  }

  // NCHW8 and NHWC in place (channel_vectors): transforms vectorized over the channels of
  // a block, M stored channel-blocked (so the output transform reads one vector per xi),
  // when a kernel tile's rows lie in one channel block (MR divides 8) or the pointwise
  // kernels run the GEMMs.
  bool native_layout(gk_layout layout) const override {
    return layout == GK_LAYOUT_NCHW || (layout == s_.d.layout && runs_in_place(s_));
  }

  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    const bool blocked = this->blocked();
    const int64_t oc = d.out_channels;
    const int64_t in_image = (blocked ? round_up(d.in_channels, 8) : d.in_channels) * d.in_height * d.in_width;
    const int64_t out_image = (blocked ? round_up(oc, 8) : oc) * s_.pixels();  // NHWC: whole blocks
    float* padded = ws.shared;
    const int threads = ws.cap(threads_for(s_.flops() / 4));
    PhaseTimes* sink = threads == 1 ? g_phase_sink : nullptr;
    if (images_per_block_ > 1) return run_image_groups(input, output, in_image, out_image, threads, ws, sink);
    const int64_t blocks = block_count(threads);
    for (int64_t n = 0; n < d.batch; ++n) {
      const float* x = input + n * in_image;
      float* y = output + n * out_image;
      PhaseClock clock(sink);
      if (!blocked) pad_image(x, padded, threads);
      clock.lap(&PhaseTimes::input_s);
      const ImageRun one{blocked ? x : padded, 0, y, 0, 1};
      for_thread_blocks(threads, blocks, blocked, ws, [&](int64_t b, Range channels, const Buffers& buf) {
        run_block(one, block_tiles(b, blocks), channels, buf, blocked, sink);
      });
    }
  }

 private:
  // NCHW8 and NHWC in place run on the tensors (else on NCHW copies).
  bool blocked() const { return s_.d.layout != GK_LAYOUT_NCHW && native_layout(s_.d.layout); }
  bool nhwc() const { return s_.d.layout == GK_LAYOUT_NHWC; }
  // Channel vectors: the floats from one pixel of an 8-channel block to the next (NCHW8's
  // 8; NHWC's channel count), and where block `block` of an image of `pixels` pixels starts.
  int64_t pixel_stride(int64_t channels) const { return nhwc() ? channels : 8; }
  int64_t block_offset(int64_t block, int64_t pixels) const { return block * 8 * (nhwc() ? 1 : pixels); }
  int64_t padded_floats() const { return s_.d.in_channels * hp_ * M * len_; }
  // NCHW8: a group of up to 8 tiles, each alpha x alpha pixels of 8 channels.
  static constexpr int64_t kBorderFloats = 8 * A * A * 8;
  // The stride between V's (or M's) alpha^2 planes: a plane of `floats` plus one cache
  // line. Planes of a multiple of 4 KiB (64 channels x 48 tiles: 12 KiB) put the 36 or 64
  // streams a tile transform writes (or reads) in one L1 set; the extra line moves each
  // plane to the next set.
  static int64_t plane(int64_t floats) { return floats + 16; }
  // + 8: transforms read and write whole vectors past a block's last tile.
  int64_t v_floats() const { return A * A * plane(round_up(blocking_.channels, 8) * blocking_.tiles) + 8; }
  // M's rows: whole kernel tiles (MR), and in NCHW8 whole channel blocks.
  int64_t m_rows(int64_t channels) const { return std::max(round_up(channels, mr_), round_up(channels, 8)); }
  int64_t m_floats(int64_t channels) const { return A * A * plane(m_rows(channels) * blocking_.tiles) + 8; }
  // How the output transforms finish an output: the activation, after the residual when
  // adding to the output.
  Finish finish() const { return {s_.d.activation, s_.adds_to_output()}; }
  // Output channels are shared between threads in whole kernel tiles, in NCHW8 whole blocks
  // (NHWC: pairs, so that on an aligned tensor of 16k channels threads write whole 64-byte
  // lines of a pixel), on the pointwise kernels whole panels.
  int64_t channel_unit(bool blocked) const { return blocked ? (nhwc() ? 16 : 8) : mr_; }
  int64_t channel_units(bool blocked) const {
    return pointwise_ ? static_cast<int64_t>(panels_.size()) : ceil_div(s_.d.out_channels, channel_unit(blocked));
  }
  Range thread_channels(bool blocked, int part, int parts) const {
    const int64_t oc = s_.d.out_channels;
    if (!pointwise_) return share(channel_units(blocked), part, parts, channel_unit(blocked), oc);
    const int64_t n = static_cast<int64_t>(panels_.size());
    const Range r = share(n, part, parts, 1, n);
    if (r.begin >= r.end) return {0, 0};
    return {panels_[size_t(r.begin)].j, r.end < n ? panels_[size_t(r.end)].j : oc};
  }

  // U[xi] for the pointwise kernels: per panel (pointwise_panels), IC rows of its NR output
  // channels (zero past the last), panels side by side: panel j at xi * IC * OC8 + j * IC.
  void pack_pointwise(const std::vector<float>& u) {
    const int64_t oc = s_.d.out_channels, ic = s_.d.in_channels, ocp = round_up(oc, 8);
    panels_ = pointwise_panels(pointwise_kernel(), oc);
    u_pointwise_.assign(size_t(A * A * ic * ocp), 0.0f);
    for (int xi = 0; xi < A * A; ++xi)
      for (const PointwisePanel& q : panels_) {
        float* w = u_pointwise_.data() + xi * ic * ocp + q.j * ic;
        for (int64_t c = 0; c < ic; ++c)
          for (int64_t j = 0; j < q.kernel->nr && q.j + j < oc; ++j)
            w[c * q.kernel->nr + j] = u[size_t(((xi * oc) + q.j + j) * ic + c)];
      }
  }

  // Blocks of at most nb tiles; with several threads, a multiple of the thread count when
  // that costs at most one extra weight stream per thread, so no thread idles.
  int64_t block_count(int threads) const {
    const int64_t panels = ceil_div(th_ * tw_, nr_);
    int64_t blocks = ceil_div(panels, blocking_.tiles / nr_);
    if (threads > 1 && blocks >= threads / 2) blocks = std::min(panels, round_up(blocks, threads));
    return blocks;
  }
  // The tiles of block b: whole NR-tile panels, spread evenly over the blocks.
  Range block_tiles(int64_t b, int64_t blocks) const {
    return share(ceil_div(th_ * tw_, nr_), int(b), int(blocks), nr_, th_ * tw_);
  }

  // V, then M (at most all the output channels' m_floats, as need() counts), then the
  // border windows: thread tid's share of the workspace.
  struct Buffers {
    float *v, *m, *border;
  };
  Buffers buffers(const Workspace& ws, int tid) const {
    float* v = ws.block(tid);
    float* m = v + round_up(v_floats(), 16);
    return {v, m, m + round_up(m_floats(s_.d.out_channels), 16)};
  }

  // Blocks of images_per_block_ whole images (or fewer, spread evenly), shared between the
  // threads as run's blocks of tiles are.
  void run_image_groups(const float* input, float* output, int64_t in_image, int64_t out_image, int threads,
                        const Workspace& ws, PhaseTimes* sink) const {
    const int64_t batch = s_.d.batch, blocks = ceil_div(batch, images_per_block_);
    for_thread_blocks(threads, blocks, true, ws, [&](int64_t b, Range channels, const Buffers& buf) {
      const Range images = share(batch, int(b), int(blocks), 1, batch);
      const ImageRun run{input + images.begin * in_image, in_image, output + images.begin * out_image, out_image,
                         images.end - images.begin};
      run_block(run, Range{0, th_ * tw_}, channels, buf, true, sink);
    });
  }

  // Shares `blocks` blocks and the output channels between the threads (choose_grid) and
  // calls f(block, channels, buffers) for each of a thread's blocks.
  template <typename F>
  void for_thread_blocks(int threads, int64_t blocks, bool blocked, const Workspace& ws, F&& f) const {
    const ThreadGrid grid = choose_grid(threads, blocks, channel_units(blocked));
    parallel_region(threads, [&] {
      const int tid = omp_get_thread_num();
      const Range mine = share(blocks, tid / grid.wn, grid.wm, 1, blocks);
      const Range channels = thread_channels(blocked, tid % grid.wn, grid.wn);
      if (mine.begin >= mine.end || channels.begin >= channels.end) return;
      const Buffers buf = buffers(ws, tid);
      for (int64_t b = mine.begin; b < mine.end; ++b) f(b, channels, buf);
    });
  }

  // Calls f(pos, lanes) for groups of up to 8 consecutive tiles of [t0, t0 + count)
  // (pos = tile - t0), each inside one tile row and, if panel > 0, one panel of that width.
  template <typename F>
  void for_each_tile_group(int64_t t0, int64_t count, int64_t panel, F&& f) const {
    for (int64_t pos = 0; pos < count;) {
      int64_t lanes = std::min<int64_t>({8, count - pos, tw_ - (t0 + pos) % tw_});
      if (panel > 0) lanes = std::min(lanes, panel - pos % panel);
      f(pos, int(lanes));
      pos += lanes;
    }
  }

  // Images side by side in a block (images_per_block): `count` images from x and y on,
  // `x_image` and `y_image` floats apart; one image (count 1) otherwise.
  struct ImageRun {
    const float* x;
    int64_t x_image;
    float* y;
    int64_t y_image;
    int64_t count;
  };

  // One block for output channels [channels.begin, channels.end): tiles [tiles.begin,
  // tiles.end) of each image of `images` (several only on the pointwise kernels: image i's
  // in V's and M's columns from i x the tiles on); the channel blocks' transforms and GEMMs
  // into M, then the output transform.
  // images.x: the padded NCHW copy, or in NCHW8 and NHWC in place the input image itself
  // (border: the thread's buffer for tiles that reach into the padding).
  void run_block(const ImageRun& images, Range tiles, Range channels, const Buffers& buf, bool blocked,
                 PhaseTimes* sink) const {
    const int64_t per_image = tiles.end - tiles.begin, count = images.count * per_image,
                  width = round_up(count, nr_);
    float *v = buf.v, *m = buf.m;
    PhaseClock clock(sink);
    // NCHW8: channel blocks in whole 8-channel blocks.
    const int64_t icb = blocked ? round_up(blocking_.channels, 8) : blocking_.channels;
    for_each_balanced_block(s_.d.in_channels, icb, blocked ? 8 : 1, [&](int64_t ic0, int64_t icn) {
      if (pointwise_) {
        for (int64_t i = 0; i < images.count; ++i)
          transform_input_pixel_major(images.x + i * images.x_image, tiles.begin, per_image, width, i * per_image,
                                      ic0, icn, buf.border, v);
        zero_pixel_major_tail(count, width, icn, v);
      } else if (blocked) {
        transform_input_blocked(images.x, tiles.begin, count, width, ic0, icn, buf.border, v);
      } else {
        transform_input(images.x, tiles.begin, count, width, ic0, icn, v);
      }
      clock.lap(&PhaseTimes::input_s);
      if (pointwise_) {
        multiply_pointwise(v, count, width, ic0, icn, channels, m);
      } else if (blocked) {
        multiply_blocked(v, count, width, ic0, icn, channels, m);
      } else {
        multiply(v, count, width, ic0, icn, channels, m);
      }
      clock.lap(&PhaseTimes::gemm_s);
    });
    for (int64_t i = 0; i < images.count; ++i) {
      float* y = images.y + i * images.y_image;
      if (blocked) {
        transform_output_blocked(m + i * per_image * 8, tiles.begin, per_image, width, channels, y);
      } else {
        transform_output(m, tiles.begin, count, width, channels, y);
      }
    }
    clock.lap(&PhaseTimes::output_s);
  }

  // The last panel's columns past the block's tiles are computed too (their M columns
  // are never read): zeros there keep stale bits (denormals, NaN) out of the kernel.
  void zero_panel_tail(int64_t count, int64_t width, int64_t icn, float* v) const {
    const int64_t used = count - (width - nr_);
    if (used < nr_)
      for (int64_t xi = 0; xi < A * A; ++xi)
        for (int64_t c = 0; c < icn; ++c)
          zero_floats(v + xi * plane(icn * width) + (width - nr_) * icn + c * nr_ + used, nr_ - used);
  }

  // Channel vectors: tile t's alpha x alpha window of channel block `block`: in the image x
  // when it lies inside, else in border slot q, a copy with zeros for the padding.
  Window tile_window(const float* x, int64_t block, int64_t t, float* border, int q) const {
    const gk_conv_desc& d = s_.d;
    const int64_t h = d.in_height, w = d.in_width;
    const int64_t iy = t / tw_ * M - d.pad_top, ix = t % tw_ * M - d.pad_left;
    const int64_t pixel = pixel_stride(d.in_channels);
    const float* image = x + block_offset(block, h * w);
    if (iy >= 0 && ix >= 0 && iy + A <= h && ix + A <= w) return {image + (iy * w + ix) * pixel, w * pixel, pixel};
    float* copy = border + q * A * A * 8;
    const int64_t lo = std::clamp<int64_t>(-ix, 0, A), hi = std::clamp<int64_t>(w - ix, lo, A);
    for (int64_t r = 0; r < A; ++r) {
      float* dst = copy + r * A * 8;
      if (iy + r < 0 || iy + r >= h) {
        zero_floats(dst, A * 8);
        continue;
      }
      zero_floats(dst, lo * 8);
      const float* src = image + ((iy + r) * w + ix) * pixel;
      if (pixel == 8) {  // pixels 8 floats apart (NCHW8, or NHWC of 8 channels): one run
        copy_run(dst + lo * 8, src + lo * 8, (hi - lo) * 8);
      } else {
        for (int64_t c = lo; c < hi; ++c) copy_run(dst + c * 8, src + c * pixel, 8);
      }
      zero_floats(dst + hi * 8, (A - hi) * 8);
    }
    return {copy, A * 8, 8};
  }

  // NCHW8: the next channel block's rows, fetched while this one is transformed. The rows
  // that tiles [t0, t0 + count) read in channel block `block` are one run of its plane; the
  // share of its lines for tiles [from, to) of them is fetched. A tile group reads pieces
  // of 6 or 8 rows out of order, which the hardware prefetchers do not follow from one
  // plane to the next: at batch 8, whose images do not stay in L2 from one run to the
  // next, 64 channels at 56x56 (F(4x4), Zen 5, 1 thread) ran 1.16-1.30x its batch-1 time
  // per image, 1.11-1.12 with these; 128 at 28x28 1.07-1.18x, 1.05-1.06. NHWC's next
  // block lies in the same lines. Only ahead of the pointwise kernels' GEMMs: ahead of the
  // AVX2 4x24 GEMMs, which take twice as long, the prefetches cost 2% at batch 1 and gained
  // 1% at batch 8.
  void prefetch_block_rows(const float* x, int64_t block, int64_t t0, int64_t count, int64_t from, int64_t to) const {
    if (nhwc()) return;
    const gk_conv_desc& d = s_.d;
    const int64_t lo = std::max<int64_t>(0, t0 / tw_ * M - d.pad_top);
    const int64_t hi = std::min<int64_t>(d.in_height, (t0 + count - 1) / tw_ * M + A - d.pad_top);
    if (lo >= hi) return;
    const float* run = x + (block * d.in_height + lo) * d.in_width * 8;
    const int64_t lines = ceil_div((hi - lo) * d.in_width * 8, 16);
    for (int64_t l = from * lines / count; l < to * lines / count; ++l) __builtin_prefetch(run + l * 16);
  }

  // NCHW8 and NHWC in place: V as transform_input writes it, from the image, 8 channels by
  // 8 tiles at a time (groups of consecutive tiles inside one panel).
  void transform_input_blocked(const float* x, int64_t t0, int64_t count, int64_t width, int64_t ic0,
                               int64_t icn, float* border, float* v) const {
    const int64_t xi_stride = plane(icn * width);
    for (int64_t c = 0; c < icn; c += 8) {
      for (int64_t pos = 0; pos < count;) {
        const int count8 = int(std::min<int64_t>({8, count - pos, nr_ - pos % nr_}));
        Window tiles[8];
        for (int q = 0; q < count8; ++q) tiles[q] = tile_window(x, (ic0 + c) / 8, t0 + pos + q, border, q);
        fns_.in_blocked(tiles, count8, int(std::min<int64_t>(8, icn - c)),
                        v + (pos / nr_) * icn * nr_ + c * nr_ + pos % nr_, nr_, xi_stride);
        pos += count8;
      }
    }
    zero_panel_tail(count, width, icn, v);
  }

  // NCHW8: M[xi] (+)= U[xi] V[xi] stored channel-blocked, element (o, t) of M[xi] at
  // m + xi * xi_m + (o / 8) * width * 8 + t * 8 + o % 8, so the output transform loads one
  // vector of 8 channels per xi. Rows past the last channel are zeroed (the padding
  // channels of the output come out zero).
  void multiply_blocked(const float* v, int64_t count, int64_t width, int64_t ic0, int64_t icn, Range channels,
                        float* m) const {
    const KernelInfo& ker = *cfg_.kernel;
    const int64_t ocs = channels.end - channels.begin, xi_m = plane(m_rows(ocs) * width);
    const float beta = ic0 == 0 ? 0.0f : 1.0f;
    for (int xi = 0; xi < A * A; ++xi) {
      const PackedA& u = *packed_[size_t(xi)];
      for (int64_t p = 0; p * nr_ < count; ++p) {
        const int64_t cols = std::min(nr_, count - p * nr_);
        for (int64_t r = 0; r < ocs; r += mr_)
          run_ukernel_blocked_c(ker, std::min(mr_, ocs - r), cols, icn, 1.0f,
                                u.panel(channels.begin + r, mr_, ic0, icn, int(mr_), nullptr),
                                v + xi * plane(icn * width) + p * icn * nr_, nr_, beta, m + xi * xi_m, width * 8, nullptr,
                                r, p * nr_);
      }
      if (ocs % 8) zero_padding_lanes(m + xi * xi_m + (ocs / 8) * width * 8, count, ocs % 8);
    }
  }

  // NCHW8 and NHWC in place on the pointwise kernels: V[xi] at v + xi * plane(IC8 * width)
  // (IC8: icn rounded up to 8), an NCHW8 image of `width` tiles (channel block b at + b *
  // width * 8), tiles [t0, t0 + count) of the image x in its columns from col0 on.
  void transform_input_pixel_major(const float* x, int64_t t0, int64_t count, int64_t width, int64_t col0,
                                   int64_t ic0, int64_t icn, float* border, float* v) const {
    const int64_t xi_stride = plane(round_up(icn, 8) * width);
    for (int64_t c = 0; c < icn; c += 8) {
      float* vb = v + c * width + col0 * 8;
      for (int64_t pos = 0; pos < count; pos += 8) {
        const int count8 = int(std::min<int64_t>(8, count - pos));
        Window tiles[8];
        if (c + 8 < icn) prefetch_block_rows(x, (ic0 + c) / 8 + 1, t0, count, pos, pos + count8);
        for (int q = 0; q < count8; ++q) tiles[q] = tile_window(x, (ic0 + c) / 8, t0 + pos + q, border, q);
        fns_.in_pixel_major(tiles, count8, vb + pos * 8, xi_stride);
      }
    }
  }
  // V's columns past the `count` transformed, zeroed (the kernels compute them too).
  void zero_pixel_major_tail(int64_t count, int64_t width, int64_t icn, float* v) const {
    if (count == width) return;
    const int64_t xi_stride = plane(round_up(icn, 8) * width);
    for (int64_t c = 0; c < icn; c += 8)
      for (int xi = 0; xi < A * A; ++xi) zero_floats(v + c * width + xi * xi_stride + count * 8, (width - count) * 8);
  }

  // M[xi] (+)= U[xi] V[xi] on the pointwise kernels, M stored as multiply_blocked stores it.
  void multiply_pointwise(const float* v, int64_t count, int64_t width, int64_t ic0, int64_t icn, Range channels,
                          float* m) const {
    const int64_t ocs = channels.end - channels.begin, xi_m = plane(m_rows(ocs) * width);
    const int64_t ic = s_.d.in_channels, ocp = round_up(s_.d.out_channels, 8), xi_v = plane(round_up(icn, 8) * width);
    gk_pointwise_args args;
    args.full_blocks = icn / 8, args.tail_channels = icn % 8;
    args.x_block_stride = width * 8, args.x_row_stride = 8, args.y_block_stride = width * 8;
    args.bias = nullptr, args.activation = 0, args.accumulate = ic0 > 0;
    for (int xi = 0; xi < A * A; ++xi) {
      args.x = v + xi * xi_v;
      for (const PointwisePanel& q : panels_) {
        if (q.j < channels.begin || q.j >= channels.end) continue;
        args.w = u_pointwise_.data() + xi * ic * ocp + q.j * ic + ic0 * q.kernel->nr;
        args.w_next_offset = fetch_next_panel_ ? ic * q.kernel->nr * 4 : 0;
        args.y = m + xi * xi_m + (q.j - channels.begin) * width;
        // Whole tiles, then the tiles past the last whole one: in 4-pixel calls where the
        // kernel has them (V is zero up to `width`, a multiple of 4), except a single one;
        // else in one-pixel calls or one more tile. 16 tiles (F(2x2) at 7x7, F(4x4) at
        // 14x14) ran 12 + 4 at the cost of 24 (Zen 4: 512x512 channels 0.109 ms, 12 tiles
        // 0.057).
        const int64_t whole = count / q.kernel->mr, rest = count % q.kernel->mr;
        if (rest > 1 && q.kernel->four_rows) {
          args.tiles = whole;
          if (whole) q.kernel->fn(&args);
          gk_pointwise_args tail = args;
          tail.x += whole * q.kernel->mr * 8, tail.y += whole * q.kernel->mr * 8, tail.tiles = ceil_div(rest, 4);
          q.kernel->four_rows(&tail);
          continue;
        }
        const bool one_row = rest && one_pixel_calls_pay(*q.kernel, rest, icn / 8 * 8, icn % 8);
        args.tiles = whole + (rest && !one_row);
        if (args.tiles) q.kernel->fn(&args);
        if (!one_row) continue;
        gk_pointwise_args tail = args;
        tail.x += whole * q.kernel->mr * 8, tail.y += whole * q.kernel->mr * 8, tail.tiles = rest;
        q.kernel->one_row(&tail);
      }
      if (ocs % 8) zero_padding_lanes(m + xi * xi_m + (ocs / 8) * width * 8, count, ocs % 8);
    }
  }

  // The residual a tile adds (GK_CONV_FLAG_ADD_TO_OUTPUT) is read M rows of M pixels at a
  // time, a pattern the hardware prefetchers miss: loaded on demand it cost a ResNet basic
  // block's second conv (64 channels, 56x56, F(4x4)) 0.3 ms, six times a separate add pass.
  // So the rows of the tile a few ahead are fetched while this one is transformed.
  static constexpr int64_t kResidualPrefetchTiles = 4;
  // (plane: the tile's channel block at pixel (0, 0); row, pixel: its strides.)
  void prefetch_residual_tile(const float* plane, int64_t tile, int64_t row, int64_t pixel) const {
    if (tile >= th_ * tw_) return;
    const float* t = plane + (tile / tw_) * M * row + (tile % tw_) * M * pixel;
    const int64_t rows = std::min<int64_t>(M, s_.oh - (tile / tw_) * M);
    const int64_t step = std::max<int64_t>(pixel, 16) / pixel;  // pixels per line fetched
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < M; j += step) __builtin_prefetch(t + r * row + j * pixel, 1);
  }

  void transform_output_blocked(const float* m, int64_t t0, int64_t count, int64_t width, Range channels,
                                float* y) const {
    const bool adding = finish().add;
    const int64_t xi_m = plane(m_rows(channels.end - channels.begin) * width);
    const int64_t pixel = pixel_stride(s_.d.out_channels), row = s_.ow * pixel;
    for (int64_t o = channels.begin; o < channels.end; o += 8) {
      const float* mb = m + (o - channels.begin) / 8 * width * 8;
      float* plane = y + block_offset(o / 8, s_.oh * s_.ow);
      for (int64_t pos = 0; pos < count; ++pos) {
        const int64_t ty = (t0 + pos) / tw_, tx = (t0 + pos) % tw_;
        if (adding) prefetch_residual_tile(plane, t0 + pos + kResidualPrefetchTiles, row, pixel);
        fns_.out_blocked(mb + pos * 8, xi_m, &bias_blocked_[size_t(o)], finish(),
                         plane + ty * M * row + tx * M * pixel, row, pixel, s_.oh - ty * M, s_.ow - tx * M);
      }
    }
  }

  // V for channels [ic0, ic0 + icn): V[xi] at v + xi * plane(icn * width), panel p (tiles
  // [p * NR, p * NR + NR)) at + p * icn * NR, channel c's row of NR tiles at + c * NR.
  void transform_input(const float* padded, int64_t t0, int64_t count, int64_t width, int64_t ic0,
                       int64_t icn, float* v) const {
    const int64_t xi_stride = plane(icn * width);
    for (int64_t c = 0; c < icn; ++c) {
      for_each_tile_group(t0, count, nr_, [&](int64_t pos, int lanes) {
        const int64_t ty = (t0 + pos) / tw_, tx = (t0 + pos) % tw_;
        const float* tile = padded + ((ic0 + c) * hp_ + ty * M) * M * len_ + tx;
        // The next channel's rows of these tiles: short runs in many rows, which the
        // hardware prefetchers do not pick up (measured 15-20% of this phase on 64- and
        // 128-channel layers, whose padded input does not fit L2).
        if (c + 1 < icn)
          for (int row = 0; row < A * M; ++row) __builtin_prefetch(tile + hp_ * M * len_ + row * len_);
        fns_.in(tile, len_, lanes,
                v + (pos / nr_) * icn * nr_ + c * nr_ + pos % nr_, xi_stride);
      });
    }
    zero_panel_tail(count, width, icn, v);
  }

  // M[xi] (+)= U[xi] V[xi] for output channels `channels`: micro-kernel calls on the
  // packed weights and the V panels; each B panel stays in L1 while the A panels stream.
  // M is stored channel-major, row (o * alpha^2 + xi) of `width` tiles, so the output
  // transform of a channel reads one contiguous run instead of alpha^2 scattered rows.
  void multiply(const float* v, int64_t count, int64_t width, int64_t ic0, int64_t icn, Range channels,
                float* m) const {
    const KernelInfo& ker = *cfg_.kernel;
    const int64_t rows = round_up(channels.end - channels.begin, mr_);
    const float beta = ic0 == 0 ? 0.0f : 1.0f;
    for (int xi = 0; xi < A * A; ++xi) {
      const PackedA& u = *packed_[size_t(xi)];
      for (int64_t p = 0; p * nr_ < count; ++p) {
        int64_t cols = 0;
        const gk_ukernel_fn fn = kernel_for_columns(ker, std::min(nr_, count - p * nr_), &cols);
        const float* b = v + xi * plane(icn * width) + p * icn * nr_;
        float* c = m + xi * width + p * nr_;
        for (int64_t r = 0; r < rows; r += mr_) {
          const gk_ukernel_args args{u.panel(channels.begin + r, mr_, ic0, icn, int(mr_), nullptr), b,
                                     c + r * A * A * width, icn, nr_, A * A * width, 1.0f, beta, nullptr, 0};
          fn(&args);
        }
      }
    }
  }

  void transform_output(const float* m, int64_t t0, int64_t count, int64_t width, Range channels,
                        float* y) const {
    for (int64_t o = channels.begin; o < channels.end; ++o) {
      const float bias = bias_.empty() ? 0.0f : bias_[size_t(o)];
      for_each_tile_group(t0, count, 0, [&](int64_t pos, int lanes) {
        const int64_t ty = (t0 + pos) / tw_, tx = (t0 + pos) % tw_;
        fns_.out(m + (o - channels.begin) * A * A * width + pos, width, lanes, bias, finish(),
                 y + (o * s_.oh + ty * M) * s_.ow + tx * M, s_.ow, s_.oh - ty * M, s_.ow - tx * M);
      });
    }
  }

  // The input zero-padded to hp_ rows and split into M column phases: row r, phase q,
  // index i holds padded column i * M + q, so every tile (and every lane) reads inside.
  void pad_image(const float* x, float* padded, int threads) const {
    const gk_conv_desc& d = s_.d;
    parallel_region(threads, [&] {
#pragma omp for schedule(static)
      for (int64_t c = 0; c < d.in_channels; ++c)
        for (int64_t r = 0; r < hp_; ++r) {
          const int64_t ih = r - d.pad_top;
          float* dst = padded + (c * hp_ + r) * M * len_;
          if (ih < 0 || ih >= d.in_height) {
            zero_floats(dst, M * len_);
          } else {
            fns_.split(x + (c * d.in_height + ih) * d.in_width, d.in_width, d.pad_left, len_, dst);
          }
        }
    });
  }

  Shape s_;
  KernelConfig cfg_;
  bool pointwise_;  // channel-vector GEMMs on the pointwise kernels (pointwise_gemms)
  // The pointwise kernels' tiles fetch the next panel's U rows (gk_pointwise_args::
  // w_next_offset: U's panels lie one after another, the next xi's after the last) with
  // AVX2; with AVX-512 the 12x32 fetches the rows ahead of those it reads instead (as
  // measured there), the 16-column kernels nothing.
  bool fetch_next_panel_ = pointwise_kernel().simd == SimdLevel::Avx2;
  int64_t mr_, nr_;
  std::vector<PointwisePanel> panels_;  // pointwise_: the output channels' panels
  weights_vector<float> u_pointwise_;   // pointwise_: U[xi] per panel (pack_pointwise)
  std::vector<float> bias_, bias_blocked_;
  std::vector<std::unique_ptr<PackedA>> packed_;
  TransformFns<M> fns_;
  int64_t th_, tw_, hp_, len_;
  Blocking blocking_;
  int64_t images_per_block_ = 1;  // see images_per_block
};

// An NCHW plan of 8 or more input channels whose NCHW8 form runs its GEMMs on the pointwise
// kernels runs that form on blocked copies of the input and output: transforms vectorized
// over channels and the pointwise GEMMs beat the phase-split NCHW path by far more than
// the copies cost. One thread, ms, NCHW before / after: Zen 5 (AVX-512), F(4x4) 64 ch
// 56x56 0.95 / 0.77, 128 ch 28x28 0.83 / 0.50, 256 ch 14x14 1.34 / 0.59, 512 ch 7x7
// 5.3 / 1.6, F(6x6) 56x56 1.28 / 0.69; Zen 3 (AVX2), F(4x4) 64 ch 1.37-1.88 / 1.06-1.08,
// 128 ch 1.64-1.68 / 0.84-1.06, 256 ch 1.28-1.32 / 0.93-1.00. (Through AVX2's 4x24 GEMMs
// it did not pay: 64 ch 56x56 1.14 / 1.21.)
bool nchw_through_blocked(const Shape& s, Shape* s8) {
  return s.d.in_channels >= 8 && nchw_as_nchw8(s, s8) && pointwise_gemms(*s8);
}

template <int M>
class Winograd final : public Algorithm {
 public:
  gk_conv_algo id() const override {
    return M == 2 ? GK_CONV_ALGO_WINOGRAD_F23 : M == 4 ? GK_CONV_ALGO_WINOGRAD_F43 : GK_CONV_ALGO_WINOGRAD_F63;
  }
  const char* name() const override {
    return M == 2 ? "winograd_f23" : M == 4 ? "winograd_f43" : "winograd_f63";
  }
  std::string unusable_reason(const Shape& s) const override {
    const gk_conv_desc& d = s.d;
    if (d.kernel_h != 3 || d.kernel_w != 3) return "kernel is not 3x3";
    if (d.stride_h != 1 || d.stride_w != 1) return "stride is not 1";
    if (d.dilation_h != 1 || d.dilation_w != 1) return "dilated";
    if (d.groups != 1) return "grouped";
    return "";
  }
  bool lossy() const override { return M > 2; }
  // NHWC in place where the transforms' kernel keeps a tile's rows in one channel block
  // (WinogradConv::native_layout).
  bool runs_nhwc(const Shape& s) const override {
    return nhwc_in_place(s) && runs_in_place(s);
  }
  const char* tuning_name() const override { return "nr_tiles"; }
  // Half and twice the default block, when there are that many tiles.
  std::vector<int64_t> tunings(const Shape& outer) const override {
    Shape s = outer;
    if (Shape s8; nchw_through_blocked(outer, &s8)) s = s8;
    const int64_t nr = tile_unit(s);
    const int64_t nb = blocking<M>(s, nr, gemm_mr(s), 0).tiles;
    const int64_t all = round_up(ceil_div(s.oh, M) * ceil_div(s.ow, M), nr);
    std::vector<int64_t> t;
    if (nb / 2 >= nr) t.push_back(round_up(nb / 2, nr));
    if (2 * nb <= all) t.push_back(2 * nb);
    return t;
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b,
                                    int64_t nr_tiles) const override {
    if (Shape s8; nchw_through_blocked(s, &s8)) {
      std::unique_ptr<WinogradConv<M>> p8 = make(s8, w, b, nr_tiles);
      if (!p8) return nullptr;
      if (p8->native_layout(GK_LAYOUT_NCHW8)) return through_nchw8(s, s8, std::move(p8));
    }
    return make(s, w, b, nr_tiles);
  }

 private:
  static std::unique_ptr<WinogradConv<M>> make(const Shape& s, const float* w, const float* b, int64_t nr_tiles) {
    std::unique_ptr<WinogradConv<M>> p(new WinogradConv<M>(s, w, b, nr_tiles));
    if (!p->ok()) {
      set_last_error("out of memory packing the Winograd weights");
      return nullptr;
    }
    return p;
  }
};

}  // namespace

const Algorithm* winograd_algorithm(int m) {
  static const Winograd<2> f23;
  static const Winograd<4> f43;
  static const Winograd<6> f63;
  return m == 2 ? static_cast<const Algorithm*>(&f23) : m == 4 ? static_cast<const Algorithm*>(&f43) : &f63;
}

}  // namespace conv
}  // namespace gk
