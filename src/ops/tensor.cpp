// The ops' tensor view and argument checks (src/ops/ops.h).
#include <cinttypes>
#include <cstdint>

#include "ops/ops.h"

namespace gk {
namespace ops {

namespace {
// 2^62 bytes: the largest tensor accepted, so that byte offsets never overflow int64.
constexpr int64_t kMaxFloats = int64_t{1} << 60;

// a * b within kMaxFloats (a, b >= 0).
bool mul_within(int64_t a, int64_t b, int64_t* out) {
  int64_t p;
  if (__builtin_mul_overflow(a, b, &p) || p > kMaxFloats) return false;
  *out = p;
  return true;
}
}  // namespace

Blocked blocked(const gk_tensor_desc& t) {
  Blocked v;
  v.n = t.n, v.c = t.c, v.h = t.h, v.w = t.w;
  if (t.layout == GK_LAYOUT_NHWC) {
    v.lanes = t.c, v.blocks = 1;
  } else {  // NCHW is NCHWx with x = 1
    v.lanes = conv::channel_block(t.layout);
    v.blocks = (t.c + v.lanes - 1) / v.lanes;
  }
  return v;
}

bool check_pointer(const char* fn, const char* what, const void* p) {
  if (p) return true;
  set_last_error("%s: %s is NULL", fn, what);
  return false;
}

bool check_tensor(const char* fn, const char* what, const gk_tensor_desc* t) {
  if (!check_pointer(fn, what, t)) return false;
  const int layout = conv::raw_enum(t->layout);
  if (!conv::valid_layout(layout)) {
    set_last_error("%s: %s->layout %d is not a gk_layout", fn, what, layout);
    return false;
  }
  if (t->n < 1 || t->c < 1 || t->h < 1 || t->w < 1) {
    set_last_error("%s: %s is %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64 " (n, c, h, w must be >= 1)", fn,
                   what, t->n, t->c, t->h, t->w);
    return false;
  }
  // The padded channel count first: c + x - 1 cannot overflow for c < 2^60.
  const int64_t x = conv::channel_block(t->layout);
  int64_t floats;
  if (t->c > kMaxFloats || !mul_within(t->n, (t->c + x - 1) / x * x, &floats) || !mul_within(floats, t->h, &floats) ||
      !mul_within(floats, t->w, &floats)) {
    set_last_error("%s: %s of %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64 " is larger than 2^62 bytes", fn,
                   what, t->n, t->c, t->h, t->w);
    return false;
  }
  return true;
}

bool check_activation(const char* fn, const gk_activation& act) {
  const int a = conv::raw_enum(act);
  if (a >= GK_ACT_NONE && a <= GK_ACT_RELU6) return true;
  set_last_error("%s: activation %d is not a gk_activation", fn, a);
  return false;
}

bool check_floats(const char* fn, const char* what, int64_t a, int64_t b, int64_t c, int64_t* floats) {
  int64_t f;
  if (a < 0 || b < 0 || c < 0 || !mul_within(a, b, &f) || !mul_within(f, c, &f)) {
    set_last_error("%s: %s of %" PRId64 " x %" PRId64 " x %" PRId64 " floats is larger than 2^62 bytes", fn, what, a,
                   b, c);
    return false;
  }
  *floats = f;
  return true;
}

bool overlaps(const void* a, int64_t a_floats, const void* b, int64_t b_floats) {
  // Addresses as integers: comparing pointers into different objects is undefined in C++.
  const uintptr_t a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  const uintptr_t a1 = a0 + uintptr_t(a_floats) * sizeof(float), b1 = b0 + uintptr_t(b_floats) * sizeof(float);
  return a0 < b1 && b0 < a1;
}

bool check_disjoint(const char* fn, const char* out_name, const void* out, int64_t out_floats,
                    const char* in_name, const void* in, int64_t in_floats) {
  if (!overlaps(out, out_floats, in, in_floats)) return true;
  set_last_error("%s: %s overlaps %s", fn, out_name, in_name);
  return false;
}

void zero_padding_lanes(float* row, int64_t pixels, int64_t lanes, int64_t real) {
  if (real >= lanes) return;
  if (lanes == 8) return conv::zero_padding_lanes(row, pixels, real);  // one masked vector a pixel
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t l = real; l < lanes; ++l) row[p * lanes + l] = 0.0f;
}

}  // namespace ops
}  // namespace gk
