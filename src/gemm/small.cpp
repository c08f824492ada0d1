// The no-pack path for small problems, where packing both operands would cost as much as
// the multiplication: B is read in place by the micro-kernel when its columns are
// contiguous (only a partial last panel is copied, zero-padded), A is packed one MR-row
// micro-panel at a time (MR x K floats, stays in L1), and there is no K blocking.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
  const int mr = ker.mr, nr = ker.nr;
  const int64_t full_panels = p.n / nr, panels = (p.n + nr - 1) / nr;
  const bool b_in_place = b.cs == 1;
  // Panels that must be copied: all of them, or only the partial last one.
  const int64_t first_packed = b_in_place ? full_panels : 0;
  const int64_t packed_floats = (panels - first_packed) * p.k * nr;
  float* b_packed = scratch(ScratchSlot::Edge, packed_floats);
  float* a_panel = scratch(ScratchSlot::PackedA, mr * p.k);
  if ((packed_floats && !b_packed) || !a_panel) {
    std::fprintf(stderr, "gemmkit: out of memory in the small-matrix path\n");
    std::abort();
  }
  const PlainA a_source(a);
  const PlainB b_source(b);
  for (int64_t q = first_packed; q < panels; ++q)
    b_source.pack_panel(0, p.k, q * nr, std::min<int64_t>(nr, p.n - q * nr), nr,
                        b_packed + (q - first_packed) * p.k * nr);

  for (int64_t i = 0; i < p.m; i += mr) {
    const int64_t rows = std::min<int64_t>(mr, p.m - i);
    const float* ap = a_source.panel(i, rows, 0, p.k, mr, a_panel);
    for (int64_t q = 0; q < panels; ++q) {
      const int64_t j = q * nr, cols = std::min<int64_t>(nr, p.n - j);
      const bool direct = q < first_packed;
      const float* bp = direct ? &b.at(0, j) : b_packed + (q - first_packed) * p.k * nr;
      run_ukernel(ker, rows, cols, p.k, p.alpha, ap, bp, direct ? b.rs : nr, p.beta,
                  p.c + i * p.rs_c + j, p.rs_c, &p.epilogue, i, j);
    }
  }
}

}  // namespace gk
