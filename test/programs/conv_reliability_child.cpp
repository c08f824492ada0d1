// The convolution side's checks that need a process of their own
// (test/test_conv_reliability.cpp runs this program, linked against the shared libgemmkit,
// one mode per run): real 2-thread OpenMP teams, an allocator that is counted and made to
// fail (test/programs/counting_allocator.h), an address-space limit.
//
//   count            after one warm-up run of each plan, the next run allocates nothing
//   first            the first gk_conv_run_with_workspace of every plan allocates nothing
//   inject           a cold run of every plan (create, run, run in a workspace, destroy),
//                    the layout conversions and the network operations, repeated with its
//                    n-th allocation failing for every n up to the allocations it makes
//   rlimit           the same under RLIMIT_AS stepped down until allocations fail
//   soak SECONDS     8 user threads sharing the plans and calling cblas_sgemm, 2 gk threads
//
// inject and rlimit fork one child per run, from a parent that has not touched the library
// or OpenMP: each child is a cold process with real thread teams, and a crash there is
// reported with the allocation number or limit that caused it. Every status must be GK_OK
// or GK_ERR_OUT_OF_MEMORY where memory is asked for, GK_OK where none is (a run in the
// caller's workspace, a layout conversion, the network operations), and every GK_OK result
// right against a double-precision reference computed here.
//
// Exit 0: passed; 1: failed (the reason printed); 77: skipped (the reason printed).
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conv_cases.h"
#include "counting_allocator.h"
#include "gemmkit.h"

using namespace conv_cases;

namespace {

constexpr float kNaN = __builtin_nanf("");

// Emulated runs (GEMMKIT_TEST_QUICK): smaller layers, and the injector fails every 8th
// allocation only.
bool quick() {
  const char* s = std::getenv("GEMMKIT_TEST_QUICK");
  return s && *s && *s != '0';
}

int fail(const std::string& why) {
  std::printf("FAILED: %s\n", why.c_str());
  return 1;
}

int skip(const char* why) {
  std::printf("skip: %s\n", why);
  return 77;
}

// Starts the OpenMP worker pool (thread stacks, team) before anything is counted, failed
// or limited: libgomp itself exits when it cannot allocate its team.
void warm_openmp(int threads) {
  if (threads < 2) return;
  std::atomic<int> seen{0};
#pragma omp parallel num_threads(threads)
  seen += 1;
}

uint32_t g_seed = 2024;
float random_float(float lo, float hi) {
  g_seed = g_seed * 1664525u + 1013904223u;
  return lo + (hi - lo) * static_cast<float>(g_seed >> 8) / 16777216.0f;
}

int64_t block_of(gk_layout layout) {
  return layout == GK_LAYOUT_NCHW4 ? 4 : layout == GK_LAYOUT_NCHW8 ? 8 : layout == GK_LAYOUT_NCHW16 ? 16 : 1;
}
int64_t tensor_floats(gk_layout layout, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t x = block_of(layout);
  return n * ((c + x - 1) / x * x) * h * w;
}

// An NCHW tensor in `layout`, its padding channels set to `padding`.
std::vector<float> in_layout(const std::vector<float>& nchw, gk_layout layout, int64_t n, int64_t c, int64_t h,
                             int64_t w, float padding) {
  std::vector<float> t(static_cast<size_t>(tensor_floats(layout, n, c, h, w)), padding);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          t[size_t(index_of(layout, c, h, w, i, ch, y, x))] = nchw[size_t(((i * c + ch) * h + y) * w + x)];
  return t;
}

// Whether element i of a tensor in `layout` is an NCHWx padding channel.
bool is_padding(gk_layout layout, int64_t c, int64_t h, int64_t w, int64_t i) {
  const int64_t x = block_of(layout);
  if (x == 1 || c % x == 0) return false;
  const int64_t lane = i % x, block = i / (x * h * w) % ((c + x - 1) / x);
  return block * x + lane >= c;
}

// ---------------------------------------------------------------- convolutions

// A layer's data (NCHW) and its reference in double: conv + bias, and the sum of the
// magnitudes of its terms (the error bound's scale).
struct LayerData {
  gk_conv_desc d;
  int64_t oh = 0, ow = 0, k = 0;
  std::vector<float> x, w, bias;
  std::vector<double> pre, mag;
};

LayerData make_layer(Layer which, Size size) {
  LayerData L;
  L.d = layer(which, size);
  const gk_conv_desc& d = L.d;
  L.oh = (d.in_height + d.pad_top + d.pad_bottom - d.dilation_h * (d.kernel_h - 1) - 1) / d.stride_h + 1;
  L.ow = (d.in_width + d.pad_left + d.pad_right - d.dilation_w * (d.kernel_w - 1) - 1) / d.stride_w + 1;
  const int64_t icg = d.in_channels / d.groups, ocg = d.out_channels / d.groups;
  L.k = icg * d.kernel_h * d.kernel_w;
  const float scale = std::sqrt(6.0f / float(L.k));
  L.x.resize(size_t(d.batch * d.in_channels * d.in_height * d.in_width));
  L.w.resize(size_t(d.out_channels * L.k));
  L.bias.resize(size_t(d.out_channels));
  for (float& v : L.x) v = random_float(0.0f, 1.0f);
  for (float& v : L.w) v = random_float(-scale, scale);
  for (float& v : L.bias) v = random_float(-0.5f, 0.5f);
  const size_t outputs = size_t(d.batch * d.out_channels * L.oh * L.ow);
  L.pre.resize(outputs);
  L.mag.resize(outputs);
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t oc = 0; oc < d.out_channels; ++oc) {
      const int64_t g = oc / ocg;
      for (int64_t oy = 0; oy < L.oh; ++oy)
        for (int64_t ox = 0; ox < L.ow; ++ox) {
          double acc = L.bias[size_t(oc)], mag = std::fabs(acc);
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t r = 0; r < d.kernel_h; ++r)
              for (int64_t s = 0; s < d.kernel_w; ++s) {
                const int64_t iy = oy * d.stride_h - d.pad_top + r * d.dilation_h;
                const int64_t ix = ox * d.stride_w - d.pad_left + s * d.dilation_w;
                if (iy < 0 || iy >= d.in_height || ix < 0 || ix >= d.in_width) continue;
                const double v = double(L.x[size_t(((n * d.in_channels + g * icg + ic) * d.in_height + iy) * d.in_width + ix)]) *
                                 L.w[size_t(((oc * icg + ic) * d.kernel_h + r) * d.kernel_w + s)];
                acc += v;
                mag += std::fabs(v);
              }
          const size_t at = size_t(((n * d.out_channels + oc) * L.oh + oy) * L.ow + ox);
          L.pre[at] = acc;
          L.mag[at] = mag;
        }
    }
  return L;
}

struct Layers {
  std::vector<LayerData> all;
  explicit Layers(Size size) {
    for (int l = 0; l < kLayerCount; ++l) all.push_back(make_layer(Layer(l), size));
  }
};

// One plan of conv_cases::kPlans with its buffers, allocated before anything is counted,
// failed or limited, and what its calls returned.
struct PlanCase {
  PlanSpec spec;
  const LayerData* layer;
  gk_conv_desc d;
  std::vector<float> x, residual, y, y_ws;  // x and residual in the plan's layout
  gk_status created = GK_OK, ran = GK_OK, ran_ws = GK_OK;
  int64_t workspace_bytes = 0;
  char name[64] = "";

  PlanCase(const PlanSpec& s, const Layers& layers, Size size) : spec(s), layer(&layers.all[s.layer]) {
    d = plan_desc(s, size);
    const LayerData& L = *layer;
    x = in_layout(L.x, d.flags & GK_CONV_FLAG_NCHW_INPUT ? GK_LAYOUT_NCHW : d.layout, d.batch, d.in_channels,
                  d.in_height, d.in_width, 0.0f);
    const size_t out = size_t(tensor_floats(d.layout, d.batch, d.out_channels, L.oh, L.ow));
    y.resize(out);
    y_ws.resize(out);
    if (adds()) {
      std::vector<float> r(size_t(d.batch * d.out_channels * L.oh * L.ow));
      for (float& v : r) v = random_float(-1.0f, 1.0f);
      // NCHWx padding channels of a residual are ignored: garbage there must not show.
      residual = in_layout(r, d.layout, d.batch, d.out_channels, L.oh, L.ow, 7.0f);
    }
  }
  bool adds() const { return d.flags & GK_CONV_FLAG_ADD_TO_OUTPUT; }
  // The output before a run: the residual, or NaN where nothing may be read.
  void reset_output(std::vector<float>& out) const {
    if (adds()) {
      std::copy(residual.begin(), residual.end(), out.begin());
    } else {
      std::fill(out.begin(), out.end(), kNaN);
    }
  }
  std::string describe() const {
    return std::string(algo_name(spec.algo)) + " (" + (name[0] ? name : "no plan") + ") on layer " +
           std::to_string(spec.layer) + " in " + layout_name(d.layout) + (adds() ? ", adding to the output" : "") +
           (d.flags & GK_CONV_FLAG_NCHW_INPUT ? ", NCHW input" : "") +
           (d.flags & GK_CONV_FLAG_HIGH_ACCURACY ? ", high accuracy" : "");
  }
  // "" when `out` is the right output, else what is wrong: every output within the float
  // bound of its sum ((K + 4) eps times its magnitude; Winograd relative to the largest
  // output, its accuracy measure), NCHWx padding channels zero.
  std::string check(const std::vector<float>& out, const char* what) const {
    const LayerData& L = *layer;
    const bool winograd = std::strncmp(name, "winograd", 8) == 0;
    if ((d.flags & GK_CONV_FLAG_HIGH_ACCURACY) &&
        (std::strncmp(name, "winograd_f43", 12) == 0 || std::strncmp(name, "winograd_f63", 12) == 0))
      return describe() + ": a lossy algorithm for a high-accuracy plan";
    double largest = 0;
    for (double v : L.pre) largest = std::max(largest, std::fabs(v));
    for (int64_t n = 0; n < d.batch; ++n)
      for (int64_t c = 0; c < d.out_channels; ++c)
        for (int64_t oy = 0; oy < L.oh; ++oy)
          for (int64_t ox = 0; ox < L.ow; ++ox) {
            const size_t ref = size_t(((n * d.out_channels + c) * L.oh + oy) * L.ow + ox);
            const size_t at = size_t(index_of(d.layout, d.out_channels, L.oh, L.ow, n, c, oy, ox));
            const double r = adds() ? residual[at] : 0.0;
            double want = L.pre[ref] + r;
            if (d.activation != GK_ACT_NONE) want = std::max(want, 0.0);
            if (d.activation == GK_ACT_RELU6) want = std::min(want, 6.0);
            const double bound = winograd ? 1e-4 * (largest + 1.0)
                                          : (L.k + 4) * double(FLT_EPSILON) * (L.mag[ref] + std::fabs(r)) + 1e-30;
            if (!(std::fabs(out[at] - want) <= bound)) {
              char buf[200];
              std::snprintf(buf, sizeof buf, "%s: output (%lld, %lld, %lld, %lld) = %g, expected %g", what,
                            (long long)n, (long long)c, (long long)oy, (long long)ox, double(out[at]), want);
              return describe() + ": " + buf;
            }
          }
    for (size_t i = 0; i < out.size(); ++i)
      if (is_padding(d.layout, d.out_channels, L.oh, L.ow, int64_t(i)) && out[i] != 0.0f)
        return describe() + ": " + what + ": a padding channel holds " + std::to_string(out[i]);
    return "";
  }
};

// Every plan of `specs` (conv_cases::kPlans by default).
template <size_t Count>
std::vector<PlanCase> plan_cases(const Layers& layers, Size size, const PlanSpec (&specs)[Count]) {
  std::vector<PlanCase> cases;
  for (const PlanSpec& s : specs) cases.emplace_back(s, layers, size);
  return cases;
}
std::vector<PlanCase> plan_cases(const Layers& layers, Size size) { return plan_cases(layers, size, kPlans); }

// Memory for gk_conv_run_with_workspace, taken before anything is counted or limited.
struct WorkspacePool {
  void* memory = nullptr;
  int64_t bytes = 0;
  explicit WorkspacePool(int64_t b) : bytes(b) {
    if (posix_memalign(&memory, 64, size_t(b)) != 0) memory = nullptr;
  }
  ~WorkspacePool() { std::free(memory); }
};

// One plan's life: created, run, run in the caller's workspace, destroyed.
void plan_life(PlanCase& c, const WorkspacePool& pool) {
  c.ran = c.ran_ws = GK_OK;
  c.name[0] = '\0';
  gk_conv_plan* plan = nullptr;
  c.created = gk_conv_plan_create(&c.d, c.layer->w.data(), c.layer->bias.data(), c.spec.algo, &plan);
  if (c.created != GK_OK) return;
  std::snprintf(c.name, sizeof c.name, "%s", gk_conv_plan_algo_name(plan));
  c.reset_output(c.y);
  c.ran = gk_conv_run(plan, c.x.data(), c.y.data());
  c.workspace_bytes = gk_conv_plan_workspace_size(plan);
  c.reset_output(c.y_ws);
  c.ran_ws = c.workspace_bytes <= pool.bytes
                 ? gk_conv_run_with_workspace(plan, c.x.data(), c.y_ws.data(), pool.memory, c.workspace_bytes)
                 : GK_ERR_INVALID_ARGUMENT;
  gk_conv_plan_destroy(plan);
}

// What a plan's statuses and results say: "" when acceptable (`strict`: every call GK_OK).
std::string judge_plan(const PlanCase& c, bool strict) {
  auto status = [](gk_status s) { return std::string(gk_status_string(s)); };
  if (c.created != GK_OK) {
    if (strict || c.created != GK_ERR_OUT_OF_MEMORY) return c.describe() + ": plan creation returned " + status(c.created);
    return "";
  }
  if (c.ran != GK_OK && (strict || c.ran != GK_ERR_OUT_OF_MEMORY))
    return c.describe() + ": gk_conv_run returned " + status(c.ran);
  if (c.ran_ws != GK_OK)
    return c.describe() + ": gk_conv_run_with_workspace (" + std::to_string(c.workspace_bytes) + " bytes) returned " +
           status(c.ran_ws);
  if (c.ran == GK_OK) {
    const std::string wrong = c.check(c.y, "gk_conv_run");
    if (!wrong.empty()) return wrong;
  }
  return c.check(c.y_ws, "gk_conv_run_with_workspace");
}

// ---------------------------------------------------------------- layout conversions and network operations

// The conversions and the operations, on one N x C x H x W tensor and its parts; every
// output checked exactly (copies, max, add) or to a float bound (averages, products).
struct OpsCase {
  static constexpr int64_t N = 2, C = 12, H = 10, W = 10, kParts[2] = {5, 7};
  static constexpr int64_t FcBatch = 3, FcIn = 50, FcOut = 20, BnOut = 4, BnPer = 6;
  std::vector<float> a, b;  // NCHW
  std::vector<float> a8, b16, a16, a_nhwc, part8[2];
  std::vector<float> converted8, converted_back, pooled, global, sum, concat, split[2], shuffled;
  std::vector<float> fc_x, fc_w, fc_bias, fc_y;
  std::vector<float> bn_w, bn_b, bn_w0, bn_b0, bn_gamma, bn_beta, bn_mean, bn_var;
  gk_status status[10] = {};
  static constexpr const char* kNames[10] = {"gk_convert_layout to NCHW8", "gk_convert_layout to NCHW", "gk_pool2d",
                                             "gk_global_avg_pool",         "gk_add",                    "gk_concat_channels",
                                             "gk_split_channels",          "gk_channel_shuffle",        "gk_fully_connected",
                                             "gk_fold_batch_norm"};

  OpsCase() {
    a.resize(size_t(N * C * H * W));
    b.resize(a.size());
    for (float& v : a) v = random_float(-1.0f, 1.0f);
    for (float& v : b) v = random_float(-1.0f, 1.0f);
    a8 = in_layout(a, GK_LAYOUT_NCHW8, N, C, H, W, 0.0f);
    a16 = in_layout(a, GK_LAYOUT_NCHW16, N, C, H, W, 0.0f);
    b16 = in_layout(b, GK_LAYOUT_NCHW16, N, C, H, W, 0.0f);
    a_nhwc = in_layout(a, GK_LAYOUT_NHWC, N, C, H, W, 0.0f);
    for (int p = 0; p < 2; ++p) {
      std::vector<float> nchw(size_t(N * kParts[p] * H * W));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < kParts[p]; ++c)
          for (int64_t i = 0; i < H * W; ++i)
            nchw[size_t((n * kParts[p] + c) * H * W + i)] = a[size_t((n * C + c + p * kParts[0]) * H * W + i)];
      part8[p] = in_layout(nchw, GK_LAYOUT_NCHW8, N, kParts[p], H, W, 0.0f);
      split[p].resize(part8[p].size());
    }
    converted8.resize(a8.size());
    converted_back.resize(a.size());
    pooled.resize(size_t(tensor_floats(GK_LAYOUT_NCHW8, N, C, 5, 5)));
    global.resize(size_t(N * C));
    sum.resize(a16.size());
    concat.resize(a8.size());
    shuffled.resize(a_nhwc.size());
    fc_x.resize(size_t(FcBatch * FcIn));
    fc_w.resize(size_t(FcOut * FcIn));
    fc_bias.resize(size_t(FcOut));
    fc_y.resize(size_t(FcBatch * FcOut));
    for (float& v : fc_x) v = random_float(-1.0f, 1.0f);
    for (float& v : fc_w) v = random_float(-1.0f, 1.0f);
    for (float& v : fc_bias) v = random_float(-1.0f, 1.0f);
    for (auto* v : {&bn_w0, &bn_gamma, &bn_beta, &bn_mean}) {
      v->resize(size_t(v == &bn_w0 ? BnOut * BnPer : BnOut));
      for (float& e : *v) e = random_float(-1.0f, 1.0f);
    }
    bn_b0.resize(size_t(BnOut));
    bn_var.resize(size_t(BnOut));
    for (float& v : bn_b0) v = random_float(-1.0f, 1.0f);
    for (float& v : bn_var) v = random_float(0.5f, 2.0f);
    bn_w = bn_w0;
    bn_b = bn_b0;
  }

  void run() {
    for (auto* v : {&converted8, &converted_back, &pooled, &global, &sum, &concat, &split[0], &split[1], &shuffled,
                    &fc_y})
      std::fill(v->begin(), v->end(), kNaN);
    std::copy(bn_w0.begin(), bn_w0.end(), bn_w.begin());
    std::copy(bn_b0.begin(), bn_b0.end(), bn_b.begin());
    status[0] = gk_convert_layout(a.data(), GK_LAYOUT_NCHW, converted8.data(), GK_LAYOUT_NCHW8, N, C, H, W);
    status[1] = gk_convert_layout(a8.data(), GK_LAYOUT_NCHW8, converted_back.data(), GK_LAYOUT_NCHW, N, C, H, W);
    const gk_tensor_desc t8{N, C, H, W, GK_LAYOUT_NCHW8}, t16{N, C, H, W, GK_LAYOUT_NCHW16},
        t_nchw{N, C, H, W, GK_LAYOUT_NCHW}, t_nhwc{N, C, H, W, GK_LAYOUT_NHWC};
    const gk_pool_desc max3{GK_POOL_MAX, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0};
    status[2] = gk_pool2d(&t8, &max3, a8.data(), pooled.data());
    status[3] = gk_global_avg_pool(&t_nchw, a.data(), global.data());
    status[4] = gk_add(&t16, a16.data(), b16.data(), sum.data(), GK_ACT_RELU);
    const gk_tensor_desc parts[2] = {{N, kParts[0], H, W, GK_LAYOUT_NCHW8}, {N, kParts[1], H, W, GK_LAYOUT_NCHW8}};
    const float* xs[2] = {part8[0].data(), part8[1].data()};
    status[5] = gk_concat_channels(2, parts, xs, &t8, concat.data());
    float* ys[2] = {split[0].data(), split[1].data()};
    status[6] = gk_split_channels(&t8, a8.data(), 2, kParts, ys);
    status[7] = gk_channel_shuffle(&t_nhwc, 3, a_nhwc.data(), shuffled.data());
    status[8] = gk_fully_connected(FcBatch, FcIn, FcOut, fc_x.data(), fc_w.data(), fc_bias.data(), GK_ACT_RELU,
                                   fc_y.data());
    status[9] = gk_fold_batch_norm(BnOut, BnPer, bn_w.data(), bn_b.data(), bn_gamma.data(), bn_beta.data(),
                                   bn_mean.data(), bn_var.data(), 1e-5f);
  }

  // "" when every operation returned GK_OK (none asks for memory) and computed right.
  std::string judge() const {
    for (int i = 0; i < 10; ++i)
      if (status[i] != GK_OK) return std::string(kNames[i]) + " returned " + gk_status_string(status[i]);
    auto nchw = [](int64_t n, int64_t c, int64_t i) { return size_t((n * C + c) * H * W + i); };
    for (size_t i = 0; i < converted8.size(); ++i)
      if (converted8[i] != a8[i]) return std::string(kNames[0]) + ": element " + std::to_string(i);
    if (converted_back != a) return kNames[1];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        double mean = 0;
        for (int64_t i = 0; i < H * W; ++i) mean += a[nchw(n, c, i)];
        mean /= double(H * W);
        if (!(std::fabs(global[size_t(n * C + c)] - mean) <= 1e-5)) return kNames[3];
        for (int64_t oy = 0; oy < 5; ++oy)
          for (int64_t ox = 0; ox < 5; ++ox) {
            float m = -INFINITY;
            for (int64_t y = 2 * oy - 1; y <= 2 * oy + 1; ++y)
              for (int64_t x = 2 * ox - 1; x <= 2 * ox + 1; ++x)
                if (y >= 0 && y < H && x >= 0 && x < W) m = std::max(m, a[nchw(n, c, y * W + x)]);
            if (pooled[size_t(index_of(GK_LAYOUT_NCHW8, C, 5, 5, n, c, oy, ox))] != m) return kNames[2];
          }
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x) {
            const float av = a[nchw(n, c, y * W + x)], bv = b[nchw(n, c, y * W + x)];
            if (sum[size_t(index_of(GK_LAYOUT_NCHW16, C, H, W, n, c, y, x))] != std::max(av + bv, 0.0f))
              return kNames[4];
            if (concat[size_t(index_of(GK_LAYOUT_NCHW8, C, H, W, n, c, y, x))] != av) return kNames[5];
            const int p = c < kParts[0] ? 0 : 1;
            const int64_t pc = c - p * kParts[0];
            if (split[p][size_t(index_of(GK_LAYOUT_NCHW8, kParts[p], H, W, n, pc, y, x))] != av) return kNames[6];
            // Channel g * (C / 3) + i becomes channel i * 3 + g.
            const int64_t moved = (c % (C / 3)) * 3 + c / (C / 3);
            if (shuffled[size_t(index_of(GK_LAYOUT_NHWC, C, H, W, n, moved, y, x))] != av) return kNames[7];
          }
      }
    for (const std::vector<float>* t : {&pooled, &sum, &concat, &split[0], &split[1]}) {
      const int64_t channels = t == &split[0] ? kParts[0] : t == &split[1] ? kParts[1] : C;
      const gk_layout layout = t == &sum ? GK_LAYOUT_NCHW16 : GK_LAYOUT_NCHW8;
      const int64_t h = t == &pooled ? 5 : H, w = t == &pooled ? 5 : W;
      for (size_t i = 0; i < t->size(); ++i)
        if (is_padding(layout, channels, h, w, int64_t(i)) && (*t)[i] != 0.0f) return "a padding channel not zero";
    }
    for (int64_t r = 0; r < FcBatch; ++r)
      for (int64_t o = 0; o < FcOut; ++o) {
        double acc = fc_bias[size_t(o)], mag = std::fabs(acc);
        for (int64_t i = 0; i < FcIn; ++i) {
          acc += double(fc_x[size_t(r * FcIn + i)]) * fc_w[size_t(o * FcIn + i)];
          mag += std::fabs(double(fc_x[size_t(r * FcIn + i)]) * fc_w[size_t(o * FcIn + i)]);
        }
        if (!(std::fabs(fc_y[size_t(r * FcOut + o)] - std::max(acc, 0.0)) <= (FcIn + 4) * double(FLT_EPSILON) * mag))
          return kNames[8];
      }
    for (int64_t o = 0; o < BnOut; ++o) {
      const double scale = bn_gamma[size_t(o)] / std::sqrt(double(bn_var[size_t(o)]) + double(1e-5f));
      const double bias = (double(bn_b0[size_t(o)]) - bn_mean[size_t(o)]) * scale + bn_beta[size_t(o)];
      if (!(std::fabs(bn_b[size_t(o)] - bias) <= 1e-5 * (1 + std::fabs(bias)))) return kNames[9];
      for (int64_t i = 0; i < BnPer; ++i) {
        const double w = bn_w0[size_t(o * BnPer + i)] * scale;
        if (!(std::fabs(bn_w[size_t(o * BnPer + i)] - w) <= 1e-6 * (1 + std::fabs(w)))) return kNames[9];
      }
    }
    return "";
  }
};

// ---------------------------------------------------------------- the cold sequence

// Everything a cold run touches, allocated up front.
struct Sequence {
  Layers layers;
  std::vector<PlanCase> plans;
  OpsCase ops;
  WorkspacePool pool;
  template <size_t Count>
  Sequence(Size size, const PlanSpec (&specs)[Count])
      : layers(size), plans(plan_cases(layers, size, specs)), pool(int64_t{64} << 20) {}

  long fastrun_from = -1;  // allocations made before the first Fast-Run plan's

  // The operations first: Fast-Run's plans come last.
  void run() {
    ops.run();
    for (PlanCase& c : plans) {
      if (c.spec.algo == GK_CONV_ALGO_FASTRUN && fastrun_from < 0) fastrun_from = counting_allocator::calls();
      plan_life(c, pool);
    }
  }
  // "" when everything returned an acceptable status and every result is right; counts the
  // calls that ran out of memory into *oom.
  std::string judge(bool strict, int* oom = nullptr) const {
    if (!pool.memory) return "no memory for the workspace pool";
    int failed = 0;
    for (const PlanCase& c : plans) {
      const std::string wrong = judge_plan(c, strict);
      if (!wrong.empty()) return wrong;
      failed += (c.created == GK_ERR_OUT_OF_MEMORY) + (c.ran == GK_ERR_OUT_OF_MEMORY);
    }
    if (oom) *oom = failed;
    return ops.judge();
  }
};

// Shared with the parent across fork: what a child found.
struct ChildReport {
  long allocations;
  long fastrun_from;  // the allocations made before Fast-Run's plans (-1: none)
  int injected;
  int oom;
  char why[4000];
};

ChildReport* shared_report() {
  void* p = mmap(nullptr, sizeof(ChildReport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<ChildReport*>(p);
}

void report_why(ChildReport* r, const std::string& why) { std::snprintf(r->why, sizeof r->why, "%s", why.c_str()); }

// Runs body(report) in a forked child; "" when it exited 0, else what happened.
template <typename Body>
std::string in_child(ChildReport* report, Body body) {
  std::memset(report, 0, sizeof *report);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    const int code = body(report);
    std::fflush(nullptr);
    std::exit(code);  // exit, not _exit: under ASan its leak checker runs here too
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status)) + "; " + report->why;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "exited " + std::to_string(WEXITSTATUS(status)) + "; " +
           (report->why[0] ? report->why : "every check had passed: see the sanitizer's report above (a leak)");
  return "";
}

// ---------------------------------------------------------------- inject

// A cold run of the sequence on 2 threads with allocation `fail_at` failing (0: none),
// then, the injector off, the sequence again: every status acceptable, every result right,
// and (under ASan, whose leak checker runs as the child exits) nothing leaked.
int cold_run_child(Sequence& seq, long fail_at, ChildReport* report) {
  warm_openmp(2);
  gk_set_num_threads(2);
  const long before = counting_allocator::calls();
  counting_allocator::fail_number(fail_at ? before + fail_at : 0);
  seq.run();
  counting_allocator::fail_number(0);
  report->allocations = counting_allocator::calls() - before;
  report->fastrun_from = seq.fastrun_from < 0 ? -1 : seq.fastrun_from - before;
  report->injected = counting_allocator::injected_failure_happened();
  std::string wrong = seq.judge(fail_at == 0, &report->oom);
  if (wrong.empty()) {
    seq.run();
    wrong = seq.judge(true);
    if (!wrong.empty()) wrong = "afterwards, with every allocation served: " + wrong;
  }
  if (!wrong.empty()) {
    report_why(report, wrong);
    return 1;
  }
  return 0;
}

int mode_inject() {
  Sequence seq(kTiny, kInjectPlans);
  ChildReport* report = shared_report();
  if (!report) return fail("mmap failed");
  std::string why = in_child(report, [&](ChildReport* r) { return cold_run_child(seq, 0, r); });
  if (!why.empty()) return fail("the cold run itself: " + why);
  const long allocations = report->allocations, fastrun_from = report->fastrun_from;
  if (allocations <= 0) return fail("the cold run made no allocation");
  long injected = 0, failures = 0, out_of_memory = 0, runs = 0;
  for (long n = 1; n <= allocations; n += quick() ? 8 : 1) {
    ++runs;
    why = in_child(report, [&](ChildReport* r) { return cold_run_child(seq, n, r); });
    injected += report->injected;
    out_of_memory += report->oom > 0;
    // Up to Fast-Run's profiling every run makes the same allocations in the same order.
    if (why.empty() && !report->injected && (fastrun_from < 0 || n <= fastrun_from))
      why = "the run never reached the allocation meant to fail";
    if (!why.empty() && failures++ < 5)
      std::printf("FAILED: allocation %ld of %ld failing: %s\n", n, allocations, why.c_str());
  }
  if (failures) return fail(std::to_string(failures) + " of " + std::to_string(allocations) + " runs failed");
  std::printf("ok: %ld allocations of a cold run (the layout conversions and operations, then %d plans created, run "
              "and destroyed), %ld of them failed in turn (%ld reached; Fast-Run's profiling varies; %ld returned "
              "GK_ERR_OUT_OF_MEMORY, the others absorbed the failure): right results, right again afterwards\n",
              allocations, kInjectPlanCount, runs, injected, out_of_memory);
  return 0;
}

// ---------------------------------------------------------------- rlimit


// Touches 1 MiB of stack, so that the main thread's stack mapping has grown before the
// limit is set (growing it under the limit would be a SIGSEGV, whatever the code).
__attribute__((noinline)) void grow_stack() {
  volatile char buf[1 << 20];
  for (size_t i = 0; i < sizeof buf; i += 4096) buf[i] = 0;
}

int limited_child(Sequence& seq, long long budget, int threads, ChildReport* report) {
  gk_set_num_threads(threads);
  warm_openmp(threads);
  (void)gk_config_string();  // the CPU description and kernel table, once
  grow_stack();
  struct rlimit old_limit;
  getrlimit(RLIMIT_AS, &old_limit);
  struct rlimit limit = old_limit;
  limit.rlim_cur = static_cast<rlim_t>(mapped_bytes() + budget);
  if (setrlimit(RLIMIT_AS, &limit) != 0) {
    report_why(report, std::string("setrlimit: ") + std::strerror(errno));
    return 1;
  }
  seq.run();
  setrlimit(RLIMIT_AS, &old_limit);
  const std::string wrong = seq.judge(false, &report->oom);
  if (!wrong.empty()) {
    report_why(report, wrong);
    return 1;
  }
  return 0;
}

// Budgets from 256 MiB down by 8x to 4 KiB, then none at all, at 1 and 2 threads: every
// run must pass, the largest budget with no call out of memory, and some smaller one with
// calls out of memory (else the limits proved nothing).
int mode_rlimit() {
#if defined(__SANITIZE_ADDRESS__)
  return skip("built with AddressSanitizer, whose shadow memory takes terabytes of address space");
#else
  Sequence seq(kLarge, kPlans);
  ChildReport* report = shared_report();
  if (!report) return fail("mmap failed");
  int result = 0;
  for (int threads : {1, 2}) {
    bool bit = false;
    std::string line;
    for (long long budget = 256LL << 20;; budget /= 8) {
      if (budget < 4096) budget = 0;
      const std::string why =
          in_child(report, [&](ChildReport* r) { return limited_child(seq, budget, threads, r); });
      if (!why.empty()) {
        result = fail(std::to_string(threads) + " thread(s), " + std::to_string(budget) + " bytes: " + why);
        break;
      }
      if (budget == 256LL << 20 && report->oom) {
        result = fail("out of memory with 256 MiB to spare: the layers are not what the test thinks");
        break;
      }
      line += " " + std::to_string(budget >> 10) + "K:" + std::to_string(report->oom);
      bit |= report->oom > 0;
      if (budget == 0) break;
    }
    if (result) break;
    if (!bit) {
      result = fail(std::to_string(threads) + " thread(s): no call ever ran out of memory, so nothing was proved");
      break;
    }
    std::printf("ok: %d thread(s), calls out of memory per budget (KiB:calls):%s\n", threads, line.c_str());
  }
  return result;
#endif
}

// ---------------------------------------------------------------- first and count

// The first gk_conv_run_with_workspace of every plan (nothing else runs a convolution in
// this process first) allocates nothing, at 1 and 2 threads: the GEMM-based plans' packing
// buffers are in the caller's workspace too. Fast-Run plans come last (profiling runs them).
int mode_first() {
  const Size size = quick() ? kSmall : kLarge;
  Layers layers(size);
  std::vector<PlanCase> cases = plan_cases(layers, size);
  WorkspacePool pool(int64_t{64} << 20);
  if (!pool.memory) return fail("no memory for the workspace pool");
  warm_openmp(2);
  int runs = 0;
  for (bool fastrun : {false, true})
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (PlanCase& c : cases) {
        if ((c.spec.algo == GK_CONV_ALGO_FASTRUN) != fastrun) continue;
        gk_conv_plan* plan = nullptr;
        if (gk_conv_plan_create(&c.d, c.layer->w.data(), c.layer->bias.data(), c.spec.algo, &plan) != GK_OK)
          return fail(c.describe() + ": " + gk_last_error());
        std::snprintf(c.name, sizeof c.name, "%s", gk_conv_plan_algo_name(plan));
        const int64_t bytes = gk_conv_plan_workspace_size(plan);
        if (bytes > pool.bytes) return fail(c.describe() + ": workspace larger than the pool");
        c.reset_output(c.y_ws);
        const long before = counting_allocator::calls();
        const gk_status st = gk_conv_run_with_workspace(plan, c.x.data(), c.y_ws.data(), pool.memory, bytes);
        const long made = counting_allocator::calls() - before;
        gk_conv_plan_destroy(plan);
        const std::string what = c.describe() + ", " + std::to_string(threads) + " thread(s)";
        if (st != GK_OK) return fail(what + ": " + gk_last_error());
        if (made != 0) return fail(what + ": its first run in the caller's workspace made " + std::to_string(made) + " allocations");
        const std::string wrong = c.check(c.y_ws, "first gk_conv_run_with_workspace");
        if (!wrong.empty()) return fail(wrong);
        ++runs;
      }
    }
  std::printf("ok: %d first runs in the caller's workspace, no allocation\n", runs);
  return 0;
}

// A small convolution every forced algorithm can serve in some form: 3x3 (1x1 for
// gemm_1x1), depthwise for depthwise, 16 channels of 12x12.
gk_conv_desc conv_case(gk_conv_algo algo, gk_layout layout) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = 16, d.in_height = 12, d.in_width = 12, d.out_channels = 16;
  d.kernel_h = d.kernel_w = algo == GK_CONV_ALGO_GEMM_1X1 ? 1 : 3;
  d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = algo == GK_CONV_ALGO_GEMM_1X1 ? 0 : 1;
  if (algo == GK_CONV_ALGO_DEPTHWISE) d.groups = 16;
  d.layout = layout;
  d.activation = GK_ACT_RELU;
  return d;
}

constexpr gk_conv_algo kConvAlgos[] = {GK_CONV_ALGO_IM2COL_GEMM,  GK_CONV_ALGO_GEMM_1X1,     GK_CONV_ALGO_DIRECT,
                                       GK_CONV_ALGO_DEPTHWISE,    GK_CONV_ALGO_WINOGRAD_F23, GK_CONV_ALGO_WINOGRAD_F43,
                                       GK_CONV_ALGO_WINOGRAD_F63};
constexpr gk_layout kConvLayouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW8};

// Zero allocations per steady-state gk_conv_run and gk_conv_run_with_workspace (after one
// warm-up run of the same plan), every forced algorithm, layout, 1 and 2 threads; both
// runs give the same output.
int mode_count() {
  warm_openmp(2);
  int runs = 0;
  for (int threads : {1, 2}) {
    gk_set_num_threads(threads);
    for (gk_conv_algo algo : kConvAlgos)
      for (gk_layout layout : kConvLayouts) {
        const gk_conv_desc d = conv_case(algo, layout);
        int64_t oh = 0, ow = 0;
        if (gk_conv_output_size(&d, &oh, &ow) != GK_OK) return fail(gk_last_error());
        std::vector<float> w(static_cast<size_t>(d.out_channels * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w), 0.25f);
        std::vector<float> x(static_cast<size_t>(gk_tensor_size(layout, 1, d.in_channels, d.in_height, d.in_width)), 1.0f);
        const size_t out_floats = static_cast<size_t>(gk_tensor_size(layout, 1, d.out_channels, oh, ow));
        std::vector<float> y(out_floats), y2(out_floats);
        gk_conv_plan* plan = nullptr;
        const gk_status st = gk_conv_plan_create(&d, w.data(), nullptr, algo, &plan);
        if (st == GK_ERR_UNSUPPORTED) continue;
        if (st != GK_OK) return fail(gk_last_error());
        const std::string what = std::string(gk_conv_plan_algo_name(plan)) + " layout " + std::to_string(layout) +
                                 " threads " + std::to_string(threads);
        const int64_t bytes = gk_conv_plan_workspace_size(plan);
        void* ws = nullptr;
        if (posix_memalign(&ws, 64, static_cast<size_t>(bytes > 0 ? bytes : 64)) != 0) return fail("no workspace");
        if (gk_conv_run(plan, x.data(), y.data()) != GK_OK) return fail(what + ": " + gk_last_error());
        if (gk_conv_run_with_workspace(plan, x.data(), y2.data(), ws, bytes) != GK_OK)
          return fail(what + ": " + gk_last_error());
        long before = counting_allocator::calls();
        const gk_status a = gk_conv_run(plan, x.data(), y.data());
        long made = counting_allocator::calls() - before;
        if (a != GK_OK || made != 0) return fail(what + ": gk_conv_run made " + std::to_string(made) + " allocations");
        before = counting_allocator::calls();
        const gk_status b = gk_conv_run_with_workspace(plan, x.data(), y2.data(), ws, bytes);
        made = counting_allocator::calls() - before;
        if (b != GK_OK || made != 0)
          return fail(what + ": gk_conv_run_with_workspace made " + std::to_string(made) + " allocations");
        for (size_t i = 0; i < out_floats; ++i)
          if (std::fabs(y[i] - y2[i]) > 1e-4f * (1.0f + std::fabs(y[i])))
            return fail(what + ": gk_conv_run and gk_conv_run_with_workspace differ");
        std::free(ws);
        gk_conv_plan_destroy(plan);
        runs += 2;
      }
  }
  std::printf("ok: %d steady-state convolution runs, no allocation\n", runs);
  return 0;
}

// ---------------------------------------------------------------- soak

// A GEMM of the soak: operands, and C as a serial call left it.
struct SoakGemm {
  int m, n, k;
  std::vector<float> a, b, c;
  SoakGemm(int m_, int n_, int k_) : m(m_), n(n_), k(k_), a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n)) {
    for (float& v : a) v = random_float(-1.0f, 1.0f);
    for (float& v : b) v = random_float(-1.0f, 1.0f);
  }
  void multiply(float* out) const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, out, n);
  }
};

// 8 user threads on gk threads = 2 (16 threads on this machine's 2 cores) share every plan
// of conv_cases::kPlans and call gk_conv_run, gk_conv_run_with_workspace (a workspace of
// their own) and cblas_sgemm in an order of their own for `seconds`: every output equal, bit
// for bit, to the serial run of the same plan or product. The expected outputs are the
// serial runs at one gk thread: the algorithms sum in the same order whatever the thread
// count (each output element is one thread's), so 1-thread and 2-thread runs agree bit for
// bit, and the soak holds them to it.
int mode_soak(double seconds) {
  const Size size = quick() ? kSmall : kLarge;
  Layers layers(size);
  std::vector<PlanCase> cases = plan_cases(layers, size);
  std::vector<gk_conv_plan*> plans;
  gk_set_num_threads(2);
  int64_t workspace = 64;
  for (PlanCase& c : cases) {
    gk_conv_plan* plan = nullptr;
    if (gk_conv_plan_create(&c.d, c.layer->w.data(), c.layer->bias.data(), c.spec.algo, &plan) != GK_OK)
      return fail(c.describe() + ": " + gk_last_error());
    std::snprintf(c.name, sizeof c.name, "%s", gk_conv_plan_algo_name(plan));
    plans.push_back(plan);
    workspace = std::max(workspace, gk_conv_plan_workspace_size(plan));
  }
  std::vector<SoakGemm> gemms;
  for (int s : {20, 96, 300}) gemms.emplace_back(s, s + 8, s);
  gemms.emplace_back(1100, 300, 64);  // M over MC: the shared B block
  // Serial results at 1 thread, then at 2 threads: the same bits, and right.
  WorkspacePool pool(workspace);
  std::vector<float> y2;
  for (size_t i = 0; i < cases.size(); ++i) {
    PlanCase& c = cases[i];
    gk_set_num_threads(1);
    c.reset_output(c.y);
    if (gk_conv_run(plans[i], c.x.data(), c.y.data()) != GK_OK) return fail(c.describe() + ": " + gk_last_error());
    std::string wrong = c.check(c.y, "serial gk_conv_run");
    if (!wrong.empty()) return fail(wrong);
    gk_set_num_threads(2);
    for (bool in_workspace : {false, true}) {
      c.reset_output(c.y_ws);
      const gk_status st = in_workspace ? gk_conv_run_with_workspace(plans[i], c.x.data(), c.y_ws.data(), pool.memory,
                                                                     workspace)
                                        : gk_conv_run(plans[i], c.x.data(), c.y_ws.data());
      if (st != GK_OK) return fail(c.describe() + ": " + gk_last_error());
      if (std::memcmp(c.y.data(), c.y_ws.data(), c.y.size() * sizeof(float)) != 0)
        return fail(c.describe() + ": 2 threads" + (in_workspace ? " in the caller's workspace" : "") +
                    " differ from 1 thread");
    }
  }
  for (SoakGemm& g : gemms) {
    gk_set_num_threads(1);
    g.multiply(g.c.data());
    gk_set_num_threads(2);
    std::vector<float> c2(g.c.size());
    g.multiply(c2.data());
    if (c2 != g.c) return fail("cblas_sgemm " + std::to_string(g.m) + "x" + std::to_string(g.n) + ": 2 threads differ from 1");
  }
  constexpr int kUserThreads = 8;
  std::atomic<long> done{0}, mismatches{0};
  std::vector<std::string> first_mismatch(kUserThreads);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> users;
  const size_t items = cases.size() + gemms.size();
  for (int t = 0; t < kUserThreads; ++t)
    users.emplace_back([&, t] {
      std::vector<std::vector<float>> outputs;
      for (const PlanCase& c : cases) outputs.emplace_back(c.y.size());
      for (const SoakGemm& g : gemms) outputs.emplace_back(g.c.size());
      WorkspacePool mine(workspace);
      for (size_t step = 0; step < items || std::chrono::steady_clock::now() < deadline; ++step) {
        const size_t item = (step * (2 * t + 1) + size_t(t) * 5) % items;
        std::vector<float>& out = outputs[item];
        const std::vector<float>* want = nullptr;
        std::string what;
        gk_status st = GK_OK;
        if (item < cases.size()) {
          const PlanCase& c = cases[item];
          c.reset_output(out);
          const bool in_workspace = (step / items + size_t(t)) % 2;
          st = in_workspace ? gk_conv_run_with_workspace(plans[item], c.x.data(), out.data(), mine.memory, workspace)
                            : gk_conv_run(plans[item], c.x.data(), out.data());
          want = &c.y;
          what = c.describe() + (in_workspace ? " in the caller's workspace" : "");
        } else {
          const SoakGemm& g = gemms[item - cases.size()];
          g.multiply(out.data());
          want = &g.c;
          what = "cblas_sgemm " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
        }
        if (st != GK_OK || std::memcmp(out.data(), want->data(), out.size() * sizeof(float)) != 0) {
          if (mismatches++ == 0 || first_mismatch[size_t(t)].empty())
            first_mismatch[size_t(t)] = what + (st != GK_OK ? std::string(": ") + gk_status_string(st) : "");
        }
        ++done;
      }
    });
  for (std::thread& u : users) u.join();
  for (gk_conv_plan* p : plans) gk_conv_plan_destroy(p);
  for (const std::string& m : first_mismatch)
    if (!m.empty()) return fail(std::to_string(mismatches.load()) + " results differ from the serial run, first: " + m);
  std::printf("ok: %ld concurrent runs (%d plans, %zu products) from %d user threads in %.1f s, all equal to the "
              "serial results\n",
              done.load(), kPlanCount, gemms.size(), kUserThreads, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // Profiling within a few milliseconds per plan, and no cache file of the caller's.
  setenv("GEMMKIT_FASTRUN_BUDGET_MS", "5", 1);
  unsetenv("GEMMKIT_FASTRUN_CACHE");
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "count") return mode_count();
  if (mode == "first") return mode_first();
  if (mode == "inject") return mode_inject();
  if (mode == "rlimit") return mode_rlimit();
  if (mode == "soak" && argc > 2) return mode_soak(std::atof(argv[2]));
  std::fprintf(stderr, "usage: %s count | first | inject | rlimit | soak SECONDS\n", argv[0]);
  return 2;
}
