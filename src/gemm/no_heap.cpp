// The GEMM of last resort, for when a path's buffers cannot be had (DESIGN.md, "The
// contract with the caller": a BLAS entry point has no status to return, so it computes
// the product anyway, slower). No heap memory and no threads (a new OpenMP team may need
// memory too): on the calling thread, with one A micro-panel (MR x kc) and one B
// micro-panel (kc x NR) in a fixed stack buffer, the same micro-kernels, and K in blocks
// short enough for that buffer. B's panel is packed once per K block and column panel,
// A's panel once per tile: A is packed N / NR times over, the price of holding no block.
#include <algorithm>

#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {
namespace {

// 16 KiB of stack: a caller's thread may have a small stack, and the kernel calls below
// add a tile (kMaxTileFloats) on top.
constexpr int64_t kNoHeapFloats = 4096;

// The K block: the A and B micro-panels together fill the buffer (a multiple of 8 k steps
// where that leaves at least 8).
int64_t no_heap_kc(const KernelInfo& ker) {
  const int64_t kc = (kNoHeapFloats - 16) / (ker.mr + ker.nr);
  return kc >= 8 ? kc / 8 * 8 : kc;
}

}  // namespace

void gemm_no_heap(const GemmProblem& p, const KernelConfig& cfg) {
  const KernelInfo& ker = *cfg.kernel;
  const int mr = ker.mr, nr = ker.nr;
  const int64_t kc_max = std::min(no_heap_kc(ker), cfg.kc);
  alignas(64) float buffer[kNoHeapFloats];
  float* const a_panel = buffer;
  float* const b_panel = buffer + round_up(mr * kc_max, 16);  // 64-byte aligned, as packed panels are
  for_each_balanced_block(p.k, kc_max, 1, [&](int64_t pc, int64_t kc) {
    const bool last_k = pc + kc == p.k;
    const Epilogue* epilogue = last_k ? &p.epilogue : nullptr;
    const float beta = pc == 0 ? p.beta : 1.0f;
    for (int64_t j = 0; j < p.n; j += nr) {
      const int64_t cols = std::min<int64_t>(nr, p.n - j);
      p.b->pack_panel(pc, kc, j, cols, nr, b_panel);
      for (int64_t i = 0; i < p.m; i += mr) {
        const int64_t rows = std::min<int64_t>(mr, p.m - i);
        const float* a = p.a->panel(i, rows, pc, kc, mr, a_panel);
        if (p.c_block_stride) {
          run_ukernel_blocked_c(ker, rows, cols, kc, p.alpha, a, b_panel, nr, beta, p.c, p.c_block_stride, epilogue,
                                i, j);
        } else {
          run_ukernel(ker, rows, cols, kc, p.alpha, a, b_panel, nr, beta, p.c + i * p.rs_c + j, p.rs_c, epilogue, i,
                      j);
        }
      }
    }
  });
}

}  // namespace gk
