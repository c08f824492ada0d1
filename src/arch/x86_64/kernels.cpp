// x86-64 kernel table. Automatic selection takes the first entry marked automatic that
// the CPU supports; GEMMKIT_KERNEL / gk_set_kernel can name any supported entry.
//
// AVX-512 (14x32) is the default where the CPU has AVX-512F and VL: on an Intel Xeon of model 207
// (2 cores, 48K L1d, 2M L2) it runs 1024^3 at 140-150 GFLOP/s on one thread against 82-84
// for AVX2 4x24. Its pointwise kernels (12 pixels x 32 or 16 channels, src/arch/x86_64/
// pointwise_avx512.inc; 8-wide panels on AVX2's) run ungrouped NCHW8 convolutions and
// the in-place-A GEMMs: whole ResNet-50 at 1 thread 95 -> 71 ms against the AVX2 ones. Its
// fused epilogue lets NCHW and NHWC convolutions run their GEMMs on it (ResNet-50's
// layers in NCHW, 1 thread: 107 -> 77 ms); its MR does not divide 8, so the blocked
// layouts' GEMM paths stay on the AVX2 entry (gk::conv_config(), conv_gemm_config(),
// gk::pointwise_kernel()). On Zen 4 the zmm FMA throughput equals the ymm one: the
// measurements above are Intel's.
//
// AVX2: 4x24 is the default, 6x16 (the classic BLIS/Haswell shape) can be named: on Zen 3
// 4x24 reaches 94-98% of the FMA peak in L1 against 86-89% for 6x16, because it needs one
// broadcast per 3 FMAs instead of one per 2 (src/arch/x86_64/sgemm_avx2.inc). Default blocking is used when cpuinfo reports no
// cache sizes; otherwise src/gemm/config.cpp derives it from the caches.
#include <cpuid.h>

#include "arch/ukernel.h"
#include "common/runtime.h"

extern "C" void gk_sgemm_4x24_avx2(const gk_ukernel_args*);
extern "C" void gk_sgemm_4x16_avx2(const gk_ukernel_args*);
extern "C" void gk_sgemm_4x8_avx2(const gk_ukernel_args*);
extern "C" void gk_sgemm_6x16_avx2(const gk_ukernel_args*);
extern "C" void gk_sgemm_6x8_avx2(const gk_ukernel_args*);
extern "C" void gk_pointwise_4x24_avx2(const gk_pointwise_args*);
extern "C" void gk_pointwise_6x16_avx2(const gk_pointwise_args*);
extern "C" void gk_pointwise_6x8_avx2(const gk_pointwise_args*);
extern "C" void gk_pointwise_1x24_avx2(const gk_pointwise_args*);
extern "C" void gk_pointwise_1x16_avx2(const gk_pointwise_args*);
extern "C" void gk_pointwise_1x8_avx2(const gk_pointwise_args*);
extern "C" void gk_sgemm_14x32_avx512(const gk_ukernel_args*);
extern "C" void gk_pointwise_12x32_avx512(const gk_pointwise_args*);
extern "C" void gk_pointwise_12x16_avx512(const gk_pointwise_args*);
extern "C" void gk_pointwise_1x32_avx512(const gk_pointwise_args*);
extern "C" void gk_pointwise_1x16_avx512(const gk_pointwise_args*);
extern "C" void gk_pointwise_4x32_avx512(const gk_pointwise_args*);
extern "C" void gk_pointwise_4x16_avx512(const gk_pointwise_args*);

// Read by the 12x32 AVX-512 pointwise kernel (pointwise_avx512.inc): non-zero, it fetches
// the weight rows ahead as non-temporal (AMD; elsewhere into L2). 0 (prefetcht2) until the
// initializer below runs as the library loads; either value gives the same results.
extern "C" {
__attribute__((visibility("hidden"))) unsigned char gk_weights_ahead_nta = 0;
}

namespace gk {
namespace {
// AMD's (and Hygon's Zen) non-temporal prefetch keeps streamed weights out of L3; measured
// on Zen 5 only, one core (docs/design.md, "Pointwise kernels"). Intel stays on
// prefetcht2, measured there; its non-temporal fetch skips L2.
bool amd_vendor() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  const bool amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;    // "AuthenticAMD"
  const bool hygon = b == 0x6f677948 && d == 0x6e65476e && c == 0x656e6975;  // "HygonGenuine"
  return amd || hygon;
}
const bool g_weights_ahead_set = (gk_weights_ahead_nta = amd_vendor() ? 1 : 0, true);

// VL too: the entry's tiny blocks run 8-float vectors with masks (every AVX-512 CPU but
// the Xeon Phi has it).
bool has_avx512() { return cpu().x86_avx512f && cpu().x86_avx512vl; }
bool has_avx2_fma() { return cpu().x86_avx2_fma; }

// The AVX2 entries: GEMM kernel, blocking and the pointwise kernels both share.
constexpr KernelInfo avx2_entry(const char* name, int mr, int nr, gk_ukernel_fn fn) {
  return KernelInfo::entry(name, "AVX2+FMA3", SimdLevel::Avx2)
      .tile(mr, nr, fn)
      .supported_if(has_avx2_fma)
      .with_fused_epilogue()
      .pointwise_kernel(4, 24, gk_pointwise_4x24_avx2, gk_pointwise_1x24_avx2)
      .pointwise_kernel(6, 16, gk_pointwise_6x16_avx2, gk_pointwise_1x16_avx2)
      .pointwise_kernel(6, 8, gk_pointwise_6x8_avx2, gk_pointwise_1x8_avx2);
}

constexpr KernelInfo kTable[] = {
    KernelInfo::entry("avx512", "AVX-512F+VL", SimdLevel::Avx512)
        .tile(14, 32, gk_sgemm_14x32_avx512)
        .blocking(210, 384, 4096)
        .supported_if(has_avx512)
        .with_fused_epilogue()
        .with_late_c_prefetch()
        .pointwise_kernel(12, 32, gk_pointwise_12x32_avx512, gk_pointwise_1x32_avx512, gk_pointwise_4x32_avx512,
                          /*skips_last_block=*/true)
        .pointwise_kernel(12, 16, gk_pointwise_12x16_avx512, gk_pointwise_1x16_avx512, gk_pointwise_4x16_avx512,
                          /*skips_last_block=*/true)
        .pointwise_kernel(6, 8, gk_pointwise_6x8_avx2, gk_pointwise_1x8_avx2),
    avx2_entry("avx2", 4, 24, gk_sgemm_4x24_avx2)
        .narrow(8, gk_sgemm_4x8_avx2)
        .narrow(16, gk_sgemm_4x16_avx2)
        .blocking(192, 336, 4080),
    avx2_entry("avx2-6x16", 6, 16, gk_sgemm_6x16_avx2)
        .narrow(8, gk_sgemm_6x8_avx2)
        .blocking(252, 256, 4080)
        .named_only(),
    generic_kernel_info(),
};
}  // namespace

const KernelInfo* arch_kernels(int* count) {
  *count = static_cast<int>(sizeof kTable / sizeof kTable[0]);
  return kTable;
}
}  // namespace gk
