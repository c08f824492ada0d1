// Convolution test helpers: a naive direct convolution in double, and a checker that runs
// a plan in any layout and compares (all outputs, or a sample for large layers).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <random>
#include <vector>

#include "common/aligned_vector.h"
#include "gemm_test_util.h"
#include "gemmkit.h"
#include "../perf/networks.h"

namespace gktest {

struct ConvCase {
  gk_conv_desc d;
  int64_t oh, ow;
  std::vector<float> x, w, bias;  // x in NCHW
  bool with_bias;
};

// A descriptor in one line, for failure messages.
inline std::string describe(const gk_conv_desc& d) {
  std::ostringstream o;
  o << "n" << d.batch << " c" << d.in_channels << " " << d.in_height << "x" << d.in_width << " -> k" << d.out_channels
    << " kernel " << d.kernel_h << "x" << d.kernel_w << " stride " << d.stride_h << "x" << d.stride_w << " pad "
    << d.pad_top << "," << d.pad_left << "," << d.pad_bottom << "," << d.pad_right << " dilation " << d.dilation_h
    << "x" << d.dilation_w << " groups " << d.groups << " layout " << int(d.layout) << " act " << int(d.activation)
    << " flags " << d.flags;
  return o.str();
}

// An NHWC descriptor (NHWC in and out) that the NCHW8 engines serve: a 1x1 in place reads
// the NHWC rows, a stem of whole 8-channel output blocks its pixels, others run on copies
// (NCHW8 ones, or under 8 input channels an NCHW copy of the input that the direct engine
// reads).
inline bool nhwc_with_nchw8_form(const gk_conv_desc& d) {
  return d.layout == GK_LAYOUT_NHWC && !(d.flags & GK_CONV_FLAG_NCHW_INPUT);
}

// An NHWC descriptor reading an NCHW input (GK_CONV_FLAG_NCHW_INPUT) that the direct
// engine serves, storing into the NHWC rows: under 8 input channels, not a 1x1 in place,
// ungrouped, output channels in whole 8-channel blocks.
inline bool nhwc_rows_from_nchw(const gk_conv_desc& d) {
  const bool in_place = d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 && !d.pad_top &&
                        !d.pad_left && !d.pad_bottom && !d.pad_right;
  return d.layout == GK_LAYOUT_NHWC && (d.flags & GK_CONV_FLAG_NCHW_INPUT) && d.in_channels < 8 && !in_place &&
         d.groups == 1 && d.out_channels % 8 == 0;
}

// Whether the NCHW8 engines run an NCHW descriptor (on NCHW8 copies): grouped ones, and
// with AVX-512's pointwise kernels ungrouped ones of 8+ input channels larger than 1x1.
inline bool nchw_with_nchw8_form(const gk_conv_desc& d) {
  if (d.layout != GK_LAYOUT_NCHW) return false;
  if (d.groups > 1) return true;
  return d.kernel_h * d.kernel_w > 1 && d.in_channels >= 8 && gk::pointwise_kernel().simd == gk::SimdLevel::Avx512;
}

// Whether the NCHW8 engines run d's layout: NCHW8, NHWC or NCHW as above.
inline bool engine_runs_layout(const gk_conv_desc& d) {
  return d.layout == GK_LAYOUT_NCHW8 || nhwc_with_nchw8_form(d) || nhwc_rows_from_nchw(d) || nchw_with_nchw8_form(d);
}

// Whether the NCHW8 engines serve d's grouping: ungrouped, or up to 4 consecutive groups
// fill whole 8-channel blocks of both the input and the output channels.
inline bool engine_serves_groups(const gk_conv_desc& d) {
  const int64_t icg = d.in_channels / d.groups, ocg = d.out_channels / d.groups;
  for (int64_t merge = 1; merge <= 4; ++merge)
    if (d.groups % merge == 0 && (d.groups == 1 || (merge * icg % 8 == 0 && merge * ocg % 8 == 0))) return true;
  return false;
}

inline ConvCase make_conv_case(const gk_conv_desc& d, bool with_bias, uint32_t seed) {
  ConvCase c;
  c.d = d;
  c.with_bias = with_bias;
  EXPECT_EQ(gk_conv_output_size(&d, &c.oh, &c.ow), GK_OK) << gk_last_error();
  // Realistic data: post-ReLU inputs in [0, 1), He-scaled weights.
  const int64_t k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  c.x = random_vector(size_t(d.batch * d.in_channels * d.in_height * d.in_width), seed, 0.0f, 1.0f);
  const float scale = std::sqrt(6.0f / float(k));
  c.w = random_vector(size_t(d.out_channels * k), seed + 1, -scale, scale);
  c.bias = random_vector(size_t(d.out_channels), seed + 2, -0.5f, 0.5f);
  return c;
}

// One output of the convolution, in double, and the magnitude sum for its error bound.
inline double reference_output(const ConvCase& c, int64_t n, int64_t oc, int64_t oh, int64_t ow,
                               double* magnitude) {
  const gk_conv_desc& d = c.d;
  const int64_t icg = d.in_channels / d.groups, ocg = d.out_channels / d.groups, g = oc / ocg;
  double acc = c.with_bias ? c.bias[size_t(oc)] : 0.0, mag = std::fabs(acc);
  for (int64_t ic = 0; ic < icg; ++ic)
    for (int64_t r = 0; r < d.kernel_h; ++r)
      for (int64_t s = 0; s < d.kernel_w; ++s) {
        const int64_t ih = oh * d.stride_h - d.pad_top + r * d.dilation_h;
        const int64_t iw = ow * d.stride_w - d.pad_left + s * d.dilation_w;
        if (ih < 0 || ih >= d.in_height || iw < 0 || iw >= d.in_width) continue;
        const double xv = c.x[size_t(((n * d.in_channels + g * icg + ic) * d.in_height + ih) * d.in_width + iw)];
        const double wv = c.w[size_t(((oc * icg + ic) * d.kernel_h + r) * d.kernel_w + s)];
        acc += xv * wv;
        mag += std::fabs(xv * wv);
      }
  if (d.activation != GK_ACT_NONE) acc = std::max(acc, 0.0);
  if (d.activation == GK_ACT_RELU6) acc = std::min(acc, 6.0);
  *magnitude = mag;
  return acc;
}

// Runs `run` (input and output in the case's layout; the input NCHW with
// GK_CONV_FLAG_NCHW_INPUT) and checks every output (or
// `samples` random ones; the input followed by a guard page) against the reference within (K + 4) * eps * magnitude, or, when
// `relative_bound` > 0, within relative_bound * (the largest |output| checked), the
// accuracy measure for Winograd; `name` labels failures. *max_relative gets the error.
inline void check_conv_run(const ConvCase& c, const std::string& name,
                           const std::function<void(const float*, float*)>& run, int64_t samples = 0,
                           double relative_bound = 0, double* max_relative = nullptr) {
  const gk_conv_desc& d = c.d;
  const gk_layout in_layout = d.flags & GK_CONV_FLAG_NCHW_INPUT ? GK_LAYOUT_NCHW : d.layout;
  GuardedFloats in(size_t(gk_tensor_size(in_layout, d.batch, d.in_channels, d.in_height, d.in_width)));
  if (!in.data()) return;
  EXPECT_EQ(gk_convert_layout(c.x.data(), GK_LAYOUT_NCHW, in.data(), in_layout, d.batch,
                              d.in_channels, d.in_height, d.in_width), GK_OK);
  std::vector<float> out(size_t(gk_tensor_size(d.layout, d.batch, d.out_channels, c.oh, c.ow)), kNaN);
  run(in.data(), out.data());
  std::vector<float> out_nchw(size_t(d.batch * d.out_channels * c.oh * c.ow));
  EXPECT_EQ(gk_convert_layout(out.data(), d.layout, out_nchw.data(), GK_LAYOUT_NCHW, d.batch,
                              d.out_channels, c.oh, c.ow), GK_OK);
  const int64_t k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  const int64_t total = int64_t(out_nchw.size());
  std::mt19937_64 rng(7);
  const int64_t checks = samples > 0 ? std::min(samples, total) : total;
  double max_err = 0, max_ref = 0;
  for (int64_t t = 0; t < checks; ++t) {
    const int64_t idx = samples > 0 ? int64_t(rng() % uint64_t(total)) : t;
    const int64_t ow = idx % c.ow, oh = idx / c.ow % c.oh, oc = idx / (c.ow * c.oh) % d.out_channels,
                  n = idx / (c.ow * c.oh * d.out_channels);
    double mag = 0;
    const double want = reference_output(c, n, oc, oh, ow, &mag);
    const double bound = (k + 4) * double(FLT_EPSILON) * mag + 1e-30;
    const double got = out_nchw[size_t(idx)];
    if (!(std::fabs(got - want) < 1e30)) {  // NaN or Inf
      ADD_FAILURE() << name << ": output " << idx << " = " << got;
      break;
    }
    max_err = std::max(max_err, std::fabs(got - want));
    max_ref = std::max(max_ref, std::fabs(want));
    if (relative_bound > 0) continue;
    if (!(std::fabs(got - want) <= bound)) {
      ADD_FAILURE() << name << ": output (n=" << n << ", oc=" << oc << ", oh=" << oh << ", ow=" << ow
                    << ") = " << got << ", expected " << want << " (bound " << bound << ")";
      break;
    }
  }
  // NCHWx outputs keep their padding channels zero.
  const int64_t block = d.layout == GK_LAYOUT_NCHW4 ? 4 : d.layout == GK_LAYOUT_NCHW8 ? 8 : d.layout == GK_LAYOUT_NCHW16 ? 16 : 1;
  if (block > 1 && d.out_channels % block) {
    const int64_t blocks = (d.out_channels + block - 1) / block, pixels = c.oh * c.ow;
    for (int64_t n = 0; n < d.batch; ++n)
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t l = d.out_channels % block; l < block; ++l)
          if (out[size_t(((n * blocks + blocks - 1) * pixels + p) * block + l)] != 0.0f) {
            ADD_FAILURE() << name << ": padding channel " << (blocks - 1) * block + l << " not zero";
            return;
          }
  }
  const double relative = max_ref > 0 ? max_err / max_ref : max_err;
  if (max_relative) *max_relative = relative;
  if (relative_bound > 0 && !(relative <= relative_bound))
    ADD_FAILURE() << name << ": max error " << max_err << " over max |output| " << max_ref << " = "
                  << relative << " > " << relative_bound;
}

// run(in, out) with the output on a 64-byte aligned copy (out_floats, copied in first: a
// residual) copied back; the input must be aligned already (a GuardedFloats of a multiple
// of 16 floats, which keeps its guard page): the AVX-512 paths that run only where each
// vector's pixels lie on whole cache lines (depthwise NHWC channel pairs) run on these.
inline void run_on_aligned_output(const float* in, float* out, int64_t out_floats,
                                  const std::function<void(const float*, float*)>& run) {
  ASSERT_EQ(reinterpret_cast<uintptr_t>(in) % 64, 0u) << "the input is not 64-byte aligned";
  gk::aligned_vector<float> out_copy(out, out + out_floats);
  run(in, out_copy.data());
  std::copy(out_copy.begin(), out_copy.end(), out);
}

// Runs `algo` through the public API (plan, run) and checks it as check_conv_run does.
// Returns the plan's algorithm name.
inline std::string check_conv(const ConvCase& c, gk_conv_algo algo, int64_t samples = 0,
                              double relative_bound = 0, double* max_relative = nullptr) {
  const gk_conv_desc& d = c.d;
  gk_conv_plan* plan = nullptr;
  gk_status st = gk_conv_plan_create(&d, c.w.data(), c.with_bias ? c.bias.data() : nullptr, algo, &plan);
  EXPECT_EQ(st, GK_OK) << gk_last_error();
  if (st != GK_OK) return "";
  const std::string name = gk_conv_plan_algo_name(plan);
  check_conv_run(c, name, [&](const float* in, float* out) {
    EXPECT_EQ(gk_conv_run(plan, in, out), GK_OK) << gk_last_error();
  }, samples, relative_bound, max_relative);
  gk_conv_plan_destroy(plan);
  return name;
}

// The conv layers of the five networks (perf/networks.csv, run from the repository root, or
// GEMMKIT_NETWORKS_CSV), read by the benchmark's own reader.
using NetworkLayer = gkbench::NetworkLayer;
inline std::vector<NetworkLayer> network_layers() {
  const char* path = std::getenv("GEMMKIT_NETWORKS_CSV");
  return gkbench::read_network_layers(path ? path : "perf/networks.csv");
}

// Sets an environment variable for the life of the object (settings such as the blocking
// overrides and the Fast-Run budget are read when a plan is created).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace gktest
