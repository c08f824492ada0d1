/* Calls the BLAS drop-in and the convolution API through an installed gemmkit; prints
 * "ok" when both results are right. */
#include <stdio.h>
#include <stdlib.h>

#include <gemmkit.h>

#define ABS(x) ((x) < 0 ? -(x) : (x))

static int check_sgemm(void) {
  /* C (2 x 2) = A (2 x 3) * B (3 x 2), row-major */
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
  const float want[4] = {58, 64, 139, 154};
  float c[4] = {0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  for (int i = 0; i < 4; ++i)
    if (ABS(c[i] - want[i]) > 1e-4f) {
      printf("cblas_sgemm: c[%d] = %g, want %g\n", i, c[i], want[i]);
      return 1;
    }
  return 0;
}

static int check_conv(void) {
  /* 2 channels of 4x4 ones, 3x3 kernel of ones, padding 1: 18 inside, 12 on edges, 8 in corners */
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1; d.in_channels = 2; d.in_height = d.in_width = 4; d.out_channels = 1;
  d.kernel_h = d.kernel_w = 3; d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
  d.layout = GK_LAYOUT_NCHW;
  int64_t oh = 0, ow = 0;
  if (gk_conv_output_size(&d, &oh, &ow) != GK_OK || oh != 4 || ow != 4) {
    printf("gk_conv_output_size: %lld x %lld, want 4 x 4\n", (long long)oh, (long long)ow);
    return 1;
  }
  float w[18], in[32], out[16];
  for (int i = 0; i < 18; ++i) w[i] = 1;
  for (int i = 0; i < 32; ++i) in[i] = 1;
  gk_conv_plan *plan;
  if (gk_conv_plan_create(&d, w, NULL, GK_CONV_ALGO_AUTO, &plan) != GK_OK) {
    printf("gk_conv_plan_create: %s\n", gk_last_error());
    return 1;
  }
  gk_status s = gk_conv_run(plan, in, out);
  gk_conv_plan_destroy(plan);
  if (s != GK_OK) {
    printf("gk_conv_run: %s\n", gk_last_error());
    return 1;
  }
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      int edges = (y == 0 || y == 3) + (x == 0 || x == 3);
      float want = edges == 0 ? 18 : edges == 1 ? 12 : 8;
      if (ABS(out[y * 4 + x] - want) > 1e-4f) {
        printf("gk_conv_run: out[%d][%d] = %g, want %g\n", y, x, out[y * 4 + x], want);
        return 1;
      }
    }
  return 0;
}

int main(void) {
  const char *config = gk_config_string();
  if (!config || !config[0]) {
    printf("gk_config_string: empty\n");
    return 1;
  }
  if (check_sgemm() || check_conv()) return 1;
  printf("ok\n");
  return 0;
}
