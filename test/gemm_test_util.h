// Shared pieces of the GEMM tests: operands with padding sentinels, a double-precision
// reference, the error bound, and a way to run a test once per kernel this CPU supports.
#pragma once
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "arch/ukernel.h"
#include "gemm/gemm.h"
#include "gemmkit.h"

namespace gktest {

constexpr float kSentinel = 12345.0f;  // written outside the operands; must survive
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Emulated runs (qemu) set GEMMKIT_TEST_QUICK=1: fewer and smaller cases, same coverage
// of tiles, edges, layouts and transposes.
inline bool quick() {
  const char* s = std::getenv("GEMMKIT_TEST_QUICK");
  return s && *s && *s != '0';
}

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A dense matrix of `rows` x `cols` in row- or column-major order with leading dimension
// ld; the padding between rows/columns holds kSentinel.
struct Operand {
  int64_t rows, cols, ld;
  bool row_major;
  std::vector<float> data;

  Operand(int64_t r, int64_t c, int64_t extra_ld, bool rm, uint32_t seed)
      : rows(r), cols(c), row_major(rm) {
    const int64_t inner = rm ? c : r, outer = rm ? r : c;
    ld = std::max<int64_t>(1, inner) + extra_ld;
    data.assign(static_cast<size_t>(ld * std::max<int64_t>(outer, 1)), kSentinel);
    std::vector<float> v = random_vector(static_cast<size_t>(r * c), seed);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) at(i, j) = v[static_cast<size_t>(i * c + j)];
  }
  float& at(int64_t i, int64_t j) { return data[static_cast<size_t>(row_major ? i * ld + j : i + j * ld)]; }
  float at(int64_t i, int64_t j) const {
    return data[static_cast<size_t>(row_major ? i * ld + j : i + j * ld)];
  }
  bool is_padding(size_t idx) const {
    const int64_t inner = static_cast<int64_t>(idx) % ld;
    return inner >= (row_major ? cols : rows);
  }
  void fill(float v) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) at(i, j) = v;
  }
};

// op(X)(i, j) for an operand stored as given: `trans` swaps the indices.
inline double op_at(const Operand& x, bool trans, int64_t i, int64_t j) {
  return trans ? x.at(j, i) : x.at(i, j);
}

// Checks C against alpha*op(A)*op(B) + beta*C0 computed in double, with the forward error
// bound of a length-k dot product in float, (k + 4) * eps * (|alpha| sum|a||b| + |beta c0|);
// and checks that no padding element changed. `c0` is C before the call (NaN allowed when
// beta == 0, where it must not be read).
inline ::testing::AssertionResult matches_reference(const Operand& a, bool ta, const Operand& b,
                                                    bool tb, float alpha, float beta,
                                                    const Operand& c0, const Operand& c,
                                                    int64_t k) {
  const int64_t m = c.rows, n = c.cols;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0;
      if (alpha != 0.0f) {
        for (int64_t p = 0; p < k; ++p) {
          const double prod = op_at(a, ta, i, p) * op_at(b, tb, p, j);
          exact += prod;
          magnitude += std::fabs(prod);
        }
        exact *= alpha;
        magnitude *= std::fabs(alpha);
      }
      if (beta != 0.0f) {
        exact += static_cast<double>(beta) * c0.at(i, j);
        magnitude += std::fabs(static_cast<double>(beta) * c0.at(i, j));
      }
      const double got = c.at(i, j);
      const double bound = (k + 4) * static_cast<double>(FLT_EPSILON) * magnitude + 1e-30;
      if (!(std::fabs(got - exact) <= bound))
        return ::testing::AssertionFailure()
               << "C(" << i << "," << j << ") = " << got << ", expected " << exact
               << " (bound " << bound << ") for m=" << m << " n=" << n << " k=" << k
               << " alpha=" << alpha << " beta=" << beta;
    }
  }
  for (size_t idx = 0; idx < c.data.size(); ++idx)
    if (c.is_padding(idx) && c.data[idx] != kSentinel)
      return ::testing::AssertionFailure() << "padding of C written at index " << idx;
  return ::testing::AssertionSuccess();
}

// `count` floats that end where a PROT_NONE page begins: a read past them faults, in the
// assembly kernels too (which the sanitizers do not see). A kernel may read a tile's worth
// of extra pixels past a row; past the input it must not.
class GuardedFloats {
 public:
  explicit GuardedFloats(size_t count) : count_(count) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    bytes_ = (count * sizeof(float) + page - 1) / page * page + page;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      ADD_FAILURE() << "mmap of " << bytes_ << " bytes failed";
      base = nullptr;
      bytes_ = 0;
      return;
    }
    base_ = static_cast<char*>(base);
    EXPECT_EQ(mprotect(base_ + bytes_ - page, page, PROT_NONE), 0);
    data_ = reinterpret_cast<float*>(base_ + bytes_ - page) - count;
  }
  ~GuardedFloats() {
    if (base_) munmap(base_, bytes_);
  }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() { return data_; }
  size_t size() const { return count_; }

 private:
  size_t count_, bytes_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

// Runs `body` once with each kernel this CPU supports forced, then restores automatic
// selection.
inline void for_each_kernel(const std::function<void(const gk::KernelInfo&)>& body) {
  int count = 0;
  const gk::KernelInfo* table = gk::arch_kernels(&count);
  for (int i = 0; i < count; ++i) {
    if (!table[i].cpu_supports()) continue;
    SCOPED_TRACE(std::string("kernel ") + table[i].name);
    EXPECT_EQ(gk_set_kernel(table[i].name), GK_OK);
    body(table[i]);
  }
  EXPECT_EQ(gk_set_kernel(nullptr), GK_OK);
}

// The micro path off while in scope: the tests of the paths it precedes (tiny, GEMV) keep
// their small shapes on those paths.
struct WithoutMicroPath {
  WithoutMicroPath() { gk::set_micro_path(false); }
  ~WithoutMicroPath() { gk::set_micro_path(true); }
  WithoutMicroPath(const WithoutMicroPath&) = delete;
  WithoutMicroPath& operator=(const WithoutMicroPath&) = delete;
};

}  // namespace gktest
