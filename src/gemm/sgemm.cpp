// The internal SGEMM on validated, row-stored arguments: reference-BLAS quick returns and
// alpha == 0 handling, then the GEMV, tiny, no-pack, in-place-A or packed path, or the
// no-heap path when the chosen one cannot have its buffers.
#include <atomic>
#include <cstdio>

#include "common/runtime.h"
#include "gemm/gemm.h"

namespace gk {
namespace {

thread_local GemmPath t_last_path = GemmPath::QuickReturn;

// The reference's quick returns: nothing to compute, or C = beta * C without reading A
// and B. True when the call is done.
bool quick_return(int64_t m, int64_t n, int64_t k, float alpha, float beta, float* c, int64_t rs_c) {
  if (m != 0 && n != 0 && alpha != 0.0f && k != 0) return false;
  if (m != 0 && n != 0 && beta != 1.0f) scale_c(beta, c, rs_c, m, n, Epilogue{});
  t_last_path = GemmPath::QuickReturn;
  return true;
}

// Runs the chosen path; false when its buffers could not be had (nothing written).
bool run_path(const GemmPathChoice& choice, const GemmProblem& p, const MatrixView& a, const MatrixView& b,
              const KernelConfig& cfg) {
  switch (choice.path) {
    case GemmPath::Micro:
      return gemm_micro(cfg.paths, p.m, p.n, p.k, p.alpha, a, b, p.beta, p.c, p.rs_c);
    case GemmPath::GemvColumns:
      return gemv(p.m, p.k, p.n, p.alpha, a, b, p.beta, p.c, p.rs_c, 1, choice.threads, cfg);
    case GemmPath::GemvRows:
      return gemv(p.n, p.k, p.m, p.alpha, b.transposed(), a.transposed(), p.beta, p.c, 1, p.rs_c, choice.threads,
                  cfg);
    case GemmPath::Tiny:
    case GemmPath::TinyNarrow:
      return gemm_tiny(p.m, p.n, p.k, p.alpha, a, b, p.beta, p.c, p.rs_c, choice.threads, cfg.kernel->simd);
    case GemmPath::Small:
      return gemm_small(p, a, b, cfg);
    case GemmPath::InPlaceA:
      return gemm_in_place_a(p, a, cfg, choice.threads);
    case GemmPath::FewRowsBInPlace:
      return gemm_few_rows_b_in_place(p.m, p.n, p.k, p.alpha, a, b, p.beta, p.c, p.rs_c, Epilogue{});
    case GemmPath::PackedPerPanel:
    case GemmPath::PackedSharedB:
      gemm_packed(p, cfg, choice.threads);  // falls back by itself (conv calls it directly)
      return true;
    case GemmPath::NoHeap:
    case GemmPath::QuickReturn:
      break;
  }
  return false;
}

// GEMMKIT_VERBOSE=1: one line per call shape (the first kMaxShapesSaid shapes, then one
// line saying the rest are not shown). Lock-free and allocation-free: a shape is claimed by
// swapping its hash into a free slot.
constexpr int kMaxShapesSaid = 64;
std::atomic<uint64_t> g_shapes_said[kMaxShapesSaid];

bool first_time_said(uint64_t key) {
  for (std::atomic<uint64_t>& slot : g_shapes_said) {
    uint64_t seen = slot.load(std::memory_order_relaxed);
    if (seen == key) return false;
    if (seen == 0 && slot.compare_exchange_strong(seen, key)) return true;
    if (seen == key) return false;
  }
  static std::atomic<bool> overflow_said{false};
  if (!overflow_said.exchange(true))
    std::fprintf(stderr, "gemmkit: sgemm: more than %d call shapes; further shapes not shown\n", kMaxShapesSaid);
  return false;
}

void say_path(const GemmPathChoice& choice, GemmPath ran, const GemmProblem& p, const MatrixView& a,
              const MatrixView& b, const KernelConfig& cfg) {
  const bool ta = a.rs == 1 && a.cs != 1, tb = b.rs == 1 && b.cs != 1;  // stored transposed
  uint64_t key = 1469598103934665603ull;
  for (uint64_t v : {uint64_t(p.m), uint64_t(p.n), uint64_t(p.k), uint64_t(ta), uint64_t(tb),
                     uint64_t(choice.threads), uint64_t(ran)})
    key = (key ^ v) * 1099511628211ull;
  if (!first_time_said(key | 1)) return;
  const KernelInfo& ker = *cfg.kernel;
  std::fprintf(stderr,
               "gemmkit: sgemm %lldx%lldx%lld (m x n x k, row-stored%s%s): path %s, kernel %s %dx%d, "
               "mc %lld kc %lld nc %lld, %d thread%s: %s%s\n",
               (long long)p.m, (long long)p.n, (long long)p.k, ta ? ", A transposed" : "", tb ? ", B transposed" : "",
               path_name(ran), ker.name, ker.mr, ker.nr, (long long)cfg.mc, (long long)cfg.kc, (long long)cfg.nc,
               choice.threads, choice.threads == 1 ? "" : "s", choice.reason,
               ran == choice.path ? "" : " (its buffers could not be had)");
}

}  // namespace

GemmPath last_gemm_path() { return t_last_path; }

void sgemm_rowstored(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                     const MatrixView& b, float beta, float* c, int64_t rs_c) {
  if (quick_return(m, n, k, alpha, beta, c, rs_c)) return;
  const KernelConfig& cfg = active_config();
  // The smallest products before the general set-up below, which costs more than their
  // multiply-adds (choose_gemm_path's first rule: gemm_micro runs where micro_serves).
  if (gemm_micro(cfg.paths, m, n, k, alpha, a, b, beta, c, rs_c)) {
    t_last_path = GemmPath::Micro;
    if (verbose()) {
      GemmProblem p;
      p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta, p.c = c, p.rs_c = rs_c;
      say_path(choose_gemm_path(p, a, b, cfg), GemmPath::Micro, p, a, b, cfg);
    }
    return;
  }
  const PlainA a_source(a);
  const PlainB b_source(b);
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
  p.a = &a_source, p.b = &b_source, p.c = c, p.rs_c = rs_c;
  const GemmPathChoice choice = choose_gemm_path_past_micro(p, a, b, cfg);
  // The packed paths run the no-heap path themselves when their buffers cannot be had
  // (conv calls them directly): the thread's count of fallbacks tells. The others return
  // false, so the count (thread-local, a call into the TLS resolver) is read only there.
  const bool falls_back_inside = choice.path == GemmPath::PackedPerPanel || choice.path == GemmPath::PackedSharedB;
  const int64_t fallbacks = falls_back_inside ? thread_no_heap_fallbacks() : 0;
  bool ran = run_path(choice, p, a, b, cfg);
  if (!ran) {
    gemm_no_heap(p, cfg);
  } else if (falls_back_inside && thread_no_heap_fallbacks() != fallbacks) {
    ran = false;
  }
  t_last_path = ran ? choice.path : GemmPath::NoHeap;
  if (verbose()) say_path(choice, t_last_path, p, a, b, cfg);
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
  t_last_path = GemmPath::NoHeap;
}

}  // namespace gk
