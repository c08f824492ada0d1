// Descriptor validation, output size, and the public descriptor helpers.
#include "common/runtime.h"
#include "conv/conv.h"

namespace gk {
namespace conv {

namespace {
int64_t output_extent(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t kernel, int64_t stride,
                      int64_t dilation) {
  const int64_t span = dilation * (kernel - 1) + 1;
  return (in + pad_lo + pad_hi - span) / stride + 1;
}
}  // namespace

bool validate(const gk_conv_desc& d, Shape* shape) {
  struct Check {
    bool ok;
    const char* what;
  };
  const Check checks[] = {
      {d.batch >= 1, "batch must be >= 1"},
      {d.in_channels >= 1, "in_channels must be >= 1"},
      {d.in_height >= 1 && d.in_width >= 1, "in_height and in_width must be >= 1"},
      {d.out_channels >= 1, "out_channels must be >= 1"},
      {d.kernel_h >= 1 && d.kernel_w >= 1, "kernel_h and kernel_w must be >= 1"},
      {d.stride_h >= 1 && d.stride_w >= 1, "stride_h and stride_w must be >= 1"},
      {d.dilation_h >= 1 && d.dilation_w >= 1, "dilation_h and dilation_w must be >= 1"},
      {d.pad_top >= 0 && d.pad_left >= 0 && d.pad_bottom >= 0 && d.pad_right >= 0,
       "padding must be >= 0"},
      {d.groups >= 1, "groups must be >= 1"},
      {d.groups >= 1 && d.in_channels % d.groups == 0, "in_channels must be divisible by groups"},
      {d.groups >= 1 && d.out_channels % d.groups == 0, "out_channels must be divisible by groups"},
      {valid_layout(raw_enum(d.layout)), "unknown layout"},
      {raw_enum(d.activation) >= GK_ACT_NONE && raw_enum(d.activation) <= GK_ACT_RELU6,
       "unknown activation"},
      {(d.flags & ~(GK_CONV_FLAG_HIGH_ACCURACY | GK_CONV_FLAG_NCHW_INPUT | GK_CONV_FLAG_ADD_TO_OUTPUT)) == 0,
       "unknown flags"},
  };
  for (const Check& c : checks) {
    if (!c.ok) {
      set_last_error("invalid convolution descriptor: %s", c.what);
      return false;
    }
  }
  // Sizes whose products would overflow are rejected rather than wrapped.
  const int64_t kLimit = int64_t{1} << 31;
  if (d.in_height > kLimit || d.in_width > kLimit || d.kernel_h > kLimit || d.kernel_w > kLimit ||
      d.in_channels > kLimit || d.out_channels > kLimit || d.batch > kLimit ||
      d.dilation_h > kLimit || d.dilation_w > kLimit || d.pad_top > kLimit || d.pad_bottom > kLimit ||
      d.pad_left > kLimit || d.pad_right > kLimit) {
    set_last_error("invalid convolution descriptor: a size exceeds 2^31");
    return false;
  }
  const int64_t oh = output_extent(d.in_height, d.pad_top, d.pad_bottom, d.kernel_h, d.stride_h,
                                   d.dilation_h);
  const int64_t ow = output_extent(d.in_width, d.pad_left, d.pad_right, d.kernel_w, d.stride_w,
                                   d.dilation_w);
  if (d.dilation_h * (d.kernel_h - 1) + 1 > d.in_height + d.pad_top + d.pad_bottom ||
      d.dilation_w * (d.kernel_w - 1) + 1 > d.in_width + d.pad_left + d.pad_right || oh < 1 || ow < 1) {
    set_last_error("invalid convolution descriptor: the (dilated) kernel is larger than the padded input");
    return false;
  }
  if (shape) {
    shape->d = d;
    shape->in_layout = d.flags & GK_CONV_FLAG_NCHW_INPUT ? GK_LAYOUT_NCHW : d.layout;
    shape->oh = oh;
    shape->ow = ow;
    shape->icg = d.in_channels / d.groups;
    shape->ocg = d.out_channels / d.groups;
    shape->k_gemm = shape->icg * d.kernel_h * d.kernel_w;
  }
  return true;
}

Epilogue make_epilogue(const Shape& s, const float* bias, int64_t oc0) {
  Epilogue e;
  if (bias) {
    e.bias = bias + oc0;
    e.bias_mode = BiasMode::PerRow;
  }
  e.act = s.d.activation == GK_ACT_RELU    ? Activation::Relu
          : s.d.activation == GK_ACT_RELU6 ? Activation::Relu6
                                           : Activation::None;
  return e;
}

}  // namespace conv
}  // namespace gk

extern "C" {

__attribute__((visibility("default"))) void gk_conv_desc_init(gk_conv_desc* d) {
  if (!d) return;
  *d = gk_conv_desc{};
  d->stride_h = d->stride_w = 1;
  d->dilation_h = d->dilation_w = 1;
  d->groups = 1;
}

__attribute__((visibility("default"))) gk_status gk_conv_output_size(const gk_conv_desc* d,
                                                                     int64_t* out_h, int64_t* out_w) {
  if (!d || !out_h || !out_w) {
    gk::set_last_error("gk_conv_output_size: NULL argument");
    return GK_ERR_INVALID_ARGUMENT;
  }
  gk::conv::Shape s;
  if (!gk::conv::validate(*d, &s)) return GK_ERR_INVALID_ARGUMENT;
  *out_h = s.oh;
  *out_w = s.ow;
  return GK_OK;
}
}
