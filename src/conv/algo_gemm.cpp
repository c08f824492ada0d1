// The GEMM-based algorithms. Per batch item and group, the convolution is
//   Y[oc, pixel] = W[oc, (ic, r, s)] * X'[(ic, r, s), pixel]    (M = ocg, K = icg*R*S, N = OH*OW)
// with W packed once at plan time into the kernel's A micro-panels, and bias + activation
// applied by the GEMM epilogue as each C tile is stored.
//  - gemm_1x1: a 1x1, stride-1, unpadded conv reads X' = the image itself (no copy).
//  - im2col_gemm: X' is never built. The driver asks for kc x NR micro-panels and an
//    Im2colPacker gathers each one straight from the image. The oh*ow dimension is tiled by
//    the driver's NC block: a tile of T pixels packs to KC x T floats, and T is chosen so
//    that this takes half of L2, T = L2 / 2 / (KC * 4 B), rounded down to a multiple of NR
//    (192 pixels with a 512 KiB L2 and KC = 336). When all of M fits one MC block, the
//    driver packs one KC x NR micro-panel at a time instead, which stays in L1. Either way
//    the workspace is a tile per thread, never the K x OH*OW im2col matrix.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstring>

#include "common/runtime.h"
#include "conv/conv.h"

namespace gk {
namespace conv {
namespace {

typedef float v8 __attribute__((vector_size(32)));

// Copies n floats with 8-wide moves (the last one overlapping), no library call: the runs
// here are a few dozen floats, where a memcpy call costs more than the copy.
inline void copy_run(float* __restrict dst, const float* __restrict src, int64_t n) {
  if (n < 8) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  v8 v;
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    std::memcpy(&v, src + i, sizeof v);
    std::memcpy(dst + i, &v, sizeof v);
  }
  std::memcpy(&v, src + n - 8, sizeof v);
  std::memcpy(dst + n - 8, &v, sizeof v);
}

inline void zero_run(float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = 0.0f;
}

// Gathers micro-panels of the virtual im2col matrix of one image (one group's channels):
// row k = (c, r, s) of the panel holds, for each of its pixels (oh, ow), the input at
// (c, oh*stride_h - pad_top + r*dil_h, ow*stride_w - pad_left + s*dil_w), or 0 outside.
// The panel's pixels are split once into runs within one output row; for each k row a
// run is then a zero prefix, a contiguous (or strided) copy, and a zero suffix.
class Im2colPacker final : public BPacker {
 public:
  Im2colPacker(const Shape& s, const float* image) : s_(s), x_(image) {}

  void pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                  float* dst) const override {
    const gk_conv_desc& d = s_.d;
    struct Run {
      int64_t t, len, oh, ow;
    };
    Run runs[kMaxTileFloats];  // at most one run per column
    int nruns = 0;
    for (int64_t t = 0, oh = j0 / s_.ow, ow = j0 % s_.ow; t < cols; ++oh, ow = 0) {
      const int64_t len = std::min(cols - t, s_.ow - ow);
      runs[nruns++] = {t, len, oh, ow};
      t += len;
    }
    const int64_t plane = d.in_height * d.in_width, sw = d.stride_w;
    int64_t c = k0 / (d.kernel_h * d.kernel_w), r = k0 / d.kernel_w % d.kernel_h, sx = k0 % d.kernel_w;
    for (int64_t kk = 0; kk < kc; ++kk, dst += nr) {
      const float* image_plane = x_ + c * plane;
      const int64_t row_shift = r * d.dilation_h - d.pad_top;
      const int64_t col_shift = sx * d.dilation_w - d.pad_left;
      for (int i = 0; i < nruns; ++i) {
        const Run& run = runs[i];
        float* out = dst + run.t;
        const int64_t ih = run.oh * d.stride_h + row_shift;
        if (ih < 0 || ih >= d.in_height) {
          zero_run(out, run.len);
          continue;
        }
        const float* in_row = image_plane + ih * d.in_width;
        // Columns q of the run with 0 <= iw0 + q*sw < W: [lo, hi).
        const int64_t iw0 = run.ow * sw + col_shift;
        const int64_t lo = iw0 >= 0 ? 0 : std::min(run.len, (-iw0 + sw - 1) / sw);
        const int64_t last = d.in_width - 1 - iw0;  // largest q*sw in the image
        const int64_t hi = last < 0 ? lo : std::max(lo, std::min(run.len, last / sw + 1));
        zero_run(out, lo);
        if (sw == 1) {
          copy_run(out + lo, in_row + iw0 + lo, hi - lo);
        } else {
          for (int64_t q = lo; q < hi; ++q) out[q] = in_row[iw0 + q * sw];
        }
        zero_run(out + hi, run.len - hi);
      }
      zero_run(dst + cols, nr - cols);
      if (++sx == d.kernel_w) {
        sx = 0;
        if (++r == d.kernel_h) r = 0, ++c;
      }
    }
  }

 private:
  const Shape& s_;
  const float* x_;
};

// Shared by both: packed weights per group, the blocking, and the per-image GEMMs.
class GemmConv final : public Prepared {
 public:
  GemmConv(const Shape& s, const float* weights, const float* bias, bool im2col)
      : s_(s), im2col_(im2col), cfg_(active_config()) {
    if (bias) bias_.assign(bias, bias + s.d.out_channels);
    const int64_t group_weights = s.ocg * s.k_gemm;
    for (int64_t g = 0; g < s.d.groups; ++g)
      packed_.emplace_back(new PackedA({weights + g * group_weights, s.k_gemm, 1}, s.ocg, s.k_gemm,
                                       cfg_.kernel->mr));
    const int64_t l2 = cpu().l2_bytes >= (64 << 10) ? cpu().l2_bytes : (256 << 10);
    const int64_t tile = l2 / 2 / (std::min(cfg_.kc, s.k_gemm) * 4) / cfg_.kernel->nr * cfg_.kernel->nr;
    if (im2col_) cfg_.nc = std::max<int64_t>(cfg_.kernel->nr, std::min(cfg_.nc, tile));
  }
  bool ok() const {
    for (const auto& p : packed_)
      if (!p->ok()) return false;
    return true;
  }

  // The driver's packing buffer: one KC x NR micro-panel when all of M fits one MC block,
  // else the KC x NC tile (the weights are pre-packed, so no A block).
  int64_t workspace_bytes() const override {
    const int64_t nr = cfg_.kernel->nr, kc = std::min(cfg_.kc, s_.k_gemm);
    const int64_t nc = std::min(cfg_.nc, (s_.pixels() + nr - 1) / nr * nr);
    return 4 * kc * (s_.ocg <= cfg_.mc ? nr : nc);
  }

  void run(const float* input, float* output) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t in_image = d.in_channels * d.in_height * d.in_width;
    const int64_t out_image = d.out_channels * s_.pixels();
    const int threads = threads_for(2.0 * s_.ocg * s_.pixels() * s_.k_gemm);
    for (int64_t n = 0; n < d.batch; ++n) {
      for (int64_t g = 0; g < d.groups; ++g) {
        const float* x = input + n * in_image + g * s_.icg * d.in_height * d.in_width;
        GemmProblem p;
        p.m = s_.ocg, p.n = s_.pixels(), p.k = s_.k_gemm, p.alpha = 1.0f, p.beta = 0.0f;
        p.a = packed_[static_cast<size_t>(g)].get();
        p.c = output + n * out_image + g * s_.ocg * s_.pixels();
        p.rs_c = s_.pixels();
        p.epilogue = make_epilogue(s_, bias_.empty() ? nullptr : bias_.data(), g * s_.ocg);
        if (im2col_) {
          const Im2colPacker b(s_, x);
          p.b = &b;
          gemm_packed(p, cfg_, threads);
        } else {
          const PlainB b({x, d.in_height * d.in_width, 1});
          p.b = &b;
          gemm_packed(p, cfg_, threads);
        }
      }
    }
  }

 private:
  Shape s_;
  bool im2col_;
  KernelConfig cfg_;  // the kernel the weights were packed for, whatever is active later
  std::vector<float> bias_;
  std::vector<std::unique_ptr<PackedA>> packed_;
};

std::unique_ptr<Prepared> prepare_gemm(const Shape& s, const float* w, const float* b, bool im2col) {
  std::unique_ptr<GemmConv> p(new GemmConv(s, w, b, im2col));
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
    if (d.stride_h != 1 || d.stride_w != 1) return "stride is not 1";
    if (d.pad_top || d.pad_left || d.pad_bottom || d.pad_right) return "padded";
    return "";
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b) const override {
    return prepare_gemm(s, w, b, false);
  }
};

class Im2colGemm final : public Algorithm {
 public:
  gk_conv_algo id() const override { return GK_CONV_ALGO_IM2COL_GEMM; }
  const char* name() const override { return "im2col_gemm"; }
  std::string unusable_reason(const Shape&) const override { return ""; }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b) const override {
    return prepare_gemm(s, w, b, true);
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
