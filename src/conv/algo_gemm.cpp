// The GEMM-based algorithms. Per batch item and group, the convolution is
//   Y[oc, pixel] = W[oc, (ic, r, s)] * X'[(ic, r, s), pixel]    (M = ocg, K = icg*R*S, N = OH*OW)
// with W packed once at plan time into the kernel's A micro-panels, and bias + activation
// applied by the GEMM epilogue as each C tile is stored (adding to the output: beta = 1,
// so the residual joins before the epilogue).
//  - gemm_1x1: a 1x1 unpadded conv reads X' = the image itself (no copy); with a stride, the
//    strided pixels gathered into a compact image first (ResNet's downsampling 1x1s).
//  - im2col_gemm: X' is never built. The driver asks for kc x NR micro-panels and an
//    Im2colPacker gathers each one straight from the image. The oh*ow dimension is tiled by
//    the driver's NC block: a tile of T pixels packs to KC x T floats, and T is chosen so
//    that this takes half of L2, T = L2 / 2 / (KC * 4 B), rounded down to a multiple of NR
//    (192 pixels with a 512 KiB L2 and KC = 336). When all of M fits one MC block, the
//    driver packs one KC x NR micro-panel at a time instead, which stays in L1. Either way
//    the workspace is a tile per thread, never the K x OH*OW im2col matrix.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/runtime.h"
#include "common/weights_memory.h"
#include "conv/conv.h"
#include "conv/vec.h"
#include "gemm/partition.h"

namespace gk {
namespace conv {
namespace {

// One image's channels prepared once per run so that every im2col row segment is a single
// contiguous run: zero-padded, and each padded row split into its stride phases,
//   xs[((c * Hp + ih) * stride_w + ph) * L + i] = padded[c][ih][i * stride_w + ph],
// L = ceil(Wp / stride_w). Input column ow * stride_w + s * dil_w of an output pixel is then
// element ow + (s * dil_w) / stride_w of phase (s * dil_w) % stride_w, for every ow of a row.
// The copy costs C * Hp * Wp floats per image, against 2 * M * K * N flops of GEMM.
struct PhaseImage {
  int64_t hp, wp, sw, len;
  explicit PhaseImage(const Shape& s)
      : hp(s.d.in_height + s.d.pad_top + s.d.pad_bottom),
        wp(s.d.in_width + s.d.pad_left + s.d.pad_right),
        sw(s.d.stride_w),
        len((wp + s.d.stride_w - 1) / s.d.stride_w) {}
  int64_t floats(int64_t channels) const { return channels * hp * sw * len; }
  const float* row(const float* xs, int64_t c, int64_t ih, int64_t phase) const {
    return xs + ((c * hp + ih) * sw + phase) * len;
  }
};

// x in NCHW, or in NCHW8 (blocked: each input row of a channel block is first
// deinterleaved into 8 channel rows in `rows`, 8 x in_width floats, then split like a
// planar row).
GK_INLINE void phase_image(const Shape& s, const PhaseImage& pi, const float* x, bool blocked, float* rows,
                           float* xs) {
  const gk_conv_desc& d = s.d;
  const int64_t lanes = blocked ? 8 : 1, w = d.in_width;
  for (int64_t c0 = 0; c0 < s.icg; c0 += lanes) {
    const int64_t nc = std::min(lanes, s.icg - c0);
    for (int64_t ihp = 0; ihp < pi.hp; ++ihp) {
      const int64_t ih = ihp - d.pad_top;
      const bool outside = ih < 0 || ih >= d.in_height;
      // The row of channel (block) c0 (not formed for a padding row: it would point outside x).
      const float* src = outside ? x : x + (c0 * d.in_height + ih * lanes) * w;
      if (blocked && !outside) {
        float* dst[8];
        for (int l = 0; l < 8; ++l) dst[l] = l < nc ? rows + l * w : nullptr;
        deinterleave(src, 8, w, dst);
      }
      for (int64_t l = 0; l < nc; ++l) {
        float* dst = const_cast<float*>(pi.row(xs, c0 + l, ihp, 0));  // its sw phases, len apart
        if (outside) {
          zero_floats(dst, pi.sw * pi.len);
        } else {
          split_phases(pi.sw, blocked ? rows + l * w : src, w, d.pad_left, pi.len, dst);
        }
      }
    }
  }
}

// Compiled for AVX2 and for the baseline: the phase split's 8-wide shuffles, compiled for
// SSE, went through the stack (a sixth of a stride-2 3x3 layer's time).
void phase_image_baseline(const Shape& s, const PhaseImage& pi, const float* x, bool blocked, float* rows,
                          float* xs) {
  phase_image(s, pi, x, blocked, rows, xs);
}
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void phase_image_avx2(const Shape& s, const PhaseImage& pi, const float* x,
                                                          bool blocked, float* rows, float* xs) {
  phase_image(s, pi, x, blocked, rows, xs);
}
#endif
// The phase image of one image's group channels in this thread's workspace (x: NCHW, or
// NCHW8 when `blocked`).
const float* prepare_phase_image(const Shape& s, const PhaseImage& pi, const float* x, bool blocked,
                                 SimdLevel simd, float* xs) {
  const int64_t image = pi.floats(s.icg);
#if defined(__x86_64__)
  if (simd != SimdLevel::Baseline) {
    phase_image_avx2(s, pi, x, blocked, xs + image, xs);
    return xs;
  }
#endif
  (void)simd;
  phase_image_baseline(s, pi, x, blocked, xs + image, xs);
  return xs;
}

// One micro-panel of the virtual im2col matrix from a PhaseImage: row k = (c, r, s) holds,
// for each of the panel's pixels (oh, ow), padded input (c, oh*stride_h + r*dil_h,
// ow*stride_w + s*dil_w). The panel's pixels are split once into runs within one output
// row; each run of each k row is then one contiguous copy.
GK_INLINE void pack_im2col_panel(const Shape& s, const PhaseImage& pi, const float* xs, int64_t k0, int64_t kc,
                                 int64_t j0, int64_t cols, int nr, float* dst) {
  const gk_conv_desc& d = s.d;
  struct Run {
    int64_t t, len, ih0, ow;  // ih0: padded input row of the run for r = 0
  };
  Run runs[kMaxTileFloats];  // at most one run per column
  int nruns = 0;
  for (int64_t t = 0, oh = j0 / s.ow, ow = j0 % s.ow; t < cols; ++oh, ow = 0) {
    const int64_t len = std::min(cols - t, s.ow - ow);
    runs[nruns++] = {t, len, oh * d.stride_h, ow};
    t += len;
  }
  int64_t c = k0 / (d.kernel_h * d.kernel_w), r = k0 / d.kernel_w % d.kernel_h, sx = k0 % d.kernel_w;
  for (int64_t kk = 0; kk < kc; ++kk, dst += nr) {
    const int64_t col = sx * d.dilation_w, phase = col % pi.sw, shift = col / pi.sw;
    const int64_t dr = r * d.dilation_h;
    for (int i = 0; i < nruns; ++i) {
      const Run& run = runs[i];
      copy_run(dst + run.t, pi.row(xs, c, run.ih0 + dr, phase) + run.ow + shift, run.len);
    }
    zero_floats(dst + cols, nr - cols);
    if (++sx == d.kernel_w) {
      sx = 0;
      if (++r == d.kernel_h) r = 0, ++c;
    }
  }
}

using Im2colPackFn = void (*)(const Shape&, const PhaseImage&, const float*, int64_t, int64_t, int64_t, int64_t, int,
                              float*);
void pack_im2col_baseline(const Shape& s, const PhaseImage& pi, const float* xs, int64_t k0, int64_t kc, int64_t j0,
                          int64_t cols, int nr, float* dst) {
  pack_im2col_panel(s, pi, xs, k0, kc, j0, cols, nr, dst);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void pack_im2col_avx2(const Shape& s, const PhaseImage& pi, const float* xs,
                                                      int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                                                      float* dst) {
  pack_im2col_panel(s, pi, xs, k0, kc, j0, cols, nr, dst);
}
#endif

// The im2col packer for the driver, its copies compiled for the kernel's vector level like
// the GEMM's own packing.
class Im2colPacker final : public BPacker {
 public:
  Im2colPacker(const Shape& s, const PhaseImage& pi, const float* xs, SimdLevel simd)
      : s_(s), pi_(pi), xs_(xs), fn_(pack_im2col_baseline) {
#if defined(__x86_64__)
    if (simd != SimdLevel::Baseline) fn_ = pack_im2col_avx2;
#endif
    (void)simd;
  }
  void pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const override {
    fn_(s_, pi_, xs_, k0, kc, j0, cols, nr, dst);
  }

 private:
  const Shape& s_;
  const PhaseImage& pi_;
  const float* xs_;
  Im2colPackFn fn_;
};

// B micro-panels of a 1x1 convolution's input stored NCHW8: B(channel c, pixel p) is
// x[(c / 8) * pixels * 8 + p * 8 + c % 8]. Each block of 8 pixels x 8 channels becomes 8
// channel rows by one 8 x 8 transpose.
GK_INLINE void pack_blocked_panel(const float* x, int64_t pixels, int64_t k0, int64_t kc, int64_t j0, int64_t cols,
                                  int nr, float* dst) {
  for (int64_t k = k0; k < k0 + kc;) {
    const int64_t lane0 = k % 8, lanes = std::min<int64_t>(8 - lane0, k0 + kc - k);
    const float* block = x + (k / 8) * pixels * 8;
    float* rows = dst + (k - k0) * nr;  // row k - k0 + l - lane0 for lane l
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      v8 v[8];
      for (int q = 0; q < 8; ++q) v[q] = load8(block + (j0 + j + q) * 8);
      transpose8x8(v);
      for (int64_t l = 0; l < lanes; ++l) store8(rows + l * nr + j, v[lane0 + l]);
    }
    for (; j < cols; ++j)
      for (int64_t l = 0; l < lanes; ++l) rows[l * nr + j] = block[(j0 + j) * 8 + lane0 + l];
    for (int64_t l = 0; l < lanes; ++l) zero_floats(rows + l * nr + cols, nr - cols);
    k += lanes;
  }
}

using BlockedPackFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int, float*);
void pack_blocked_baseline(const float* x, int64_t px, int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                           float* dst) {
  pack_blocked_panel(x, px, k0, kc, j0, cols, nr, dst);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void pack_blocked_avx2(const float* x, int64_t px, int64_t k0, int64_t kc,
                                                       int64_t j0, int64_t cols, int nr, float* dst) {
  pack_blocked_panel(x, px, k0, kc, j0, cols, nr, dst);
}
#endif

class BlockedImageB final : public BPacker {
 public:
  BlockedImageB(const float* x, int64_t pixels, SimdLevel simd) : x_(x), pixels_(pixels), fn_(pack_blocked_baseline) {
#if defined(__x86_64__)
    if (simd != SimdLevel::Baseline) fn_ = pack_blocked_avx2;
#endif
    (void)simd;
  }
  void pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const override {
    fn_(x_, pixels_, k0, kc, j0, cols, nr, dst);
  }

 private:
  const float* x_;
  int64_t pixels_;
  BlockedPackFn fn_;
};

// The im2col tile (the driver's NC) that keeps a tile's packed panels in half of L2.
int64_t default_tile(const Shape& s, const KernelConfig& cfg) {
  const int64_t l2 = caches().l2;
  const int64_t nr = cfg.kernel->nr;
  const int64_t tile = l2 / 2 / (std::min(cfg.kc, s.k_gemm) * 4) / nr * nr;
  return std::max<int64_t>(nr, std::min(cfg.nc, tile));
}

// Shared by both: packed weights per group, the blocking, and the per-image GEMMs.
class GemmConv final : public Prepared {
 public:
  GemmConv(const Shape& s, const float* weights, const float* bias, bool im2col, int64_t tile)
      : s_(s), im2col_(im2col), cfg_(conv_gemm_config(s.d.layout)) {
    if (bias) bias_.assign(bias, bias + s.d.out_channels);
    const int64_t group_weights = s.ocg * s.k_gemm;
    for (int64_t g = 0; g < s.d.groups; ++g)
      // Owned before the vector grows: a growth that throws must not leak it.
      packed_.push_back(std::make_unique<PackedA>(MatrixView{weights + g * group_weights, s.k_gemm, 1}, s.ocg,
                                                  s.k_gemm, cfg_.kernel->mr));
    if (im2col_) cfg_.nc = tile > 0 ? tile : default_tile(s, cfg_);
  }
  bool ok() const {
    for (const auto& p : packed_)
      if (!p->ok()) return false;
    return true;
  }

  // For im2col the padded, phase-split copy
  // of one image's group channels, for a strided 1x1 its subsampled copy, on the calling
  // thread, and the GEMM driver's packing buffers (shared and per thread), so that a run in
  // the caller's workspace allocates nothing even the first time.
  WorkspaceNeed need() const override {
    const PackingNeed packing = gemm_packing();
    return {round_up(image_floats(), kPackingAlign) + packing.shared_floats, packing.thread_floats};
  }

  // Ungrouped convolutions also run NCHW8 in place, as GEMMs with B packed from the blocked
  // input (gemm_1x1) or from a phase image built from it (im2col_gemm) and C tiles stored
  // blocked, which needs a tile's rows in one channel block (MR divides 8).
  bool native_layout(gk_layout layout) const override {
    if (layout == GK_LAYOUT_NCHW) return true;
    return layout == GK_LAYOUT_NCHW8 && s_.d.groups == 1 && 8 % cfg_.kernel->mr == 0;
  }
  // An NCHW input (GK_CONV_FLAG_NCHW_INPUT) is read as it is: the phase image is built from
  // planes, a 1x1's B packed from them.
  bool reads_nchw_input() const override { return true; }

  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    if (d.layout != GK_LAYOUT_NCHW && native_layout(d.layout)) return run_blocked(input, output, ws);
    const int64_t in_image = d.in_channels * d.in_height * d.in_width;
    const int64_t out_image = d.out_channels * s_.pixels();
    const int threads = ws.cap(threads_for(2.0 * s_.ocg * s_.pixels() * s_.k_gemm));
    for (int64_t n = 0; n < d.batch; ++n) {
      for (int64_t g = 0; g < d.groups; ++g) {
        const float* x = input + n * in_image + g * s_.icg * d.in_height * d.in_width;
        GemmProblem p;
        p.m = s_.ocg, p.n = s_.pixels(), p.k = s_.k_gemm, p.alpha = 1.0f, p.beta = beta();
        p.a = packed_[static_cast<size_t>(g)].get();
        p.c = output + n * out_image + g * s_.ocg * s_.pixels();
        p.rs_c = s_.pixels();
        p.epilogue = make_epilogue(s_, bias_.empty() ? nullptr : bias_.data(), g * s_.ocg);
        gemm_on_image(p, x, false, threads, ws);
      }
    }
  }

 private:
  static constexpr int64_t kPackingAlign = 16;  // floats: the packing buffers start on a cache line

  // The workspace's image part (need()).
  int64_t image_floats() const {
    const bool strided = s_.d.stride_h > 1 || s_.d.stride_w > 1;
    const int64_t row_buffer = blocked_input() ? 8 * s_.d.in_width : 0;  // phase_image's, in NCHW8
    return im2col_ ? PhaseImage(s_).floats(s_.icg) + row_buffer
                   : strided ? round_up(s_.icg, 8) * s_.pixels() : 0;  // the subsampled copy
  }
  // The packing buffers of one image's GEMM (the same for every image and group).
  PackingNeed gemm_packing() const { return packing_need(s_.ocg, s_.pixels(), s_.k_gemm, true, cfg_); }
  // Where they lie in a run's workspace.
  PackingMemory packing_memory(const Workspace& ws) const {
    return {ws.shared + round_up(image_floats(), kPackingAlign), ws.blocks, ws.stride, ws.threads};
  }

  // Adding to the output, C = act(W X' + C + bias): the driver applies beta at the first K
  // block and the epilogue at the last. beta 0 never reads C.
  float beta() const { return s_.adds_to_output() ? 1.0f : 0.0f; }

  // A strided 1x1 convolution reads every stride-th pixel: those are first gathered into a
  // compact image (channels x OH x OW, `lanes` floats per pixel: 1 in NCHW, 8 in NCHW8), so
  // the GEMM's B is plain (im2col would copy and pack the whole input). Stride 1: x itself.
  const float* subsampled(const float* x, int64_t channels, int64_t lanes, float* xs) const {
    const gk_conv_desc& d = s_.d;
    if (d.stride_h == 1 && d.stride_w == 1) return x;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t oh = 0; oh < s_.oh; ++oh) {
        const float* src = x + ((c * d.in_height + oh * d.stride_h) * d.in_width) * lanes;
        float* dst = xs + (c * s_.oh + oh) * s_.ow * lanes;
        for (int64_t ow = 0; ow < s_.ow; ++ow)
          for (int64_t l = 0; l < lanes; ++l) dst[ow * lanes + l] = src[ow * d.stride_w * lanes + l];
      }
    return xs;
  }

  // Runs p with B from one image's group channels x (NCHW, or NCHW8 when `blocked`): the
  // im2col packer on its phase image, or for 1x1 the image (or its subsampled copy), in
  // `ws` (need()).
  void gemm_on_image(GemmProblem& p, const float* x, bool blocked, int threads, const Workspace& ws) const {
    const SimdLevel simd = cfg_.kernel->simd;
    float* const image = ws.shared;
    const PackingMemory packing = packing_memory(ws);
    if (im2col_) {
      const PhaseImage pi(s_);
      const Im2colPacker b(s_, pi, prepare_phase_image(s_, pi, x, blocked, simd, image), simd);
      p.b = &b;
      gemm_packed(p, cfg_, threads, &packing);
    } else if (blocked) {
      const BlockedImageB b(subsampled(x, ceil_div(s_.d.in_channels, 8), 8, image), s_.pixels(), simd);
      p.b = &b;
      gemm_packed(p, cfg_, threads, &packing);
    } else {
      const PlainB b({subsampled(x, s_.icg, 1, image), s_.pixels(), 1});
      p.b = &b;
      gemm_packed(p, cfg_, threads, &packing);
    }
  }

  // Whether run() reads an NCHW8 input (else NCHW).
  bool blocked_input() const {
    return s_.d.layout == GK_LAYOUT_NCHW8 && native_layout(GK_LAYOUT_NCHW8) &&
           !(s_.in_layout == GK_LAYOUT_NCHW && reads_nchw_input());
  }

  // NCHW8 out (and in, or NCHW in): per image one GEMM, then the
  // padding channels of the last block zeroed (the layout's convention; the GEMM writes only
  // real rows).
  void run_blocked(const float* input, float* output, const Workspace& ws) const {
    const gk_conv_desc& d = s_.d;
    const int64_t pixels = s_.pixels(), out_blocks = (d.out_channels + 7) / 8;
    const bool blocked_in = blocked_input();
    const int64_t in_image = (blocked_in ? round_up(d.in_channels, 8) : d.in_channels) * d.in_height * d.in_width;
    const int threads = ws.cap(threads_for(2.0 * s_.ocg * pixels * s_.k_gemm));
    for (int64_t n = 0; n < d.batch; ++n) {
      const float* x = input + n * in_image;
      float* y = output + n * out_blocks * pixels * 8;
      GemmProblem p;
      p.m = s_.ocg, p.n = pixels, p.k = s_.k_gemm, p.alpha = 1.0f, p.beta = beta();
      p.a = packed_[0].get();
      p.c = y, p.c_block_stride = pixels * 8;
      p.epilogue = make_epilogue(s_, bias_.empty() ? nullptr : bias_.data(), 0);
      gemm_on_image(p, x, blocked_in, threads, ws);
      if (d.out_channels % 8) zero_padding_lanes(y + (out_blocks - 1) * pixels * 8, pixels, d.out_channels % 8);
    }
  }

  Shape s_;
  bool im2col_;
  KernelConfig cfg_;  // the kernel the weights were packed for, whatever is active later
  std::vector<float> bias_;
  std::vector<std::unique_ptr<PackedA>> packed_;
};

// An ungrouped 1x1 convolution on NHWC tensors is one row-major GEMM over the whole batch:
// Y[pixel, oc] = X[pixel, ic] W^T[ic, oc] (M = batch x pixels, N = out_channels, K =
// in_channels), A the image itself (a strided one first gathered into compact rows), B the
// OIHW weights read transposed, the bias per column of C. Nothing is converted to NCHW.
class Nhwc1x1 final : public Prepared {
 public:
  Nhwc1x1(const Shape& s, const float* weights, const float* bias)
      : s_(s), cfg_(conv_gemm_config(GK_LAYOUT_NHWC)), w_(weights, weights + s.d.out_channels * s.d.in_channels) {
    if (bias) bias_.assign(bias, bias + s.d.out_channels);
  }
  bool native_layout(gk_layout layout) const override { return layout == GK_LAYOUT_NHWC; }
  WorkspaceNeed need() const override {
    const PackingNeed packing = packing_need(rows(), s_.d.out_channels, s_.d.in_channels, false, cfg_);
    return {round_up(compact_floats(), kAlign) + packing.shared_floats, packing.thread_floats};
  }
  void run(const float* input, float* output, const Workspace& ws) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t ic = d.in_channels, oc = d.out_channels;
    const PlainA a({compact(input, ws.shared), ic, 1});
    const PlainB b({w_.data(), 1, ic});
    GemmProblem p;
    p.m = rows(), p.n = oc, p.k = ic, p.alpha = 1.0f, p.beta = s_.adds_to_output() ? 1.0f : 0.0f;
    p.a = &a, p.b = &b, p.c = output, p.rs_c = oc;
    p.epilogue = make_epilogue(s_, nullptr, 0);
    if (!bias_.empty()) p.epilogue.bias = bias_.data(), p.epilogue.bias_mode = BiasMode::PerColumn;
    const PackingMemory packing{ws.shared + round_up(compact_floats(), kAlign), ws.blocks, ws.stride, ws.threads};
    gemm_packed(p, cfg_, ws.cap(threads_for(2.0 * p.m * p.n * p.k)), &packing);
  }

 private:
  static constexpr int64_t kAlign = 16;  // floats: the packing buffers start on a cache line
  bool strided() const { return s_.d.stride_h > 1 || s_.d.stride_w > 1; }
  int64_t rows() const { return s_.d.batch * s_.pixels(); }
  int64_t compact_floats() const { return strided() ? rows() * s_.d.in_channels : 0; }
  // The pixels a strided 1x1 reads, gathered into compact rows in `buffer`; else x itself.
  const float* compact(const float* x, float* buffer) const {
    if (!strided()) return x;
    const gk_conv_desc& d = s_.d;
    const int64_t ic = d.in_channels;
    float* dst = buffer;
    for (int64_t n = 0; n < d.batch; ++n)
      for (int64_t oh = 0; oh < s_.oh; ++oh)
        for (int64_t ow = 0; ow < s_.ow; ++ow, dst += ic)
          std::memcpy(dst, x + ((n * d.in_height + oh * d.stride_h) * d.in_width + ow * d.stride_w) * ic,
                      static_cast<size_t>(ic) * sizeof(float));
    return buffer;
  }

  Shape s_;
  KernelConfig cfg_;  // the kernel the plan was made for, whatever is active later
  weights_vector<float> w_;
  std::vector<float> bias_;
};

std::unique_ptr<Prepared> prepare_gemm(const Shape& s, const float* w, const float* b, bool im2col,
                                       int64_t tile) {
  if (!im2col && s.d.layout == GK_LAYOUT_NHWC && s.d.groups == 1) return std::make_unique<Nhwc1x1>(s, w, b);
  std::unique_ptr<GemmConv> p(new GemmConv(s, w, b, im2col, tile));
  if (!p->ok()) {
    set_last_error("out of memory packing the convolution weights");
    return nullptr;
  }
  return p;
}

class Gemm1x1 final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_GEMM_1X1; }
  const char* name() const override { return "gemm_1x1"; }
  std::string unusable_reason(const Shape& s) const override {
    const gk_conv_desc& d = s.d;
    if (d.kernel_h != 1 || d.kernel_w != 1) return "kernel is not 1x1";
    if (d.pad_top || d.pad_left || d.pad_bottom || d.pad_right) return "padded";
    return "";
  }
  bool runs_nhwc(const Shape& s) const override { return s.d.groups == 1; }  // Nhwc1x1
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b, int64_t) const override {
    return prepare_gemm(s, w, b, false, 0);
  }
};

class Im2colGemm final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_IM2COL_GEMM; }
  const char* name() const override { return "im2col_gemm"; }
  std::string unusable_reason(const Shape&) const override { return ""; }
  const char* tuning_name() const override { return "tile"; }
  // Half and twice the L2-derived tile; the tile only matters when the output channels of
  // a group span more than one MC block (else panels are packed one by one).
  std::vector<int64_t> tunings(const Shape& s) const override {
    const KernelConfig& cfg = conv_gemm_config(s.d.layout);
    if (s.ocg <= cfg.mc) return {};
    const int64_t t = default_tile(s, cfg), nr = cfg.kernel->nr;
    std::vector<int64_t> v;
    if (t / 2 >= nr) v.push_back(t / 2 / nr * nr);
    v.push_back(2 * t);
    return v;
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b,
                                    int64_t tile) const override {
    return prepare_gemm(s, w, b, true, tile);
  }
};

}  // namespace

const Algorithm* gemm_1x1_algorithm() {
  static const Gemm1x1 a;
  return &a;
}
const Algorithm* im2col_gemm_algorithm() {
  static const Im2colGemm a;
  return &a;
}

}  // namespace conv
}  // namespace gk
