// Winograd F(m x m, 3 x 3) for 3x3 stride-1 convolutions (groups == 1), m = 2, 4, 6.
// Per image, output tiles of m x m are processed in blocks of `nb` tiles:
//   1. input transform: each alpha x alpha input tile d (alpha = m + 2) becomes
//      V = B^T d B; V[xi][ic][t] for the alpha^2 positions xi, channel ic, tile t;
//   2. alpha^2 GEMMs: M[xi] (OC x nb) = U[xi] (OC x IC) * V[xi] (IC x nb), U[xi] the
//      weights transformed (G g G^T) and packed for the micro-kernel once, at plan time;
//   3. output transform: Y = A^T M A per tile, + bias, activation, into the output.
// The transforms work on 8 tiles of a tile row at a time (one per vector lane); the input
// is first copied into a zero-padded plane split into M column phases, so that no tile
// needs bounds checks and each element of 8 tiles is one contiguous load.
// nb: the V block (alpha^2 * IC * nb floats) takes half of L2, in multiples of 8 tiles, but
// at least 48 tiles (see the constructor).
// Multiplications per output: 9 direct; (m + 2)^2 / m^2 with Winograd (F(2): 4, F(4): 2.25,
// F(6): 1.78). Accuracy falls with m (points further from 0): F(2) is as accurate as
// direct; F(4) and F(6) are excluded by GK_CONV_FLAG_HIGH_ACCURACY.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/vec.h"
#include "conv/winograd_matrices.h"

namespace gk {
namespace conv {
namespace {

template <int M>
struct Transforms {
  static constexpr int A = M + 2;
  float at[M][A], bt[A][A];
};

// V = B^T d B for 8 tiles of a tile row. The padded input is stored split into M column
// phases (element column i * M + q at phase q, index i), so element (k, j) of the 8 tiles
// is one contiguous load: base[(k * M + j % M) * len + j / M + lane].
template <int M>
GK_INLINE void input_tile8(const Transforms<M>& tr, const float* base, int64_t len, int lanes,
                           float* v, int64_t xi_stride) {
  constexpr int A = M + 2;
  v8 d[A][A];
  for (int k = 0; k < A; ++k)
    for (int j = 0; j < A; ++j) d[k][j] = load8(base + (k * M + j % M) * len + j / M);
  v8 t[A][A];
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < A; ++j) {
      v8 s = {};
      for (int k = 0; k < A; ++k) s += d[k][j] * tr.bt[i][k];
      t[i][j] = s;
    }
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < A; ++j) {
      v8 s = {};
      for (int k = 0; k < A; ++k) s += t[i][k] * tr.bt[j][k];
      float* dst = v + (i * A + j) * xi_stride;
      if (lanes == 8) {
        store8(dst, s);
      } else {
        for (int l = 0; l < lanes; ++l) dst[l] = s[l];
      }
    }
}

// Y = A^T M A for 8 tiles (M[xi] at m + xi * xi_stride, lanes contiguous), + bias,
// activation, into the output rows (lane l's column offset l * M), only inside [oh_n, ow_n).
template <int M>
GK_INLINE void output_tile8(const Transforms<M>& tr, const float* mt, int64_t xi_stride, int lanes,
                            float bias, gk_activation act, float* out, int64_t row, int64_t oh_n,
                            int64_t ow_n) {
  constexpr int A = M + 2;
  v8 t[M][A];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < A; ++j) {
      v8 s = {};
      for (int k = 0; k < A; ++k) s += load8(mt + (k * A + j) * xi_stride) * tr.at[i][k];
      t[i][j] = s;
    }
  for (int i = 0; i < M && i < oh_n; ++i)
    for (int j = 0; j < M; ++j) {
      v8 s = v8{} + bias;
      for (int k = 0; k < A; ++k) s += t[i][k] * tr.at[j][k];
      for (int l = 0; l < lanes; ++l) {
        if (l * M + j >= ow_n) break;
        float y = s[l];
        if (act != GK_ACT_NONE) y = std::max(y, 0.0f);
        if (act == GK_ACT_RELU6) y = std::min(y, 6.0f);
        out[i * row + l * M + j] = y;
      }
    }
}

// Tiles per block: the V block (alpha^2 * IC * nb floats) in half of L2, in multiples of 8,
// but at least 48: each block streams all alpha^2 transformed weight matrices (OC x IC)
// once, so with many channels a smaller block would be weight-bound. At most all tiles.
template <int M>
int64_t default_tiles(const Shape& s) {
  constexpr int A = M + 2;
  const int64_t l2 = cpu().l2_bytes >= (64 << 10) ? cpu().l2_bytes : (256 << 10);
  const int64_t all = ((s.oh + M - 1) / M) * ((s.ow + M - 1) / M);
  const int64_t nb = std::clamp<int64_t>(l2 / 2 / (A * A * s.d.in_channels * 4) / 8 * 8, 48, 512);
  return std::min(nb, (all + 7) / 8 * 8);
}

// The transforms compiled for AVX2 (x86-64 with AVX2) and for the baseline (SSE, NEON).
template <int M>
struct TransformFns {
  void (*in)(const Transforms<M>&, const float*, int64_t, int, float*, int64_t);
  void (*out)(const Transforms<M>&, const float*, int64_t, int, float, gk_activation, float*, int64_t,
              int64_t, int64_t);
};
template <int M>
void input_baseline(const Transforms<M>& tr, const float* b, int64_t len, int lanes, float* v, int64_t st) {
  input_tile8<M>(tr, b, len, lanes, v, st);
}
template <int M>
void output_baseline(const Transforms<M>& tr, const float* mt, int64_t st, int lanes, float bias,
                     gk_activation act, float* out, int64_t row, int64_t oh_n, int64_t ow_n) {
  output_tile8<M>(tr, mt, st, lanes, bias, act, out, row, oh_n, ow_n);
}
#if defined(__x86_64__)
template <int M>
__attribute__((target("avx2,fma"))) void input_avx2(const Transforms<M>& tr, const float* b, int64_t len,
                                                    int lanes, float* v, int64_t st) {
  input_tile8<M>(tr, b, len, lanes, v, st);
}
template <int M>
__attribute__((target("avx2,fma"))) void output_avx2(const Transforms<M>& tr, const float* mt, int64_t st,
                                                     int lanes, float bias, gk_activation act, float* out,
                                                     int64_t row, int64_t oh_n, int64_t ow_n) {
  output_tile8<M>(tr, mt, st, lanes, bias, act, out, row, oh_n, ow_n);
}
#endif
template <int M>
TransformFns<M> transform_fns() {
#if defined(__x86_64__)
  if (active_config().kernel->simd != SimdLevel::Baseline) return {input_avx2<M>, output_avx2<M>};
#endif
  return {input_baseline<M>, output_baseline<M>};
}

template <int M>
class WinogradConv final : public Prepared {
  static constexpr int A = M + 2;

 public:
  WinogradConv(const Shape& s, const float* weights, const float* bias, int64_t nr_tiles)
      : s_(s), cfg_(active_config()) {
    const WinogradMatrices w = winograd_matrices(M);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < A; ++j) tr_.at[i][j] = float(w.at[size_t(i * A + j)]);
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < A; ++j) tr_.bt[i][j] = float(w.bt[size_t(i * A + j)]);
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
            for (int r = 0; r < 3; ++r) gg[i][k] += w.g[size_t(i * 3 + r)] * g[r * 3 + k];
          }
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j) {
            double v = 0;
            for (int k = 0; k < 3; ++k) v += gg[i][k] * w.g[size_t(j * 3 + k)];
            u[size_t(((i * A + j) * oc + o) * ic + c)] = float(v);
          }
      }
    for (int xi = 0; xi < A * A; ++xi)
      packed_.emplace_back(new PackedA({u.data() + xi * oc * ic, ic, 1}, oc, ic, cfg_.kernel->mr));
    th_ = (s.oh + M - 1) / M, tw_ = (s.ow + M - 1) / M;
    // Padded rows th*M + 2; each split into M phases of len_ = tw + 1 (+ 8: the lanes past
    // the last tile of a row read zeros) elements.
    hp_ = th_ * M + 2, len_ = tw_ + 1 + 8;
    fns_ = transform_fns<M>();
    nb_ = nr_tiles > 0 ? nr_tiles : default_tiles<M>(s);
  }
  bool ok() const {
    for (const auto& p : packed_)
      if (!p->ok()) return false;
    return true;
  }

  int64_t workspace_bytes() const override {
    const int64_t ic = s_.d.in_channels, oc = s_.d.out_channels;
    return 4 * (ic * hp_ * M * len_ + A * A * (ic + oc) * nb_);
  }

  void run(const float* input, float* output) const override {
    const gk_conv_desc& d = s_.d;
    const int64_t ic = d.in_channels, oc = d.out_channels, tiles = th_ * tw_;
    float* padded = scratch(ScratchSlot::ConvImage, ic * hp_ * M * len_);
    float* vbuf = scratch(ScratchSlot::WinogradV, A * A * ic * nb_);
    // + 8: the output transform reads 8 lanes even where fewer tiles remain.
    float* mbuf = scratch(ScratchSlot::WinogradM, A * A * oc * nb_ + 8);
    if (!padded || !vbuf || !mbuf) {
      std::fprintf(stderr, "gemmkit: out of memory for the Winograd workspace\n");
      std::abort();
    }
    const int threads = threads_for(s_.flops() / 4);
    if (threads > 1) note_parallel_region();
    for (int64_t n = 0; n < d.batch; ++n) {
      const float* x = input + n * ic * d.in_height * d.in_width;
      float* y = output + n * oc * s_.pixels();
      pad_image(x, padded, threads);
      for (int64_t t0 = 0; t0 < tiles; t0 += nb_) {
        const int64_t count = std::min(nb_, tiles - t0);
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
        for (int64_t c = 0; c < ic; ++c)
          for_each_tile_group(t0, count, [&](int64_t t, int lanes) {
            const int64_t ty = t / tw_, tx = t % tw_;
            fns_.in(tr_, padded + (c * hp_ + ty * M) * M * len_ + tx, len_, lanes,
                    vbuf + c * nb_ + (t - t0), ic * nb_);
          });
        for (int xi = 0; xi < A * A; ++xi) {
          const PlainB b({vbuf + xi * ic * nb_, nb_, 1});
          GemmProblem p;
          p.m = oc, p.n = count, p.k = ic, p.alpha = 1.0f, p.beta = 0.0f;
          p.a = packed_[size_t(xi)].get(), p.b = &b;
          p.c = mbuf + xi * oc * nb_, p.rs_c = nb_;
          gemm_packed(p, cfg_, threads);
        }
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
        for (int64_t o = 0; o < oc; ++o)
          for_each_tile_group(t0, count, [&](int64_t t, int lanes) {
            const int64_t ty = t / tw_, tx = t % tw_;
            fns_.out(tr_, mbuf + o * nb_ + (t - t0), oc * nb_, lanes,
                     bias_.empty() ? 0.0f : bias_[size_t(o)], d.activation,
                     y + (o * s_.oh + ty * M) * s_.ow + tx * M, s_.ow, s_.oh - ty * M, s_.ow - tx * M);
          });
      }
    }
  }

 private:
  // Calls f(t, lanes) for groups of up to 8 consecutive tiles of [t0, t0 + count) that lie
  // in one tile row.
  template <typename F>
  void for_each_tile_group(int64_t t0, int64_t count, F&& f) const {
    for (int64_t t = t0; t < t0 + count;) {
      const int64_t lanes = std::min<int64_t>({8, t0 + count - t, tw_ - t % tw_});
      f(t, int(lanes));
      t += lanes;
    }
  }

  // The input zero-padded to hp_ rows and split into M column phases: row r, phase q,
  // index i holds padded column i * M + q, so every tile (and every lane) reads inside.
  void pad_image(const float* x, float* padded, int threads) const {
    const gk_conv_desc& d = s_.d;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int64_t c = 0; c < d.in_channels; ++c)
      for (int64_t r = 0; r < hp_; ++r) {
        const int64_t ih = r - d.pad_top;
        for (int64_t q = 0; q < M; ++q) {
          float* dst = padded + ((c * hp_ + r) * M + q) * len_;
          if (ih < 0 || ih >= d.in_height) {
            zero_run(dst, len_);
            continue;
          }
          // Index i is input column i * M + q - pad_left: inside for i in [lo, hi).
          const int64_t first = q - d.pad_left;
          const int64_t lo = first >= 0 ? 0 : std::min<int64_t>(len_, (-first + M - 1) / M);
          const int64_t hi = std::max(lo, std::min<int64_t>(len_, (d.in_width - first + M - 1) / M));
          gather_padded(dst, x + (c * d.in_height + ih) * d.in_width + first, M, lo, hi, len_);
        }
      }
  }

  Shape s_;
  KernelConfig cfg_;
  Transforms<M> tr_;
  std::vector<float> bias_;
  std::vector<std::unique_ptr<PackedA>> packed_;
  TransformFns<M> fns_;
  int64_t th_, tw_, hp_, len_, nb_;
};

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
  const char* tuning_name() const override { return "nr_tiles"; }
  // Half and twice the default block, when there are that many tiles.
  std::vector<int64_t> tunings(const Shape& s) const override {
    const int64_t nb = default_tiles<M>(s), all = ((s.oh + M - 1) / M) * ((s.ow + M - 1) / M);
    std::vector<int64_t> t;
    if (nb / 2 >= 16) t.push_back(nb / 2 / 8 * 8);
    if (2 * nb <= (all + 7) / 8 * 8) t.push_back(2 * nb);
    return t;
  }
  std::unique_ptr<Prepared> prepare(const Shape& s, const float* w, const float* b,
                                    int64_t nr_tiles) const override {
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
