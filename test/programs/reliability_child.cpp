// The reliability checks that need a process of their own (test/test_reliability.cpp runs
// this program, linked against the shared libgemmkit, one mode per run): a fresh process
// starts real 2-thread OpenMP teams (a forked child of the test binary runs serially),
// and its allocator can be counted and made to fail.
//
//   count              after one warm-up call of each shape, the next allocates nothing
//   inject N           N = 0: a cold run, printing how many allocations it made; N > 0:
//                      the same run with the N-th allocation failing
//   rlimit BYTES T     every shape (and 2048^3) on T threads with RLIMIT_AS at the
//                      address space in use plus BYTES
//   soak SECONDS       8 user threads calling at once, each result equal to the serial one
//   xerbla             the default cblas_xerbla's message for a row-major call
//   verbose N          N distinct shapes, each called three times (run with GEMMKIT_VERBOSE=1:
//                      the test reads the lines it prints)
//
// Exit 0: passed; 1: failed (the reason printed); 77: skipped (the reason printed).
// Every product is checked against double-precision products with random vectors
// (Freivalds), to the forward error bound of a float GEMM.
#include <omp.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit.h"
#include "reliability_cases.h"

using reliability::Call;
using reliability::Shape;

// ---------------------------------------------------------------- the allocator

// Every allocation of the process (the library's, libstdc++'s and libgomp's) is counted
// there, and the n-th can fail.
#include "counting_allocator.h"

long allocation_calls() { return counting_allocator::calls(); }
void fail_allocation_number(long n) { counting_allocator::fail_number(n); }
bool injected_failure_happened() { return counting_allocator::injected_failure_happened(); }

// ---------------------------------------------------------------- operands and checks

namespace {

bool quick() {
  const char* s = std::getenv("GEMMKIT_TEST_QUICK");
  return s && *s && *s != '0';
}

reliability::ShapeRange shapes() { return reliability::shapes(quick()); }

// The kernels to run: the automatic one, and the portable one (the no-pack path on x86).
std::vector<const char*> kernels() {
  if (quick()) return {nullptr};
  return {nullptr, "generic"};
}

uint32_t g_seed = 12345;
float random_float() {  // [-1, 1)
  g_seed = g_seed * 1664525u + 1013904223u;
  return static_cast<float>(g_seed >> 8) / 8388608.0f - 1.0f;
}

// One call's operands, C0 as C was before it.
struct Operands {
  Shape s;
  Call c;
  float alpha = 1.5f, beta = 0.0f;
  std::vector<float> a, b, cm, c0;
  Operands(const Shape& shape, const Call& call, float beta_value) : s(shape), c(call), beta(beta_value) {
    a.resize(size_t(reliability::stored_a(s, c).floats(c.row_major)));
    b.resize(size_t(reliability::stored_b(s, c).floats(c.row_major)));
    c0.resize(size_t(reliability::stored_c(s).floats(c.row_major)));
    for (float& v : a) v = random_float();
    for (float& v : b) v = random_float();
    for (float& v : c0) v = beta == 0.0f ? NAN : random_float();  // beta == 0 must not read C
    cm = c0;
  }
  void reset_c() { std::copy(c0.begin(), c0.end(), cm.begin()); }  // no allocation
  int lda() const { return reliability::stored_a(s, c).ld(c.row_major); }
  int ldb() const { return reliability::stored_b(s, c).ld(c.row_major); }
  int ldc() const { return reliability::stored_c(s).ld(c.row_major); }
  // Stored element (r, col) of a matrix with leading dimension ld.
  float at(const std::vector<float>& x, int ld, int r, int col) const {
    return x[size_t(c.row_major ? int64_t(r) * ld + col : r + int64_t(col) * ld)];
  }
  double op_a(int i, int p) const { return c.ta ? at(a, lda(), p, i) : at(a, lda(), i, p); }
  double op_b(int p, int j) const { return c.tb ? at(b, ldb(), j, p) : at(b, ldb(), p, j); }
  std::string describe() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %dx%dx%d %s %c%c threads=%d kernel=%s", s.name, s.m, s.n, s.k,
                  c.row_major ? "row-major" : "col-major", c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', gk_get_num_threads(),
                  gk_kernel_name());
    return buf;
  }
};

// cblas_sgemm, or sgemm_ (column-major only) when `fortran`.
void multiply(Operands& o, bool fortran = false) {
  if (fortran && !o.c.row_major) {
    const char ta = o.c.ta ? 'T' : 'N', tb = o.c.tb ? 'T' : 'N';
    const int m = o.s.m, n = o.s.n, k = o.s.k, lda = o.lda(), ldb = o.ldb(), ldc = o.ldc();
    sgemm_(&ta, &tb, &m, &n, &k, &o.alpha, o.a.data(), &lda, o.b.data(), &ldb, &o.beta, o.cm.data(), &ldc);
    return;
  }
  cblas_sgemm(o.c.row_major ? CblasRowMajor : CblasColMajor, o.c.ta ? CblasTrans : CblasNoTrans,
              o.c.tb ? CblasTrans : CblasNoTrans, o.s.m, o.s.n, o.s.k, o.alpha, o.a.data(), o.lda(), o.b.data(),
              o.ldb(), o.beta, o.cm.data(), o.ldc());
}

// C x against alpha A (B x) + beta C0 x for two random sign vectors x, each row within
// the sum over its elements of the float forward error bound (k + 4) eps (|alpha| |A||B| +
// |beta C0|). "" when correct, else what is wrong.
std::string check_product(const Operands& o) {
  const Shape& s = o.s;
  std::vector<double> x(size_t(s.n)), bx(size_t(s.k)), bx_abs(size_t(s.k));
  for (int trial = 0; trial < 2; ++trial) {
    for (double& v : x) v = random_float() < 0 ? -1.0 : 1.0;
    for (int p = 0; p < s.k; ++p) {
      double sum = 0, abs_sum = 0;
      for (int j = 0; j < s.n; ++j) {
        sum += o.op_b(p, j) * x[size_t(j)];
        abs_sum += std::fabs(o.op_b(p, j));
      }
      bx[size_t(p)] = sum, bx_abs[size_t(p)] = abs_sum;
    }
    for (int i = 0; i < s.m; ++i) {
      double exact = 0, magnitude = 0, got = 0;
      for (int p = 0; p < s.k; ++p) {
        exact += o.op_a(i, p) * bx[size_t(p)];
        magnitude += std::fabs(o.op_a(i, p)) * bx_abs[size_t(p)];
      }
      exact *= o.alpha, magnitude *= std::fabs(o.alpha);
      for (int j = 0; j < s.n; ++j) {
        got += double(o.at(o.cm, o.ldc(), i, j)) * x[size_t(j)];
        if (o.beta != 0.0f) {
          exact += double(o.beta) * o.at(o.c0, o.ldc(), i, j) * x[size_t(j)];
          magnitude += std::fabs(double(o.beta) * o.at(o.c0, o.ldc(), i, j));
        }
      }
      const double bound = (s.k + 4) * double(FLT_EPSILON) * magnitude + 1e-30;
      if (!(std::fabs(got - exact) <= bound)) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "row %d: (C x) = %g, expected %g (bound %g)", i, got, exact, bound);
        return buf;
      }
    }
  }
  return "";
}

// Starts the OpenMP worker pool (thread stacks, team) before anything is counted, failed
// or limited: libgomp itself exits when it cannot allocate its team.
void warm_openmp(int threads) {
  if (threads < 2) return;
  std::atomic<int> seen{0};
#pragma omp parallel num_threads(threads)
  seen += 1;
  if (seen.load() != threads) std::printf("note: OpenMP started %d threads of %d\n", seen.load(), threads);
}

int fail(const std::string& why) {
  std::printf("FAILED: %s\n", why.c_str());
  return 1;
}

int skip(const char* why) {
  std::printf("skip: %s\n", why);
  return 77;
}

// ---------------------------------------------------------------- count

// A 64-byte aligned buffer, allocated before anything is counted.
struct PackBuffer {
  void* p = nullptr;
  int64_t bytes = 0;
  explicit PackBuffer(int64_t n) : bytes(n) {
    if (n <= 0 || posix_memalign(&p, 64, size_t(n)) != 0) p = nullptr;
  }
  ~PackBuffer() { std::free(p); }
};

// The inference-side entry points on every shape, layout and transpose pair: gk_sgemm_compute
// with A packed and with B packed (checked), gk_sgemm_ex with an epilogue and gk_sgemm_batch
// (counted), a warm-up call of each before the counted one. "" when none allocates.
std::string count_inference_api(int* calls) {
  for (const char* kernel : kernels()) {
    if (gk_set_kernel(kernel) != GK_OK) continue;
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (const Shape& s : shapes())
        for (const Call& c : reliability::kCalls) {
          Operands o(s, c, 0.5f);
          const CBLAS_ORDER order = c.row_major ? CblasRowMajor : CblasColMajor;
          const CBLAS_TRANSPOSE ta = c.ta ? CblasTrans : CblasNoTrans, tb = c.tb ? CblasTrans : CblasNoTrans;
          PackBuffer pa(gk_sgemm_pack_get_size(GK_PACK_A, s.m, s.n, s.k));
          PackBuffer pb(gk_sgemm_pack_get_size(GK_PACK_B, s.m, s.n, s.k));
          if (!pa.p || !pb.p) return "no packed buffer for " + o.describe();
          if (gk_sgemm_pack(order, GK_PACK_A, ta, s.m, s.n, s.k, o.alpha, o.a.data(), o.lda(), pa.p, pa.bytes) != GK_OK ||
              gk_sgemm_pack(order, GK_PACK_B, tb, s.m, s.n, s.k, o.alpha, o.b.data(), o.ldb(), pb.p, pb.bytes) != GK_OK)
            return std::string("gk_sgemm_pack: ") + gk_last_error();
          std::vector<float> bias(size_t(std::max(s.m, s.n)), 0.25f);
          const gk_epilogue e{bias.data(), GK_BIAS_PER_ROW, GK_ACT_RELU};
          const CBLAS_TRANSPOSE tas[] = {ta}, tbs[] = {tb};
          const int64_t ms[] = {s.m}, ns[] = {s.n}, ks[] = {s.k}, ldas[] = {o.lda()}, ldbs[] = {o.ldb()},
                        ldcs[] = {o.ldc()}, sizes[] = {2};
          const float alphas[] = {o.alpha}, betas[] = {0.5f};
          const float* as[] = {o.a.data(), o.a.data()};
          const float* bs[] = {o.b.data(), o.b.data()};
          std::vector<float> c2 = o.c0;
          float* cs[] = {o.cm.data(), c2.data()};
          const std::function<gk_status()> variants[] = {
              [&] {
                return gk_sgemm_compute(order, GK_PACKED, tb, s.m, s.n, s.k, pa.p, 0, o.b.data(), o.ldb(), o.beta,
                                        o.cm.data(), o.ldc(), nullptr);
              },
              [&] {
                return gk_sgemm_compute(order, ta, GK_PACKED, s.m, s.n, s.k, o.a.data(), o.lda(), pb.p, 0, o.beta,
                                        o.cm.data(), o.ldc(), nullptr);
              },
              [&] {
                return gk_sgemm_ex(order, ta, tb, s.m, s.n, s.k, o.alpha, o.a.data(), o.lda(), o.b.data(), o.ldb(),
                                   o.beta, o.cm.data(), o.ldc(), &e);
              },
              [&] {
                return gk_sgemm_batch(order, tas, tbs, ms, ns, ks, alphas, as, ldas, bs, ldbs, betas, cs, ldcs, 1,
                                      sizes);
              }};
          // The batch's two products run side by side in its own team at 2 threads: the
          // paths they take there (GEMV too) open no nested team, which libgomp would
          // allocate each time.
          for (int v = 0; v < 4; ++v) {
            o.reset_c();
            if (variants[v]() != GK_OK) return std::string("call failed: ") + gk_last_error();  // warm-up
            o.reset_c();
            const long before = allocation_calls();
            const gk_status st = variants[v]();
            const long made = allocation_calls() - before;
            ++*calls;
            if (st != GK_OK) return std::string("call failed: ") + gk_last_error();
            if (made != 0) return std::to_string(made) + " allocations in variant " + std::to_string(v) + ", " + o.describe();
            if (v < 2) {
              const std::string wrong = check_product(o);
              if (!wrong.empty()) return "variant " + std::to_string(v) + ", " + o.describe() + ": " + wrong;
            }
          }
        }
    }
  }
  gk_set_kernel(nullptr);
  return "";
}

// cblas_sgemm called by each thread of a user's 2-thread parallel region at once, on every
// kernel, shape, layout and transpose pair (the library runs each call on its calling
// thread): a warm-up region, then one counted. A path that opened a nested one-thread team
// there would have libgomp allocate it each time. "" when none allocates.
std::string count_in_user_region(int* calls) {
  gk_set_num_threads(2);
  for (const char* kernel : kernels()) {
    if (gk_set_kernel(kernel) != GK_OK) continue;
    for (const Shape& s : shapes())
      for (const Call& c : reliability::kCalls) {
        Operands mine[2] = {Operands(s, c, 0.5f), Operands(s, c, 0.5f)};
        for (int round = 0; round < 2; ++round) {
          for (Operands& o : mine) o.reset_c();
          const long before = allocation_calls();
#pragma omp parallel num_threads(2)
          multiply(mine[omp_get_thread_num() % 2]);
          const long made = allocation_calls() - before;
          if (round == 0) continue;  // warm-up: each thread's scratch grows here
          *calls += 2;
          if (made != 0) return std::to_string(made) + " allocations in a user's region, " + mine[0].describe();
          for (Operands& o : mine)
            if (const std::string wrong = check_product(o); !wrong.empty()) return o.describe() + ": " + wrong;
        }
      }
  }
  gk_set_kernel(nullptr);
  return "";
}

// Zero allocations per steady-state call: for every kernel, thread count, shape, layout
// and transpose pair, a warm-up call and then one counted.
int mode_count() {
  warm_openmp(2);
  int calls = 0;
  for (const char* kernel : kernels()) {
    if (gk_set_kernel(kernel) != GK_OK) continue;
    for (int threads : {1, 2}) {
      gk_set_num_threads(threads);
      for (const Shape& s : shapes())
        for (const Call& c : reliability::kCalls) {
          Operands o(s, c, 0.5f);
          multiply(o);  // warm-up: scratch buffers grow here
          o.reset_c();
          const long before = allocation_calls();
          multiply(o);
          const long made = allocation_calls() - before;
          ++calls;
          if (made != 0) return fail(std::to_string(made) + " allocations in " + o.describe());
          const std::string wrong = check_product(o);
          if (!wrong.empty()) return fail(o.describe() + ": " + wrong);
        }
    }
  }
  gk_set_kernel(nullptr);
  // Before the batches: it also grows the scratch of each of the pool's threads, which
  // products a batch's thread claims being a matter of timing.
  const std::string user_region = count_in_user_region(&calls);
  if (!user_region.empty()) return fail(user_region);
  const std::string inference = count_inference_api(&calls);
  if (!inference.empty()) return fail(inference);
  std::printf("ok: %d steady-state calls, no allocation\n", calls);
  return 0;
}

// ---------------------------------------------------------------- inject

// A cold process's first calls: the configuration entry points, then one call per shape
// (layouts and transposes by turns, sgemm_ for some), on 2 threads, then the portable
// kernel's path. Returns the operands to check.
void cold_sequence(std::vector<Operands>& calls) {
  gk_set_num_threads(2);
  (void)gk_config_string();
  (void)gk_kernel_name();
  int turn = 0;
  for (Operands& o : calls) {
    if (turn == static_cast<int>(calls.size()) - 1) gk_set_kernel("generic");
    multiply(o, turn % 3 == 1);
    ++turn;
  }
  gk_set_kernel(nullptr);
  (void)gk_get_num_threads();
}

int mode_inject(long fail_at) {
  warm_openmp(2);
  std::vector<Operands> calls;
  int turn = 0;
  for (const Shape& s : shapes()) {
    calls.emplace_back(s, reliability::kCalls[(3 * turn) % 8], turn % 2 ? 0.0f : 0.5f);
    ++turn;
  }
  calls.emplace_back(shapes().begin()[3], reliability::kCalls[0], 0.5f);  // the small shape, portable kernel
  const long before = allocation_calls();
  fail_allocation_number(fail_at ? before + fail_at : 0);
  cold_sequence(calls);
  fail_allocation_number(0);
  const long made = allocation_calls() - before;
  for (const Operands& o : calls) {
    const std::string wrong = check_product(o);
    if (!wrong.empty()) return fail(o.describe() + ": " + wrong);
  }
  std::printf("ok: allocations=%ld injected=%s\n", made, injected_failure_happened() ? "yes" : "no");
  return 0;
}

// ---------------------------------------------------------------- rlimit


// Touches 1 MiB of stack, so that the main thread's stack mapping has grown before the
// limit is set (growing it under the limit would be a SIGSEGV, whatever the code).
__attribute__((noinline)) void grow_stack() {
  volatile char buf[1 << 20];
  for (size_t i = 0; i < sizeof buf; i += 4096) buf[i] = 0;
}

int mode_rlimit(long long budget, int threads) {
#if defined(__SANITIZE_ADDRESS__)
  (void)budget, (void)threads;
  return skip("built with AddressSanitizer, whose shadow memory takes terabytes of address space");
#else
  gk_set_num_threads(threads);
  warm_openmp(threads);
  (void)gk_config_string();  // the CPU description and kernel table, once
  std::vector<Operands> calls;
  int turn = 0;
  for (const Shape& s : shapes()) {
    calls.emplace_back(s, reliability::kCalls[(5 * turn) % 8], 0.0f);
    ++turn;
  }
  const int big = quick() ? 384 : 2048;
  calls.emplace_back(Shape{"big", big, big, big}, reliability::kCalls[turn % 8], 0.5f);
  grow_stack();
  struct rlimit old_limit;
  getrlimit(RLIMIT_AS, &old_limit);
  struct rlimit limit = old_limit;
  limit.rlim_cur = static_cast<rlim_t>(mapped_bytes() + budget);
  if (setrlimit(RLIMIT_AS, &limit) != 0) return fail("setrlimit: " + std::string(std::strerror(errno)));
  for (Operands& o : calls) multiply(o);
  setrlimit(RLIMIT_AS, &old_limit);
  for (const Operands& o : calls) {
    const std::string wrong = check_product(o);
    if (!wrong.empty()) return fail(o.describe() + ": " + wrong);
  }
  std::printf("ok: %zu calls within %lld bytes more address space\n", calls.size(), budget);
  return 0;
#endif
}

// ---------------------------------------------------------------- soak

// 8 user threads on gk threads = 2 (16 threads on this machine's 2 cores), each calling on
// every shape, layout and transpose pair in its own order until `seconds` have passed;
// every result must equal, bit for bit, the same call's result run alone (the paths'
// sums do not depend on the thread schedule).
int mode_soak(double seconds) {
  gk_set_num_threads(2);
  std::vector<Operands> serial;
  for (const Shape& s : shapes())
    for (const Call& c : reliability::kCalls) serial.emplace_back(s, c, 0.5f);
  for (Operands& o : serial) multiply(o);  // one at a time: the expected results
  for (const Operands& o : serial) {
    const std::string wrong = check_product(o);
    if (!wrong.empty()) return fail("serial " + o.describe() + ": " + wrong);
  }
  constexpr int kUserThreads = 8;
  std::atomic<long> done{0}, mismatches{0};
  std::vector<std::string> first_mismatch(kUserThreads);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> users;
  for (int t = 0; t < kUserThreads; ++t)
    users.emplace_back([&, t] {
      std::vector<Operands> mine = serial;  // own C buffers
      const size_t count = mine.size();
      for (size_t step = 0; step == 0 || std::chrono::steady_clock::now() < deadline; ++step) {
        Operands& o = mine[(step * (2 * t + 1) + size_t(t) * 7) % count];  // a different order per thread
        o.reset_c();
        multiply(o);
        const Operands& want = serial[size_t(&o - mine.data())];
        if (std::memcmp(o.cm.data(), want.cm.data(), o.cm.size() * sizeof(float)) != 0) {
          if (mismatches++ == 0) first_mismatch[size_t(t)] = o.describe();
        }
        ++done;
      }
    });
  for (std::thread& u : users) u.join();
  for (const std::string& m : first_mismatch)
    if (!m.empty()) return fail(std::to_string(mismatches.load()) + " results differ from the serial run, first: " + m);
  std::printf("ok: %ld concurrent calls from %d user threads in %.1f s, all equal to the serial results\n", done.load(),
              kUserThreads, seconds);
  return 0;
}

// ---------------------------------------------------------------- xerbla

// The library's own cblas_xerbla (this program defines none) prints the caller's number
// for a row-major call, as the reference's does, though it is passed the swapped call's.
int mode_xerbla() {
  float a[4] = {0}, b[4] = {0}, c[4] = {0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2);
  std::fflush(stderr);
  std::printf("ok\n");
  return 0;
}

// Shapes 8 x (8 + i) x 8 for i < n, three calls each, one thread, then with two threads
// allowed a 1 x 300 x 300 GEMV, a 400^3 product, a 1 x 2048 x 1024 GEMV and a 61 x 1 x 2048
// one.
int mode_verbose(int n) {
  std::vector<float> a(400 * 400, 1.0f), b(2048 * 1024, 1.0f), c(400 * 400, 0.0f);
  gk_set_num_threads(1);
  for (int i = 0; i < n; ++i)
    for (int repeat = 0; repeat < 3; ++repeat)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 8, 8 + i, 8, 1.0f, a.data(), 8, b.data(), 8 + i, 0.0f,
                  c.data(), 8 + i);
  gk_set_num_threads(2);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 300, 300, 1.0f, a.data(), 300, b.data(), 300, 0.0f,
              c.data(), 300);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 400, 400, 400, 1.0f, a.data(), 400, b.data(), 400, 0.0f,
              c.data(), 400);
  // GEMVs: an 8 MiB matrix (threaded), and 61 rows (one row unit: one thread).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 2048, 1024, 1.0f, a.data(), 1024, b.data(), 2048, 0.0f,
              c.data(), 2048);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 61, 1, 2048, 1.0f, b.data(), 2048, a.data(), 2048, 0.0f,
              c.data(), 1);
  std::fflush(stderr);
  std::printf("ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "count") return mode_count();
  if (mode == "inject" && argc > 2) return mode_inject(std::atol(argv[2]));
  if (mode == "rlimit" && argc > 3) return mode_rlimit(std::atoll(argv[2]), std::atoi(argv[3]));
  if (mode == "soak" && argc > 2) return mode_soak(std::atof(argv[2]));
  if (mode == "xerbla") return mode_xerbla();
  if (mode == "verbose" && argc > 2) return mode_verbose(std::atoi(argv[2]));
  std::fprintf(stderr, "usage: %s count | inject N | rlimit BYTES THREADS | soak SECONDS | xerbla | verbose N\n",
               argv[0]);
  return 2;
}
