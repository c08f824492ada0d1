// The GEMM calls of the reliability tests, shared by test/test_reliability.cpp and the
// program it runs, test/programs/reliability_child.cpp. Over both layouts and all four
// transpose pairs, at 1 and 2 threads, with the automatic and the portable kernel, the
// shapes take every GEMM path the CPU has (ReliabilityCases.TheShapesTakeEveryPath checks
// it): GEMV (one and several vectors), tiny, small, in-place A, tiny narrow, packed.
#pragma once
#include <cstdint>

namespace reliability {

struct Shape {
  const char* name;
  int m, n, k;
};

// The path each is meant for, on x86-64 with AVX2 and the automatic kernel; the
// transposes and the other layout take others too (column-major swaps M and N inside).
constexpr Shape kShapes[] = {
    {"gemv-column", 1000, 1, 512},       // one vector
    {"gemv-row", 1, 1000, 512},          // one vector, the other side
    {"gemv-several", 1024, 4, 1024},     // several vectors against a matrix past L2
    {"tiny", 20, 20, 20},                // small: tiny (AVX2) or no-pack (other kernels)
    {"tiny-narrow", 2000, 20, 100},      // few columns, K too short for the in-place-A path
    {"in-place-a", 2000, 8, 64},         // few columns, A's rows read in place
    {"packed-per-panel", 100, 300, 300}, // all of M in one MC block
    {"packed-shared-b", 1100, 300, 64},  // M over MC: the shared B block
    {"micro", 7, 2, 7},                  // the smallest products: the micro path (AVX2, AVX-512)
};
// Emulated runs (GEMMKIT_TEST_QUICK): arm64 has neither the tiny nor the in-place-A path,
// and MC is 240 there when qemu reports no caches.
constexpr Shape kQuickShapes[] = {
    {"gemv-column", 300, 1, 200},
    {"gemv-row", 1, 300, 200},
    {"gemv-several", 512, 4, 512},
    {"small", 20, 20, 20},
    {"packed-per-panel", 60, 100, 100},
    {"packed-shared-b", 600, 60, 40},
    {"micro", 7, 2, 7},
};

// The shapes a run uses (`quick`: an emulated run).
struct ShapeRange {
  const Shape* first;
  const Shape* last;
  const Shape* begin() const { return first; }
  const Shape* end() const { return last; }
};
inline ShapeRange shapes(bool quick) {
  if (quick) return {kQuickShapes, kQuickShapes + sizeof kQuickShapes / sizeof kQuickShapes[0]};
  return {kShapes, kShapes + sizeof kShapes / sizeof kShapes[0]};
}

// One call's layout and transposes.
struct Call {
  bool row_major, ta, tb;
};
constexpr Call kCalls[] = {
    {false, false, false}, {false, false, true}, {false, true, false}, {false, true, true},
    {true, false, false},  {true, false, true},  {true, true, false},  {true, true, true},
};

// A stored matrix of `rows` x `cols` (op(A) is m x k, so A is k x m when transposed), and
// its tight leading dimension in the call's layout.
struct Stored {
  int rows, cols;
  int ld(bool row_major) const { return row_major ? (cols > 0 ? cols : 1) : (rows > 0 ? rows : 1); }
  int64_t floats(bool row_major) const {
    return int64_t{ld(row_major)} * (row_major ? (rows > 0 ? rows : 1) : (cols > 0 ? cols : 1));
  }
};
inline Stored stored_a(const Shape& s, const Call& c) { return c.ta ? Stored{s.k, s.m} : Stored{s.m, s.k}; }
inline Stored stored_b(const Shape& s, const Call& c) { return c.tb ? Stored{s.n, s.k} : Stored{s.k, s.n}; }
inline Stored stored_c(const Shape& s) { return Stored{s.m, s.n}; }

}  // namespace reliability
