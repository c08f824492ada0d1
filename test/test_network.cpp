// The network runner (net/): small models that use every operation, written here with
// random weights, run in every layout and compared with a double-precision interpreter of
// the same file; malformed model files and inputs refused with a message, by the loader
// and by the gk-infer program.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gemm_test_util.h"
#include "gemmkit.h"
#include "net/model.h"
#include "net/network.h"
#include "net/npy.h"

namespace {

using gknet::Model;
using gknet::Op;
using gknet::OpKind;

// Model text with random weights after the ops that take them.
class ModelWriter {
 public:
  explicit ModelWriter(uint32_t seed) : rng_(seed) {}
  std::string& text() { return s_; }
  void line(const std::string& l) { s_ += l + "\n"; }
  void floats(int64_t count, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < count; ++i) {
      const float f = d(rng_);
      s_.append(reinterpret_cast<const char*>(&f), 4);
    }
  }
  // An op line, then `out` x `fan_in` He-scaled weights and `out` biases (a conv or an fc).
  void weighted(const std::string& l, int64_t out, int64_t fan_in) {
    line(l);
    const float scale = std::sqrt(6.0f / float(fan_in));
    floats(out * fan_in, -scale, scale);
    floats(out, -0.3f, 0.3f);
  }

 private:
  std::string s_;
  std::mt19937 rng_;
};

// Every operation: strided stem on the NCHW input, ceil-mode max pooling, a residual conv,
// split / depthwise / concat / shuffle, average pooling without the padding counted, an add,
// global pooling and flatten (of a tensor with channels off the block size) into two fcs.
std::string every_op_model(uint32_t seed) {
  ModelWriter w(seed);
  w.line("gknet 1");
  w.line("name every_op");
  w.line("input 3 13 11");
  w.weighted("conv in=0 out=1 oc=12 kh=3 kw=3 sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 act=relu bias=1", 12, 27);  // 12x7x6
  w.line("maxpool in=1 out=2 kh=3 kw=3 sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 ceil=1");                    // 12x4x4
  w.weighted("conv in=2 out=3 oc=12 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 act=relu bias=1", 12, 108);
  w.weighted("conv in=3 out=4 oc=12 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 act=relu add=2 bias=1", 12, 108);
  w.line("split in=4 out=5,6 channels=5,7");
  w.weighted("conv in=6 out=7 oc=7 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu6 bias=1", 7, 7);
  w.weighted("conv in=7 out=8 oc=7 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 groups=7 act=none bias=1", 7, 9);
  w.line("concat in=5,8 out=9");
  w.line("shuffle in=9 out=10 groups=3");
  w.line("avgpool in=10 out=11 kh=2 kw=2 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 ceil=0 count_pad=0");  // 12x5x5
  w.weighted("conv in=11 out=12 oc=20 kh=3 kw=3 sh=2 sw=2 pt=0 pl=0 pb=0 pr=0 act=none bias=1", 20, 108);  // 20x2x2
  w.weighted("conv in=11 out=13 oc=20 kh=3 kw=3 sh=2 sw=2 pt=0 pl=0 pb=0 pr=0 dh=1 dw=1 act=relu bias=1", 20, 108);
  w.line("add in=12,13 out=14 act=relu");
  w.line("flatten in=14 out=15");  // 80 features
  w.weighted("fc in=15 out=16 features=9 act=relu bias=1", 9, 80);
  w.weighted("fc in=16 out=17 features=5 act=none bias=1", 5, 9);
  w.line("output 17");
  w.line("end");
  return w.text();
}

// Global pooling straight into an fc (a C x 1 x 1 image as its input), ReLU6 through a
// 1x1 with a residual in place, and an average pooling that counts the padding.
std::string pooled_classifier_model(uint32_t seed) {
  ModelWriter w(seed);
  w.line("gknet 1");
  w.line("name pooled");
  w.line("input 3 9 9");
  w.weighted("conv in=0 out=1 oc=10 kh=3 kw=3 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu6 bias=1", 10, 27);  // 10x7x7
  w.line("avgpool in=1 out=2 kh=3 kw=3 sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 ceil=1 count_pad=1");           // 10x4x4
  w.weighted("conv in=2 out=3 oc=10 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu6 add=2 bias=1", 10, 10);
  w.line("gap in=3 out=4");
  w.weighted("fc in=4 out=5 features=6 act=none bias=1", 6, 10);
  w.line("output 5");
  w.line("end");
  return w.text();
}

// ShuffleNetV2's units: a stride-1 one after a conv (split, the second half through a 1x1
// and a depthwise conv, concat with the first half, shuffle: the runner fuses the concat
// and shuffle and reads the first half from the split's input), a second stride-1 one
// (its split fused into the first unit's end, which writes both halves) and a stride-2
// one (two conv branches, concat, shuffle: fused), with halves of 7 channels (inside an
// 8-channel block).
std::string shuffle_units_model(uint32_t seed) {
  ModelWriter w(seed);
  w.line("gknet 1");
  w.line("name shuffle_units");
  w.line("input 3 9 10");
  w.weighted("conv in=0 out=1 oc=14 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 act=relu bias=1", 14, 27);
  w.line("split in=1 out=2,3 channels=7,7");
  w.weighted("conv in=3 out=4 oc=7 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu bias=1", 7, 7);
  w.weighted("conv in=4 out=5 oc=7 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 groups=7 act=none bias=1", 7, 9);
  w.line("concat in=2,5 out=6");
  w.line("shuffle in=6 out=7 groups=2");
  w.line("split in=7 out=8,9 channels=7,7");
  w.weighted("conv in=9 out=10 oc=7 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu bias=1", 7, 7);
  w.line("concat in=8,10 out=11");
  w.line("shuffle in=11 out=12 groups=2");
  w.weighted("conv in=12 out=13 oc=7 kh=3 kw=3 sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 groups=7 act=none bias=1", 7, 18);
  w.weighted("conv in=12 out=14 oc=7 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu bias=1", 7, 14);
  w.weighted("conv in=14 out=15 oc=7 kh=3 kw=3 sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 groups=7 act=none bias=1", 7, 9);
  w.line("concat in=13,15 out=16");
  w.line("shuffle in=16 out=17 groups=2");
  w.line("gap in=17 out=18");
  w.weighted("fc in=18 out=19 features=5 act=none bias=1", 5, 14);
  w.line("output 19");
  w.line("end");
  return w.text();
}

// Joins whose operands outlive them or not depending on where a batch's image-by-image ops
// end: a residual that is the conv's own input, residuals and adds of tensors read again
// later, and a residual that dies at its conv (its buffer taken over when both hold as
// many images).
std::string joins_model(uint32_t seed) {
  ModelWriter w(seed);
  w.line("gknet 1");
  w.line("name joins");
  w.line("input 3 8 8");
  w.weighted("conv in=0 out=1 oc=8 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 act=relu bias=1", 8, 27);
  w.weighted("conv in=1 out=2 oc=8 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu add=1 bias=1", 8, 8);
  w.weighted("conv in=2 out=3 oc=8 kh=3 kw=3 sh=1 sw=1 pt=1 pl=1 pb=1 pr=1 act=relu add=1 bias=1", 8, 72);
  w.line("add in=1,3 out=4 act=relu");
  w.line("add in=4,2 out=5 act=none");
  w.weighted("conv in=5 out=6 oc=8 kh=1 kw=1 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 act=relu add=5 bias=1", 8, 8);
  w.weighted("conv in=4 out=7 oc=8 kh=3 kw=3 sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 act=relu bias=1", 8, 72);
  w.line("gap in=6 out=8");
  w.line("gap in=7 out=9");
  w.line("add in=8,9 out=10 act=none");
  w.line("flatten in=10 out=11");
  w.weighted("fc in=11 out=12 features=4 act=none bias=1", 4, 8);
  w.line("output 12");
  w.line("end");
  return w.text();
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// ---------------------------------------------------------------- the reference

struct RefTensor {
  int64_t n = 0, c = 0, h = 0, w = 0;
  std::vector<double> v;
  RefTensor() = default;
  RefTensor(int64_t n_, int64_t c_, int64_t h_, int64_t w_) : n(n_), c(c_), h(h_), w(w_), v(size_t(n_ * c_ * h_ * w_)) {}
  double& at(int64_t i, int64_t ch, int64_t y, int64_t x) { return v[size_t(((i * c + ch) * h + y) * w + x)]; }
};

double activate(double v, gk_activation act) {
  if (act == GK_ACT_RELU) return std::max(v, 0.0);
  if (act == GK_ACT_RELU6) return std::min(std::max(v, 0.0), 6.0);
  return v;
}

RefTensor ref_conv(RefTensor& x, const Op& op, RefTensor* residual, int64_t oh, int64_t ow) {
  const gk_conv_desc& d = op.conv;
  RefTensor y(x.n, d.out_channels, oh, ow);
  const int64_t icg = x.c / d.groups, ocg = d.out_channels / d.groups;
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t oc = 0; oc < d.out_channels; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = op.bias.empty() ? 0.0 : op.bias[size_t(oc)];
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t r = 0; r < d.kernel_h; ++r)
              for (int64_t s = 0; s < d.kernel_w; ++s) {
                const int64_t yy = i * d.stride_h - d.pad_top + r * d.dilation_h;
                const int64_t xx = j * d.stride_w - d.pad_left + s * d.dilation_w;
                if (yy < 0 || yy >= x.h || xx < 0 || xx >= x.w) continue;
                acc += double(op.weights[size_t(((oc * icg + ic) * d.kernel_h + r) * d.kernel_w + s)]) *
                       x.at(n, oc / ocg * icg + ic, yy, xx);
              }
          if (residual) acc += residual->at(n, oc, i, j);
          y.at(n, oc, i, j) = activate(acc, op.act);
        }
  return y;
}

// PyTorch's pooling, written independently of the library's.
RefTensor ref_pool(RefTensor& x, const gk_pool_desc& p, int64_t oh, int64_t ow) {
  RefTensor y(x.n, x.c, oh, ow);
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t c = 0; c < x.c; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t y0 = i * p.stride_h - p.pad_top, x0 = j * p.stride_w - p.pad_left;
          const int64_t y1 = std::min(y0 + p.kernel_h, x.h + p.pad_bottom), x1 = std::min(x0 + p.kernel_w, x.w + p.pad_right);
          double best = -INFINITY, sum = 0;
          int64_t inside = 0;
          for (int64_t yy = std::max<int64_t>(y0, 0); yy < std::min(y1, x.h); ++yy)
            for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x1, x.w); ++xx)
              best = std::max(best, x.at(n, c, yy, xx)), sum += x.at(n, c, yy, xx), ++inside;
          const double divisor = p.count_include_pad ? double((y1 - y0) * (x1 - x0)) : double(inside);
          y.at(n, c, i, j) = p.kind == GK_POOL_MAX ? best : sum / divisor;
        }
  return y;
}

// Runs the model in double on NCHW tensors; returns the logits (batch x classes).
std::vector<double> reference_logits(const Model& m, const std::vector<float>& input, int64_t batch) {
  std::vector<RefTensor> t(m.tensors.size());
  const gknet::TensorShape& in = m.tensors[0];
  t[0] = RefTensor(batch, in.c, in.h, in.w);
  for (size_t i = 0; i < input.size(); ++i) t[0].v[i] = input[i];
  for (const Op& op : m.ops) {
    RefTensor& x = t[size_t(op.in[0])];
    const gknet::TensorShape& ys = m.tensors[size_t(op.out[0])];
    RefTensor& y = t[size_t(op.out[0])];
    switch (op.kind) {
      case OpKind::Conv:
        y = ref_conv(x, op, op.residual >= 0 ? &t[size_t(op.residual)] : nullptr, ys.h, ys.w);
        break;
      case OpKind::ConcatShuffle:
      case OpKind::ConcatShuffleSplit: ADD_FAILURE() << "model files hold no fused ops"; break;
      case OpKind::MaxPool:
      case OpKind::AvgPool: y = ref_pool(x, op.pool, ys.h, ys.w); break;
      case OpKind::GlobalAvgPool:
        y = RefTensor(batch, x.c, 1, 1);
        for (int64_t n = 0; n < batch; ++n)
          for (int64_t c = 0; c < x.c; ++c) {
            double s = 0;
            for (int64_t i = 0; i < x.h * x.w; ++i) s += x.at(n, c, 0, i);
            y.at(n, c, 0, 0) = s / double(x.h * x.w);
          }
        break;
      case OpKind::Add: {
        RefTensor& b = t[size_t(op.in[1])];
        y = RefTensor(batch, x.c, x.h, x.w);
        for (size_t i = 0; i < y.v.size(); ++i) y.v[i] = activate(x.v[i] + b.v[i], op.act);
        break;
      }
      case OpKind::Concat: {
        y = RefTensor(batch, ys.c, ys.h, ys.w);
        int64_t c0 = 0;
        for (int p : op.in) {
          RefTensor& part = t[size_t(p)];
          for (int64_t n = 0; n < batch; ++n)
            for (int64_t c = 0; c < part.c; ++c)
              for (int64_t i = 0; i < part.h * part.w; ++i) y.at(n, c0 + c, 0, i) = part.at(n, c, 0, i);
          c0 += part.c;
        }
        break;
      }
      case OpKind::Split: {
        int64_t c0 = 0;
        for (size_t k = 0; k < op.out.size(); ++k) {
          RefTensor part(batch, op.channels[k], x.h, x.w);
          for (int64_t n = 0; n < batch; ++n)
            for (int64_t c = 0; c < part.c; ++c)
              for (int64_t i = 0; i < x.h * x.w; ++i) part.at(n, c, 0, i) = x.at(n, c0 + c, 0, i);
          c0 += part.c;
          t[size_t(op.out[k])] = part;
        }
        break;
      }
      case OpKind::Shuffle: {
        y = RefTensor(batch, x.c, x.h, x.w);
        const int64_t per = x.c / op.groups;
        for (int64_t n = 0; n < batch; ++n)
          for (int64_t g = 0; g < op.groups; ++g)
            for (int64_t k = 0; k < per; ++k)
              for (int64_t i = 0; i < x.h * x.w; ++i) y.at(n, k * op.groups + g, 0, i) = x.at(n, g * per + k, 0, i);
        break;
      }
      case OpKind::Flatten:
        y = x;
        y.c = x.c * x.h * x.w, y.h = y.w = 1;
        break;
      case OpKind::FullyConnected: {
        const int64_t in_f = x.c * x.h * x.w;
        y = RefTensor(batch, op.features, 1, 1);
        for (int64_t n = 0; n < batch; ++n)
          for (int64_t o = 0; o < op.features; ++o) {
            double acc = op.bias.empty() ? 0.0 : op.bias[size_t(o)];
            for (int64_t k = 0; k < in_f; ++k) acc += double(op.weights[size_t(o * in_f + k)]) * x.v[size_t(n * in_f + k)];
            y.at(n, o, 0, 0) = activate(acc, op.act);
          }
        break;
      }
    }
  }
  return t[size_t(m.output)].v;
}

void expect_network_matches(const std::string& bytes, const char* name) {
  const std::string path = write_temp(name, bytes);
  Model model;
  std::string error;
  ASSERT_TRUE(gknet::load_model(path, &model, &error)) << error;
  const gk_layout layouts[] = {GK_LAYOUT_NCHW8, GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW4, GK_LAYOUT_NCHW16};
  for (int64_t batch : {1, 3}) {
    const gknet::TensorShape& in = model.tensors[0];
    const std::vector<float> x = gktest::random_vector(size_t(batch * in.c * in.h * in.w), uint32_t(batch), 0.0f, 1.0f);
    const std::vector<double> want = reference_logits(model, x, batch);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (gk_layout layout : layouts)
      for (int threads : {1, 2})
        for (gk_conv_algo algo : {GK_CONV_ALGO_AUTO, GK_CONV_ALGO_IM2COL_GEMM}) {
          SCOPED_TRACE(std::string(name) + " batch " + std::to_string(batch) + " layout " + std::to_string(layout) +
                       " threads " + std::to_string(threads) + " algo " + std::to_string(algo));
          gk_set_num_threads(threads);
          gknet::Network net;
          gknet::BuildOptions opt;
          opt.layout = layout;
          opt.algo = algo;
          opt.conv_flags = GK_CONV_FLAG_HIGH_ACCURACY;
          // The forced algorithm cannot serve every conv (depthwise): those fail to plan.
          if (!net.build(model, batch, opt, &error)) {
            EXPECT_EQ(algo, GK_CONV_ALGO_IM2COL_GEMM) << error;
            continue;
          }
          std::vector<float> got(want.size(), NAN);
          ASSERT_TRUE(net.run(x.data(), got.data(), &error)) << error;
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 2e-5 * scale + 1e-6) << "logit " << i;
          // A second run gives the same logits: no state is left behind (in-place joins).
          std::vector<float> again(want.size(), NAN);
          ASSERT_TRUE(net.run(x.data(), again.data(), &error)) << error;
          EXPECT_EQ(got, again);
        }
  }
  gk_set_num_threads(0);
}

// A batch whose first operations run image by image (BuildOptions::image_by_image_ops):
// cut after every operation in turn, in every layout, in one lane and in several (each
// lane a thread with its share of the images, BuildOptions::lanes), the logits match the
// reference; the runner's own choice cuts somewhere where a lane has several images, and
// nowhere at batch 1 or one image a lane.
void expect_every_head_matches(const std::string& bytes, const char* name, bool chooses_a_head) {
  const std::string path = write_temp(name, bytes);
  Model model;
  std::string error;
  ASSERT_TRUE(gknet::load_model(path, &model, &error)) << error;
  const int64_t batch = 3;
  const gknet::TensorShape& in = model.tensors[0];
  const std::vector<float> x = gktest::random_vector(size_t(batch * in.c * in.h * in.w), 21, 0.0f, 1.0f);
  const std::vector<double> want = reference_logits(model, x, batch);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  const gk_layout layouts[] = {GK_LAYOUT_NCHW8, GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW4, GK_LAYOUT_NCHW16};
  // Threads and lanes: one lane; two lanes of 1 and 2 images (a plan for each share); the
  // batch as one on two threads (no head by choice); three lanes of one image (none either).
  const struct {
    int threads;
    int64_t lanes, want_lanes;
  } runs[] = {{1, -1, 1}, {2, -1, 2}, {2, 1, 1}, {4, -1, 3}};
  for (gk_layout layout : layouts)
    for (const auto& run : runs) {
      gk_set_num_threads(run.threads);
      gknet::BuildOptions opt;
      opt.layout = layout;
      opt.conv_flags = GK_CONV_FLAG_HIGH_ACCURACY;
      opt.lanes = run.lanes;
      gknet::Network chosen;
      ASSERT_TRUE(chosen.build(model, batch, opt, &error)) << error;
      EXPECT_EQ(chosen.lanes(), run.want_lanes);
      EXPECT_EQ(gk_get_num_threads(), run.threads) << "the lanes' planning restores the setting";
      EXPECT_EQ(gk_set_num_threads_local(0), 0) << "the lanes' planning restores the thread's local setting";
      const bool several_images_a_lane = batch > run.want_lanes, one_thread_a_lane = run.threads == 1 || run.lanes != 1;
      EXPECT_EQ(chosen.image_by_image_ops() > 0, chooses_a_head && several_images_a_lane && one_thread_a_lane) << name;
      gknet::Network one_image;
      ASSERT_TRUE(one_image.build(model, 1, opt, &error)) << error;
      EXPECT_EQ(one_image.image_by_image_ops(), 0);
      EXPECT_EQ(one_image.lanes(), 1);
      for (int64_t head = 0;; ++head) {
        SCOPED_TRACE(std::string(name) + " layout " + std::to_string(layout) + " threads " +
                     std::to_string(run.threads) + " lanes " + std::to_string(run.want_lanes) + " image by image " +
                     std::to_string(head));
        opt.image_by_image_ops = head;
        gknet::Network net;
        ASSERT_TRUE(net.build(model, batch, opt, &error)) << error;
        if (net.image_by_image_ops() < head) break;  // past the last op
        std::vector<float> got(want.size(), NAN);
        ASSERT_TRUE(net.run(x.data(), got.data(), &error)) << error;
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5 * scale + 1e-6) << "logit " << i;
        std::vector<float> again(want.size(), NAN);
        ASSERT_TRUE(net.run(x.data(), again.data(), &error)) << error;
        EXPECT_EQ(got, again);
      }
    }
  gk_set_num_threads(0);
}

TEST(Network, BatchesCutIntoImageByImageOpsAnywhereMatchTheDoubleReference) {
  expect_every_head_matches(every_op_model(11), "every_op_heads.gk", true);
  expect_every_head_matches(pooled_classifier_model(12), "pooled_heads.gk", true);
  expect_every_head_matches(shuffle_units_model(13), "shuffle_units_heads.gk", true);
  expect_every_head_matches(joins_model(15), "joins_heads.gk", true);
}

// Planning the lanes' convs on one thread lowers only the building thread's setting: a
// thread polling its own through the builds never sees it lowered.
TEST(Network, BuildingLanesLeavesOtherThreadsSettingAlone) {
  Model model;
  std::string error;
  ASSERT_TRUE(gknet::load_model(write_temp("lanes_setting.gk", shuffle_units_model(13)), &model, &error)) << error;
  gk_set_num_threads(2);
  std::atomic<bool> done{false};
  std::atomic<int> lowest{1 << 20}, polls{0};
  std::thread poller([&] {
    while (!done.load()) {
      lowest = std::min(lowest.load(), gk_get_num_threads());
      ++polls;
    }
  });
  // The poller running before the builds and through them (on a loaded machine it may not
  // be scheduled at first): at least 20 builds, and more until it has polled beside them.
  while (polls.load() == 0) std::this_thread::yield();
  const int polls_before = polls.load();
  for (int i = 0; i < 20 || (polls.load() < polls_before + 100 && i < 2000); ++i) {
    // EXPECT, not ASSERT: the poller must be joined
    gknet::Network net;
    const bool built = net.build(model, 2, gknet::BuildOptions{}, &error);
    EXPECT_TRUE(built) << error;
    if (!built) break;
    EXPECT_EQ(net.lanes(), 2);
  }
  done = true;
  poller.join();
  gk_set_num_threads(0);
  EXPECT_GE(polls.load(), polls_before + 100);
  EXPECT_EQ(lowest.load(), 2);
}

TEST(Network, EveryOperationMatchesTheDoubleReferenceInEveryLayout) {
  expect_network_matches(every_op_model(11), "every_op.gk");
}

TEST(Network, PooledClassifierMatchesTheDoubleReferenceInEveryLayout) {
  expect_network_matches(pooled_classifier_model(12), "pooled.gk");
}

// The concat + shuffle pairs run fused (no concat, shuffle or whole split left; the one
// whose shuffled tensor only a split reads writes that split's parts), and the logits
// match the reference computed op by op from the file.
TEST(Network, ShuffleUnitsRunFusedAndMatchTheDoubleReference) {
  const std::string bytes = shuffle_units_model(13);
  expect_network_matches(bytes, "shuffle_units.gk");
  Model model;
  std::string error;
  ASSERT_TRUE(gknet::load_model(write_temp("shuffle_units_profile.gk", bytes), &model, &error)) << error;
  gknet::Network net;
  ASSERT_TRUE(net.build(model, 1, gknet::BuildOptions{}, &error)) << error;
  const std::vector<float> x = gktest::random_vector(3 * 9 * 10, 5, 0.0f, 1.0f);
  std::vector<float> logits(5);
  gknet::RunProfile profile;
  ASSERT_TRUE(net.run(x.data(), logits.data(), &error, &profile)) << error;
  EXPECT_GT(profile.by_kind_s[int(gknet::OpKind::ConcatShuffle)], 0.0);
  EXPECT_GT(profile.by_kind_s[int(gknet::OpKind::ConcatShuffleSplit)], 0.0);
  EXPECT_EQ(profile.by_kind_s[int(gknet::OpKind::Concat)], 0.0);
  EXPECT_EQ(profile.by_kind_s[int(gknet::OpKind::Shuffle)], 0.0);
  // In two lanes the profile holds every op's time, scaled to the lanes' wall time: its
  // total within the run's.
  gk_set_num_threads(2);
  gknet::Network lanes;
  ASSERT_TRUE(lanes.build(model, 2, gknet::BuildOptions{}, &error)) << error;
  ASSERT_EQ(lanes.lanes(), 2);
  const std::vector<float> two = gktest::random_vector(2 * 3 * 9 * 10, 6, 0.0f, 1.0f);
  std::vector<float> two_logits(10);
  gknet::RunProfile lanes_profile;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(lanes.run(two.data(), two_logits.data(), &error, &lanes_profile)) << error;
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  gk_set_num_threads(0);
  EXPECT_GT(lanes_profile.conv_s, 0.0);
  EXPECT_GT(lanes_profile.by_kind_s[int(gknet::OpKind::ConcatShuffleSplit)], 0.0);
  EXPECT_LE(lanes_profile.conv_s + lanes_profile.other_s, run_s);
  double ops_s = 0;
  for (double t : lanes_profile.op_s) {
    EXPECT_GT(t, 0.0);
    ops_s += t;
  }
  EXPECT_NEAR(ops_s, lanes_profile.conv_s + lanes_profile.other_s, 1e-9 + 1e-6 * ops_s);
}

// ---------------------------------------------------------------- malformed models

// Each variant breaks one thing; the loader refuses it with a message naming the line.
TEST(Network, MalformedModelsAreRefusedWithTheLine) {
  const std::string good = every_op_model(3);
  Model m;
  std::string error;
  ASSERT_TRUE(gknet::load_model(write_temp("good.gk", good), &m, &error)) << error;

  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return p == std::string::npos ? s : s.replace(p, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"wrong magic", "gknet 2" + good.substr(7)},
      {"unknown op", replaced("shuffle in=9", "shufle in=9")},
      {"unknown key", replaced("ceil=1", "ceil=1 foo=2")},
      {"missing key", replaced(" oc=12 kh=3 kw=3 sh=2", " kh=3 kw=3 sh=2")},
      {"undefined tensor", replaced("concat in=5,8", "concat in=5,80")},
      {"out of order output", replaced("out=9", "out=10")},
      {"add shape mismatch", replaced("add in=12,13", "add in=12,11")},
      {"split channels sum", replaced("channels=5,7", "channels=5,6")},
      {"shuffle groups", replaced("groups=3", "groups=5")},
      {"huge channels", replaced("oc=20 kh=3", "oc=99999999999 kh=3")},
      {"negative stride", replaced("sh=2 sw=2 pt=1 pl=1 pb=1 pr=1 ceil=1", "sh=-2 sw=2 pt=1 pl=1 pb=1 pr=1 ceil=1")},
      {"pool window too large", replaced("maxpool in=1 out=2 kh=3", "maxpool in=1 out=2 kh=30")},
      {"not an integer", replaced("features=9", "features=9x")},
      {"bad activation", replaced("act=relu6", "act=gelu")},
      {"flat where image expected", replaced("fc in=15", "fc in=14")},
      {"no end", good.substr(0, good.size() - 4)},
      {"trailing data", good + "xyz"},
      {"empty", ""},
  };
  for (const auto& c : cases) {
    Model bad;
    error.clear();
    EXPECT_FALSE(gknet::load_model(write_temp("bad.gk", c.second), &bad, &error)) << c.first;
    EXPECT_NE(error.find("bad.gk"), std::string::npos) << c.first << ": " << error;
  }
  // Every truncation, at line boundaries and inside the weights.
  for (size_t cut = 0; cut < good.size(); cut += good.size() / 97 + 1) {
    Model bad;
    EXPECT_FALSE(gknet::load_model(write_temp("cut.gk", good.substr(0, cut)), &bad, &error)) << "cut at " << cut;
  }
  // A NaN among the weights.
  std::string nan_weights = good;
  const float nan = NAN;
  nan_weights.replace(good.find("bias=1\n") + 7, 4, reinterpret_cast<const char*>(&nan), 4);
  EXPECT_FALSE(gknet::load_model(write_temp("bad.gk", nan_weights), &m, &error));
  EXPECT_NE(error.find("NaN"), std::string::npos) << error;
}

// ---------------------------------------------------------------- gk-infer

// Runs gk-infer (beside the test helpers) with `args`; its exit status and stderr.
int run_gk_infer(const std::string& args, std::string* output) {
  const char* dir = std::getenv("GEMMKIT_TEST_HELPERS");
  const char* runner = std::getenv("GEMMKIT_TEST_RUNNER");
  const std::string cmd = std::string(runner ? runner : "") + " " + (dir ? dir : "build/test") + "/../bin/gk-infer " +
                          args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[512];
  output->clear();
  while (std::fgets(buf, sizeof buf, p)) *output += buf;
  return pclose(p);
}

void save_npy(const std::string& path, std::vector<int64_t> shape, const std::vector<float>& data) {
  gknet::NpyArray a;
  a.shape = std::move(shape);
  a.data = data;
  std::string error;
  ASSERT_TRUE(gknet::write_npy(path, a, &error)) << error;
}

TEST(Network, GkInferRunsAModelAndWritesItsLogits) {
  const std::string model_path = write_temp("infer.gk", pooled_classifier_model(5));
  const std::string in = testing::TempDir() + "infer_in.npy", out = testing::TempDir() + "infer_out.npy";
  const std::vector<float> x = gktest::random_vector(2 * 3 * 9 * 9, 4, 0.0f, 1.0f);
  save_npy(in, {2, 3, 9, 9}, x);
  std::string log;
  const int status = run_gk_infer(model_path + " --input " + in + " --output " + out + " --threads 2 --time --rounds 3", &log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_EQ(log.rfind("median_ms="), log.rfind('\n', log.size() - 2) + 1) << "median_ms must be the last line: " << log;
  gknet::NpyArray logits;
  std::string error;
  ASSERT_TRUE(gknet::read_npy(out, &logits, &error)) << error;
  ASSERT_EQ(logits.shape, (std::vector<int64_t>{2, 6}));
  Model model;
  ASSERT_TRUE(gknet::load_model(model_path, &model, &error)) << error;
  const std::vector<double> want = reference_logits(model, x, 2);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(logits.data[i], want[i], 1e-3 * scale) << i;
  // The batch's first 3 ops image by image, as asked and reported.
  const int cut = run_gk_infer(model_path + " --input " + in + " --output " + out +
                                   " --threads 1 --image-by-image-ops 3 --time --rounds 1", &log);
  ASSERT_TRUE(WIFEXITED(cut) && WEXITSTATUS(cut) == 0) << log;
  EXPECT_NE(log.find("image_by_image_ops=3 lanes=1\n"), std::string::npos) << log;
  ASSERT_TRUE(gknet::read_npy(out, &logits, &error)) << error;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(logits.data[i], want[i], 1e-3 * scale) << i;
  // Two threads run the two images as two lanes by default, the batch as one when asked.
  for (const char* lanes : {"", " --lanes 1", " --lanes 5"}) {
    const int run = run_gk_infer(model_path + " --input " + in + " --output " + out + " --threads 2 --time --rounds 1" +
                                     lanes, &log);
    ASSERT_TRUE(WIFEXITED(run) && WEXITSTATUS(run) == 0) << log;
    EXPECT_NE(log.find(std::string(lanes) == " --lanes 1" ? "lanes=1\n" : "lanes=2\n"), std::string::npos) << log;
    ASSERT_TRUE(gknet::read_npy(out, &logits, &error)) << error;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(logits.data[i], want[i], 1e-3 * scale) << lanes << " " << i;
  }
}

// --time-ops: a line per operation run (concat + shuffle fused), in order, as the runner
// describes it (kind, model line, a convolution's algorithm), each with a time; median_ms
// still last.
TEST(Network, GkInferTimeOpsListsEveryOperation) {
  const std::string bytes = shuffle_units_model(14);
  const std::string model_path = write_temp("time_ops.gk", bytes);
  const std::string in = testing::TempDir() + "time_ops_in.npy";
  save_npy(in, {1, 3, 9, 10}, gktest::random_vector(3 * 9 * 10, 7, 0.0f, 1.0f));
  std::string log;
  const int status = run_gk_infer(model_path + " --input " + in + " --time-ops --rounds 2", &log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_EQ(log.rfind("median_ms="), log.rfind('\n', log.size() - 2) + 1) << "median_ms must be the last line: " << log;
  Model model;
  std::string error;
  ASSERT_TRUE(gknet::load_model(model_path, &model, &error)) << error;
  gknet::Network net;
  ASSERT_TRUE(net.build(model, 1, gknet::BuildOptions{}, &error)) << error;
  const std::vector<std::string> ops = net.describe_ops();
  ASSERT_LT(ops.size(), model.ops.size());  // fused
  std::istringstream lines(log);
  size_t next = 0, convs = 0, fused = 0, fused_splits = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, 3, "op ") != 0) continue;
    ASSERT_LT(next, ops.size()) << log;
    EXPECT_EQ(line.find("op " + std::to_string(next) + " " + ops[next] + " ms="), 0u) << line;
    convs += ops[next].compare(0, 5, "conv ") == 0;
    fused += ops[next].compare(0, 15, "concat_shuffle ") == 0;
    fused_splits += ops[next].compare(0, 21, "concat_shuffle_split ") == 0;
    ++next;
  }
  EXPECT_EQ(next, ops.size()) << log;
  EXPECT_EQ(fused, 2u) << log;
  EXPECT_EQ(fused_splits, 1u) << log;
  EXPECT_GT(convs, 0u);
  for (const std::string& op : ops)
    if (op.compare(0, 5, "conv ") == 0) {
      const std::string algo = op.substr(op.rfind(' ') + 1);
      EXPECT_TRUE(algo == "pointwise_nchw8" || algo == "direct_nchw8" || algo == "depthwise" || algo == "gemm_1x1" ||
                  algo == "im2col_gemm" || algo == "direct" || algo.compare(0, 9, "winograd_") == 0)
          << op;
    }
}

TEST(Network, GkInferRefusesBadInputWithAMessageAndNoCrash) {
  const std::string model_path = write_temp("refuse.gk", pooled_classifier_model(6));
  const std::string dir = testing::TempDir();
  save_npy(dir + "wrong_shape.npy", {1, 3, 8, 9}, std::vector<float>(3 * 8 * 9, 0.5f));
  save_npy(dir + "three_dims.npy", {3, 9, 9}, std::vector<float>(3 * 9 * 9, 0.5f));
  // A version 1.0 header of 118 bytes (the 'v'), so the data starts at byte 128.
  std::string f8 = std::string("\x93NUMPY\x01", 7) + '\0' + 'v' + '\0' +
                   "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 3, 9, 9), }";
  f8.append(127 - f8.size(), ' ');
  f8 += '\n';
  f8.append(8 * 3 * 9 * 9, '\0');
  write_temp("f8.npy", f8);
  std::string truncated = f8;
  truncated.replace(truncated.find("<f8"), 3, "<f4");
  truncated.resize(truncated.size() - 8 * 3 * 9 * 9 + 100);
  write_temp("truncated.npy", truncated);
  write_temp("cut.gk", pooled_classifier_model(6).substr(0, 500));
  save_npy(dir + "ok.npy", {1, 3, 9, 9}, std::vector<float>(3 * 9 * 9, 0.5f));

  const std::vector<std::pair<std::string, std::string>> cases = {
      {model_path + " --input " + dir + "wrong_shape.npy", "expected shape"},
      {model_path + " --input " + dir + "three_dims.npy", "expected shape"},
      {model_path + " --input " + dir + "f8.npy", "float32"},
      {model_path + " --input " + dir + "truncated.npy", "truncated"},
      {model_path + " --input " + dir + "missing.npy", "cannot open"},
      {dir + "cut.gk --input " + dir + "ok.npy", "truncated"},
      {dir + "nothing.gk --input " + dir + "ok.npy", "cannot open"},
  };
  for (const auto& c : cases) {
    std::string log;
    const int status = run_gk_infer(c.first, &log);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << c.first << ": " << log;
    EXPECT_NE(log.find(c.second), std::string::npos) << c.first << ": " << log;
  }
  std::string log;
  int status = run_gk_infer(model_path + " --input " + dir + "ok.npy --threads zero", &log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << log;
  for (const char* ops : {"-1", "some"}) {
    status = run_gk_infer(model_path + " --input " + dir + "ok.npy --image-by-image-ops " + ops, &log);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << log;
    EXPECT_NE(log.find("bad --image-by-image-ops"), std::string::npos) << log;
  }
  for (const char* lanes : {"0", "-2", "two"}) {
    status = run_gk_infer(model_path + " --input " + dir + "ok.npy --lanes " + lanes, &log);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << log;
    EXPECT_NE(log.find("bad --lanes"), std::string::npos) << log;
  }
  status = run_gk_infer("--input " + dir + "ok.npy", &log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << log;
}

}  // namespace
