// Convolution layers of ResNet-18, ResNet-50, MobileNetV2, ShuffleNetV2 and VGG-16 (batch 1,
// 224x224, perf/networks.csv), each with bias + ReLU, 1 and 2 threads, interleaved layer by
// layer against three baselines in the same process:
//   im2col+openblas  the Caffe way: the full K x OH*OW im2col matrix, OpenBLAS sgemm per
//                    group (dlopen'ed), then a bias + ReLU pass;
//   onednn-nchw      oneDNN (Debian's libdnnl) with NCHW activations;
//   onednn-blocked   oneDNN in its preferred (blocked) layouts, reordered outside the timing,
//                    as a user who keeps activations blocked between layers would run it.
// gemmkit runs AUTO in NCHW. Reports per-network totals (layer time x its count), per-layer
// times, and gemmkit's workspace against the full im2col matrix. On the 3x3 stride-1
// layers it also times each Winograd variant and gemmkit's im2col_gemm, forced, in the
// same interleaved rounds (per-network totals, effective GFLOP/s counted with direct
// convolution's FLOPs), and on a few representative layers the time share of the three
// Winograd phases (input transform, GEMMs, output transform), one thread.
//
// Rounds are many and short (7 of 20 ms per point by default): this VM's speed changes in
// phases of a second or more (the same plan 0.27 or 0.39 ms), so 3 rounds of 50 ms
// left a layer's median to which phase each library's runs fell in; ShuffleNetV2's total
// moved 3% between FASTRUN and AUTO on identical plans.
//
//   bench_conv [--rounds=N] [--min-time=S] [--threads=1,2] [--quick] [--out=DIR] [--layers=CSV]
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <set>
#include <sstream>

#include "common/aligned_vector.h"  // every tensor 64-byte aligned, as oneDNN allocates its own
#include "conv/conv.h"  // PhaseTimes: the Winograd phase breakdown (internal)
#include "gemmkit.h"
#include "harness.h"
#include "networks.h"

namespace {

using gkbench::arg;
using gkbench::median;

struct Layer {
  std::string net, name;
  gk_conv_desc d;
  int count;
  int64_t oh = 0, ow = 0;
  double flops() const {
    return 2.0 * d.batch * d.out_channels * oh * ow * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w;
  }
  int64_t k() const { return d.in_channels / d.groups * d.kernel_h * d.kernel_w; }
};

std::vector<Layer> read_layers(const std::string& path) {
  std::vector<Layer> layers;
  for (const gkbench::NetworkLayer& n : gkbench::read_network_layers(path)) {
    Layer l;
    l.net = n.net, l.name = n.layer, l.d = n.d, l.count = n.count;
    l.d.activation = GK_ACT_RELU;
    gk_conv_output_size(&l.d, &l.oh, &l.ow);
    layers.push_back(l);
  }
  return layers;
}

// Tensors: cache-line aligned for every library alike. oneDNN's own memory objects (its
// blocked layouts) are; a plain std::vector starts 16 bytes past a line, which split half
// of gemmkit's 32-byte loads and stores across two lines (a 960-channel 7x7 depthwise layer
// 10% slower) and would be measured against oneDNN's aligned ones.
using Tensor = gk::aligned_vector<float>;

Tensor random_data(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// One layer's tensors, shared by every library's benchmark of it.
struct LayerData {
  Tensor x, w, bias, y;
  explicit LayerData(const Layer& l)
      : x(random_data(size_t(l.d.batch * l.d.in_channels * l.d.in_height * l.d.in_width), 1, 0, 1)),
        w(random_data(size_t(l.d.out_channels * l.k()), 2, -0.1f, 0.1f)),
        bias(random_data(size_t(l.d.out_channels), 3, -0.1f, 0.1f)),
        y(size_t(l.d.batch * l.d.out_channels * l.oh * l.ow)) {}
};

// The Caffe way: full im2col, one sgemm per group, then bias + ReLU.
class Im2colBlas {
 public:
  Im2colBlas(const Layer& l, const gkbench::OpenBlas& ob)
      : l_(l), ob_(ob), col_(size_t(l.k() * l.oh * l.ow)) {}
  void run(const LayerData& t) {
    const gk_conv_desc& d = l_.d;
    const int64_t pixels = l_.oh * l_.ow, icg = d.in_channels / d.groups, ocg = d.out_channels / d.groups;
    for (int64_t g = 0; g < d.groups; ++g) {
      for (int64_t c = 0; c < icg; ++c)
        for (int64_t r = 0; r < d.kernel_h; ++r)
          for (int64_t s = 0; s < d.kernel_w; ++s) {
            float* row = col_.data() + ((c * d.kernel_h + r) * d.kernel_w + s) * pixels;
            const float* plane = t.x.data() + (g * icg + c) * d.in_height * d.in_width;
            for (int64_t oh = 0; oh < l_.oh; ++oh)
              for (int64_t ow = 0; ow < l_.ow; ++ow) {
                const int64_t ih = oh * d.stride_h - d.pad_top + r * d.dilation_h;
                const int64_t iw = ow * d.stride_w - d.pad_left + s * d.dilation_w;
                row[oh * l_.ow + ow] = (ih >= 0 && ih < d.in_height && iw >= 0 && iw < d.in_width)
                                           ? plane[ih * d.in_width + iw] : 0.0f;
              }
          }
      float* y = const_cast<float*>(t.y.data()) + g * ocg * pixels;
      ob_.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(ocg), int(pixels), int(l_.k()), 1.0f,
                t.w.data() + g * ocg * l_.k(), int(l_.k()), col_.data(), int(pixels), 0.0f, y, int(pixels));
      for (int64_t oc = 0; oc < ocg; ++oc)
        for (int64_t p = 0; p < pixels; ++p)
          y[oc * pixels + p] = std::max(0.0f, y[oc * pixels + p] + t.bias[size_t(g * ocg + oc)]);
    }
  }
  int64_t workspace_bytes() const { return int64_t(col_.size()) * 4; }

 private:
  Layer l_;
  gkbench::OpenBlas ob_;
  Tensor col_;
};

// oneDNN convolution, NCHW or in the layouts it prefers (format_tag::any).
class OneDnnConv {
 public:
  OneDnnConv(const Layer& l, const LayerData& t, bool blocked) : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const gk_conv_desc& d = l.d;
    const int64_t g = d.groups;
    const dnnl::memory::dims src{d.batch, d.in_channels, d.in_height, d.in_width};
    const dnnl::memory::dims dst{d.batch, d.out_channels, l.oh, l.ow};
    const dnnl::memory::dims wei = g > 1 ? dnnl::memory::dims{g, d.out_channels / g, d.in_channels / g, d.kernel_h, d.kernel_w}
                                         : dnnl::memory::dims{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
    const auto act_tag = blocked ? tag::any : tag::nchw;
    dnnl::convolution_forward::desc cd(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        {src, dt::f32, act_tag}, {wei, dt::f32, tag::any}, {{d.out_channels}, dt::f32, tag::x},
        {dst, dt::f32, act_tag}, {d.stride_h, d.stride_w}, {d.dilation_h - 1, d.dilation_w - 1},
        {d.pad_top, d.pad_left}, {d.pad_bottom, d.pad_right});
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::convolution_forward::primitive_desc pd(cd, attr, eng_);
    impl_ = pd.impl_info_str();
    src_ = dnnl::memory(pd.src_desc(), eng_);
    wei_ = dnnl::memory(pd.weights_desc(), eng_);
    bias_ = dnnl::memory(pd.bias_desc(), eng_);
    dst_ = dnnl::memory(pd.dst_desc(), eng_);
    // User data (NCHW / OIHW) reordered into the primitive's formats once, outside timing.
    dnnl::memory user_src({src, dt::f32, tag::nchw}, eng_, const_cast<float*>(t.x.data()));
    dnnl::memory user_wei({wei, dt::f32, g > 1 ? tag::goihw : tag::oihw}, eng_, const_cast<float*>(t.w.data()));
    dnnl::reorder(user_src, src_).execute(strm_, user_src, src_);
    dnnl::reorder(user_wei, wei_).execute(strm_, user_wei, wei_);
    std::memcpy(bias_.get_data_handle(), t.bias.data(), t.bias.size() * 4);
    strm_.wait();
    conv_ = dnnl::convolution_forward(pd);
  }
  void run() {
    conv_.execute(strm_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_BIAS, bias_}, {DNNL_ARG_DST, dst_}});
    strm_.wait();
  }
  const std::string& impl() const { return impl_; }

 private:
  dnnl::engine eng_;
  dnnl::stream strm_;
  dnnl::memory src_, wei_, bias_, dst_;
  dnnl::primitive conv_;
  std::string impl_;
};

// gemmkit-nchw8: AUTO with activations in NCHW8, the blocked layout to set against
// oneDNN's (its depthwise and 1x1 convolutions run it in place; others convert inside).
// gemmkit-fastrun-nchw8: FASTRUN in NCHW8 (profiled in that layout).
// A network's first layer (an RGB image in) takes its input NCHW in both, as oneDNN's
// blocked stem does (format_tag::any picks nchw for 3 channels): GK_CONV_FLAG_NCHW_INPUT.
gk_conv_desc nchw8_desc(const Layer& l) {
  gk_conv_desc d = l.d;
  d.layout = GK_LAYOUT_NCHW8;
  if (d.in_channels < 8) d.flags |= GK_CONV_FLAG_NCHW_INPUT;
  return d;
}
const char* kLibs[] = {"gemmkit",         "im2col+openblas", "onednn-nchw",          "onednn-blocked",
                       "gemmkit-fastrun", "gemmkit-nchw8",   "gemmkit-fastrun-nchw8"};
constexpr int kNumLibs = 7;

// The forced gemmkit algorithms timed on 3x3 stride-1 layers.
struct Forced {
  const char* lib;
  gk_conv_algo algo;
};
const Forced kForced[] = {{"winograd-f23", GK_CONV_ALGO_WINOGRAD_F23},
                          {"winograd-f43", GK_CONV_ALGO_WINOGRAD_F43},
                          {"winograd-f63", GK_CONV_ALGO_WINOGRAD_F63},
                          {"im2col-gemm", GK_CONV_ALGO_IM2COL_GEMM}};
constexpr int kNumForced = 4, kNumWinograd = 3;

bool winograd_layer(const Layer& l) {
  const gk_conv_desc& d = l.d;
  return d.kernel_h == 3 && d.kernel_w == 3 && d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 &&
         d.dilation_w == 1 && d.groups == 1;
}

// Layers whose Winograd phase shares are reported (when in the layer list).
const char* kPhaseLayers[][2] = {{"vgg16", "features.2"},      {"vgg16", "features.12"},
                                 {"vgg16", "features.24"},     {"resnet18", "layer1.0.conv1"},
                                 {"resnet18", "layer3.0.conv2"}, {"resnet18", "layer4.0.conv2"}};

// Seconds per run of a layer: at least `min_time`, and the time of 4 runs at 100 GFLOP/s
// per thread (direct convolution's FLOPs), up to 0.15 s: a VGG-16 layer
// of 20-30 ms was one run per 20 ms sample, and FASTRUN and AUTO, identical plans, came
// out 8% apart on its total.
double layer_min_time(const Layer& l, int threads, double min_time) {
  return std::max(min_time, std::min(0.15, 4 * l.flops() / (100e9 * threads)));
}

std::string point_name(const Layer& l, int threads, const std::string& lib) {
  return "conv/" + l.net + "/" + l.name + "/t" + std::to_string(threads) + "/" + lib;
}

// Per layer: tensors, the gemmkit plan, the baselines; registered once per thread count.
struct LayerSetup {
  std::unique_ptr<LayerData> data;
  gk_conv_plan* plan = nullptr;
  std::map<int, gk_conv_plan*> fastrun;  // per thread count: Fast-Run measures with them
  std::map<int, double> fastrun_profile_s;  // plan creation time (the profiling)
  std::map<int, gk_conv_plan*> fastrun_nchw8;
  std::unique_ptr<Im2colBlas> caffe;
  // oneDNN fixes a primitive's thread count when it is created: one per thread count.
  std::map<int, std::unique_ptr<OneDnnConv>> dnnl_nchw, dnnl_blocked;
  gk_conv_plan* forced[kNumForced] = {};  // 3x3 stride-1 layers only
  gk_conv_plan* plan_nchw8 = nullptr;
  gk_conv_plan* im2col_nchw8 = nullptr;  // 3x3 stride-1 layers: "NCHW8 without Winograd"
  Tensor x8, y8;  // the layer's tensors in NCHW8
};
const char kIm2colNchw8[] = "im2col-gemm-nchw8";

// What library kLibs[li] ran on a layer at t threads: gemmkit's plan's algorithm (with its
// tuning), oneDNN's implementation, or the im2col baseline.
std::string ran(const LayerSetup& s, int li, int t) {
  switch (li) {
    case 0: return gk_conv_plan_algo_name(s.plan);
    case 1: return "im2col+sgemm";
    case 2: return s.dnnl_nchw.at(t)->impl();
    case 3: return s.dnnl_blocked.at(t)->impl();
    case 4: return gk_conv_plan_algo_name(s.fastrun.at(t));
    case 5: return gk_conv_plan_algo_name(s.plan_nchw8);
    default: return gk_conv_plan_algo_name(s.fastrun_nchw8.at(t));
  }
}
using Samples = std::map<std::string, std::vector<double>>;

// Per network and thread count, totals over the 3x3 stride-1 layers (time x count) of each
// Winograd variant, of the best gemmkit algorithm per layer ("where it wins"), and of the
// baselines; then per layer, each variant's time and effective GFLOP/s.
std::string winograd_report(const std::vector<Layer>& layers, const std::vector<int>& thread_counts,
                            const Samples& samples) {
  auto ms = [&](const Layer& l, int t, const char* lib) { return median(samples.at(point_name(l, t, lib))) * 1e3; };
  std::ostringstream out, rows;
  out << "\n## Winograd on the 3x3 stride-1 layers (ms; effective GFLOP/s counted with direct convolution's FLOPs)\n\n"
      << "| network | threads | layers | F(2x2) | F(4x4) | F(6x6) | im2col_gemm | best gemmkit per layer | "
         "im2col+OpenBLAS | oneDNN blocked | best / oneDNN blocked | best GFLOP/s |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  rows << "\n| network | layer | threads | F(2x2) ms (GFLOP/s) | F(4x4) | F(6x6) | im2col_gemm | im2col+OpenBLAS | "
          "oneDNN blocked |\n|---|---|---|---|---|---|---|---|---|\n";
  std::vector<std::string> nets;
  for (const Layer& l : layers)
    if (winograd_layer(l) && std::find(nets.begin(), nets.end(), l.net) == nets.end()) nets.push_back(l.net);
  for (const std::string& net : nets)
    for (int t : thread_counts) {
      double total[kNumForced] = {}, best = 0, caffe = 0, dnnl = 0, flops = 0;
      int count = 0;
      for (const Layer& l : layers) {
        if (l.net != net || !winograd_layer(l)) continue;
        double layer_best = 1e300;
        rows << "| " << net << " | " << l.name << " | " << t;
        for (int f = 0; f < kNumForced; ++f) {
          const double v = ms(l, t, kForced[f].lib);
          total[f] += v * l.count;
          layer_best = std::min(layer_best, v);
          char cell[64];
          std::snprintf(cell, sizeof cell, " | %.3f (%.0f)", v, l.flops() / (v * 1e6));
          rows << cell;
        }
        const double c = ms(l, t, "im2col+openblas"), o = ms(l, t, "onednn-blocked");
        char cell[64];
        std::snprintf(cell, sizeof cell, " | %.3f | %.3f |\n", c, o);
        rows << cell;
        best += layer_best * l.count, caffe += c * l.count, dnnl += o * l.count, flops += l.flops() * l.count;
        count += l.count;
      }
      char line[512];
      std::snprintf(line, sizeof line, "| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f |\n",
                    net.c_str(), t, count, total[0], total[1], total[2], total[3], best, caffe, dnnl, best / dnnl,
                    flops / (best * 1e6));
      out << line;
    }
  return out.str() + rows.str();
}

// The share of the Winograd phases on a few layers, one thread: each variant run once to
// warm up, then 5 times with the phase clock on (internal API), times summed over the runs.
std::string phase_report(const std::vector<Layer>& layers, const std::vector<LayerSetup>& setups) {
  std::ostringstream out;
  out << "\n## Winograd phases, one thread (input transform incl. padding / GEMMs / output transform)\n\n"
      << "| network | layer | variant | ms per run | input | GEMMs | output |\n|---|---|---|---|---|---|---|\n";
  gk_set_num_threads(1);
  for (size_t i = 0; i < layers.size(); ++i) {
    bool wanted = false;
    for (const auto& p : kPhaseLayers) wanted = wanted || (layers[i].net == p[0] && layers[i].name == p[1]);
    if (!wanted || !setups[i].forced[0]) continue;
    for (int f = 0; f < kNumWinograd; ++f) {
      gk_conv_run(setups[i].forced[f], setups[i].data->x.data(), setups[i].data->y.data());  // warm
      gk::conv::PhaseTimes times;
      gk::conv::set_phase_times(&times);
      constexpr int kRuns = 5;
      for (int r = 0; r < kRuns; ++r) gk_conv_run(setups[i].forced[f], setups[i].data->x.data(), setups[i].data->y.data());
      gk::conv::set_phase_times(nullptr);
      const double sum = times.input_s + times.gemm_s + times.output_s;
      char line[256];
      std::snprintf(line, sizeof line, "| %s | %s | %s | %.3f | %.0f%% | %.0f%% | %.0f%% |\n", layers[i].net.c_str(),
                    layers[i].name.c_str(), kForced[f].lib, sum / kRuns * 1e3, 100 * times.input_s / sum,
                    100 * times.gemm_s / sum, 100 * times.output_s / sum);
      out << line;
    }
  }
  gk_set_num_threads(0);
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = arg(argc, argv, "quick", "") == "1";
  const int rounds = std::stoi(arg(argc, argv, "rounds", quick ? "1" : "7"));
  const double min_time = std::stod(arg(argc, argv, "min-time", "0.02"));  // seconds per run
  const std::string out_dir = arg(argc, argv, "out", "build/bench");
  const std::vector<int> thread_counts = gkbench::thread_list(argc, argv);
  std::vector<Layer> layers = read_layers(arg(argc, argv, "layers", "perf/networks.csv"));
  if (quick) layers.erase(std::remove_if(layers.begin(), layers.end(), [](const Layer& l) { return l.net != "resnet18"; }), layers.end());
  const gkbench::OpenBlas ob = gkbench::load_openblas(arg(argc, argv, "openblas", "libopenblas.so.0"));
  if (!ob.ok()) {
    std::fprintf(stderr, "bench_conv: OpenBLAS %s\n", ob.description.c_str());
    return 1;
  }


  std::vector<LayerSetup> setups(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerSetup& s = setups[i];
    s.data.reset(new LayerData(layers[i]));
    if (gk_conv_plan_create(&layers[i].d, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_AUTO, &s.plan) != GK_OK) {
      std::fprintf(stderr, "bench_conv: %s %s: %s\n", layers[i].net.c_str(), layers[i].name.c_str(), gk_last_error());
      return 1;
    }
    s.caffe.reset(new Im2colBlas(layers[i], ob));
    {
      const gk_conv_desc d8 = nchw8_desc(layers[i]);
      if (gk_conv_plan_create(&d8, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_AUTO, &s.plan_nchw8) != GK_OK) {
        std::fprintf(stderr, "bench_conv: NCHW8 %s: %s\n", layers[i].name.c_str(), gk_last_error());
        return 1;
      }
      const gk_layout in8 = d8.flags & GK_CONV_FLAG_NCHW_INPUT ? GK_LAYOUT_NCHW : GK_LAYOUT_NCHW8;
      s.x8.resize(size_t(gk_tensor_size(in8, d8.batch, d8.in_channels, d8.in_height, d8.in_width)));
      s.y8.resize(size_t(gk_tensor_size(GK_LAYOUT_NCHW8, d8.batch, d8.out_channels, layers[i].oh, layers[i].ow)));
      gk_convert_layout(s.data->x.data(), GK_LAYOUT_NCHW, s.x8.data(), in8, d8.batch, d8.in_channels, d8.in_height,
                        d8.in_width);
      // What AUTO runs without Winograd: the pointwise kernels' engine where the CPU has it.
      if (winograd_layer(layers[i]) &&
          gk_conv_plan_create(&d8, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_POINTWISE_NCHW8,
                              &s.im2col_nchw8) != GK_OK &&
          gk_conv_plan_create(&d8, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_IM2COL_GEMM, &s.im2col_nchw8) !=
              GK_OK) {
        std::fprintf(stderr, "bench_conv: NCHW8 im2col %s: %s\n", layers[i].name.c_str(), gk_last_error());
        return 1;
      }
    }
    if (winograd_layer(layers[i]))
      for (int f = 0; f < kNumForced; ++f)
        if (gk_conv_plan_create(&layers[i].d, s.data->w.data(), s.data->bias.data(), kForced[f].algo,
                                &s.forced[f]) != GK_OK) {
          std::fprintf(stderr, "bench_conv: %s %s: %s\n", kForced[f].lib, layers[i].name.c_str(), gk_last_error());
          return 1;
        }
    for (int t : thread_counts) {
      gk_set_num_threads(t);
      const auto p0 = std::chrono::steady_clock::now();
      if (gk_conv_plan_create(&layers[i].d, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_FASTRUN,
                              &s.fastrun[t]) != GK_OK) {
        std::fprintf(stderr, "bench_conv: FASTRUN %s: %s\n", layers[i].name.c_str(), gk_last_error());
        return 1;
      }
      s.fastrun_profile_s[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
      const gk_conv_desc d8 = nchw8_desc(layers[i]);
      if (gk_conv_plan_create(&d8, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_FASTRUN, &s.fastrun_nchw8[t]) !=
          GK_OK) {
        std::fprintf(stderr, "bench_conv: FASTRUN NCHW8 %s: %s\n", layers[i].name.c_str(), gk_last_error());
        return 1;
      }
      omp_set_num_threads(t);
      s.dnnl_nchw[t].reset(new OneDnnConv(layers[i], *s.data, false));
      s.dnnl_blocked[t].reset(new OneDnnConv(layers[i], *s.data, true));
      LayerSetup* sp = &s;
      auto reg = [&](const char* lib, std::function<void()> body) {
        // One untimed run first: libraries that share tensors run back to back (the rotation
        // keeps their order), so without it each found the previous one's data in cache or
        // not; FASTRUN NCHW, after oneDNN, measured 3-5% slower than AUTO on the same plans.
        benchmark::RegisterBenchmark(point_name(layers[i], t, lib).c_str(), [body](benchmark::State& st) {
          body();
          for (auto _ : st) body();
        })->MinTime(layer_min_time(layers[i], t, min_time))->UseRealTime()->Unit(benchmark::kMicrosecond);
      };
      reg("gemmkit", [sp, t] { gk_set_num_threads(t); gk_conv_run(sp->plan, sp->data->x.data(), sp->data->y.data()); });
      reg("gemmkit-fastrun", [sp, t] {
        gk_set_num_threads(t);
        gk_conv_run(sp->fastrun[t], sp->data->x.data(), sp->data->y.data());
      });
      reg("gemmkit-nchw8", [sp, t] { gk_set_num_threads(t); gk_conv_run(sp->plan_nchw8, sp->x8.data(), sp->y8.data()); });
      reg("gemmkit-fastrun-nchw8", [sp, t] {
        gk_set_num_threads(t);
        gk_conv_run(sp->fastrun_nchw8[t], sp->x8.data(), sp->y8.data());
      });
      if (s.im2col_nchw8)
        reg(kIm2colNchw8, [sp, t] { gk_set_num_threads(t); gk_conv_run(sp->im2col_nchw8, sp->x8.data(), sp->y8.data()); });
      reg("im2col+openblas", [sp, t, &ob] { ob.set_threads(t); sp->caffe->run(*sp->data); });
      reg("onednn-nchw", [sp, t] { omp_set_num_threads(t); sp->dnnl_nchw[t]->run(); });
      reg("onednn-blocked", [sp, t] { omp_set_num_threads(t); sp->dnnl_blocked[t]->run(); });
      for (int f = 0; f < kNumForced; ++f)
        if (s.forced[f])
          reg(kForced[f].lib, [sp, t, f] {
            gk_set_num_threads(t);
            gk_conv_run(sp->forced[f], sp->data->x.data(), sp->data->y.data());
          });
    }
  }
  benchmark::Initialize(&argc, argv);

  std::vector<std::vector<std::string>> groups;
  std::set<std::string> spinners;
  for (const Layer& l : layers)
    for (int t : thread_counts) {
      groups.emplace_back();
      for (const char* lib : kLibs) groups.back().push_back(point_name(l, t, lib));
      if (winograd_layer(l))
        for (const Forced& f : kForced) groups.back().push_back(point_name(l, t, f.lib));
      if (winograd_layer(l)) groups.back().push_back(point_name(l, t, kIm2colNchw8));
      spinners.insert(point_name(l, t, "im2col+openblas"));
    }
  auto samples = gkbench::run_interleaved(groups, rounds, spinners);

  // ---- report: per network totals, per layer rows, memory
  if (std::system(("mkdir -p '" + out_dir + "'").c_str()) != 0) return 1;
  std::ofstream csv(out_dir + "/conv.csv"), md(out_dir + "/conv.md");
  csv << "net,layer,count,threads,library,median_ms,gflops,algorithm,workspace_bytes,full_im2col_bytes\n";
  std::ostringstream table, rows;
  std::vector<std::string> nets;
  for (const Layer& l : layers)
    if (std::find(nets.begin(), nets.end(), l.net) == nets.end()) nets.push_back(l.net);
  table << "# Convolution layers: gemmkit vs im2col+OpenBLAS vs oneDNN (batch 1, 224x224, bias+ReLU)\n\n"
        << "- gemmkit: " << gk_config_string() << "\n- OpenBLAS: " << ob.description
        << "\n- totals are sums over a network's conv layers (layer time x count), medians of " << rounds
        << " interleaved rounds\n\n"
        << "- AUTO without Winograd: AUTO's time per layer, with im2col_gemm's (timed in the same rounds) where AUTO picks a Winograd variant; "
           "NCHW8 without Winograd: the same for AUTO in NCHW8 (gemmkit's blocked layout, the one to set against oneDNN's)\n\n"
        << "| network | threads | gemmkit AUTO ms | gemmkit FASTRUN ms (profiling s) | gemmkit AUTO NCHW8 ms | AUTO without Winograd ms | NCHW8 without Winograd ms | im2col+OpenBLAS ms | oneDNN NCHW ms | oneDNN blocked ms | AUTO speedup vs im2col+OpenBLAS | without Winograd: speedup vs im2col+OpenBLAS | NCHW8 without Winograd: speedup vs im2col+OpenBLAS | AUTO / oneDNN blocked | without Winograd / oneDNN blocked | NCHW8 without Winograd / oneDNN blocked | FASTRUN / oneDNN blocked | NCHW8 / oneDNN blocked | FASTRUN NCHW8 ms | FASTRUN NCHW8 / oneDNN blocked | largest im2col matrix vs gemmkit workspace |\n"
        << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  rows << "\n## Per layer (ms, median)\n\n| network | layer | threads | AUTO algorithm | gemmkit AUTO | FASTRUN choice | gemmkit FASTRUN | gemmkit NCHW8 | FASTRUN NCHW8 choice | gemmkit FASTRUN NCHW8 | im2col+OpenBLAS | oneDNN NCHW | oneDNN blocked (impl) | AUTO GFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& net : nets) {
    for (int t : thread_counts) {
      double total[kNumLibs] = {}, profiling = 0, no_winograd = 0, nchw8_no_winograd = 0;
      int64_t max_full = 0, max_ws = 0;
      for (size_t i = 0; i < layers.size(); ++i) {
        const Layer& l = layers[i];
        if (l.net != net) continue;
        double ms[kNumLibs];
        profiling += setups[i].fastrun_profile_s[t];
        for (int li = 0; li < kNumLibs; ++li) {
          ms[li] = median(samples[point_name(l, t, kLibs[li])]) * 1e3;
          total[li] += ms[li] * l.count;
          csv << net << ',' << l.name << ',' << l.count << ',' << t << ',' << kLibs[li] << ',' << ms[li] << ','
              << l.flops() / (ms[li] * 1e6) << ',' << ran(setups[i], li, t) << ','
              << gk_conv_plan_workspace_size(setups[i].plan) << ',' << setups[i].caffe->workspace_bytes() << '\n';
        }
        const bool auto_winograd = std::string(gk_conv_plan_algo_name(setups[i].plan)).rfind("winograd", 0) == 0;
        no_winograd += (auto_winograd && setups[i].forced[kNumForced - 1]
                            ? median(samples[point_name(l, t, kForced[kNumForced - 1].lib)]) * 1e3
                            : ms[0]) * l.count;
        const bool nchw8_winograd = std::string(gk_conv_plan_algo_name(setups[i].plan_nchw8)).rfind("winograd", 0) == 0;
        nchw8_no_winograd += (nchw8_winograd && setups[i].im2col_nchw8
                                  ? median(samples[point_name(l, t, kIm2colNchw8)]) * 1e3
                                  : ms[5]) * l.count;
        max_full = std::max(max_full, setups[i].caffe->workspace_bytes());
        max_ws = std::max(max_ws, gk_conv_plan_workspace_size(setups[i].plan));
        char row[640];
        std::snprintf(row, sizeof row, "| %s | %s | %d | %s | %.3f | %s | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %.3f (%s) | %.1f |\n",
                      net.c_str(), l.name.c_str(), t, ran(setups[i], 0, t).c_str(), ms[0], ran(setups[i], 4, t).c_str(),
                      ms[4], ms[5], ran(setups[i], 6, t).c_str(), ms[6], ms[1], ms[2], ms[3],
                      ran(setups[i], 3, t).c_str(), l.flops() / (ms[0] * 1e6));
        rows << row;
      }
      char line[800];
      std::snprintf(line, sizeof line,
                    "| %s | %d | %.1f | %.1f (%.2f s) | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %.1f MiB vs %.0f KiB |\n",
                    net.c_str(), t, total[0], total[4], profiling, total[5], no_winograd, nchw8_no_winograd, total[1],
                    total[2], total[3], total[1] / total[0], total[1] / no_winograd, total[1] / nchw8_no_winograd,
                    total[0] / total[3], no_winograd / total[3], nchw8_no_winograd / total[3],
                    total[4] / total[3], total[5] / total[3], total[6], total[6] / total[3], max_full / 1048576.0,
                    max_ws / 1024.0);
      table << line;
    }
  }
  const std::string winograd = winograd_report(layers, thread_counts, samples);
  const std::string phases = phase_report(layers, setups);
  md << table.str() << winograd << phases << rows.str();
  std::printf("\n%s%s%s", table.str().c_str(), winograd.c_str(), phases.c_str());
  std::printf("per-layer table: %s/conv.md, samples: %s/conv.csv\n", out_dir.c_str(), out_dir.c_str());
  for (LayerSetup& s : setups) {
    gk_conv_plan_destroy(s.plan);
    gk_conv_plan_destroy(s.plan_nchw8);
    gk_conv_plan_destroy(s.im2col_nchw8);
    for (auto& f : s.fastrun) gk_conv_plan_destroy(f.second);
    for (auto& f : s.fastrun_nchw8) gk_conv_plan_destroy(f.second);
    for (gk_conv_plan* p : s.forced) gk_conv_plan_destroy(p);
  }
  return 0;
}
