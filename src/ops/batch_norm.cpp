// Folding an inference batch norm into the preceding layer's weights and bias:
//   gamma * (W x + bias - mean) / sqrt(var + eps) + beta
//     = (scale W) x + (bias - mean) * scale + beta,   scale = gamma / sqrt(var + eps).
// The scale is computed in double, then each weight rounded once.
#include <cinttypes>
#include <cmath>

#include "ops/ops.h"

namespace gk {
namespace ops {
namespace {

constexpr const char* kFold = "gk_fold_batch_norm";

bool check_fold(int64_t out, int64_t per_channel, const float* weights, const float* bias, const float* gamma,
                const float* beta, const float* mean, const float* var, float eps, int64_t* w_floats) {
  const char* fn = kFold;
  if (out < 1 || per_channel < 1) {
    set_last_error("%s: out_channels %" PRId64 " and weights_per_channel %" PRId64 " must be >= 1", fn, out,
                   per_channel);
    return false;
  }
  if (!check_floats(fn, "weights", out, per_channel, 1, w_floats) || !check_pointer(fn, "weights", weights) ||
      !check_pointer(fn, "bias", bias) || !check_pointer(fn, "gamma", gamma) || !check_pointer(fn, "beta", beta) ||
      !check_pointer(fn, "mean", mean) || !check_pointer(fn, "var", var))
    return false;
  if (!(eps >= 0.0f) || !std::isfinite(eps)) {
    set_last_error("%s: eps %g must be finite and >= 0", fn, double(eps));
    return false;
  }
  for (int64_t o = 0; o < out; ++o) {
    const double d = double(var[o]) + double(eps);
    if (!(d > 0.0) || !std::isfinite(d)) {
      set_last_error("%s: var[%" PRId64 "] + eps = %g must be finite and > 0", fn, o, d);
      return false;
    }
  }
  // The outputs are written in place: they must not share memory with each other or the
  // statistics still to be read.
  const struct {
    const char* name;
    const float* p;
  } stats[4] = {{"gamma", gamma}, {"beta", beta}, {"mean", mean}, {"var", var}};
  if (!check_disjoint(fn, "bias", bias, out, "weights", weights, *w_floats)) return false;
  for (const auto& s : stats)
    if (!check_disjoint(fn, "weights", weights, *w_floats, s.name, s.p, out) ||
        !check_disjoint(fn, "bias", bias, out, s.name, s.p, out))
      return false;
  return true;
}

void fold(int64_t out, int64_t per_channel, float* weights, float* bias, const float* gamma, const float* beta,
          const float* mean, const float* var, float eps) {
  parallel_region(threads_for_bytes(8.0 * double(out) * double(per_channel)), [&] {
#pragma omp for schedule(static)
    for (int64_t o = 0; o < out; ++o) {
      const double scale = double(gamma[o]) / std::sqrt(double(var[o]) + double(eps));
      float* w = weights + o * per_channel;
      for (int64_t i = 0; i < per_channel; ++i) w[i] = float(double(w[i]) * scale);
      bias[o] = float((double(bias[o]) - double(mean[o])) * scale + double(beta[o]));
    }
  });
}

}  // namespace
}  // namespace ops
}  // namespace gk

GK_OPS_EXPORT gk_status gk_fold_batch_norm(int64_t out_channels, int64_t weights_per_channel, float* weights,
                                           float* bias, const float* gamma, const float* beta, const float* mean,
                                           const float* var, float eps) {
  return gk::ops::guarded(gk::ops::kFold, [&] {
    int64_t w_floats;
    if (!gk::ops::check_fold(out_channels, weights_per_channel, weights, bias, gamma, beta, mean, var, eps,
                             &w_floats))
      return GK_ERR_INVALID_ARGUMENT;
    gk::ops::fold(out_channels, weights_per_channel, weights, bias, gamma, beta, mean, var, eps);
    return GK_OK;
  });
}
