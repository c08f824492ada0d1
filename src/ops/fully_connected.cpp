// Fully connected layer (PyTorch's Linear) on the SGEMM core: Y = X W^T, then bias and
// activation. The core picks the path by shape: batch 1 streams W once (GEMV dot form,
// the layer being bound by reading W); larger batches pack.
#include <cinttypes>

#include "gemm/gemm.h"
#include "ops/ops.h"

namespace gk {
namespace ops {
namespace {

Activation gemm_activation(gk_activation act) {
  return act == GK_ACT_RELU ? Activation::Relu : act == GK_ACT_RELU6 ? Activation::Relu6 : Activation::None;
}

void run_fully_connected(int64_t batch, int64_t in, int64_t out, const float* x, const float* w, const float* bias,
                         gk_activation act, float* y) {
  // C = Y (batch x out, row stride out) = X (batch x in) * W^T, where W^T(i, o) = w[o * in + i].
  sgemm_rowstored(batch, out, in, 1.0f, MatrixView{x, in, 1}, MatrixView{w, 1, in}, 0.0f, y, out);
  // sgemm_rowstored takes no epilogue (its GEMV and tiny paths have none), so bias and
  // activation follow as the core's epilogue over Y: batch x out floats, against the
  // out x in of W the product reads.
  Epilogue e;
  if (bias) e.bias = bias, e.bias_mode = BiasMode::PerColumn;
  e.act = gemm_activation(act);
  if (e.active()) apply_epilogue(e, y, out, batch, out, 0, 0);
}

}  // namespace
}  // namespace ops
}  // namespace gk

GK_OPS_EXPORT gk_status gk_fully_connected(int64_t batch, int64_t in_features, int64_t out_features, const float* x,
                                           const float* weights, const float* bias, gk_activation act, float* y) {
  const char* fn = "gk_fully_connected";
  return gk::ops::guarded(fn, [&] {
    if (batch < 1 || in_features < 1 || out_features < 1) {
      gk::set_last_error("%s: batch %" PRId64 ", in_features %" PRId64 ", out_features %" PRId64
                         " (each must be >= 1)", fn, batch, in_features, out_features);
      return GK_ERR_INVALID_ARGUMENT;
    }
    int64_t x_floats, w_floats, y_floats;
    if (!gk::ops::check_floats(fn, "x", batch, in_features, 1, &x_floats) ||
        !gk::ops::check_floats(fn, "weights", out_features, in_features, 1, &w_floats) ||
        !gk::ops::check_floats(fn, "y", batch, out_features, 1, &y_floats) ||
        !gk::ops::check_pointer(fn, "x", x) || !gk::ops::check_pointer(fn, "weights", weights) ||
        !gk::ops::check_pointer(fn, "y", y) || !gk::ops::check_activation(fn, act))
      return GK_ERR_INVALID_ARGUMENT;
    if (!gk::ops::check_disjoint(fn, "y", y, y_floats, "x", x, x_floats) ||
        !gk::ops::check_disjoint(fn, "y", y, y_floats, "weights", weights, w_floats) ||
        (bias && !gk::ops::check_disjoint(fn, "y", y, y_floats, "bias", bias, out_features)))
      return GK_ERR_INVALID_ARGUMENT;
    gk::ops::run_fully_connected(batch, in_features, out_features, x, weights, bias, act, y);
    return GK_OK;
  });
}
