// Depthwise (channel-wise: groups == in_channels) convolution, vectorized over channels:
// 8 output channels at a time, one per vector lane, as NCHW8 stores them, so every tap is
// one full-width FMA with the 8 channels' weights whatever the plane size. (Vectorizing
// along a row of one channel wastes lanes on 7- and 14-wide rows and spends most of its
// time on edges: it ran MobileNetV2's and ShuffleNetV2's small planes at 1-6 GFLOP/s.)
//
// Each output row reads channel-interleaved input rows, [column][8 lanes]: in NCHW8 the
// input itself; in NHWC too, 8 channels of each pixel read in place a pixel apart, where
// there is one input channel per output and 8 or more channels (a partial last block as
// the window of the last 8), else from a ring of staged rows (below);
// in NCHW a band of rows staged by 8 x 8 transposes of 8 planes' rows. The
// columns whose taps all fall inside the row are swept 8 at a time (8 independent
// accumulators keep both FMA pipes busy), every tap unrolled for 3x3 and 5x5; the few
// border columns check each tap (on rows of at most 8 columns they would be a quarter of
// the work: 3x3 rows at stride 1 with padding 1, as wide as the input, run as one block
// in every layout, the loads past the row's ends left out; other NCHW8 ones at stride 1
// from a zero-padded copy); rows in the padding are skipped. Output rows come out
// interleaved, [column][8]: the output itself in NCHW8, else a band transposed back.
//
// Layouts: NCHW, NHWC and NCHW8 run natively (NCHW8 only with one output per input
// channel); others are converted to NCHW. Threads split the (image, channel block) pairs,
// or in NCHW8 on large images the (band of rows, image, block) triples (NHWC: (image, band
// of rows) pairs, all blocks in one item, or with a multiplier the (image, band, group of
// blocks) triples). Bias, the
// residual when adding to the output (NCHW: staged into the band first) and activation
// are applied in registers before the store.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/vec.h"

namespace gk {
namespace conv {
namespace {

constexpr int64_t kLanes = 8;
// NCHW outputs at least this wide vectorize along their rows by default (no transposes);
// narrower ones across channels. Measured on MobileNetV2's and ShuffleNetV2's depthwise
// layers (Zen 3, 1 thread, ms, across channels / along rows): 56-wide outputs 0.38 vs
// 0.57 (144 channels), 0.66 vs 0.77 (96, stride 2), 112-wide 0.27 vs 0.52; 28-wide 0.19
// vs 0.22 (192), 0.09 vs 0.21 (stride 2); 14-wide 0.11 vs 0.16; 7-wide equal.
constexpr int64_t kRowsMinWidth = 48;
// Depthwise runs 30-40 GFLOP/s on a thread (memory-bound, not the GEMM's ~90), so a
// second thread pays from far fewer FLOPs: on two threads (Zen 3, NCHW8, ms, one / two)
// 960 channels at 7x7 (0.85 MFLOP) 0.032 / 0.016-0.024, 232 at 7x7 (0.2 MFLOP) 0.008 /
// 0.0045, 384 at 14x14 0.035 / 0.018-0.025.
constexpr double kDepthwiseFlopsPerExtraThread = 0.1e6;
// NCHW8 outputs of at least this many pixels split rows between threads
// (depthwise_nchw8_bands).
// MobileNetV2 end to end on two threads (Zen 5, NCHW8, FASTRUN, ms, alternated, channel
// blocks / rows from 56x56 outputs): 2.86-3.06 / 2.71-2.83; rows from 112x112 only
// 2.80-3.02, from 28x28 no better. Alone, a layer runs the same or up to 10% slower by
// rows (144 channels at 56x56, 0.056 / 0.061 ms): the gain is the data left where the
// neighbouring layers use it.
constexpr int64_t kDepthwiseRowSplitPixels = 56 * 56;

// The first output row of band `band` of `bands` over `rows` rows.
int64_t band_start(int64_t band, int64_t bands, int64_t rows) { return band * rows / bands; }

struct DwGeometry {
  int64_t kh, kw, sh, sw, dh, dw, pad_top, pad_left;
  int64_t ih, iw, oh, ow;
  int64_t multiplier;      // output channels per input channel
  int64_t inner_lo, inner_hi;  // output columns whose taps all read inside the row
  // A row of at most 8 columns whose 3x3 taps pass each end by one column (stride 1,
  // padding 1, as wide as the input): computed as one block of its columns, the two loads
  // outside the row left out at compile time (edge_row_block).
  bool edge_row;
  int64_t band;            // output rows per band (NCHW staging and unstaging)
  int64_t fetch_ahead = 0;  // NCHW8 in place: output rows ahead whose new input rows are fetched
  // Input rows [first, first + count) that output rows [oh0, oh0 + rows) read.
  int64_t first_row(int64_t oh0) const { return std::max<int64_t>(0, oh0 * sh - pad_top); }
  int64_t row_count(int64_t oh0, int64_t rows) const {
    return std::max<int64_t>(0, std::min(ih, (oh0 + rows - 1) * sh - pad_top + (kh - 1) * dh + 1) - first_row(oh0));
  }
  int64_t staged_floats() const { return ((band - 1) * sh + (kh - 1) * dh + 1) * iw * kLanes; }
  // Output columns whose taps all read inside the row: [inner_lo, inner_hi).
  void set_inner_columns() {
    // Column x reads input columns x * sw - pad_left + [0, (kw - 1) * dw].
    inner_lo = std::min(ow, (pad_left + sw - 1) / sw);
    const int64_t last = iw - 1 - (kw - 1) * dw + pad_left;  // x * sw <= last
    inner_hi = last < 0 ? inner_lo : std::clamp<int64_t>(last / sw + 1, inner_lo, ow);
    // 3x3 without dilation: pick_block_fn compiles its sizes and stride 1 in.
    edge_row = kh == 3 && kw == 3 && dh == 1 && dw == 1 && sw == 1 && pad_left == 1 && iw == ow && ow <= 8;
  }
};

// NCHW8 outputs at most this wide (at stride 1) that are not edge rows (5x5, dilated, a
// padding other than 1) are computed from a zero-padded copy of each channel block (in
// L1), so that every output column runs the unrolled column blocks: on a 7-wide output 2
// of 7 columns are borders, which check each tap. Measured before edge rows, on 3x3
// layers that are edge rows now (Zen 3, 1 thread, copy vs in place, median of
// alternating calls): 7-wide 0.82-0.84 (960 and 232 channels), 14-wide 0.98-1.03, 28-wide
// 1.07; at stride 2 (7-wide outputs of 14-wide inputs, one border column) 1.3x slower.
// Edge rows in place beat the copy: 960 channels at 7x7 9.6 us against 14.5 (Zen 5).
constexpr int64_t kPaddedCopyMaxWidth = 8;

// NHWC output rows per work item, at most (nhwc_bands): a ring's first rows are staged
// again per band.
constexpr int64_t kNhwcBandRows = 16;

// Whether NHWC reads the input rows in place (whole channel blocks, one output per input
// channel), where no ring is staged.
bool nhwc_in_place(const Shape& s) { return s.ocg == 1 && s.d.in_channels >= kLanes; }

// Whether an image's NHWC input and output, shared by `sharing` threads, are past L2 (the
// in-place rows' segments then differ: DepthwiseConv::segment_columns).
bool image_past_l2(const Shape& s, int64_t sharing) {
  const int64_t image_bytes = (s.d.in_height * s.d.in_width * s.d.in_channels + s.oh * s.ow * s.d.out_channels) * 4;
  return image_bytes / sharing > caches().l2;
}

// In place, a batch whose input is past what the caches keep between runs (8 L2s for each
// of `threads`) fetches its new input rows this many output rows ahead (DepthwiseConv's
// constructor and fetch_ahead_nhwc say why and where).
constexpr int64_t kFetchAheadRows = 2;
bool fetches_rows_ahead(const gk_conv_desc& d, int threads) {
  const int64_t input_bytes = 4 * d.batch * d.in_channels * d.in_height * d.in_width;
  return d.batch > 1 && input_bytes / threads > 8 * caches().l2;
}

// The geometry of a channel block copied with its padding made explicit zeros: (pad_top +
// ih + pad_bottom) x (pad_left + iw + pad_right), no padding, every column inner.
DwGeometry zero_padded(const DwGeometry& g, int64_t pad_bottom, int64_t pad_right) {
  DwGeometry p = g;
  p.ih = g.pad_top + g.ih + pad_bottom;
  p.iw = g.pad_left + g.iw + pad_right;
  p.pad_top = p.pad_left = 0;
  p.fetch_ahead = 0;  // the copy is in L1
  p.set_inner_columns();
  return p;
}

// The band's rows in the staged input band in 32 KiB (L1d) where they fit, else one output
// row at a time.
int64_t l1_band(const DwGeometry& g) {
  const int64_t rows_fit = (32 << 10) / (g.iw * kLanes * 4);
  return std::clamp<int64_t>((rows_fit - (g.kh - 1) * g.dh - 1) / g.sh + 1, 1, g.oh);
}

// The geometry of NHWC input rows staged with their horizontal padding as zero columns
// (every column inner); rows in the vertical padding are still skipped.
DwGeometry nhwc_staged(const DwGeometry& g, int64_t pad_right) {
  DwGeometry p = g;
  p.iw = g.pad_left + g.iw + pad_right;
  p.pad_left = 0;
  p.set_inner_columns();
  p.band = l1_band(p);
  return p;
}

DwGeometry make_geometry(const Shape& s) {
  const gk_conv_desc& d = s.d;
  DwGeometry g;
  g.kh = d.kernel_h, g.kw = d.kernel_w, g.sh = d.stride_h, g.sw = d.stride_w;
  g.dh = d.dilation_h, g.dw = d.dilation_w, g.pad_top = d.pad_top, g.pad_left = d.pad_left;
  g.ih = d.in_height, g.iw = d.in_width, g.oh = s.oh, g.ow = s.ow, g.multiplier = s.ocg;
  g.set_inner_columns();
  g.band = l1_band(g);
  return g;
}

// Input rows [first, first + count) of 8 NCHW planes (planes[l] for lane l; nullptr: a
// channel past the end, zeros) interleaved into dst[row][column][8]: 8 columns at a time
// by 8 x 8 transposes.
GK_INLINE void stage_rows_planar(const DwGeometry& g, const float* const (&planes)[kLanes], int64_t first,
                                 int64_t count, float* dst) {
  const float* rows[kLanes];  // rows of a plane are contiguous: the band is one run per lane
  for (int l = 0; l < kLanes; ++l) rows[l] = planes[l] ? planes[l] + first * g.iw : nullptr;
  interleave(rows, kLanes, count * g.iw, dst);
}

// The kernels below take the vector type V: v8 (8 channels, a channel block), or v16 in
// the AVX-512 functions (two blocks of NHWC channels read in place, their weights packed
// as [tap][16]). Weights are [tap][lane].
template <typename V>
constexpr int64_t kVecLanes = int64_t(sizeof(V) / sizeof(float));

// Output column x near the row's ends: each tap checked against them.
// in_px: floats between input pixels (8, or an NHWC row's channels read in place).
template <typename V, int KH, int KW>
GK_INLINE void border_column(const DwGeometry& g, const float* const* rows, const float* w, V bias,
                             Finish f, int64_t x, float* out, int64_t out_px, int64_t in_px) {
  const int64_t kh = KH ? KH : g.kh, kw = KW ? KW : g.kw;
  V a = bias;
  for (int64_t i = 0; i < kh; ++i) {
    if (!rows[i]) continue;
#pragma GCC unroll 8
    for (int64_t j = 0; j < kw; ++j) {
      const int64_t col = x * g.sw - g.pad_left + j * g.dw;
      if (col >= 0 && col < g.iw)
        a += load_vec<V>(rows[i] + col * in_px) * load_vec<V>(w + (i * kw + j) * kVecLanes<V>);
    }
  }
  finish_vec(out + x * out_px, a, f);
}

// One kernel row of N output columns at stride 1, its width KW compiled in: each input
// vector loaded once and multiplied into every accumulator whose taps read it (3 for
// 3x3), the row's KW weights held in registers (CV (N + KW) + 1 live vectors: 12 for one
// vector at 3x3, up to 27 for two at 5x5, of AVX-512's 32). Per
// kernel row of 8 columns: 10 input and 3 weight loads, not 24 + 3, which made the layers
// load-bound (32 channels 112x112 0.122 -> 0.090 ms). Each output's taps are summed in
// the same order as by tap. r: the row at the block's first tap column; wrow: its weights.
// Edges: the first and last of the N - 1 + KW inputs lie outside the row (zeros, not
// loaded).
template <typename V, int KW, int N, bool Edges = false, int CV = 1>
GK_INLINE void accumulate_row_once(const float* r, const float* wrow, int64_t w_step, V (&a)[CV][N], int64_t in_px) {
  constexpr int64_t L = kVecLanes<V>;
  V wt[CV][KW];
#pragma GCC unroll 8
  for (int c = 0; c < CV; ++c)
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) wt[c][j] = load_vec<V>(wrow + c * w_step + j * L);
#pragma GCC unroll 64
  for (int q = 0; q < N - 1 + KW; ++q) {
    if (Edges && (q == 0 || q == N - 2 + KW)) continue;
#pragma GCC unroll 8
    for (int c = 0; c < CV; ++c) {
      const V v = load_vec<V>(r + q * in_px + c * L);
#pragma GCC unroll 8
      for (int j = 0; j < KW; ++j)
        if (q - j >= 0 && q - j < N) a[c][q - j] += v * wt[c][j];
    }
  }
}

// One kernel row of N output columns, tap by tap, each input vector an FMA's memory
// operand (at stride 2 this beat loading each once: 96 channels 112x112 0.119 vs 0.126 ms).
template <typename V, int SW, int N, int CV = 1>
GK_INLINE void accumulate_row_by_tap(const DwGeometry& g, int64_t kw, const float* r, const float* wrow,
                                     int64_t w_step, V (&a)[CV][N], int64_t in_px) {
  constexpr int64_t L = kVecLanes<V>;
  const int64_t step = (SW ? SW : g.sw) * in_px, tap_step = (SW ? 1 : g.dw) * in_px;
#pragma GCC unroll 8
  for (int64_t j = 0; j < kw; ++j) {
    const float* p = r + j * tap_step;
#pragma GCC unroll 8
    for (int c = 0; c < CV; ++c) {
      const V wt = load_vec<V>(wrow + c * w_step + j * L);
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) a[c][n] += load_vec<V>(p + n * step + c * L) * wt;
    }
  }
}

// Output columns [x, x + N) whose taps all read inside the row: CV x N independent
// accumulators (the loops over them unroll, so they live in registers), each kernel row
// loading its inputs once (stride 1, width compiled in) or tap by tap. SW: the column
// stride when it is a template constant (dilation 1), so every load's offset is an
// immediate (a run-time stride cost a chain of address additions per load: 12% of the
// time on MobileNetV2's stride-2 layers); 0: stride and dilation from g.
// Edges: the block is a whole edge row (DwGeometry::edge_row; x == 0, N == ow).
// CV: channel vectors side by side (NHWC's in-place pairs two at a time: 32 channels, each
// pixel's two 64-byte lines), vector c reading c * L floats into each pixel, its weights
// w_step floats after vector c - 1's, its bias biases[c]; 2N accumulators in AVX-512's 32
// registers. Zen 5, 1 thread, us, one pair / two pairs at a time: 32 channels at 112x112
// 111 / 104, 144 at 56x56 137 / 121, 192 at 28x28 stride 2 12.5 / 10.8, 960 at 7x7 11.8 /
// 11.6, 96 at 112x112 stride 2 the same; MobileNetV2's NHWC depthwise layers 0.685 /
// 0.645 ms (oneDNN 0.55).
template <typename V, int KH, int KW, int SW, int N, bool Edges = false, int CV = 1>
GK_INLINE void column_block(const DwGeometry& g, const float* const* rows, const float* w, const V (&biases)[CV],
                            int64_t w_step, Finish f, int64_t x, float* out, int64_t out_px, int64_t in_px) {
  static_assert(!Edges || (KW == 3 && SW == 1), "edge rows: 3-wide taps at stride 1");
  const int64_t kh = KH ? KH : g.kh, kw = KW ? KW : g.kw, sw = SW ? SW : g.sw;
  constexpr int64_t L = kVecLanes<V>;
  V a[CV][N];
#pragma GCC unroll 8
  for (int c = 0; c < CV; ++c)
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) a[c][n] = biases[c];
  for (int64_t i = 0; i < kh; ++i) {
    if (!rows[i]) continue;
    // An edge row's r is a pixel before the row (never read there), formed as an address:
    // the row may start its buffer.
    const float* r = Edges ? reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(rows[i]) - in_px * sizeof(float))
                           : rows[i] + (x * sw - g.pad_left) * in_px;
    if constexpr (KW != 0 && SW == 1) {
      accumulate_row_once<V, KW, N, Edges, CV>(r, w + i * KW * L, w_step, a, in_px);
    } else {
      accumulate_row_by_tap<V, SW, N, CV>(g, kw, r, w + i * kw * L, w_step, a, in_px);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < CV; ++c)
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) finish_vec(out + (x + n) * out_px + c * L, a[c][n], f);
}

// One channel vector's block (bias the vector's).
template <typename V, int KH, int KW, int SW, int N, bool Edges = false>
GK_INLINE void column_block(const DwGeometry& g, const float* const* rows, const float* w, V bias,
                            Finish f, int64_t x, float* out, int64_t out_px, int64_t in_px) {
  const V biases[1] = {bias};
  column_block<V, KH, KW, SW, N, Edges, 1>(g, rows, w, biases, 0, f, x, out, out_px, in_px);
}

// Output columns [x, x + n), n <= 7, as one block of exactly n columns (n == 0: none).
// Edges as column_block.
template <typename V, int KH, int KW, int SW, bool Edges = false>
GK_INLINE void column_remainder(const DwGeometry& g, const float* const* rows, const float* w, V bias,
                                Finish f, int64_t x, int64_t n, float* out, int64_t out_px, int64_t in_px) {
  switch (n) {
    case 1: column_block<V, KH, KW, SW, 1, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    case 2: column_block<V, KH, KW, SW, 2, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    case 3: column_block<V, KH, KW, SW, 3, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    case 4: column_block<V, KH, KW, SW, 4, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    case 5: column_block<V, KH, KW, SW, 5, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    case 6: column_block<V, KH, KW, SW, 6, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    case 7: column_block<V, KH, KW, SW, 7, Edges>(g, rows, w, bias, f, x, out, out_px, in_px); break;
    default: break;
  }
}

// A whole edge row (DwGeometry::edge_row) of ow columns as one block, where 2 of a 7-wide
// row's columns would be border columns, each one chain of dependent FMAs (Zen 5, 1
// thread, us, border columns / edge rows: 960 channels at 7x7 NHWC 14.6 / 11.2, NCHW
// 48 / 42; 232 at 7x7 NHWC 4.4 / 2.7).
template <typename V, int KH>
GK_INLINE void edge_row_block(const DwGeometry& g, const float* const* rows, const float* w, V bias, Finish f,
                              float* out, int64_t out_px, int64_t in_px) {
  if (g.ow == 8) {
    column_block<V, KH, 3, 1, 8, true>(g, rows, w, bias, f, 0, out, out_px, in_px);
  } else {
    column_remainder<V, KH, 3, 1, true>(g, rows, w, bias, f, 0, g.ow, out, out_px, in_px);
  }
}

// The pieces an output row is computed in, left to right: border columns (n == 0: each
// tap checked) and blocks of n inner columns. Blocks of 8 and one block of the 1..7 left;
// when 9..11 are left, two of 4..6 instead (11 = 6 + 5), since 1..3 columns are as many
// chains of dependent FMAs. Blocks of exactly the width left, not overlapping ones:
// 7-wide rows ran as 4 + 4 columns, 14-wide as 8 + 8 (Zen 3, MobileNetV2's and
// ShuffleNetV2's 7x7 and 14x14 layers: 11-39% faster). An edge row is one piece, n == -1.
struct RowPieces {
  const DwGeometry& g;
  int64_t x = 0;
  GK_INLINE bool next(int64_t& first, int64_t& n) {
    if (x >= g.ow) return false;
    first = x;
    if (g.edge_row) {
      n = -1, x = g.ow;
      return true;
    }
    const int64_t left = g.inner_hi - x;
    n = x < g.inner_lo || left <= 0 ? 0 : left >= 9 && left <= 11 ? (left + 1) / 2 : std::min<int64_t>(left, 8);
    x += std::max<int64_t>(n, 1);
    return true;
  }
};

template <typename V, int KH, int KW, int SW>
GK_INLINE void compute_piece(const DwGeometry& g, const float* const* rows, const float* w, V bias, Finish f,
                             int64_t x, int64_t n, float* out, int64_t out_px, int64_t in_px) {
  if (n == 8) {
    column_block<V, KH, KW, SW, 8>(g, rows, w, bias, f, x, out, out_px, in_px);
  } else if (n < 0) {
    if constexpr (KW == 3 && SW == 1) {
      edge_row_block<V, KH>(g, rows, w, bias, f, out, out_px, in_px);
    } else {
      for (int64_t c = 0; c < g.ow; ++c) border_column<V, KH, KW>(g, rows, w, bias, f, c, out, out_px, in_px);
    }
  } else if (n == 0) {
    border_column<V, KH, KW>(g, rows, w, bias, f, x, out, out_px, in_px);
  } else {
    column_remainder<V, KH, KW, SW>(g, rows, w, bias, f, x, n, out, out_px, in_px);
  }
}

// compute_piece over two channel vectors side by side (column_block's CV == 2): blocks
// of 4 to 8 columns at once, narrower ones (1..3 columns, border columns and edge rows)
// a vector at a time, the second vector's rows pointed to from second_rows (kh of them).
template <typename V, int KH, int KW, int SW>
GK_INLINE void compute_piece_two_vectors(const DwGeometry& g, const float* const* rows, const float** second_rows,
                                         const float* w, int64_t w_step, const V (&biases)[2], Finish f, int64_t x,
                                         int64_t n, float* out, int64_t out_px, int64_t in_px) {
  constexpr int64_t L = kVecLanes<V>;
  switch (n) {
    case 8: return column_block<V, KH, KW, SW, 8, false, 2>(g, rows, w, biases, w_step, f, x, out, out_px, in_px);
    case 7: return column_block<V, KH, KW, SW, 7, false, 2>(g, rows, w, biases, w_step, f, x, out, out_px, in_px);
    case 6: return column_block<V, KH, KW, SW, 6, false, 2>(g, rows, w, biases, w_step, f, x, out, out_px, in_px);
    case 5: return column_block<V, KH, KW, SW, 5, false, 2>(g, rows, w, biases, w_step, f, x, out, out_px, in_px);
    case 4: return column_block<V, KH, KW, SW, 4, false, 2>(g, rows, w, biases, w_step, f, x, out, out_px, in_px);
    default: break;
  }
  for (int64_t i = 0; i < (KH ? KH : g.kh); ++i) second_rows[i] = rows[i] ? rows[i] + L : nullptr;
  compute_piece<V, KH, KW, SW>(g, rows, w, biases[0], f, x, n, out, out_px, in_px);
  compute_piece<V, KH, KW, SW>(g, second_rows, w + w_step, biases[1], f, x, n, out + L, out_px, in_px);
}

// One output row, [column][8], from the interleaved input rows its taps read (rows[i] for
// kernel row i; nullptr: a row in the padding, skipped). KH x KW: the kernel size when it
// is a template size, 0 x 0: the run-time size; SW as column_block.
template <int KH, int KW, int SW>
GK_INLINE void compute_row(const DwGeometry& g, const float* const* rows, const float* w, v8 bias,
                           Finish f, float* out, int64_t out_px = kLanes, int64_t in_px = kLanes) {
  RowPieces pieces{g};
  int64_t x, n;
  while (pieces.next(x, n)) compute_piece<v8, KH, KW, SW>(g, rows, w, bias, f, x, n, out, out_px, in_px);
}

// The input rows output row `oh` reads that the row before it does not (its last sh rows),
// fetched ahead: `in` holds rows [first, first + count).
GK_INLINE void fetch_new_rows(const DwGeometry& g, const float* in, int64_t first, int64_t count, int64_t oh) {
  const int64_t hi = std::min(first + count, oh * g.sh - g.pad_top + (g.kh - 1) * g.dh + 1);
  for (int64_t ih = std::max(first, hi - g.sh); ih < hi; ++ih) {
    const float* row = in + (ih - first) * g.iw * kLanes;
    for (int64_t q = 0; q < g.iw * kLanes; q += 16) __builtin_prefetch(row + q);
  }
}

// Output rows [oh0, oh0 + rows) from interleaved input rows: input row ih at
// in + (ih - first) * iw * 8 for ih in [first, first + count). ptrs: kh row pointers'
// room (the thread's workspace: kernels of any height, nothing allocated).
template <int KH, int KW, int SW>
GK_INLINE void compute_rows(const DwGeometry& g, const float* in, int64_t first, int64_t count, int64_t oh0,
                            int64_t rows, const float* w, v8 bias, Finish f, float* out, const float** ptrs) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ih = (oh0 + r) * g.sh - g.pad_top + i * g.dh;
      ptrs[i] = ih >= first && ih < first + count ? in + (ih - first) * g.iw * kLanes : nullptr;
    }
    if (g.fetch_ahead) fetch_new_rows(g, in, first, count, oh0 + r + g.fetch_ahead);
    compute_row<KH, KW, SW>(g, ptrs, w, bias, f, out + r * g.ow * kLanes);
  }
}

// The interleaved output band back into NCHW planes (planes[l] for lane l; nullptr: a
// channel past the end): 8 columns at a time by 8 x 8 transposes.
GK_INLINE void unstage_band_planar(const DwGeometry& g, const float* band, int64_t rows, float* const (&planes)[kLanes]) {
  deinterleave(band, kLanes, rows * g.ow, planes);
}
// The inverse, when adding to the output: the residual planes' rows into the band, where
// the rows are computed.
GK_INLINE void stage_band_planar(const DwGeometry& g, float* const (&planes)[kLanes], int64_t rows, float* band) {
  const float* rows_in[kLanes];
  for (int l = 0; l < kLanes; ++l) rows_in[l] = planes[l];
  interleave(rows_in, kLanes, rows * g.ow, band);
}

struct NhwcGroup;

// Where a channel block's input comes from and its output goes.
struct BlockIo {
  const float* in_planar[kLanes];    // NCHW: each lane's input plane (nullptr past the end)
  float* out_planar[kLanes];         // NCHW: each lane's output plane
  const float* in_blocked = nullptr;  // NCHW8: the block's input [ih][iw][8]
  float* out_blocked = nullptr;       // NCHW8: the block's output [oh][ow][8]
  int64_t oh0 = 0, out_rows = 0;      // NCHW8: the band of output rows to compute
  // NCHW8 from a zero-padded copy: in_blocked's `rows` rows of `row_floats` go to
  // padded_interior, `padded_row_floats` apart (the padding around them already zero).
  float* padded_interior = nullptr;
  int64_t rows = 0, row_floats = 0, padded_row_floats = 0;
  const float** row_ptrs = nullptr;  // NCHW and NCHW8: room for kh row pointers
  const NhwcGroup* nhwc = nullptr;  // NHWC: the group, and nothing above is set
  const DwGeometry* nhwc_staged = nullptr;   // its staged rows' geometry
};

// NHWC: a group of channel blocks over a band of output rows, computed row by row. With
// multiplier 1 the kernels read the input rows in place: the whole blocks, and a partial
// last block as the window of the last 8 channels (computed into a [column][8] row whose
// last lanes are copied out; staging those lanes instead cost as much as all the whole
// blocks: 58 channels at 28x28, 0.032 vs 0.020 ms). MobileNetV2's 14x14 and smaller layers
// ran 1.1-1.3x their NCHW8 time in place, against 2.1-2.4x staged. Else (a multiplier, or
// fewer than 8 channels) the group reads a ring of staged input rows in the blocked form
// the kernels read: each input row's pixels gathered once into [block][column][8] with
// the horizontal padding as zero columns (so every output column is inner), each output
// row computed into [block][column][8] and copied out; the ring stays in L1 (whole bands
// per block, staged before computing, ran 2-3.5x slower than NCHW8: 32 bytes of each
// 128-byte pixel per access, and bands past L1).
struct NhwcGroup {
  const float* in;  // the image's input
  float* out;       // the image's output
  int64_t in_px, out_px;         // floats per pixel: input and output channels
  int64_t out_channels, multiplier;
  int64_t pad_left, padded_width;  // the zero columns before a staged row, its width with them
  int64_t b0, blocks;              // the group's first block and its block count
  int64_t oh0, rows;               // its output rows [oh0, oh0 + rows)
  float* ring;      // [block][ring_rows][padded_width][8]
  float* out_row;   // [ow][8]: a partial last block's output row (staged or the tail window)
  const float** row_ptrs;  // kh: an output row's input rows, then kh for a second vector's
  int64_t ring_rows, taps;
  // The group's first blocks that are whole, with one input channel per output channel:
  // the kernels read the input rows in place, pixels in_px floats apart; the others are
  // staged, except a tail window (tail_w).
  int64_t in_place_blocks;
  // A partial last block read in place as the window of the last 8 channels (multiplier
  // 1, more than 8 channels): its weights and bias, the group's last block; nullptr: none.
  const float* tail_w = nullptr;
  const float* tail_bias = nullptr;
  // The in-place blocks' weights and bias in pairs, [pair][tap][16] and [pair][16] (the
  // group starting at block 0), for the AVX-512 functions; nullptr: none.
  const float* pair_w = nullptr;
  const float* pair_bias = nullptr;
  int64_t segment_columns;  // output columns per segment of the in-place blocks
  int64_t fetch_ahead;      // output rows ahead whose new input rows are fetched (0: none)
  int64_t ring_floats() const { return ring_rows * padded_width * kLanes; }  // per block
};

// Output channels [o0, o0 + 8) of a pixel into 8 lanes, lane l from px[(o0 + l) / m];
// zeros past the last channel.
GK_INLINE v8 load_lanes(const float* px, int64_t o0, int64_t m, int64_t channels) {
  if (m == 1 && o0 + kLanes <= channels) return load8(px + o0);
  v8 v = {};
  for (int64_t l = 0; l < kLanes && o0 + l < channels; ++l) v[l] = px[(o0 + l) / m];
  return v;
}

// The ring's padding columns, every slot and block: zero once per run and thread (staging
// writes only the columns between them; zeroing them per row, by memset calls, took 10% of
// a 28x28 layer).
GK_INLINE void zero_ring_padding(const DwGeometry& g, const NhwcGroup& ng, int64_t blocks) {
  const int64_t right = ng.padded_width - ng.pad_left - g.iw;
  for (int64_t row = 0; row < blocks * ng.ring_rows; ++row) {
    float* r = ng.ring + row * ng.padded_width * kLanes;
    for (int64_t c = 0; c < ng.pad_left; ++c) store8(r + c * kLanes, v8{});
    for (int64_t c = 0; c < right; ++c) store8(r + (ng.pad_left + g.iw + c) * kLanes, v8{});
  }
}

// Input row iy (width g.iw of the unpadded geometry) into its ring slot, the blocks staged
// (from in_place_blocks on, in slots from 0).
GK_INLINE void stage_input_row(const DwGeometry& g, const NhwcGroup& ng, int64_t iy) {
  const int64_t k0 = ng.in_place_blocks, blocks = ng.blocks, in_px = ng.in_px, slot_stride = ng.ring_floats();
  const int64_t m = ng.multiplier, channels = ng.out_channels, o0 = ng.b0 * kLanes;
  float* const slot = ng.ring + (iy % ng.ring_rows) * ng.padded_width * kLanes;
  const float* src = ng.in + iy * g.iw * in_px;
  float* dst = slot + ng.pad_left * kLanes;
  for (int64_t c = 0; c < g.iw; ++c, src += in_px, dst += kLanes)
    for (int64_t k = k0; k < blocks; ++k)
      store8(dst + (k - k0) * slot_stride, load_lanes(src, o0 + k * kLanes, m, channels));
}

// A partial last block's output row y (lanes channels from o) between [column][8] and
// the NHWC output: in when adding to the output (the residual), out after computing.
GK_INLINE void copy_partial_row(const DwGeometry& g, const NhwcGroup& ng, int64_t y, int64_t o, bool in) {
  const int64_t lanes = ng.out_channels - o;
  float* px = ng.out + y * g.ow * ng.out_px + o;
  float* row = ng.out_row;
  for (int64_t x = 0; x < g.ow; ++x, px += ng.out_px, row += kLanes) {
    if (in) {
      store8(row, load_lanes(px, 0, 1, lanes));
    } else {
      copy_run(px, row, lanes);
    }
  }
}

// The input rows output row y reads (top: its first), at channel c of their pixels.
GK_INLINE void set_in_place_rows(const DwGeometry& g, const NhwcGroup& ng, int64_t top, int64_t c) {
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = top + i * g.dh;
    ng.row_ptrs[i] = iy >= 0 && iy < g.ih ? ng.in + iy * g.iw * ng.in_px + c : nullptr;
  }
}

// The input rows that output row y + ng.fetch_ahead reads and the row before it does not,
// over the columns that output columns [x0, x1) read: every channel of their pixels (with
// multiplier 1 a group is every block), each cache line they touch.
GK_INLINE void fetch_segment_ahead(const DwGeometry& g, const NhwcGroup& ng, int64_t y, int64_t x0, int64_t x1) {
  const int64_t ahead = y + ng.fetch_ahead;
  const int64_t c0 = std::max<int64_t>(0, x0 * g.sw - g.pad_left);
  const int64_t c1 = std::min(g.iw, (x1 - 1) * g.sw - g.pad_left + (g.kw - 1) * g.dw + 1);
  if (ahead >= g.oh || c1 <= c0) return;  // past the last row, or columns all in the padding
  const int64_t last = ahead * g.sh - g.pad_top + (g.kh - 1) * g.dh;  // its last input row
  const int64_t first = last - std::min(g.sh, (g.kh - 1) * g.dh + 1) + 1;
  for (int64_t iy = std::max<int64_t>(first, 0); iy <= std::min(last, g.ih - 1); ++iy) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(ng.in + (iy * g.iw + c0) * ng.in_px);
    const uintptr_t hi = reinterpret_cast<uintptr_t>(ng.in + (iy * g.iw + c1) * ng.in_px);
    for (uintptr_t line = lo & ~uintptr_t(63); line < hi; line += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

// Output row y of the group's in-place blocks and tail window, a segment of columns at a
// time through all of them: the segment's input (its kh rows, the group's channels) stays in L2 while each
// block (or pair) reads its 32 (64) bytes of every pixel, so each cache line comes from L3 or memory
// once, not once per group of blocks (groups of 2-8 blocks over bands of 16 rows ran
// 1.4-2x their NCHW8 time on MobileNetV2's 56x56 and 112x112 layers). Wide: v16 in the
// AVX-512 functions, which run the whole blocks in pairs (16 channels: each pixel's load
// a whole 64-byte line), two pairs at a time where there are two, else v8.
template <typename Wide, int KH, int KW, int SW>
GK_INLINE void compute_in_place_row(const DwGeometry& g, const NhwcGroup& ng, int64_t y, const float* w,
                                    const float* bias, Finish f) {
  constexpr int64_t kWide = kVecLanes<Wide>;
  constexpr int64_t kMaxPieces = 64;
  int64_t xs[kMaxPieces], ns[kMaxPieces];
  const float** ptrs = ng.row_ptrs;
  const int64_t top = y * g.sh - g.pad_top;
  float* const out_row = ng.out + y * g.ow * ng.out_px;
  RowPieces pieces{g};
  int64_t count = 0;
  for (bool more = true; more;) {
    more = pieces.next(xs[count], ns[count]);
    if (more) ++count;
    const bool segment_full =
        count == kMaxPieces || (count && pieces.x - xs[0] >= ng.segment_columns);
    if (!segment_full && (more || !count)) continue;
    if (ng.fetch_ahead) fetch_segment_ahead(g, ng, y, xs[0], pieces.x);
    int64_t k = 0;
    if constexpr (kWide > kLanes) {
      // The pairs two at a time (column_block's CV == 2), then the one left.
      const int64_t pair_floats = ng.taps * kWide;
      for (; ng.pair_w && k + 4 <= ng.in_place_blocks; k += 4) {
        const int64_t o = (ng.b0 + k) * kLanes;
        set_in_place_rows(g, ng, top, o);
        const float* wk = ng.pair_w + k / 2 * pair_floats;
        const Wide bk[2] = {load_vec<Wide>(ng.pair_bias + k / 2 * kWide), load_vec<Wide>(ng.pair_bias + (k / 2 + 1) * kWide)};
        for (int64_t p = 0; p < count; ++p)
          compute_piece_two_vectors<Wide, KH, KW, SW>(g, ptrs, ptrs + g.kh, wk, pair_floats, bk, f, xs[p], ns[p],
                                                      out_row + o, ng.out_px, ng.in_px);
      }
      if (ng.pair_w && k + 2 <= ng.in_place_blocks) {
        const int64_t o = (ng.b0 + k) * kLanes;
        set_in_place_rows(g, ng, top, o);
        const float* wk = ng.pair_w + k / 2 * pair_floats;
        const Wide bk = load_vec<Wide>(ng.pair_bias + k / 2 * kWide);
        for (int64_t p = 0; p < count; ++p)
          compute_piece<Wide, KH, KW, SW>(g, ptrs, wk, bk, f, xs[p], ns[p], out_row + o, ng.out_px, ng.in_px);
        k += 2;
      }
    }
    for (; k < ng.in_place_blocks; ++k) {
      const int64_t o = (ng.b0 + k) * kLanes;
      set_in_place_rows(g, ng, top, o);
      const float* wk = w + k * ng.taps * kLanes;
      const v8 bk = load8(bias + k * kLanes);
      for (int64_t p = 0; p < count; ++p)
        compute_piece<v8, KH, KW, SW>(g, ptrs, wk, bk, f, xs[p], ns[p], out_row + o, ng.out_px, ng.in_px);
    }
    if (ng.tail_w) {
      // The last 8 channels into [column][8] (the residual's too, when adding), then the
      // lanes past the whole blocks into the output.
      const int64_t c0 = ng.out_channels - kLanes, lanes = ng.out_channels % kLanes;
      set_in_place_rows(g, ng, top, c0);
      if (f.add)
        for (int64_t x = xs[0]; x < pieces.x; ++x) store8(ng.out_row + x * kLanes, load8(out_row + x * ng.out_px + c0));
      for (int64_t p = 0; p < count; ++p)
        compute_piece<v8, KH, KW, SW>(g, ptrs, ng.tail_w, load8(ng.tail_bias), f, xs[p], ns[p], ng.out_row, kLanes,
                                  ng.in_px);
      for (int64_t x = xs[0]; x < pieces.x; ++x)
        copy_run(out_row + x * ng.out_px + c0 + kLanes - lanes, ng.out_row + x * kLanes + kLanes - lanes, lanes);
    }
    count = 0;
  }
}

// The group's band. g: the unpadded geometry; staged: the staged rows' (no horizontal
// padding); w, bias: the group's first block's. Whole blocks store straight into the NHWC
// output (at its pixel stride: a store per 9 FMAs for 3x3, where a copy of each output
// row cost a third of the time of a 32-channel 28x28 layer); a partial last block goes
// through a [column][8] row.
template <typename Wide, int KH, int KW, int SW>
GK_INLINE void run_group_nhwc(const DwGeometry& g, const DwGeometry& staged, const NhwcGroup& ng,
                              const float* w, const float* bias, Finish f) {
  const float** ptrs = ng.row_ptrs;
  const bool staging = ng.in_place_blocks + (ng.tail_w ? 1 : 0) < ng.blocks;
  int64_t next = 0;  // the next input row to stage
  for (int64_t y = ng.oh0; y < ng.oh0 + ng.rows; ++y) {
    const int64_t top = y * g.sh - g.pad_top;
    if (ng.in_place_blocks || ng.tail_w) compute_in_place_row<Wide, KH, KW, SW>(g, ng, y, w, bias, f);
    if (!staging) continue;
    const int64_t hi = std::min(g.ih, top + (g.kh - 1) * g.dh + 1);
    for (int64_t iy = std::max({next, top, int64_t(0)}); iy < hi; ++iy) stage_input_row(g, ng, iy);
    next = std::max(next, hi);
    for (int64_t k = ng.in_place_blocks; k < ng.blocks - (ng.tail_w ? 1 : 0); ++k) {
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t iy = top + i * g.dh;
        ptrs[i] = iy >= 0 && iy < g.ih ? ng.ring + (k - ng.in_place_blocks) * ng.ring_floats() +
                                             (iy % ng.ring_rows) * ng.padded_width * kLanes
                                        : nullptr;
      }
      const int64_t o = (ng.b0 + k) * kLanes;
      const float* wk = w + k * ng.taps * kLanes;
      const v8 bk = load8(bias + k * kLanes);
      if (o + kLanes <= ng.out_channels) {
        compute_row<KH, KW, SW>(staged, ptrs, wk, bk, f, ng.out + y * g.ow * ng.out_px + o, ng.out_px);
      } else {
        if (f.add) copy_partial_row(g, ng, y, o, true);
        compute_row<KH, KW, SW>(staged, ptrs, wk, bk, f, ng.out_row);
        copy_partial_row(g, ng, y, o, false);
      }
    }
  }
}

// The block's rows into the zero-padded copy, a vector at a time (the kernel's loads
// then forward from same-sized stores).
GK_INLINE void copy_into_padding(const BlockIo& io) {
  for (int64_t r = 0; r < io.rows; ++r) {
    const float* src = io.in_blocked + r * io.row_floats;
    float* dst = io.padded_interior + r * io.padded_row_floats;
    for (int64_t q = 0; q < io.row_floats; q += kLanes) store8(dst + q, load8(src + q));
  }
}

template <int KH, int KW, int SW>
GK_INLINE void run_block(const DwGeometry& g, const BlockIo& io, const float* w, const float* bias_lanes, Finish f,
                         float* staged, float* band_out) {
  if (io.nhwc) return run_group_nhwc<v8, KH, KW, SW>(g, *io.nhwc_staged, *io.nhwc, w, bias_lanes, f);
  const v8 bias = load8(bias_lanes);
  if (io.in_blocked && io.out_blocked) {
    const float* in = io.in_blocked;
    if (io.padded_interior) {
      copy_into_padding(io);
      in = staged;  // g is the padded copy's geometry
    }
    compute_rows<KH, KW, SW>(g, in, 0, g.ih, io.oh0, io.out_rows, w, bias, f, io.out_blocked + io.oh0 * g.ow * kLanes,
                             io.row_ptrs);
    return;
  }
  for (int64_t oh0 = 0; oh0 < g.oh; oh0 += g.band) {
    const int64_t rows = std::min(g.band, g.oh - oh0);
    const int64_t first = g.first_row(oh0), count = g.row_count(oh0, rows);
    stage_rows_planar(g, io.in_planar, first, count, staged);
    float* planes[kLanes];
    for (int l = 0; l < kLanes; ++l) planes[l] = io.out_planar[l] ? io.out_planar[l] + oh0 * g.ow : nullptr;
    if (f.add) stage_band_planar(g, planes, rows, band_out);
    compute_rows<KH, KW, SW>(g, staged, first, count, oh0, rows, w, bias, f, band_out, io.row_ptrs);
    unstage_band_planar(g, band_out, rows, planes);
  }
}

using BlockFn = void (*)(const DwGeometry&, const BlockIo&, const float*, const float*, Finish, float*, float*);

template <int KH, int KW, int SW>
void block_baseline(const DwGeometry& g, const BlockIo& io, const float* w, const float* bias, Finish f,
                    float* s, float* b) {
  run_block<KH, KW, SW>(g, io, w, bias, f, s, b);
}
#if defined(__x86_64__)
template <int KH, int KW, int SW>
__attribute__((target("avx2,fma"))) void block_avx2(const DwGeometry& g, const BlockIo& io, const float* w,
                                                    const float* bias, Finish f, float* s, float* b) {
  run_block<KH, KW, SW>(g, io, w, bias, f, s, b);
}
// NHWC with AVX-512F: the in-place blocks in pairs, 16-lane vectors (no AVX512VL: the
// 8-lane code stays VEX-encoded). Only NHWC plans take it (block_fn's `wide`), so only
// the NHWC band is compiled for it.
template <int KH, int KW, int SW>
__attribute__((target("avx512f,avx2,fma"))) void block_avx512(const DwGeometry& g, const BlockIo& io,
                                                              const float* w, const float* bias, Finish f,
                                                              float*, float*) {
  run_group_nhwc<v16, KH, KW, SW>(g, *io.nhwc_staged, *io.nhwc, w, bias, f);
}
#endif

// Whether the AVX-512 functions run: on the active kernel's ISA.
bool avx512_functions() {
#if defined(__x86_64__)
  return active_config().kernel->simd == SimdLevel::Avx512;
#else
  return false;
#endif
}

// wide: the function for NHWC plans that run the in-place blocks in pairs.
template <int KH, int KW, int SW>
BlockFn block_fn(bool wide) {
#if defined(__x86_64__)
  if (wide) return block_avx512<KH, KW, SW>;
  if (conv_config().kernel->simd != SimdLevel::Baseline) return block_avx2<KH, KW, SW>;
#endif
  (void)wide;
  return block_baseline<KH, KW, SW>;
}

// 3x3 and 5x5 at stride 1 or 2 without dilation get their sizes compiled in; the rest
// runs the generic loops.
BlockFn pick_block_fn(const DwGeometry& g, bool wide) {
  const bool plain = g.dw == 1 && (g.sw == 1 || g.sw == 2);
  const int k = g.kh == 3 && g.kw == 3 ? 3 : g.kh == 5 && g.kw == 5 ? 5 : 0;
  if (!plain || !k)
    return k == 3 ? block_fn<3, 3, 0>(wide) : k == 5 ? block_fn<5, 5, 0>(wide) : block_fn<0, 0, 0>(wide);
  if (k == 3) return g.sw == 1 ? block_fn<3, 3, 1>(wide) : block_fn<3, 3, 2>(wide);
  return g.sw == 1 ? block_fn<5, 5, 1>(wide) : block_fn<5, 5, 2>(wide);
}

class DepthwiseConv final : public Prepared {
 public:
  // long_segments: NHWC in place, rows in L2-sized segments even where the image is past
  // L2 (segment_columns).
  DepthwiseConv(const Shape& s, const float* weights, const float* bias, bool long_segments)
      : s_(s), g_(make_geometry(s)), long_segments_(long_segments) {
    // NCHW8 in place with a batch whose input (the whole batch: one share) is past what the
    // caches keep between runs: its new input rows fetched kFetchAheadRows output rows ahead. The planes stream by rows, which
    // the hardware prefetchers follow, but not far enough ahead from DRAM: MobileNetV2 at
    // batch 8 (Zen 5, 1 thread, ms per image, without / with): 32 channels at 112x112
    // 0.15-0.21 / 0.10, 96 at 112x112 stride 2 0.31-0.33 / 0.21-0.24 (2 threads 0.135 /
    // 0.092), 144 at 56x56 0.11-0.13 either way. On images that stay in L3 they cost up to
    // 10% (144 channels at 56x56, batch 1), hence only on batches past 8 L2s of input.
    if (s.d.layout == GK_LAYOUT_NCHW8 && g_.multiplier == 1 && fetches_rows_ahead(s.d, 1))
      g_.fetch_ahead = kFetchAheadRows;
    const int64_t oc = s.d.out_channels, taps = g_.kh * g_.kw;
    blocks_ = (oc + kLanes - 1) / kLanes;
    // Weights [block][tap][lane] and bias [block][lane], zero past the last channel.
    w_.assign(size_t(blocks_ * taps * kLanes), 0.0f);
    bias_.assign(size_t(blocks_ * kLanes), 0.0f);
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t t = 0; t < taps; ++t) w_[size_t(((o / kLanes) * taps + t) * kLanes + o % kLanes)] = weights[o * taps + t];
      if (bias) bias_[size_t(o)] = bias[o];
    }
    if (g_.multiplier == 1 && oc > kLanes && oc % kLanes) {
      tail_w_.resize(size_t(taps * kLanes));
      tail_bias_.assign(size_t(kLanes), 0.0f);
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t o = oc - kLanes + l;
        for (int64_t t = 0; t < taps; ++t) tail_w_[size_t(t * kLanes + l)] = weights[o * taps + t];
        if (bias) tail_bias_[size_t(l)] = bias[o];
      }
    }
    // NHWC whole blocks read in place (multiplier 1), paired for the AVX-512 functions
    // where every pair's pixels lie on whole 64-byte lines (run_nhwc checks the tensors'
    // addresses): a 16-lane load split across two lines cost more than two 8-lane loads
    // (Zen 5, 1 thread, ms, pairs / 8 lanes: 144 channels at 56x56 from 16-byte aligned
    // tensors 0.173 / 0.138; 116 channels at 14x14 0.0084 / 0.0075).
    const bool pairs = avx512_functions() && s.d.layout == GK_LAYOUT_NHWC && g_.multiplier == 1 &&
                       s.d.in_channels % (2 * kLanes) == 0;
    if (pairs) pack_pairs();
    fn_ = pick_block_fn(g_, pairs);
    const gk_conv_desc& d = s.d;
    copy_padded_ = native_layout(GK_LAYOUT_NCHW8) && g_.ow <= kPaddedCopyMaxWidth && g_.sw == 1 && !g_.edge_row &&
                   (d.pad_top || d.pad_left || d.pad_bottom || d.pad_right);
    padded_ = zero_padded(g_, d.pad_bottom, d.pad_right);
    nhwc_ = nhwc_staged(g_, d.pad_right);
    // With a channel multiplier (staged blocks), as many blocks per NHWC group as keep
    // its ring in L1d, at least two (16 channels: each pixel's accesses a whole 64-byte
    // line), at most 8. On a 32-channel 112x112 layer (Xeon, 48 KiB L1d, all blocks
    // staged then) 4 blocks ran 0.44 ms, 2 blocks 0.53, 1 block 0.61-0.82.
    group_ = std::clamp<int64_t>(caches().l1d / (ring_rows() * nhwc_.iw * kLanes * 4), 2, 8);
  }

  bool native_layout(gk_layout layout) const override {
    return layout == GK_LAYOUT_NCHW || layout == GK_LAYOUT_NHWC || (layout == GK_LAYOUT_NCHW8 && g_.multiplier == 1);
  }

  // NCHW and NHWC: the staged input band and the output band; NCHW8: a zero-padded block.
  // Per thread: the staged band (or padded block), then the output band.
  WorkspaceNeed need() const override {
    return {0, std::max(staged_floats() + g_.band * g_.ow * kLanes + 2 * g_.kh, nhwc_group_floats())};
  }

  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    if (d.layout == GK_LAYOUT_NHWC) return run_nhwc(input, output, ws);
    const bool blocked = d.layout != GK_LAYOUT_NCHW && native_layout(d.layout);  // else NCHW copies
    const int64_t taps = g_.kh * g_.kw;
    const int64_t in_plane = g_.ih * g_.iw, out_plane = g_.oh * g_.ow;
    const int threads = ws.cap(threads_for(s_.flops(), kDepthwiseFlopsPerExtraThread));
    const int64_t bands = blocked && !copy_padded_ ? depthwise_nchw8_bands(g_.oh, g_.ow, threads) : 1;
    const int64_t items = bands * d.batch * blocks_;  // band-major, then image, then block
    parallel_region(threads, [&] {
      const bool copy_padded = blocked && copy_padded_;
      float* staged = ws.block(omp_get_thread_num());
      float* band_out = staged + staged_floats();
      const float** row_ptrs = reinterpret_cast<const float**>(band_out + g_.band * g_.ow * kLanes);
      if (copy_padded) std::fill(staged, staged + padded_block_floats(), 0.0f);  // the padding, once
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t band = item / (d.batch * blocks_), n = item / blocks_ % d.batch, b = item % blocks_;
        BlockIo io;
        io.row_ptrs = row_ptrs;
        if (blocked) {
          io.in_blocked = input + (n * blocks_ + b) * in_plane * kLanes;
          io.out_blocked = output + (n * blocks_ + b) * out_plane * kLanes;
          io.oh0 = band_start(band, bands, g_.oh), io.out_rows = band_start(band + 1, bands, g_.oh) - io.oh0;
          if (copy_padded) {
            io.padded_interior = staged + (g_.pad_top * padded_.iw + g_.pad_left) * kLanes;
            io.rows = g_.ih, io.row_floats = g_.iw * kLanes, io.padded_row_floats = padded_.iw * kLanes;
          }
        } else {
          for (int64_t l = 0; l < kLanes; ++l) {
            const int64_t o = b * kLanes + l;
            const bool inside = o < d.out_channels;
            io.in_planar[l] = inside ? input + (n * d.in_channels + o / g_.multiplier) * in_plane : nullptr;
            io.out_planar[l] = inside ? output + (n * d.out_channels + o) * out_plane : nullptr;
          }
        }
        fn_(copy_padded ? padded_ : g_, io, &w_[size_t(b * taps * kLanes)], &bias_[size_t(b * kLanes)],
            Finish{d.activation, s_.adds_to_output()}, staged, band_out);
      }
    });
  }

 private:
  // NHWC: items are (image, band of output rows, group of channel blocks).
  void run_nhwc(const float* input, float* output, const Workspace& ws) const {
    const gk_conv_desc& d = s_.d;
    const bool lines_aligned = (reinterpret_cast<uintptr_t>(input) | reinterpret_cast<uintptr_t>(output)) % 64 == 0;
    const int threads = ws.cap(threads_for(s_.flops(), kDepthwiseFlopsPerExtraThread));
    const int64_t bands = nhwc_bands(threads, d.batch);
    const int64_t group = g_.multiplier == 1 ? blocks_ : group_, groups = (blocks_ + group - 1) / group;
    const int64_t items = d.batch * bands * groups;
    parallel_region(threads, [&] {
      float* block = ws.block(omp_get_thread_num());
      NhwcGroup ng;  // the fields every item shares
      ng.in_px = d.in_channels, ng.out_px = d.out_channels;
      ng.out_channels = d.out_channels, ng.multiplier = g_.multiplier;
      ng.pad_left = g_.pad_left, ng.padded_width = nhwc_.iw;
      ng.ring_rows = ring_rows(), ng.taps = g_.kh * g_.kw;
      ng.segment_columns = segment_columns(group, threads);
      ng.fetch_ahead = fetch_ahead_nhwc(threads);

      ng.ring = block, ng.out_row = block + group_ * ng.ring_floats();
      ng.row_ptrs = reinterpret_cast<const float**>(ng.out_row + g_.ow * kLanes);
      zero_ring_padding(g_, ng, group_);
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t band = item / groups % bands, n = item / (groups * bands);
        ng.in = input + n * g_.ih * g_.iw * d.in_channels;
        ng.out = output + n * g_.oh * g_.ow * d.out_channels;
        ng.b0 = (item % groups) * group, ng.blocks = std::min(group, blocks_ - ng.b0);
        ng.in_place_blocks = g_.multiplier == 1 ? std::clamp<int64_t>(d.in_channels / kLanes - ng.b0, 0, ng.blocks) : 0;
        const bool tail = !tail_w_.empty() && ng.b0 + ng.blocks == blocks_;
        ng.tail_w = tail ? tail_w_.data() : nullptr, ng.tail_bias = tail ? tail_bias_.data() : nullptr;
        const bool pairs = !pair_w_.empty() && ng.b0 == 0 && lines_aligned;
        ng.pair_w = pairs ? pair_w_.data() : nullptr, ng.pair_bias = pairs ? pair_bias_.data() : nullptr;
        ng.oh0 = band_start(band, bands, g_.oh), ng.rows = band_start(band + 1, bands, g_.oh) - ng.oh0;
        BlockIo io;
        io.nhwc = &ng, io.nhwc_staged = &nhwc_;
        fn_(g_, io, &w_[size_t(ng.b0 * ng.taps * kLanes)], &bias_[size_t(ng.b0 * kLanes)],
            Finish{d.activation, s_.adds_to_output()}, nullptr, nullptr);
      }
    });
  }
  // Blocks 2p and 2p + 1 side by side: pair_w_ [pair][tap][16], pair_bias_ [pair][16].
  void pack_pairs() {
    const int64_t taps = g_.kh * g_.kw, pairs = blocks_ / 2;
    pair_w_.resize(size_t(pairs * taps * 2 * kLanes));
    pair_bias_.resize(size_t(pairs * 2 * kLanes));
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t b = 2 * p + half;
        for (int64_t t = 0; t < taps; ++t)
          std::copy_n(&w_[size_t((b * taps + t) * kLanes)], kLanes, &pair_w_[size_t(((p * taps + t) * 2 + half) * kLanes)]);
        std::copy_n(&bias_[size_t(b * kLanes)], kLanes, &pair_bias_[size_t((2 * p + half) * kLanes)]);
      }
  }
  // NHWC bands of output rows per image, band b rows [b * oh / bands, (b + 1) * oh / bands):
  // of at most kNhwcBandRows rows, or (multiplier 1 and 8 or more channels, in place:
  // every channel block in one item) with several threads about two bands per thread, the
  // items a multiple of the threads where there are rows enough (112 rows in 7 bands of 16
  // ran 4:3 on two threads). Threads split rows, not channels, since splitting a pixel's
  // channels between threads wrote the same cache lines from both (58 channels at 28x28 in
  // groups of 2 blocks: 2 threads 0.029 ms, 1 thread 0.020). Staged rings keep the fewest
  // bands.
  int64_t nhwc_bands(int threads, int64_t batch) const {
    const int64_t fewest = (g_.oh + kNhwcBandRows - 1) / kNhwcBandRows;
    if (!nhwc_in_place(s_) || threads == 1) return fewest;
    int64_t bands = std::max(fewest, (2 * threads + batch - 1) / batch);
    if (batch * bands % threads) bands = (bands + threads - 1) / threads * threads;
    return std::min(bands, g_.oh);
  }
  // Output columns per segment of the in-place blocks: their input, kh rows of the
  // group's channels, in half of L2 (whole rows on the five networks); at least one block
  // of 8 columns. Segments sized for L1d ran slower (Zen 4, MobileNetV2's 144 channels at
  // 56x56, best of 6: 0.20 ms at 8 columns, 0.18 in 16 KiB, 0.17 whole rows). But where a
  // thread's share of the image's input and output is past L2 (image_past_l2), 8 columns,
  // unless Fast-Run found long segments faster (long_segments_): the machines disagree.
  // Xeon model 207, us, 8 columns / whole rows, 1 thread: 32 channels at 112x112 118 /
  // 160, 96 at 112x112 stride 2 201 / 281, 64 at 112x112 243 / 369, 96 at 56x56 83 / 97,
  // but 144 at 56x56 157 / 149; 2 threads, where the share is past L2: 96 at 112x112
  // stride 2 88 / 139, 64 at 112x112 119 / 183; where it is not: 32 at 112x112 50 / 47,
  // 144 at 56x56 57 / 53. Zen 5, 1 thread, the other way: 32 at 112x112 99 / 91, 96 at
  // 112x112 stride 2 127 / 114, 144 at 56x56 117 / 113, at stride 2 45 / 43.
  int64_t segment_columns(int64_t group, int threads) const {
    const gk_conv_desc& d = s_.d;
    const int64_t sharing = std::max<int64_t>(1, threads / std::max<int64_t>(1, d.batch));
    if (!long_segments_ && image_past_l2(s_, sharing)) return 8;
    const int64_t column_bytes = ring_rows() * g_.sw * std::min(d.in_channels, group * kLanes) * 4;
    return std::max<int64_t>(8, caches().l2 / 2 / column_bytes / 8 * 8);
  }
  // NHWC in place: output rows ahead whose new input rows each segment fetches
  // (fetch_segment_ahead), on batches where each thread's share of the input is past 8
  // L2s, as NCHW8's. Zen 5, batch 8, ms per image, without / with: 1 thread, 144 channels
  // at 56x56 0.210-0.214 / 0.155, stride 2 0.084-0.087 / 0.073-0.075, 96 at 112x112
  // stride 2 0.33-0.35 / 0.31-0.35, 32 at 112x112 the same (0.13-0.14); 2 threads, 96 at
  // 112x112 stride 2 (19 MB a thread) 0.152 / 0.122, but where a thread's share is 6-7 MB
  // they lost: 144 at 56x56 0.073 / 0.075, stride 2 0.023 / 0.030, 32 at 112x112 0.064 /
  // 0.067. Into L2 only (prefetcht1, t2) gained less.
  int64_t fetch_ahead_nhwc(int threads) const {
    return g_.multiplier == 1 && fetches_rows_ahead(s_.d, threads) ? kFetchAheadRows : 0;
  }
  // The input rows one output row reads: a staged ring's slots.
  int64_t ring_rows() const { return (g_.kh - 1) * g_.dh + 1; }
  int64_t nhwc_group_floats() const {
    if (s_.d.layout != GK_LAYOUT_NHWC) return 0;
    return (group_ * ring_rows() * nhwc_.iw + g_.ow) * kLanes + 4 * g_.kh;  // then 2 kh row pointers
  }

  // A thread's staged band or padded block, whole cache lines (its output band follows).
  int64_t staged_floats() const {
    return (std::max(g_.staged_floats(), padded_block_floats()) + 15) / 16 * 16;
  }
  int64_t padded_block_floats() const { return copy_padded_ ? padded_.ih * padded_.iw * kLanes : 0; }

  Shape s_;
  DwGeometry g_;
  DwGeometry padded_;     // the geometry of the zero-padded copy
  DwGeometry nhwc_;       // the geometry of NHWC rows staged with their padding
  int64_t group_;         // channel blocks per NHWC group
  bool copy_padded_;      // NCHW8 planes small enough to convolve from a zero-padded copy
  int64_t blocks_;
  std::vector<float> w_, bias_;  // [block][tap][lane], [block][lane]
  std::vector<float> tail_w_, tail_bias_;  // NHWC's tail window (NhwcGroup::tail_w): [tap][lane], [lane]
  std::vector<float> pair_w_, pair_bias_;  // NHWC's blocks in pairs (NhwcGroup::pair_w)
  bool long_segments_;
  BlockFn fn_;
};

// ---- The other vectorization: along the output rows of one channel ------------------
// For NCHW planes wide enough to fill vectors it needs no transposes: each channel plane
// is copied zero-padded and split into its stride phases (so every tap reads one
// contiguous run), then each output row is computed 32 columns at a time (4 independent
// accumulators), every tap accumulated in registers; a remainder is one more block of 8
// overlapping the previous one, or on rows narrower than 8 a partial store.

struct PaddedPlane {
  int64_t hp, sw, len;           // rows, stride phases per row, floats per phase (+ 8 slack)
  std::vector<int64_t> offsets;  // tap (r, s) of output (0, 0) in the plane
  explicit PaddedPlane(const Shape& s)
      : hp(s.d.in_height + s.d.pad_top + s.d.pad_bottom), sw(s.d.stride_w),
        len((s.d.in_width + s.d.pad_left + s.d.pad_right + s.d.stride_w - 1) / s.d.stride_w + 8) {
    const gk_conv_desc& d = s.d;
    for (int64_t r = 0; r < d.kernel_h; ++r)
      for (int64_t c = 0; c < d.kernel_w; ++c) {
        const int64_t col = c * d.dilation_w;
        offsets.push_back((r * d.dilation_h * sw + col % sw) * len + col / sw);
      }
  }
  int64_t floats() const { return hp * sw * len; }
};

// Output columns [x, x + 8 * N) of one row: N accumulators over every tap.
template <int N>
GK_INLINE void row_block(const float* origin, const int64_t* offsets, int64_t taps, const float* w, const v8& bias,
                         Finish f, int64_t x, float* yrow) {
  v8 a[N];
#pragma GCC unroll 4
  for (int n = 0; n < N; ++n) a[n] = bias;
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = origin + x + offsets[t];
    const float wt = w[t];
#pragma GCC unroll 4
    for (int n = 0; n < N; ++n) a[n] += load8(src + 8 * n) * wt;
  }
#pragma GCC unroll 4
  for (int n = 0; n < N; ++n) finish8(yrow + x + 8 * n, a[n], f);
}

GK_INLINE void depthwise_plane(const Shape& s, const PaddedPlane& pp, const float* x, const float* w, float bias,
                               float* y, float* buffer) {
  const gk_conv_desc& d = s.d;
  for (int64_t r = 0; r < pp.hp; ++r) {
    const int64_t ih = r - d.pad_top;
    float* dst = buffer + r * pp.sw * pp.len;
    if (ih < 0 || ih >= d.in_height) {
      zero_floats(dst, pp.sw * pp.len);
    } else {
      split_phases(pp.sw, x + ih * d.in_width, d.in_width, d.pad_left, pp.len, dst);
    }
  }
  const int64_t taps = int64_t(pp.offsets.size());
  const v8 bias8 = splat8(bias);
  const Finish f{d.activation, s.adds_to_output()};
  for (int64_t oh = 0; oh < s.oh; ++oh) {
    float* yrow = y + oh * s.ow;
    const float* origin = buffer + oh * d.stride_h * pp.sw * pp.len;
    int64_t ow = 0;
    for (; ow + 32 <= s.ow; ow += 32) row_block<4>(origin, pp.offsets.data(), taps, w, bias8, f, ow, yrow);
    for (; ow + 8 <= s.ow; ow += 8) row_block<1>(origin, pp.offsets.data(), taps, w, bias8, f, ow, yrow);
    if (ow == s.ow) continue;
    // The last 8 columns again, overlapping; but adding to the output that would add the
    // residual of the columns already done twice.
    if (s.ow >= 8 && !f.add) {
      row_block<1>(origin, pp.offsets.data(), taps, w, bias8, f, s.ow - 8, yrow);
      continue;
    }
    v8 acc = bias8;  // the columns left as one vector: its extra lanes read the slack
    for (int64_t t = 0; t < taps; ++t) acc += load8(origin + ow + pp.offsets[size_t(t)]) * w[t];
    finish_lanes(yrow + ow, 1, s.ow - ow, acc, f);
  }
}

using PlaneFn = void (*)(const Shape&, const PaddedPlane&, const float*, const float*, float, float*, float*);
void plane_baseline(const Shape& s, const PaddedPlane& pp, const float* x, const float* w, float b, float* y,
                    float* buf) {
  depthwise_plane(s, pp, x, w, b, y, buf);
}
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void plane_avx2(const Shape& s, const PaddedPlane& pp, const float* x,
                                                    const float* w, float b, float* y, float* buf) {
  depthwise_plane(s, pp, x, w, b, y, buf);
}
#endif

class DepthwiseRowsConv final : public Prepared {
 public:
  DepthwiseRowsConv(const Shape& s, const float* weights, const float* bias)
      : s_(s), w_(weights, weights + s.d.out_channels * s.k_gemm), plane_(s) {
    if (bias) bias_.assign(bias, bias + s.d.out_channels);
    fn_ = plane_baseline;
#if defined(__x86_64__)
    if (conv_config().kernel->simd != SimdLevel::Baseline) fn_ = plane_avx2;
#endif
  }
  WorkspaceNeed need() const override { return {0, plane_.floats()}; }
  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t planes = d.batch * d.out_channels, in_plane = d.in_height * d.in_width;
    const int threads = ws.cap(threads_for(s_.flops(), kDepthwiseFlopsPerExtraThread));
    parallel_region(threads, [&] {
      float* buffer = ws.block(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t idx = 0; idx < planes; ++idx) {
        const int64_t n = idx / d.out_channels, oc = idx % d.out_channels;
        fn_(s_, plane_, input + (n * d.in_channels + oc / s_.ocg) * in_plane, w_.data() + oc * s_.k_gemm,
            bias_.empty() ? 0.0f : bias_[size_t(oc)], output + (n * d.out_channels + oc) * s_.pixels(), buffer);
      }
    });
  }

 private:
  Shape s_;
  std::vector<float> w_, bias_;
  PaddedPlane plane_;
  PlaneFn fn_;
};

// The two vectorizations, Fast-Run's tuning values; 3: across channels, NHWC rows in long
// segments (DepthwiseConv::segment_columns), under the same tuning name, which cached
// Fast-Run files hold.
enum Vectorization : int64_t { kAcrossChannels = 1, kAlongRows = 2, kAcrossChannelsLongSegments = 3 };

// AUTO: across channels when the plan runs NCHW8 natively, or when the output rows are
// narrow (kRowsMinWidth); along the rows otherwise.
Vectorization default_vectorization(const Shape& s) {
  const bool blocked = s.d.layout == GK_LAYOUT_NCHW8 && s.ocg == 1;
  return blocked || s.d.layout == GK_LAYOUT_NHWC || s.ow < kRowsMinWidth ? kAcrossChannels : kAlongRows;
}

class Depthwise final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_DEPTHWISE; }
  const char* name() const override { return "depthwise"; }
  std::string unusable_reason(const Shape& s) const override {
    return s.depthwise() ? "" : "not channel-wise (groups != in_channels)";
  }
  // 1: vectors across 8 channels; 2: along the output rows of one channel; 3: as 1, NHWC
  // rows in long segments.
  const char* tuning_name() const override { return "vectorize"; }
  // NHWC only across channels (along rows would convert the tensors to NCHW and back), in
  // long segments too where an image in place is past L2.
  std::vector<int64_t> tunings(const Shape& s) const override {
    if (s.d.layout == GK_LAYOUT_NHWC) {
      // Past L2 on one thread: on more, a share may fit, and both candidates run alike.
      if (nhwc_in_place(s) && image_past_l2(s, 1)) return {kAcrossChannelsLongSegments};
      return {};
    }
    return {default_vectorization(s) == kAcrossChannels ? kAlongRows : kAcrossChannels};
  }
  bool runs_nhwc(const Shape&) const override { return true; }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t tuning) const override {
    const bool known = tuning == kAcrossChannels || tuning == kAlongRows || tuning == kAcrossChannelsLongSegments;
    const Vectorization v = known ? Vectorization(tuning) : default_vectorization(s);
    if (v == kAlongRows) return std::unique_ptr<Prepared>(new DepthwiseRowsConv(s, w, b));
    return std::unique_ptr<Prepared>(new DepthwiseConv(s, w, b, v == kAcrossChannelsLongSegments));
  }
};

}  // namespace

// One band per thread where each gets 8 rows or more: each thread then reads the rows the
// layer before wrote on its core and writes the rows the layer after reads there (the
// pointwise layers around split such images by pixels, smaller ones by channels).
int64_t depthwise_nchw8_bands(int64_t oh, int64_t ow, int threads) {
  return oh * ow >= kDepthwiseRowSplitPixels && oh >= 8 * threads ? threads : 1;
}

const Algorithm* depthwise_algorithm() {
  static const Depthwise a;
  return &a;
}

}  // namespace conv
}  // namespace gk
