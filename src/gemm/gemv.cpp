// Matrix-vector path for GEMMs with one output row or column (a fully connected layer at
// batch 1 is 1000x1x512), or a few against a large matrix. Memory-bound, so the work is to
// stream the matrix once at full width. Two shapes of loop, by which dimension of the
// matrix is contiguous:
//   dot form  (rows contiguous):    y[i] = <M[i, :], x>, four rows per pass; several
//                                   vectors (a few rows or columns of C) up to 4 at a
//                                   time (8 with 16-float vectors), each contiguous
//                                   (gathered first if not);
//   axpy form (columns contiguous): Y[:, r] += M[:, j] X[j, r], columns streamed down
//                                   their rows, each loaded vector serving all R vectors.
// The loops are written once with GCC vector types and compiled per ISA (AVX-512,
// AVX2+FMA, baseline SSE2 / NEON); the variant follows the active micro-kernel so that
// GEMMKIT_KERNEL also selects the GEMV code under test.
// Vector types only cross always-inline calls, so the ABI note about them does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {
namespace {

// Vector types per ISA: the loops are templates over the native width (ymm on AVX2). A
// 64-byte type on AVX2 made GCC move every partial sum through general registers and the
// stack, which held both loops to a fifth of the memory bandwidth.
typedef float v16 __attribute__((vector_size(64)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

#define GK_INLINE inline __attribute__((always_inline))

template <typename V>
constexpr int64_t lanes() {
  return sizeof(V) / sizeof(float);
}
template <typename V>
GK_INLINE V load_vec(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
template <typename V>
GK_INLINE void store_vec(float* p, const V& v) { std::memcpy(p, &v, sizeof v); }
// The sum of the lanes by halving (a lane-by-lane loop compiled to a chain of extracts
// through the stack: a 9x1x6 GEMV spent most of its time here).
GK_INLINE float hsum(const v4& v) {
  const v4 pairs = v + __builtin_shufflevector(v, v, 2, 3, 0, 1);
  return pairs[0] + pairs[1];
}
GK_INLINE float hsum(const v8& v) {
  return hsum(__builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7));
}
GK_INLINE float hsum(const v16& v) {
  return hsum(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
              __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
}
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef int32_t vi4 __attribute__((vector_size(16)));
template <typename V> struct IntVector;
template <> struct IntVector<v16> { using type = vi16; };
template <> struct IntVector<v8> { using type = vi8; };
template <> struct IntVector<v4> { using type = vi4; };
template <typename V> struct HalfVector;
template <> struct HalfVector<v16> { using type = v8; };
template <> struct HalfVector<v8> { using type = v4; };

// The sum of row[t] * x[t] for t in [j, cols), fewer than a vector of V: a vector of half
// the width while one fits, then single floats (a chain of up to 15 scalar products per
// row took a quarter of 2x6x492 NT).
template <typename V>
GK_INLINE float dot_tail(const float* row, const float* x, int64_t j, int64_t cols) {
  float s = 0.0f;
  if constexpr (lanes<V>() > 4) {
    using H = typename HalfVector<V>::type;
    if (j + lanes<H>() <= cols) {
      s = hsum(load_vec<H>(row + j) * load_vec<H>(x + j));
      j += lanes<H>();
    }
    return s + dot_tail<H>(row, x, j, cols);
  }
  for (; j < cols; ++j) s += row[j] * x[j];
  return s;
}

GK_INLINE float finish(float alpha, float acc, float beta, float y) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * y;
}

// Dot-form rows of 1 to 7 floats: each row's sum in scalars, x's values in registers, in a
// loop of its own (the vector loop's setup and tail per row were most of 162x1x2's time).
template <int C>
GK_INLINE void gemv_dot_short_rows(int64_t r0, int64_t r1, float alpha, const float* m, int64_t rs, const float* x,
                                   float beta, float* y, int64_t incy) {
  float xs[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) xs[c] = x[c];
  for (int64_t i = r0; i < r1; ++i) {
    const float* row = m + i * rs;
    float s = 0.0f;
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) s += row[c] * xs[c];
    y[i * incy] = finish(alpha, s, beta, y[i * incy]);
  }
}

// The elements of a line of the matrix (a row in dot form, a column in axpy form) before
// the first whose address is a multiple of V's size (fewer than a vector), where that
// holds for every line (their stride a whole number of vectors) and the lines are at
// least `min_length` long: loads split across two cache lines cost a memory-bound GEMV a
// quarter of its bandwidth (1x4096x25088 from a malloc'd, 16-byte aligned matrix: 24-26
// GB/s, 33-39 aligned; Zen 5, one thread), and one from L3 a tenth (1x4000x512).
template <typename V>
GK_INLINE int64_t gemv_unaligned_head(const float* line, int64_t stride, int64_t length, int64_t min_length) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(line);
  if (length < min_length || (stride * sizeof(float)) % sizeof(V) != 0 || address % sizeof(float) != 0) return 0;
  return static_cast<int64_t>((sizeof(V) - address % sizeof(V)) % sizeof(V) / sizeof(float));
}
// The dot form sums a row's head in the same pass, so it pays from rows that are many
// vectors long (1x4000x512 above).
constexpr int64_t kGemvDotAlignMinLength = 256;

// A dot-form row's sum: the vector accumulator over columns [head, j), then the scalar
// tail [j, cols) and the head [0, head) (rows shorter than a vector have no vector part:
// 1x1231x3 with B transposed ran at 0.5x OpenBLAS with one).
template <typename V>
GK_INLINE float dot_row_sum(const V& acc, const float* row, const float* x, int64_t head, int64_t j, int64_t cols) {
  return (j > head ? hsum(acc) : 0.0f) + dot_tail<V>(row, x, j, cols) + (head > 0 ? dot_tail<V>(row, x, 0, head) : 0.0f);
}

// Rows [r0, r1) in dot form; x is contiguous. Four rows per pass with two vectors each (8
// accumulators), each load of x serving four rows. The four rows lie a lane apart (the
// part's rows split into four runs, a pass taking the next row of each), so the matrix is
// read as four sequential streams. Four neighbouring rows per pass would restart three
// streams every pass, which the prefetchers lose: from memory, one thread, Zen 5,
// 1000x1x4096 NN took 0.54 ms with neighbouring rows and 0.44 in lanes, 2048x1x1024 0.235
// and 0.198.
template <typename V>
GK_INLINE void gemv_dot(int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m,
                        int64_t rs, const float* x, float beta, float* y, int64_t incy) {
  switch (cols) {
    case 1: return gemv_dot_short_rows<1>(r0, r1, alpha, m, rs, x, beta, y, incy);
    case 2: return gemv_dot_short_rows<2>(r0, r1, alpha, m, rs, x, beta, y, incy);
    case 3: return gemv_dot_short_rows<3>(r0, r1, alpha, m, rs, x, beta, y, incy);
    case 4: return gemv_dot_short_rows<4>(r0, r1, alpha, m, rs, x, beta, y, incy);
    case 5: return gemv_dot_short_rows<5>(r0, r1, alpha, m, rs, x, beta, y, incy);
    case 6: return gemv_dot_short_rows<6>(r0, r1, alpha, m, rs, x, beta, y, incy);
    case 7: return gemv_dot_short_rows<7>(r0, r1, alpha, m, rs, x, beta, y, incy);
    default: break;
  }
  constexpr int64_t kLanes = lanes<V>(), kStep = 2 * kLanes;
  const int64_t head = gemv_unaligned_head<V>(m + r0 * rs, rs, cols, kGemvDotAlignMinLength);
  const int64_t passes = (r1 - r0) / 4, lane = passes;
  for (int64_t p = 0; p < passes; ++p) {
    const int64_t i = r0 + p;
    const float* row[4] = {m + i * rs, m + (i + lane) * rs, m + (i + 2 * lane) * rs, m + (i + 3 * lane) * rs};
    V lo[4], hi[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) lo[r] = hi[r] = V{};  // (an `= {}` initializer became a `rep stos`)
    int64_t j = head;
    for (; j + kStep <= cols; j += kStep) {
      const V x_lo = load_vec<V>(x + j), x_hi = load_vec<V>(x + j + kLanes);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        lo[r] += load_vec<V>(row[r] + j) * x_lo;
        hi[r] += load_vec<V>(row[r] + j + kLanes) * x_hi;
      }
    }
    if (j + kLanes <= cols) {  // one more whole vector
      const V x_lo = load_vec<V>(x + j);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) lo[r] += load_vec<V>(row[r] + j) * x_lo;
      j += kLanes;
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const float s = dot_row_sum<V>(lo[r] + hi[r], row[r], x, head, j, cols);
      y[(i + r * lane) * incy] = finish(alpha, s, beta, y[(i + r * lane) * incy]);
    }
  }
  for (int64_t i = r0 + 4 * passes; i < r1; ++i) {  // four chains: one would wait an FMA latency per vector
    const float* row = m + i * rs;
    V acc[4];
#pragma GCC unroll 4
    for (int a = 0; a < 4; ++a) acc[a] = V{};
    int64_t j = head;
    for (; j + 4 * kLanes <= cols; j += 4 * kLanes)
#pragma GCC unroll 4
      for (int a = 0; a < 4; ++a) acc[a] += load_vec<V>(row + j + a * kLanes) * load_vec<V>(x + j + a * kLanes);
    for (; j + kLanes <= cols; j += kLanes) acc[0] += load_vec<V>(row + j) * load_vec<V>(x + j);
    const float s = dot_row_sum<V>((acc[0] + acc[1]) + (acc[2] + acc[3]), row, x, head, j, cols);
    y[i * incy] = finish(alpha, s, beta, y[i * incy]);
  }
}

// The sums of C vectors' lanes, all at once: pairs of vectors fold their halves together
// into one vector holding both, halving the width each level, until every lane is one sum
// (a vector that is left alone folds with itself). Two shuffles and an add per fold: 8 dot
// products of 16 lanes cost 8 folds, where 8 horizontal sums cost 32 shuffles and adds.
// fold<W>: x and y hold groups of W lanes; the result holds x's groups, then y's, W / 2 wide.
constexpr int fold_index(int L, int W, int t, int half) {
  const int q = t / (W / 2), o = t % (W / 2), groups = L / W;
  return (q < groups ? q * W : L + (q - groups) * W) + half + o;
}
template <typename V, int W, int... T>
GK_INLINE V fold(const V& x, const V& y, std::integer_sequence<int, T...>) {
  constexpr int L = sizeof...(T);
  return __builtin_shufflevector(x, y, fold_index(L, W, T, 0)...) + __builtin_shufflevector(x, y, fold_index(L, W, T, W / 2)...);
}
// v[0 .. C) (C a power of two), each a group of W lanes per accumulator: sums[a] for each
// accumulator a in order (sums has room for max(C * W / lanes, lanes) floats).
template <typename V, int W, int C>
GK_INLINE void fold_sums(V* v, float* sums) {
  constexpr int L = lanes<V>();
  if constexpr (W == 1) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) store_vec(sums + c * L, v[c]);
  } else if constexpr (C == 1) {
    v[0] = fold<V, W>(v[0], v[0], std::make_integer_sequence<int, L>{});
    fold_sums<V, W / 2, 1>(v, sums);
  } else {
#pragma GCC unroll 16
    for (int c = 0; c < C / 2; ++c) v[c] = fold<V, W>(v[2 * c], v[2 * c + 1], std::make_integer_sequence<int, L>{});
    fold_sums<V, W / 2, C / 2>(v, sums);
  }
}

constexpr int next_power_of_two(int n) { return n <= 1 ? 1 : 2 * next_power_of_two((n + 1) / 2); }

// Rows rows' products with R vectors over one vector of columns, the lanes outside
// `mask` zero in both operands.
template <typename V, int R, int Rows>
GK_INLINE void add_masked_vector(V* acc, typename IntVector<V>::type mask, const float* m, int64_t rs, const float* x,
                                 int64_t xs) {
  V xv[R];
#pragma GCC unroll 8
  for (int v = 0; v < R; ++v) xv[v] = mask ? load_vec<V>(x + v * xs) : V{};
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const V a = mask ? load_vec<V>(m + r * rs) : V{};
#pragma GCC unroll 8
    for (int v = 0; v < R; ++v) acc[r * R + v] += a * xv[v];
  }
}

// Rows [r0, r1) in dot form against R vectors at once (vector v contiguous at x + v * xs,
// Y(i, v) at y[i * incy + v * ldy]): each row is loaded once for all R, where R passes of
// gemv_dot read the matrix R times. Rows rows per pass, one accumulator per (row,
// vector): 8-16 independent chains. 1209x2x279 (A's rows contiguous, B's two columns
// gathered) ran at 12 GFLOP/s on the tiny path, whose vectors run along the 2 columns.
// Rows of at least a vector end on one more vector ending at the row's end, its lanes
// already summed set to zero (in the row too, so that an infinity there adds no NaN), and
// all the accumulators are summed at once (fold_sums): a horizontal sum and a scalar tail
// per (row, vector) held 2001x4x63 to 22 GFLOP/s.
template <typename V, int R, int Rows>
GK_INLINE void gemv_dot_vectors(int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m, int64_t rs,
                                const float* x, int64_t xs, float beta, float* y, int64_t incy, int64_t ldy) {
  constexpr int64_t kLanes = lanes<V>();
  constexpr int kAcc = Rows * R, kFolded = next_power_of_two(kAcc);
  using VI = typename IntVector<V>::type;
  // Whole vectors from the first aligned column on (gemv_unaligned_head); the columns
  // before it in one vector from the row's start, its lanes from there on set to zero.
  const int64_t head = gemv_unaligned_head<V>(m + r0 * rs, rs, cols, kGemvDotAlignMinLength), body = cols - head;
  // The head vector's lanes before the first aligned column; the last vector's lanes past
  // those the whole vectors covered. (Set lane by lane: as two vector comparisons GCC 12
  // stopped on an internal compiler error in the AVX-512 variant.)
  VI head_lanes{}, new_lanes{};
  for (int t = 0; t < kLanes; ++t) {
    head_lanes[t] = t < head ? -1 : 0;
    new_lanes[t] = t >= kLanes - body % kLanes ? -1 : 0;
  }
  const int64_t whole = body / kLanes * kLanes;
  // A pass's rows lie a lane apart: the part's rows split into Rows runs, and each pass
  // takes the next row of every run, so each run is one sequential stream.
  const int64_t passes = (r1 - r0) / Rows, lane = passes;
  const int64_t lane_rs = lane * rs;
  for (int64_t p = 0; p < passes; ++p) {
    const int64_t i = r0 + p;
    V acc[kFolded];
#pragma GCC unroll 16
    for (int a = 0; a < kFolded; ++a) acc[a] = V{};
    for (int64_t j = head; j < head + whole; j += kLanes) {
      V xv[R];
#pragma GCC unroll 8
      for (int v = 0; v < R; ++v) xv[v] = load_vec<V>(x + v * xs + j);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const V a = load_vec<V>(m + i * rs + r * lane_rs + j);
#pragma GCC unroll 8
        for (int v = 0; v < R; ++v) acc[r * R + v] += a * xv[v];
      }
    }
    // Rows shorter than a vector: halves of vectors, then single floats (the path rules ask
    // for a whole vector of K; this keeps the loop right for any K).
    if (whole == 0) {
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < R; ++v) {
          float* out = y + (i + r * lane) * incy + v * ldy;
          *out = finish(alpha, dot_tail<V>(m + i * rs + r * lane_rs, x + v * xs, 0, cols), beta, *out);
        }
      continue;
    }
    if (whole < body) add_masked_vector<V, R, Rows>(acc, new_lanes, m + i * rs + cols - kLanes, lane_rs, x + cols - kLanes, xs);
    if (head > 0) add_masked_vector<V, R, Rows>(acc, head_lanes, m + i * rs, lane_rs, x, xs);
    float sums[kFolded > kLanes ? kFolded : kLanes];
    fold_sums<V, kLanes, kFolded>(acc, sums);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < R; ++v) {
        float* out = y + (i + r * lane) * incy + v * ldy;
        *out = finish(alpha, sums[r * R + v], beta, *out);
      }
  }
  if constexpr (Rows > 1) gemv_dot_vectors<V, R, 1>(r0 + passes * Rows, r1, cols, alpha, m, rs, x, xs, beta, y, incy, ldy);
}

// Any number of vectors in dot form: groups of up to 4 (8 with 32 vector registers, two
// rows per pass) read the matrix once each.
template <typename V>
GK_INLINE void gemv_dot_all(int64_t vectors, int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m,
                            int64_t rs, const float* x, int64_t xs, float beta, float* y, int64_t incy,
                            int64_t ldy) {
  constexpr bool kThirtyTwoRegisters = lanes<V>() == 16;
  constexpr int kWide = kThirtyTwoRegisters ? 4 : 2, kGroup = kThirtyTwoRegisters ? 8 : 4;
  for (int64_t v = 0; v < vectors;) {
    const float* xv = x + v * xs;
    float* yv = y + v * ldy;
    const int64_t group = std::min<int64_t>(vectors - v, kGroup);
    if constexpr (kThirtyTwoRegisters) {
      switch (group) {
        case 5: gemv_dot_vectors<V, 5, 2>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
        case 6: gemv_dot_vectors<V, 6, 2>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
        case 7: gemv_dot_vectors<V, 7, 2>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
        case 8: gemv_dot_vectors<V, 8, 2>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
        default: break;
      }
    }
    switch (group) {
      case 1: gemv_dot<V>(r0, r1, cols, alpha, m, rs, xv, beta, yv, incy); break;
      case 2: gemv_dot_vectors<V, 2, 4>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
      case 3: gemv_dot_vectors<V, 3, kWide>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
      case 4: gemv_dot_vectors<V, 4, kWide>(r0, r1, cols, alpha, m, rs, xv, xs, beta, yv, incy, ldy); break;
      default: break;
    }
    v += group;
  }
}

// Axpy form (the matrix's columns contiguous), R vectors at once: kAxpyColumns columns at
// a time are streamed down their rows, each loaded vector serving all R products, while
// the partial sums wait in `sums` (R x rows floats, L1/L2-resident). Keeping a chunk of y
// in registers across all columns instead read each column in 256-byte pieces a column
// stride apart, a new page per piece (4000x4000 ran at half OpenBLAS's speed); here every
// column is one sequential stream, and 8 of them still fit an L1 set's 8 ways when the
// column stride is a multiple of 4 KiB. With R > 1 (a GEMM with a few rows or columns)
// the matrix is still read once, where the packed path reads B in short runs per
// micro-panel: 4x4096x4096 ran at 9-12 GFLOP/s that way, 29 here. A register-tiled
// version (R x 16 rows of accumulators over blocks of 16 columns) was no faster with the
// matrix in cache and slower streaming it from memory (23 GFLOP/s).
constexpr int kAxpyColumns = 8;

// The distance between the vectors' partial sums: an odd multiple of 16 floats (64 bytes),
// so that up to 64 of them fall in different L1 sets. At a multiple of 4 KiB (4096 rows)
// all R sums of a step shared one 8-way set: 12x4096x1024 ran at 12 GFLOP/s, not 36.
int64_t gemv_sums_ld(int64_t rows) { return (rows + 15) / 16 * 16 | 16; }

// Y(i.., r) from the accumulated products of a vector of rows: alpha * acc + beta * y,
// y not read when beta == 0.
template <typename V>
GK_INLINE void finish_vec(float alpha, const V& acc, float beta, float* y, int64_t incy) {
  if (incy == 1) {
    V out = acc * alpha;
    if (beta != 0.0f) out += load_vec<V>(y) * beta;
    store_vec(y, out);
  } else {
    for (int l = 0; l < lanes<V>(); ++l) y[l * incy] = finish(alpha, acc[l], beta, y[l * incy]);
  }
}

// Interleaving R (2..4) vectors of rows into R * lanes consecutive floats, row by row
// (out[l * R + r] = acc[r][l]): the layout of a row-major C's block of rows when its R
// columns are the vectors. Output vector o, lane t holds flat element o * L + t, that is
// acc[(o * L + t) % R][(o * L + t) / R]; two-source shuffles pick it in two steps, from
// vectors 0-1 and 2-3 and then between those pairs.
constexpr int interleave_source(int R, int L, int o, int t) { return (o * L + t) % R; }
constexpr int interleave_lane(int R, int L, int o, int t) { return (o * L + t) / R; }
constexpr int interleave_pick(int R, int L, int o, int t, int first) {
  const int r = interleave_source(R, L, o, t);
  return r == first ? interleave_lane(R, L, o, t) : r == first + 1 ? L + interleave_lane(R, L, o, t) : 0;
}
constexpr int interleave_join(int R, int L, int o, int t) {
  const int r = interleave_source(R, L, o, t);
  return r < 2 ? t : R == 3 ? L + interleave_lane(R, L, o, t) : L + t;
}
template <typename V, int R, int O, int... T>
GK_INLINE V interleaved(const V (&acc)[R], std::integer_sequence<int, T...>) {
  constexpr int L = sizeof...(T);
  const V low = __builtin_shufflevector(acc[0], acc[1], interleave_pick(R, L, O, T, 0)...);
  if constexpr (R == 2) {
    return low;
  } else if constexpr (R == 3) {
    return __builtin_shufflevector(low, acc[2], interleave_join(R, L, O, T)...);
  } else {
    const V high = __builtin_shufflevector(acc[2], acc[3], interleave_pick(R, L, O, T, 2)...);
    return __builtin_shufflevector(low, high, interleave_join(R, L, O, T)...);
  }
}

// Y's block of rows as R * lanes consecutive floats (incy == R, ldy == 1): R vector stores
// where the lane-by-lane stores were 16 x R scalar ones (494x4x4 with A transposed spent
// most of its time there).
template <typename V, int R, int O = 0>
GK_INLINE void finish_interleaved(float alpha, const V (&acc)[R], float beta, float* y) {
  V out = interleaved<V, R, O>(acc, std::make_integer_sequence<int, lanes<V>()>{}) * alpha;
  if (beta != 0.0f) out += load_vec<V>(y + O * lanes<V>()) * beta;
  store_vec(y + O * lanes<V>(), out);
  if constexpr (O + 1 < R) finish_interleaved<V, R, O + 1>(alpha, acc, beta, y);
}

// The first R (1..8) floats of v to out, in pieces of 4, 2 and 1 straight from the
// register (a memcpy of R floats went through the stack: 5-7 columns ran 2-4x slower than 8).
typedef float v2 __attribute__((vector_size(8)));
template <int R>
GK_INLINE void store_first_floats(float* out, const v8& v) {
  if constexpr (R == 8) {
    store_vec(out, v);
  } else {
    if constexpr ((R & 4) != 0) {
      const v4 piece = __builtin_shufflevector(v, v, 0, 1, 2, 3);
      std::memcpy(out, &piece, sizeof piece);
    }
    constexpr int kPairAt = R & 4, kSingleAt = R & 6;
    if constexpr ((R & 2) != 0) {
      const v2 piece = __builtin_shufflevector(v, v, kPairAt, kPairAt + 1);
      std::memcpy(out + kPairAt, &piece, sizeof piece);
    }
    if constexpr ((R & 1) != 0) out[kSingleAt] = v[kSingleAt];
  }
}

// Rows i .. i + 15 of a row-major C's R (5..8) columns from R vectors that each hold one
// column's 16 rows: the 16 x 8 block transposed in registers (three rounds of two-source
// shuffles, the vectors past R zero), then each row's R floats stored together. Lane by
// lane (finish_vec) it was 16 x R scalar stores, which held 1104x8x13 with A transposed
// behind the tiny path.
constexpr int kTransposedRows = 16;  // v16's lanes; the shuffles below are written for them
template <int R>
GK_INLINE void finish_rows_transposed(float alpha, const v16 (&acc)[R], float beta, float* y, int64_t incy) {
  static_assert(R >= 5 && R <= 8, "a transposed block is 5 to 8 columns");
  v16 a[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) a[r] = r < R ? acc[r] : v16{};
  // Round 1, per 4-row group g: t[2j] = rows 4g, 4g + 1 of columns 2j, 2j + 1 (interleaved),
  // t[2j + 1] = rows 4g + 2, 4g + 3.
  v16 t[8];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = __builtin_shufflevector(a[2 * j], a[2 * j + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    t[2 * j + 1] =
        __builtin_shufflevector(a[2 * j], a[2 * j + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
  // Round 2: u[q] = row 4g + q of columns 0-3, u[4 + q] of columns 4-7.
  v16 u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const v16 &lo = t[4 * h], &hi = t[4 * h + 1], &lo2 = t[4 * h + 2], &hi2 = t[4 * h + 3];
    u[4 * h + 0] = __builtin_shufflevector(lo, lo2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    u[4 * h + 1] = __builtin_shufflevector(lo, lo2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    u[4 * h + 2] = __builtin_shufflevector(hi, hi2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    u[4 * h + 3] = __builtin_shufflevector(hi, hi2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  // Round 3: rows q and 4 + q (groups 0 and 1), then 8 + q and 12 + q, 8 columns each.
  auto store_row = [&](const v8& row, float* out) {
    v8 v = row * alpha;
    if (beta != 0.0f) {  // beta == 0: C is not read
      v8 old{};
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) old[r] = out[r];
      v += old * beta;
    }
    store_first_floats<R>(out, v);
  };
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const v16 first = __builtin_shufflevector(u[q], u[4 + q], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const v16 second =
        __builtin_shufflevector(u[q], u[4 + q], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    store_row(__builtin_shufflevector(first, first, 0, 1, 2, 3, 4, 5, 6, 7), y + q * incy);
    store_row(__builtin_shufflevector(first, first, 8, 9, 10, 11, 12, 13, 14, 15), y + (4 + q) * incy);
    store_row(__builtin_shufflevector(second, second, 0, 1, 2, 3, 4, 5, 6, 7), y + (8 + q) * incy);
    store_row(__builtin_shufflevector(second, second, 8, 9, 10, 11, 12, 13, 14, 15), y + (12 + q) * incy);
  }
}


// Rows [i0, i1) of Y, whole vectors of V, for R vectors over columns [c0, cols), each
// vector of rows adding its products to `sums` (the blocks' partial sums, c0 > 0) in
// registers and writing Y. Below 4 vectors, even and odd columns go to two sets of sums:
// one would be a chain of dependent FMAs, a column per FMA latency (1x10x41's 8 rows took
// most of its time).
template <typename V, int R>
GK_INLINE void gemv_axpy_rows(int64_t i0, int64_t i1, int64_t c0, int64_t cols, float alpha, const float* m,
                              int64_t cs, const float* xp, float beta, float* y0, int64_t incy, int64_t ldy,
                              const float* sums, int64_t ld) {
  constexpr int kSets = R < 4 ? 2 : 1;
  for (int64_t i = i0; i < i1; i += lanes<V>()) {
    V acc[kSets][R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      acc[0][r] = c0 > 0 ? load_vec<V>(sums + r * ld + i) : V{};
      acc[kSets - 1][r] = kSets > 1 ? V{} : acc[0][r];
    }
    int64_t c = c0;
    for (; c + kSets <= cols; c += kSets)
#pragma GCC unroll 2
      for (int s = 0; s < kSets; ++s) {
        const V v = load_vec<V>(m + (c + s) * cs + i);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[s][r] += v * xp[(c + s) * R + r];
      }
    if (c < cols) {
      const V v = load_vec<V>(m + c * cs + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[0][r] += v * xp[c * R + r];
    }
    V sum[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) sum[r] = kSets > 1 ? acc[0][r] + acc[kSets - 1][r] : acc[0][r];
    if constexpr (R >= 2 && R <= 4) {
      if (incy == R && ldy == 1) {
        finish_interleaved<V, R>(alpha, sum, beta, y0 + i * incy);
        continue;
      }
    }
    if constexpr (R >= 5 && R <= 8 && lanes<V>() == kTransposedRows) {
      if (ldy == 1) {
        finish_rows_transposed<R>(alpha, sum, beta, y0 + i * incy, incy);
        continue;
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) finish_vec(alpha, sum[r], beta, y0 + i * incy + r * ldy, incy);
  }
}

// Rows [i, rows), fewer than a vector of V, over all the columns: a vector of half the
// width while one fits, then under 4 rows one 4-float vector reaching past them where the
// column stride is 4 or more and there are 2 columns or more, else single rows (two
// chains each, even and odd columns), their sums in registers. Through `sums` in memory
// each product waited on the store of the one before: 1x10x41 (10 rows, no whole 16-float
// vector) ran at 0.08x OpenBLAS.
template <typename V, int R>
GK_INLINE void gemv_axpy_tail(int64_t i, int64_t rows, int64_t cols, float alpha, const float* m, int64_t cs,
                              const float* xp, float beta, float* y0, int64_t incy, int64_t ldy) {
  if constexpr (lanes<V>() > 4) {
    using H = typename HalfVector<V>::type;
    const int64_t whole = i + (rows - i) / lanes<H>() * lanes<H>();
    gemv_axpy_rows<H, R>(i, whole, 0, cols, alpha, m, cs, xp, beta, y0, incy, ldy, nullptr, 0);
    gemv_axpy_tail<H, R>(whole, rows, cols, alpha, m, cs, xp, beta, y0, incy, ldy);
  } else if (i < rows && cs >= lanes<V>() && cols >= 2) {
    // Under a vector of rows left: every column but the last read as one vector from the
    // first of them. Its floats past the last row lie in the column's padding or the next
    // column, before that column's last row (cs >= 3); the last column, where the caller's
    // matrix may end, alone. Row by row, 1x35x3008 with A transposed read 3 strided floats
    // a column against 2 vectors for the 32 rows before them, at 0.87x BLIS.
    V even[R], odd[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) even[r] = odd[r] = V{};
    const int64_t last = cols - 1;
    int64_t c = 0;
    for (; c + 2 <= last; c += 2) {
      const V a = load_vec<V>(m + c * cs + i), b = load_vec<V>(m + (c + 1) * cs + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        even[r] += a * xp[c * R + r];
        odd[r] += b * xp[(c + 1) * R + r];
      }
    }
    if (c < last) {
      const V a = load_vec<V>(m + c * cs + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) even[r] += a * xp[c * R + r];
    }
    for (int64_t l = 0; i + l < rows; ++l)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        float& out = y0[(i + l) * incy + r * ldy];
        out = finish(alpha, (even[r][l] + odd[r][l]) + m[last * cs + i + l] * xp[last * R + r], beta, out);
      }
  } else {
    for (; i < rows; ++i) {
      float even[R] = {}, odd[R] = {};
      int64_t c = 0;
      for (; c + 2 <= cols; c += 2)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          even[r] += m[c * cs + i] * xp[c * R + r];
          odd[r] += m[(c + 1) * cs + i] * xp[(c + 1) * R + r];
        }
      if (c < cols)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) even[r] += m[c * cs + i] * xp[c * R + r];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        float& out = y0[i * incy + r * ldy];
        out = finish(alpha, even[r] + odd[r], beta, out);
      }
    }
  }
}

// The rows before the first aligned vector (the head) and past the last whole one (the
// tail), fewer than a vector each, in one vector each per column: from the head's first row
// and up to the tail's last, reaching into the aligned rows (whose lanes are computed and
// never stored). Their columns run beside the aligned rows' pass over the same columns, so
// the head's line is read as its column's stream starts and the tail's as it ends: passes
// of their own read a line per column, a column apart (256x1x4096 column-major, 16 bytes
// off a line: 0.051 ms unaligned, 0.060 with its 4-row tail in such a pass).
struct AxpyEdges {
  int64_t head, tail;
};

// An edge vector's products over columns [c0, c1), in two chains added to acc once:
// through acc alone each column waited on the last.
template <typename V, int R>
GK_INLINE void gemv_axpy_edge_columns(int64_t c0, int64_t c1, const float* m, int64_t cs, const float* xp, V* acc) {
  V even[R] = {}, odd[R] = {};
  int64_t c = c0;
  for (; c + 2 <= c1; c += 2) {
    const V a = load_vec<V>(m + c * cs), b = load_vec<V>(m + (c + 1) * cs);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      even[r] += a * xp[c * R + r];
      odd[r] += b * xp[(c + 1) * R + r];
    }
  }
  if (c < c1) {
    const V a = load_vec<V>(m + c * cs);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) even[r] += a * xp[c * R + r];
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] += even[r] + odd[r];
}

// Y's rows from lanes [lane0, lane0 + count) of an edge vector's sums, one by one.
template <typename V, int R>
GK_INLINE void gemv_axpy_finish_lanes(const V* acc, int64_t lane0, int64_t count, float alpha, float beta, float* y0,
                                      int64_t incy, int64_t ldy) {
  for (int64_t l = 0; l < count; ++l)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      float& out = y0[l * incy + r * ldy];
      out = finish(alpha, acc[r][lane0 + l], beta, out);
    }
}

// One right-hand vector (R == 1) over one or two columns into a contiguous Y (beta ==
// 0): the rows' whole vectors in a loop of its own, with nothing else live (in the general
// one GCC kept the loop's pointers on the stack: 3350x1x1 with A transposed ran 0.43 us
// against BLIS's 0.35). Returns the rows done.
template <typename V>
GK_INLINE int64_t gemv_axpy_one_or_two_columns(int64_t rows, int64_t cols, float alpha, const float* m, int64_t cs,
                                               const float* xp, float* y) {
  constexpr int64_t kLanes = lanes<V>();
  const int64_t vec_rows = rows / kLanes * kLanes;
  const float x0 = xp[0];
  if (cols == 1) {
    for (int64_t i = 0; i < vec_rows; i += kLanes) store_vec(y + i, (load_vec<V>(m + i) * x0) * alpha);
    return vec_rows;
  }
  const float x1 = xp[1];
  const float* m1 = m + cs;
  for (int64_t i = 0; i < vec_rows; i += kLanes) {
    const V even = load_vec<V>(m + i) * x0, odd = load_vec<V>(m1 + i) * x1;
    store_vec(y + i, (even + odd) * alpha);
  }
  return vec_rows;
}

// Rows [r0, r1) for R vectors; xp holds X packed by column, xp[j * R + r] = X(j, r), and
// Y(i, r) = y[i * incy + r * ldy]. Whole blocks of kAxpyColumns go through `sums`; the
// last pass adds the remaining columns and writes Y. The vectors start at row r0 +
// edges.head, the head and tail rows beside each pass (AxpyEdges); without an edge tail the
// rows past the last whole vector go their own way (gemv_axpy_tail). One or two columns
// into a contiguous Y run their own loop from r0, edges unused.
template <typename V, int R>
GK_INLINE void gemv_axpy_part(int64_t r0, int64_t r1, AxpyEdges edges, int64_t cols, float alpha, const float* m,
                              int64_t cs, const float* xp, float beta, float* y, int64_t incy,
                              int64_t ldy, float* sums) {
  constexpr int64_t kLanes = lanes<V>();
  constexpr int kCols = kAxpyColumns;
  if constexpr (R == 1) {
    if ((cols == 1 || cols == 2) && beta == 0.0f && incy == 1) {
      const int64_t rows = r1 - r0, done = gemv_axpy_one_or_two_columns<V>(rows, cols, alpha, m + r0, cs, xp, y + r0);
      return gemv_axpy_tail<V, R>(done, rows, cols, alpha, m + r0, cs, xp, beta, y + r0, incy, ldy);
    }
  }
  V head_acc[R] = {}, tail_acc[R] = {};
  const float* head_m = m + r0;
  const float* tail_m = edges.tail > 0 ? m + (r1 - kLanes) : nullptr;
  r0 += edges.head;
  const int64_t rows = r1 - r0, vec_rows = rows / kLanes * kLanes, ld = gemv_sums_ld(rows);
  const int64_t blocked = cols > kGemvAxpyDirectColumns && vec_rows > 0 ? cols / kCols * kCols : 0;
  m += r0;
  if (blocked) std::fill(sums, sums + R * ld, 0.0f);
  for (int64_t j = 0; j < blocked; j += kCols) {
    if (edges.head > 0) gemv_axpy_edge_columns<V, R>(j, j + kCols, head_m, cs, xp, head_acc);
    const float* col[kCols];
    float xs[R][kCols];
#pragma GCC unroll 8
    for (int c = 0; c < kCols; ++c) {
      col[c] = m + (j + c) * cs;
      for (int r = 0; r < R; ++r) xs[r][c] = xp[(j + c) * R + r];
    }
    for (int64_t i = 0; i < vec_rows; i += kLanes) {
      V cv[kCols];
#pragma GCC unroll 8
      for (int c = 0; c < kCols; ++c) cv[c] = load_vec<V>(col[c] + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        V even = cv[0] * xs[r][0], odd = cv[1] * xs[r][1];  // two chains
#pragma GCC unroll 8
        for (int c = 2; c < kCols; c += 2) {
          even += cv[c] * xs[r][c];
          odd += cv[c + 1] * xs[r][c + 1];
        }
        float* s = sums + r * ld + i;
        store_vec(s, load_vec<V>(s) + (even + odd));
      }
    }
    if (edges.tail > 0) gemv_axpy_edge_columns<V, R>(j, j + kCols, tail_m, cs, xp, tail_acc);
  }
  float* y0 = y + r0 * incy;
  if (edges.head > 0) {
    gemv_axpy_edge_columns<V, R>(blocked, cols, head_m, cs, xp, head_acc);
    gemv_axpy_finish_lanes<V, R>(head_acc, 0, edges.head, alpha, beta, y0 - edges.head * incy, incy, ldy);
  }
  if (edges.tail > 0) {
    gemv_axpy_edge_columns<V, R>(blocked, cols, tail_m, cs, xp, tail_acc);
    gemv_axpy_finish_lanes<V, R>(tail_acc, kLanes - edges.tail, edges.tail, alpha, beta, y0 + vec_rows * incy, incy,
                                 ldy);
  }
  gemv_axpy_rows<V, R>(0, vec_rows, blocked, cols, alpha, m, cs, xp, beta, y0, incy, ldy, sums, ld);
  if (edges.tail == 0) gemv_axpy_tail<V, R>(vec_rows, rows, cols, alpha, m, cs, xp, beta, y0, incy, ldy);
}

// gemv_axpy_part with its vectors from the first row whose address is aligned for V
// (gemv_unaligned_head, over a thread's part of the rows), on columns long enough for edge
// vectors: 4096x4096 column-major from a 16-byte aligned matrix ran 28.9-30.5 GB/s, 41-42
// aligned (Zen 5, one thread). From 256 rows on the edges cost nothing measurable (256x1x4096
// 0.051-0.054 ms either way, 1024x1x1024 0.060 -> 0.053).
constexpr int64_t kGemvAxpyAlignMinLength = 256;
template <typename V, int R>
GK_INLINE void gemv_axpy(int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m,
                         int64_t cs, const float* xp, float beta, float* y, int64_t incy,
                         int64_t ldy, float* sums) {
  const int64_t head = gemv_unaligned_head<V>(m + r0, cs, r1 - r0, kGemvAxpyAlignMinLength);
  const int64_t past_vectors = (r1 - r0 - head) % lanes<V>();
  const AxpyEdges edges{head, r1 - r0 >= kGemvAxpyAlignMinLength ? past_vectors : 0};
  gemv_axpy_part<V, R>(r0, r1, edges, cols, alpha, m, cs, xp, beta, y, incy, ldy, sums);
}

// Any strides: plain loops.
void gemv_strided(int64_t r0, int64_t r1, int64_t cols, float alpha, const MatrixView& m,
                  const float* x, int64_t incx, float beta, float* y, int64_t incy) {
  for (int64_t i = r0; i < r1; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < cols; ++j) s += m.at(i, j) * x[j * incx];
    y[i * incy] = finish(alpha, s, beta, y[i * incy]);
  }
}

using GemvDot = void (*)(int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t,
                         const float*, int64_t, float, float*, int64_t, int64_t);
using GemvAxpy = void (*)(int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, float, float*, int64_t, int64_t, float*);

// One instance of each loop per ISA; the always-inline bodies take the caller's target.
// gemv_axpy takes one function per vector count: inlined into one, the counts' loops shared
// an 8 KB stack frame and kept their loop variables there (3350x1x1, A transposed, ran
// 0.52 us against BLIS's 0.45).
#define GK_GEMV_VARIANT(suffix, target_attr, vec)                                            \
  template <int R>                                                                           \
  target_attr __attribute__((noinline)) void gemv_axpy_r_##suffix(                           \
      int64_t r0, int64_t r1, int64_t cols, float alpha, const float* m, int64_t cs,         \
      const float* xp, float beta, float* y, int64_t incy, int64_t ldy, float* sums) {       \
    gemv_axpy<vec, R>(r0, r1, cols, alpha, m, cs, xp, beta, y, incy, ldy, sums);             \
  }                                                                                          \
  template <int R = 1>                                                                       \
  target_attr void gemv_axpy_vectors_##suffix(int64_t vectors, int64_t r0, int64_t r1,       \
                                              int64_t cols, float alpha, const float* m,     \
                                              int64_t cs, const float* xp, float beta,       \
                                              float* y, int64_t incy, int64_t ldy,           \
                                              float* sums) {                                 \
    if constexpr (R < kGemvMaxVectors) {                                                     \
      if (vectors != R)                                                                      \
        return gemv_axpy_vectors_##suffix<R + 1>(vectors, r0, r1, cols, alpha, m, cs, xp,    \
                                                 beta, y, incy, ldy, sums);                  \
    }                                                                                        \
    gemv_axpy_r_##suffix<R>(r0, r1, cols, alpha, m, cs, xp, beta, y, incy, ldy, sums);       \
  }                                                                                          \
  target_attr void gemv_dot_##suffix(int64_t vectors, int64_t r0, int64_t r1, int64_t cols,  \
                                     float alpha, const float* m, int64_t rs, const float* x, \
                                     int64_t xs, float beta, float* y, int64_t incy,         \
                                     int64_t ldy) {                                          \
    gemv_dot_all<vec>(vectors, r0, r1, cols, alpha, m, rs, x, xs, beta, y, incy, ldy);       \
  }                                                                                          \
  target_attr void gemv_axpy_##suffix(int64_t vectors, int64_t r0, int64_t r1, int64_t cols, \
                                      float alpha, const float* m, int64_t cs,               \
                                      const float* xp, float beta, float* y, int64_t incy,   \
                                      int64_t ldy, float* sums) {                            \
    gemv_axpy_vectors_##suffix(vectors, r0, r1, cols, alpha, m, cs, xp, beta, y, incy, ldy, sums); \
  }

GK_GEMV_VARIANT(portable, , v4)
#if defined(__x86_64__)
GK_GEMV_VARIANT(avx2, __attribute__((target("avx2,fma"))), v8)
GK_GEMV_VARIANT(avx512, __attribute__((target("avx512f,avx2,fma"))), v16)
#endif

struct GemvImpl {
  GemvDot dot;
  GemvAxpy axpy;
};
GemvImpl gemv_impl(SimdLevel simd) {
#if defined(__x86_64__)
  switch (simd) {
    case SimdLevel::Avx512: return {gemv_dot_avx512, gemv_axpy_avx512};
    case SimdLevel::Avx2: return {gemv_dot_avx2, gemv_axpy_avx2};
    case SimdLevel::Baseline: break;
  }
#else
  (void)simd;
#endif
  return {gemv_dot_portable, gemv_axpy_portable};
}

}  // namespace

namespace {
// Floats past the last 64-byte line start (a float-aligned address).
constexpr int64_t kLineFloats = 16;
int64_t line_offset(const float* p) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) / sizeof(float) % kLineFloats);
}
// The dot form gathers x to the matrix's offset from a line for this many rows and more
// (below, copying x costs about what the split loads do).
constexpr int64_t kGemvGatherMinRows = 16;

// Rows [r0, r1) of part `part` of `parts`: multiples of kGemvRowUnit, so every part runs
// whole vector steps. A part has at most ceil(units / parts) units.
struct RowRange {
  int64_t r0, r1;
};
RowRange gemv_part(int64_t rows, int part, int parts) {
  if (parts == 1) return {0, rows};  // (the divisions were a tenth of a 1x10x41 call)
  const int64_t units = ceil_div(rows, kGemvRowUnit);
  return {std::min(rows, units * part / parts * kGemvRowUnit), std::min(rows, units * (part + 1) / parts * kGemvRowUnit)};
}
int64_t gemv_longest_part(int64_t rows, int parts) {
  if (parts == 1) return rows;
  return std::min(rows, ceil_div(ceil_div(rows, kGemvRowUnit), parts) * kGemvRowUnit);
}
}  // namespace

bool gemv(int64_t rows, int64_t cols, int64_t vectors, float alpha, const MatrixView& mat,
          const MatrixView& x, float beta, float* y, int64_t incy, int64_t ldy, int threads,
          const KernelConfig& cfg) {
  const GemvImpl impl = gemv_impl(cfg.kernel->simd);
  // The dot form needs each vector contiguous, the axpy form X packed by column
  // (xp[j * vectors + r]): X is gathered once here when it is not already so (cols x vectors
  // floats; in dot form vector r at xp + r * gathered_xs, also where x sits at another
  // offset from a line than the matrix's rows, below).
  const bool dot_form = mat.cs == 1 && mat.rs != 1;
  const bool axpy_form = mat.rs == 1;
  const float* xp = x.p;
  int64_t incx = x.rs, xs = x.cs;
  // In dot form the loops load x at the matrix's columns: with the matrix's rows off a
  // 64-byte line and x on one (or its vectors at other offsets), every load of x splits
  // two lines. Long rows take x gathered at the matrix's offset from a line, each vector
  // a whole number of lines long (1024x8x1024, A 16 bytes off a line, Zen 5, one thread:
  // 199 us with x aligned, 129 with A aligned too). Rows a whole number of lines apart
  // share one offset; others start their loads at column 0 (gemv_unaligned_head), so x
  // goes on a line.
  const int64_t offset = dot_form && mat.rs % kLineFloats == 0 ? line_offset(mat.p) : 0;
  const bool x_apart = dot_form && cols >= kGemvDotAlignMinLength && rows >= kGemvGatherMinRows &&
                       (line_offset(x.p) != offset || (vectors > 1 && x.cs % kLineFloats != 0));
  const bool gather = (dot_form && (incx != 1 || x_apart)) ||
                      (axpy_form && !(x.rs == vectors && (x.cs == 1 || vectors == 1)));
  const int64_t gathered_xs = dot_form ? round_up(cols, kLineFloats) : cols;
  // The axpy form's partial sums: one part's rows per thread (a team smaller than asked
  // for takes several parts per thread, one after another).
  threads = std::max(threads, 1);
  const int64_t part_rows = gemv_longest_part(rows, threads);
  const ThreadParts sums =
      axpy_form ? thread_parts(ScratchSlot::Edge, threads, vectors * gemv_sums_ld(part_rows)) : ThreadParts{};
  const int64_t gathered_floats = gathered_xs * vectors + kLineFloats;
  float* packed = gather ? scratch(ScratchSlot::PackedA, gathered_floats) : nullptr;
  if ((axpy_form && !sums.parts) || (gather && !packed))
    return workspace_unavailable("the matrix-vector buffers", threads * vectors * gemv_sums_ld(part_rows) + gathered_floats);
  if (gather && dot_form) {
    float* at = packed + (offset - line_offset(packed) + kLineFloats) % kLineFloats;
    // A vector already contiguous is one copy (element by element, 4x34x988 NT spent a
    // third of its time here); a strided one four elements a step (one at a time, 20x3x356
    // NN spent a third of its time on the loop's own count).
    for (int64_t r = 0; r < vectors; ++r) {
      float* to = at + r * gathered_xs;
      if (x.rs == 1) {
        std::memcpy(to, &x.at(0, r), cols * sizeof(float));
        continue;
      }
      const float* from = &x.at(0, r);
      int64_t j = 0;
      for (; j + 4 <= cols; j += 4, from += 4 * x.rs) {
        to[j] = from[0];
        to[j + 1] = from[x.rs];
        to[j + 2] = from[2 * x.rs];
        to[j + 3] = from[3 * x.rs];
      }
      for (; j < cols; ++j, from += x.rs) to[j] = *from;
    }
    xp = at;
    incx = 1, xs = gathered_xs;
  } else if (gather) {
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t r = 0; r < vectors; ++r) packed[j * vectors + r] = x.at(j, r);
    xp = packed;
    incx = vectors;
  }
  parallel_parts(threads, [&](int tid, int nt) {
    for (int part = tid; part < threads; part += nt) {
      const RowRange r = gemv_part(rows, part, threads);
      if (dot_form) {
        impl.dot(vectors, r.r0, r.r1, cols, alpha, mat.p, mat.rs, xp, xs, beta, y, incy, ldy);
      } else if (axpy_form) {
        impl.axpy(vectors, r.r0, r.r1, cols, alpha, mat.p, mat.cs, xp, beta, y, incy, ldy, sums.part(tid));
      } else {
        for (int64_t v = 0; v < vectors; ++v)
          gemv_strided(r.r0, r.r1, cols, alpha, mat, xp + v * xs, incx, beta, y + v * ldy, incy);
      }
    }
  });
  return true;
}

}  // namespace gk
