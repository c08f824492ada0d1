// The internal SGEMM on validated, row-stored arguments: reference-BLAS quick returns and
// alpha == 0 handling, then the GEMV, tiny, no-pack, in-place-A or packed path, or the
// no-heap path when the chosen one cannot have its buffers.
#include "common/runtime.h"
#include "gemm/gemm.h"

namespace gk {
namespace {

// The reference's quick returns: nothing to compute, or C = beta * C without reading A
// and B. True when the call is done.
bool quick_return(int64_t m, int64_t n, int64_t k, float alpha, float beta, float* c, int64_t rs_c) {
  if (m == 0 || n == 0) return true;
  if ((alpha == 0.0f || k == 0) && beta == 1.0f) return true;
  if (alpha == 0.0f || k == 0) {
    scale_c(beta, c, rs_c, m, n, Epilogue{});
    return true;
  }
  return false;
}

// Runs the chosen path; false when its buffers could not be had (nothing written).
bool run_path(const PathChoice& choice, const GemmProblem& p, const MatrixView& a, const MatrixView& b,
              const KernelConfig& cfg) {
  switch (choice.path) {
    case GemmPath::GemvColumns:
      return gemv(p.m, p.k, p.n, p.alpha, a, b, p.beta, p.c, p.rs_c, 1, choice.threads);
    case GemmPath::GemvRows:
      return gemv(p.n, p.k, p.m, p.alpha, b.transposed(), a.transposed(), p.beta, p.c, 1, p.rs_c, choice.threads);
    case GemmPath::Tiny:
    case GemmPath::TinyNarrow:
      return gemm_tiny(p.m, p.n, p.k, p.alpha, a, b, p.beta, p.c, p.rs_c, choice.threads, cfg.kernel->simd);
    case GemmPath::Small:
      return gemm_small(p, a, b, cfg);
    case GemmPath::InPlaceA:
      return gemm_in_place_a(p, a, cfg, choice.threads);
    case GemmPath::PackedPerPanel:
    case GemmPath::PackedSharedB:
      gemm_packed(p, cfg, choice.threads);  // falls back by itself (conv calls it directly)
      return true;
  }
  return false;
}

}  // namespace

PathChoice choose_path(const GemmProblem& p, const MatrixView& a, const MatrixView& b, const KernelConfig& cfg) {
  const int64_t m = p.m, n = p.n, k = p.k;
  // A matrix times one vector, or a few whose matrix has contiguous columns, is
  // memory-bound: the matrix is streamed once. A second core's share of L3 bandwidth pays
  // off from about 128K matrix elements (1000x512 runs 1.4x faster on 2 threads), 1/16 of
  // the GEMM threshold in flops.
  if (gemv_serves(m, k, a, n) && (n == 1 || m > n))  // C's columns: A times columns of B
    return {GemmPath::GemvColumns, threads_for(32.0 * m * k)};
  if (gemv_serves(n, k, b.transposed(), m))  // C's rows: B^T times rows of A
    return {GemmPath::GemvRows, threads_for(32.0 * n * k)};
  const int threads = threads_for(2.0 * m * n * k);
  if (threads == 1 && tiny_serves(cfg, m, n, k)) return {GemmPath::Tiny, 1};
  if (threads == 1 && prefers_small_path(m, n, k)) return {GemmPath::Small, 1};
  if (in_place_a_serves(cfg, p, a)) return {GemmPath::InPlaceA, threads};
  if (tiny_serves_narrow(cfg, n, k)) return {GemmPath::TinyNarrow, threads};
  return {packs_b_per_panel(p, cfg) ? GemmPath::PackedPerPanel : GemmPath::PackedSharedB, threads};
}

const char* path_name(GemmPath path) {
  switch (path) {
    case GemmPath::GemvColumns: return "gemv-columns";
    case GemmPath::GemvRows: return "gemv-rows";
    case GemmPath::Tiny: return "tiny";
    case GemmPath::Small: return "small";
    case GemmPath::InPlaceA: return "in-place-a";
    case GemmPath::TinyNarrow: return "tiny-narrow";
    case GemmPath::PackedPerPanel: return "packed-per-panel";
    case GemmPath::PackedSharedB: return "packed-shared-b";
  }
  return "unknown";
}

void sgemm_rowstored(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                     const MatrixView& b, float beta, float* c, int64_t rs_c) {
  if (quick_return(m, n, k, alpha, beta, c, rs_c)) return;
  const KernelConfig& cfg = active_config();
  const PlainA a_source(a);
  const PlainB b_source(b);
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
  p.a = &a_source, p.b = &b_source, p.c = c, p.rs_c = rs_c;
  if (!run_path(choose_path(p, a, b, cfg), p, a, b, cfg)) gemm_no_heap(p, cfg);
}

void sgemm_rowstored_no_heap(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                             const MatrixView& b, float beta, float* c, int64_t rs_c) {
  if (quick_return(m, n, k, alpha, beta, c, rs_c)) return;
  const PlainA a_source(a);
  const PlainB b_source(b);
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
  p.a = &a_source, p.b = &b_source, p.c = c, p.rs_c = rs_c;
  gemm_no_heap(p, active_config());
}

}  // namespace gk
