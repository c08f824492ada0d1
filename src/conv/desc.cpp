// Descriptor validation, output size, and the public descriptor helpers.
#include "common/c_boundary.h"
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
// Every integer field at most 2^31, so that no sum or product of two of them overflows
// below; the tensors' sizes are checked as wholes afterwards.
bool fields_within_limit(const gk_conv_desc& d) {
  const int64_t kLimit = int64_t{1} << 31;
  const struct {
    int64_t value;
    const char* name;
  } fields[] = {{d.batch, "batch"},         {d.in_channels, "in_channels"}, {d.in_height, "in_height"},
                {d.in_width, "in_width"},   {d.out_channels, "out_channels"}, {d.kernel_h, "kernel_h"},
                {d.kernel_w, "kernel_w"},   {d.stride_h, "stride_h"},       {d.stride_w, "stride_w"},
                {d.dilation_h, "dilation_h"}, {d.dilation_w, "dilation_w"}, {d.pad_top, "pad_top"},
                {d.pad_left, "pad_left"},   {d.pad_bottom, "pad_bottom"},   {d.pad_right, "pad_right"},
                {d.groups, "groups"}};
  for (const auto& f : fields) {
    if (f.value > kLimit) {
      set_last_error("invalid convolution descriptor: %s (%lld) exceeds 2^31", f.name,
                     static_cast<long long>(f.value));
      return false;
    }
  }
  return true;
}

// The input (padded, as algorithms copy it, channels rounded to a 16-block), output and
// weights in bytes, each at most kMaxBytes.
bool tensors_within_limit(const gk_conv_desc& d, int64_t oh, int64_t ow) {
  const int64_t ic = (d.in_channels + 15) / 16 * 16, oc = (d.out_channels + 15) / 16 * 16;
  const int64_t ph = d.in_height + d.pad_top + d.pad_bottom, pw = d.in_width + d.pad_left + d.pad_right;
  const struct {
    std::initializer_list<int64_t> factors;
    const char* what;
  } tensors[] = {
      {{d.batch, ic, ph, pw}, "the input (batch x in_channels x padded in_height x in_width)"},
      {{d.batch, oc, oh, ow}, "the output (batch x out_channels x output height x width)"},
      {{oc, d.in_channels / d.groups, d.kernel_h, d.kernel_w},
       "the weights (out_channels x in_channels / groups x kernel_h x kernel_w)"},
  };
  for (const auto& t : tensors) {
    int64_t bytes = 0;
    if (!float_bytes_within_limit(t.factors, &bytes)) {
      set_last_error("invalid convolution descriptor: %s exceeds 2^56 bytes", t.what);
      return false;
    }
  }
  return true;
}
}  // namespace

bool float_bytes_within_limit(std::initializer_list<int64_t> factors, int64_t* bytes) {
  int64_t b = 4;
  for (int64_t f : factors)
    if (f < 0 || !mul_ok(b, f, &b) || b > kMaxBytes) return false;
  *bytes = b;
  return true;
}

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
  if (!fields_within_limit(d)) return false;
  const int64_t oh = output_extent(d.in_height, d.pad_top, d.pad_bottom, d.kernel_h, d.stride_h,
                                   d.dilation_h);
  const int64_t ow = output_extent(d.in_width, d.pad_left, d.pad_right, d.kernel_w, d.stride_w,
                                   d.dilation_w);
  if (d.dilation_h * (d.kernel_h - 1) + 1 > d.in_height + d.pad_top + d.pad_bottom ||
      d.dilation_w * (d.kernel_w - 1) + 1 > d.in_width + d.pad_left + d.pad_right || oh < 1 || ow < 1) {
    set_last_error("invalid convolution descriptor: the (dilated) kernel is larger than the padded input");
    return false;
  }
  if (!tensors_within_limit(d, oh, ow)) return false;
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
  return gk::guard_c_boundary("gk_conv_output_size", [&] {
    if (!d || !out_h || !out_w) {
      gk::set_last_error("gk_conv_output_size: NULL argument");
      return GK_ERR_INVALID_ARGUMENT;
    }
    gk::conv::Shape s;
    if (!gk::conv::validate(*d, &s)) return GK_ERR_INVALID_ARGUMENT;
    *out_h = s.oh;
    *out_w = s.ow;
    return GK_OK;
  });
}
}
