// How work is cut into blocks and shared between threads: used by the GEMM driver and by
// the convolution algorithms that run their own loops over micro-kernel calls (Winograd).
#pragma once
#include <algorithm>
#include <cstdint>

namespace gk {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Calls f(start, length) over [0, total) in blocks of at most `block`. A remainder
// between block and 2*block becomes two near-equal blocks (rounded up to `align`), so
// no call sees a sliver: a K of 1.1*KC runs as 2 x 0.55*KC, not KC + 0.1*KC.
template <typename F>
void for_each_balanced_block(int64_t total, int64_t block, int64_t align, F&& f) {
  for (int64_t pos = 0; pos < total;) {
    int64_t left = total - pos, len = left;
    if (left > 2 * block) {
      len = block;
    } else if (left > block) {
      len = std::min(left, round_up(ceil_div(left, 2), align));
    }
    f(pos, len);
    pos += len;
  }
}

// The wm x wn thread grid (wm * wn == threads): the most row ways whose most tiles any one
// thread computes is within 1/32 of the least any grid gives. Rows are kept: each thread
// keeps its A block private (split by columns, every thread packs all of A) and its rows of
// C (split by columns, the line where two threads' columns meet in each row of C is written
// by both). Zen 5, 2 threads, GFLOP/s, exact minimum / this: 1911x249x9 NT 70 / 110,
// 2947x40x42 NT 80 / 103, 2757x43x79 91 / 125.
struct ThreadGrid {
  int wm, wn;
};
inline ThreadGrid choose_grid(int threads, int64_t row_tiles, int64_t col_tiles) {
  const auto cost = [&](int wm) { return ceil_div(row_tiles, wm) * ceil_div(col_tiles, threads / wm); };
  int64_t least = -1;
  for (int wm = 1; wm <= threads; ++wm)
    if (threads % wm == 0 && (least < 0 || cost(wm) < least)) least = cost(wm);
  for (int wm = threads; wm > 1; --wm)
    if (threads % wm == 0 && cost(wm) * 32 <= least * 33) return {wm, threads / wm};
  return {1, threads};
}

// [begin, end) of `total_units` items for part `index` of `parts`, scaled by `unit` and
// clipped to `limit`.
struct Range {
  int64_t begin, end;
};
inline Range share(int64_t total_units, int index, int parts, int64_t unit, int64_t limit) {
  int64_t b = total_units * index / parts * unit, e = total_units * (index + 1) / parts * unit;
  return {std::min(b, limit), std::min(e, limit)};
}

}  // namespace gk
