// Channel concat, split and shuffle: copies between tensors of one layout whose channels
// map to each other.
//
// NCHW and NHWC copy runs: whole channel planes (NCHW: one contiguous run per part and
// image), or runs of consecutive channels pixel by pixel (NHWC).
//
// NCHWx (x = 4, 8, 16) goes by lane maps, whatever the channel counts. For an output block,
// the source (block, lane) of each of its lanes is worked out, the lanes grouped by the
// source vector they lie in, and then per pixel each source vector is loaded, permuted
// into place, masked and OR-ed in: one whole vector store per output vector, padding
// lanes zero. A concat or split at a channel count that is not a multiple of x is a shift
// (lanes from 2 source blocks), a 2-group shuffle takes its lanes from 2 to 4; copied
// lane by lane, ShuffleNetV2's (halves of 58 and 116 channels) ran at a fifth to a tenth
// of memcpy's rate, now at about 1.3x its time. A block that is a whole source block
// (aligned parts) is a contiguous copy. Maps repeat from block to block (a shift's blocks
// all alike, a shuffle's every `groups` blocks), so each work item builds a few and moves
// the rest along.
#include <omp.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "ops/ops.h"

namespace gk {
namespace ops {
namespace {

// ---------------------------------------------------------------- NCHW and NHWC: runs

// Channels [src_c0, src_c0 + count) of `src` to [dst_c0, dst_c0 + count) of `dst`, a tensor
// of the same layout, n, h and w.
struct ChannelCopy {
  const Blocked* src;
  const float* x;
  int64_t src_c0;
  const Blocked* dst;
  float* y;
  int64_t dst_c0, count;
};

// How a copy runs: dst blocks [full0, full1) take whole source blocks, one contiguous run
// per image (every NCHW copy; an NHWC part that is the whole tensor); the others, [first,
// full0) and [full1, last], row by row, lane run by lane run.
struct CopyPlan {
  int64_t first, last, full0, full1, src_full0;
  int64_t partial_blocks() const { return (full0 - first) + (last + 1 - full1); }
  int64_t partial_block(int64_t k) const { return k < full0 - first ? first + k : full1 + k - (full0 - first); }
};
CopyPlan plan_copy(const ChannelCopy& cc) {
  const int64_t lanes = cc.dst->lanes;
  CopyPlan p;
  p.first = cc.dst_c0 / lanes;
  p.last = (cc.dst_c0 + cc.count - 1) / lanes;
  p.full0 = p.full1 = p.first;
  if (cc.src->lanes == lanes && (cc.src_c0 - cc.dst_c0) % lanes == 0) {
    p.full0 = (cc.dst_c0 + lanes - 1) / lanes;
    p.full1 = std::max(p.full0, (cc.dst_c0 + cc.count) / lanes);
  }
  p.src_full0 = p.full0 + (cc.src_c0 - cc.dst_c0) / lanes;
  return p;
}

// `pixels` pixels of `len` consecutive lanes: from pixels src_lanes floats apart to pixels
// dst_lanes apart.
GK_INLINE void copy_lane_run(float* __restrict dst, int64_t dst_lanes, const float* __restrict src,
                             int64_t src_lanes, int64_t len, int64_t pixels) {
  if (len == 1) {
    for (int64_t p = 0; p < pixels; ++p) dst[p * dst_lanes] = src[p * src_lanes];
    return;
  }
  for (int64_t p = 0; p < pixels; ++p) conv::copy_run(dst + p * dst_lanes, src + p * src_lanes, len);
}

// Row i of dst block db of image img, a block only partly this copy's or not aligned with
// the source's blocks: runs of channels that lie within one source block.
void copy_partial_row(const ChannelCopy& cc, int64_t img, int64_t db, int64_t i) {
  const Blocked &s = *cc.src, &d = *cc.dst;
  float* y_row = cc.y + d.row_offset(img, db, i);
  int64_t c = std::max(cc.dst_c0, db * d.lanes);  // dst channels [c, end)
  const int64_t end = std::min(cc.dst_c0 + cc.count, (db + 1) * d.lanes), shift = cc.src_c0 - cc.dst_c0;
  while (c < end) {
    const int64_t sc = c + shift, lane = sc % s.lanes, len = std::min(end - c, s.lanes - lane);
    copy_lane_run(y_row + (c - db * d.lanes), d.lanes, cc.x + s.row_offset(img, sc / s.lanes, i) + lane, s.lanes,
                  len, d.w);
    c += len;
  }
}

// Whole-block runs go in pieces of this many floats, so that one image's run still spreads
// over the threads; lane-mapped blocks too.
constexpr int64_t kPieceFloats = 16384;

// Inside a parallel region: one copy (NCHW, NHWC) shared among the threads, no barrier
// after it (the copies of a concat or split write disjoint floats).
void copy_channels(const ChannelCopy& cc) {
  const Blocked &s = *cc.src, &d = *cc.dst;
  const CopyPlan p = plan_copy(cc);
  const int64_t run = (p.full1 - p.full0) * d.block_floats(), pieces = (run + kPieceFloats - 1) / kPieceFloats;
#pragma omp for schedule(static) nowait
  for (int64_t u = 0; u < d.n * pieces; ++u) {
    const int64_t img = u / pieces, at = u % pieces * kPieceFloats;
    conv::copy_run(cc.y + d.row_offset(img, p.full0, 0) + at, cc.x + s.row_offset(img, p.src_full0, 0) + at,
                   std::min(kPieceFloats, run - at));
  }
  const int64_t blocks = p.partial_blocks(), rows = d.n * blocks * d.h;
#pragma omp for schedule(static) nowait
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ib = r / d.h;
    copy_partial_row(cc, ib / blocks, p.partial_block(ib % blocks), r % d.h);
  }
}

// ---------------------------------------------------------------- NCHWx: lane maps

constexpr int kMaxLanes = 16;

// Where one lane of an output block comes from: lane `lane` of the source block whose pixel
// 0 is at `block` (source and output have the same lanes per pixel). block == nullptr: a
// padding lane, zero.
struct LaneSource {
  const float* block;
  int64_t lane;
};

// W consecutive lanes of an output block (one vector) from its source vectors: output
// lane l takes lane index[j][l] of src[j] where mask[j][l] is all ones; lanes no source
// takes are zero.
template <int W>
struct VectorMap {
  int sources;
  const float* src[W];  // at pixel 0
  int32_t index[W][W];
  int32_t mask[W][W];
};

template <int W>
void vector_map(const LaneSource* lanes, VectorMap<W>* m) {
  m->sources = 0;
  for (int l = 0; l < W; ++l) {
    if (!lanes[l].block) continue;
    const float* v = lanes[l].block + lanes[l].lane / W * W;
    int j = 0;
    while (j < m->sources && m->src[j] != v) ++j;
    if (j == m->sources) {
      m->src[m->sources++] = v;
      std::fill(m->index[j], m->index[j] + W, 0);
      std::fill(m->mask[j], m->mask[j] + W, 0);
    }
    m->index[j][l] = int32_t(lanes[l].lane % W);
    m->mask[j][l] = -1;
  }
}

// The vectors a gather runs on, and their permutes. Per pixel each source vector is
// permuted (one index register) and masked into place; with two-source permutes (AVX-512's
// vpermi2ps, NEON's two-register tbl) sources go in pairs, one permute per pair. The
// permutes bound the loop (on Intel they all issue on one port): a shift (concat, split)
// takes 2 sources, a 2-group shuffle 2 to 3.
//   Lanes8: 8 floats, dword indices (vpermps; vpermi2ps with AVX-512VL). SSE2 has no
//           variable shuffle: AVX2 and up only.
//   Lanes4: 4 floats, byte indices (tbl on NEON, vpshufb on AVX). SSE2 has none either
//           (GCC goes byte by byte, 7x slower than lane by lane): baseline x86 code, and
//           other targets, gather lane by lane (gather_lanes).
typedef unsigned char v16u __attribute__((vector_size(16)));
struct Lanes8 {
  static constexpr int W = 8;
  using V = v8;
  using Bits = v8i;
  using Index = v8i;
  static GK_INLINE V load(const float* p) { return load8(p); }
  static GK_INLINE void store(float* p, Bits v) { store8(p, (v8)v); }
  static GK_INLINE Bits bits(const int32_t* mask) {
    Bits b;
    std::memcpy(&b, mask, sizeof b);
    return b;
  }
  // Output lane l takes lane i0[l] of the first vector, or i1[l] of the second where
  // m1[l] is set (i1 == nullptr: one vector).
  static GK_INLINE Index index(const int32_t* i0, const int32_t* i1, const int32_t* m1) {
    Index r;
    for (int l = 0; l < W; ++l) r[l] = i1 && m1[l] ? i1[l] + W : i0[l];
    return r;
  }
  static GK_INLINE Bits permute(V a, Index i) { return (Bits)__builtin_shuffle(a, i); }
  static GK_INLINE Bits permute(V a, V b, Index i) { return (Bits)__builtin_shuffle(a, b, i); }
};
struct Lanes4 {
  static constexpr int W = 4;
  using V = v4;
  using Bits = v4i;
  using Index = v16u;
  static GK_INLINE V load(const float* p) { return load4(p); }
  static GK_INLINE void store(float* p, Bits v) { store4(p, (v4)v); }
  static GK_INLINE Bits bits(const int32_t* mask) {
    Bits b;
    std::memcpy(&b, mask, sizeof b);
    return b;
  }
  static GK_INLINE Index index(const int32_t* i0, const int32_t* i1, const int32_t* m1) {
    Index r;
    for (int k = 0; k < 16; ++k) r[k] = (unsigned char)(4 * (i1 && m1[k / 4] ? i1[k / 4] + W : i0[k / 4]) + k % 4);
    return r;
  }
  static GK_INLINE Bits permute(V a, Index i) { return (Bits)__builtin_shuffle((v16u)a, i); }
  static GK_INLINE Bits permute(V a, V b, Index i) { return (Bits)__builtin_shuffle((v16u)a, (v16u)b, i); }
};

// Pixels [p0, p1) of one output vector (`stride` floats from pixel to pixel, in the output
// and in every source) from its K sources, every source `delta` floats past the map's.
template <int W>
using GatherFn = void (*)(const VectorMap<W>& m, int64_t delta, float* y, int64_t stride, int64_t p0, int64_t p1);

// K (and so the permutes a pixel, N) is a template argument and the loops over them are
// unrolled, so that the indices and masks stay in registers (GCC left 3 sources rolled,
// reloading them from the stack every pixel: 3x slower). A pair's lone last source is
// permuted with itself.
template <typename T, bool kPairs, int K>
GK_INLINE void gather_body(const VectorMap<T::W>& m, int64_t delta, float* y, int64_t stride, int64_t p0,
                           int64_t p1) {
  constexpr int N = kPairs ? (K + 1) / 2 : K, R = N > 0 ? N : 1;
  typename T::Index index[R];
  typename T::Bits mask[R];
  const float* src[R][2];  // copies: the stores to y might alias m, as far as GCC knows
#pragma GCC unroll 16
  for (int n = 0; n < N; ++n) {
    const int j = kPairs ? 2 * n : n, k = kPairs && j + 1 < K ? j + 1 : j;
    src[n][0] = m.src[j] + delta, src[n][1] = m.src[k] + delta;
    index[n] = T::index(m.index[j], k != j ? m.index[k] : nullptr, m.mask[k]);
    mask[n] = T::bits(m.mask[j]) | T::bits(m.mask[k]);
  }
  for (int64_t p = p0; p < p1; ++p) {
    typename T::Bits acc = {};
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) {
      const typename T::V a = T::load(src[n][0] + p * stride);
      acc |= (kPairs ? T::permute(a, T::load(src[n][1] + p * stride), index[n]) : T::permute(a, index[n])) & mask[n];
    }
    T::store(y + p * stride, acc);
  }
}

// One function per source count and ISA (the body takes the caller's target).
#define GK_GATHER_VARIANT(name, attr, T, pairs)                                                             \
  template <int K>                                                                                          \
  attr void name(const VectorMap<T::W>& m, int64_t delta, float* y, int64_t stride, int64_t p0, int64_t p1) { \
    gather_body<T, pairs, K>(m, delta, y, stride, p0, p1);                                                  \
  }
#if defined(__aarch64__)
GK_GATHER_VARIANT(gather4_neon, , Lanes4, true)
#else
// Without a variable shuffle: each output lane loaded on its own, from a pointer worked
// out once per call (any source count).
void gather_lanes(const VectorMap<4>& m, int64_t delta, float* y, int64_t stride, int64_t p0, int64_t p1) {
  const float* from[4] = {};  // nullptr: a zero lane
  for (int j = 0; j < m.sources; ++j)
    for (int l = 0; l < 4; ++l)
      if (m.mask[j][l]) from[l] = m.src[j] + delta + m.index[j][l];
  for (int64_t p = p0; p < p1; ++p)
    for (int l = 0; l < 4; ++l) y[p * stride + l] = from[l] ? from[l][p * stride] : 0.0f;
}
#endif
#if defined(__x86_64__)
GK_GATHER_VARIANT(gather4_avx2, GK_OPS_AVX2, Lanes4, false)
GK_GATHER_VARIANT(gather8_avx2, GK_OPS_AVX2, Lanes8, false)
GK_GATHER_VARIANT(gather8_avx512, GK_OPS_AVX512VL, Lanes8, true)
#endif

// The gather functions of one ISA, by source count; w8 == nullptr: 4-lane vectors only.
struct GatherKernels {
  const GatherFn<8>* w8;
  const GatherFn<4>* w4;
};
#define GK_GATHER_TABLE4(f) {f<0>, f<1>, f<2>, f<3>, f<4>}
#define GK_GATHER_TABLE8(f) {f<0>, f<1>, f<2>, f<3>, f<4>, f<5>, f<6>, f<7>, f<8>}
#if defined(__aarch64__)
constexpr GatherFn<4> kGather4Baseline[] = GK_GATHER_TABLE4(gather4_neon);
#else
constexpr GatherFn<4> kGather4Baseline[] = {gather_lanes, gather_lanes, gather_lanes, gather_lanes, gather_lanes};
#endif
#if defined(__x86_64__)
constexpr GatherFn<4> kGather4Avx2[] = GK_GATHER_TABLE4(gather4_avx2);
constexpr GatherFn<8> kGather8Avx2[] = GK_GATHER_TABLE8(gather8_avx2);
constexpr GatherFn<8> kGather8Avx512[] = GK_GATHER_TABLE8(gather8_avx512);
#endif

GatherKernels gather_kernels() {
#if defined(__x86_64__)
  if (use_avx512vl()) return {kGather8Avx512, kGather4Avx2};
  if (use_avx2()) return {kGather8Avx2, kGather4Avx2};
#endif
  return {nullptr, kGather4Baseline};
}

// Whether an output block is source block lanes[0].block lane for lane (a plain copy).
bool whole_source_block(const LaneSource* lanes, int64_t n_lanes) {
  for (int64_t l = 0; l < n_lanes; ++l)
    if (!lanes[l].block || lanes[l].block != lanes[0].block || lanes[l].lane != l) return false;
  return true;
}

// How one output block is built: a plain copy of one source block, or vector by vector.
template <int W>
struct BlockMap {
  const float* copy;  // the source block (at pixel 0) when the output block is a copy of it
  VectorMap<W> vectors[kMaxLanes / W];
};

template <int W>
void block_map(const LaneSource* lanes, int64_t n_lanes, BlockMap<W>* m) {
  m->copy = whole_source_block(lanes, n_lanes) ? lanes[0].block : nullptr;
  if (m->copy) return;
  for (int64_t q = 0; q < n_lanes / W; ++q) vector_map<W>(lanes + q * W, &m->vectors[q]);
}

// An op's output blocks [b0, b1) (of each image) and where their lanes come from:
// lanes(img, b, LaneSource[x]) for each, and how they repeat: block b in [b0 + period,
// regular_end) takes the sources of block b - period, each `step` floats further on (one
// source block). So a shift's blocks all share one map, and a shuffle's every `groups`
// blocks: maps are built for a few blocks of each item, not for every block (at 7x7
// pixels, building them took as long as the copy). Blocks from regular_end on (a padded
// last block, one that reaches into the next part) are mapped on their own.
template <typename Lanes>
struct BlockSources {
  int64_t b0, b1, period, regular_end, step;
  Lanes lanes;
};
template <typename Lanes>
BlockSources<Lanes> block_sources(int64_t b0, int64_t b1, int64_t period, int64_t regular_end, int64_t step,
                                  const Lanes& lanes) {
  return {b0, b1, period, regular_end, step, lanes};
}

// Work items: up to this many neighbouring output blocks, pieces of their pixels, chunk by
// chunk of this many floats of each block. Neighbouring output blocks read the same
// source blocks (a shift's block boundary, a shuffle's groups): with a chunk of all of
// them in L1 each source is read once from L2, not once per output block reading it (a
// 2-group shuffle of 116 channels at 28x28 in NCHW8: 1.44x memcpy's time block by block,
// 1.24x in chunks).
constexpr int kItemBlocks = 8;
constexpr int64_t kMinPiecePixels = 64;
constexpr int64_t kChunkFloats = 512;

// The maps of an item's blocks [bs, bs + count): block bs + g is map[g] with every source
// delta[g] floats further on.
template <int W>
struct ItemMaps {
  BlockMap<W> built[kItemBlocks];  // for the blocks mapped on their own
  const BlockMap<W>* map[kItemBlocks];
  int64_t delta[kItemBlocks];
  // The source block that block g copies, nullptr if it is not a plain copy.
  const float* copy_source(int64_t g) const { return map[g]->copy ? map[g]->copy + delta[g] : nullptr; }
};

template <int W, typename Lanes>
void item_maps(const BlockSources<Lanes>& s, int64_t n_lanes, int64_t img, int64_t bs, int64_t be, ItemMaps<W>* m) {
  for (int64_t b = bs; b < be; ++b) {
    const int64_t g = b - bs;
    if (g >= s.period && b < s.regular_end) {
      m->map[g] = m->map[g - s.period], m->delta[g] = m->delta[g - s.period] + s.step;
      continue;
    }
    LaneSource lanes[kMaxLanes];
    s.lanes(img, b, lanes);
    block_map<W>(lanes, n_lanes, &m->built[g]);
    m->map[g] = &m->built[g], m->delta[g] = 0;
  }
}

// The blocks of an item that are plain copies (pixels [p0, p1) of blocks bs.. of image
// img). Over whole planes, neighbours that copy neighbouring source blocks (an aligned
// part) are one run: at 7x7 pixels a block is only 1.5 KiB.
template <int W>
void copy_item_blocks(const ItemMaps<W>& m, const Blocked& d, float* y, int64_t img, int64_t bs, int64_t count,
                      int64_t p0, int64_t p1) {
  const int64_t x = d.lanes, block = d.block_floats();
  const bool whole = p0 == 0 && p1 == d.h * d.w;
  for (int64_t g = 0, e; g < count; g = e) {
    e = g + 1;
    const float* from = m.copy_source(g);
    if (!from) continue;
    while (whole && e < count && m.copy_source(e) == from + (e - g) * block) ++e;
    conv::copy_run(y + d.row_offset(img, bs + g, 0) + p0 * x, from + p0 * x, whole ? (e - g) * block : (p1 - p0) * x);
  }
}

// The other blocks of an item, chunk by chunk.
template <int W>
void gather_item_blocks(const GatherFn<W>* fns, const ItemMaps<W>& m, const Blocked& d, float* y, int64_t img,
                        int64_t bs, int64_t count, int64_t p0, int64_t p1) {
  const int64_t x = d.lanes, chunk = kChunkFloats / x;
  for (int64_t c0 = p0; c0 < p1; c0 += chunk) {
    const int64_t c1 = std::min(p1, c0 + chunk);
    for (int64_t g = 0; g < count; ++g) {
      const BlockMap<W>& bm = *m.map[g];
      if (bm.copy) continue;
      float* yb = y + d.row_offset(img, bs + g, 0);
      for (int64_t q = 0; q < x / W; ++q) fns[bm.vectors[q].sources](bm.vectors[q], m.delta[g], yb + q * W, x, c0, c1);
    }
  }
}

// Pixels [p0, p1) of output blocks [bs, be) of image img (y: the output tensor).
template <int W, typename Lanes>
void gather_item(const GatherFn<W>* fns, const Blocked& d, float* y, const BlockSources<Lanes>& s, int64_t img,
                 int64_t bs, int64_t be, int64_t p0, int64_t p1) {
  ItemMaps<W> m;
  item_maps<W>(s, d.lanes, img, bs, be, &m);
  copy_item_blocks<W>(m, d, y, img, bs, be - bs, p0, p1);
  gather_item_blocks<W>(fns, m, d, y, img, bs, be - bs, p0, p1);
}

// Inside a parallel region: the blocks of `s` in every image of `d` (at y), shared among
// the threads as items, no barrier after them.
template <typename Lanes>
void gather_blocks(const Blocked& d, float* y, const BlockSources<Lanes>& s) {
  const GatherKernels k = gather_kernels();
  const int64_t plane = d.h * d.w;
  // At least a piece per thread where each keeps kMinPiecePixels: else a plane of up to
  // kPieceFloats with at most kItemBlocks blocks is one item, which the first thread takes.
  const int64_t pieces = std::max((plane * d.lanes + kPieceFloats - 1) / kPieceFloats,
                                  std::min<int64_t>(omp_get_num_threads(), plane / kMinPiecePixels));
  const int64_t piece = (plane + pieces - 1) / pieces, groups = (s.b1 - s.b0 + kItemBlocks - 1) / kItemBlocks;
#pragma omp for schedule(static) nowait
  for (int64_t u = 0; u < d.n * groups * pieces; ++u) {
    const int64_t ig = u / pieces, img = ig / groups, bs = s.b0 + ig % groups * kItemBlocks;
    const int64_t be = std::min(s.b1, bs + kItemBlocks), p0 = u % pieces * piece, p1 = std::min(plane, p0 + piece);
    if (k.w8 && d.lanes >= 8) {
      gather_item<8>(k.w8, d, y, s, img, bs, be, p0, p1);
    } else {
      gather_item<4>(k.w4, d, y, s, img, bs, be, p0, p1);
    }
  }
}

// The lane source of channel ch of t (image img at x), t in NCHWx: its lanes a power of 2.
GK_INLINE LaneSource channel_source(const Blocked& t, const float* x, int64_t img, int64_t ch) {
  const int bits = __builtin_ctzll(uint64_t(t.lanes));  // not a division: these run per lane
  return {x + t.row_offset(img, ch >> bits, 0), ch & (t.lanes - 1)};
}

// Whether a layout is NCHWx (lane maps) rather than NCHW or NHWC (runs).
bool lane_mapped(gk_layout layout) { return conv::channel_block(layout) > 1; }

// ---------------------------------------------------------------- concat

struct ConcatArgs {
  int count;
  const gk_tensor_desc* parts;
  const float* const* xs;
  const Blocked* out;
  float* y;
};

// Lane sources of output block b of image img, whose first channel lies in part i (the
// part's channels starting at c0); the block's later lanes may come from later parts.
void concat_lanes(const ConcatArgs& a, int i, int64_t c0, int64_t img, int64_t b, LaneSource* lanes) {
  const int64_t x = a.out->lanes;
  Blocked part = blocked(a.parts[i]);
  for (int64_t l = 0, ch = b * x; l < x; ++l, ++ch) {
    if (i < a.count && ch >= c0 + a.parts[i].c) {
      c0 += a.parts[i++].c;
      while (i < a.count && ch >= c0 + a.parts[i].c) c0 += a.parts[i++].c;
      if (i < a.count) part = blocked(a.parts[i]);
    }
    lanes[l] = i < a.count ? channel_source(part, a.xs[i], img, ch - c0) : LaneSource{nullptr, 0};
  }
}

// Inside a parallel region, NCHWx: each output block is built by the part its first
// channel lies in (so written by one thread as whole vectors), padding lanes included.
// The blocks that lie inside the part are its blocks shifted alike.
void concat_lane_mapped(const ConcatArgs& a) {
  const int64_t x = a.out->lanes;
  int64_t c0 = 0;
  for (int i = 0; i < a.count; ++i) {
    const int64_t c1 = c0 + a.parts[i].c;
    const auto lanes = [&](int64_t img, int64_t b, LaneSource* out) { concat_lanes(a, i, c0, img, b, out); };
    gather_blocks(*a.out, a.y,
                  block_sources((c0 + x - 1) / x, (c1 + x - 1) / x, 1, c1 / x, blocked(a.parts[i]).block_floats(),
                                lanes));
    c0 = c1;
  }
}

// Inside a parallel region, NCHW and NHWC: part by part.
void concat_runs(const ConcatArgs& a) {
  int64_t c0 = 0;
  for (int i = 0; i < a.count; ++i) {
    const Blocked bp = blocked(a.parts[i]);
    copy_channels(ChannelCopy{&bp, a.xs[i], 0, a.out, a.y, c0, a.parts[i].c});
    c0 += a.parts[i].c;
  }
}

// ---------------------------------------------------------------- split

// Inside a parallel region: output `part` (at y) takes channels [c0, c0 + part.c) of x.
void split_part(const Blocked& in, const float* x, int64_t c0, const Blocked& part, float* y, bool mapped) {
  if (!mapped) return copy_channels(ChannelCopy{&in, x, c0, &part, y, 0, part.c});
  const auto lanes = [&](int64_t img, int64_t b, LaneSource* out) {
    for (int64_t l = 0, pc = b * part.lanes; l < part.lanes; ++l, ++pc)
      out[l] = pc < part.c ? channel_source(in, x, img, c0 + pc) : LaneSource{nullptr, 0};
  };
  gather_blocks(part, y, block_sources(0, part.blocks, 1, part.c / part.lanes, in.block_floats(), lanes));
}

// ---------------------------------------------------------------- argument checks

// "parts[12]" and the like, for messages.
struct Name {
  char s[32];
  Name(const char* base, int i) { std::snprintf(s, sizeof s, "%s[%d]", base, i); }
};

bool check_concat(const char* fn, int count, const gk_tensor_desc* parts, const float* const* xs,
                  const gk_tensor_desc* out, const float* y) {
  if (!check_tensor(fn, "out", out) || !check_pointer(fn, "parts", parts) || !check_pointer(fn, "xs", xs) ||
      !check_pointer(fn, "y", y))
    return false;
  if (count < 1) {
    set_last_error("%s: count %d must be >= 1", fn, count);
    return false;
  }
  const int64_t y_floats = blocked(*out).floats();
  int64_t channels = 0;
  for (int i = 0; i < count; ++i) {
    const gk_tensor_desc& p = parts[i];
    if (!check_tensor(fn, Name("parts", i).s, &p) || !check_pointer(fn, Name("xs", i).s, xs[i])) return false;
    if (p.n != out->n || p.h != out->h || p.w != out->w || p.layout != out->layout) {
      set_last_error("%s: parts[%d] is %" PRId64 " x . x %" PRId64 " x %" PRId64 " in layout %d, out %" PRId64
                     " x . x %" PRId64 " x %" PRId64 " in layout %d (n, h, w and layout must match)",
                     fn, i, p.n, p.h, p.w, int(p.layout), out->n, out->h, out->w, int(out->layout));
      return false;
    }
    channels += p.c;  // each c <= 2^60 and the sum stops at out->c: no overflow
    if (channels > out->c) break;
    if (!check_disjoint(fn, "y", y, y_floats, Name("xs", i).s, xs[i], blocked(p).floats())) return false;
  }
  if (channels != out->c) {
    set_last_error("%s: the parts' channels sum to %s%" PRId64 ", out->c is %" PRId64, fn,
                   channels > out->c ? "more than " : "", channels, out->c);
    return false;
  }
  return true;
}

// A split's counts and outputs: `channels` each >= 1 and together in->c; ys[i] (null: a
// part not wanted) overlapping neither another output nor an input
// (inputs_disjoint(name, ys[i], floats) says, and sets the error if not).
template <typename InputsDisjoint>
bool check_split_parts(const char* fn, const char* in_name, const gk_tensor_desc* in, int count,
                       const int64_t* channels, float* const* ys, const InputsDisjoint& inputs_disjoint) {
  if (!check_pointer(fn, "channels", channels) || !check_pointer(fn, "ys", ys)) return false;
  if (count < 1) {
    set_last_error("%s: count %d must be >= 1", fn, count);
    return false;
  }
  int64_t sum = 0;
  for (int i = 0; i < count; ++i) {
    if (channels[i] < 1 || channels[i] > in->c - sum) {
      set_last_error("%s: channels[%d] = %" PRId64 " (each >= 1, together %s->c = %" PRId64 ")", fn, i, channels[i],
                     in_name, in->c);
      return false;
    }
    sum += channels[i];
    if (!ys[i]) continue;  // a part not wanted
    const gk_tensor_desc part = {in->n, channels[i], in->h, in->w, in->layout};
    const int64_t floats = blocked(part).floats();
    if (!inputs_disjoint(Name("ys", i).s, ys[i], floats)) return false;
    for (int j = 0; j < i; ++j) {  // outputs must not share memory either
      if (!ys[j]) continue;
      const gk_tensor_desc other = {in->n, channels[j], in->h, in->w, in->layout};
      if (overlaps(ys[i], floats, ys[j], blocked(other).floats())) {
        set_last_error("%s: ys[%d] overlaps ys[%d]", fn, i, j);
        return false;
      }
    }
  }
  if (sum != in->c) {
    set_last_error("%s: channels sum to %" PRId64 ", %s->c is %" PRId64, fn, sum, in_name, in->c);
    return false;
  }
  return true;
}

bool check_split(const char* fn, const gk_tensor_desc* in, const float* x, int count, const int64_t* channels,
                 float* const* ys) {
  if (!check_tensor(fn, "in", in) || !check_pointer(fn, "x", x)) return false;
  const int64_t x_floats = blocked(*in).floats();
  return check_split_parts(fn, "in", in, count, channels, ys, [&](const char* name, const float* y, int64_t floats) {
    return check_disjoint(fn, name, y, floats, "x", x, x_floats);
  });
}

// ---------------------------------------------------------------- shuffle

// A shuffle's source: group g's channel q is channel q of part g (a fused concat: the
// first c / groups channels of each part), or channel g * c / groups + q of one tensor.
struct ShuffleSource {
  int64_t per_group;
  const gk_tensor_desc* parts;  // nullptr: one tensor, `whole` at x
  const float* const* xs;
  const Blocked* whole;
  const float* x;
  // Group g of image img's tensor and the channel its channel 0 is there.
  struct Group {
    Blocked t;
    const float* x;
    int64_t c0;
  };
  GK_INLINE Group group(int64_t g) const {
    if (!parts) return {*whole, x, g * per_group};
    return {blocked(parts[g]), xs[g], 0};
  }
};

// The shuffles below write channels [c_first, c_first + out.c) of the shuffled tensor
// into `out` (a split's part of it; all of it when c_first is 0 and out.c every channel).

// Inside a parallel region: a shuffle in NCHW, whole planes.
void shuffle_planes(const Blocked& out, int64_t groups, const ShuffleSource& src, int64_t c_first, float* y) {
  const int64_t planes = out.n * out.c, plane = out.h * out.w;
#pragma omp for schedule(static) nowait
  for (int64_t k = 0; k < planes; ++k) {
    const int64_t img = k / out.c, shuffled = c_first + k % out.c, g = shuffled % groups, q = shuffled / groups;
    const ShuffleSource::Group from = src.group(g);
    conv::copy_run(y + k * plane, from.x + (img * from.t.c + from.c0 + q) * plane, plane);
  }
}

// dst[2j] = a[j], dst[2j + 1] = b[j] for j < n: 4 pairs per two 4-lane stores (SSE's
// unpcklps / unpckhps; the 8-lane shuffle is not one instruction without AVX).
GK_INLINE void interleave_pairs(float* dst, const float* a, const float* b, int64_t n) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const v4 va = load4(a + j), vb = load4(b + j);
    store4(dst + 2 * j, __builtin_shuffle(va, vb, v4i{0, 4, 1, 5}));
    store4(dst + 2 * j + 4, __builtin_shuffle(va, vb, v4i{2, 6, 3, 7}));
  }
  for (; j < n; ++j) dst[2 * j] = a[j], dst[2 * j + 1] = b[j];
}

// Inside a parallel region: a 2-group shuffle in NHWC (ShuffleNet's), each pixel's two
// halves interleaved by vectors (element by element it took 3x NCHW8's time). Shuffled
// channel s is channel s / 2 of group s % 2: an odd c_first starts on group 1.
void shuffle_pixels_in_pairs(const Blocked& out, const ShuffleSource& src, int64_t c_first, float* y) {
  const ShuffleSource::Group g0 = src.group(0), g1 = src.group(1);
  const int64_t pixels = out.n * out.h * out.w, odd = c_first % 2, q = (c_first + 1) / 2, pairs = (out.c - odd) / 2;
#pragma omp for schedule(static) nowait
  for (int64_t p = 0; p < pixels; ++p) {
    float* row = y + p * out.c;
    const float* a = g0.x + p * g0.t.c + g0.c0 + q;
    const float* b = g1.x + p * g1.t.c + g1.c0 + q;
    if (odd) *row++ = b[-1];
    interleave_pairs(row, a, b, pairs);
    if ((out.c - odd) % 2) row[2 * pairs] = a[pairs];
  }
}

// Inside a parallel region: a shuffle in NHWC, each pixel's groups x per_group transposed.
void shuffle_pixels(const Blocked& out, int64_t groups, const ShuffleSource& src, int64_t c_first, float* y) {
  if (groups == 2) return shuffle_pixels_in_pairs(out, src, c_first, y);
  const int64_t pixels = out.n * out.h * out.w;
#pragma omp for schedule(static) nowait
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t g = 0; g < groups; ++g) {
      // Group g's channels are every groups-th of out's, from the first shuffled to it.
      const int64_t c0 = (g - c_first % groups + groups) % groups;
      if (c0 >= out.c) continue;
      const ShuffleSource::Group from = src.group(g);
      const float* x = from.x + p * from.t.c + from.c0 + (c_first + c0) / groups;
      for (int64_t c = c0, q = 0; c < out.c; c += groups, ++q) y[p * out.c + c] = x[q];
    }
}

// Inside a parallel region: a shuffle in NCHWx, by lane maps. Output block b + groups
// reads the channels block b reads plus x: its sources one block further on (every group's
// tensor has blocks of out's size).
void shuffle_lane_mapped(const Blocked& out, int64_t groups, const ShuffleSource& src, int64_t c_first, float* y) {
  const auto lanes = [&](int64_t img, int64_t b, LaneSource* lane) {
    // Output channel k reads channel q of group g, for the shuffled channel c_first + k =
    // g + q * groups: g and q stepped along the lanes rather than divided out per lane.
    int64_t k = b * out.lanes, g = (c_first + k) % groups, q = (c_first + k) / groups;
    for (int64_t l = 0; l < out.lanes; ++l, ++k) {
      if (k < out.c) {
        const ShuffleSource::Group from = src.group(g);
        lane[l] = channel_source(from.t, from.x, img, from.c0 + q);
      } else {
        lane[l] = LaneSource{nullptr, 0};
      }
      if (++g == groups) g = 0, ++q;
    }
  };
  gather_blocks(out, y, block_sources(0, out.blocks, groups, out.c / out.lanes, out.block_floats(), lanes));
}

// Inside a parallel region: the shuffle of `src` into out (at y), in out's layout; no
// barrier after it (a split's parts write disjoint tensors).
void shuffle(const Blocked& out, int64_t groups, const ShuffleSource& src, int64_t c_first, float* y,
             gk_layout layout) {
  if (lane_mapped(layout)) return shuffle_lane_mapped(out, groups, src, c_first, y);
  if (layout == GK_LAYOUT_NCHW) return shuffle_planes(out, groups, src, c_first, y);  // (NHWC of 1 channel has 1 lane too)
  shuffle_pixels(out, groups, src, c_first, y);
}

// A fused concat + shuffle's parts against its output's shape `out`.
bool check_shuffle_parts(const char* fn, int64_t groups, const gk_tensor_desc* parts, const float* const* xs,
                         const gk_tensor_desc* out) {
  if (!check_tensor(fn, "out", out) || !check_pointer(fn, "parts", parts) || !check_pointer(fn, "xs", xs))
    return false;
  if (groups < 1 || groups > out->c || out->c % groups != 0) {
    set_last_error("%s: groups %" PRId64 " must be >= 1 and divide out->c = %" PRId64, fn, groups, out->c);
    return false;
  }
  const int64_t per_group = out->c / groups;
  for (int64_t g = 0; g < groups; ++g) {
    const gk_tensor_desc& p = parts[g];
    const Name name("parts", int(g));
    if (!check_tensor(fn, name.s, &p) || !check_pointer(fn, Name("xs", int(g)).s, xs[g])) return false;
    if (p.n != out->n || p.h != out->h || p.w != out->w || p.layout != out->layout || p.c < per_group) {
      set_last_error("%s: %s is %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64 " in layout %d, out %" PRId64
                     " x %" PRId64 " x %" PRId64 " x %" PRId64 " in layout %d (n, h, w and layout must match, and "
                     "each part have at least out->c / groups = %" PRId64 " channels)",
                     fn, name.s, p.n, p.c, p.h, p.w, int(p.layout), out->n, out->c, out->h, out->w, int(out->layout),
                     per_group);
      return false;
    }
  }
  return true;
}

// Whether an output y of `floats` floats overlaps none of the parts.
bool parts_disjoint(const char* fn, const char* name, const float* y, int64_t floats, int64_t groups,
                    const gk_tensor_desc* parts, const float* const* xs) {
  for (int64_t g = 0; g < groups; ++g)
    if (!check_disjoint(fn, name, y, floats, Name("xs", int(g)).s, xs[g], blocked(parts[g]).floats())) return false;
  return true;
}

bool check_concat_shuffle(const char* fn, int64_t groups, const gk_tensor_desc* parts, const float* const* xs,
                          const gk_tensor_desc* out, const float* y) {
  return check_shuffle_parts(fn, groups, parts, xs, out) && check_pointer(fn, "y", y) &&
         parts_disjoint(fn, "y", y, blocked(*out).floats(), groups, parts, xs);
}

}  // namespace
}  // namespace ops
}  // namespace gk

using gk::ops::Blocked;

GK_OPS_EXPORT gk_status gk_concat_channels(int count, const gk_tensor_desc* parts, const float* const* xs,
                                           const gk_tensor_desc* out, float* y) {
  const char* fn = "gk_concat_channels";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_concat(fn, count, parts, xs, out, y)) return GK_ERR_INVALID_ARGUMENT;
    const Blocked bo = gk::ops::blocked(*out);
    const gk::ops::ConcatArgs args{count, parts, xs, &bo, y};
    const bool mapped = gk::ops::lane_mapped(out->layout);
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bo.floats())), [&] {
      if (mapped) return gk::ops::concat_lane_mapped(args);
      gk::ops::concat_runs(args);
    });
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_split_channels(const gk_tensor_desc* in, const float* x, int count,
                                          const int64_t* channels, float* const* ys) {
  const char* fn = "gk_split_channels";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_split(fn, in, x, count, channels, ys)) return GK_ERR_INVALID_ARGUMENT;
    const Blocked bi = gk::ops::blocked(*in);
    const bool mapped = gk::ops::lane_mapped(in->layout);
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bi.floats())), [&] {
      int64_t c0 = 0;
      for (int i = 0; i < count; ++i) {
        const Blocked bp = gk::ops::blocked({in->n, channels[i], in->h, in->w, in->layout});
        if (ys[i]) gk::ops::split_part(bi, x, c0, bp, ys[i], mapped);
        c0 += channels[i];
      }
    });
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_channel_shuffle(const gk_tensor_desc* t, int64_t groups, const float* x, float* y) {
  const char* fn = "gk_channel_shuffle";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_tensor(fn, "t", t) || !gk::ops::check_pointer(fn, "x", x) ||
        !gk::ops::check_pointer(fn, "y", y))
      return GK_ERR_INVALID_ARGUMENT;
    if (groups < 1 || t->c % groups != 0) {
      gk::set_last_error("%s: groups %" PRId64 " must be >= 1 and divide t->c = %" PRId64, fn, groups, t->c);
      return GK_ERR_INVALID_ARGUMENT;
    }
    const Blocked bt = gk::ops::blocked(*t);
    if (!gk::ops::check_disjoint(fn, "y", y, bt.floats(), "x", x, bt.floats())) return GK_ERR_INVALID_ARGUMENT;
    const gk::ops::ShuffleSource src{t->c / groups, nullptr, nullptr, &bt, x};
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bt.floats())),
                        [&] { gk::ops::shuffle(bt, groups, src, 0, y, t->layout); });
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_concat_shuffle_channels(int64_t groups, const gk_tensor_desc* parts,
                                                   const float* const* xs, const gk_tensor_desc* out, float* y) {
  const char* fn = "gk_concat_shuffle_channels";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_concat_shuffle(fn, groups, parts, xs, out, y)) return GK_ERR_INVALID_ARGUMENT;
    const Blocked bo = gk::ops::blocked(*out);
    const gk::ops::ShuffleSource src{out->c / groups, parts, xs, nullptr, nullptr};
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bo.floats())),
                        [&] { gk::ops::shuffle(bo, groups, src, 0, y, out->layout); });
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_concat_shuffle_split_channels(int64_t groups, const gk_tensor_desc* parts,
                                                         const float* const* xs, const gk_tensor_desc* out, int count,
                                                         const int64_t* channels, float* const* ys) {
  const char* fn = "gk_concat_shuffle_split_channels";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_shuffle_parts(fn, groups, parts, xs, out) ||
        !gk::ops::check_split_parts(fn, "out", out, count, channels, ys,
                                    [&](const char* name, const float* y, int64_t floats) {
                                      return gk::ops::parts_disjoint(fn, name, y, floats, groups, parts, xs);
                                    }))
      return GK_ERR_INVALID_ARGUMENT;
    const gk::ops::ShuffleSource src{out->c / groups, parts, xs, nullptr, nullptr};
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(gk::ops::blocked(*out).floats())), [&] {
      int64_t c_first = 0;
      for (int i = 0; i < count; ++i) {
        const Blocked part = gk::ops::blocked({out->n, channels[i], out->h, out->w, out->layout});
        if (ys[i]) gk::ops::shuffle(part, groups, src, c_first, ys[i], out->layout);
        c_first += channels[i];
      }
    });
    return GK_OK;
  });
}
