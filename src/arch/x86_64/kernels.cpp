// x86-64 kernel table, best first. The driver picks the first entry the CPU supports
// (or the one GEMMKIT_KERNEL names). Default blocking is used when cpuinfo reports no
// cache sizes; otherwise src/gemm/blocking.cpp derives it from the caches.
#include "arch/ukernel.h"
#include "common/runtime.h"

extern "C" void gk_sgemm_6x16_avx2(const gk_ukernel_args*);
extern "C" void gk_sgemm_14x32_avx512(const gk_ukernel_args*);

namespace gk {
namespace {
bool has_avx512() { return cpu().x86_avx512f; }
bool has_avx2_fma() { return cpu().x86_avx2_fma; }

const KernelInfo kTable[] = {
    {"avx512", "AVX-512F", 14, 32, gk_sgemm_14x32_avx512, 210, 384, 4096, has_avx512},
    {"avx2", "AVX2+FMA3", 6, 16, gk_sgemm_6x16_avx2, 168, 256, 4080, has_avx2_fma},
    generic_kernel_info(),
};
}  // namespace

const KernelInfo* arch_kernels(int* count) {
  *count = static_cast<int>(sizeof kTable / sizeof kTable[0]);
  return kTable;
}
}  // namespace gk
