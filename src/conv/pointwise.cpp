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
#include <numeric>

#include "common/runtime.h"
#include "common/simd.h"
#include "conv/vec.h"
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

bool in_place(const Shape& s) {
  const gk_conv_desc& d = s.d;
  return d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 && !d.pad_top && !d.pad_left &&
         !d.pad_bottom && !d.pad_right;
}
// Row k of the packed weights for (tap, input channel c): k = tap * channel_stride + c.
// Up to 7 channels (an RGB stem) pack densely (27 rows for 3x3x3, not 72: run_direct reads
// a tap's C channels, a border pixel's gathered rows are dense); more are padded to whole
// 8-channel blocks, so each tap of a pixel copies whole vectors.
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
bool weights_fit(const Shape& s, int64_t panel_width) {
  const int64_t columns = in_place(s) ? panel_width : round_up(s.d.out_channels, 8);
  return weight_rows(s) * columns * 4 <= caches().l2 / 2 || (!in_place(s) && s.d.in_channels < 8);
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

// Direct: the output columns whose taps all lie inside the image columns, [lo, hi).
struct Columns {
  int64_t lo, hi;
};
Columns direct_columns(const Shape& s) {
  const gk_conv_desc& d = s.d;
  const int64_t w = d.in_width, kw = d.kernel_w, dw = d.dilation_w, sw = d.stride_w, pl = d.pad_left;
  const int64_t lo = std::min(s.ow, ceil_div(pl, sw));
  const int64_t last = w - 1 - (kw - 1) * dw + pl;  // ow * sw up to this: the last tap inside
  return {lo, std::max(lo, std::min(s.ow, last < 0 ? 0 : last / sw + 1))};
}

bool PointwiseNchw8::reads_nhwc(const Shape& s) {
  return s.d.layout == GK_LAYOUT_NHWC && s.in_layout == GK_LAYOUT_NHWC && in_place(s);
}

bool PointwiseNchw8::gathers_nhwc(const Shape& s) {
  return s.d.layout == GK_LAYOUT_NHWC && s.in_layout == GK_LAYOUT_NHWC && s.d.groups == 1 && !in_place(s) &&
         !runs_direct(s);
}

// The panels cover the output channels rounded up to 8 (pointwise_panels): all real where
// they are a multiple of 8.
bool PointwiseNchw8::writes_nhwc_rows(const Shape& s) {
  return s.d.layout == GK_LAYOUT_NHWC && (s.in_layout == GK_LAYOUT_NHWC || s.in_layout == GK_LAYOUT_NCHW) &&
         s.d.groups == 1 && runs_direct(s) && s.d.out_channels % 8 == 0;
}

float* PointwiseNchw8::y_at(float* y, int64_t oc0, int64_t pixel) const {
  return direct_nhwc_rows_ ? y + pixel * s_.d.out_channels + oc0 : y + (oc0 / 8 * s_.pixels() + pixel) * 8;
}

bool PointwiseNchw8::direct_on_blocks_serves(const Shape& s) {
  return s.in_layout == GK_LAYOUT_NCHW8 && s.d.in_channels % 8 == 0 && !in_place(s);
}
// Rows with a whole 12-pixel tile in place: on narrower ones the border pixels, gathered
// one by one, cost more than the chunks (ResNeXt-50's 7x7 grouped layers: 0.58 direct
// against 0.34 ms on chunks; 14x14 and wider 1.4-1.7x faster direct).
bool PointwiseNchw8::direct_on_blocks_pays(const Shape& s) {
  const Columns c = direct_columns(s);
  return direct_on_blocks_serves(s) && c.hi - c.lo >= 12;
}

PointwiseNchw8::PointwiseNchw8(const KernelInfo& kernel, const Shape& s, const float* weights, const float* bias,
                               bool direct_on_blocks)
    : s_(s), has_bias_(bias != nullptr), add_(s.adds_to_output()) {
  const gk_conv_desc& d = s.d;
  direct_ = runs_direct(s) || (direct_on_blocks && direct_on_blocks_pays(s));
  nhwc_ = nhwc_in_place(s);
  activation_ = static_cast<int>(make_epilogue(s, nullptr, 0).act);
  in_blocks_ = ceil_div(d.in_channels, 8);
  taps_ = d.kernel_h * d.kernel_w;
  k_rows_ = weight_rows(s);
  channel_stride_ = channel_stride(s);
  planar_ = s.in_layout == GK_LAYOUT_NCHW && direct();
  direct_nhwc_rows_ = writes_nhwc_rows(s);
  nhwc_in_ = direct_nhwc_rows_ && s.in_layout == GK_LAYOUT_NHWC;
  // Panels: one kernel width each (pointwise_panels).
  for (const PointwisePanel& panel : pointwise_panels(kernel, d.out_channels, /*past_last_block=*/true)) {
    const KernelInfo::Pointwise* k = panel.kernel;
    panels_.push_back({panel.j, k->mr, k->nr, k->fn, k->one_row, k->four_rows, panel.blocks});
  }
  bias_.assign(static_cast<size_t>(panels_width()), 0.0f);
  if (bias) std::copy(bias, bias + d.out_channels, bias_.begin());
  if (direct()) {
    // What every output row whose kernel rows lie inside the image shares (run_direct_row):
    // the columns run in place, and the taps' offsets from the row's first tap row.
    const int64_t w = d.in_width, kw = d.kernel_w, dw = d.dilation_w, sw = d.stride_w;
    const Columns columns = direct_columns(s);
    direct_lo_ = columns.lo, direct_hi_ = columns.hi;
    const DirectTaps dt = direct_taps();
    row_reach_ = 0;
    for (int64_t r = 0; r < d.kernel_h; ++r)
      for (int64_t a = 0; a < dt.per_row; ++a) {
        const int64_t first = r * d.dilation_h * w * pixel_floats() + tap_float(a);
        row_taps_.push_back(first * 4);
        row_reach_ = std::max(row_reach_, first + (dt.run - 1) * dt.step + 1);
      }
    // A call's pixels (a row's, or a partial tile's) at a tap row outside the image read
    // this instead, stride_w pixels apart from the tap's column on.
    zero_row_.assign(static_cast<size_t>(((s.ow + kMaxPointwiseMr) * sw + (kw - 1) * dw + 1) * pixel_floats()), 0.0f);
  }

  // Gathering NCHW8 chunks: per kernel column, the output columns whose input column lies
  // inside the row.
  for (int64_t ks = 0; ks < d.kernel_w; ++ks) {
    const int64_t off = ks * d.dilation_w - d.pad_left, sw = d.stride_w;
    gather_columns_.push_back({ceil_div(std::max<int64_t>(0, -off), sw),
                               d.in_width - off <= 0 ? 0 : ceil_div(d.in_width - off, sw)});
  }

  // Panel groups whose weights take a quarter of L2 where the input is read in place, so
  // that a group's and the next one's (fetched while the group runs, see run_gathered) fit
  // together; an im2col chunk is gathered once per group, so there one group of up to half.
  min_groups_ = std::min<int64_t>(static_cast<int64_t>(panels_.size()),
                                  ceil_div(k_rows_ * panels_width() * 4, caches().l2 / (gathers() ? 2 : 4)));
  // A multiple of 12 pixels, so both the 4- and the 6-pixel kernels tile a chunk exactly.
  int64_t widest = 8;
  for (const Panel& p : panels_) widest = std::max<int64_t>(widest, p.nr);
  if (weights_fit(s, widest)) {
    k_block_ = k_rows_;
    const int64_t budget = gathers() ? caches().l2 / 4 : caches().l1d / 2;
    chunk_pixels_ = std::clamp<int64_t>(budget / (round_up(k_rows_, 8) * 4) / 12 * 12, 12, 480);
  } else {
    // K blocks as pointwise_k_block (longer ones also mean fewer chunk gathers); a chunk's
    // rows of one K block take half of L2.
    k_block_ = pointwise_k_block(kernel, k_rows_, widest);
    chunk_pixels_ = std::clamp<int64_t>(caches().l2 / 2 / (k_block_ * 4) / 12 * 12, 12, 1020);
  }
  pack_weights(weights);
}

// Panel p's rows [k0, k0 + K block) (k0 a block's first row) as the kernel reads them,
// NR floats a row. A plan with K blocks keeps a block's rows of every panel together, in
// the order run_gathered reads them (block by block, panel by panel): one stream the
// hardware prefetchers follow, where a panel's rows of a block a panel's weights apart
// (ResNet-50's 512-channel 3x3 stride-2 layer: 576 KiB) stall its first tile on memory.
int64_t PointwiseNchw8::weights_offset(const Panel& p, int64_t k0) const {
  if (!block_major_weights_) return p.oc0 * k_rows_ + k0 * p.nr;
  const int64_t rows = std::min(k_block_, k_rows_ - k0);
  return k0 * panels_width() + rows * p.oc0;
}

int64_t PointwiseNchw8::panels_width() const {
  return panels_.empty() ? 0 : panels_.back().oc0 + panels_.back().nr;
}

void PointwiseNchw8::pack_weights(const float* weights) {
  const gk_conv_desc& d = s_.d;
  block_major_weights_ = !direct() && k_block_ < k_rows_;
  w_.assign(static_cast<size_t>(panels_width() * k_rows_), 0.0f);
  for (const Panel& p : panels_)
    for (int64_t r = 0; r < k_rows_; ++r) {
      // Row r: input channel r (in place), or (tap, channel) as channel_stride().
      int64_t c = gathers() ? r % channel_stride_ : r, tap = gathers() ? r / channel_stride_ : 0;
      if (planar_) {  // (kernel row, channel, column): see direct_taps()
        const int64_t sx = r % d.kernel_w, row_channel = r / d.kernel_w;
        c = row_channel % d.in_channels, tap = row_channel / d.in_channels * d.kernel_w + sx;
      }
      if (c >= d.in_channels) continue;
      const int64_t k0 = r / k_block_ * k_block_;
      float* w = w_.data() + weights_offset(p, k0) + (r - k0) * p.nr;
      for (int j = 0; j < p.nr && p.oc0 + j < d.out_channels; ++j)
        w[j] = weights[((p.oc0 + j) * d.in_channels + c) * taps_ + tap];
    }
}

// The staged partial output tile (at most 24 channels x 6 pixels), then the im2col chunk,
// or for an image read in place its staged partial tile (6 pixels of every block), or
// direct: the border pixels' gathered rows and their outputs.
constexpr int64_t kStagedOutput = kMaxPanelWidth * kMaxPointwiseMr;
// NHWC: the outputs of up to kNhwcStagePixels pixels of a panel past the last channel (or
// of a last partial tile), staged blocked for the kernel ([NR / 8][pixel][8]) and then
// their real channels stored into the NHWC rows; then a partial tile's input.
constexpr int64_t kNhwcStagePixels = 48;  // a multiple of every MR
constexpr int64_t kNhwcStage = kMaxPanelWidth * kNhwcStagePixels;
constexpr int64_t kBorderPixels = 48;  // border pixels per batch (a multiple of every MR)
// Direct: the taps (kernel_h x per_row) and up to kBorderPixels + ow waiting border
// pixels (a row adds at most ow to fewer than kBorderPixels), int64 each.
int64_t PointwiseNchw8::direct_lists_floats() const {
  const int64_t ints = s_.d.kernel_h * direct_taps().per_row + kBorderPixels + s_.ow;
  return round_up(2 * ints, 16);
}
int64_t PointwiseNchw8::workspace_floats() const {
  if (direct())
    return kStagedOutput + round_up(kBorderPixels * (dense_row_floats() + kMaxPanelWidth), 16) + direct_lists_floats();
  if (nhwc_) return nhwc_chunk_at() + (gathers() ? chunk_floats() : nhwc_rows_copy_floats());
  return kStagedOutput + (gathers() ? chunk_floats() : in_blocks_ * kMaxPointwiseMr * 8);
}

// In place: the image (blocks of `pixels` pixels of 8 floats); im2col: the chunk's row
// blocks.
PointwiseNchw8::Strides PointwiseNchw8::strides() const {
  if (nhwc_) return {8, gathers() ? nhwc_copied_row() : s_.d.in_channels};
  if (!gathers()) return {s_.pixels() * 8, 8};
  return {chunk_pixels_ * 8, 8};
}

bool PointwiseNchw8::runs_direct(const Shape& s) { return !in_place(s) && channel_stride(s) % 8 != 0; }
// NCHW8 (or NHWC, pixels C floats apart): a tap per (kernel row, column, channel block), its
// channels of the block adjacent (under 8 channels, the one block's C); NCHW: a tap per (kernel row, channel), its
// kernel_w columns dilation_w apart along the plane's row (the channels of a pixel are a
// plane apart: as taps they cost one offset each, as a stride a register).
int64_t PointwiseNchw8::tap_float(int64_t a) const {
  const int64_t plane = s_.d.in_height * s_.d.in_width;
  return planar_ ? a * plane : zero_row_float(a) + a % in_blocks_ * plane * 8;
}
int64_t PointwiseNchw8::zero_row_float(int64_t a) const {
  return planar_ ? 0 : a / in_blocks_ * s_.d.dilation_w * pixel_floats();
}
int64_t PointwiseNchw8::image_floats() const {
  return s_.d.in_height * s_.d.in_width * (planar_ || nhwc_in_ ? s_.d.in_channels : in_blocks_ * 8);
}
PointwiseNchw8::DirectTaps PointwiseNchw8::direct_taps() const {
  const gk_conv_desc& d = s_.d;
  if (planar_) return {d.in_channels, d.kernel_w, d.dilation_w};
  if (d.in_channels < 8) return {d.kernel_w, d.in_channels, 1};
  return {d.kernel_w * in_blocks_, 8, 1};
}
// A gathered border pixel's rows, with room for the last tap's 8-lane copy.
int64_t PointwiseNchw8::dense_row_floats() const { return round_up(k_rows_ + 8, 8); }
int64_t PointwiseNchw8::chunk_floats() const {
  return chunk_pixels_ * (nhwc_ ? nhwc_copied_row() : round_up(k_block_, 8));
}

// The im2col rows of pixels [p0, p0 + count) into dst[row block][pixel][8] (chunk_pixels_
// pixels per row block; row k = tap * channel_stride_ + c is lane k % 8 of block k / 8;
// the pixels past `count`, the padding and the lanes past the last channel are zero).
// Pixels go in runs along an output row: for one tap a run reads one input row (a loop of
// 8-float vectors per run and channel block).
GK_POINTWISE_TARGET void PointwiseNchw8::gather_chunk(const float* x, int64_t p0, int64_t count, int64_t k0,
                                                       float* dst) const {
  const gk_conv_desc& d = s_.d;
  const int64_t q0 = k0 / 8, q1 = std::min(k_rows_, k0 + k_block_) / 8;  // the (tap, block) rows wanted
  const int64_t plane = d.in_height * d.in_width * 8;
  // Every float of the chunk's rows is written once, copied or zeroed in place (zeroing the
  // whole chunk first took a quarter of a grouped layer's time), up to the last pixel a
  // whole tile reads.
  const int64_t tiled = std::min(chunk_pixels_, round_up(count, 12));
  for (int64_t q = q0; q < q1; ++q) zero_floats(dst + ((q - q0) * chunk_pixels_ + count) * 8, (tiled - count) * 8);
  // Row by row of the chunk, (tap, block) by (tap, block), each written in order; a tap's
  // columns inside the row come from gather_columns_, with no division per run.
  const int64_t tap0 = q0 / in_blocks_, oh0 = p0 / s_.ow, ow00 = p0 % s_.ow;
  int64_t kr = tap0 / d.kernel_w, ks = tap0 % d.kernel_w;  // the tap's kernel row and column
  for (int64_t tap = tap0; tap < taps_ && tap * in_blocks_ < q1; ++tap) {
    // Output columns in gather_columns_[ks] read input columns iw = ow * stride + off inside the row.
    const int64_t off = ks * d.dilation_w - d.pad_left, dh = kr * d.dilation_h - d.pad_top;
    const ColumnRange inside = gather_columns_[static_cast<size_t>(ks)];
    if (++ks == d.kernel_w) ks = 0, ++kr;
    for (int64_t b = std::max<int64_t>(0, q0 - tap * in_blocks_); b < in_blocks_ && tap * in_blocks_ + b < q1; ++b) {
      float* const row_out = dst + (tap * in_blocks_ + b - q0) * chunk_pixels_ * 8;
      const float* const plane_in = x + b * plane;
      const int64_t lanes = std::min<int64_t>(8, d.in_channels - b * 8);
      for (int64_t t = 0, oh = oh0, ow0 = ow00; t < count; ++oh, ow0 = 0) {
        const int64_t len = std::min(count - t, s_.ow - ow0), ih = oh * d.stride_h + dh;
        int64_t lo = std::max(ow0, inside.lo), hi = std::min(ow0 + len, inside.hi);
        if (ih < 0 || ih >= d.in_height || lo >= hi) lo = hi = ow0;
        float* out = row_out + t * 8;  // column ow0
        t += len;
        if (lo > ow0) zero_floats(out, (lo - ow0) * 8);
        if (hi < ow0 + len) zero_floats(out + (hi - ow0) * 8, (ow0 + len - hi) * 8);
        if (lo == hi) continue;
        out += (lo - ow0) * 8;
        const float* src = plane_in + (ih * d.in_width + lo * d.stride_w + off) * 8;
        if (lanes == 8) {  // a loop of vectors, not copy_run: a library call per short run
          for (int64_t i = 0; i < hi - lo; ++i) store8(out + i * 8, load8(src + i * d.stride_w * 8));
        } else {
          for (int64_t i = 0; i < hi - lo; ++i)
            for (int64_t l = 0; l < 8; ++l) out[i * 8 + l] = l < lanes ? src[i * d.stride_w * 8 + l] : 0.0f;
        }
      }
    }
  }
}

// NHWC: the im2col rows of pixels [p0, p0 + count), K rows [k0, k0 + K block), pixel-major
// (pixel i's row k at dst + i * nhwc_copied_row() + k - k0; row k = tap * channel_stride_
// + c as in gather_chunk): one copy of a pixel's channels per tap, zeros for the padding
// and the rows past the last channel.
GK_POINTWISE_TARGET void PointwiseNchw8::gather_chunk_nhwc(const float* x, int64_t p0, int64_t count, int64_t k0,
                                                            float* dst) const {
  const gk_conv_desc& d = s_.d;
  const int64_t k1 = std::min(k_rows_, k0 + k_block_), cs = channel_stride_, c = d.in_channels;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t oh = (p0 + i) / s_.ow, ow = (p0 + i) % s_.ow;
    float* row = dst + i * nhwc_copied_row() - k0;
    for (int64_t tap = k0 / cs; tap * cs < k1; ++tap) {
      const int64_t ih = oh * d.stride_h - d.pad_top + tap / d.kernel_w * d.dilation_h;
      const int64_t iw = ow * d.stride_w - d.pad_left + tap % d.kernel_w * d.dilation_w;
      // This tap's rows in the block, [lo, hi), of which [lo, real) are channels.
      const int64_t lo = std::max(k0, tap * cs), hi = std::min(k1, tap * cs + cs);
      const bool inside = ih >= 0 && ih < d.in_height && iw >= 0 && iw < d.in_width;
      const int64_t real = inside ? std::max(lo, std::min(hi, tap * cs + c)) : lo;
      // Padded taps copy nothing and form no pointer (theirs would lie outside the image).
      if (real > lo) copy_run(row + lo, x + (ih * d.in_width + iw) * c + lo - tap * cs, real - lo);
      zero_floats(row + real, hi - real);
    }
  }
}

// The border pixels of run_direct: pixel pixels[i]'s rows into dst + i * dense_row_floats()
// (the kernel takes that pixel stride), built by one 8-lane copy per tap and channel block
// at tap * C. Under 8 input channels (an RGB stem) each copy overwrites the previous one's
// extra lanes (the last one's land past k_rows_, which the kernel never reads): a vector
// copy per tap and pixel rather than C scalar ones (from an NHWC input C scalar ones: an
// 8-lane load could read past the image). Rows up to a whole 12-pixel tile are zeroed.
GK_POINTWISE_TARGET void PointwiseNchw8::gather_dense_pixels(const float* x, const int64_t* pixels, int64_t count,
                                                              float* dst) const {
  // The descriptor's fields in locals: through `this` they would be reloaded after every
  // store (the stores may alias them), which doubled the instructions per copy.
  const gk_conv_desc& d = s_.d;
  const int64_t c = d.in_channels, row_len = dense_row_floats(), ow_count = s_.ow, blocks = in_blocks_;
  const int64_t plane = d.in_height * d.in_width * 8;
  const int64_t kh = d.kernel_h, kw = d.kernel_w, sh = d.stride_h, sw = d.stride_w, dh = d.dilation_h,
                dw = d.dilation_w, pt = d.pad_top, pl = d.pad_left, h = d.in_height, w = d.in_width;
  const bool nhwc = nhwc_in_;
  const v8 zero = splat8(0.0f);
  for (int64_t i = 0; i < count; ++i) {
    float* out = dst + i * row_len;
    const int64_t ih0 = pixels[i] / ow_count * sh - pt, iw0 = pixels[i] % ow_count * sw - pl;
    for (int64_t r = 0; r < kh; ++r) {
      const int64_t ih = ih0 + r * dh;
      for (int64_t sx = 0; sx < kw; ++sx, out += c) {
        const int64_t iw = iw0 + sx * dw;
        const bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
        if (nhwc) {  // the pixel's c channels (an 8-lane load could read past the image)
          for (int64_t l = 0; l < c; ++l) out[l] = inside ? x[(ih * w + iw) * c + l] : 0.0f;
          continue;
        }
        for (int64_t b = 0; b < blocks; ++b) store8(out + b * 8, inside ? load8(x + b * plane + (ih * w + iw) * 8) : zero);
      }
    }
  }
  std::memset(dst + count * row_len, 0, static_cast<size_t>((round_up(count, 12) - count) * row_len) * 4);
}

// The same from an NCHW image: C values per tap, a plane apart.
GK_POINTWISE_TARGET void PointwiseNchw8::gather_dense_pixels_planar(const float* x, const int64_t* pixels,
                                                                     int64_t count, float* dst) const {
  const gk_conv_desc& d = s_.d;
  const int64_t c = d.in_channels, row_len = dense_row_floats(), ow_count = s_.ow, plane = d.in_height * d.in_width;
  const int64_t kh = d.kernel_h, kw = d.kernel_w, sh = d.stride_h, sw = d.stride_w, dh = d.dilation_h,
                dw = d.dilation_w, pt = d.pad_top, pl = d.pad_left, h = d.in_height, w = d.in_width;
  for (int64_t i = 0; i < count; ++i) {
    float* out = dst + i * row_len;
    const int64_t ih0 = pixels[i] / ow_count * sh - pt, iw0 = pixels[i] % ow_count * sw - pl;
    for (int64_t r = 0; r < kh; ++r) {
      const int64_t ih = ih0 + r * dh;
      for (int64_t ch = 0; ch < c; ++ch, out += kw)  // the rows in direct_taps() order
        for (int64_t sx = 0; sx < kw; ++sx) {
          const int64_t iw = iw0 + sx * dw;
          out[sx] = ih >= 0 && ih < h && iw >= 0 && iw < w ? x[ch * plane + ih * w + iw] : 0.0f;
        }
    }
  }
  std::memset(dst + count * row_len, 0, static_cast<size_t>((round_up(count, 12) - count) * row_len) * 4);
}

// `pixels` pixels of `blocks` consecutive 8-channel blocks from src to dst (block strides
// in floats; pixels 8 floats apart, or dst_pixel / src_pixel in NHWC rows): a partial
// tile's outputs staged in or out.
void copy_tile_pixels(float* dst, int64_t dst_block_stride, const float* src, int64_t src_block_stride, int blocks,
                      int64_t pixels, int64_t dst_pixel = 8, int64_t src_pixel = 8) {
  for (int j = 0; j < blocks; ++j) {
    float* d = dst + j * dst_block_stride;
    const float* s = src + j * src_block_stride;
    if (dst_pixel == 8 && src_pixel == 8) {
      std::memcpy(d, s, static_cast<size_t>(pixels * 8) * 4);
      continue;
    }
    for (int64_t i = 0; i < pixels; ++i) std::memcpy(d + i * dst_pixel, s + i * src_pixel, 32);
  }
}

// Cycles per channel: a whole tile MR x NR / 16 (two FMAs a cycle); a pixel max(1, NR / 16,
// (1 + NR / 8) / 3) in blocks (its 4 accumulator sets against FMA latency 4, its FMAs, its
// loads at 3 a cycle), 4 in a tail (one set). 49 pixels (7x7) took 13 4-pixel tiles:
// one-pixel calls ran those layers 6% faster; a stem's 27 tail channels (3 per tap) do not
// pay.
bool one_pixel_calls_pay(const KernelInfo::Pointwise& k, int64_t pixels, int64_t blocked, int64_t tail) {
  const double tile = k.mr * k.nr / 16.0, pixel = std::max({1.0, k.nr / 16.0, (1 + k.nr / 8) / 3.0});
  return k.one_row && pixels * (blocked * pixel + tail * 4.0) < (blocked + tail) * tile;
}

bool PointwiseNchw8::Panel::one_pixel_calls_pay(int64_t pixels, int64_t blocked, int64_t tail) const {
  return conv::one_pixel_calls_pay({mr, nr, fn, one_row}, pixels, blocked, tail);
}

// Whole 4-pixel tiles where the kernel has them (a 14x14 image's last 4 pixels cost a third
// of a 12-pixel tile so, not four one-pixel calls) unless the pixels after them would
// take a whole tile anyway.
PointwiseNchw8::Panel::Rest PointwiseNchw8::Panel::rest_calls(int64_t rest, int64_t blocked, int64_t tail) const {
  int64_t four = 0;
  if (four_rows && rest >= 4 && (rest % 4 == 0 || one_pixel_calls_pay(rest % 4, blocked, tail))) four = rest / 4 * 4;
  return {four, rest > four && one_pixel_calls_pay(rest - four, blocked, tail)};
}

// Pixels [p0, p1) of one panel and K block, the input at `a` (pixel p0) with the chunk's
// strides (see Strides): the whole MR-pixel tiles in one kernel call; a last tile that
// runs past the last pixel has its input staged (read in place: copied into a zero-padded
// MR-pixel image; an im2col chunk is zero-padded already) and its output too, and the real
// pixels copied out (the kernel reads and writes whole tiles).
// Panel p's weights, rows and epilogue for the K block from row k0: bias and activation
// with the last block, the output accumulated from the first (adding the residual) on.
gk_pointwise_args PointwiseNchw8::block_args(const Panel& p, int64_t k0, Fetch fetch) const {
  const int64_t rows = std::min(k_block_, k_rows_ - k0);
  const bool last = k0 + rows == k_rows_;
  gk_pointwise_args args;
  args.w = w_.data() + weights_offset(p, k0);
  args.full_blocks = rows / 8;
  args.tail_channels = rows % 8;
  args.bias = has_bias_ && last ? bias_.data() + p.oc0 : nullptr;
  args.activation = last ? activation_ : 0;
  args.accumulate = k0 > 0 || add_;
  args.skip_last_block = p.skips_last_block();
  // The panels' rows of a block lie one after another (weights_offset), as do the blocks.
  args.w_next_offset = fetch.panel ? (weights_offset(*fetch.panel, k0) - weights_offset(p, k0)) * 4 + fetch.skip
                                    : rows * p.nr * 4;
  args.w_next_from_first_tile = fetch.panel ? 1 : 0;
  return args;
}

void PointwiseNchw8::run_tiles(const Panel& p, int64_t k0, const float* a, Strides st, float* y, int64_t p0,
                               int64_t p1, float* stage, Fetch fetch) const {
  const int64_t pixels = s_.pixels(), rows = std::min(k_block_, k_rows_ - k0);
  gk_pointwise_args args = block_args(p, k0, fetch);
  args.x = a, args.x_block_stride = st.block, args.x_row_stride = st.pixel;
  args.y = y + (p.oc0 / 8) * pixels * 8 + p0 * 8, args.y_block_stride = pixels * 8;
  args.tiles = (p1 - p0) / p.mr;
  if (args.tiles > 0) p.fn(&args);
  const int64_t done = args.tiles * p.mr;
  if (p0 + done == p1) return;
  // The partial last tile (p1 is the last pixel: chunks are whole tiles otherwise), in
  // place as rest_calls says; the staged whole tile below reads MR pixels from its start,
  // so it keeps them all.
  a += done * st.pixel;
  float* out = args.y + done * 8;
  int64_t real = p1 - (p0 + done);
  const Panel::Rest rest = p.rest_calls(real, args.full_blocks * 8, args.tail_channels);
  if (rest.four > 0) {
    args.x = a, args.y = out, args.tiles = rest.four / 4;
    p.four_rows(&args);
    a += rest.four * st.pixel, out += rest.four * 8, real -= rest.four;
    if (real == 0) return;
  }
  args.x = a, args.tiles = 1;
  const int64_t tile = p.mr * 8;
  if (rest.one_pixel_calls) {  // only the real pixels
    args.y = out, args.tiles = real;
    return p.one_row(&args);
  }
  float* ys = stage;
  if (!gathers()) {  // the MR-pixel image
    float* xs = stage + kStagedOutput;
    for (int64_t b = 0; b < ceil_div(rows, 8); ++b) {
      std::memcpy(xs + b * tile, a + b * st.block, static_cast<size_t>(real * 8) * 4);
      std::memset(xs + b * tile + real * 8, 0, static_cast<size_t>(tile - real * 8) * 4);
    }
    args.x = xs, args.x_block_stride = tile;  // pixel stride 8
  }
  if (args.accumulate) copy_tile_pixels(ys, tile, out, pixels * 8, p.blocks, real);
  args.y = ys, args.y_block_stride = tile;
  p.fn(&args);
  copy_tile_pixels(out, pixels * 8, ys, tile, p.blocks, real);
}

// NHWC rows of a multiple of 1024 channels: a chunk's K block is copied into rows of this
// many floats, 16 more than the block, so that consecutive pixels fall in different cache
// sets. Read in place, pixels 4 or 8 KiB apart all map to one L1 set, which the weights
// stream through too (ResNet-50's 1024 -> 512 at 14x14 and 2048 -> 512 at 7x7 ran 1.5x
// their NCHW8 time; 1016 -> 512 1.02x).
bool PointwiseNchw8::nhwc_copies_rows() const { return nhwc_ && !gathers() && s_.d.in_channels % 1024 == 0; }
// NHWC rows copied (or gathered: gather_chunk_nhwc) pixel-major: 16 floats more than the
// K block, as above.
int64_t PointwiseNchw8::nhwc_copied_row() const { return round_up(k_block_, 8) + 16; }
// Where an NHWC thread's chunk (or rows copy) starts in its workspace: after the staged
// outputs and a partial tile's input (MR rows of a K block).
int64_t PointwiseNchw8::nhwc_chunk_at() const {
  return kNhwcStage + round_up(round_up(k_block_, 8) * kMaxPointwiseMr, 16);
}
int64_t PointwiseNchw8::nhwc_rows_copy_floats() const {
  return nhwc_copies_rows() ? chunk_pixels_ * nhwc_copied_row() : 0;
}

// NHWC, in place: pixels [p0, p1) of panel p, K rows [k0, k0 + K block) read from the
// image's rows (`a`: pixel p0's channel k0; pixels a_row floats apart: in_channels, or a
// copy's or a gathered chunk's nhwc_copied_row()). A panel of real channels only is stored
// straight into the NHWC rows (run_tiles_into_rows). The last panel of a channel count
// that is not a multiple of 8 (its lanes past the last channel would land on the next
// pixel's), and a last partial tile that rest_calls gives a whole tile, are staged
// blocked, up to kNhwcStagePixels at a time, and their real channels stored into the rows;
// a partial last tile reads its pixels from a copy padded with zeros, so no call reads
// past the image.
GK_POINTWISE_TARGET void PointwiseNchw8::run_tiles_nhwc(const Panel& p, int64_t k0, const float* a, int64_t a_row,
                                                        float* y, int64_t p0, int64_t p1, float* stage,
                                                        Fetch fetch) const {
  const int64_t oc = s_.d.out_channels, rows = std::min(k_block_, k_rows_ - k0);
  const int64_t lanes_last = std::min<int64_t>(p.blocks * 8, oc - p.oc0);  // real channels of the panel
  float* xs = stage + kNhwcStage;
  gk_pointwise_args args = block_args(p, k0, fetch);
  args.x_block_stride = 8;
  if (lanes_last == p.blocks * 8) {
    const int64_t done = run_tiles_into_rows(p, args, a, a_row, y + p0 * oc + p.oc0, p1 - p0);
    a += done * a_row, p0 += done;
  }
  args.y_block_stride = kNhwcStagePixels * 8;
  for (int64_t t0 = p0; t0 < p1; t0 += kNhwcStagePixels) {
    const int64_t n = std::min(kNhwcStagePixels, p1 - t0), whole = n / p.mr * p.mr;
    float* out = y + t0 * oc + p.oc0;
    if (args.accumulate)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < lanes_last; c += 8)
          copy_run(stage + c / 8 * kNhwcStagePixels * 8 + i * 8, out + i * oc + c, std::min<int64_t>(8, lanes_last - c));
    if (whole > 0) {
      args.x = a + (t0 - p0) * a_row, args.x_row_stride = a_row;
      args.y = stage, args.tiles = whole / p.mr;
      p.fn(&args);
    }
    if (whole < n) {  // a chunk's last pixels
      const int64_t real = n - whole, row = round_up(rows, 8);
      for (int64_t i = 0; i < p.mr; ++i) {
        const int64_t copied = i < real ? rows : 0;
        copy_run(xs + i * row, a + (t0 - p0 + whole + i) * a_row, copied);
        zero_floats(xs + i * row + copied, row - copied);
      }
      args.x = xs, args.x_row_stride = row;
      args.y = stage + whole * 8, args.tiles = 1;
      p.fn(&args);
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < lanes_last; c += 8)
        copy_run(out + i * oc + c, stage + c / 8 * kNhwcStagePixels * 8 + i * 8, std::min<int64_t>(8, lanes_last - c));
  }
}

// `pixels` pixels of panel p (all its channels real) from `a` stored straight into the NHWC
// rows at `out` (y_row_stride: the row length): whole tiles, then the rest as rest_calls
// says. Returns the pixels done (a last whole tile is left to the caller's staging).
int64_t PointwiseNchw8::run_tiles_into_rows(const Panel& p, gk_pointwise_args args, const float* a, int64_t a_row,
                                            float* out, int64_t pixels) const {
  const int64_t oc = s_.d.out_channels;
  args.x_row_stride = a_row, args.y_block_stride = 8, args.y_row_stride = oc;
  int64_t done = 0;
  auto call = [&](gk_pointwise_fn fn, int mr, int64_t count) {
    args.x = a + done * a_row, args.y = out + done * oc, args.tiles = count / mr;
    if (args.tiles == 0) return;
    fn(&args);
    done += args.tiles * mr;
  };
  call(p.fn, p.mr, pixels);
  const Panel::Rest rest = p.rest_calls(pixels - done, args.full_blocks * 8, args.tail_channels);
  if (rest.four > 0) call(p.four_rows, 4, rest.four);
  if (rest.one_pixel_calls) call(p.one_row, 1, pixels - done);
  return done;
}

// Work items are (pixel chunk, range of panels). Weights that fit: the ranges are the
// panel groups, items group-major, one pass over the rows. Else Goto's order: per chunk,
// for each K block, the chunk's rows of that block (gathered into L2) against each
// panel's weights of that block (in L1), the output tiles accumulating over the blocks;
// a chunk's panels are split between threads when there are fewer chunks than threads.
void PointwiseNchw8::run(const float* x, float* y, int threads, const Workspace& ws) const {
  threads = ws.cap(threads);
  if (direct()) {
    run_direct(x, y, threads, ws);
    if (!direct_nhwc_rows_) zero_padding_channels(y, 0, s_.pixels());
  } else {
    run_gathered(x, y, threads, ws);
  }
}

void PointwiseNchw8::PixelList::drop_front(int64_t n) {
  std::memmove(data, data + n, static_cast<size_t>(size - n) * sizeof(int64_t));
  size -= n;
}

void PointwiseNchw8::run_gathered(const float* x, float* y, int threads, const Workspace& ws) const {
  const int64_t pixels = s_.pixels(), npanels = static_cast<int64_t>(panels_.size());
  const int64_t chunk_pixels = nhwc_chunk_pixels(threads), chunks = ceil_div(pixels, chunk_pixels);
  const bool blocked_k = k_block_ < k_rows_;
  // Panel ranges: K blocks, enough to give every thread work; else the groups whose weights
  // share L2, and with few chunks a multiple of the threads, so each thread takes whole
  // groups of every chunk (a 7x7 image is one chunk: 3 groups ran 2:1 on two threads;
  // 196 pixels in chunks of 60 split 120:76). NHWC of few output channels splits pixels
  // instead where there are enough (nhwc_chunk_pixels).
  int64_t ranges = blocked_k ? std::min(npanels, ceil_div(threads, chunks)) : min_groups_;
  if (!blocked_k && !nhwc_splits_pixels() && threads > 1 && chunks < 4 * threads)
    ranges = std::min(npanels, round_up(ranges, threads));
  const int64_t items = ranges * chunks;
  threads = static_cast<int>(std::min<int64_t>(threads, items));
  parallel_parts(threads, [&](int tid, int nt) {
    float* work = ws.block(tid);
    float* chunk = work + (nhwc_ ? nhwc_chunk_at() : kStagedOutput);
    float* rows_copy = work + workspace_floats() - nhwc_rows_copy_floats();
    const Strides st = strides();
    const Range r = share(items, tid, nt, 1, items);
    for (int64_t item = r.begin; item < r.end; ++item) {
      const int64_t g = blocked_k ? item % ranges : item / chunks, c = blocked_k ? item / ranges : item % chunks;
      const int64_t c0 = c * chunk_pixels, c1 = std::min(pixels, c0 + chunk_pixels);
      const Range panels = share(npanels, static_cast<int>(g), static_cast<int>(ranges), 1, npanels);
      for (int64_t k0 = 0; k0 < k_rows_; k0 += k_block_) {
        if (gathers() && nhwc_) {
          gather_chunk_nhwc(x, c0, c1 - c0, k0, chunk);
        } else if (gathers()) {
          gather_chunk(x, c0, c1 - c0, k0, chunk);
        }
        // Pixel c0 + i of this K block at a0 + i * st.pixel.
        const float* a0 = gathers() ? chunk : x + (k0 / 8) * st.block + c0 * st.pixel;
        int64_t a_row = st.pixel;  // NHWC
        if (nhwc_copies_rows()) {
          copy_nhwc_rows(a0, c1 - c0, k0, rows_copy);
          a0 = rows_copy, a_row = nhwc_copied_row();
        }
        // Weights that fit: a group's first chunk reads them from memory or L3, its later
        // chunks from L2, and those (after this thread's previous chunk of the group) fetch
        // the next group's, each a part of each panel.
        const bool fetch_next_group = !blocked_k && c > 0 && item > r.begin && g + 1 < ranges;
        const Range next_group = fetch_next_group ? share(npanels, static_cast<int>(g + 1), static_cast<int>(ranges), 1, npanels)
                                                  : Range{0, 0};
        for (int64_t pi = panels.begin; pi < panels.end; ++pi) {
          const Panel& p = panels_[static_cast<size_t>(pi)];
          Fetch fetch;
          if (next_group.begin + (pi - panels.begin) < next_group.end) {
            fetch.panel = &panels_[static_cast<size_t>(next_group.begin + (pi - panels.begin))];
            fetch.skip = k_rows_ * fetch.panel->nr * 4 * (c - 1) / (chunks - 1) / 64 * 64;
          }
          if (nhwc_) {
            run_tiles_nhwc(p, k0, a0, a_row, y, c0, c1, work, fetch);
          } else {
            run_tiles(p, k0, a0, st, y, c0, c1, work, fetch);
          }
        }
      }
      // The chunk's padding channels, while its output is in L1 (a pass over the whole
      // last block afterwards read it back from L2: 3.5% of a 24 -> 58 channel layer).
      if (panels.end == npanels && !nhwc_) zero_padding_channels(y, c0, c1);
    }
  });
}

// K rows [k0, k0 + K block) of `count` NHWC pixels (a: the first's channel k0) into rows
// of nhwc_copied_row() floats.
GK_POINTWISE_TARGET void PointwiseNchw8::copy_nhwc_rows(const float* a, int64_t count, int64_t k0, float* dst) const {
  const int64_t rows = std::min(k_block_, k_rows_ - k0), ic = s_.d.in_channels;
  for (int64_t i = 0; i < count; ++i) copy_run(dst + i * nhwc_copied_row(), a + i * ic, rows);
}

// NHWC outputs of at least this many channels share a chunk's panels between threads as
// NCHW8 does: the lines two threads both write are one per pixel at most, of 16 or more a
// pixel. ResNet-50's 7x7 layers at 2 threads, panels against pixels (28:21): 512 -> 512
// 3x3 stride 2 0.61 against 0.74 ms (NCHW8 0.62), 1024 -> 2048 1x1 stride 2 0.53
// against 0.65 (NCHW8 0.53).
constexpr int64_t kNhwcPanelSplitMinChannels = 256;
bool PointwiseNchw8::nhwc_splits_pixels() const { return nhwc_ && s_.d.out_channels < kNhwcPanelSplitMinChannels; }

// Pixels per chunk. NHWC of fewer output channels with few chunks for the threads: smaller
// chunks, one per thread and up to 4 while they keep 48 pixels, since threads computing
// different channels of the same pixels write the same cache lines (24 -> 58 channels at
// 28x28, channels split on two threads, ran 0.069 ms against 0.031 on one). Multiples of
// 4 pixels for a kernel with 4-pixel calls, not of its MR: a 7x7 image splits 28:21, not
// 36:13, and the partial tiles run as rest_calls says. A kernel without them (AVX2's)
// needs its MR: a chunk's last pixels would go to the one-pixel kernel, which sums a
// pixel's channels in another order, so the results would change with the thread count.
int64_t PointwiseNchw8::nhwc_chunk_pixels(int threads) const {
  const int64_t pixels = s_.pixels();
  if (!nhwc_splits_pixels() || threads == 1 || ceil_div(pixels, chunk_pixels_) >= 4 * threads) return chunk_pixels_;
  int64_t unit = 1;
  for (const Panel& p : panels_) unit = std::lcm<int64_t>(unit, p.four_rows ? 4 : p.mr);
  const int64_t chunks = threads * std::clamp<int64_t>(pixels / (48 * threads), 1, 4);
  return std::min(chunk_pixels_, round_up(ceil_div(pixels, chunks), unit));
}

// Output pixels [p0, p1) of the last channel block: its lanes past the last channel zeroed.
void PointwiseNchw8::zero_padding_channels(float* y, int64_t p0, int64_t p1) const {
  const int64_t oc = s_.d.out_channels, pixels = s_.pixels();
  if (oc % 8) zero_padding_lanes(y + ((ceil_div(oc, 8) - 1) * pixels + p0) * 8, p1 - p0, oc % 8);
}

// Direct (under 8 input channels): output rows shared between threads; a row's pixels whose
// taps all lie inside the image columns run on the image in place (run_direct_row), the
// others are gathered in batches (run_border). The weights are small (taps x C rows).
void PointwiseNchw8::run_direct(const float* x, float* y, int threads, const Workspace& ws) const {
  threads = static_cast<int>(std::min<int64_t>(threads, s_.oh));
  parallel_parts(threads, [&](int tid, int nt) {
    float* work = ws.block(tid);
    // The lists at the block's end, after what run_direct_row and run_border use.
    int64_t* const lists = reinterpret_cast<int64_t*>(work + workspace_floats() - direct_lists_floats());
    int64_t* const taps = lists;
    PixelList border{lists + s_.d.kernel_h * direct_taps().per_row, 0};
    const Range rows = share(s_.oh, tid, nt, 1, s_.oh);
    for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
      run_direct_row(x, y, oh, taps, work, &border);
      while (border.size >= kBorderPixels || (oh + 1 == rows.end && border.size > 0)) {
        const int64_t n = std::min<int64_t>(kBorderPixels, border.size);
        run_border(x, y, border.data, n, work, panels_.data(), panels_.data() + panels_.size());
        border.drop_front(n);
      }
    }
  });
}

// Output row oh. Columns [lo, hi) read only columns inside the image; the kernel runs
// them in place, tap t of pixel ow at the pixel's input column plus an offset: for a row
// whose kernel rows all lie inside the image the plan's (row_taps_, from the row's first
// tap row), else the tap's row, or the zero row for one outside, recomputed for the row.
// A last partial tile runs as one-pixel calls where they pay, else as a whole tile ending
// at hi (rewriting pixels already computed with the same values), or, in a row narrower
// than a tile, staged when its extra pixels' reads stay inside the image; the other pixels
// of the row are appended to `border`. Adding to the output, every pixel is computed once
// per panel: no rewriting tile (staged instead), and a staged tile that would read past
// the image is gathered for its panel alone.
void PointwiseNchw8::run_direct_row(const float* x, float* y, int64_t oh, int64_t* taps, float* stage,
                                    PixelList* border) const {
  const gk_conv_desc& d = s_.d;
  const int64_t w = d.in_width, sw = d.stride_w, pl = d.pad_left;
  const int64_t ih0 = oh * d.stride_h - d.pad_top, row = oh * s_.ow;
  const int64_t lo = direct_lo_, hi = direct_hi_;
  const int64_t px = pixel_floats(), image_floats = this->image_floats();
  const DirectTaps dt = direct_taps();
  const bool outside = ih0 < 0 || ih0 + (d.kernel_h - 1) * d.dilation_h >= d.in_height;
  // Calls read from row `base_row` on; the furthest float a pixel's taps read past its column.
  const int64_t base_row = outside ? 0 : ih0;
  int64_t reach = row_reach_;
  if (outside) {
    reach = 0;
    for (int64_t r = 0, t = 0; r < d.kernel_h; ++r) {
      const int64_t ih = ih0 + r * d.dilation_h;
      for (int64_t a = 0; a < dt.per_row; ++a, ++t) {
        if (ih < 0 || ih >= d.in_height) continue;  // set per call (set_taps)
        const int64_t first = ih * w * px + tap_float(a);
        taps[t] = first * 4;
        reach = std::max(reach, first + (dt.run - 1) * dt.step + 1);
      }
    }
  }
  // The input of a call whose first pixel reads column `col` (>= 0); in a row with taps
  // outside the image, those read the zero row, at an offset from the call's input.
  auto set_taps = [&](int64_t col) {
    const float* base = x + (base_row * w + col) * px;
    for (int64_t r = 0, t = 0; outside && r < d.kernel_h; ++r) {
      const int64_t ih = ih0 + r * d.dilation_h;
      for (int64_t a = 0; a < dt.per_row; ++a, ++t)
        if (ih < 0 || ih >= d.in_height)
          taps[t] = reinterpret_cast<intptr_t>(zero_row_.data() + zero_row_float(a)) -
                    reinterpret_cast<intptr_t>(base);
    }
    return base;
  };
  gk_pointwise_args args;
  // A tap's run of contiguous channels (step 1) in whole 8s goes through the kernels'
  // unrolled 8-channel loop (its blocks 8 floats apart: the run's continuation) rather than
  // their channel-at-a-time one, whose loop control is a fifth of its instructions.
  const bool whole_blocks = dt.step == 1 && dt.run % 8 == 0;
  args.full_blocks = whole_blocks ? dt.run / 8 : 0, args.tail_channels = whole_blocks ? 0 : dt.run;
  args.x_block_stride = 8, args.x_row_stride = sw * px, args.x_channel_stride = dt.step;
  const int64_t y_px = y_pixel_stride(), y_block = y_block_stride();
  args.y_block_stride = y_block, args.y_row_stride = y_px;
  args.bias = nullptr, args.activation = activation_, args.accumulate = add_;
  args.tap_offsets = outside ? taps : row_taps_.data(), args.taps = d.kernel_h * dt.per_row;
  int64_t border_from = hi;  // the row's pixels from here on are border pixels
  for (const Panel& p : panels_) {
    args.w = w_.data() + weights_offset(p, 0);
    args.bias = has_bias_ ? bias_.data() + p.oc0 : nullptr;
    args.skip_last_block = p.skips_last_block();
    float* out = y_at(y, p.oc0, row);
    args.tiles = (hi - lo) / p.mr;
    if (args.tiles > 0) {
      args.x = set_taps(lo * sw - pl);
      args.y = out + lo * y_px;
      p.fn(&args);
    }
    const int64_t ow = lo + args.tiles * p.mr, real = hi - ow;
    if (real == 0) continue;
    if (p.one_pixel_calls_pay(real, args.full_blocks * 8, args.tail_channels)) {
      args.x = set_taps(ow * sw - pl);
      args.tiles = real, args.y = out + ow * y_px;
      p.one_row(&args);
      continue;
    }
    args.tiles = 1;
    if (hi - lo >= p.mr && !add_) {  // (adding, the pixels rewritten would add their residual twice)
      args.x = set_taps((hi - p.mr) * sw - pl);
      args.y = out + (hi - p.mr) * y_px;
      p.fn(&args);
      continue;
    }
    if ((base_row * w + ow * sw - pl) * px + reach + (p.mr - 1) * sw * px > image_floats) {  // past the image
      if (add_) {
        // Gathered now, for this panel only: a border pixel is computed for every panel,
        // which would add the residual twice where another panel did the pixel in place.
        int64_t rest[kMaxPointwiseMr];
        for (int64_t i = 0; i < real; ++i) rest[i] = row + ow + i;
        run_border(x, y, rest, real, stage, &p, &p + 1);
        continue;
      }
      border_from = std::min(border_from, ow);
      continue;
    }
    args.x = set_taps(ow * sw - pl);
    if (add_) copy_tile_pixels(stage, p.mr * 8, out + ow * y_px, y_block, p.blocks, real, 8, y_px);
    args.y = stage, args.y_block_stride = p.mr * 8, args.y_row_stride = 8;
    p.fn(&args);
    args.y_block_stride = y_block, args.y_row_stride = y_px;
    copy_tile_pixels(out + ow * y_px, y_block, stage, p.mr * 8, p.blocks, real, y_px, 8);
  }
  for (int64_t ow = 0; ow < lo; ++ow) border->push_back(row + ow);
  for (int64_t ow = border_from; ow < s_.ow; ++ow) border->push_back(row + ow);
}

// `count` (<= kBorderPixels) pixels of the output, gathered, computed into the workspace
// and copied to their places.
void PointwiseNchw8::run_border(const float* x, float* y, const int64_t* pixel, int64_t count, float* work,
                                const Panel* first, const Panel* last) const {
  float* rows = work + kStagedOutput;
  float* out = rows + kBorderPixels * dense_row_floats();
  if (planar_) {
    gather_dense_pixels_planar(x, pixel, count, rows);
  } else {
    gather_dense_pixels(x, pixel, count, rows);
  }
  gk_pointwise_args args;
  args.x = rows, args.full_blocks = k_rows_ / 8, args.tail_channels = k_rows_ % 8;
  args.x_block_stride = 8, args.x_row_stride = dense_row_floats();
  args.y = out, args.y_block_stride = kBorderPixels * 8;
  args.activation = activation_, args.accumulate = add_;
  for (const Panel* panel = first; panel != last; ++panel) {
    const Panel& p = *panel;
    args.w = w_.data() + weights_offset(p, 0);
    args.bias = has_bias_ ? bias_.data() + p.oc0 : nullptr;
    args.skip_last_block = p.skips_last_block();
    args.tiles = ceil_div(count, p.mr);
    // Pixel i's outputs of block j: at `out`'s (j, i), at y's (block, pixel[i]).
    auto batch_at = [&](int j, int64_t i) { return out + (j * kBorderPixels + i) * 8; };
    auto y_of = [&](int j, int64_t i) { return y_at(y, p.oc0 + j * 8, pixel[i]); };
    if (add_)  // the residual gathered in, where the kernel adds it
      for (int j = 0; j < p.blocks; ++j)
        for (int64_t i = 0; i < count; ++i) std::memcpy(batch_at(j, i), y_of(j, i), 32);
    p.fn(&args);
    for (int j = 0; j < p.blocks; ++j)
      for (int64_t i = 0; i < count; ++i) std::memcpy(y_of(j, i), batch_at(j, i), 32);
  }
}

}  // namespace conv
}  // namespace gk
