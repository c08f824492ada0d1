// Direct convolution for any grouping (NCHW, and NCHW8 below), register-blocked: a tile of 4 output channels
// by up to 4 vectors of consecutive output columns of one output row stays in registers
// while every tap (input channel, kernel row, kernel column) adds to it: per tap one load
// per vector of columns, one broadcast per output channel, 4 x vectors FMAs. The input rows
// an output row reads are first copied into a panel, zero-padded and split into their
// stride phases (x_padded[i * stride + phase]), so every tap reads one contiguous run at a
// fixed offset whatever the padding, stride or dilation, and a tile never needs a bound.
// Worth it where a group is too small for a GEMM to pay off (grouped layers of a few
// channels that the NCHW8 engine cannot merge into whole blocks), and a candidate for
// Fast-Run elsewhere. (Channel-wise convolutions have their own algorithm:
// algo_depthwise.cpp; the NCHW8 engine runs its own direct taps: pointwise.cpp.)
// Threads split (image, group, block of up to 32 output channels, output row) items,
// consecutive rows of one block to a thread so its weights stay in cache. A panel holds
// as many input channels as fit kPanelFloats; more are accumulated in the output row.
// Bias, the residual (adding to the output) and the activation are applied as a tile is
// stored.
// Whole images (stride 1 across, enough groups for the threads, small enough images): an
// item is a group of one image (NCHW), or a super-group of consecutive groups whose
// channels are whole 8-channel blocks (NCHW8, run without copies of the tensors). Its input
// goes once into a panel of every padded row in the thread's workspace (rows copied, or
// blocks transposed), its output is computed into planes of whole vectors there and copied
// (or transposed) out, all in L2: no band copies rows again for its output rows, and no
// tile stores a row's last vector lane by lane (design.md, "Direct on whole images").
#include <omp.h>

#include <algorithm>
#include <vector>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/vec.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {
namespace conv {
namespace {

constexpr int64_t kOcBlock = 4;          // output channels per register tile
constexpr int64_t kOcBlocksPerItem = 8;  // 32 output channels per work item
constexpr int64_t kPanelFloats = 8192;   // a panel's input channels: 32 KiB, in L1/L2
constexpr int64_t kMaxPanelChannelFloats = int64_t{1} << 24;

// Everything about the shape a run needs, computed once per plan.
struct DirectGeometry {
  int64_t kh, kw, sh, dh, pad_top, pad_left, ih, iw, oh, ow;
  int64_t sw;            // horizontal stride
  int64_t phases;        // stride phases stored per panel row (those inside the padded row)
  int64_t band;          // output rows per tile (and per item): several where rows are narrow
  int64_t band_in_rows;  // the input rows a band reads
  int64_t phase_len;     // floats per phase: the padded row's phase plus a tile's over-read
  int64_t chunk;         // input channels per panel
  int64_t icg, ocg, groups, oc_blocks;  // oc_blocks: per group, of kOcBlock
  std::vector<int64_t> tap_offset;     // tap (r, s): where it reads from a channel's first panel row
  // Phase ph of a row reads input columns for its elements [phase_lo[ph], phase_hi[ph]),
  // element i column i * sw + ph - pad_left (the others are padding).
  std::vector<int64_t> phase_lo, phase_hi;
  int64_t panel_row_floats() const { return phases * phase_len; }
  int64_t panel_floats() const { return chunk * band_in_rows * panel_row_floats(); }
};

// The panel's extents, before any table (Direct::unusable_reason checks their size first).
// lanes: floats per vector; tile_vectors: vectors per channel a tile holds in registers
// (a tile is kOcBlock channels of them), spent on one row's columns or, where a row has
// fewer vectors, on several rows (at strides up to 4: a band's rows are a stride apart).
DirectGeometry direct_extents(const Shape& s, int64_t lanes, int64_t tile_vectors) {
  const gk_conv_desc& d = s.d;
  DirectGeometry g;
  g.kh = d.kernel_h, g.kw = d.kernel_w, g.sh = d.stride_h, g.sw = d.stride_w, g.dh = d.dilation_h;
  g.pad_top = d.pad_top, g.pad_left = d.pad_left, g.ih = d.in_height, g.iw = d.in_width;
  g.oh = s.oh, g.ow = s.ow, g.icg = s.icg, g.ocg = s.ocg, g.groups = d.groups;
  g.oc_blocks = (s.ocg + kOcBlock - 1) / kOcBlock;
  const int64_t row_vectors = (s.ow + lanes - 1) / lanes;
  g.band = row_vectors >= tile_vectors || g.sh > 4 ? 1 : tile_vectors / row_vectors;
  g.band_in_rows = (g.band - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  // Output column x, tap s reads padded column x * sw + s * dw: phase (s * dw) % sw,
  // element x + (s * dw) / sw; s * dw is inside the padded row, so phases past it are
  // never read. A row's last tile reads whole vectors: up to ow rounded up.
  const int64_t padded_width = d.in_width + d.pad_left + d.pad_right;
  g.phases = std::min(g.sw, padded_width);
  const int64_t reach = (d.kernel_w - 1) * d.dilation_w / d.stride_w;
  g.phase_len = std::max((padded_width + g.sw - 1) / g.sw, reach + row_vectors * lanes);
  g.chunk = 1;
  return g;
}

// One input channel's panel, in floats; false past int64.
bool panel_channel_floats(const DirectGeometry& g, int64_t* floats) {
  int64_t row = 0;
  return mul_ok(g.phases, g.phase_len, &row) && mul_ok(row, g.band_in_rows, floats);
}

DirectGeometry direct_geometry(const Shape& s, int64_t lanes, int64_t tile_vectors) {
  DirectGeometry g = direct_extents(s, lanes, tile_vectors);
  for (int64_t r = 0; r < g.kh; ++r)
    for (int64_t c = 0; c < g.kw; ++c) {
      const int64_t at = c * s.d.dilation_w;
      g.tap_offset.push_back(r * g.dh * g.panel_row_floats() + (at % g.sw) * g.phase_len + at / g.sw);
    }
  for (int64_t ph = 0; ph < g.phases; ++ph) {
    const int64_t first_col = ph - g.pad_left;
    const int64_t lo = std::min(g.phase_len, first_col >= 0 ? 0 : (-first_col + g.sw - 1) / g.sw);
    g.phase_lo.push_back(lo);
    g.phase_hi.push_back(std::clamp<int64_t>((g.iw - first_col + g.sw - 1) / g.sw, lo, g.phase_len));
  }
  g.chunk = std::clamp<int64_t>(kPanelFloats / (g.band_in_rows * g.panel_row_floats()), 1, s.icg);
  return g;
}

// Elements 0, 2, 4, ... of the 2L floats a, b (V of L lanes): one permute of two sources.
template <class V>
GK_INLINE V even_lanes(V a, V b) {
  using Mask = decltype(a < b);
  Mask even;
  for (int l = 0; l < int(sizeof(V) / sizeof(float)); ++l) even[l] = 2 * l;
  return __builtin_shuffle(a, b, even);
}

// Stride 2: phase[i] = src[2 * i + first_col] for i from `i` on while a vector's two
// source vectors lie inside the row (iw floats) and below `hi`; returns where it stopped.
template <class V>
GK_INLINE int64_t even_columns(const float* src, int64_t first_col, int64_t iw, int64_t i, int64_t hi, float* phase) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (; i + L <= hi && (i + L) * 2 + first_col <= iw; i += L) {
    const float* at = src + i * 2 + first_col;
    const V v = even_lanes(load_vec<V>(at), load_vec<V>(at + L));
    std::memcpy(phase + i, &v, sizeof v);
  }
  return i;
}

// Phase ph of an input row: phase[i] = src[i * sw + ph - pad_left], zero outside the row.
// Stride 2 deinterleaves vectors, 16 lanes then 8: with a bound check per element the
// panel would cost more than the FMAs of a grouped layer of 8-channel groups.
template <class V>
GK_INLINE void split_phase(const DirectGeometry& g, const float* src, int64_t ph, float* phase) {
  const int64_t sw = g.sw, first_col = ph - g.pad_left;  // phase[i] reads column i * sw + first_col
  const int64_t lo = g.phase_lo[size_t(ph)], hi = g.phase_hi[size_t(ph)];
  zero_floats(phase, lo);
  int64_t i = lo;
  if (sw == 2) {
    i = even_columns<V>(src, first_col, g.iw, i, hi, phase);
    if (sizeof(V) > sizeof(v8)) i = even_columns<v8>(src, first_col, g.iw, i, hi, phase);
  }
  for (; i < hi; ++i) phase[i] = src[i * sw + first_col];
  zero_floats(phase + hi, g.phase_len - hi);
}

// The panel of the band from output row y for input channels [c0, c0 + cc) of one group's
// image planes x: row (c, i) holds input row y * sh - pad_top + i of channel c0 + c,
// zero-padded (rows outside the image all zero) and split into phases.
template <class V>
GK_INLINE void build_panel(const DirectGeometry& g, const float* x, int64_t c0, int64_t cc, int64_t y, float* panel) {
  const int64_t row_floats = g.panel_row_floats();
  for (int64_t c = 0; c < cc; ++c)
    for (int64_t i = 0; i < g.band_in_rows; ++i) {
      float* row = panel + (c * g.band_in_rows + i) * row_floats;
      const int64_t iy = y * g.sh - g.pad_top + i;
      if (iy < 0 || iy >= g.ih) {
        zero_floats(row, row_floats);
        continue;
      }
      const float* src = x + ((c0 + c) * g.ih + iy) * g.iw;
      if (g.sw == 1) {
        zero_floats(row, g.pad_left);
        copy_run(row + g.pad_left, src, g.iw);
        zero_floats(row + g.pad_left + g.iw, g.phase_len - g.pad_left - g.iw);
        continue;
      }
      for (int64_t ph = 0; ph < g.phases; ++ph) split_phase<V>(g, src, ph, row + ph * g.phase_len);
    }
}


// How a tile is stored: its sums plus the bias (first chunk of input channels; onto the
// residual when adding to the output) or plus the partial sums already stored (later
// chunks); the activation after the last chunk.
struct TileStore {
  bool first, last, add;
  gk_activation act;
  bool reads_output() const { return !first || add; }
};

// n <= L lanes of v (a tile's vector for one channel) into out.
template <class V>
GK_INLINE void store_vector(float* out, V v, float bias, const TileStore& t, int64_t n) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  if (t.first) v += splat<V>(bias);
  if (n == L) {
    if (t.reads_output()) v += load_vec<V>(out);
    if (t.last) v = activate(v, t.act);
    std::memcpy(out, &v, sizeof v);
    return;
  }
  V o = {};
  if (t.reads_output())
    for (int64_t l = 0; l < n; ++l) o[l] = out[l];
  v += o;
  if (t.last) v = activate(v, t.act);
  for (int64_t l = 0; l < n; ++l) out[l] = v[l];
}

// One tile: kOcBlock channels x NR output rows x NC vectors of columns from column x0,
// over the panel of cc input channels, weights [c][r][s][kOcBlock]; of it, `rows` rows,
// `cols` columns and `oc` channels are stored, channel o's row j at out + o * plane + j * ow.
template <class V, int NR, int NC>
GK_INLINE void tile(const DirectGeometry& g, const float* panel, int64_t cc, const float* w, int64_t x0,
                    int64_t rows, int64_t cols, const float* bias, int64_t oc, float* out, int64_t plane,
                    const TileStore& t) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V acc[kOcBlock][NR][NC] = {};
  // One loop over (channel, tap) pairs with the taps' offsets from a table: with loops over
  // kernel rows and columns GCC kept the weights' pointer on the stack (a store and a load
  // per tap, on the critical path), which halved the speed.
  const int64_t row_step = g.sh * g.panel_row_floats(), channel_floats = g.band_in_rows * g.panel_row_floats();
  const int64_t* const taps = g.tap_offset.data();
  const int64_t ntaps = g.kh * g.kw;
  const float* base = panel + x0;
  for (int64_t c = 0; c < cc; ++c, base += channel_floats)
    for (int64_t a = 0; a < ntaps; ++a, w += kOcBlock) {
      {
        const float* in = base + taps[a];
        // Fully unrolled, or GCC keeps the sums in memory (a load and a store per FMA).
        V xv[NR][NC];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j)
#pragma GCC unroll 4
          for (int v = 0; v < NC; ++v) xv[j][v] = load_vec<V>(in + j * row_step + v * L);
#pragma GCC unroll 4
        for (int o = 0; o < kOcBlock; ++o) {
          const V wv = splat<V>(w[o]);
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j)
#pragma GCC unroll 4
            for (int v = 0; v < NC; ++v) acc[o][j][v] += xv[j][v] * wv;
        }
      }
    }
  for (int64_t o = 0; o < oc; ++o)
    for (int j = 0; j < NR && j < rows; ++j)
      for (int v = 0; v < NC && v * L < cols; ++v)
        store_vector<V>(out + o * plane + j * g.ow + x0 + v * L, acc[o][j][v], bias[o], t,
                        std::min(L, cols - v * L));
}

// One band of output rows of one oc block over a panel: tiles of NC vectors, then one of
// as many vectors as the rows have left (1 to NC).
template <class V, int NR, int NC>
GK_INLINE void block_band(const DirectGeometry& g, const float* panel, int64_t cc, const float* w, int64_t rows,
                          const float* bias, int64_t oc, float* out, int64_t plane, const TileStore& t) {
  static_assert(NC >= 1 && NC <= 4, "the remainder's cases below");
  constexpr int64_t L = sizeof(V) / sizeof(float), W = NC * L;
  int64_t x = 0;
  for (; x + W <= g.ow; x += W) tile<V, NR, NC>(g, panel, cc, w, x, rows, W, bias, oc, out, plane, t);
  const int64_t rest = g.ow - x;
  if (rest <= 0) return;
  switch ((rest + L - 1) / L) {
    case 1: tile<V, NR, 1>(g, panel, cc, w, x, rows, rest, bias, oc, out, plane, t); break;
    case 2: tile<V, NR, std::min(2, NC)>(g, panel, cc, w, x, rows, rest, bias, oc, out, plane, t); break;
    case 3: tile<V, NR, std::min(3, NC)>(g, panel, cc, w, x, rows, rest, bias, oc, out, plane, t); break;
    default: tile<V, NR, NC>(g, panel, cc, w, x, rows, rest, bias, oc, out, plane, t); break;
  }
}

// The packed weights and bias of a plan: per group and oc block, [ic][r][s][kOcBlock]
// (channels past the group's last zero), so a tile reads its weights in order.
struct DirectWeights {
  std::vector<float> w, bias;  // bias: [group][oc_blocks * kOcBlock]
  int64_t block_floats;       // one oc block's weights
};

DirectWeights pack_direct_weights(const Shape& s, const DirectGeometry& g, const float* weights, const float* bias) {
  DirectWeights p;
  const int64_t taps = g.kh * g.kw;
  p.block_floats = s.icg * taps * kOcBlock;
  p.w.assign(size_t(g.groups * g.oc_blocks * p.block_floats), 0.0f);
  p.bias.assign(size_t(g.groups * g.oc_blocks * kOcBlock), 0.0f);
  for (int64_t gr = 0; gr < g.groups; ++gr)
    for (int64_t o = 0; o < s.ocg; ++o) {
      const int64_t oc = gr * s.ocg + o, blk = gr * g.oc_blocks + o / kOcBlock, lane = o % kOcBlock;
      for (int64_t k = 0; k < s.icg * taps; ++k)
        p.w[size_t((blk * s.icg * taps + k) * kOcBlock + lane)] = weights[oc * s.k_gemm + k];
      if (bias) p.bias[size_t(blk * kOcBlock + lane)] = bias[oc];
    }
  return p;
}

// What a run passes to the item function: one item's image, group, oc blocks and band.
struct DirectItem {
  const float* x;   // the group's input planes of the image; nullptr: `panel` holds them
                    // all already, every row (whole_image_geometry), and is not rebuilt
  float* y;         // the item's first output channel's plane
  const float* w;   // its first oc block's weights
  const float* bias;
  int64_t blocks, channels;  // oc blocks, and the channels in them that exist
  int64_t row;               // the band's first output row
  float* panel;
  gk_activation act;
  bool add;
};

// One item: per chunk of input channels, the panel, then every oc block's band.
template <class V, int NR, int NC>
GK_INLINE void direct_band(const DirectGeometry& g, const DirectItem& it, int64_t block_floats) {
  const int64_t plane = g.oh * g.ow, taps = g.kh * g.kw, rows = std::min(g.band, g.oh - it.row);
  for (int64_t c0 = 0; c0 < g.icg; c0 += g.chunk) {
    const int64_t cc = std::min(g.chunk, g.icg - c0);
    const float* panel = it.panel;
    if (it.x) {
      build_panel<V>(g, it.x, c0, cc, it.row, it.panel);
    } else {
      panel += it.row * g.sh * g.panel_row_floats();  // the whole image's panel, from the band's rows
    }
    const TileStore t{c0 == 0, c0 + cc == g.icg, it.add, it.act};
    for (int64_t b = 0; b < it.blocks; ++b)
      block_band<V, NR, NC>(g, panel, cc, it.w + b * block_floats + c0 * taps * kOcBlock, rows,
                            it.bias + b * kOcBlock, std::min(kOcBlock, it.channels - b * kOcBlock),
                            it.y + b * kOcBlock * plane + it.row * g.ow, plane, t);
  }
}

// Whole-image mode: one super-group of `merge` groups of one image.
struct WholeImageItem {
  const float* x;     // its first input channel (NCHW) or channel block (NCHW8)
  float* y;           // its first output channel or block
  const float* w;     // its first group's weights
  const float* bias;  // and bias
  int64_t merge;
  bool planar;  // NCHW in and out (planes copied by rows), else NCHW8
  float *panel, *out_planes;  // panel: every input channel's rows (whole_image_geometry)
  gk_activation act;
  bool add;
};

// 16 pixels of an NCHW8 block (8 registers of 2 pixels) <-> 8 channels' runs of 16 (8
// registers of one channel), in three stages of two-source permutes (24 for 128 floats,
// half of two 8 x 8 transposes' shuffles): stage k swaps bit k of the register index with
// bit k of the lane (a channel bit for a pixel bit). The masks, for both directions, are
// derived once from where each (pixel, channel) lies before and after each stage.
typedef int v16i __attribute__((vector_size(64)));
struct WideTransposeMasks {
  v16i to_planes[3][2], to_blocks[3][2];  // [stage][low, high register of the pair]
};
const WideTransposeMasks& wide_transpose_masks() {
  static const WideTransposeMasks masks = [] {
    // Element p * 8 + c at (register, lane) in layout 0 (blocks) to 3 (planes).
    auto element = [](int layout, int reg, int lane) {
      const auto bit = [](int v, int b) { return (v >> b) & 1; };
      switch (layout) {
        case 0: return (2 * reg + (lane >> 3)) * 8 + (lane & 7);
        case 1: {  // reg: c0 p2 p3; lane: p1 c1 c2 p0 (bit 0 first)
          const int c = bit(reg, 0) | bit(lane, 1) << 1 | bit(lane, 2) << 2;
          const int p = bit(lane, 3) | bit(lane, 0) << 1 | bit(reg, 1) << 2 | bit(reg, 2) << 3;
          return p * 8 + c;
        }
        case 2: {  // reg: c0 c1 p3; lane: p1 p2 c2 p0
          const int c = bit(reg, 0) | bit(reg, 1) << 1 | bit(lane, 2) << 2;
          const int p = bit(lane, 3) | bit(lane, 0) << 1 | bit(lane, 1) << 2 | bit(reg, 2) << 3;
          return p * 8 + c;
        }
        default: return lane * 8 + reg;
      }
    };
    // The mask making register `out` of layout `to` from registers a, b of layout `from`.
    auto mask = [&](int from, int to, int a, int b, int out) {
      v16i m;
      for (int lane = 0; lane < 16; ++lane)
        for (int src = 0; src < 32; ++src)
          if (element(from, src < 16 ? a : b, src % 16) == element(to, out, lane)) m[lane] = src;
      return m;
    };
    WideTransposeMasks w;
    for (int k = 0; k < 3; ++k)
      for (int h = 0; h < 2; ++h) {
        w.to_planes[k][h] = mask(k, k + 1, 0, 1 << k, h << k);
        w.to_blocks[k][h] = mask(k + 1, k, 0, 1 << k, h << k);
      }
    return w;
  }();
  return masks;
}
// Registers r[0..8) from layout 0 to 3 (to_planes) or back, the stages in order.
// Fully unrolled, or the registers live in memory.
GK_INLINE void wide_transpose(v16 (&r)[8], const v16i (&m)[3][2], bool to_planes) {
#pragma GCC unroll 3
  for (int step = 0; step < 3; ++step) {
    const int k = to_planes ? step : 2 - step;
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      if (q & (1 << k)) continue;
      const v16 a = r[q], b = r[q | (1 << k)];
      r[q] = __builtin_shuffle(a, b, m[k][0]);
      r[q | (1 << k)] = __builtin_shuffle(a, b, m[k][1]);
    }
  }
}

// One row of `cols` pixels of an NCHW8 block into 8 channel runs, or back: 16 pixels at a
// time with V = v16, the rest as interleave/deinterleave do.
template <class V>
GK_INLINE void block_row_to_runs(const float* x, int64_t cols, float* const* dst) {
  int64_t j = 0;
  if constexpr (sizeof(V) == sizeof(v16)) {
    const WideTransposeMasks& m = wide_transpose_masks();
    for (; j + 16 <= cols; j += 16) {
      v16 r[8];
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) r[q] = load_vec<v16>(x + (j + 2 * q) * 8);
      wide_transpose(r, m.to_planes, true);
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) store_vec(dst[c] + j, r[c]);
    }
  }
  float* rest[8];
  for (int c = 0; c < 8; ++c) rest[c] = dst[c] + j;
  deinterleave(x + j * 8, 8, cols - j, rest);
}
template <class V>
GK_INLINE void runs_to_block_row(const float* const* src, int64_t cols, float* y) {
  int64_t j = 0;
  if constexpr (sizeof(V) == sizeof(v16)) {
    const WideTransposeMasks& m = wide_transpose_masks();
    for (; j + 16 <= cols; j += 16) {
      v16 r[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) r[c] = load_vec<v16>(src[c] + j);
      wide_transpose(r, m.to_blocks, false);
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) store_vec(y + (j + 2 * q) * 8, r[q]);
    }
  }
  const float* rest[8];
  for (int c = 0; c < 8; ++c) rest[c] = src[c] + j;
  interleave(rest, 8, cols - j, y + j * 8);
}

// `blocks` NCHW8 blocks of `rows` x `cols` pixels <-> 8 x blocks planes of rows `pitch`
// floats apart.
template <class V>
GK_INLINE void blocks_to_planes(const float* x, int64_t blocks, int64_t rows, int64_t cols, int64_t pitch,
                                float* planes) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      float* dst[8];
      for (int l = 0; l < 8; ++l) dst[l] = planes + ((b * 8 + l) * rows + i) * pitch;
      block_row_to_runs<V>(x + (b * rows + i) * cols * 8, cols, dst);
    }
}
template <class V>
GK_INLINE void planes_to_blocks(const float* planes, int64_t blocks, int64_t rows, int64_t cols, int64_t pitch,
                                float* y) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      const float* src[8];
      for (int l = 0; l < 8; ++l) src[l] = planes + ((b * 8 + l) * rows + i) * pitch;
      runs_to_block_row<V>(src, cols, y + (b * rows + i) * cols * 8);
    }
}

// The padding of a whole image's panel (stride 1 across) for `channels` channels, zeroed.
GK_INLINE void zero_panel_padding(const DirectGeometry& g, int64_t channels, float* panel) {
  const int64_t row = g.panel_row_floats(), channel = g.band_in_rows * row;
  const int64_t first = g.pad_top * row + g.pad_left;  // the first input float
  for (int64_t c = 0; c < channels; ++c) {
    float* ch = panel + c * channel;
    zero_floats(ch, first);
    // Between two rows' input: whole vectors (as calls, these short runs took 9% of a
    // 4-channel-group layer), the last one running up to 7 floats on, over zeros or input
    // written after (past the last channel's rows: its own zeroed rest, or the workspace's
    // next part, written later).
    const int64_t gap = row - g.iw;
    for (int64_t i = 0; i + 1 < g.ih; ++i) {
      float* at = ch + first + i * row + g.iw;
      for (int64_t k = 0; k < gap; k += 8) store8(at + k, v8{});
    }
    const int64_t last = first + (g.ih - 1) * row + g.iw;
    zero_floats(ch + last, channel - last);
  }
}

// The panel of a whole image from `channels` NCHW planes (their rows copied) or NCHW8
// blocks (8 x 8 transposes), the padding zeroed.
template <class V>
GK_INLINE void image_to_panel(const DirectGeometry& g, const float* x, int64_t channels, bool planar, float* panel) {
  const int64_t row = g.panel_row_floats(), channel = g.band_in_rows * row;
  zero_panel_padding(g, channels, panel);
  float* const first = panel + g.pad_top * row + g.pad_left;
  if (planar) {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < g.ih; ++i) copy_run(first + c * channel + i * row, x + (c * g.ih + i) * g.iw, g.iw);
    return;
  }
  for (int64_t b = 0; b < channels / 8; ++b)
    for (int64_t i = 0; i < g.ih; ++i) {
      float* dst[8];
      for (int l = 0; l < 8; ++l) dst[l] = first + (b * 8 + l) * channel + i * row;
      block_row_to_runs<V>(x + (b * g.ih + i) * g.iw * 8, g.iw, dst);
    }
}

// `channels` planes of rows `pitch` floats apart <-> NCHW planes (rows copied) or NCHW8
// blocks.
// (The columns past `cols` zeroed: the tiles read them with the residual, then drop them.)
template <class V>
GK_INLINE void image_to_planes(const float* x, int64_t channels, bool planar, int64_t rows, int64_t cols,
                               int64_t pitch, float* planes) {
  if (planar) {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < rows; ++i) copy_run(planes + (c * rows + i) * pitch, x + (c * rows + i) * cols, cols);
  } else {
    blocks_to_planes<V>(x, channels / 8, rows, cols, pitch, planes);
  }
  for (int64_t r = 0; r < channels * rows && cols < pitch; ++r) zero_floats(planes + r * pitch + cols, pitch - cols);
}
template <class V>
GK_INLINE void planes_to_image(const float* planes, int64_t channels, bool planar, int64_t rows, int64_t cols,
                               int64_t pitch, float* y) {
  if (!planar) return planes_to_blocks<V>(planes, channels / 8, rows, cols, pitch, y);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < rows; ++i) copy_run(y + (c * rows + i) * cols, planes + (c * rows + i) * pitch, cols);
}

template <class V, int TV>
GK_INLINE void direct_item(const DirectGeometry& g, const DirectItem& it, int64_t block_floats);

// Every group, oc block and band of a whole-image item (g: whole_image_geometry), its output
// (and residual) on planes of g.ow (the real width rounded up to vectors) columns.
template <class V, int TV>
GK_INLINE void direct_whole_image(const DirectGeometry& g, const WholeImageItem& item, int64_t ow, int64_t block_floats) {
  const int64_t out_plane = g.oh * g.ow, channel = g.band_in_rows * g.panel_row_floats();
  const int64_t in_channels = item.merge * g.icg, out_channels = item.merge * g.ocg;
  image_to_panel<V>(g, item.x, in_channels, item.planar, item.panel);
  if (item.add) image_to_planes<V>(item.y, out_channels, item.planar, g.oh, ow, g.ow, item.out_planes);
  DirectItem it;
  it.x = nullptr, it.act = item.act, it.add = item.add;
  for (int64_t gi = 0; gi < item.merge; ++gi)
    for (int64_t b0 = 0; b0 < g.oc_blocks; b0 += kOcBlocksPerItem) {
      it.blocks = std::min(kOcBlocksPerItem, g.oc_blocks - b0);
      it.channels = std::min(it.blocks * kOcBlock, g.ocg - b0 * kOcBlock);
      it.panel = item.panel + gi * g.icg * channel;
      it.y = item.out_planes + (gi * g.ocg + b0 * kOcBlock) * out_plane;
      it.w = item.w + (gi * g.oc_blocks + b0) * block_floats;
      it.bias = item.bias + (gi * g.oc_blocks + b0) * kOcBlock;
      for (it.row = 0; it.row < g.oh; it.row += g.band) direct_item<V, TV>(g, it, block_floats);
    }
  planes_to_image<V>(item.out_planes, out_channels, item.planar, g.oh, ow, g.ow, item.y);
}

// TV: the tile's vectors per channel (direct_geometry's tile_vectors), as g.band rows.
template <class V, int TV>
GK_INLINE void direct_item(const DirectGeometry& g, const DirectItem& it, int64_t block_floats) {
  switch (g.band) {
    case 1: return direct_band<V, 1, TV>(g, it, block_floats);
    case 2: return direct_band<V, 2, std::max(1, TV / 2)>(g, it, block_floats);
    case 3: return direct_band<V, 3, std::max(1, TV / 3)>(g, it, block_floats);
    default: return direct_band<V, 4, std::max(1, TV / 4)>(g, it, block_floats);
  }
}

using ItemFn = void (*)(const DirectGeometry&, const DirectItem&, int64_t);
using WholeImageFn = void (*)(const DirectGeometry&, const WholeImageItem&, int64_t, int64_t);
void direct_item_baseline(const DirectGeometry& g, const DirectItem& it, int64_t bf) {
  direct_item<v8, 3>(g, it, bf);
}
void direct_whole_image_baseline(const DirectGeometry& g, const WholeImageItem& it, int64_t ow, int64_t bf) {
  direct_whole_image<v8, 3>(g, it, ow, bf);
}
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void direct_item_avx2(const DirectGeometry& g, const DirectItem& it,
                                                          int64_t bf) {
  direct_item<v8, 3>(g, it, bf);
}
__attribute__((target("avx2,fma"))) void direct_whole_image_avx2(const DirectGeometry& g, const WholeImageItem& it,
                                                             int64_t ow, int64_t bf) {
  direct_whole_image<v8, 3>(g, it, ow, bf);
}
__attribute__((target("avx512f,avx2,fma"))) void direct_item_avx512(const DirectGeometry& g, const DirectItem& it,
                                                                   int64_t bf) {
  direct_item<v16, 4>(g, it, bf);
}
__attribute__((target("avx512f,avx2,fma"))) void direct_whole_image_avx512(const DirectGeometry& g,
                                                                      const WholeImageItem& it, int64_t ow,
                                                                      int64_t bf) {
  direct_whole_image<v16, 4>(g, it, ow, bf);
}
#endif

// The kernel a plan runs: 16 lanes (4 vectors a channel) where the AVX-512 kernels run and
// rows are wider than 8 (a 7-wide row fills 7 of 8 lanes, of 16 only 7; a 14-wide one 14
// of 16 either way, in 16 accumulators of 16 lanes rather than 8 of 8), else 8 (3
// vectors: 12 accumulators of AVX2's 16 registers).
struct DirectKernel {
  int64_t lanes, tile_vectors;
  ItemFn fn;
  WholeImageFn whole_image;
};
DirectKernel direct_kernel(const Shape& s) {
#if defined(__x86_64__)
  const SimdLevel simd = active_config().kernel->simd;
  if (simd == SimdLevel::Avx512 && s.ow > 8) return {16, 4, direct_item_avx512, direct_whole_image_avx512};
  if (simd != SimdLevel::Baseline) return {8, 3, direct_item_avx2, direct_whole_image_avx2};
#else
  (void)s;
#endif
  return {8, 3, direct_item_baseline, direct_whole_image_baseline};
}

// The geometry of a panel holding every row of the padded image (whole-image mode): each band
// reads it from its first row on, nothing is copied per band. Its last band's tiles may
// compute rows past the last (not stored): their taps' rows are there, zero.
DirectGeometry whole_image_geometry(const Shape& s, int64_t lanes, int64_t tile_vectors) {
  DirectGeometry g = direct_geometry(s, lanes, tile_vectors);
  const int64_t bands = (g.oh + g.band - 1) / g.band;
  g.band_in_rows = std::max(g.pad_top + g.ih, (bands * g.band - 1) * g.sh + (g.kh - 1) * g.dh + 1);
  g.chunk = s.icg;
  // Output rows of whole vectors (the planes' pitch): no tile stores a partial vector.
  g.ow = (g.ow + lanes - 1) / lanes * lanes;
  return g;
}

// Whole-image mode (stride 1 across; NCHW8 in and out, run without copies, or NCHW): an
// item is a super-group, the fewest consecutive groups whose input and output channels are
// whole blocks (NCHW: one group), when there are at least kWholeImageMinItems of them in a
// batch (the threads' items) and a thread's panel and output planes fit
// kWholeImageMaxFloats (kept in L2); 0 where not.
constexpr int64_t kWholeImageMaxMerge = 8, kWholeImageMinItems = 16, kWholeImageMaxFloats = int64_t{1} << 17;
int64_t whole_image_merge(const Shape& s, const DirectGeometry& whole) {
  const gk_conv_desc& d = s.d;
  const bool nchw8 = d.layout == GK_LAYOUT_NCHW8 && s.in_layout == GK_LAYOUT_NCHW8;
  if ((!nchw8 && d.layout != GK_LAYOUT_NCHW) || d.stride_w != 1) return 0;
  for (int64_t k = 1; k <= kWholeImageMaxMerge; ++k) {
    if (d.groups % k || (nchw8 && ((k * s.icg) % 8 || (k * s.ocg) % 8))) continue;
    const double floats = double(k) * (double(s.icg) * whole.band_in_rows * whole.panel_row_floats() +
                                       double(s.ocg) * whole.oh * whole.ow);
    return floats <= kWholeImageMaxFloats && d.batch * (d.groups / k) >= kWholeImageMinItems ? k : 0;
  }
  return 0;
}

class DirectConv final : public Prepared {
 public:
  DirectConv(const Shape& s, const float* weights, const float* bias)
      : s_(s), kernel_(direct_kernel(s)), g_(direct_geometry(s, kernel_.lanes, kernel_.tile_vectors)),
        p_(pack_direct_weights(s, g_, weights, bias)),
        whole_(whole_image_geometry(s, kernel_.lanes, kernel_.tile_vectors)), merge_(whole_image_merge(s, whole_)) {}

  bool native_layout(gk_layout layout) const override {
    return layout == (merge_ ? s_.d.layout : GK_LAYOUT_NCHW);
  }
  WorkspaceNeed need() const override {
    return {0, merge_ ? out_planes_at() + merge_ * s_.ocg * whole_.oh * whole_.ow : g_.panel_floats()};
  }

  void run(const float* input, float* output, const Workspace& ws) const override {
    if (merge_) return run_whole_images(input, output, ws);
    const gk_conv_desc& d = s_.d;
    const int64_t per_item = kOcBlocksPerItem;
    const int64_t block_groups = (g_.oc_blocks + per_item - 1) / per_item;  // items per group and row
    const int64_t bands = (g_.oh + g_.band - 1) / g_.band;
    const int64_t items = d.batch * g_.groups * block_groups * bands;
    const int64_t in_plane = g_.ih * g_.iw, out_plane = g_.oh * g_.ow;
    const int threads = ws.cap(threads_for(s_.flops()));
    parallel_region(threads, [&] {
      DirectItem it;
      it.panel = ws.block(omp_get_thread_num());
      it.act = d.activation, it.add = s_.adds_to_output();
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item) {
        it.row = item % bands * g_.band;
        const int64_t bg = item / bands % block_groups, gr = item / (bands * block_groups) % g_.groups;
        const int64_t n = item / (bands * block_groups * g_.groups);
        const int64_t b0 = bg * per_item;
        it.blocks = std::min(per_item, g_.oc_blocks - b0);
        it.channels = std::min(it.blocks * kOcBlock, s_.ocg - b0 * kOcBlock);
        it.x = input + (n * d.in_channels + gr * s_.icg) * in_plane;
        it.y = output + (n * d.out_channels + gr * s_.ocg + b0 * kOcBlock) * out_plane;
        it.w = p_.w.data() + (gr * g_.oc_blocks + b0) * p_.block_floats;
        it.bias = p_.bias.data() + (gr * g_.oc_blocks + b0) * kOcBlock;
        kernel_.fn(g_, it, p_.block_floats);
      }
    });
  }

 private:
  // A whole-image thread's workspace: the panel, then the output planes.
  int64_t out_planes_at() const {
    return round_up(merge_ * s_.icg * whole_.band_in_rows * whole_.panel_row_floats(), 16);
  }

  // Items: (image, super-group), split between threads.
  void run_whole_images(const float* input, float* output, const Workspace& ws) const {
    const gk_conv_desc& d = s_.d;
    const int64_t supers = g_.groups / merge_, items = d.batch * supers;
    const int64_t in_image = d.in_channels * d.in_height * d.in_width, out_image = d.out_channels * s_.pixels();
    const int threads = ws.cap(threads_for(s_.flops()));
    parallel_region(threads, [&] {
      float* work = ws.block(omp_get_thread_num());
      WholeImageItem item;
      item.merge = merge_, item.planar = d.layout == GK_LAYOUT_NCHW;
      item.panel = work, item.out_planes = work + out_planes_at();
      item.act = d.activation, item.add = s_.adds_to_output();
#pragma omp for schedule(static)
      for (int64_t i = 0; i < items; ++i) {
        const int64_t n = i / supers, j = i % supers;
        item.x = input + n * in_image + j * merge_ * s_.icg * d.in_height * d.in_width;
        item.y = output + n * out_image + j * merge_ * s_.ocg * s_.pixels();
        item.w = p_.w.data() + j * merge_ * g_.oc_blocks * p_.block_floats;
        item.bias = p_.bias.data() + j * merge_ * g_.oc_blocks * kOcBlock;
        kernel_.whole_image(whole_, item, s_.ow, p_.block_floats);
      }
    });
  }

  Shape s_;
  DirectKernel kernel_;
  DirectGeometry g_;
  DirectWeights p_;
  DirectGeometry whole_;  // whole-image mode's panel (whole_image_geometry)
  int64_t merge_;  // whole-image mode's groups per item (whole_image_merge), 0 when not in it
};

// Whether a panel holds at least one input channel's rows for a band within 64 MiB (not so
// for a padded row of millions of columns, or a stride of as many).
bool panels_fit(const Shape& s) {
  const DirectKernel k = direct_kernel(s);
  int64_t floats = 0;
  return panel_channel_floats(direct_extents(s, k.lanes, k.tile_vectors), &floats) && floats <= kMaxPanelChannelFloats;
}

class Direct final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_DIRECT; }
  const char* name() const override { return "direct"; }
  std::string unusable_reason(const Shape& s) const override {
    return panels_fit(s) ? "" : "one input channel's rows take more than 64 MiB";
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return std::unique_ptr<Prepared>(new DirectConv(s, w, b));
  }
};

}  // namespace

bool direct_takes_whole_images(const Shape& s, bool wide) {
  const DirectKernel k = direct_kernel(s);
  return panels_fit(s) && (!wide || k.lanes == 16) &&
         whole_image_merge(s, whole_image_geometry(s, k.lanes, k.tile_vectors)) > 0;
}

const Algorithm* direct_algorithm() {
  static const Direct a;
  return &a;
}

}  // namespace conv
}  // namespace gk
