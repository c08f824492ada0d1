// The contract with the caller (DESIGN.md) on the GEMM side: no GEMM path ends the
// process when memory runs out (it computes the product on the no-heap path instead), no
// exception crosses the C boundary, a steady-state call allocates nothing, concurrent
// callers get the serial results, and the BLAS entry points pass Debian's reference BLAS
// testers. Every check that could crash runs in a child process (fork, run, waitpid): a
// signal there is a failure here, never the end of the suite. Checks that need a fresh
// process (2-thread OpenMP teams, a counting allocator, an address-space limit) run
// test/programs/reliability_child.cpp; the others run in a forked child of this binary,
// single-threaded (libgomp is not fork-safe).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "gemm/partition.h"
#include "gemm_test_util.h"
#include "programs/child_process.h"
#include "programs/reliability_cases.h"

extern char** environ;

namespace {

using reliability::Call;
using reliability::Shape;
using namespace child_process;

// ---------------------------------------------------------------- shapes and paths

reliability::ShapeRange shapes() { return reliability::shapes(gktest::quick()); }
std::vector<const char*> kernels() {
  if (gktest::quick()) return {nullptr};
  return {nullptr, "generic"};
}

// The row-stored problem the BLAS entry points hand sgemm_rowstored for a call (as
// src/gemm/blas.cpp: column-major runs C^T = op(B)^T op(A)^T; row-major is that for the
// swapped call).
struct Internal {
  gk::GemmProblem p;
  gk::MatrixView a, b;
};
Internal internal_problem(const Shape& s, const Call& c) {
  auto view = [](bool trans, int ld) { return trans ? gk::MatrixView{nullptr, 1, ld} : gk::MatrixView{nullptr, ld, 1}; };
  const int lda = reliability::stored_a(s, c).ld(c.row_major), ldb = reliability::stored_b(s, c).ld(c.row_major);
  Internal in;
  if (c.row_major) {
    in.p.m = s.m, in.p.n = s.n, in.a = view(c.ta, lda), in.b = view(c.tb, ldb);
  } else {
    in.p.m = s.n, in.p.n = s.m, in.a = view(c.tb, ldb), in.b = view(c.ta, lda);
  }
  in.p.k = s.k;
  in.p.rs_c = reliability::stored_c(s).ld(c.row_major);
  return in;
}

// One call with padded leading dimensions through cblas_sgemm (sgemm_ when `fortran`
// and column-major), against the double reference.
::testing::AssertionResult run_checked(const Shape& s, const Call& c, float alpha, float beta, int64_t extra_ld,
                                       bool fortran) {
  const bool rm = c.row_major;
  gktest::Operand a(c.ta ? s.k : s.m, c.ta ? s.m : s.k, extra_ld, rm, 11);
  gktest::Operand b(c.tb ? s.n : s.k, c.tb ? s.k : s.n, extra_ld, rm, 22);
  gktest::Operand cm(s.m, s.n, extra_ld, rm, 33);
  if (beta == 0.0f) cm.fill(gktest::kNaN);
  const gktest::Operand c0 = cm;
  if (fortran && !rm) {
    const char ta = c.ta ? 'T' : 'N', tb = c.tb ? 'T' : 'N';
    const int lda = int(a.ld), ldb = int(b.ld), ldc = int(cm.ld);
    sgemm_(&ta, &tb, &s.m, &s.n, &s.k, &alpha, a.data.data(), &lda, b.data.data(), &ldb, &beta, cm.data.data(),
           &ldc);
  } else {
    cblas_sgemm(rm ? CblasRowMajor : CblasColMajor, c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans,
                s.m, s.n, s.k, alpha, a.data.data(), int(a.ld), b.data.data(), int(b.ld), beta, cm.data.data(),
                int(cm.ld));
  }
  auto r = gktest::matches_reference(a, c.ta, b, c.tb, alpha, beta, c0, cm, s.k);
  if (!r)
    r << " [" << s.name << (rm ? " row-major " : " col-major ") << (c.ta ? 'T' : 'N') << (c.tb ? 'T' : 'N')
      << " kernel " << gk_kernel_name() << "]";
  return r;
}

std::string failure_text(const ::testing::AssertionResult& r) { return r ? "" : r.message(); }

}  // namespace

// The shapes the reliability checks run (test/programs/reliability_cases.h), over both
// layouts, all transposes, 1 and 2 threads and the kernels they use, take every GEMM path
// this CPU has: what they prove covers all of them.
TEST(ReliabilityCases, TheShapesTakeEveryPath) {
  std::set<gk::GemmPath> taken;
  bool tiny_possible = false, in_place_possible = false;
  for (const char* kernel : kernels()) {
    ASSERT_EQ(gk_set_kernel(kernel), GK_OK);
    const gk::KernelConfig& cfg = gk::active_config();
    tiny_possible |= cfg.paths.tiny_blocks;
    in_place_possible |= cfg.paths.in_place_a_kernels;
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (const Shape& s : shapes())
        for (const Call& c : reliability::kCalls) {
          ASSERT_TRUE(run_checked(s, c, 1.0f, 0.0f, 0, false));
          taken.insert(gk::last_gemm_path());
        }
    }
  }
  gk_set_kernel(nullptr);
  gk_set_num_threads(0);
  std::set<gk::GemmPath> expected{gk::GemmPath::GemvColumns, gk::GemmPath::GemvRows, gk::GemmPath::Small,
                                  gk::GemmPath::PackedPerPanel, gk::GemmPath::PackedSharedB};
  if (tiny_possible) expected.insert({gk::GemmPath::Tiny, gk::GemmPath::TinyNarrow, gk::GemmPath::Micro});
  if (in_place_possible) expected.insert(gk::GemmPath::InPlaceA);
  for (gk::GemmPath path : expected) EXPECT_TRUE(taken.count(path)) << "no shape takes the " << gk::path_name(path) << " path";
  EXPECT_FALSE(taken.count(gk::GemmPath::NoHeap)) << "a call fell back with memory to spare";
}

// GEMMKIT_VERBOSE=1 says, once per call shape, which path ran, on which kernel, blocking
// and threads, and why; past 64 shapes it says once that the rest are not shown.
TEST(ReliabilityVerbose, OneLinePerCallShapeRateLimited) {
  const ChildResult few = run_helper({"verbose", "3"}, {"GEMMKIT_VERBOSE=1"});
  ASSERT_EQ(child_failure(few), "");
  EXPECT_EQ(count_of(few.output, "gemmkit: sgemm "), 7) << few.output;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(count_of(few.output, "sgemm 8x" + std::to_string(8 + i) + "x8 (m x n x k, row-stored): path "), 1)
        << few.output;
  // A GEMV in axpy form (both of these) within gemv_axpy_threads_min_matrix_bytes runs on
  // one thread, as does one of 61 rows.
  const int64_t gemv_alone_bytes = gk::active_config().paths.gemv_axpy_threads_min_matrix_bytes;
  const bool small_gemv_alone = 300 * 300 * 4 <= gemv_alone_bytes, large_gemv_alone = 2048 * 1024 * 4 <= gemv_alone_bytes;
  EXPECT_EQ(count_of(few.output, ", 1 thread: "), 3 + small_gemv_alone + large_gemv_alone + 1) << few.output;
  const std::string kernel = std::string(", kernel ") + gk_kernel_name() + " ";
  EXPECT_EQ(count_of(few.output, kernel), 7) << few.output;
  EXPECT_EQ(count_of(few.output, "1x300x300 (m x n x k, row-stored): path gemv-rows"), 1) << few.output;
  EXPECT_EQ(count_of(few.output, "400x400x400 (m x n x k, row-stored, B transposed): path packed-"), 1) << few.output;
  EXPECT_EQ(count_of(few.output, "2 threads: M "), 1) << few.output;  // the reason follows
  EXPECT_EQ(count_of(few.output, "2 threads: one row of C"), 2 - small_gemv_alone - large_gemv_alone) << few.output;
  EXPECT_EQ(count_of(few.output, "61x1x2048 (m x n x k, row-stored, B transposed): path gemv-columns"), 1) << few.output;
  EXPECT_EQ(count_of(few.output, "1 thread: one column of C"), 1) << few.output;
  EXPECT_EQ(count_of(few.output, "further shapes not shown"), 0) << few.output;
  const ChildResult many = run_helper({"verbose", "70"}, {"GEMMKIT_VERBOSE=1"});
  ASSERT_EQ(child_failure(many), "");
  EXPECT_EQ(count_of(many.output, "gemmkit: sgemm "), 64) << many.output;
  EXPECT_EQ(count_of(many.output, "further shapes not shown"), 1) << many.output;
  const ChildResult quiet = run_helper({"verbose", "3"});
  ASSERT_EQ(child_failure(quiet), "");
  EXPECT_EQ(count_of(quiet.output, "gemmkit:"), 0) << quiet.output;
}

// The column panels, computed per call now rather than listed in a vector (a call
// allocates nothing), are the ones the list held: the widest kernel while more columns
// than it are left, but 16 rather than 24 with 25..32 left, then the narrowest that covers the rest.
TEST(ReliabilitySteadyState, ColumnPanelsAreTheOnesTheListHeld) {
  int count = 0;
  const gk::KernelInfo* table = gk::arch_kernels(&count);
  for (int t = 0; t < count; ++t) {
    const gk::KernelInfo& ker = table[t];
    std::vector<int64_t> widths{ker.nr};  // descending
    for (int q = 1; q >= 0; --q)
      if (ker.narrower[q].fn) widths.push_back(ker.narrower[q].nr);
    const bool has16 = std::find(widths.begin(), widths.end(), 16) != widths.end();
    for (int64_t n = 1; n <= 5 * ker.nr + 9; ++n) {
      std::vector<gk::ColumnPanel> listed;
      for (int64_t j = 0; j < n;) {
        const int64_t left = n - j;
        int64_t width = widths[0];
        if (left > width) {
          if (width == 24 && left <= 32 && has16) width = 16;
        } else {
          for (int64_t w : widths)
            if (w >= left) width = w;
        }
        listed.push_back({j, width, std::min(width, left)});
        j += width;
      }
      const gk::ColumnPanels computed(ker, n);
      ASSERT_EQ(computed.size(), int64_t(listed.size())) << ker.name << " n=" << n;
      for (size_t q = 0; q < listed.size(); ++q) {
        const gk::ColumnPanel c = computed[int64_t(q)];
        EXPECT_TRUE(c.j == listed[q].j && c.width == listed[q].width && c.cols == listed[q].cols)
            << ker.name << " n=" << n << " panel " << q << ": " << c.j << "/" << c.width << "/" << c.cols << " vs "
            << listed[q].j << "/" << listed[q].width << "/" << listed[q].cols;
      }
    }
  }
}

// Without any scratch memory every call runs on the no-heap path (a GEMV may need none):
// all shapes, layouts, transposes, alpha/beta (NaN in C for beta == 0), padded leading
// dimensions, through cblas_sgemm and sgemm_, each kernel; every result right.
TEST(ReliabilityNoHeap, EveryShapeLayoutAndTransposeWithoutScratch) {
  const ChildResult r = run_in_child([] {
    gk::release_scratch();
    gk::set_scratch_growth_limit(0);
    const float alphas[] = {1.0f, -1.5f}, betas[] = {0.0f, 0.5f};
    int turn = 0;
    for (const char* kernel : kernels()) {
      if (gk_set_kernel(kernel) != GK_OK) return std::string("cannot select kernel ") + kernel;
      for (const Shape& s : shapes())
        for (const Call& c : reliability::kCalls) {
          const int64_t before = gk::no_heap_fallbacks();
          const std::string wrong =
              failure_text(run_checked(s, c, alphas[turn % 2], betas[turn / 2 % 2], turn % 3 == 0 ? 3 : 0, turn % 4 == 1));
          ++turn;
          if (!wrong.empty()) return wrong;
          // Every path needs memory but the micro path, a GEMV (in some forms) and the tiny
          // paths on a B whose rows are contiguous.
          const Internal in = internal_problem(s, c);
          const gk::GemmPath path = gk::choose_gemm_path(in.p, in.a, in.b, gk::active_config()).path;
          const bool may_need_none = path == gk::GemmPath::Micro || path == gk::GemmPath::GemvColumns ||
                                     path == gk::GemmPath::GemvRows ||
                                     ((path == gk::GemmPath::Tiny || path == gk::GemmPath::TinyNarrow) && in.b.cs == 1);
          const int64_t fell_back = gk::no_heap_fallbacks() - before;
          const gk::GemmPath ran = gk::last_gemm_path();
          if (fell_back > 1 || (!may_need_none && (fell_back != 1 || ran != gk::GemmPath::NoHeap)) ||
              (may_need_none && ran != (fell_back ? gk::GemmPath::NoHeap : path)))
            return std::string(s.name) + " (" + gk::path_name(path) + ", ran " + gk::path_name(ran) +
                   "): " + std::to_string(fell_back) + " fallbacks";
        }
    }
    return std::string();
  });
  EXPECT_EQ(child_failure(r), "");
}

// Scratch limits from none to enough, each shape starting with no buffers: a path that
// gets some of its buffers and not others writes nothing before it falls back.
TEST(ReliabilityNoHeap, ScratchLimitsFromNoneToEnough) {
  const ChildResult r = run_in_child([] {
    int turn = 0;
    for (int64_t limit : {int64_t{0}, int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20,
                          int64_t{-1}})
      for (const Shape& s : shapes()) {
        gk::release_scratch();
        gk::set_scratch_growth_limit(limit);
        const Call& c = reliability::kCalls[turn++ % 8];
        const std::string wrong = failure_text(run_checked(s, c, 1.0f, 0.5f, 0, false));
        if (!wrong.empty()) return "scratch limit " + std::to_string(limit) + ": " + wrong;
      }
    gk::set_scratch_growth_limit(-1);
    return std::string();
  });
  EXPECT_EQ(child_failure(r), "");
}

// The driver's own fallback, as the convolutions use it: a pre-packed A, a per-row or
// per-column bias with ReLU, C plain or channel-blocked by 8 (NCHW8), each kernel.
TEST(ReliabilityNoHeap, DriverWithPackedAEpilogueAndBlockedC) {
  const ChildResult r = run_in_child([] {
    gk::release_scratch();
    gk::set_scratch_growth_limit(0);
    int count = 0;
    const gk::KernelInfo* table = gk::arch_kernels(&count);
    for (int t = 0; t < count; ++t) {
      const gk::KernelInfo& ker = table[t];
      if (!ker.cpu_supports()) continue;
      const gk::KernelConfig cfg = gk::derive_blocking(ker);
      const int64_t m = 3 * ker.mr + 5, n = 2 * ker.nr + 7, k = 700;  // partial tiles; K over several blocks
      std::vector<float> a = gktest::random_vector(size_t(m * k), 1), b = gktest::random_vector(size_t(k * n), 2);
      std::vector<float> bias = gktest::random_vector(size_t(std::max(m, n)), 3);
      const gk::PackedA packed(gk::MatrixView{a.data(), k, 1}, m, k, ker.mr);
      if (!packed.ok()) return std::string("PackedA: no memory");
      const gk::PlainB pb(gk::MatrixView{b.data(), n, 1});
      for (bool blocked : {false, true})
        for (gk::BiasMode mode : {gk::BiasMode::PerRow, gk::BiasMode::PerColumn}) {
          if (blocked && 8 % ker.mr != 0) continue;  // channel-blocked C needs MR | 8
          std::vector<float> c(size_t(gk::round_up(m, 8) * n), gktest::kNaN);  // blocked: whole blocks of 8 rows
          gk::GemmProblem p;
          p.m = m, p.n = n, p.k = k, p.alpha = 1.0f, p.beta = 0.0f, p.a = &packed, p.b = &pb, p.c = c.data();
          p.rs_c = blocked ? 0 : n, p.c_block_stride = blocked ? n * 8 : 0;
          p.epilogue.bias = bias.data(), p.epilogue.bias_mode = mode, p.epilogue.act = gk::Activation::Relu;
          const int64_t before = gk::no_heap_fallbacks();
          gk::gemm_packed(p, cfg, 1);
          if (gk::no_heap_fallbacks() != before + 1) return std::string("no fallback with kernel ") + ker.name;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double v = mode == gk::BiasMode::PerRow ? bias[size_t(i)] : bias[size_t(j)], mag = std::fabs(v);
              for (int64_t q = 0; q < k; ++q) {
                v += double(a[size_t(i * k + q)]) * b[size_t(q * n + j)];
                mag += std::fabs(double(a[size_t(i * k + q)]) * b[size_t(q * n + j)]);
              }
              const float got = blocked ? c[size_t((i / 8) * n * 8 + j * 8 + i % 8)] : c[size_t(i * n + j)];
              if (!(std::fabs(got - std::max(v, 0.0)) <= (k + 4) * double(FLT_EPSILON) * mag + 1e-30))
                return std::string("kernel ") + ker.name + (blocked ? " blocked C" : " plain C") + ": C(" +
                       std::to_string(i) + "," + std::to_string(j) + ") = " + std::to_string(got) + ", expected " +
                       std::to_string(std::max(v, 0.0));
            }
        }
    }
    gk::set_scratch_growth_limit(-1);
    return std::string();
  });
  EXPECT_EQ(child_failure(r), "");
}

// The one helper every extern "C" function runs its body through: an exception becomes
// a status and a message, never an unwind into C.
TEST(ReliabilityCBoundary, GuardTurnsExceptionsIntoStatuses) {
  EXPECT_EQ(gk::guard_c_boundary("f", [] { return GK_ERR_UNSUPPORTED; }), GK_ERR_UNSUPPORTED);
  EXPECT_EQ(gk::guard_c_boundary("f_oom", []() -> gk_status { throw std::bad_alloc(); }), GK_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(gk_last_error()).find("f_oom: out of memory"), std::string::npos) << gk_last_error();
  EXPECT_EQ(gk::guard_c_boundary("f_err", []() -> gk_status { throw std::runtime_error("broken"); }), GK_ERR_INTERNAL);
  EXPECT_NE(std::string(gk_last_error()).find("f_err: internal error: broken"), std::string::npos) << gk_last_error();
  EXPECT_EQ(gk::guard_c_boundary("f_int", []() -> gk_status { throw 42; }), GK_ERR_INTERNAL);
  gk::clear_last_error();
}

// The library's default cblas_xerbla prints the caller's parameter number for a
// row-major call (M as 4, lda as 9), as the reference's does, though it is handed the
// reference's numbers (5, 11).
TEST(ReliabilityCBoundary, DefaultCblasXerblaPrintsTheCallersNumbers) {
  const ChildResult r = run_helper({"xerbla"});
  ASSERT_EQ(child_failure(r), "");
  EXPECT_EQ(count_of(r.output, "Parameter 4 to routine cblas_sgemm was incorrect"), 1) << r.output;
  EXPECT_EQ(count_of(r.output, "Parameter 9 to routine cblas_sgemm was incorrect"), 1) << r.output;
}

// A steady-state call allocates nothing, on every path, 1 and 2 threads, a batch on 2
// threads and calls from each thread of a user's parallel region included: counted by an
// interposed malloc / calloc / realloc / posix_memalign / aligned_alloc / memalign /
// operator new in a program of its own (test/programs/counting_allocator.h; under
// AddressSanitizer it passes the allocations on to ASan's allocator).
TEST(ReliabilitySteadyState, NoAllocationPerCallOnEveryPath) {
  const ChildResult r = run_helper({"count"});
  if (child_failure(r, kSkipped).empty()) GTEST_SKIP() << r.output;
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

// A cold process's first calls (the configuration entry points, every path on 2 threads,
// sgemm_ too) with its n-th allocation failing, for every n up to the allocations such a
// run makes: never a crash, every result right. Allocations inside libcpuinfo fail too
// (it then reports the CPU unknown and the portable kernel runs).
TEST(ReliabilityAllocationFailure, EachAllocationOfAColdRunFailsInTurn) {
  const ChildResult normal = run_helper({"inject", "0"});
  if (child_failure(normal, kSkipped).empty()) GTEST_SKIP() << normal.output;
  ASSERT_EQ(child_failure(normal), "");
  const size_t at = normal.output.find("allocations=");
  ASSERT_NE(at, std::string::npos) << normal.output;
  const long allocations = std::atol(normal.output.c_str() + at + 12);
  ASSERT_GT(allocations, 0) << normal.output;
  int injected = 0;
  for (long n = 1; n <= allocations; ++n) {
    const ChildResult r = run_helper({"inject", std::to_string(n)}, {"GEMMKIT_VERBOSE=1"});
    EXPECT_EQ(child_failure(r), "") << "allocation " << n << " of " << allocations << " failing";
    injected += count_of(r.output, "injected=yes");
    EXPECT_LE(count_of(r.output, "no-heap path"), 1) << "said more than once:\n" << r.output;
  }
  EXPECT_EQ(injected, allocations) << "some runs never reached the allocation meant to fail";
  std::printf("%ld allocations of a cold run, each failed in turn: no crash, every result right\n", allocations);
}

// Every shape, and 2048^3, with the address space limited (RLIMIT_AS) to what the process
// maps plus a budget stepped down until the library's allocations fail, and then to
// nothing more at all: results right, never a signal, the fallback said once. 1 and 2
// threads (the OpenMP threads started before the limit).
TEST(ReliabilityAddressSpace, LimitsSteppedDownUntilAllocationsFail) {
  if (emulated()) GTEST_SKIP() << "qemu-user does not apply RLIMIT_AS to the emulated program";
  for (int threads : {1, 2}) {
    bool failed_over = false;
    for (long long budget = 1LL << 30;;) {
      const ChildResult r =
          run_helper({"rlimit", std::to_string(budget), std::to_string(threads)}, {"GEMMKIT_VERBOSE=1"});
      if (child_failure(r, kSkipped).empty()) GTEST_SKIP() << r.output;
      ASSERT_EQ(child_failure(r), "") << "budget " << budget << " bytes, " << threads << " threads";
      const int said = count_of(r.output, "no-heap path");
      EXPECT_LE(said, 1) << "said more than once:\n" << r.output;
      if (budget == 0) break;
      if (said && !failed_over) {
        failed_over = true;
        std::printf("%d thread(s): allocations fail with %lld bytes of address space left\n", threads, budget);
        budget = 0;  // then once with nothing left at all
      } else {
        budget /= 16;
      }
    }
    EXPECT_TRUE(failed_over) << threads << " threads: no allocation ever failed, so nothing was proved";
  }
}

// 8 user threads, each calling on every shape, layout and transpose pair with gk threads =
// 2 (oversubscribed on this machine), for GEMMKIT_TEST_SOAK_S seconds (default 3; the
// issue asks for 10 in long runs): every result equal to the serial one.
TEST(ReliabilityConcurrency, EightUserThreadsTwoGkThreadsEach) {
  const char* env = std::getenv("GEMMKIT_TEST_SOAK_S");
  const double seconds = env && std::atof(env) > 0 ? std::atof(env) : 3.0;
  const ChildResult r = run_helper({"soak", std::to_string(seconds)}, {}, static_cast<int>(seconds) + 600);
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

// ---------------------------------------------------------------- Debian's BLAS testers

namespace {

#if defined(__x86_64__)
const char kBlasDir[] = "/usr/lib/x86_64-linux-gnu/blas";
#elif defined(__aarch64__)
const char kBlasDir[] = "/usr/lib/aarch64-linux-gnu/blas";
#else
const char kBlasDir[] = "";
#endif

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The sanitizer runtime this binary runs with, which must come first in a preloaded
// program ("" when none).
std::string asan_runtime() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find('/');
    if (at != std::string::npos && line.find("libasan.so") != std::string::npos) return line.substr(at);
  }
  return "";
}

// Whether any of the dynamic linker's logs in `dir` (LD_DEBUG=bindings) records `binding`.
bool logged_binding(const std::string& dir, const std::string& binding) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, "ld.", 3) == 0) found |= read_file(dir + "/" + e->d_name).find(binding) != std::string::npos;
  closedir(d);
  return found;
}

void remove_directory(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) unlink((dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(dir.c_str());
}

// Runs one of Debian's testers (libblas-test) on its input with the library preloaded in
// front of the reference BLAS (the sanitizer runtime first, when this build has one), in
// a fresh directory, where it writes its reports. Returns the report named `report`, or
// "" with *why set.
std::string run_blas_tester(const std::string& tester, const std::string& input, const std::string& report,
                            const std::string& symbol, std::string* why) {
  const char* helpers = std::getenv("GEMMKIT_TEST_HELPERS");
  char lib[PATH_MAX];
  if (!realpath((std::string(helpers ? helpers : "build/test") + "/../lib/libgemmkit.so").c_str(), lib)) {
    *why = "no lib/libgemmkit.so beside the test programs";
    return "";
  }
  char work_template[] = "/tmp/gemmkit-blas-XXXXXX";
  if (!mkdtemp(work_template)) {
    *why = "mkdtemp failed";
    return "";
  }
  const std::string work = work_template, blas = kBlasDir, asan = asan_runtime();
  // The variables for the tester alone, not the shell.
  const std::string preload = asan.empty() ? std::string(lib) : asan + " " + lib;
  const ChildResult r = run_program({"/bin/sh", "-c",
                                     "cd " + work + " && LD_PRELOAD='" + preload + "' LD_LIBRARY_PATH=" + blas +
                                         " LD_DEBUG=bindings LD_DEBUG_OUTPUT=" + work + "/ld " + blas + "/" + tester +
                                         " < " + blas + "/" + input + " > stdout.txt 2>&1"},
                                    {"ASAN_OPTIONS=detect_leaks=0"}, 600);
  const std::string text = read_file(work + "/" + report), output = read_file(work + "/stdout.txt");
  // The dynamic linker's record that the tester's calls reached gemmkit.
  const bool reached = logged_binding(work, "to " + std::string(lib) + " [0]: normal symbol `" + symbol + "'");
  remove_directory(work);
  if (!child_failure(r).empty()) {
    *why = tester + ": " + child_failure(r) + output;
  } else if (!reached) {
    *why = tester + ": its " + symbol + " calls did not reach " + lib + " (LD_PRELOAD not in effect)";
  } else if (text.empty()) {
    *why = tester + " wrote no " + report + "; its output:\n" + output;
  } else {
    return text;
  }
  return "";
}

// No line of a tester's report says FAIL or flags an error ("*****"), each of `must_pass`
// is there (and printed), and the run reached its end.
void expect_report_passes(const std::string& report, const std::vector<std::string>& must_pass) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.find("FAIL"), std::string::npos) << line;
    EXPECT_EQ(line.find("*****"), std::string::npos) << line;
  }
  for (const std::string& want : must_pass) {
    EXPECT_NE(report.find(want), std::string::npos) << "missing \"" << want << "\" in:\n" << report;
    if (report.find(want) != std::string::npos) std::printf("  %s\n", want.c_str());
  }
  EXPECT_NE(report.find("END OF TESTS"), std::string::npos) << report;
}

bool blas_testers_apply(std::string* why) {
  if (emulated()) {
    *why = "emulated run (qemu): Debian's BLAS testers are host programs";
    return false;
  }
  if (!*kBlasDir || !file_exists(std::string(kBlasDir) + "/xscblat3")) {
    *why = "Debian's libblas-test is not installed (scripts/install-deps.sh test installs it)";
    return false;
  }
  return true;
}

}  // namespace

// Debian's netlib CBLAS tester, error exits on, both layouts: cblas_sgemm resolved to
// gemmkit, the other routines to the reference BLAS behind it.
TEST(ReliabilityNetlib, CblasLevel3TesterXscblat3) {
  std::string why;
  if (!blas_testers_apply(&why)) GTEST_SKIP() << why;
  const std::string report = run_blas_tester("xscblat3", "sin3", "stdout.txt", "cblas_sgemm", &why);
  ASSERT_FALSE(report.empty()) << why;
  expect_report_passes(report, {"cblas_sgemm  PASSED THE TESTS OF ERROR-EXITS",
                                "cblas_sgemm  PASSED THE COLUMN-MAJOR COMPUTATIONAL TESTS",
                                "cblas_sgemm  PASSED THE ROW-MAJOR    COMPUTATIONAL TESTS"});
}

// Debian's netlib Fortran BLAS tester, error exits on: sgemm_ resolved to gemmkit.
TEST(ReliabilityNetlib, FortranLevel3TesterXblat3s) {
  std::string why;
  if (!blas_testers_apply(&why)) GTEST_SKIP() << why;
  const std::string report = run_blas_tester("xblat3s", "sblat3.in", "sblat3.out", "sgemm_", &why);
  ASSERT_FALSE(report.empty()) << why;
  expect_report_passes(report, {"SGEMM  PASSED THE TESTS OF ERROR-EXITS", "SGEMM  PASSED THE COMPUTATIONAL TESTS"});
}
