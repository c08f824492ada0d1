// Ungrouped convolutions on NCHW8 tensors on the ISA's pointwise kernels (KernelInfo::
// pointwise): MR pixels x NR output channels per call, the input broadcast from a blocked
// image ([channel block][pixel][8]) and vectors of 8 output channels stored straight into
// the NCHW8 output (src/arch/x86_64/pointwise_avx2.inc).
//  - 1x1, stride 1: the kernels read the input image itself (nothing is copied).
//  - any other kernel, stride, padding or dilation: im2col, a pixel chunk at a time, into a
//    blocked buffer whose "channels" are (tap, input channel): each tap of a pixel copies
//    whole 8-channel vectors (a run of pixels along an input row is one copy), so building
//    a chunk costs a vector copy per (tap, channel block, pixel) against 8 x NR FMAs. NHWC
//    in and out: the chunk pixel-major instead, a copy of a pixel's channels per tap, the
//    outputs stored into the NHWC rows (gathers_nhwc).
//  - under 8 input channels (RGB stems): direct, the kernels read the image in place
//    through per-tap offsets (run_direct); only the pixels whose taps cross the left or
//    right padding are gathered (a row's taps above or below the image read a zero row).
//    The image may be NCHW there (GK_CONV_FLAG_NCHW_INPUT): 3 planes rather than 8-channel
//    pixels, 3/8 of the bytes; a tap is then a (kernel row, channel), its run of K rows the
//    kernel columns (direct_taps). Or NHWC: pixels C floats apart instead of 8, the outputs
//    stored into the NHWC rows (writes_nhwc_rows).
#pragma once
#include <cstdint>
#include <vector>

#include "arch/ukernel.h"
#include "common/aligned_vector.h"
#include "common/weights_memory.h"
#include "conv/conv.h"

namespace gk {
namespace conv {

// Whether the `pixels` (< MR) past the last whole tile of kernel `k` run faster as
// one-pixel calls than as one more whole tile, for K rows of `blocked` channels in 8-channel
// blocks and `tail` others.
bool one_pixel_calls_pay(const KernelInfo::Pointwise& k, int64_t pixels, int64_t blocked, int64_t tail);

class PointwiseNchw8 {
 public:
  // Whether `kernel` has pointwise kernels and they serve `s` (ungrouped). Else gemm_1x1
  // / im2col_gemm run NCHW8 as GEMMs with B packed from the blocked image.
  static bool usable(const KernelInfo& kernel, const Shape& s);
  // Whether `s` runs direct (under 8 input channels, not a 1x1 in place), else on the
  // image in place (1x1) or on im2col chunks.
  static bool runs_direct(const Shape& s);

  // Whether `s` runs NHWC in and out: a 1x1 in place, the image's rows read in place, the
  // outputs stored into the NHWC rows (a panel past the last channel through a staged tile).
  static bool reads_nhwc(const Shape& s);
  // Whether `s` runs NHWC in and out on im2col chunks (8 or more input channels, not a 1x1
  // in place): each pixel's taps gathered from the rows, a copy of its channels per tap,
  // the outputs stored into the NHWC rows as reads_nhwc's.
  static bool gathers_nhwc(const Shape& s);
  // Either: NHWC in and out, the outputs stored into the rows by run_tiles_nhwc.
  static bool nhwc_in_place(const Shape& s) { return reads_nhwc(s) || gathers_nhwc(s); }
  // Whether `s` runs direct (an RGB stem) from an NHWC or NCHW input (both read in place)
  // into an NHWC output, the outputs stored into its rows: ungrouped, whole 8-channel
  // blocks of output channels (every panel's channels real).
  static bool writes_nhwc_rows(const Shape& s);
  // Whether `s` can run direct on whole channel blocks (direct_on_blocks): NCHW8 input,
  // channels a multiple of 8, not a 1x1 in place.
  static bool direct_on_blocks_serves(const Shape& s);
  // Where it serves and pays (rows wide enough).
  static bool direct_on_blocks_pays(const Shape& s);

  // weights: OIHW; bias: nullptr or out_channels. direct_on_blocks: run direct rather than
  // on im2col chunks where that pays, a tap per (kernel position, channel block); asked for
  // few channels (a grouped convolution's super-groups), where gathering the chunks costs
  // as much as the arithmetic.
  PointwiseNchw8(const KernelInfo& kernel, const Shape& s, const float* weights, const float* bias,
                 bool direct_on_blocks = false);

  // One image, y NCHW8 and x NCHW8, or NCHW where reads_nchw_input(), or both NHWC where
  // reads_nhwc(), or y NHWC (x NHWC or NCHW) where writes_nhwc_rows(); the padding
  // channels of an NCHW8 y's last block are zeroed.
  // ws: one block of workspace_floats() per thread (threads <= ws.threads).
  void run(const float* x, float* y, int threads, const Workspace& ws) const;
  // Under 8 input channels with an NCHW input (GK_CONV_FLAG_NCHW_INPUT): the image's planes
  // are read in place, a tap per (kernel row, channel).
  bool reads_nchw_input() const { return planar_; }
  // Workspace per thread (the im2col chunk, the staged partial output tile; direct: also
  // its taps and border pixel list), in floats.
  int64_t workspace_floats() const;

 private:
  // NR output channels from oc0 on, computed by `fn` MR pixels at a time; its weights are
  // k_rows_ rows of NR floats, each K block's rows contiguous (weights_offset).
  struct Panel {
    int64_t oc0;
    int mr, nr;
    gk_pointwise_fn fn, one_row;  // one_row: the kernel for single pixels, or nullptr
    gk_pointwise_fn four_rows;    // the kernel for 4 pixels, or nullptr
    int64_t blocks;               // 8-channel blocks stored: nr / 8, or one fewer (PointwisePanel)
    bool skips_last_block() const { return blocks * 8 < nr; }
    bool one_pixel_calls_pay(int64_t pixels, int64_t blocked, int64_t tail) const;
    // How `rest` (< MR) pixels past the whole tiles run: `four` of them in 4-pixel calls,
    // the others in one-pixel calls where those pay, else as one more (staged) whole tile.
    struct Rest {
      int64_t four;
      bool one_pixel_calls;
    };
    Rest rest_calls(int64_t rest, int64_t blocked, int64_t tail) const;
  };
  // The kernel's input strides, floats: between 8-row blocks and between pixels.
  struct Strides {
    int64_t block, pixel;
  };
  bool gathers() const;  // im2col chunks (else the image is read in place)
  bool direct() const { return direct_; }  // run_direct: under 8 input channels, or direct_on_blocks
  int64_t dense_row_floats() const;
  int64_t chunk_floats() const;
  Strides strides() const;
  void gather_chunk(const float* x, int64_t p0, int64_t count, int64_t k0, float* dst) const;
  void gather_chunk_nhwc(const float* x, int64_t p0, int64_t count, int64_t k0, float* dst) const;
  void gather_dense_pixels(const float* x, const int64_t* pixels, int64_t count, float* dst) const;
  void gather_dense_pixels_planar(const float* x, const int64_t* pixels, int64_t count, float* dst) const;
  // Between an input row's pixels: NCHW 1, NHWC the channels, NCHW8 8.
  int64_t pixel_floats() const { return planar_ ? 1 : nhwc_in_ ? s_.d.in_channels : 8; }
  // A direct call's taps per kernel row, each a run of `run` K rows `step` floats apart.
  struct DirectTaps {
    int64_t per_row, run, step;
  };
  DirectTaps direct_taps() const;
  // Tap a of a kernel row: its first float from a pixel's input column in that row; and in
  // the zero row.
  int64_t tap_float(int64_t a) const;
  int64_t zero_row_float(int64_t a) const;
  int64_t image_floats() const;  // one image's input
  // On the direct path: where output channel oc0's block of pixel `pixel` lies (y: one
  // image's output), and the floats between a block's pixels and between a pixel's blocks:
  // NCHW8, or NHWC rows (writes_nhwc_rows).
  float* y_at(float* y, int64_t oc0, int64_t pixel) const;
  int64_t y_pixel_stride() const { return direct_nhwc_rows_ ? s_.d.out_channels : 8; }
  int64_t y_block_stride() const { return direct_nhwc_rows_ ? 8 : s_.pixels() * 8; }
  int64_t weights_offset(const Panel& p, int64_t k0) const;  // in w_
  int64_t panels_width() const;  // the panels' columns (the output channels rounded up)
  void pack_weights(const float* weights);  // OIHW
  // Weights the kernel fetches into L2 while it runs a panel's tiles (see gk_pointwise_args):
  // by default the next panel's rows of the block, from the second tile on; with `panel`,
  // that one's rows from `skip` bytes on, from the first tile on (the next group's, see
  // run_gathered).
  struct Fetch {
    const Panel* panel = nullptr;
    int64_t skip = 0;
  };
  gk_pointwise_args block_args(const Panel& p, int64_t k0, Fetch fetch) const;
  void run_tiles(const Panel& p, int64_t k0, const float* a, Strides st, float* y, int64_t p0, int64_t p1,
                 float* stage, Fetch fetch) const;
  void run_tiles_nhwc(const Panel& p, int64_t k0, const float* a, int64_t a_row, float* y, int64_t p0, int64_t p1,
                      float* stage, Fetch fetch) const;
  int64_t run_tiles_into_rows(const Panel& p, gk_pointwise_args args, const float* a, int64_t a_row, float* out,
                              int64_t pixels) const;
  bool nhwc_copies_rows() const;
  int64_t nhwc_copied_row() const;
  int64_t nhwc_chunk_at() const;
  int64_t nhwc_rows_copy_floats() const;
  void copy_nhwc_rows(const float* a, int64_t count, int64_t k0, float* dst) const;
  // The border pixels waiting for run_border, in a thread's workspace (no heap memory).
  struct PixelList {
    int64_t* data;
    int64_t size;
    void push_back(int64_t p) { data[size++] = p; }
    void drop_front(int64_t n);
  };
  int64_t direct_lists_floats() const;  // a direct thread's taps and PixelList, in floats
  void run_gathered(const float* x, float* y, int threads, const Workspace& ws) const;
  int64_t nhwc_chunk_pixels(int threads) const;
  bool nhwc_splits_pixels() const;
  void run_direct(const float* x, float* y, int threads, const Workspace& ws) const;
  void run_direct_row(const float* x, float* y, int64_t oh, int64_t* taps, float* stage, PixelList* border) const;
  void zero_padding_channels(float* y, int64_t p0, int64_t p1) const;
  // Panels [first, last) of `count` (<= kBorderPixels) gathered pixels.
  void run_border(const float* x, float* y, const int64_t* pixels, int64_t count, float* work, const Panel* first,
                  const Panel* last) const;

  Shape s_;
  int activation_;
  bool has_bias_;
  bool add_;     // adding to the output: the kernels accumulate from the first K block on
  bool direct_;
  bool nhwc_;    // nhwc_in_place
  bool planar_;  // direct, on an NCHW input
  bool direct_nhwc_rows_;  // writes_nhwc_rows
  bool nhwc_in_;           // direct on an NHWC input, read in place (under 8 channels)
  int64_t in_blocks_, taps_;
  int64_t k_rows_;          // rows of a panel's weights: in_channels, or taps x channel_stride_
  int64_t channel_stride_;  // im2col rows per tap: in_channels below 8, else whole blocks
  std::vector<Panel> panels_;
  int64_t min_groups_;              // panel groups whose weights fit half of L2 (when weights_fit)
  int64_t chunk_pixels_;            // pixels per work item (a multiple of every MR; NHWC may take fewer)
  int64_t k_block_;                 // rows per K block (k_rows_ when the weights fit)
  bool block_major_weights_ = false;  // w_ K block by K block (weights_offset)
  weights_vector<float> w_;
  aligned_vector<float> bias_;  // padded to the panels' width
  aligned_vector<float> zero_row_;  // direct: what taps above or below the image read
  // Direct: the columns of a row run in place, [direct_lo_, direct_hi_); for a row whose
  // kernel rows lie inside the image, the taps' byte offsets from its first tap row and the
  // furthest float a pixel's taps read past its column there.
  int64_t direct_lo_ = 0, direct_hi_ = 0, row_reach_ = 0;
  std::vector<int64_t> row_taps_;
  // gather_chunk: per kernel column, the output columns [lo, hi) that read inside the row.
  struct ColumnRange {
    int64_t lo, hi;
  };
  std::vector<ColumnRange> gather_columns_;
};

}  // namespace conv
}  // namespace gk
