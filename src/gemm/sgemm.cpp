// The internal SGEMM on validated, row-stored arguments: reference-BLAS quick returns and
// alpha == 0 handling, then the GEMV, tiny, no-pack, in-place-A or packed path.
#include "common/runtime.h"
#include "gemm/gemm.h"

namespace gk {

void sgemm_rowstored(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                     const MatrixView& b, float beta, float* c, int64_t rs_c) {
  if (m == 0 || n == 0) return;
  if ((alpha == 0.0f || k == 0) && beta == 1.0f) return;
  if (alpha == 0.0f || k == 0) {  // C = beta * C; A and B are not read
    scale_c(beta, c, rs_c, m, n, Epilogue{});
    return;
  }
  const double flops = 2.0 * m * n * k;
  // A matrix times one vector, or a few whose matrix has contiguous columns, is
  // memory-bound: the matrix is streamed once. A second core's share of L3 bandwidth pays
  // off from about 128K matrix elements (1000x512 runs 1.4x faster on 2 threads), 1/16 of
  // the GEMM threshold in flops.
  if (gemv_serves(m, k, a, n) && (n == 1 || m > n)) {  // C's columns: A times columns of B
    gemv(m, k, n, alpha, a, b, beta, c, rs_c, 1, threads_for(32.0 * m * k));
    return;
  }
  if (gemv_serves(n, k, b.transposed(), m)) {  // C's rows: B^T times rows of A
    gemv(n, k, m, alpha, b.transposed(), a.transposed(), beta, c, 1, rs_c, threads_for(32.0 * n * k));
    return;
  }
  const KernelConfig& cfg = active_config();
  const PlainA a_source(a);
  const PlainB b_source(b);
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
  p.a = &a_source, p.b = &b_source, p.c = c, p.rs_c = rs_c;
  const int threads = threads_for(flops);
  if (threads == 1 && tiny_serves(cfg, m, n, k)) {
    gemm_tiny(m, n, k, alpha, a, b, beta, c, rs_c, 1);
  } else if (threads == 1 && prefers_small_path(m, n, k)) {
    gemm_small(p, a, b, cfg);
  } else if (in_place_a_serves(cfg, p, a)) {
    gemm_in_place_a(p, a, cfg, threads);
  } else if (tiny_serves_narrow(cfg, n, k)) {
    gemm_tiny(m, n, k, alpha, a, b, beta, c, rs_c, threads);
  } else {
    gemm_packed(p, cfg, threads);
  }
}

}  // namespace gk
