// The no-pack path for small problems, where packing both operands would cost as much as
// the multiplication: B is read in place by the micro-kernel when its columns are
// contiguous (only a partial last panel is copied, zero-padded), A is packed one MR-row
// micro-panel at a time (MR x K floats, stays in L1), and there is no K blocking.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/runtime.h"
#include "gemm/gemm.h"

namespace gk {

// Up to about 96^3 multiply-adds everything fits in L2 and one thread is fastest
// (measured with perf/bench_gemm against the packed path).
bool prefers_small_path(int64_t m, int64_t n, int64_t k) {
  return static_cast<double>(m) * n * k <= 96.0 * 96 * 96 && k <= 1024;
}

void gemm_small(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                const KernelConfig& cfg) {
  const KernelInfo& ker = *cfg.kernel;
  const int mr = ker.mr;
  const std::vector<ColumnPanel> panels = column_panels(ker, p.n);
  // Panels read in place (B's columns contiguous, the panel whole), or copied: where the
  // copies go in the edge buffer (-1: in place).
  const bool b_in_place = b.cs == 1;
  std::vector<int64_t> packed_at(panels.size(), -1);
  int64_t packed_floats = 0;
  for (size_t q = 0; q < panels.size(); ++q)
    if (!b_in_place || panels[q].cols < panels[q].width) {
      packed_at[q] = packed_floats;
      packed_floats += p.k * panels[q].width;
    }
  float* b_packed = scratch(ScratchSlot::Edge, packed_floats);
  float* a_panel = scratch(ScratchSlot::PackedA, mr * p.k);
  if ((packed_floats && !b_packed) || !a_panel) {
    std::fprintf(stderr, "gemmkit: out of memory in the small-matrix path\n");
    std::abort();
  }
  const PlainA a_source(a);
  const PlainB b_source(b);
  for (size_t q = 0; q < panels.size(); ++q)
    if (packed_at[q] >= 0)
      b_source.pack_panel(0, p.k, panels[q].j, panels[q].cols, static_cast<int>(panels[q].width),
                          b_packed + packed_at[q]);

  for (int64_t i = 0; i < p.m; i += mr) {
    const int64_t rows = std::min<int64_t>(mr, p.m - i);
    const float* ap = a_source.panel(i, rows, 0, p.k, mr, a_panel);
    for (size_t q = 0; q < panels.size(); ++q) {
      const ColumnPanel& c = panels[q];
      const bool direct = packed_at[q] < 0;
      const float* bp = direct ? &b.at(0, c.j) : b_packed + packed_at[q];
      run_ukernel(ker, rows, c.cols, p.k, p.alpha, ap, bp, direct ? b.rs : c.width, p.beta,
                  p.c + i * p.rs_c + c.j, p.rs_c, &p.epilogue, i, c.j);
    }
  }
}

}  // namespace gk
