// Element-wise addition with a fused activation (ResNet's relu(x + shortcut)), in place or not.
#include "ops/ops.h"

namespace gk {
namespace ops {
namespace {

// y[i] = act(a[i] + b[i]), i < n. y may be a or b: each element is read before it is
// written, at the same index, so no __restrict.
GK_INLINE void add_run_body(const float* a, const float* b, float* y, int64_t n, gk_activation act) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y + i, activate(load8(a + i) + load8(b + i), act));
  for (; i < n; ++i) y[i] = activate(a[i] + b[i], act);
}

void add_run_baseline(const float* a, const float* b, float* y, int64_t n, gk_activation act) {
  add_run_body(a, b, y, n, act);
}
#if defined(__x86_64__)
GK_OPS_AVX2 void add_run_avx2(const float* a, const float* b, float* y, int64_t n, gk_activation act) {
  add_run_body(a, b, y, n, act);
}
#endif

void run_add(const Blocked& t, const float* a, const float* b, float* y, gk_activation act) {
  auto add_run = add_run_baseline;
#if defined(__x86_64__)
  if (use_avx2()) add_run = add_run_avx2;
#endif
  const int threads = threads_for_bytes(12.0 * double(t.floats()));
  if (!t.padded()) {  // one flat run, in equal parts (16 floats: whole cache lines)
    parallel_region(threads, [&] {
      const Share s = my_share(t.floats(), 16);
      add_run(a + s.begin, b + s.begin, y + s.begin, s.end - s.begin, act);
    });
    return;
  }
  // NCHWx with padding: by rows, the last block's padding lanes zeroed while in cache,
  // whatever the inputs' padding holds.
  const int64_t rows = t.rows(), row = t.row_floats();
  parallel_region(threads, [&] {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      add_run(a + r * row, b + r * row, y + r * row, row, act);
      const int64_t block = r / t.h % t.blocks;
      if (block == t.blocks - 1) zero_padding_lanes(y + r * row, t.w, t.lanes, t.real_lanes(block));
    }
  });
}

}  // namespace
}  // namespace ops
}  // namespace gk

GK_OPS_EXPORT gk_status gk_add(const gk_tensor_desc* t, const float* a, const float* b, float* y,
                               gk_activation act) {
  const char* fn = "gk_add";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_tensor(fn, "t", t) || !gk::ops::check_pointer(fn, "a", a) ||
        !gk::ops::check_pointer(fn, "b", b) || !gk::ops::check_pointer(fn, "y", y) ||
        !gk::ops::check_activation(fn, act))
      return GK_ERR_INVALID_ARGUMENT;
    const gk::ops::Blocked v = gk::ops::blocked(*t);
    const int64_t n = v.floats();
    // In place is y == a or y == b exactly; a partial overlap would read outputs as inputs.
    if ((y != a && !gk::ops::check_disjoint(fn, "y", y, n, "a (in place only as y == a)", a, n)) ||
        (y != b && !gk::ops::check_disjoint(fn, "y", y, n, "b (in place only as y == b)", b, n)))
      return GK_ERR_INVALID_ARGUMENT;
    gk::ops::run_add(v, a, b, y, act);
    return GK_OK;
  });
}
