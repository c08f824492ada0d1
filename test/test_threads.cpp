// Threading: concurrent user threads, calls from inside a user's OpenMP region, and a
// forked child of a parent that already ran threaded calls (libgomp is not fork-safe).
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "common/runtime.h"
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
