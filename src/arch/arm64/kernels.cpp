// AArch64 kernel table. Blocking defaults follow what BLIS and OpenBLAS use for
// Cortex-A72 / Neoverse-N1 class cores (MC 120-240, KC 352-640): MC = 240 (a 240 x 352
// A block is 330 KiB, half of a 1 MiB L2 share), KC = 352 (the 352 x 12 B micro-panel is
// 16.5 KiB, half of a 32 KiB L1d; scaled with the L1d cpuinfo reports), NC = 4092.
// Under qemu cpuinfo reports no L2 and an invented L1: these defaults are then used.
#include "arch/ukernel.h"

extern "C" void gk_sgemm_8x12_neon(const gk_ukernel_args*);

namespace gk {
namespace {
constexpr KernelInfo kTable[] = {
    KernelInfo::entry("neon", "AArch64 NEON", SimdLevel::Baseline)
        .tile(8, 12, gk_sgemm_8x12_neon)
        .blocking(240, 352, 4092)
        .supported_if(always_supported),
    generic_kernel_info(),
};
}  // namespace

const KernelInfo* arch_kernels(int* count) {
  *count = static_cast<int>(sizeof kTable / sizeof kTable[0]);
  return kTable;
}
}  // namespace gk
