// GEMMs with few columns and long rows of A (a 3x3 conv's GEMM at 7x7 is 512x49x4608):
// packing A costs a pass over its M x K floats, read from L3 and written to L2 with a
// transpose, against only 2 x N flops per float: a quarter of 512x49x4608's time at one
// thread. Here the pointwise kernels (KernelInfo::pointwise, the GEMM kernel turned
// around, src/arch/x86_64/pointwise_avx2.inc) read A where it is: a tile's MR rows are its
// "pixels" (lda apart), K its "channels" (contiguous), and a packed B panel (kc rows of NR)
// its weights. They store 8-column vectors, so the tiles accumulate over the K blocks in
// a staged C' ([8-column block][row][8]); C = alpha C' + beta C at the end (beta == 0
// never reads C). C' is M x N floats against M x N x K FMAs: nothing for a long K.
//
// Loops as Goto's (K blocks, MC row chunks whose A rows stay in L2, a B panel per kernel
// call over the chunk's tiles); threads take whole row ranges and pack their own B block
// (K x N is small next to A), so they never wait on each other.
#include <algorithm>

#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {
namespace {

// Rows [r0, r1) of C = alpha * C' + beta * C (C' as the kernels stored it).
void store_c(const GemmProblem& p, const float* staged, int64_t m_pad, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; ++i) {
    float* c = p.c + i * p.rs_c;
    for (int64_t j = 0; j < p.n; ++j) {
      const float v = p.alpha * staged[((j / 8) * m_pad + i) * 8 + j % 8];
      c[j] = p.beta == 0.0f ? v : v + p.beta * c[j];
    }
  }
}

// The pointwise panels of at most kInPlaceAMaxColumns columns (choose_gemm_path), each at
// least 8 wide, held here: a call allocates nothing. A last panel may reach a block past
// C's (past_last_block): its B panel packed with zero columns, its last block computed
// into the staged C' like the others (never copied to C), so the kernel stores it all.
struct PanelList {
  PointwisePanel panels[kInPlaceAMaxColumns / 8];
  int count;
  PanelList(const KernelInfo& ker, int64_t n)
      : count(pointwise_panels(ker, n, panels, kInPlaceAMaxColumns / 8, /*past_last_block=*/true)) {}
  const PointwisePanel* begin() const { return panels; }
  const PointwisePanel* end() const { return panels + count; }
  int64_t width() const { return count ? panels[count - 1].j + panels[count - 1].kernel->nr : 0; }
};

}  // namespace

bool gemm_in_place_a(const GemmProblem& p, const MatrixView& a, const KernelConfig& cfg, int threads) {
  const KernelInfo& ker = *cfg.kernel;
  const PanelList panels(ker, p.n);
  const int64_t width = panels.width(), m_pad = round_up(p.m, kInPlaceARowUnit);
  int64_t widest = 8;
  for (const PointwisePanel& q : panels) widest = std::max<int64_t>(widest, q.kernel->nr);
  const int64_t k_block = pointwise_k_block(ker, p.k, widest);
  const int64_t kc_max = std::min(k_block, p.k), mc = std::max(kInPlaceARowUnit, cfg.mc / kInPlaceARowUnit * kInPlaceARowUnit);
  threads = static_cast<int>(std::min<int64_t>(threads, ceil_div(p.m, kInPlaceARowUnit)));
  const int64_t b_floats = round_up(kc_max, 8) * width;  // blocks may round up to 8
  float* staged = scratch(ScratchSlot::Edge, width * m_pad);
  const ThreadParts b_blocks = thread_parts(ScratchSlot::PackedB, threads, b_floats);
  if (!staged || !b_blocks.parts)
    return workspace_unavailable("the in-place-A path's staged C and packed B", width * m_pad + threads * b_floats);
  parallel_parts(threads, [&](int tid, int nt) {
    const Range rows = share(ceil_div(p.m, kInPlaceARowUnit), tid, nt, kInPlaceARowUnit, p.m);
    float* b_block = b_blocks.part(tid);
    if (rows.begin < rows.end) {
      for_each_balanced_block(p.k, k_block, 8, [&](int64_t pc, int64_t kc) {
        for (const PointwisePanel& q : panels)
          p.b->pack_panel(pc, kc, q.j, std::min<int64_t>(q.kernel->nr, p.n - q.j), q.kernel->nr, b_block + q.j * kc);
        gk_pointwise_args args;
        args.full_blocks = kc / 8, args.tail_channels = kc % 8;
        args.x_block_stride = 8, args.x_row_stride = a.rs;
        args.y_block_stride = m_pad * 8;
        args.bias = nullptr, args.activation = 0, args.accumulate = pc > 0;
        for (int64_t r0 = rows.begin; r0 < rows.end; r0 += mc) {
          const int64_t r1 = std::min(rows.end, r0 + mc);
          for (const PointwisePanel& q : panels) {
            const int mr = q.kernel->mr;
            args.w = b_block + q.j * kc;
            args.x = a.p + r0 * a.rs + pc, args.y = staged + ((q.j / 8) * m_pad + r0) * 8;
            args.tiles = (r1 - r0) / mr;
            if (args.tiles > 0) q.kernel->fn(&args);
            const int64_t done = args.tiles * mr;
            if (done == r1 - r0) continue;
            // The last rows of C (a whole tile would read past A's last row): 4-row calls
            // where the kernel has them, then one-row calls; each call reads the B panel
            // again (22x20x2725 NN, 12 + 10 rows: 49 -> 40 us, OpenBLAS 47).
            const int64_t rest = r1 - r0 - done, fours = q.kernel->four_rows ? rest / 4 : 0;
            args.x += done * a.rs, args.y += done * 8;
            if (fours > 0) {
              args.tiles = fours;
              q.kernel->four_rows(&args);
              args.x += 4 * fours * a.rs, args.y += 4 * fours * 8;
            }
            args.tiles = rest - 4 * fours;
            if (args.tiles > 0) q.kernel->one_row(&args);
          }
        }
      });
      store_c(p, staged, m_pad, rows.begin, rows.end);
    }
  });
  return true;
}

}  // namespace gk
