// Convolution layers of ResNet-18, ResNet-50, MobileNetV2, ShuffleNetV2 and VGG-16 (224x224,
// perf/networks.csv), each with bias + ReLU, 1 and 2 threads, interleaved layer by layer
// against four baselines in the same process:
//   im2col+openblas  the Caffe way: the full K x OH*OW im2col matrix, OpenBLAS sgemm per
//                    group (dlopen'ed), then a bias + ReLU pass;
//   onednn-nchw      oneDNN (Debian's libdnnl) with NCHW activations;
//   onednn-blocked   oneDNN in its preferred (blocked) layouts, reordered outside the timing,
//                    as a user who keeps activations blocked between layers would run it;
//   onednn-nhwc      oneDNN with NHWC activations (weights in its own format): the peer of
//                    gemmkit in NHWC.
// gemmkit runs AUTO and FASTRUN in NCHW, NCHW8 and NHWC (issue 22's targets in NHWC: each
// network's total within 1.1x of NCHW8's and at most oneDNN blocked's, no layer over 1.5x
// oneDNN blocked's). Reports per-network totals (layer time x its count), per-layer
// times, and gemmkit's workspace against the full im2col matrix. On the 3x3 stride-1
// layers it also times each Winograd variant and gemmkit's im2col_gemm, forced, in the
// same interleaved rounds (per-network totals, effective GFLOP/s counted with direct
// convolution's FLOPs), and on a few representative layers the time share of the three
// Winograd phases (input transform, GEMMs, output transform), one thread.
//
// --batch=N runs the layers at batch N and, in the same rounds, at batch 1: every figure
// is per image (time / N), and a table sets each library's batch-N time per image against
// its batch-1 time (batch 1 is the default).
//
// Rounds are many and short (7 of 20 ms per point by default): this VM's speed changes in
// phases of a second or more (the same plan 0.27 or 0.39 ms), so 3 rounds of 50 ms
// left a layer's median to which phase each library's runs fell in; ShuffleNetV2's total
// moved 3% between FASTRUN and AUTO on identical plans.
//
//   bench_conv [--rounds=N] [--min-time=S] [--threads=1,2] [--quick] [--out=DIR] [--layers=CSV]
//              [--batch=N] [--name=conv]
// writes DIR/NAME.md and DIR/NAME.csv (NAME-batchN.* at --batch=N).
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
  double image_flops() const { return flops() / double(d.batch); }
  int64_t k() const { return d.in_channels / d.groups * d.kernel_h * d.kernel_w; }
};

// The layers at `batch` images (the file's are single images).
std::vector<Layer> read_layers(const std::string& path, int64_t batch) {
  std::vector<Layer> layers;
  for (const gkbench::NetworkLayer& n : gkbench::read_network_layers(path)) {
    Layer l;
    l.net = n.net, l.name = n.layer, l.d = n.d, l.count = n.count;
    l.d.batch = batch;
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
    for (int64_t n = 0; n < d.batch; ++n)
      run_image(t.x.data() + n * d.in_channels * d.in_height * d.in_width,
                const_cast<float*>(t.y.data()) + n * d.out_channels * l_.oh * l_.ow, t);
  }
  int64_t workspace_bytes() const { return int64_t(col_.size()) * 4; }

 private:
  void run_image(const float* x, float* y_image, const LayerData& t) {
    const gk_conv_desc& d = l_.d;
    const int64_t pixels = l_.oh * l_.ow, icg = d.in_channels / d.groups, ocg = d.out_channels / d.groups;
    for (int64_t g = 0; g < d.groups; ++g) {
      for (int64_t c = 0; c < icg; ++c)
        for (int64_t r = 0; r < d.kernel_h; ++r)
          for (int64_t s = 0; s < d.kernel_w; ++s) {
            float* row = col_.data() + ((c * d.kernel_h + r) * d.kernel_w + s) * pixels;
            const float* plane = x + (g * icg + c) * d.in_height * d.in_width;
            for (int64_t oh = 0; oh < l_.oh; ++oh)
              for (int64_t ow = 0; ow < l_.ow; ++ow) {
                const int64_t ih = oh * d.stride_h - d.pad_top + r * d.dilation_h;
                const int64_t iw = ow * d.stride_w - d.pad_left + s * d.dilation_w;
                row[oh * l_.ow + ow] = (ih >= 0 && ih < d.in_height && iw >= 0 && iw < d.in_width)
                                           ? plane[ih * d.in_width + iw] : 0.0f;
              }
          }
      float* y = y_image + g * ocg * pixels;
      ob_.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(ocg), int(pixels), int(l_.k()), 1.0f,
                t.w.data() + g * ocg * l_.k(), int(l_.k()), col_.data(), int(pixels), 0.0f, y, int(pixels));
      for (int64_t oc = 0; oc < ocg; ++oc)
        for (int64_t p = 0; p < pixels; ++p)
          y[oc * pixels + p] = std::max(0.0f, y[oc * pixels + p] + t.bias[size_t(g * ocg + oc)]);
    }
  }

  Layer l_;
  gkbench::OpenBlas ob_;
  Tensor col_;
};

// oneDNN convolution with activations in `act` (nchw, nhwc, or any: the layouts it prefers).
class OneDnnConv {
 public:
  OneDnnConv(const Layer& l, const LayerData& t, dnnl::memory::format_tag act) : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const gk_conv_desc& d = l.d;
    const int64_t g = d.groups;
    const dnnl::memory::dims src{d.batch, d.in_channels, d.in_height, d.in_width};
    const dnnl::memory::dims dst{d.batch, d.out_channels, l.oh, l.ow};
    const dnnl::memory::dims wei = g > 1 ? dnnl::memory::dims{g, d.out_channels / g, d.in_channels / g, d.kernel_h, d.kernel_w}
                                         : dnnl::memory::dims{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
    dnnl::convolution_forward::desc cd(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        {src, dt::f32, act}, {wei, dt::f32, tag::any}, {{d.out_channels}, dt::f32, tag::x},
        {dst, dt::f32, act}, {d.stride_h, d.stride_w}, {d.dilation_h - 1, d.dilation_w - 1},
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
// gemmkit-nhwc, gemmkit-fastrun-nhwc: the same in NHWC, the stem's input NHWC as well.
gk_conv_desc layout_desc(const Layer& l, gk_layout layout) {
  gk_conv_desc d = l.d;
  d.layout = layout;
  if (layout == GK_LAYOUT_NCHW8 && d.in_channels < 8) d.flags |= GK_CONV_FLAG_NCHW_INPUT;
  return d;
}
enum Lib {
  kAuto, kCaffe, kDnnlNchw, kDnnlBlocked, kFastrun, kAutoNchw8, kFastrunNchw8, kAutoNhwc, kFastrunNhwc, kDnnlNhwc,
  kNumLibs
};
const char* kLibs[kNumLibs] = {"gemmkit",         "im2col+openblas",       "onednn-nchw",  "onednn-blocked",
                               "gemmkit-fastrun", "gemmkit-nchw8",         "gemmkit-fastrun-nchw8",
                               "gemmkit-nhwc",    "gemmkit-fastrun-nhwc",  "onednn-nhwc"};

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

// Seconds per run of a layer: at least `min_time`, and the time of 4 images at 100 GFLOP/s
// per thread (direct convolution's FLOPs), up to 0.15 s: a VGG-16 layer
// of 20-30 ms was one run per 20 ms sample, and FASTRUN and AUTO, identical plans, came
// out 8% apart on its total. (Images, not runs: a run at batch 8 is 8 images already.)
double layer_min_time(const Layer& l, int threads, double min_time) {
  return std::max(min_time, std::min(0.15, 4 * l.image_flops() / (100e9 * threads)));
}

// Batch-1 points keep their names; batch N's carry "/nN".
std::string point_name(const Layer& l, int threads, const std::string& lib) {
  const std::string batch = l.d.batch == 1 ? "" : "/n" + std::to_string(l.d.batch);
  return "conv/" + l.net + "/" + l.name + batch + "/t" + std::to_string(threads) + "/" + lib;
}

// The rows a layer is summed in: its network, and its batch when not 1.
std::string network_label(const Layer& l) {
  return l.d.batch == 1 ? l.net : l.net + " (batch " + std::to_string(l.d.batch) + ")";
}

// gemmkit in a layout other than NCHW: AUTO's plan, FASTRUN's per thread count (profiled
// in that layout), and the layer's tensors in it, converted once outside the timing.
struct LayoutPlans {
  gk_conv_plan* autoplan = nullptr;
  std::map<int, gk_conv_plan*> fastrun;
  Tensor x, y;
};

// Per layer: tensors, the gemmkit plan, the baselines; registered once per thread count.
struct LayerSetup {
  std::unique_ptr<LayerData> data;
  gk_conv_plan* plan = nullptr;
  std::map<int, gk_conv_plan*> fastrun;  // per thread count: Fast-Run measures with them
  std::map<int, double> fastrun_profile_s;  // plan creation time (the profiling)
  std::unique_ptr<Im2colBlas> caffe;
  // oneDNN fixes a primitive's thread count when it is created: one per thread count.
  std::map<int, std::unique_ptr<OneDnnConv>> dnnl_nchw, dnnl_blocked, dnnl_nhwc;
  gk_conv_plan* forced[kNumForced] = {};  // 3x3 stride-1 layers only
  LayoutPlans nchw8, nhwc;
  gk_conv_plan* im2col_nchw8 = nullptr;  // 3x3 stride-1 layers: "NCHW8 without Winograd"
};
const char kIm2colNchw8[] = "im2col-gemm-nchw8";

// What library kLibs[li] ran on a layer at t threads: gemmkit's plan's algorithm (with its
// tuning), oneDNN's implementation, or the im2col baseline.
std::string ran(const LayerSetup& s, int li, int t) {
  switch (li) {
    case kAuto: return gk_conv_plan_algo_name(s.plan);
    case kCaffe: return "im2col+sgemm";
    case kDnnlNchw: return s.dnnl_nchw.at(t)->impl();
    case kDnnlBlocked: return s.dnnl_blocked.at(t)->impl();
    case kFastrun: return gk_conv_plan_algo_name(s.fastrun.at(t));
    case kAutoNchw8: return gk_conv_plan_algo_name(s.nchw8.autoplan);
    case kFastrunNchw8: return gk_conv_plan_algo_name(s.nchw8.fastrun.at(t));
    case kAutoNhwc: return gk_conv_plan_algo_name(s.nhwc.autoplan);
    case kFastrunNhwc: return gk_conv_plan_algo_name(s.nhwc.fastrun.at(t));
    default: return s.dnnl_nhwc.at(t)->impl();
  }
}
using Samples = std::map<std::string, std::vector<double>>;

// A layer's median time per image (ms) for one library and thread count.
double image_ms(const Samples& samples, const Layer& l, int t, const std::string& lib) {
  return median(samples.at(point_name(l, t, lib))) * 1e3 / double(l.d.batch);
}

// The distinct values of key(layer) but "", in the order of their first layer.
std::vector<std::string> distinct(const std::vector<Layer>& layers, const std::function<std::string(const Layer&)>& key) {
  std::vector<std::string> values;
  for (const Layer& l : layers) {
    const std::string v = key(l);
    if (!v.empty() && std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  }
  return values;
}

// Per network and thread count, totals over the 3x3 stride-1 layers (time x count) of each
// Winograd variant, of the best gemmkit algorithm per layer ("where it wins"), and of the
// baselines; then per layer, each variant's time and effective GFLOP/s.
std::string winograd_report(const std::vector<Layer>& layers, const std::vector<int>& thread_counts,
                            const Samples& samples) {
  auto ms = [&](const Layer& l, int t, const char* lib) { return image_ms(samples, l, t, lib); };
  std::ostringstream out, rows;
  out << "\n## Winograd on the 3x3 stride-1 layers (ms per image; effective GFLOP/s counted with direct convolution's FLOPs)\n\n"
      << "| network | threads | layers | F(2x2) | F(4x4) | F(6x6) | im2col_gemm | best gemmkit per layer | "
         "im2col+OpenBLAS | oneDNN blocked | best / oneDNN blocked | best GFLOP/s |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  rows << "\n| network | layer | threads | F(2x2) ms (GFLOP/s) | F(4x4) | F(6x6) | im2col_gemm | im2col+OpenBLAS | "
          "oneDNN blocked |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& net : distinct(layers, [](const Layer& l) { return winograd_layer(l) ? network_label(l) : ""; }))
    for (int t : thread_counts) {
      double total[kNumForced] = {}, best = 0, caffe = 0, dnnl = 0, flops = 0;
      int count = 0;
      for (const Layer& l : layers) {
        if (network_label(l) != net || !winograd_layer(l)) continue;
        double layer_best = 1e300;
        rows << "| " << net << " | " << l.name << " | " << t;
        for (int f = 0; f < kNumForced; ++f) {
          const double v = ms(l, t, kForced[f].lib);
          total[f] += v * l.count;
          layer_best = std::min(layer_best, v);
          char cell[64];
          std::snprintf(cell, sizeof cell, " | %.3f (%.0f)", v, l.image_flops() / (v * 1e6));
          rows << cell;
        }
        const double c = ms(l, t, "im2col+openblas"), o = ms(l, t, "onednn-blocked");
        char cell[64];
        std::snprintf(cell, sizeof cell, " | %.3f | %.3f |\n", c, o);
        rows << cell;
        best += layer_best * l.count, caffe += c * l.count, dnnl += o * l.count, flops += l.image_flops() * l.count;
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
      << "| network | layer | variant | ms per image | input | GEMMs | output |\n|---|---|---|---|---|---|---|\n";
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
      std::snprintf(line, sizeof line, "| %s | %s | %s | %.3f | %.0f%% | %.0f%% | %.0f%% |\n",
                    network_label(layers[i]).c_str(), layers[i].name.c_str(), kForced[f].lib,
                    sum / kRuns / double(layers[i].d.batch) * 1e3, 100 * times.input_s / sum,
                    100 * times.gemm_s / sum, 100 * times.output_s / sum);
      out << line;
    }
  }
  gk_set_num_threads(0);
  return out.str();
}

// The NHWC columns against NCHW8 and oneDNN, per network and thread count: totals (time per
// image x count), FASTRUN NHWC over FASTRUN NCHW8 and over oneDNN blocked (issue 22's
// targets: at most 1.1 and 1), and the layers over 1.5x oneDNN blocked, with the worst.
std::string nhwc_report(const std::vector<Layer>& layers, const std::vector<int>& thread_counts,
                        const Samples& samples) {
  std::ostringstream out;
  out << "\n## NHWC (ms per image; NHWC = gemmkit FASTRUN in NHWC; targets: NHWC / NCHW8 <= 1.1, "
         "NHWC / oneDNN blocked <= 1, no layer over 1.5x oneDNN blocked)\n\n"
      << "| network | threads | AUTO NHWC | FASTRUN NHWC | oneDNN NHWC | FASTRUN NCHW8 | oneDNN blocked | "
         "NHWC / NCHW8 | NHWC / oneDNN blocked | NHWC / oneDNN NHWC | layers over 1.5x oneDNN blocked | "
         "worst layer (x oneDNN blocked) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& net : distinct(layers, network_label))
    for (int t : thread_counts) {
      double total[kNumLibs] = {}, worst = 0;
      int over = 0, shapes = 0;
      std::string worst_name;
      for (const Layer& l : layers) {
        if (network_label(l) != net) continue;
        for (Lib li : {kAutoNhwc, kFastrunNhwc, kDnnlNhwc, kFastrunNchw8, kDnnlBlocked})
          total[li] += image_ms(samples, l, t, kLibs[li]) * l.count;
        const double ratio = image_ms(samples, l, t, kLibs[kFastrunNhwc]) / image_ms(samples, l, t, kLibs[kDnnlBlocked]);
        over += ratio > 1.5;
        ++shapes;
        if (ratio > worst) worst = ratio, worst_name = l.name;
      }
      char line[640];
      std::snprintf(line, sizeof line,
                    "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d of %d | %s (%.2f) |\n",
                    net.c_str(), t, total[kAutoNhwc], total[kFastrunNhwc], total[kDnnlNhwc], total[kFastrunNchw8],
                    total[kDnnlBlocked], total[kFastrunNhwc] / total[kFastrunNchw8],
                    total[kFastrunNhwc] / total[kDnnlBlocked], total[kFastrunNhwc] / total[kDnnlNhwc], over, shapes,
                    worst_name.c_str(), worst);
      out << line;
    }
  return out.str();
}

// With --batch=N > 1: per network, thread count and library, the batch-N total per image
// and, in parentheses, its ratio to the batch-1 total (timed in the same rounds).
std::string batch_report(const std::vector<Layer>& layers, const std::vector<int>& thread_counts,
                         const Samples& samples, int64_t batch) {
  std::ostringstream out;
  out << "\n## Batch " << batch << " against batch 1 (ms per image, (batch " << batch
      << " per image / batch 1))\n\n| network | threads |";
  for (const char* lib : kLibs) out << " " << lib << " |";
  out << "\n|---|---|";
  for (int li = 0; li < kNumLibs; ++li) out << "---|";
  out << "\n";
  for (const std::string& net : distinct(layers, [](const Layer& l) { return l.net; }))
    for (int t : thread_counts) {
      double total[2][kNumLibs] = {};  // [batch N, batch 1]
      for (const Layer& l : layers)
        if (l.net == net)
          for (int li = 0; li < kNumLibs; ++li) total[l.d.batch == 1][li] += image_ms(samples, l, t, kLibs[li]) * l.count;
      out << "| " << net << " | " << t << " |";
      for (int li = 0; li < kNumLibs; ++li) {
        char cell[64];
        std::snprintf(cell, sizeof cell, " %.2f (%.2f) |", total[0][li], total[0][li] / total[1][li]);
        out << cell;
      }
      out << "\n";
    }
  return out.str();
}

// A plan, or nullptr with the reason on stderr.
gk_conv_plan* make_plan(const Layer& l, const LayerData& t, const gk_conv_desc& d, gk_conv_algo algo,
                        const char* what) {
  gk_conv_plan* plan = nullptr;
  if (gk_conv_plan_create(&d, t.w.data(), t.bias.data(), algo, &plan) == GK_OK) return plan;
  std::fprintf(stderr, "bench_conv: %s %s %s: %s\n", what, l.net.c_str(), l.name.c_str(), gk_last_error());
  return nullptr;
}

// AUTO's plan in `layout` and the layer's tensors in it, the input converted from NCHW.
bool prepare_layout(const Layer& l, const LayerData& t, gk_layout layout, LayoutPlans* p) {
  const gk_conv_desc d = layout_desc(l, layout);
  if (!(p->autoplan = make_plan(l, t, d, GK_CONV_ALGO_AUTO, layout == GK_LAYOUT_NHWC ? "NHWC" : "NCHW8")))
    return false;
  const gk_layout in = d.flags & GK_CONV_FLAG_NCHW_INPUT ? GK_LAYOUT_NCHW : layout;
  p->x.resize(size_t(gk_tensor_size(in, d.batch, d.in_channels, d.in_height, d.in_width)));
  p->y.resize(size_t(gk_tensor_size(layout, d.batch, d.out_channels, l.oh, l.ow)));
  gk_convert_layout(t.x.data(), GK_LAYOUT_NCHW, p->x.data(), in, d.batch, d.in_channels, d.in_height, d.in_width);
  return true;
}

void destroy(LayoutPlans* p) {
  gk_conv_plan_destroy(p->autoplan);
  for (auto& f : p->fastrun) gk_conv_plan_destroy(f.second);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = arg(argc, argv, "quick", "") == "1";
  const int rounds = std::stoi(arg(argc, argv, "rounds", quick ? "1" : "7"));
  const double min_time = std::stod(arg(argc, argv, "min-time", "0.02"));  // seconds per run
  const std::string out_dir = arg(argc, argv, "out", "build/bench");
  const std::vector<int> thread_counts = gkbench::thread_list(argc, argv);
  const int64_t batch = std::stoll(arg(argc, argv, "batch", "1"));
  const std::string layer_file = arg(argc, argv, "layers", "perf/networks.csv");
  std::vector<Layer> layers;
  for (const Layer& l : read_layers(layer_file, batch)) {  // each batch-N layer followed by its batch-1 self
    layers.push_back(l);
    if (batch > 1) layers.push_back(l), layers.back().d.batch = 1;
  }
  if (quick) layers.erase(std::remove_if(layers.begin(), layers.end(), [](const Layer& l) { return l.net != "resnet18"; }), layers.end());
  const gkbench::OpenBlas ob = gkbench::load_openblas(arg(argc, argv, "openblas", "libopenblas.so.0"));
  if (!ob.ok()) {
    std::fprintf(stderr, "bench_conv: OpenBLAS %s\n", ob.description.c_str());
    return 1;
  }

  using tag = dnnl::memory::format_tag;
  std::vector<LayerSetup> setups(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    LayerSetup& s = setups[i];
    s.data.reset(new LayerData(l));
    s.caffe.reset(new Im2colBlas(l, ob));
    if (!(s.plan = make_plan(l, *s.data, l.d, GK_CONV_ALGO_AUTO, "AUTO")) ||
        !prepare_layout(l, *s.data, GK_LAYOUT_NCHW8, &s.nchw8) || !prepare_layout(l, *s.data, GK_LAYOUT_NHWC, &s.nhwc))
      return 1;
    // What AUTO runs without Winograd: the pointwise kernels' engine where the CPU has it.
    const gk_conv_desc d8 = layout_desc(l, GK_LAYOUT_NCHW8);
    if (winograd_layer(l) &&
        gk_conv_plan_create(&d8, s.data->w.data(), s.data->bias.data(), GK_CONV_ALGO_POINTWISE_NCHW8,
                            &s.im2col_nchw8) != GK_OK &&
        !(s.im2col_nchw8 = make_plan(l, *s.data, d8, GK_CONV_ALGO_IM2COL_GEMM, "NCHW8 im2col")))
      return 1;
    if (winograd_layer(l))
      for (int f = 0; f < kNumForced; ++f)
        if (!(s.forced[f] = make_plan(l, *s.data, l.d, kForced[f].algo, kForced[f].lib))) return 1;
    for (int t : thread_counts) {
      gk_set_num_threads(t);
      const auto p0 = std::chrono::steady_clock::now();
      if (!(s.fastrun[t] = make_plan(l, *s.data, l.d, GK_CONV_ALGO_FASTRUN, "FASTRUN"))) return 1;
      s.fastrun_profile_s[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
      if (!(s.nchw8.fastrun[t] = make_plan(l, *s.data, d8, GK_CONV_ALGO_FASTRUN, "FASTRUN NCHW8")) ||
          !(s.nhwc.fastrun[t] = make_plan(l, *s.data, layout_desc(l, GK_LAYOUT_NHWC), GK_CONV_ALGO_FASTRUN,
                                          "FASTRUN NHWC")))
        return 1;
      omp_set_num_threads(t);
      s.dnnl_nchw[t].reset(new OneDnnConv(l, *s.data, tag::nchw));
      s.dnnl_blocked[t].reset(new OneDnnConv(l, *s.data, tag::any));
      s.dnnl_nhwc[t].reset(new OneDnnConv(l, *s.data, tag::nhwc));
      LayerSetup* sp = &s;
      auto reg = [&](const char* lib, std::function<void()> body) {
        // One untimed run first: libraries that share tensors run back to back (the rotation
        // keeps their order), so without it each found the previous one's data in cache or
        // not; FASTRUN NCHW, after oneDNN, measured 3-5% slower than AUTO on the same plans.
        benchmark::RegisterBenchmark(point_name(l, t, lib).c_str(), [body](benchmark::State& st) {
          body();
          for (auto _ : st) body();
        })->MinTime(layer_min_time(l, t, min_time))->UseRealTime()->Unit(benchmark::kMicrosecond);
      };
      auto reg_plan = [&](const char* lib, gk_conv_plan* plan, const Tensor& x, Tensor& y) {
        const float* xp = x.data();
        float* yp = y.data();
        reg(lib, [plan, xp, yp, t] { gk_set_num_threads(t); gk_conv_run(plan, xp, yp); });
      };
      reg_plan(kLibs[kAuto], s.plan, s.data->x, s.data->y);
      reg_plan(kLibs[kFastrun], s.fastrun[t], s.data->x, s.data->y);
      reg_plan(kLibs[kAutoNchw8], s.nchw8.autoplan, s.nchw8.x, s.nchw8.y);
      reg_plan(kLibs[kFastrunNchw8], s.nchw8.fastrun[t], s.nchw8.x, s.nchw8.y);
      reg_plan(kLibs[kAutoNhwc], s.nhwc.autoplan, s.nhwc.x, s.nhwc.y);
      reg_plan(kLibs[kFastrunNhwc], s.nhwc.fastrun[t], s.nhwc.x, s.nhwc.y);
      if (s.im2col_nchw8) reg_plan(kIm2colNchw8, s.im2col_nchw8, s.nchw8.x, s.nchw8.y);
      for (int f = 0; f < kNumForced; ++f)
        if (s.forced[f]) reg_plan(kForced[f].lib, s.forced[f], s.data->x, s.data->y);
      reg(kLibs[kCaffe], [sp, t, &ob] { ob.set_threads(t); sp->caffe->run(*sp->data); });
      reg(kLibs[kDnnlNchw], [sp, t] { omp_set_num_threads(t); sp->dnnl_nchw[t]->run(); });
      reg(kLibs[kDnnlBlocked], [sp, t] { omp_set_num_threads(t); sp->dnnl_blocked[t]->run(); });
      reg(kLibs[kDnnlNhwc], [sp, t] { omp_set_num_threads(t); sp->dnnl_nhwc[t]->run(); });
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
      // OpenBLAS set to one thread runs in the caller and wakes no worker to spin.
      if (t > 1) spinners.insert(point_name(l, t, kLibs[kCaffe]));
    }
  auto samples = gkbench::run_interleaved(groups, rounds, spinners);

  // ---- report: per network totals, per layer rows, memory (per image: time / batch)
  if (std::system(("mkdir -p '" + out_dir + "'").c_str()) != 0) return 1;
  const std::string name = arg(argc, argv, "name", "conv");
  const std::string stem = out_dir + "/" + name + (batch == 1 ? "" : "-batch" + std::to_string(batch));
  std::ofstream csv(stem + ".csv"), md(stem + ".md");
  csv << "net,layer,count,threads,batch,library,median_ms_per_image,gflops,algorithm,workspace_bytes,full_im2col_bytes\n";
  std::ostringstream table, rows;
  table << "# Convolution layers: gemmkit vs im2col+OpenBLAS vs oneDNN (batch " << batch
        << ", 224x224, bias+ReLU)\n\n"
        << "- gemmkit: " << gk_config_string() << "\n- OpenBLAS: " << ob.description
        << "\n- totals are sums over a network's conv layers (layer time per image x count), medians of " << rounds
        << " interleaved rounds\n\n"
        << "- AUTO without Winograd: AUTO's time per layer, with im2col_gemm's (timed in the same rounds) where AUTO picks a Winograd variant; "
           "NCHW8 without Winograd: the same for AUTO in NCHW8 (gemmkit's blocked layout, the one to set against oneDNN's)\n\n"
        << "| network | threads | gemmkit AUTO ms | gemmkit FASTRUN ms (profiling s) | gemmkit AUTO NCHW8 ms | AUTO without Winograd ms | NCHW8 without Winograd ms | im2col+OpenBLAS ms | oneDNN NCHW ms | oneDNN blocked ms | AUTO speedup vs im2col+OpenBLAS | without Winograd: speedup vs im2col+OpenBLAS | NCHW8 without Winograd: speedup vs im2col+OpenBLAS | AUTO / oneDNN blocked | without Winograd / oneDNN blocked | NCHW8 without Winograd / oneDNN blocked | FASTRUN / oneDNN blocked | NCHW8 / oneDNN blocked | FASTRUN NCHW8 ms | FASTRUN NCHW8 / oneDNN blocked | largest im2col matrix vs gemmkit workspace |\n"
        << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  rows << "\n## Per layer (ms per image, median)\n\n| network | layer | threads | AUTO algorithm | gemmkit AUTO | FASTRUN choice | gemmkit FASTRUN | gemmkit NCHW8 | FASTRUN NCHW8 choice | gemmkit FASTRUN NCHW8 | AUTO NHWC algorithm | gemmkit AUTO NHWC | FASTRUN NHWC choice | gemmkit FASTRUN NHWC | im2col+OpenBLAS | oneDNN NCHW | oneDNN blocked (impl) | oneDNN NHWC (impl) | AUTO GFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& net : distinct(layers, network_label)) {
    for (int t : thread_counts) {
      double total[kNumLibs] = {}, profiling = 0, no_winograd = 0, nchw8_no_winograd = 0;
      int64_t max_full = 0, max_ws = 0;
      for (size_t i = 0; i < layers.size(); ++i) {
        const Layer& l = layers[i];
        if (network_label(l) != net) continue;
        double ms[kNumLibs];
        profiling += setups[i].fastrun_profile_s[t];
        for (int li = 0; li < kNumLibs; ++li) {
          ms[li] = image_ms(samples, l, t, kLibs[li]);
          total[li] += ms[li] * l.count;
          csv << l.net << ',' << l.name << ',' << l.count << ',' << t << ',' << l.d.batch << ',' << kLibs[li] << ','
              << ms[li] << ',' << l.image_flops() / (ms[li] * 1e6) << ',' << ran(setups[i], li, t) << ','
              << gk_conv_plan_workspace_size(setups[i].plan) << ',' << setups[i].caffe->workspace_bytes() << '\n';
        }
        const bool auto_winograd = std::string(gk_conv_plan_algo_name(setups[i].plan)).rfind("winograd", 0) == 0;
        no_winograd += (auto_winograd && setups[i].forced[kNumForced - 1]
                            ? image_ms(samples, l, t, kForced[kNumForced - 1].lib)
                            : ms[kAuto]) * l.count;
        const bool nchw8_winograd =
            std::string(gk_conv_plan_algo_name(setups[i].nchw8.autoplan)).rfind("winograd", 0) == 0;
        nchw8_no_winograd += (nchw8_winograd && setups[i].im2col_nchw8 ? image_ms(samples, l, t, kIm2colNchw8)
                                                                        : ms[kAutoNchw8]) * l.count;
        max_full = std::max(max_full, setups[i].caffe->workspace_bytes());
        max_ws = std::max(max_ws, gk_conv_plan_workspace_size(setups[i].plan));
        char row[900];
        std::snprintf(row, sizeof row,
                      "| %s | %s | %d | %s | %.3f | %s | %.3f | %.3f | %s | %.3f | %s | %.3f | %s | %.3f | %.3f | %.3f | "
                      "%.3f (%s) | %.3f (%s) | %.1f |\n",
                      net.c_str(), l.name.c_str(), t, ran(setups[i], kAuto, t).c_str(), ms[kAuto],
                      ran(setups[i], kFastrun, t).c_str(), ms[kFastrun], ms[kAutoNchw8],
                      ran(setups[i], kFastrunNchw8, t).c_str(), ms[kFastrunNchw8], ran(setups[i], kAutoNhwc, t).c_str(),
                      ms[kAutoNhwc], ran(setups[i], kFastrunNhwc, t).c_str(), ms[kFastrunNhwc], ms[kCaffe],
                      ms[kDnnlNchw], ms[kDnnlBlocked], ran(setups[i], kDnnlBlocked, t).c_str(), ms[kDnnlNhwc],
                      ran(setups[i], kDnnlNhwc, t).c_str(), l.image_flops() / (ms[kAuto] * 1e6));
        rows << row;
      }
      char line[800];
      std::snprintf(line, sizeof line,
                    "| %s | %d | %.1f | %.1f (%.2f s) | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %.1f MiB vs %.0f KiB |\n",
                    net.c_str(), t, total[kAuto], total[kFastrun], profiling, total[kAutoNchw8], no_winograd,
                    nchw8_no_winograd, total[kCaffe], total[kDnnlNchw], total[kDnnlBlocked],
                    total[kCaffe] / total[kAuto], total[kCaffe] / no_winograd, total[kCaffe] / nchw8_no_winograd,
                    total[kAuto] / total[kDnnlBlocked], no_winograd / total[kDnnlBlocked],
                    nchw8_no_winograd / total[kDnnlBlocked], total[kFastrun] / total[kDnnlBlocked],
                    total[kAutoNchw8] / total[kDnnlBlocked], total[kFastrunNchw8],
                    total[kFastrunNchw8] / total[kDnnlBlocked], max_full / 1048576.0, max_ws / 1024.0);
      table << line;
    }
  }
  const std::string nhwc = nhwc_report(layers, thread_counts, samples);
  const std::string batches = batch > 1 ? batch_report(layers, thread_counts, samples, batch) : "";
  const std::string winograd = winograd_report(layers, thread_counts, samples);
  const std::string phases = phase_report(layers, setups);
  md << table.str() << nhwc << batches << winograd << phases << rows.str();
  std::printf("\n%s%s%s%s%s", table.str().c_str(), nhwc.c_str(), batches.c_str(), winograd.c_str(), phases.c_str());
  std::printf("per-layer table: %s.md, samples: %s.csv\n", stem.c_str(), stem.c_str());
  for (LayerSetup& s : setups) {
    gk_conv_plan_destroy(s.plan);
    gk_conv_plan_destroy(s.im2col_nchw8);
    destroy(&s.nchw8);
    destroy(&s.nhwc);
    for (auto& f : s.fastrun) gk_conv_plan_destroy(f.second);
    for (gk_conv_plan* p : s.forced) gk_conv_plan_destroy(p);
  }
  return 0;
}
