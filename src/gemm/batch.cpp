// gk_sgemm_batch_strided: many products of one shape, their operands a fixed stride apart
// (cuBLAS's and oneMKL's strided batch); gk_sgemm_batch: groups of products of one shape
// each, their operands in pointer arrays (cblas_sgemm_batch). Both run through run_batch.
// Products too small to use several threads
// (threads_for) run side by side, one per thread, each on its calling thread's paths (a
// call inside the region is one-threaded); larger ones run one after another on every
// thread. Against a loop of cblas_sgemm calls that saves the argument checks of each
// call, and on small products gives each thread whole products instead of idling it.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"
#include "gemmkit.h"

namespace gk {
namespace {

// Floats from a matrix's first element to one past its last (rows x cols, leading
// dimension ld, stored by rows when row_major), or 0 when it has none.
int64_t footprint(bool row_major, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  int64_t f = 0;  // INT64_MAX when it overflows: refused as past the address space
  if (__builtin_mul_overflow(row_major ? rows - 1 : cols - 1, ld, &f) ||
      __builtin_add_overflow(f, row_major ? cols : rows, &f))
    return INT64_MAX;
  return f;
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

// One product's shape and arguments (a strided batch's, or a group's), checked alike.
struct Shape {
  bool row_major;
  CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
};

// transa, transb, m, n, k and the leading dimensions; `where` names a group ("" or " (group 3)").
bool check_shape(const char* fn, const char* where, const Shape& x) {
  if (x.ta != CblasNoTrans && x.ta != CblasTrans && x.ta != CblasConjTrans) {
    set_last_error("%s: transa %d is not a CBLAS_TRANSPOSE%s", fn, int(x.ta), where);
    return false;
  }
  if (x.tb != CblasNoTrans && x.tb != CblasTrans && x.tb != CblasConjTrans) {
    set_last_error("%s: transb %d is not a CBLAS_TRANSPOSE%s", fn, int(x.tb), where);
    return false;
  }
  if (x.m < 0 || x.n < 0 || x.k < 0) {
    set_last_error("%s: m %" PRId64 ", n %" PRId64 " and k %" PRId64 " must be >= 0%s", fn, x.m, x.n, x.k, where);
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
      set_last_error("%s: %s %" PRId64 " is less than max(1, %" PRId64 ")%s", fn, l.name, l.ld, l.need, where);
      return false;
    }
  return true;
}

// Floats each of A, B and C spans (0 for none).
struct Footprints {
  int64_t a, b, c;
};
Footprints footprints(const Shape& x) {
  const bool a_n = x.ta == CblasNoTrans, b_n = x.tb == CblasNoTrans;
  return {footprint(x.row_major, a_n ? x.m : x.k, a_n ? x.k : x.m, x.lda),
          footprint(x.row_major, b_n ? x.k : x.n, b_n ? x.n : x.k, x.ldb), footprint(x.row_major, x.m, x.n, x.ldc)};
}

bool check_batch(const char* fn, const BatchArgs& x) {
  const Shape shape{x.row_major, x.ta, x.tb, x.m, x.n, x.k, x.lda, x.ldb, x.ldc};
  if (!check_shape(fn, "", shape)) return false;
  if (x.batch < 0) {
    set_last_error("%s: batch %" PRId64 " must be >= 0", fn, x.batch);
    return false;
  }
  if (x.stride_a < 0 || x.stride_b < 0 || x.stride_c < 0) {
    set_last_error("%s: the strides must be >= 0 (stride_a %" PRId64 ", stride_b %" PRId64 ", stride_c %" PRId64 ")",
                   fn, x.stride_a, x.stride_b, x.stride_c);
    return false;
  }
  if (x.batch == 0 || x.m == 0 || x.n == 0) return true;  // nothing is read or written
  const Footprints f = footprints(shape);
  if (x.batch > 1 && x.stride_c < f.c) {
    set_last_error("%s: stride_c %" PRId64 " makes the products' C matrices overlap (each spans %" PRId64
                   " floats)", fn, x.stride_c, f.c);
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
  return batch_extent_ok(fn, "c", x.batch, x.stride_c, f.c) &&
         (!reads_ab || (batch_extent_ok(fn, "a", x.batch, x.stride_a, f.a) &&
                        batch_extent_ok(fn, "b", x.batch, x.stride_b, f.b)));
}

// One product, as the row-stored problem the GEMM paths take (column-major: C^T = op(B)^T op(A)^T).
void run_product(const Shape& x, float alpha, const float* a, const float* b, float beta, float* c) {
  const bool a_n = x.ta == CblasNoTrans, b_n = x.tb == CblasNoTrans;
  if (x.row_major) {
    const MatrixView av = a_n ? MatrixView{a, x.lda, 1} : MatrixView{a, 1, x.lda};
    const MatrixView bv = b_n ? MatrixView{b, x.ldb, 1} : MatrixView{b, 1, x.ldb};
    sgemm_rowstored(x.m, x.n, x.k, alpha, av, bv, beta, c, x.ldc);
  } else {
    const MatrixView bt = b_n ? MatrixView{b, x.ldb, 1} : MatrixView{b, 1, x.ldb};
    const MatrixView at = a_n ? MatrixView{a, x.lda, 1} : MatrixView{a, 1, x.lda};
    sgemm_rowstored(x.n, x.m, x.k, alpha, bt, at, beta, c, x.ldc);
  }
}

// Product i of a strided batch.
void run_product(const BatchArgs& x, int64_t i) {
  run_product(Shape{x.row_major, x.ta, x.tb, x.m, x.n, x.k, x.lda, x.ldb, x.ldc}, x.alpha,
              x.a ? x.a + i * x.stride_a : nullptr, x.b ? x.b + i * x.stride_b : nullptr, x.beta,
              x.c + i * x.stride_c);
}

// Whether a product of `flops` is small: threads_for would give it one thread. Decided
// before the parallel region (inside it threads_for says 1 to everything): with more than
// one thread allowed, threads_for(f) is 1 exactly below 2 * kGemmFlopsPerExtraThread.
struct SmallRule {
  bool threaded = threads_for(1e300) > 1;
  bool operator()(double flops) const { return !threaded || flops < 2.0 * kGemmFlopsPerExtraThread; }
};

// Where a thread's walk over a grouped batch stands: group `group` starts at product
// `first`. Each thread claims ranges in increasing order, so its walk only moves forward.
struct Cursor {
  int64_t group = 0, first = 0;
};

// The batch's schedule: run_range(begin, end, small, cursor) runs the products of [begin,
// end) that are small (small == true) or the others. The small ones, `small_flops` in all,
// run side by side on their calling-thread paths, each thread claiming the next chunk of
// the batch as it finishes one: products of different groups differ in cost (a static
// split of 500 16^3 then 500 32^3 products gave one thread 8x the other's work), and on a
// shared machine a thread may be held up. Then the large ones one after another, each on
// every thread.
template <typename RunRange>
void run_batch(int64_t count, int64_t small_count, double small_flops, const RunRange& run_range) {
  if (small_count > 0) {
    const int side_by_side = static_cast<int>(std::min<int64_t>(small_count, threads_for(small_flops)));
    if (side_by_side <= 1) {
      Cursor cursor;
      run_range(0, count, true, cursor);
    } else {
      // About 8 chunks per thread, at most 16 products each (a claim is one atomic add).
      const int64_t chunk = std::clamp<int64_t>(count / (8 * side_by_side), 1, 16);
      std::atomic<int64_t> next{0};
      parallel_region(side_by_side, [&] {
        Cursor cursor;
        for (int64_t begin; (begin = next.fetch_add(chunk, std::memory_order_relaxed)) < count;)
          run_range(begin, std::min(count, begin + chunk), true, cursor);
      });
    }
  }
  if (small_count < count) {
    Cursor cursor;
    run_range(0, count, false, cursor);
  }
}

// The pointer-array batch's arguments.
struct GroupArgs {
  bool row_major;
  const CBLAS_TRANSPOSE *ta, *tb;
  const int64_t *m, *n, *k;
  const float* alpha;
  const float* const* a;
  const int64_t* lda;
  const float* const* b;
  const int64_t* ldb;
  const float* beta;
  float* const* c;
  const int64_t* ldc;
  int64_t group_count;
  const int64_t* group_size;
  Shape shape(int64_t g) const { return {row_major, ta[g], tb[g], m[g], n[g], k[g], lda[g], ldb[g], ldc[g]}; }
};

// f(g, i) for each product i of [begin, end) (flat, group after group), g its group; the
// walk starts at `cursor` when it is not past begin, and leaves it where it stopped.
template <typename F>
void for_each_product(const GroupArgs& x, int64_t begin, int64_t end, Cursor& cursor, const F& f) {
  if (cursor.first > begin) cursor = Cursor{};
  for (; cursor.group < x.group_count && cursor.first < end; ++cursor.group) {
    const int64_t last = cursor.first + x.group_size[cursor.group];
    for (int64_t i = std::max(begin, cursor.first); i < std::min(end, last); ++i) f(cursor.group, i);
    if (last > end) return;  // the next range may start inside this group
    cursor.first = last;
  }
}

// Largest float offset a matrix of `floats` reaches from its pointer, within 2^60.
bool extent_ok(const char* fn, const char* what, int64_t g, int64_t floats) {
  if (floats > (int64_t{1} << 60)) {
    set_last_error("%s: %s of group %" PRId64 " spans %" PRId64 " floats, past the address space", fn, what, g, floats);
    return false;
  }
  return true;
}

// Every argument, then every pointer, before anything runs; *total receives the products.
bool check_groups(const char* fn, const GroupArgs& x, int64_t* total) {
  *total = 0;
  if (x.group_count < 0) {
    set_last_error("%s: group_count %" PRId64 " must be >= 0", fn, x.group_count);
    return false;
  }
  if (x.group_count == 0) return true;
  struct Array {
    const char* name;
    const void* p;
  } const arrays[] = {{"group_size", x.group_size}, {"transa_array", x.ta}, {"transb_array", x.tb},
                      {"m_array", x.m},            {"n_array", x.n},      {"k_array", x.k},
                      {"alpha_array", x.alpha},    {"lda_array", x.lda},  {"ldb_array", x.ldb},
                      {"beta_array", x.beta},      {"ldc_array", x.ldc}};
  for (const Array& arr : arrays)
    if (!arr.p) {
      set_last_error("%s: %s is NULL", fn, arr.name);
      return false;
    }
  char where[48];
  for (int64_t g = 0; g < x.group_count; ++g) {
    std::snprintf(where, sizeof where, " (group %" PRId64 ")", g);
    if (x.group_size[g] < 0) {
      set_last_error("%s: group_size[%" PRId64 "] %" PRId64 " must be >= 0", fn, g, x.group_size[g]);
      return false;
    }
    if (__builtin_add_overflow(*total, x.group_size[g], total) || *total > (int64_t{1} << 48)) {
      set_last_error("%s: the group sizes add up past 2^48 products (at group %" PRId64 ")", fn, g);
      return false;
    }
    const Shape shape = x.shape(g);
    if (!check_shape(fn, where, shape)) return false;
    const Footprints f = footprints(shape);
    if (!extent_ok(fn, "a", g, f.a) || !extent_ok(fn, "b", g, f.b) || !extent_ok(fn, "c", g, f.c)) return false;
  }
  if (*total > 0 && (!x.a || !x.b || !x.c)) {
    set_last_error("%s: %s is NULL", fn, !x.a ? "a_array" : !x.b ? "b_array" : "c_array");
    return false;
  }
  bool ok = true;
  Cursor cursor;
  for_each_product(x, 0, *total, cursor, [&](int64_t g, int64_t i) {
    if (!ok || x.m[g] == 0 || x.n[g] == 0) return;
    const char* null = !x.c[i] ? "c" : (x.k[g] > 0 && x.alpha[g] != 0.0f && (!x.a[i] || !x.b[i])) ? (x.a[i] ? "b" : "a") : nullptr;
    if (null) {
      set_last_error("%s: %s_array[%" PRId64 "] (group %" PRId64 ") is NULL", fn, null, i, g);
      ok = false;
    }
  });
  return ok;
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
    const double flops = 2.0 * double(m) * double(n) * double(k);
    const bool small = gk::SmallRule()(flops);
    gk::run_batch(batch, small ? batch : 0, flops * double(batch), [&](int64_t begin, int64_t end, bool smalls, gk::Cursor&) {
      if (smalls == small)
        for (int64_t i = begin; i < end; ++i) gk::run_product(x, i);
    });
    return GK_OK;
  });
}

extern "C" __attribute__((visibility("default"))) gk_status gk_sgemm_batch(
    CBLAS_ORDER order, const CBLAS_TRANSPOSE* transa_array, const CBLAS_TRANSPOSE* transb_array,
    const int64_t* m_array, const int64_t* n_array, const int64_t* k_array, const float* alpha_array,
    const float* const* a_array, const int64_t* lda_array, const float* const* b_array, const int64_t* ldb_array,
    const float* beta_array, float* const* c_array, const int64_t* ldc_array, int64_t group_count,
    const int64_t* group_size) {
  const char* fn = "gk_sgemm_batch";
  return gk::guard_c_boundary(fn, [&] {
    if (order != CblasRowMajor && order != CblasColMajor) {
      gk::set_last_error("%s: order %d is not a CBLAS_ORDER", fn, int(order));
      return GK_ERR_INVALID_ARGUMENT;
    }
    const gk::GroupArgs x{order == CblasRowMajor, transa_array, transb_array, m_array, n_array, k_array,
                          alpha_array, a_array, lda_array, b_array, ldb_array, beta_array, c_array, ldc_array,
                          group_count, group_size};
    int64_t total = 0;
    if (!gk::check_groups(fn, x, &total)) return GK_ERR_INVALID_ARGUMENT;
    gk::clear_last_error();
    if (total == 0) return GK_OK;
    const gk::SmallRule small;
    int64_t small_count = 0;
    double small_flops = 0.0;
    for (int64_t g = 0; g < group_count; ++g) {
      const double flops = 2.0 * double(m_array[g]) * double(n_array[g]) * double(k_array[g]);
      if (small(flops)) small_count += group_size[g], small_flops += flops * double(group_size[g]);
    }
    gk::run_batch(total, small_count, small_flops, [&](int64_t begin, int64_t end, bool smalls, gk::Cursor& cursor) {
      gk::for_each_product(x, begin, end, cursor, [&](int64_t g, int64_t i) {
        if (small(2.0 * double(m_array[g]) * double(n_array[g]) * double(k_array[g])) == smalls)
          gk::run_product(x.shape(g), alpha_array[g], a_array[i], b_array[i], beta_array[g], c_array[i]);
      });
    });
    return GK_OK;
  });
}
