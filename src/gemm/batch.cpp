// gk_sgemm_batch_strided: many products of one shape, their operands a fixed stride apart
// (cuBLAS's and oneMKL's strided batch). Products too small to use several threads
// (threads_for) run side by side, one per thread, each on its calling thread's paths (a
// call inside the region is one-threaded); larger ones run one after another on every
// thread. Against a loop of cblas_sgemm calls that saves the argument checks of each
// call, and on small products gives each thread whole products instead of idling it.
#include <omp.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemmkit.h"

namespace gk {
namespace {

// Floats from a matrix's first element to one past its last (rows x cols, leading
// dimension ld, stored by rows when row_major), or 0 when it has none.
int64_t footprint(bool row_major, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return row_major ? (rows - 1) * ld + cols : (cols - 1) * ld + rows;
}

// The largest float offset any product reaches in a strided operand, within 2^60 floats.
bool batch_extent_ok(const char* fn, const char* what, int64_t batch, int64_t stride, int64_t one) {
  int64_t last = 0;
  if (__builtin_mul_overflow(batch - 1, stride, &last) || __builtin_add_overflow(last, one, &last) ||
      last > (int64_t{1} << 60)) {
    set_last_error("%s: %s reaches past the address space (batch %" PRId64 ", stride %" PRId64 ")", fn, what,
                   batch, stride);
    return false;
  }
  return true;
}

struct BatchArgs {
  bool row_major;
  CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k;
  float alpha;
  const float* a;
  int64_t lda, stride_a;
  const float* b;
  int64_t ldb, stride_b;
  float beta;
  float* c;
  int64_t ldc, stride_c, batch;
};

bool check_batch(const char* fn, const BatchArgs& x) {
  if (x.ta != CblasNoTrans && x.ta != CblasTrans && x.ta != CblasConjTrans) {
    set_last_error("%s: transa %d is not a CBLAS_TRANSPOSE", fn, int(x.ta));
    return false;
  }
  if (x.tb != CblasNoTrans && x.tb != CblasTrans && x.tb != CblasConjTrans) {
    set_last_error("%s: transb %d is not a CBLAS_TRANSPOSE", fn, int(x.tb));
    return false;
  }
  if (x.m < 0 || x.n < 0 || x.k < 0 || x.batch < 0) {
    set_last_error("%s: m %" PRId64 ", n %" PRId64 ", k %" PRId64 " and batch %" PRId64 " must be >= 0", fn, x.m,
                   x.n, x.k, x.batch);
    return false;
  }
  // op(A) is m x k, op(B) k x n: the stored matrices' rows and columns in their order.
  const bool a_n = x.ta == CblasNoTrans, b_n = x.tb == CblasNoTrans;
  const int64_t a_rows = a_n ? x.m : x.k, a_cols = a_n ? x.k : x.m;
  const int64_t b_rows = b_n ? x.k : x.n, b_cols = b_n ? x.n : x.k;
  struct Ld {
    const char* name;
    int64_t ld, need;
  } const lds[] = {{"lda", x.lda, x.row_major ? a_cols : a_rows},
                   {"ldb", x.ldb, x.row_major ? b_cols : b_rows},
                   {"ldc", x.ldc, x.row_major ? x.n : x.m}};
  for (const Ld& l : lds)
    if (l.ld < std::max<int64_t>(1, l.need)) {
      set_last_error("%s: %s %" PRId64 " is less than max(1, %" PRId64 ")", fn, l.name, l.ld, l.need);
      return false;
    }
  if (x.stride_a < 0 || x.stride_b < 0 || x.stride_c < 0) {
    set_last_error("%s: the strides must be >= 0 (stride_a %" PRId64 ", stride_b %" PRId64 ", stride_c %" PRId64 ")",
                   fn, x.stride_a, x.stride_b, x.stride_c);
    return false;
  }
  if (x.batch == 0 || x.m == 0 || x.n == 0) return true;  // nothing is read or written
  const int64_t c_one = footprint(x.row_major, x.m, x.n, x.ldc);
  if (x.batch > 1 && x.stride_c < c_one) {
    set_last_error("%s: stride_c %" PRId64 " makes the products' C matrices overlap (each spans %" PRId64
                   " floats)", fn, x.stride_c, c_one);
    return false;
  }
  if (!x.c) {
    set_last_error("%s: c is NULL", fn);
    return false;
  }
  const bool reads_ab = x.k > 0 && x.alpha != 0.0f;
  if (reads_ab && (!x.a || !x.b)) {
    set_last_error("%s: %s is NULL", fn, x.a ? "b" : "a");
    return false;
  }
  return batch_extent_ok(fn, "c", x.batch, x.stride_c, c_one) &&
         (!reads_ab || (batch_extent_ok(fn, "a", x.batch, x.stride_a, footprint(x.row_major, a_rows, a_cols, x.lda)) &&
                        batch_extent_ok(fn, "b", x.batch, x.stride_b, footprint(x.row_major, b_rows, b_cols, x.ldb))));
}

// Product i, as the row-stored problem the GEMM paths take (column-major: C^T = op(B)^T op(A)^T).
void run_product(const BatchArgs& x, int64_t i) {
  const float* a = x.a ? x.a + i * x.stride_a : nullptr;
  const float* b = x.b ? x.b + i * x.stride_b : nullptr;
  float* c = x.c + i * x.stride_c;
  const bool a_n = x.ta == CblasNoTrans, b_n = x.tb == CblasNoTrans;
  if (x.row_major) {
    const MatrixView av = a_n ? MatrixView{a, x.lda, 1} : MatrixView{a, 1, x.lda};
    const MatrixView bv = b_n ? MatrixView{b, x.ldb, 1} : MatrixView{b, 1, x.ldb};
    sgemm_rowstored(x.m, x.n, x.k, x.alpha, av, bv, x.beta, c, x.ldc);
  } else {
    const MatrixView bt = b_n ? MatrixView{b, x.ldb, 1} : MatrixView{b, 1, x.ldb};
    const MatrixView at = a_n ? MatrixView{a, x.lda, 1} : MatrixView{a, 1, x.lda};
    sgemm_rowstored(x.n, x.m, x.k, x.alpha, bt, at, x.beta, c, x.ldc);
  }
}

}  // namespace
}  // namespace gk

extern "C" __attribute__((visibility("default"))) gk_status gk_sgemm_batch_strided(
    CBLAS_ORDER order, CBLAS_TRANSPOSE transa, CBLAS_TRANSPOSE transb, int64_t m, int64_t n, int64_t k, float alpha,
    const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
    int64_t ldc, int64_t stride_c, int64_t batch) {
  const char* fn = "gk_sgemm_batch_strided";
  return gk::guard_c_boundary(fn, [&] {
    if (order != CblasRowMajor && order != CblasColMajor) {
      gk::set_last_error("%s: order %d is not a CBLAS_ORDER", fn, int(order));
      return GK_ERR_INVALID_ARGUMENT;
    }
    const gk::BatchArgs x{order == CblasRowMajor, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb,
                          stride_b, beta, c, ldc, stride_c, batch};
    if (!gk::check_batch(fn, x)) return GK_ERR_INVALID_ARGUMENT;
    gk::clear_last_error();
    if (batch == 0 || m == 0 || n == 0) return GK_OK;
    const int per_product = gk::threads_for(2.0 * double(m) * double(n) * double(k));
    const int side_by_side =
        per_product > 1 ? 1 : static_cast<int>(std::min<int64_t>(batch, gk::threads_for(2.0 * m * n * k * batch)));
    if (side_by_side <= 1) {
      for (int64_t i = 0; i < batch; ++i) gk::run_product(x, i);
      return GK_OK;
    }
    gk::parallel_region(side_by_side, [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < batch; ++i) gk::run_product(x, i);
    });
    return GK_OK;
  });
}
