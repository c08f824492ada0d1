// The no-pack path for small problems, where packing both operands would cost as much as
// the multiplication: B is read in place by the micro-kernel when its columns are
// contiguous (only a partial last panel is copied, zero-padded), A is packed one MR-row
// micro-panel at a time (MR x K floats, stays in L1), and there is no K blocking.
#include <algorithm>

#include "common/runtime.h"
#include "gemm/gemm.h"

namespace gk {

bool gemm_small(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                const KernelConfig& cfg) {
  const KernelInfo& ker = *cfg.kernel;
  const int mr = ker.mr;
  const ColumnPanels panels(ker, p.n);
  // Panels read in place (B's columns contiguous, the panel whole), or copied one after
  // another into the edge buffer.
  const bool b_in_place = b.cs == 1;
  auto copied = [&](const ColumnPanel& c) { return !b_in_place || c.cols < c.width; };
  int64_t packed_floats = 0;
  for (int64_t q = 0; q < panels.size(); ++q)
    if (copied(panels[q])) packed_floats += p.k * panels[q].width;
  float* b_packed = packed_floats ? scratch(ScratchSlot::Edge, packed_floats) : nullptr;
  float* a_panel = scratch(ScratchSlot::PackedA, mr * p.k);
  if ((packed_floats && !b_packed) || !a_panel) return workspace_unavailable("the small-matrix path", packed_floats + mr * p.k);
  const PlainA a_source(a);
  const PlainB b_source(b);
  int64_t at = 0;
  for (int64_t q = 0; q < panels.size(); ++q)
    if (const ColumnPanel c = panels[q]; copied(c)) {
      b_source.pack_panel(0, p.k, c.j, c.cols, static_cast<int>(c.width), b_packed + at);
      at += p.k * c.width;
    }

  for (int64_t i = 0; i < p.m; i += mr) {
    const int64_t rows = std::min<int64_t>(mr, p.m - i);
    const float* ap = a_source.panel(i, rows, 0, p.k, mr, a_panel);
    at = 0;  // the copied panels in the order they were copied
    for (int64_t q = 0; q < panels.size(); ++q) {
      const ColumnPanel c = panels[q];
      const bool direct = !copied(c);
      const float* bp = direct ? &b.at(0, c.j) : b_packed + at;
      if (!direct) at += p.k * c.width;
      run_ukernel(ker, rows, c.cols, p.k, p.alpha, ap, bp, direct ? b.rs : c.width, p.beta,
                  p.c + i * p.rs_c + c.j, p.rs_c, &p.epilogue, i, c.j);
    }
  }
  return true;
}

}  // namespace gk
