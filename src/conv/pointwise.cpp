// Ungrouped NCHW8 convolution on the ISA's pointwise kernels; see pointwise.h.
//
// Work is cut in two: output channels into panels (one kernel width each), pixels into
// chunks. When the weights fit (weights_fit), panels are grouped so that a group's packed
// weights take at most half of L2, and a chunk's input stays in L1 (read in place) or a
// quarter of L2 (an im2col chunk); a work item is (panel group, pixel chunk), items are
// shared between threads in contiguous ranges, group-major, so a thread keeps one group's
// weights while it walks its chunks. Otherwise the rows are cut into K blocks and run in
// Goto's order (run()).
#include "conv/pointwise.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <omp.h>

#include "common/runtime.h"
#include "common/simd.h"
#include "gemm/partition.h"

// The copies below run only beside pointwise kernels, which exist only in AVX2 kernel
// entries on x86-64: compiled for AVX2 there, a 32-byte copy is one load and one store.
#if defined(__x86_64__)
#define GK_POINTWISE_TARGET __attribute__((target("avx2")))
#else
#define GK_POINTWISE_TARGET
#endif

namespace gk {
namespace conv {
namespace {

int64_t l1_bytes() { return cpu().l1d_bytes >= (16 << 10) ? cpu().l1d_bytes : (32 << 10); }
int64_t l2_bytes() { return cpu().l2_bytes >= (64 << 10) ? cpu().l2_bytes : (256 << 10); }
bool in_place(const Shape& s) {
  const gk_conv_desc& d = s.d;
  return d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 && !d.pad_top && !d.pad_left &&
         !d.pad_bottom && !d.pad_right;
}
// Row k of the packed weights for (tap, input channel c): k = tap * channel_stride + c.
// Up to 7 channels (an RGB stem) pack densely (27 rows for 3x3x3, not 72; the chunk is
// pixel-major then, gather_chunk_dense); more are padded to whole 8-channel blocks, so
// each tap of a pixel copies whole vectors.
int64_t channel_stride(const Shape& s) { return s.d.in_channels < 8 ? s.d.in_channels : round_up(s.d.in_channels, 8); }
int64_t weight_rows(const Shape& s) {
  return in_place(s) ? s.d.in_channels : s.d.kernel_h * s.d.kernel_w * channel_stride(s);
}
constexpr int64_t kMaxPanelWidth = kMaxPointwiseNr;

// Whether the weights are small enough to be read whole by every chunk: in place, each
// panel's must fit half of L2 (they are read from there by every tile); an im2col chunk is
// gathered once per panel group, so there all of them must (one group). Else the rows are
// cut into K blocks (Goto's order, see run()): with a group per panel, 3x3 stride-2 layers
// over 256 channels ran at half the GEMM's speed (ResNet-50 layer3.0.conv2, 6.6 vs 3.4
// ms), gathering each chunk 11 times and streaming a 221 KiB panel from L2 per 4 pixels.
bool weights_fit(const Shape& s) {
  const int64_t columns = in_place(s) ? kMaxPanelWidth : round_up(s.d.out_channels, 8);
  return weight_rows(s) * columns * 4 <= l2_bytes() / 2 || (!in_place(s) && s.d.in_channels < 8);
}

}  // namespace

bool PointwiseNchw8::usable(const KernelInfo& kernel, const Shape& s) {
  // The staging's limits (ukernel.h), and MR dividing 12: chunks are whole tiles of every
  // kernel, so only a layer's last tile is partial (an inner one would read past its chunk).
  for (const KernelInfo::Pointwise& k : kernel.pointwise)
    if (k.fn && (k.mr > kMaxPointwiseMr || 12 % k.mr || k.nr > kMaxPointwiseNr || k.nr % 8)) return false;
  return kernel.pointwise[0].fn && s.d.groups == 1;
}

bool PointwiseNchw8::gathers() const { return !in_place(s_); }

PointwiseNchw8::PointwiseNchw8(const KernelInfo& kernel, const Shape& s, const float* weights, const float* bias)
    : s_(s), has_bias_(bias != nullptr) {
  const gk_conv_desc& d = s.d;
  activation_ = static_cast<int>(make_epilogue(s, nullptr, 0).act);
  in_blocks_ = ceil_div(d.in_channels, 8);
  taps_ = d.kernel_h * d.kernel_w;
  k_rows_ = weight_rows(s);
  channel_stride_ = channel_stride(s);
  // Panels: the widest kernel while it fits, then narrower ones; a last 8 after 24s
  // becomes 16 + 16 (two 12-accumulator tiles rather than a 6-accumulator one).
  const int64_t padded = round_up(d.out_channels, 8);
  auto widest = [&](int64_t left) -> const KernelInfo::Pointwise* {
    for (const KernelInfo::Pointwise& k : kernel.pointwise)
      if (k.fn && k.nr <= left && !(k.nr == 24 && left == 32)) return &k;
    for (const KernelInfo::Pointwise& k : kernel.pointwise)  // an ISA without 16-wide ones
      if (k.fn && k.nr <= left) return &k;
    static_assert(kMaxPointwiseNr % 8 == 0, "panels are whole 8-channel blocks");
    return nullptr;
  };
  for (int64_t oc0 = 0; oc0 < padded;) {
    const KernelInfo::Pointwise* k = widest(padded - oc0);
    if (!k) break;  // the narrowest kernel is 8 wide: unreachable
    panels_.push_back({oc0, static_cast<int64_t>(w_.size()), k->mr, k->nr, k->fn});
    w_.resize(w_.size() + static_cast<size_t>(k_rows_ * k->nr), 0.0f);
    float* w = w_.data() + panels_.back().weights;
    // Row r of the panel: input channel r (in place), or (tap, channel) as channel_stride().
    for (int64_t r = 0; r < k_rows_; ++r) {
      const int64_t c = gathers() ? r % channel_stride_ : r, tap = gathers() ? r / channel_stride_ : 0;
      if (c >= d.in_channels) continue;
      for (int j = 0; j < k->nr && oc0 + j < d.out_channels; ++j)
        w[r * k->nr + j] = weights[((oc0 + j) * d.in_channels + c) * taps_ + tap];
    }
    oc0 += k->nr;
  }
  bias_.assign(static_cast<size_t>(padded), 0.0f);
  if (bias) std::copy(bias, bias + d.out_channels, bias_.begin());

  int64_t group_bytes = 0;
  for (size_t p = 0; p < panels_.size(); ++p) {
    const int64_t bytes = k_rows_ * panels_[p].nr * 4;
    if (group_bytes > 0 && group_bytes + bytes > l2_bytes() / 2) {
      group_end_.push_back(static_cast<int64_t>(p));
      group_bytes = 0;
    }
    group_bytes += bytes;
  }
  group_end_.push_back(static_cast<int64_t>(panels_.size()));
  // A multiple of 12 pixels, so both the 4- and the 6-pixel kernels tile a chunk exactly.
  if (weights_fit(s)) {
    k_block_ = k_rows_;
    const int64_t budget = gathers() ? l2_bytes() / 4 : l1_bytes() / 2;
    chunk_pixels_ = std::clamp<int64_t>(budget / (round_up(k_rows_, 8) * 4) / 12 * 12, 12, 480);
  } else {
    // K blocks whose panel weights (rows x 24 x 4 B) take half of L1, balanced and whole
    // 8-row blocks; a chunk's rows of one K block take half of L2.
    const int64_t max_rows = std::max<int64_t>(8, l1_bytes() / 2 / (kMaxPanelWidth * 4) / 8 * 8);
    k_block_ = round_up(ceil_div(k_rows_, ceil_div(k_rows_, max_rows)), 8);
    chunk_pixels_ = std::clamp<int64_t>(l2_bytes() / 2 / (k_block_ * 4) / 12 * 12, 12, 1020);
  }
}

// The staged partial output tile (at most 24 channels x 6 pixels), then the im2col chunk,
// or for an image read in place its staged partial tile (6 pixels of every block).
constexpr int64_t kStagedOutput = kMaxPanelWidth * kMaxPointwiseMr;
int64_t PointwiseNchw8::workspace_floats() const {
  return kStagedOutput + (gathers() ? chunk_floats() : in_blocks_ * kMaxPointwiseMr * 8);
}

// In place: the image (blocks of `pixels` pixels of 8 floats); im2col: the chunk's row
// blocks, or for a dense chunk its pixel rows.
PointwiseNchw8::Strides PointwiseNchw8::strides() const {
  if (!gathers()) return {s_.pixels() * 8, 8};
  if (dense()) return {8, dense_row_floats()};
  return {chunk_pixels_ * 8, 8};
}

bool PointwiseNchw8::dense() const { return gathers() && channel_stride_ % 8 != 0; }
// A dense pixel's rows, with room for the last tap's 8-lane copy.
int64_t PointwiseNchw8::dense_row_floats() const { return round_up(k_rows_ + 8, 8); }
int64_t PointwiseNchw8::chunk_floats() const {
  return chunk_pixels_ * (dense() ? dense_row_floats() : round_up(k_block_, 8));
}

// The im2col rows of pixels [p0, p0 + count) into dst[row block][pixel][8] (chunk_pixels_
// pixels per row block; row k = tap * channel_stride_ + c is lane k % 8 of block k / 8;
// the pixels past `count`, the padding and the lanes past the last channel are zero).
// Pixels go in runs along an output row: for one tap a run reads one input row, the
// columns inside it contiguous at stride 1 (one copy per run and channel block).
GK_POINTWISE_TARGET void PointwiseNchw8::gather_chunk(const float* x, int64_t p0, int64_t count, int64_t k0,
                                                       float* dst) const {
  if (dense()) return gather_chunk_dense(x, p0, count, dst);
  const gk_conv_desc& d = s_.d;
  const int64_t q0 = k0 / 8, q1 = std::min(k_rows_, k0 + k_block_) / 8;  // the (tap, block) rows wanted
  const int64_t plane = d.in_height * d.in_width * 8;
  std::memset(dst, 0, static_cast<size_t>((q1 - q0) * chunk_pixels_ * 8) * 4);
  for (int64_t t = 0; t < count;) {
    const int64_t p = p0 + t, oh = p / s_.ow, ow0 = p % s_.ow, len = std::min(count - t, s_.ow - ow0);
    for (int64_t tap = q0 / in_blocks_; tap < taps_ && tap * in_blocks_ < q1; ++tap) {
      const int64_t ih = oh * d.stride_h - d.pad_top + tap / d.kernel_w * d.dilation_h;
      if (ih < 0 || ih >= d.in_height) continue;
      // Output columns [lo, hi) of the run read input columns iw = ow * stride + off inside the row.
      const int64_t off = tap % d.kernel_w * d.dilation_w - d.pad_left;
      const int64_t lo = std::max(ow0, ceil_div(std::max<int64_t>(0, -off), d.stride_w));
      const int64_t hi = std::min(ow0 + len, d.in_width - off <= 0 ? 0 : ceil_div(d.in_width - off, d.stride_w));
      if (lo >= hi) continue;
      const float* row = x + (ih * d.in_width + lo * d.stride_w + off) * 8;
      const int64_t at = t + lo - ow0;  // chunk pixel of column lo
      for (int64_t b = std::max<int64_t>(0, q0 - tap * in_blocks_); b < in_blocks_ && tap * in_blocks_ + b < q1; ++b) {
        float* out = dst + ((tap * in_blocks_ + b - q0) * chunk_pixels_ + at) * 8;
        const float* src = row + b * plane;
        const int64_t lanes = std::min<int64_t>(8, d.in_channels - b * 8);
        if (d.stride_w == 1 && lanes == 8) {
          std::memcpy(out, src, static_cast<size_t>((hi - lo) * 8) * 4);
        } else {
          for (int64_t i = 0; i < hi - lo; ++i)
            for (int64_t l = 0; l < lanes; ++l) out[i * 8 + l] = src[i * d.stride_w * 8 + l];
        }
      }
    }
    t += len;
  }
}

// Under 8 input channels (an RGB stem) the chunk is pixel-major instead, dst[pixel][row]
// (dense_row_floats() apart; the kernel takes the pixel stride): a pixel's rows are built
// by one 8-lane copy per tap at tap * C, each overwriting the previous one's extra lanes
// (the last one's land past k_rows_, which the kernel never reads), so the im2col costs
// one vector copy per tap and pixel rather than C scalar ones (scattered into 8-row blocks
// it took 45% of a stem's time).
GK_POINTWISE_TARGET void PointwiseNchw8::gather_chunk_dense(const float* x, int64_t p0, int64_t count,
                                                             float* dst) const {
  // The descriptor's fields in locals: through `this` they would be reloaded after every
  // store (the stores may alias them), which doubled the instructions per copy.
  const gk_conv_desc& d = s_.d;
  const int64_t c = d.in_channels, row_len = dense_row_floats(), ow_count = s_.ow;
  const int64_t kh = d.kernel_h, kw = d.kernel_w, sh = d.stride_h, sw = d.stride_w, dh = d.dilation_h,
                dw = d.dilation_w, pt = d.pad_top, pl = d.pad_left, h = d.in_height, w = d.in_width;
  const v8 zero = splat8(0.0f);
  for (int64_t i = 0, oh = p0 / ow_count, ow = p0 % ow_count; i < count; ++i) {
    float* out = dst + i * row_len;
    const int64_t ih0 = oh * sh - pt, iw0 = ow * sw - pl;
    if (ih0 >= 0 && ih0 + (kh - 1) * dh < h && iw0 >= 0 && iw0 + (kw - 1) * dw < w) {  // every tap inside
      const float* src = x + (ih0 * w + iw0) * 8;
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t sx = 0; sx < kw; ++sx, out += c) store8(out, load8(src + (r * dh * w + sx * dw) * 8));
    } else {
      for (int64_t r = 0; r < kh; ++r) {
        const int64_t ih = ih0 + r * dh;
        for (int64_t sx = 0; sx < kw; ++sx, out += c) {
          const int64_t iw = iw0 + sx * dw;
          const bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
          store8(out, inside ? load8(x + (ih * w + iw) * 8) : zero);
        }
      }
    }
    if (++ow == ow_count) ow = 0, ++oh;
  }
  std::memset(dst + count * row_len, 0, static_cast<size_t>((chunk_pixels_ - count) * row_len) * 4);
}

// Pixels [p0, p1) of one panel and K block, the input at `a` (pixel p0) with the chunk's
// strides (see Strides): the whole MR-pixel tiles in one kernel call; a last tile that
// runs past the last pixel has its input staged (read in place: copied into a zero-padded
// MR-pixel image; an im2col chunk is zero-padded already) and its output too, and the real
// pixels copied out (the kernel reads and writes whole tiles).
void PointwiseNchw8::run_tiles(const Panel& p, int64_t k0, const float* a, Strides st, float* y, int64_t p0,
                               int64_t p1, float* stage) const {
  const int64_t pixels = s_.pixels(), rows = std::min(k_block_, k_rows_ - k0);
  const bool last = k0 + rows == k_rows_;
  gk_pointwise_args args;
  args.w = w_.data() + p.weights + k0 * p.nr;
  args.full_blocks = rows / 8;
  args.tail_channels = rows % 8;
  args.bias = has_bias_ && last ? bias_.data() + p.oc0 : nullptr;
  args.activation = last ? activation_ : 0;
  args.accumulate = k0 > 0;
  args.x = a, args.x_block_stride = st.block, args.x_pixel_stride = st.pixel;
  args.y = y + (p.oc0 / 8) * pixels * 8 + p0 * 8, args.y_block_stride = pixels * 8;
  args.tiles = (p1 - p0) / p.mr;
  if (args.tiles > 0) p.fn(&args);
  const int64_t done = args.tiles * p.mr;
  if (p0 + done == p1) return;
  // The partial last tile (p1 is the last pixel: chunks are whole tiles otherwise).
  a += done * st.pixel;
  float* out = args.y + done * 8;
  args.x = a, args.tiles = 1;
  const int64_t real = p1 - (p0 + done), tile = p.mr * 8;
  float* ys = stage;
  if (!gathers()) {  // the MR-pixel image
    float* xs = stage + kStagedOutput;
    for (int64_t b = 0; b < ceil_div(rows, 8); ++b) {
      std::memcpy(xs + b * tile, a + b * st.block, static_cast<size_t>(real * 8) * 4);
      std::memset(xs + b * tile + real * 8, 0, static_cast<size_t>(tile - real * 8) * 4);
    }
    args.x = xs, args.x_block_stride = tile;  // pixel stride 8
  }
  if (args.accumulate)
    for (int j = 0; j < p.nr / 8; ++j)
      std::memcpy(ys + j * tile, out + j * pixels * 8, static_cast<size_t>(real * 8) * 4);
  args.y = ys, args.y_block_stride = tile;
  p.fn(&args);
  for (int j = 0; j < p.nr / 8; ++j)
    std::memcpy(out + j * pixels * 8, ys + j * tile, static_cast<size_t>(real * 8) * 4);
}

// Work items are (pixel chunk, range of panels). Weights that fit: the ranges are the
// panel groups, items group-major, one pass over the rows. Else Goto's order: per chunk,
// for each K block, the chunk's rows of that block (gathered into L2) against each
// panel's weights of that block (in L1), the output tiles accumulating over the blocks;
// a chunk's panels are split between threads when there are fewer chunks than threads.
void PointwiseNchw8::run(const float* x, float* y, int threads) const {
  const int64_t pixels = s_.pixels(), chunks = ceil_div(pixels, chunk_pixels_);
  const int64_t npanels = static_cast<int64_t>(panels_.size());
  const bool blocked_k = k_block_ < k_rows_;
  const int64_t ranges = blocked_k ? std::min(npanels, ceil_div(threads, chunks)) : static_cast<int64_t>(group_end_.size());
  const int64_t items = ranges * chunks;
  threads = static_cast<int>(std::min<int64_t>(threads, items));
  if (threads > 1) note_parallel_region();
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* work = scratch(ScratchSlot::ConvRow, workspace_floats());
    if (!work) {
      std::fprintf(stderr, "gemmkit: out of memory for the pointwise workspace\n");
      std::abort();
    }
    float* chunk = work + kStagedOutput;
    const Strides st = strides();
    const Range r = share(items, omp_get_thread_num(), omp_get_num_threads(), 1, items);
    for (int64_t item = r.begin; item < r.end; ++item) {
      const int64_t g = blocked_k ? item % ranges : item / chunks, c = blocked_k ? item / ranges : item % chunks;
      const int64_t c0 = c * chunk_pixels_, c1 = std::min(pixels, c0 + chunk_pixels_);
      const Range panels = blocked_k ? share(npanels, static_cast<int>(g), static_cast<int>(ranges), 1, npanels)
                                     : Range{g ? group_end_[static_cast<size_t>(g - 1)] : 0, group_end_[static_cast<size_t>(g)]};
      for (int64_t k0 = 0; k0 < k_rows_; k0 += k_block_) {
        if (gathers()) gather_chunk(x, c0, c1 - c0, k0, chunk);
        // Pixel c0 + i of this K block at a0 + i * st.pixel.
        const float* a0 = gathers() ? chunk : x + (k0 / 8) * st.block + c0 * st.pixel;
        for (int64_t pi = panels.begin; pi < panels.end; ++pi)
          run_tiles(panels_[static_cast<size_t>(pi)], k0, a0, st, y, c0, c1, work);
      }
    }
  }
  const gk_conv_desc& d = s_.d;
  if (d.out_channels % 8) {
    float* last = y + (ceil_div(d.out_channels, 8) - 1) * pixels * 8;
    for (int64_t q = 0; q < pixels; ++q)
      for (int64_t l = d.out_channels % 8; l < 8; ++l) last[q * 8 + l] = 0.0f;
  }
}

}  // namespace conv
}  // namespace gk
