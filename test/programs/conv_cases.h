// The convolution plans of the conv reliability checks, shared by
// test/test_conv_reliability.cpp and the program it runs,
// test/programs/conv_reliability_child.cpp: every algorithm forced, AUTO and FASTRUN, in
// every layout; im2col_gemm on both packing paths of the GEMM driver (all output channels
// in one MC block, and the "wide" layer's past it) and on the NCHW8 pointwise kernels;
// gemm_1x1 on the image itself and on a strided copy; depthwise 3x3 and 17 rows tall;
// grouped convolutions; residual joins, NCHW inputs, and high accuracy.
#pragma once
#include <cstdint>
#include <cstring>

#include "gemmkit.h"

namespace conv_cases {

enum Layer { k3x3, k1x1, k1x1Stride2, kDepthwise, kDepthwiseTall, kWide, kGrouped, kLayerCount };

// Output channels of the wide layer: more than any kernel's MC, so its GEMM shares a
// packed B block between threads (ConvReliabilityCases checks it against the blocking).
constexpr int64_t kWideChannels = 1032;

// kTiny: for runs repeated hundreds of times (the allocation-failure injector); kLarge:
// buffers of megabytes, so that address-space limits bite between what the process holds
// and nothing, and runs long enough to use 2 threads.
enum Size { kTiny, kSmall, kLarge };

inline gk_conv_desc layer(Layer which, Size size) {
  auto pick = [size](int64_t tiny, int64_t small, int64_t large) {
    return size == kTiny ? tiny : size == kSmall ? small : large;
  };
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 2;
  d.activation = GK_ACT_RELU;
  switch (which) {
    case k3x3:
      d.in_channels = pick(8, 16, 32), d.out_channels = pick(12, 20, 40);
      d.in_height = d.in_width = pick(8, 16, 48);
      d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
      break;
    case k1x1:
    case k1x1Stride2:
      d.in_channels = pick(8, 16, 48), d.out_channels = pick(12, 24, 64);
      d.in_height = d.in_width = pick(8, 12, 40);
      d.kernel_h = d.kernel_w = 1;
      if (which == k1x1Stride2) d.stride_h = d.stride_w = 2;
      break;
    case kDepthwise:
      d.in_channels = d.out_channels = d.groups = pick(8, 16, 64);
      d.in_height = d.in_width = pick(8, 10, 48);
      d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
      d.activation = GK_ACT_RELU6;
      break;
    case kDepthwiseTall:  // 17 kernel rows: more row pointers than a small fixed array holds
      d.in_channels = d.out_channels = d.groups = pick(8, 16, 32);
      d.in_height = d.in_width = pick(6, 10, 40);
      d.kernel_h = 17, d.kernel_w = 3, d.pad_top = d.pad_bottom = 8, d.pad_left = d.pad_right = 1;
      break;
    case kGrouped:  // groups of 8 input channels, 8 or 12 output (merged in pairs on the NCHW8 engine)
      d.in_channels = pick(16, 32, 64), d.groups = pick(2, 4, 8), d.out_channels = pick(16, 48, 96);
      d.in_height = d.in_width = pick(8, 12, 32);
      d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
      break;
    default:  // kWide
      d.batch = 1, d.in_channels = pick(4, 8, 8), d.out_channels = kWideChannels;
      d.in_height = d.in_width = pick(4, 6, 6);
      d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
      break;
  }
  return d;
}

struct PlanSpec {
  Layer layer;
  gk_conv_algo algo;
  gk_layout layout;
  uint32_t flags;
};

constexpr PlanSpec kPlans[] = {
    {k3x3, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW, 0},
    {k3x3, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW8, 0},
    {k3x3, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NHWC, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {k3x3, GK_CONV_ALGO_DIRECT, GK_LAYOUT_NCHW, 0},
    {k3x3, GK_CONV_ALGO_DIRECT, GK_LAYOUT_NCHW16, 0},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F23, GK_LAYOUT_NCHW8, 0},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F43, GK_LAYOUT_NCHW, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F43, GK_LAYOUT_NHWC, 0},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F63, GK_LAYOUT_NCHW8, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {k3x3, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW8, GK_CONV_FLAG_NCHW_INPUT},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F43, GK_LAYOUT_NCHW16, GK_CONV_FLAG_NCHW_INPUT},
    {k3x3, GK_CONV_ALGO_AUTO, GK_LAYOUT_NCHW, 0},
    {k3x3, GK_CONV_ALGO_FASTRUN, GK_LAYOUT_NCHW8, 0},
    {k3x3, GK_CONV_ALGO_FASTRUN, GK_LAYOUT_NCHW, GK_CONV_FLAG_HIGH_ACCURACY},
    {k1x1, GK_CONV_ALGO_GEMM_1X1, GK_LAYOUT_NCHW, 0},
    {k1x1, GK_CONV_ALGO_GEMM_1X1, GK_LAYOUT_NCHW8, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {k1x1Stride2, GK_CONV_ALGO_GEMM_1X1, GK_LAYOUT_NCHW, 0},
    {k1x1Stride2, GK_CONV_ALGO_GEMM_1X1, GK_LAYOUT_NCHW8, 0},
    {k1x1Stride2, GK_CONV_ALGO_AUTO, GK_LAYOUT_NHWC, 0},
    {kDepthwise, GK_CONV_ALGO_DEPTHWISE, GK_LAYOUT_NCHW8, 0},
    {kDepthwise, GK_CONV_ALGO_DEPTHWISE, GK_LAYOUT_NCHW, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {kDepthwise, GK_CONV_ALGO_FASTRUN, GK_LAYOUT_NCHW4, 0},
    {kDepthwiseTall, GK_CONV_ALGO_DEPTHWISE, GK_LAYOUT_NCHW8, 0},
    {kDepthwiseTall, GK_CONV_ALGO_DEPTHWISE, GK_LAYOUT_NCHW, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {kDepthwiseTall, GK_CONV_ALGO_DEPTHWISE, GK_LAYOUT_NHWC, 0},
    {kWide, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW, 0},
    {kWide, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW8, 0},
    {kGrouped, GK_CONV_ALGO_AUTO, GK_LAYOUT_NCHW8, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {kGrouped, GK_CONV_ALGO_FASTRUN, GK_LAYOUT_NHWC, 0},
};
constexpr int kPlanCount = sizeof kPlans / sizeof kPlans[0];

// The injector's cold run repeats once per allocation it makes: each algorithm once (the
// Winograd variants pack A * A weight matrices each), both GEMM packing paths and the
// pointwise kernels, AUTO, and Fast-Run last (its profile's allocations depend on timing:
// nothing after it would be reached by the same allocation number every time).
constexpr PlanSpec kInjectPlans[] = {
    {k3x3, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {k3x3, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW8, GK_CONV_FLAG_NCHW_INPUT},
    {kWide, GK_CONV_ALGO_IM2COL_GEMM, GK_LAYOUT_NCHW, 0},
    {k3x3, GK_CONV_ALGO_DIRECT, GK_LAYOUT_NCHW16, 0},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F23, GK_LAYOUT_NCHW8, GK_CONV_FLAG_ADD_TO_OUTPUT},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F43, GK_LAYOUT_NHWC, 0},
    {k3x3, GK_CONV_ALGO_WINOGRAD_F63, GK_LAYOUT_NCHW, 0},
    {k1x1, GK_CONV_ALGO_GEMM_1X1, GK_LAYOUT_NCHW, 0},
    {k1x1Stride2, GK_CONV_ALGO_GEMM_1X1, GK_LAYOUT_NCHW8, 0},
    {kDepthwise, GK_CONV_ALGO_DEPTHWISE, GK_LAYOUT_NCHW, 0},
    {k1x1Stride2, GK_CONV_ALGO_AUTO, GK_LAYOUT_NHWC, 0},
    {kDepthwise, GK_CONV_ALGO_FASTRUN, GK_LAYOUT_NCHW4, 0},
};
constexpr int kInjectPlanCount = sizeof kInjectPlans / sizeof kInjectPlans[0];

inline gk_conv_desc plan_desc(const PlanSpec& p, Size size) {
  gk_conv_desc d = layer(p.layer, size);
  d.layout = p.layout;
  d.flags = p.flags;
  return d;
}

inline const char* algo_name(gk_conv_algo a) {
  static const char* const names[] = {"auto",      "fastrun",      "im2col_gemm",  "gemm_1x1",    "direct",
                                      "depthwise", "winograd_f23", "winograd_f43", "winograd_f63"};
  return names[a];
}
inline const char* layout_name(gk_layout l) {
  static const char* const names[] = {"NCHW", "NHWC", "NCHW4", "NCHW8", "NCHW16"};
  return names[l];
}

// Index of element (n, c, h, w) of an N x C x H x W tensor in `layout` (NCHWx: channels
// padded to a multiple of x), computed here independently of the library.
inline int64_t index_of(gk_layout layout, int64_t C, int64_t H, int64_t W, int64_t n, int64_t c, int64_t h,
                        int64_t w) {
  switch (layout) {
    case GK_LAYOUT_NCHW: return ((n * C + c) * H + h) * W + w;
    case GK_LAYOUT_NHWC: return ((n * H + h) * W + w) * C + c;
    default: {
      const int64_t x = layout == GK_LAYOUT_NCHW4 ? 4 : layout == GK_LAYOUT_NCHW8 ? 8 : 16;
      const int64_t blocks = (C + x - 1) / x;
      return (((n * blocks + c / x) * H + h) * W + w) * x + c % x;
    }
  }
}

}  // namespace conv_cases
