// Threading: concurrent user threads, calls from inside a user's OpenMP region, and a
// forked child of a parent that already ran threaded calls (libgomp is not fork-safe).
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"
#include "gemm_test_util.h"

namespace {

// One square NN column-major product checked against the reference; returns success.
bool square_product_is_correct(int n, uint32_t seed) {
  gktest::Operand a(n, n, 0, false, seed), b(n, n, 0, false, seed + 1), c(n, n, 0, false, 0);
  c.fill(gktest::kNaN);
  const gktest::Operand c0 = c;
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data.data(), n,
              b.data.data(), n, 0.0f, c.data.data(), n);
  return bool(gktest::matches_reference(a, false, b, false, 1.0f, 0.0f, c0, c, n));
}

}  // namespace

TEST(Threads, SeveralUserThreadsAtOnce) {
  gk_set_num_threads(2);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &ok] {
      bool all = true;
      for (int rep = 0; rep < 3; ++rep) all = all && square_product_is_correct(96 + 37 * t, 10 * t + rep);
      ok[t] = all;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[t]) << "user thread " << t;
  gk_set_num_threads(0);
}

// gk_set_num_threads_local: the calling thread's calls only, over the process setting
// both ways, returning the previous local setting; n < 1 returns to the process's.
TEST(Threads, LocalSettingCountsForTheCallingThreadOnly) {
  gk_set_num_threads(3);
  EXPECT_EQ(gk_set_num_threads_local(1), 0);
  EXPECT_EQ(gk_get_num_threads(), 1);
  EXPECT_EQ(gk::threads_for(1e12), 1);
  int other_threads = 0, other_split = 0;
  std::thread([&] { other_threads = gk_get_num_threads(), other_split = gk::threads_for(1e12); }).join();
  EXPECT_EQ(other_threads, 3);
  EXPECT_EQ(other_split, 3);
  gk_set_num_threads(4);  // the process setting moves; the local one holds
  EXPECT_EQ(gk_get_num_threads(), 1);
  EXPECT_EQ(gk_set_num_threads_local(2), 1);
  EXPECT_EQ(gk::threads_for(1e12), 2);
  EXPECT_TRUE(square_product_is_correct(300, 9));
  int local_in_new_thread = -1;
  std::thread([&] { local_in_new_thread = gk_set_num_threads_local(0); }).join();
  EXPECT_EQ(local_in_new_thread, 0) << "a new thread starts on the process setting";
  EXPECT_EQ(gk_set_num_threads_local(-5), 2);
  EXPECT_EQ(gk_get_num_threads(), 4);
  gk_set_num_threads(1);  // a local setting above the process's
  EXPECT_EQ(gk_set_num_threads_local(2), 0);
  EXPECT_EQ(gk_get_num_threads(), 2);
  EXPECT_EQ(gk::threads_for(1e12), 2);
  EXPECT_EQ(gk_set_num_threads_local(0), 2);
  EXPECT_EQ(gk::threads_for(1e12), 1);
  gk_set_num_threads(0);
}

TEST(Threads, InsideUserParallelRegionRunsSingleThreaded) {
  gk_set_num_threads(2);
  int ok = 0, nested_threads = 0;
#pragma omp parallel num_threads(2) reduction(+ : ok, nested_threads)
  {
    // No oversubscription: a call in a parallel region uses the calling thread only.
    nested_threads += gk::threads_for(1e12);
    ok += square_product_is_correct(200, 77 + omp_get_thread_num());
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(nested_threads, 2);
  gk_set_num_threads(0);
}

TEST(Threads, ForkedChildOfThreadedParentStaysCorrect) {
  gk_set_num_threads(2);
  ASSERT_TRUE(square_product_is_correct(300, 5));  // parent opens a 2-thread region
  ASSERT_GT(gk::threads_for(2.0 * 300 * 300 * 300), 1);
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // a hang (libgomp's dead pool) ends the child with SIGALRM
    const bool ok = square_product_is_correct(300, 6) && gk_get_num_threads() == 1;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(square_product_is_correct(300, 7));  // parent unaffected
  gk_set_num_threads(0);
}

// More threads than this machine has cores (4, 8 and 16: the thread grids a larger server
// gets): every threaded path, both layouts, against the reference: the packed driver with
// M past MC, its B block shared or one per thread (private_b_max_bytes), and per panel,
// in-place A, tiny-narrow and GEMV; sizes large enough that every thread gets work
// (threads_for), with tails in every dimension.
TEST(Threads, ManyThreadsOnEveryThreadedPath) {
  const gk::KernelConfig& cfg = gk::active_config();
  const int64_t mr = cfg.kernel->mr, nr = cfg.kernel->nr;
  // B columns whose KC x N block is within private_b_max_bytes, and past it; whether this
  // configuration has each kind of block (NC caps a block's columns).
  const int64_t private_columns = cfg.paths.private_b_max_bytes / (4 * cfg.kc);
  const bool has_private = private_columns >= 2 * nr, has_shared = private_columns < cfg.nc;
  struct Shape {
    int64_t m, n, k;
    bool ta, tb;
  };
  const Shape shapes[] = {
      {2 * cfg.mc + 3 * mr + 1, std::max(5 * nr, private_columns + nr) + 3, cfg.kc + 17, true, false},  // packed, shared B block
      {2 * cfg.mc + mr + 5, std::max(nr, private_columns / nr * nr - nr) + 3, cfg.kc + 17, true, false},  // a B block per thread
      {cfg.mc + mr + 1, std::max(nr, private_columns / nr * nr - nr) + 3, cfg.kc + 17, true, true},  // with few row tiles (x86-64: the panels split too)
      {3 * mr + 1, 40 * nr + 5, 301, true, false},                          // packed per panel
      {997, 49, 1153, false, false},                                        // in-place A (where it serves)
      {4001, 19, 333, true, true},                                          // tiny-narrow on x86-64
      {3001, 1, 2003, false, false},                                        // GEMV
  };
  std::set<gk::GemmPath> ran;
  std::set<bool> private_b;  // the packed driver's B blocks: one per thread, shared
  for (int threads : {4, 8, 16}) {
    gk_set_num_threads(threads);
    for (const Shape& s : shapes)
      for (bool row_major : {true, false}) {
        gktest::Operand a(s.ta ? s.k : s.m, s.ta ? s.m : s.k, 3, row_major, 11);
        gktest::Operand b(s.tb ? s.n : s.k, s.tb ? s.k : s.n, 0, row_major, 12);
        gktest::Operand c(s.m, s.n, 1, row_major, 13);
        const gktest::Operand c0 = c;
        cblas_sgemm(row_major ? CblasRowMajor : CblasColMajor, s.ta ? CblasTrans : CblasNoTrans,
                    s.tb ? CblasTrans : CblasNoTrans, int(s.m), int(s.n), int(s.k), -1.5f, a.data.data(), int(a.ld),
                    b.data.data(), int(b.ld), 0.5f, c.data.data(), int(c.ld));
        EXPECT_TRUE(gktest::matches_reference(a, s.ta, b, s.tb, -1.5f, 0.5f, c0, c, s.k))
            << threads << " threads, " << s.m << "x" << s.n << "x" << s.k << (row_major ? " row-major" : " col-major")
            << ", ran " << gk::path_name(gk::last_gemm_path());
        ran.insert(gk::last_gemm_path());
        if (row_major && gk::last_gemm_path() == gk::GemmPath::PackedSharedB)
          private_b.insert(gk::packing_sizes(s.m, s.n, s.k, false, cfg).private_b);
      }
  }
  gk_set_num_threads(0);
  for (gk::GemmPath path : {gk::GemmPath::PackedSharedB, gk::GemmPath::PackedPerPanel, gk::GemmPath::GemvColumns})
    EXPECT_TRUE(ran.count(path)) << gk::path_name(path) << " never ran";
  if (has_private) {
    EXPECT_TRUE(private_b.count(true)) << "no B block packed per thread";
  }
  if (has_shared) {
    EXPECT_TRUE(private_b.count(false)) << "no shared B block";
  }
}

// The thread grid takes the most row ways within 1/32 of the least tiles per thread any
// grid gives: with ties or near-ties it keeps rows.
TEST(Threads, GridPrefersRowsUnlessColumnsSaveMoreThanAThirtySecond) {
  const auto grid = [](int threads, int64_t rows, int64_t cols) {
    const gk::ThreadGrid g = gk::choose_grid(threads, rows, cols);
    EXPECT_EQ(g.wm * g.wn, threads);
    return g.wm;
  };
  EXPECT_EQ(grid(2, 137, 8), 2);   // 1911x249 on 14x32 tiles: 552 against 548 tiles
  EXPECT_EQ(grid(2, 211, 2), 2);   // 2947x40: 212 against 211
  EXPECT_EQ(grid(2, 10, 4), 2);    // a tie
  EXPECT_EQ(grid(2, 19, 8), 1);    // 256x256: 80 against 76, over 1/32
  EXPECT_EQ(grid(2, 1, 8), 1);     // one row of tiles
  EXPECT_EQ(grid(4, 3, 64), 1);    // three rows of tiles, four threads: 64, 64 against 48
  EXPECT_EQ(grid(4, 33, 19), 2);   // 171, 170, 165: 2 x 2 is within 1/32 of the least
  EXPECT_EQ(grid(4, 64, 64), 4);
  EXPECT_EQ(grid(1, 5, 5), 1);
}
