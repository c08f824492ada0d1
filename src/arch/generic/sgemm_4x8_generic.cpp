// Portable micro-kernel for CPUs without a hand-written one. Plain C++ that the compiler
// vectorizes for the baseline ISA (SSE2 on x86-64, NEON on AArch64). 4x8 keeps the 32
// accumulators in 8 x 128-bit registers on either ISA.
#include "arch/ukernel.h"

namespace {
constexpr int kMR = 4, kNR = 8;  // keep in step with gk::generic_kernel_info()
}

extern "C" void gk_sgemm_4x8_generic(const gk_ukernel_args* args) {
  float acc[kMR][kNR] = {};
  const float* a = args->a;
  const float* b = args->b;
  for (int64_t p = 0; p < args->k; ++p, a += kMR, b += args->rs_b)
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kNR; ++j) acc[i][j] += a[i] * b[j];
  const float alpha = args->alpha, beta = args->beta;
  for (int i = 0; i < kMR; ++i) {
    float* c = args->c + i * args->rs_c;
    if (beta == 0.0f) {
      for (int j = 0; j < kNR; ++j) c[j] = alpha * acc[i][j];
    } else {
      for (int j = 0; j < kNR; ++j) c[j] = alpha * acc[i][j] + beta * c[j];
    }
  }
}
