// Network operations (pooling, global average pooling, add, concat / split / shuffle, fully
// connected, batch norm folding): every op against a double-precision reference on NCHW
// data, in every layout (inputs converted with gk_convert_layout, their NCHWx padding
// lanes poisoned with NaN; outputs prefilled with NaN, converted back, padding lanes checked
// to be zero), then invalid arguments: status, message, and output bytes untouched.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "conv_test_util.h"
#include "gemm_test_util.h"
#include "gemmkit.h"
#include "ops/ops.h"

namespace {

using gktest::kNaN;
using gktest::quick;
using gktest::random_vector;

constexpr gk_layout kLayouts[] = {GK_LAYOUT_NCHW, GK_LAYOUT_NHWC, GK_LAYOUT_NCHW4, GK_LAYOUT_NCHW8,
                                  GK_LAYOUT_NCHW16};
constexpr gk_activation kActivations[] = {GK_ACT_NONE, GK_ACT_RELU, GK_ACT_RELU6};

const char* layout_name(gk_layout l) {
  switch (l) {
    case GK_LAYOUT_NCHW: return "NCHW";
    case GK_LAYOUT_NHWC: return "NHWC";
    case GK_LAYOUT_NCHW4: return "NCHW4";
    case GK_LAYOUT_NCHW8: return "NCHW8";
    default: return "NCHW16";
  }
}

int64_t block_of(gk_layout l) { return l == GK_LAYOUT_NCHW4 ? 4 : l == GK_LAYOUT_NCHW8 ? 8 : l == GK_LAYOUT_NCHW16 ? 16 : 1; }

gk_tensor_desc desc(int64_t n, int64_t c, int64_t h, int64_t w, gk_layout l) { return {n, c, h, w, l}; }

std::string describe(const gk_tensor_desc& t) {
  std::ostringstream o;
  o << t.n << "x" << t.c << "x" << t.h << "x" << t.w << " " << layout_name(t.layout);
  return o.str();
}

size_t floats(const gk_tensor_desc& t) { return size_t(gk_tensor_size(t.layout, t.n, t.c, t.h, t.w)); }
size_t nchw_floats(const gk_tensor_desc& t) { return size_t(t.n * t.c * t.h * t.w); }

// Calls f(index) for every padding float of an NCHWx tensor.
template <typename F>
void for_each_padding(const gk_tensor_desc& t, F f) {
  const int64_t x = block_of(t.layout);
  if (x == 1 || t.c % x == 0) return;
  const int64_t blocks = (t.c + x - 1) / x;
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t p = 0; p < t.h * t.w; ++p)
      for (int64_t l = t.c % x; l < x; ++l) f(size_t(((n * blocks + blocks - 1) * t.h * t.w + p) * x + l));
}

// NCHW data in t's layout, its padding lanes NaN: ops must not let them through.
// (Convolutions take their zero padding as given: `poison` false for their inputs.)
std::vector<float> to_layout(const std::vector<float>& nchw, const gk_tensor_desc& t, bool poison = true) {
  std::vector<float> v(floats(t), 0.0f);
  EXPECT_EQ(gk_convert_layout(nchw.data(), GK_LAYOUT_NCHW, v.data(), t.layout, t.n, t.c, t.h, t.w), GK_OK);
  if (poison) for_each_padding(t, [&](size_t i) { v[i] = kNaN; });
  return v;
}

// t's data back in NCHW, after checking that its padding lanes are zero.
std::vector<float> to_nchw(const std::vector<float>& v, const gk_tensor_desc& t) {
  bool zero = true;
  for_each_padding(t, [&](size_t i) { zero = zero && v[i] == 0.0f; });
  EXPECT_TRUE(zero) << describe(t) << ": padding lanes not zero";
  std::vector<float> out(nchw_floats(t));
  EXPECT_EQ(gk_convert_layout(v.data(), t.layout, out.data(), GK_LAYOUT_NCHW, t.n, t.c, t.h, t.w), GK_OK);
  return out;
}

// A copy of `v` in memory that ends where a PROT_NONE page begins: reads past it fault.
struct Guarded {
  gktest::GuardedFloats mem;
  explicit Guarded(const std::vector<float>& v) : mem(v.size()) {
    if (mem.data()) std::memcpy(mem.data(), v.data(), v.size() * sizeof(float));
  }
  const float* data() { return mem.data(); }
};

// Every element within bound(i) of want[i] (NaN never passes); reports the first miss.
template <typename Bound>
::testing::AssertionResult matches(const std::vector<float>& got, const std::vector<double>& want, Bound bound) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool nan_expected = std::isnan(want[i]);
    const bool close = double(got[i]) == want[i] || std::fabs(double(got[i]) - want[i]) <= bound(i);  // inf == inf
    if (nan_expected ? !std::isnan(got[i]) : !close)
      return ::testing::AssertionFailure() << "element " << i << " = " << got[i] << ", expected " << want[i]
                                           << " (bound " << bound(i) << ")";
  }
  return ::testing::AssertionSuccess();
}

// Where want[i] is a zero, got[i] is the zero of the same sign (max pooling keeps the first
// of equal values, as PyTorch's (v > max) does: -0 then 0 gives -0).
::testing::AssertionResult same_zero_signs(const std::vector<float>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (want[i] == 0.0 && std::signbit(got[i]) != std::signbit(want[i]))
      return ::testing::AssertionFailure() << "element " << i << " = " << got[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

// Sets the number of threads for a scope, then returns to the default.
struct Threads {
  explicit Threads(int n) { gk_set_num_threads(n); }
  ~Threads() { gk_set_num_threads(0); }
};

// The two-thread tests need tensors past the ops' threshold for a second thread: `bytes`,
// the traffic an op counts at least, must get 2 (with 2 threads set).
void expect_two_threads(double bytes) {
  EXPECT_GE(gk::ops::threads_for_bytes(bytes), 2) << "a tensor of " << bytes << " bytes runs on one thread";
}

double act_ref(double v, gk_activation act) {
  if (act == GK_ACT_NONE) return v;
  v = std::max(v, 0.0);
  return act == GK_ACT_RELU6 ? std::min(v, 6.0) : v;
}

// ---------------------------------------------------------------- pooling reference

// PyTorch's output size, written out independently of the library.
int64_t ref_pool_extent(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, bool ceil_mode) {
  const int64_t num = in + p0 + p1 - k + (ceil_mode ? s - 1 : 0);
  int64_t out = num / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p0) --out;
  return out;
}

struct PoolRef {
  std::vector<double> y;    // NCHW
  std::vector<double> mag;  // per output: the mean of |x| over the window (avg error bound)
  std::vector<int> count;   // per output: elements summed
  int64_t oh, ow;
};

PoolRef ref_pool(const std::vector<float>& x, const gk_tensor_desc& t, const gk_pool_desc& p) {
  PoolRef r;
  const bool ceil_mode = p.ceil_mode != 0;
  r.oh = ref_pool_extent(t.h, p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, ceil_mode);
  r.ow = ref_pool_extent(t.w, p.kernel_w, p.stride_w, p.pad_left, p.pad_right, ceil_mode);
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t c = 0; c < t.c; ++c)
      for (int64_t oh = 0; oh < r.oh; ++oh)
        for (int64_t ow = 0; ow < r.ow; ++ow) {
          const int64_t hs = oh * p.stride_h - p.pad_top, ws = ow * p.stride_w - p.pad_left;
          const int64_t he = std::min(hs + p.kernel_h, t.h + p.pad_bottom);
          const int64_t we = std::min(ws + p.kernel_w, t.w + p.pad_right);
          const int64_t padded = (he - hs) * (we - ws);
          double mx = -INFINITY, sum = 0, mag = 0;
          int cnt = 0;
          bool nan = false;
          for (int64_t i = std::max<int64_t>(hs, 0); i < std::min(he, t.h); ++i)
            for (int64_t j = std::max<int64_t>(ws, 0); j < std::min(we, t.w); ++j) {
              const double v = x[size_t(((n * t.c + c) * t.h + i) * t.w + j)];
              nan = nan || std::isnan(v);
              mx = std::max(mx, v);
              sum += v;
              mag += std::fabs(v);
              ++cnt;
            }
          EXPECT_GT(cnt, 0) << "a window with no input element";
          const double div = p.count_include_pad ? double(padded) : double(cnt);
          r.y.push_back(p.kind == GK_POOL_MAX ? (nan ? NAN : mx) : sum / div);
          r.mag.push_back(mag / div);
          r.count.push_back(cnt);
        }
  return r;
}

std::string describe(const gk_pool_desc& p) {
  std::ostringstream o;
  o << (p.kind == GK_POOL_MAX ? "max" : "avg") << " kernel " << p.kernel_h << "x" << p.kernel_w << " stride "
    << p.stride_h << "x" << p.stride_w << " pad " << p.pad_top << "," << p.pad_left << "," << p.pad_bottom << ","
    << p.pad_right << " ceil " << p.ceil_mode << " include_pad " << p.count_include_pad;
  return o.str();
}

gk_pool_desc pool_desc(gk_pool_kind kind, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,
                       int64_t pb, int64_t pr, int ceil_mode, int include_pad) {
  gk_pool_desc p;
  p.kind = kind;
  p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw;
  p.pad_top = pt, p.pad_left = pl, p.pad_bottom = pb, p.pad_right = pr;
  p.ceil_mode = ceil_mode, p.count_include_pad = include_pad;
  return p;
}

// Runs one pooling (NCHW data x of shape s) in every layout against the reference.
void check_pool(const std::vector<float>& x, const gk_tensor_desc& s, const gk_pool_desc& p,
                const std::vector<gk_layout>& layouts, const PoolRef& ref) {
  SCOPED_TRACE(describe(p));
  for (gk_layout l : layouts) {
    const gk_tensor_desc in = desc(s.n, s.c, s.h, s.w, l);
    SCOPED_TRACE(describe(in));
    int64_t oh = -1, ow = -1;
    ASSERT_EQ(gk_pool2d_output_size(&in, &p, &oh, &ow), GK_OK) << gk_last_error();
    ASSERT_EQ(oh, ref.oh);
    ASSERT_EQ(ow, ref.ow);
    Guarded xl(to_layout(x, in));
    const gk_tensor_desc out = desc(s.n, s.c, oh, ow, l);
    std::vector<float> y(floats(out), kNaN);
    ASSERT_EQ(gk_pool2d(&in, &p, xl.data(), y.data()), GK_OK) << gk_last_error();
    EXPECT_STREQ(gk_last_error(), "");
    const std::vector<float> got = to_nchw(y, out);
    if (p.kind == GK_POOL_MAX) {  // exact, the sign of a zero included
      ASSERT_TRUE(matches(got, ref.y, [](size_t) { return 0.0; }));
      ASSERT_TRUE(same_zero_signs(got, ref.y));
    } else {
      ASSERT_TRUE(matches(got, ref.y, [&](size_t i) { return (ref.count[i] + 2) * double(FLT_EPSILON) * ref.mag[i]; }));
    }
  }
}

void check_pool(const std::vector<float>& x, const gk_tensor_desc& s, const gk_pool_desc& p,
                const std::vector<gk_layout>& layouts) {
  check_pool(x, s, p, layouts, ref_pool(x, s, p));
}

const std::vector<gk_layout> all_layouts(std::begin(kLayouts), std::end(kLayouts));

// ---------------------------------------------------------------- pooling

// Every mode (max / avg, ceil_mode, count_include_pad), square and non-square kernels,
// strides 1..3, pads from 0 to kernel / 2 on each side, odd shapes (h, w = 1 included;
// channels that fill no block, one, several and a partial one; w past 16 for the stride-2
// vector loads), all layouts.
TEST(Ops, PoolAllModesAllLayouts) {
  const gk_tensor_desc shapes[] = {{1, 1, 1, 1, GK_LAYOUT_NCHW},  {2, 3, 5, 7, GK_LAYOUT_NCHW},   {1, 8, 9, 6, GK_LAYOUT_NCHW},   {1, 17, 7, 1, GK_LAYOUT_NCHW},  {2, 33, 4, 5, GK_LAYOUT_NCHW},
                                   {1, 61, 3, 3, GK_LAYOUT_NCHW}, {1, 16, 11, 13, GK_LAYOUT_NCHW}, {1, 5, 1, 9, GK_LAYOUT_NCHW},  {1, 3, 9, 41, GK_LAYOUT_NCHW},  {1, 12, 6, 34, GK_LAYOUT_NCHW}};
  const int64_t kernels[][2] = {{1, 1}, {2, 2}, {3, 3}, {2, 3}, {3, 1}, {5, 4}};
  const int64_t strides[][2] = {{1, 1}, {2, 2}, {3, 3}, {1, 2}, {3, 1}};
  std::mt19937 rng(11);
  int cases = 0, index = 0;
  for (int kind = 0; kind < 2; ++kind)
    for (int ceil_mode = 0; ceil_mode < 2; ++ceil_mode)
      for (int include_pad = 0; include_pad < 2; ++include_pad)
        for (const auto& k : kernels)
          for (const auto& s : strides) {
            ++index;
            if (quick() && index % 4) continue;
            auto pad = [&](int64_t kk) { return int64_t(rng() % uint32_t(kk / 2 + 1)); };
            const gk_pool_desc p = pool_desc(gk_pool_kind(kind), k[0], k[1], s[0], s[1], pad(k[0]), pad(k[1]),
                                             pad(k[0]), pad(k[1]), ceil_mode, include_pad);
            // The shape: the next one whose padded extent holds the window.
            for (int tries = 0; tries < 10; ++tries) {
              const gk_tensor_desc& sh = shapes[(index + tries) % 10];
              if (sh.h + p.pad_top + p.pad_bottom < p.kernel_h || sh.w + p.pad_left + p.pad_right < p.kernel_w)
                continue;
              const std::vector<float> x = random_vector(nchw_floats(sh), uint32_t(index), -2.0f, 2.0f);
              check_pool(x, sh, p, all_layouts);
              ++cases;
              break;
            }
            if (HasFatalFailure()) return;
          }
  EXPECT_GT(cases, quick() ? 50 : 200);
}

// Every pad combination of a 3x3 and a non-square 4x5 window on one shape.
TEST(Ops, PoolEveryPadding) {
  const gk_tensor_desc s = {2, 9, 7, 8, GK_LAYOUT_NCHW};
  const std::vector<float> x = random_vector(nchw_floats(s), 5, -1.0f, 1.0f);
  const std::vector<gk_layout> layouts = quick() ? std::vector<gk_layout>{GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8}
                                                 : all_layouts;
  for (const auto& k : {std::pair<int64_t, int64_t>{3, 3}, std::pair<int64_t, int64_t>{4, 5}})
    for (int64_t pt = 0; pt <= k.first / 2; ++pt)
      for (int64_t pb = 0; pb <= k.first / 2; ++pb)
        for (int64_t pl = 0; pl <= k.second / 2; ++pl)
          for (int64_t pr = 0; pr <= k.second / 2; ++pr)
            for (int mode = 0; mode < 4; ++mode) {
              const gk_pool_desc p = pool_desc(mode == 0 ? GK_POOL_MAX : GK_POOL_AVG, k.first, k.second, 2, 2, pt, pl,
                                               pb, pr, mode >= 2, mode == 3 || mode == 1);
              check_pool(x, s, p, layouts);
              if (HasFatalFailure()) return;
            }
}

// The common CNN pools (NCHW8's unrolled 3x3 stride 2 pad 1 and 2x2 stride 2, ResNet's
// stem, the avg pools), on tensors large enough to run on 2 threads, with 1 and 2 threads,
// and on the baseline (generic kernel) vector code.
TEST(Ops, PoolCommonShapesThreadsAndBaseline) {
  const gk_tensor_desc s = {2, 36, 41, 40, GK_LAYOUT_NCHW};
  const std::vector<float> x = random_vector(nchw_floats(s), 9, -3.0f, 3.0f);
  const gk_pool_desc pools[] = {pool_desc(GK_POOL_MAX, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0),
                                pool_desc(GK_POOL_MAX, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0),
                                pool_desc(GK_POOL_MAX, 3, 3, 2, 2, 0, 0, 0, 0, 1, 0),
                                pool_desc(GK_POOL_AVG, 2, 2, 2, 2, 0, 0, 0, 0, 0, 1),
                                pool_desc(GK_POOL_AVG, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0)};
  std::vector<PoolRef> refs;
  for (const gk_pool_desc& p : pools) refs.push_back(ref_pool(x, s, p));
  // (Emulated arm64 runs one baseline anyway: the generic kernel there changes nothing.)
  for (const char* kernel : quick() ? std::vector<const char*>{""} : std::vector<const char*>{"", "generic"}) {
    SCOPED_TRACE(std::string("kernel ") + kernel);
    ASSERT_EQ(gk_set_kernel(kernel), GK_OK);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      Threads t(threads);
      if (threads == 2) expect_two_threads(4.0 * double(nchw_floats(s) + refs[1].y.size()));
      for (size_t i = 0; i < refs.size(); ++i) check_pool(x, s, pools[i], all_layouts, refs[i]);
    }
  }
  EXPECT_EQ(gk_set_kernel(nullptr), GK_OK);
}

// Max pooling propagates NaN, as PyTorch's does; the windows without one are unaffected.
TEST(Ops, PoolMaxPropagatesNaN) {
  const gk_tensor_desc s = {1, 9, 6, 20, GK_LAYOUT_NCHW};
  std::vector<float> x = random_vector(nchw_floats(s), 3, -1.0f, 1.0f);
  x[5] = kNaN;
  x[size_t(4 * 6 * 20 + 3 * 20 + 17)] = kNaN;
  check_pool(x, s, pool_desc(GK_POOL_MAX, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0), all_layouts);
  check_pool(x, s, pool_desc(GK_POOL_MAX, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0), all_layouts);
}

// The pools whose max runs several output pixels side by side (blocked layouts with whole
// vectors of lanes): 3x3 and 2x2 unrolled, other windows at run time, top and bottom rows
// clipped by the padding.
const std::vector<gk_pool_desc> kColumnBlockPools = {
    pool_desc(GK_POOL_MAX, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0), pool_desc(GK_POOL_MAX, 2, 2, 2, 2, 0, 0, 0, 0, 1, 0),
    pool_desc(GK_POOL_MAX, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0), pool_desc(GK_POOL_MAX, 3, 2, 1, 2, 1, 1, 0, 0, 1, 0),
    pool_desc(GK_POOL_MAX, 4, 5, 3, 2, 2, 2, 1, 0, 1, 0)};

// Output widths 1..17 and past: every count of whole columns (blocks of 4, the 2 and 1 left),
// with 8, 16 and 24 channels (NHWC's lanes whole vectors: one, two, three at a time).
TEST(Ops, PoolMaxColumnBlocksEveryWidth) {
  for (int64_t c : {8, 16, 24})
    for (int64_t w = 1; w <= 36; ++w) {
      const gk_tensor_desc s = {1, c, 7, w, GK_LAYOUT_NCHW};
      const std::vector<float> x = random_vector(nchw_floats(s), uint32_t(w), -2.0f, 2.0f);
      for (const gk_pool_desc& p : kColumnBlockPools) {
        if (w + p.pad_left + p.pad_right < p.kernel_w) continue;
        check_pool(x, s, p, all_layouts);
        if (HasFatalFailure()) return;
      }
    }
}

// A NaN at every input position in turn (its lane moving with it), with the window's other
// values random: every position of every window of a row whose whole columns make a block of
// 4, one of 2 and one of 1, and the clipped edges. The max chain and the NaN chain are apart:
// a NaN early in a window must survive larger values after it.
TEST(Ops, PoolMaxNaNInEveryWindowPosition) {
  const gk_tensor_desc s = {1, 16, 5, 17, GK_LAYOUT_NCHW};
  const std::vector<float> x = random_vector(nchw_floats(s), 21, -1.0f, 1.0f);
  const std::vector<gk_layout> layouts = quick() ? std::vector<gk_layout>{GK_LAYOUT_NCHW8, GK_LAYOUT_NHWC}
                                                 : all_layouts;
  for (int64_t pos = 0; pos < s.h * s.w; ++pos) {
    std::vector<float> xn = x;
    xn[size_t((pos % s.c) * s.h * s.w + pos)] = kNaN;
    SCOPED_TRACE(pos);
    for (const gk_pool_desc& p : kColumnBlockPools) {
      check_pool(xn, s, p, layouts);
      if (HasFatalFailure()) return;
    }
  }
}

// Infinities of both signs (their sums are NaN, which sends rows to the NaN path for
// nothing) and windows all -inf: the max is still exact.
TEST(Ops, PoolMaxInfinities) {
  const gk_tensor_desc s = {1, 16, 6, 19, GK_LAYOUT_NCHW};
  std::vector<float> x = random_vector(nchw_floats(s), 8, -1.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < x.size(); ++i)
    if (i % 7 == 0) x[i] = i % 3 ? -inf : inf;
  for (size_t i = 0; i < 4 * size_t(s.w); ++i) x[i] = -inf;  // channel 0's first rows
  for (const gk_pool_desc& p : kColumnBlockPools) {
    check_pool(x, s, p, all_layouts);
    if (HasFatalFailure()) return;
  }
}

// Zeros of both signs: max pooling keeps the first of equal values, in every layout.
TEST(Ops, PoolMaxKeepsTheFirstOfEqualZeros) {
  const gk_tensor_desc s = {1, 16, 6, 19, GK_LAYOUT_NCHW};
  std::vector<float> x = random_vector(nchw_floats(s), 4, -1.0f, 1.0f);
  for (float& v : x) v = v < 0 ? -0.0f : 0.0f;
  for (const gk_pool_desc& p : kColumnBlockPools) {
    check_pool(x, s, p, all_layouts);
    if (HasFatalFailure()) return;
  }
}

TEST(Ops, PoolOutputSizeCeilModeDropsWindowStartingInPadding) {
  // H = 5, k = 2, s = 2, pad 1 each side, ceil: (5 + 2 - 2 + 1) / 2 + 1 = 4, but the 4th
  // window starts at 3 * 2 = 6 >= 5 + 1: PyTorch gives 3.
  const gk_tensor_desc in = desc(1, 1, 5, 6, GK_LAYOUT_NCHW);
  const gk_pool_desc p = pool_desc(GK_POOL_MAX, 2, 2, 2, 2, 1, 1, 1, 1, 1, 0);
  int64_t oh = 0, ow = 0;
  ASSERT_EQ(gk_pool2d_output_size(&in, &p, &oh, &ow), GK_OK);
  EXPECT_EQ(oh, 3);
  EXPECT_EQ(ow, 4);  // W = 6: (6 + 2 - 2 + 1) / 2 + 1 = 4, last start 6 < 7
}

// ---------------------------------------------------------------- global average pool

TEST(Ops, GlobalAvgPool) {
  const gk_tensor_desc shapes[] = {{1, 1, 1, 1, GK_LAYOUT_NCHW}, {2, 3, 5, 7, GK_LAYOUT_NCHW}, {1, 17, 7, 7, GK_LAYOUT_NCHW}, {3, 33, 1, 9, GK_LAYOUT_NCHW}, {1, 61, 4, 3, GK_LAYOUT_NCHW},
                                   {2, 16, 13, 1, GK_LAYOUT_NCHW}, {1, 130, 3, 5, GK_LAYOUT_NCHW}};
  for (int threads : {1, 2}) {
    Threads th(threads);
    for (const auto& s : shapes) {
      const std::vector<float> x = random_vector(nchw_floats(s), uint32_t(s.c), -2.0f, 2.0f);
      std::vector<double> want, bound;
      for (int64_t i = 0; i < s.n * s.c; ++i) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < s.h * s.w; ++p) sum += x[size_t(i * s.h * s.w + p)], mag += std::fabs(x[size_t(i * s.h * s.w + p)]);
        want.push_back(sum / double(s.h * s.w));
        bound.push_back((double(s.h * s.w) + 2) * FLT_EPSILON * mag / double(s.h * s.w));
      }
      for (gk_layout l : kLayouts) {
        const gk_tensor_desc in = desc(s.n, s.c, s.h, s.w, l), out = desc(s.n, s.c, 1, 1, l);
        SCOPED_TRACE(describe(in));
        Guarded xl(to_layout(x, in));
        std::vector<float> y(floats(out), kNaN);
        ASSERT_EQ(gk_global_avg_pool(&in, xl.data(), y.data()), GK_OK) << gk_last_error();
        EXPECT_TRUE(matches(to_nchw(y, out), want, [&](size_t i) { return bound[i]; }));
      }
    }
  }
}

// Planes large enough for 2 threads (and NHWC's lane chunks): same results as one thread.
TEST(Ops, GlobalAvgPoolLarge) {
  const gk_tensor_desc s = {2, 136, 36, 37, GK_LAYOUT_NCHW};  // planes of several sum blocks
  const std::vector<float> x = random_vector(nchw_floats(s), 4, 0.0f, 1.0f);
  for (gk_layout l : kLayouts) {
    const gk_tensor_desc in = desc(s.n, s.c, s.h, s.w, l), out = desc(s.n, s.c, 1, 1, l);
    SCOPED_TRACE(describe(in));
    const std::vector<float> xl = to_layout(x, in);
    std::vector<float> y1(floats(out), kNaN), y2(floats(out), kNaN);
    {
      Threads t(1);
      ASSERT_EQ(gk_global_avg_pool(&in, xl.data(), y1.data()), GK_OK);
    }
    {
      Threads t(2);
      expect_two_threads(4.0 * double(nchw_floats(s)));
      ASSERT_EQ(gk_global_avg_pool(&in, xl.data(), y2.data()), GK_OK);
    }
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
    const std::vector<float> got = to_nchw(y2, out);
    for (int64_t i = 0; i < s.n * s.c; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < s.h * s.w; ++p) sum += x[size_t(i * s.h * s.w + p)];
      const double want = sum / double(s.h * s.w);
      ASSERT_NEAR(got[size_t(i)], want, (s.h * s.w + 2) * FLT_EPSILON * want) << "channel " << i;
    }
  }
}

// ---------------------------------------------------------------- add

TEST(Ops, AddEveryActivationInPlaceAllLayouts) {
  const gk_tensor_desc shapes[] = {{1, 1, 1, 1, GK_LAYOUT_NCHW}, {2, 3, 5, 7, GK_LAYOUT_NCHW}, {1, 17, 7, 1, GK_LAYOUT_NCHW}, {1, 33, 3, 4, GK_LAYOUT_NCHW}, {2, 61, 1, 3, GK_LAYOUT_NCHW},
                                   {1, 16, 5, 5, GK_LAYOUT_NCHW}};
  const std::vector<int> thread_counts = {1, 2};
  for (int threads : thread_counts) {
    Threads th(threads);
    for (const auto& s : shapes)
      for (gk_activation act : kActivations) {
        // Values past 6 and below 0 so that both clamps act.
        const std::vector<float> a = random_vector(nchw_floats(s), 1, -8.0f, 8.0f);
        const std::vector<float> b = random_vector(nchw_floats(s), 2, -8.0f, 8.0f);
        std::vector<double> want(a.size());
        for (size_t i = 0; i < a.size(); ++i) want[i] = act_ref(double(float(a[i] + b[i])), act);
        for (gk_layout l : kLayouts) {
          const gk_tensor_desc t = desc(s.n, s.c, s.h, s.w, l);
          SCOPED_TRACE(describe(t) + " act " + std::to_string(int(act)));
          const std::vector<float> al = to_layout(a, t), bl = to_layout(b, t);
          auto exact = [](size_t) { return 0.0; };
          std::vector<float> y(floats(t), kNaN);
          ASSERT_EQ(gk_add(&t, al.data(), bl.data(), y.data(), act), GK_OK) << gk_last_error();
          EXPECT_TRUE(matches(to_nchw(y, t), want, exact)) << "out of place";
          std::vector<float> ya = al;  // y == a
          ASSERT_EQ(gk_add(&t, ya.data(), bl.data(), ya.data(), act), GK_OK) << gk_last_error();
          EXPECT_TRUE(matches(to_nchw(ya, t), want, exact)) << "y == a";
          std::vector<float> yb = bl;  // y == b
          ASSERT_EQ(gk_add(&t, al.data(), yb.data(), yb.data(), act), GK_OK) << gk_last_error();
          EXPECT_TRUE(matches(to_nchw(yb, t), want, exact)) << "y == b";
          std::vector<float> yy = al;  // a == b == y
          ASSERT_EQ(gk_add(&t, yy.data(), yy.data(), yy.data(), act), GK_OK) << gk_last_error();
          std::vector<double> twice(a.size());
          for (size_t i = 0; i < a.size(); ++i) twice[i] = act_ref(double(a[i] + a[i]), act);
          EXPECT_TRUE(matches(to_nchw(yy, t), twice, exact)) << "y == a == b";
        }
      }
  }
}

// A tensor large enough for 2 threads, padded NCHW8 and flat NCHW.
TEST(Ops, AddLargeTwoThreads) {
  const gk_tensor_desc s = {2, 45, 50, 51, GK_LAYOUT_NCHW};
  const std::vector<float> a = random_vector(nchw_floats(s), 7, -8.0f, 8.0f), b = random_vector(nchw_floats(s), 8);
  std::vector<double> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = act_ref(double(float(a[i] + b[i])), GK_ACT_RELU6);
  Threads th(2);
  expect_two_threads(12.0 * double(nchw_floats(s)));
  for (gk_layout l : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8, GK_LAYOUT_NHWC}) {
    const gk_tensor_desc t = desc(s.n, s.c, s.h, s.w, l);
    SCOPED_TRACE(describe(t));
    const std::vector<float> al = to_layout(a, t), bl = to_layout(b, t);
    std::vector<float> y(floats(t), kNaN);
    ASSERT_EQ(gk_add(&t, al.data(), bl.data(), y.data(), GK_ACT_RELU6), GK_OK);
    EXPECT_TRUE(matches(to_nchw(y, t), want, [](size_t) { return 0.0; }));
  }
}

// ---------------------------------------------------------------- concat / split

// Channel lists: aligned to 8 (whole-block copies in NCHW8), unaligned starts and ends
// (lane-run copies), single channels, and a mix.
const std::vector<std::vector<int64_t>> kChannelLists = {
    {8, 16}, {3, 5, 8}, {1, 33, 7}, {16, 5}, {13, 19, 2}, {1}, {4, 4, 4, 4, 1}, {24, 8, 3, 16}};

// The concat of NCHW parts, and its inverse.
std::vector<float> ref_concat(const std::vector<std::vector<float>>& parts, const std::vector<int64_t>& channels,
                              int64_t n, int64_t hw) {
  std::vector<float> out;
  for (int64_t b = 0; b < n; ++b)
    for (size_t i = 0; i < parts.size(); ++i)
      out.insert(out.end(), parts[i].begin() + b * channels[i] * hw, parts[i].begin() + (b + 1) * channels[i] * hw);
  return out;
}

std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

void check_concat_split(int64_t n, int64_t h, int64_t w, const std::vector<int64_t>& channels) {
  int64_t c = 0;
  for (int64_t ci : channels) c += ci;
  std::vector<std::vector<float>> parts;
  for (size_t i = 0; i < channels.size(); ++i)
    parts.push_back(random_vector(size_t(n * channels[i] * h * w), uint32_t(i + 1)));
  const std::vector<float> whole = ref_concat(parts, channels, n, h * w);
  for (gk_layout l : kLayouts) {
    const gk_tensor_desc out = desc(n, c, h, w, l);
    std::ostringstream trace;
    trace << describe(out) << " parts";
    for (int64_t ci : channels) trace << " " << ci;
    SCOPED_TRACE(trace.str());
    // Concat.
    std::vector<gk_tensor_desc> descs;
    std::vector<std::vector<float>> in_layout;
    std::vector<const float*> xs;
    for (size_t i = 0; i < channels.size(); ++i) {
      descs.push_back(desc(n, channels[i], h, w, l));
      in_layout.push_back(to_layout(parts[i], descs.back()));
    }
    for (auto& v : in_layout) xs.push_back(v.data());
    std::vector<float> y(floats(out), kNaN);
    ASSERT_EQ(gk_concat_channels(int(channels.size()), descs.data(), xs.data(), &out, y.data()), GK_OK)
        << gk_last_error();
    EXPECT_TRUE(matches(to_nchw(y, out), as_double(whole), [](size_t) { return 0.0; })) << "concat";
    // Split.
    const std::vector<float> xl = to_layout(whole, out);
    std::vector<std::vector<float>> ys;
    std::vector<float*> yp;
    for (const auto& d : descs) ys.emplace_back(floats(d), kNaN);
    for (auto& v : ys) yp.push_back(v.data());
    ASSERT_EQ(gk_split_channels(&out, xl.data(), int(channels.size()), channels.data(), yp.data()), GK_OK)
        << gk_last_error();
    for (size_t i = 0; i < channels.size(); ++i)
      EXPECT_TRUE(matches(to_nchw(ys[i], descs[i]), as_double(parts[i]), [](size_t) { return 0.0; }))
          << "split part " << i;
    // Every other part skipped (a null output): the others written alike, the skipped left alone.
    for (size_t i = 0; i < channels.size(); ++i) {
      std::fill(ys[i].begin(), ys[i].end(), kNaN);
      yp[i] = i % 2 ? nullptr : ys[i].data();
    }
    ASSERT_EQ(gk_split_channels(&out, xl.data(), int(channels.size()), channels.data(), yp.data()), GK_OK)
        << gk_last_error();
    for (size_t i = 0; i < channels.size(); ++i) {
      if (i % 2 == 0) {
        EXPECT_TRUE(matches(to_nchw(ys[i], descs[i]), as_double(parts[i]), [](size_t) { return 0.0; }))
            << "split part " << i << " beside skipped ones";
      } else {
        EXPECT_TRUE(std::all_of(ys[i].begin(), ys[i].end(), [](float v) { return std::isnan(v); }))
            << "skipped split part " << i << " was written";
      }
    }
  }
}

TEST(Ops, ConcatSplitAlignedAndUnaligned) {
  for (const auto& list : kChannelLists) {
    check_concat_split(2, 3, 5, list);
    check_concat_split(1, 1, 1, list);
    if (HasFatalFailure()) return;
  }
}

// Large enough for 2 threads: unaligned and aligned parts.
TEST(Ops, ConcatSplitTwoThreads) {
  Threads th(2);
  const int64_t h = 40, w = 43;
  expect_two_threads(8.0 * double(1 * 96 * h * w));
  check_concat_split(2, h, w, {16, 5, 27, 8});
  check_concat_split(1, h, w, {32, 64});
}

// Parts of every size 1..17 at every channel offset 0..16: shifts of every amount, parts
// inside one block and across two or three, blocks shared by three parts (NCHWx's lane
// maps), with padding after. Then parts spanning more blocks than a work item takes, and
// ShuffleNetV2's halves. All under every kernel this CPU supports: each has its own gather
// code (AVX-512's paired permutes, AVX2's, the baseline's).
TEST(Ops, ConcatSplitEveryOffsetEveryKernel) {
  const int64_t max_part = quick() ? 9 : 17;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    for (int64_t a = 1; a <= max_part; ++a)
      for (int64_t o = 0; o < max_part; ++o) {
        std::vector<int64_t> list;
        if (o > 0) list.push_back(o);
        list.push_back(a);
        list.push_back(3);
        check_concat_split(2, 2, 3, list);
        if (::testing::Test::HasFatalFailure()) return;
      }
    const std::vector<std::vector<int64_t>> long_parts = {
        {58, 58}, {116, 116}, {5, 139, 7}, {1, 200}, {77, 3, 66}, std::vector<int64_t>(17, 1)};
    for (const std::vector<int64_t>& list : long_parts) check_concat_split(1, 3, 4, list);
  });
}

// ---------------------------------------------------------------- channel shuffle

// A shuffle of random NCHW data of n x c x h x w in every layout against the reference.
void check_shuffle(int64_t n, int64_t c, int64_t h, int64_t w, int64_t groups) {
  const int64_t hw = h * w;
  const gk_tensor_desc s = {n, c, h, w, GK_LAYOUT_NCHW};
  const std::vector<float> x = random_vector(nchw_floats(s), uint32_t(c));
  std::vector<double> want(x.size());
  const int64_t per_group = c / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < per_group; ++i)
        for (int64_t p = 0; p < hw; ++p)
          want[size_t((b * c + i * groups + g) * hw + p)] = x[size_t((b * c + g * per_group + i) * hw + p)];
  for (gk_layout l : kLayouts) {
    const gk_tensor_desc t = desc(n, c, h, w, l);
    SCOPED_TRACE(describe(t) + " groups " + std::to_string(groups));
    const std::vector<float> xl = to_layout(x, t);
    std::vector<float> y(floats(t), kNaN);
    ASSERT_EQ(gk_channel_shuffle(&t, groups, xl.data(), y.data()), GK_OK) << gk_last_error();
    EXPECT_TRUE(matches(to_nchw(y, t), want, [](size_t) { return 0.0; }));
  }
}

TEST(Ops, ChannelShuffle) {
  struct Case {
    int64_t c, groups;
  };
  const Case cases[] = {{2, 2}, {6, 2}, {6, 3}, {12, 2}, {12, 3}, {12, 4}, {24, 3}, {33, 3}, {60, 4}, {8, 1}, {9, 9}};
  for (int threads : {1, 2}) {
    Threads th(threads);
    for (const Case& k : cases) {
      const int64_t n = 2, h = threads == 2 ? 30 : 3, w = threads == 2 ? 31 : 5;
      if (threads == 2 && k.c == 60) expect_two_threads(8.0 * double(n * k.c * h * w));
      check_shuffle(n, k.c, h, w, k.groups);
      if (HasFatalFailure()) return;
    }
  }
}

// Every channel count 1..40 with each of its groupings (groups = 1 and c: the identity),
// ShuffleNetV2's shapes, and groupings whose lane maps repeat after more blocks than a
// work item takes, under every kernel this CPU supports.
TEST(Ops, ChannelShuffleEveryGroupingEveryKernel) {
  const int64_t max_c = quick() ? 24 : 40;
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    for (int64_t c = 1; c <= max_c; ++c)
      for (int64_t groups = 1; groups <= c; ++groups)
        if (c % groups == 0) {
          check_shuffle(2, c, 2, 3, groups);
          if (::testing::Test::HasFatalFailure()) return;
        }
    const int64_t shapes[][2] = {{116, 2}, {232, 2}, {464, 2}, {96, 3}, {240, 4}, {120, 10}, {160, 20}};
    for (const auto& k : shapes) check_shuffle(1, k[0], 3, 2, k[1]);
  });
}

// The splits gk_concat_shuffle_split_channels is tried with on c channels: halves (a
// ShuffleNetV2 unit), one channel then the rest, three parts with the middle one not
// wanted (0 in `wanted`), parts starting at an odd shuffled channel (one channel; all but
// the last, an even count when c is), and one part of all.
struct SplitSpec {
  std::vector<int64_t> channels;
  std::vector<bool> wanted;
};
std::vector<SplitSpec> split_specs(int64_t c) {
  std::vector<SplitSpec> specs = {{{c}, {true}}};
  if (c >= 2) specs.push_back({{c / 2, c - c / 2}, {true, true}}), specs.push_back({{1, c - 1}, {true, true}});
  if (c >= 3) {
    specs.push_back({{c / 3, 1, c - c / 3 - 1}, {true, false, true}});
    specs.push_back({{1, 1, c - 2}, {true, true, true}});
    specs.push_back({{1, c - 2, 1}, {true, true, true}});
  }
  return specs;
}

// gk_concat_shuffle_channels: parts g of per_group + extra[g] channels (the channels past
// per_group not read), in every layout, against the shuffle of the concat of the parts'
// first per_group channels; gk_concat_shuffle_split_channels against that shuffle's
// channel ranges (split_specs).
void check_concat_shuffle(int64_t n, int64_t per_group, int64_t h, int64_t w, const std::vector<int64_t>& extra) {
  const int64_t groups = int64_t(extra.size()), c = per_group * groups, hw = h * w;
  std::vector<std::vector<float>> parts;
  for (int64_t g = 0; g < groups; ++g)
    parts.push_back(random_vector(size_t(n * (per_group + extra[size_t(g)]) * hw), uint32_t(100 + g)));
  std::vector<double> want(size_t(n * c * hw));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k) {
      const int64_t g = k % groups, q = k / groups, pc = per_group + extra[size_t(g)];
      for (int64_t p = 0; p < hw; ++p)
        want[size_t((b * c + k) * hw + p)] = parts[size_t(g)][size_t((b * pc + q) * hw + p)];
    }
  for (gk_layout l : kLayouts) {
    const gk_tensor_desc out = desc(n, c, h, w, l);
    SCOPED_TRACE(describe(out) + " groups " + std::to_string(groups) + " per group " + std::to_string(per_group));
    std::vector<gk_tensor_desc> descs;
    std::vector<std::vector<float>> in_layout;
    std::vector<const float*> xs;
    for (int64_t g = 0; g < groups; ++g) {
      descs.push_back(desc(n, per_group + extra[size_t(g)], h, w, l));
      in_layout.push_back(to_layout(parts[size_t(g)], descs.back()));
    }
    for (auto& v : in_layout) xs.push_back(v.data());
    std::vector<float> y(floats(out), kNaN);
    ASSERT_EQ(gk_concat_shuffle_channels(groups, descs.data(), xs.data(), &out, y.data()), GK_OK) << gk_last_error();
    EXPECT_TRUE(matches(to_nchw(y, out), want, [](size_t) { return 0.0; }));
    for (const SplitSpec& spec : split_specs(c)) {
      std::vector<std::vector<float>> ys;
      std::vector<float*> y_ptrs;
      for (size_t i = 0; i < spec.channels.size(); ++i) {
        ys.push_back(std::vector<float>(floats(desc(n, spec.channels[i], h, w, l)), kNaN));
        y_ptrs.push_back(spec.wanted[i] ? ys.back().data() : nullptr);
      }
      ASSERT_EQ(gk_concat_shuffle_split_channels(groups, descs.data(), xs.data(), &out, int(spec.channels.size()),
                                                 spec.channels.data(), y_ptrs.data()),
                GK_OK)
          << gk_last_error();
      int64_t c0 = 0;
      for (size_t i = 0; i < spec.channels.size(); ++i) {
        const int64_t ci = spec.channels[i];
        SCOPED_TRACE("split part " + std::to_string(i) + ": channels " + std::to_string(c0) + ".." +
                     std::to_string(c0 + ci));
        if (spec.wanted[i]) {
          std::vector<double> part_want;
          for (int64_t b = 0; b < n; ++b)
            part_want.insert(part_want.end(), want.begin() + (b * c + c0) * hw, want.begin() + (b * c + c0 + ci) * hw);
          EXPECT_TRUE(matches(to_nchw(ys[i], desc(n, ci, h, w, l)), part_want, [](size_t) { return 0.0; }));
        }
        c0 += ci;
      }
    }
  }
}

// ShuffleNetV2's unit ends (two groups of 58, 116 and 232 channels, the first part read
// from a unit input of twice as many channels), groups of every count up to 5 with parts
// that end inside a block or on its edge, under every kernel this CPU supports; then
// planes large enough for 2 threads.
TEST(Ops, ConcatShuffleEveryGroupingEveryKernel) {
  gktest::for_each_kernel([&](const gk::KernelInfo&) {
    for (int64_t per_group : {58, 116, 232}) {
      check_concat_shuffle(1, per_group, 3, 4, {per_group, 0});
      check_concat_shuffle(2, per_group, 2, 3, {0, 0});
    }
    for (int64_t groups = 1; groups <= 5; ++groups)
      for (int64_t per_group = 1; per_group <= (quick() ? 9 : 17); ++per_group) {
        std::vector<int64_t> extra;
        for (int64_t g = 0; g < groups; ++g) extra.push_back((per_group + g) % 3);
        check_concat_shuffle(2, per_group, 2, 3, extra);
        if (::testing::Test::HasFatalFailure()) return;
      }
  });
  Threads th(2);
  expect_two_threads(8.0 * double(2 * 116 * 40 * 43));
  check_concat_shuffle(2, 58, 40, 43, {58, 0});
  // Planes that fit one work item, in a piece per thread: 2 of 98 pixels (ShuffleNetV2's
  // 14x14), 7x7 whole (under 64 pixels a thread), and on 3 threads 3 of 65.
  check_concat_shuffle(1, 116, 14, 14, {0, 0});
  check_concat_shuffle(1, 232, 7, 7, {0, 0});
  Threads three(3);
  EXPECT_GE(gk::ops::threads_for_bytes(8.0 * double(116 * 13 * 15)), 3);
  check_concat_shuffle(1, 58, 13, 15, {58, 0});
}

// Planes of more pixels than one work item's piece in every NCHWx layout, 2 images: the
// lane-mapped blocks in pieces, aligned parts copied piece by piece.
TEST(Ops, ConcatSplitShuffleLargePlanes) {
  const int64_t h = quick() ? 46 : 65, w = quick() ? 45 : 65;
  check_concat_split(2, h, w, {8, 21, 16, 3});
  check_shuffle(2, 24, h, w, 2);
  check_shuffle(2, 30, h, w, 3);
}

// ---------------------------------------------------------------- fully connected

void check_fc(int64_t batch, int64_t in, int64_t out, bool with_bias, gk_activation act, uint32_t seed) {
  SCOPED_TRACE("batch " + std::to_string(batch) + " in " + std::to_string(in) + " out " + std::to_string(out) +
               (with_bias ? " bias" : "") + " act " + std::to_string(int(act)));
  const std::vector<float> x = random_vector(size_t(batch * in), seed, -1.0f, 1.0f);
  const std::vector<float> w = random_vector(size_t(out * in), seed + 1, -1.0f, 1.0f);
  const std::vector<float> bias = random_vector(size_t(out), seed + 2, -2.0f, 2.0f);
  std::vector<double> want, bound;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out; ++o) {
      double acc = with_bias ? bias[size_t(o)] : 0.0, mag = std::fabs(acc);
      for (int64_t i = 0; i < in; ++i) {
        const double p = double(x[size_t(b * in + i)]) * w[size_t(o * in + i)];
        acc += p;
        mag += std::fabs(p);
      }
      want.push_back(act_ref(acc, act));
      bound.push_back((in + 4) * double(FLT_EPSILON) * mag + 1e-30);
    }
  std::vector<float> y(size_t(batch * out), kNaN);
  ASSERT_EQ(gk_fully_connected(batch, in, out, x.data(), w.data(), with_bias ? bias.data() : nullptr, act, y.data()),
            GK_OK)
      << gk_last_error();
  EXPECT_TRUE(matches(y, want, [&](size_t i) { return bound[i]; }));
}

TEST(Ops, FullyConnected) {
  const int64_t sizes[][2] = {{1, 1}, {7, 3}, {64, 10}, {129, 37}, {512, 100}};
  uint32_t seed = 1;
  for (int threads : {1, 2}) {
    Threads th(threads);
    for (int64_t batch = 1; batch <= 5; ++batch)
      for (const auto& s : sizes)
        for (int bias = 0; bias < 2; ++bias)
          for (gk_activation act : kActivations) {
            if (quick() && (seed % 3) != 0 && s[0] > 64) {
              ++seed;
              continue;
            }
            check_fc(batch, s[0], s[1], bias == 1, act, seed++);
            if (HasFatalFailure()) return;
          }
    // A classifier's shape, streamed on the GEMV path at batch 1.
    check_fc(1, quick() ? 256 : 1024, quick() ? 100 : 1000, true, GK_ACT_NONE, 99);
    check_fc(4, quick() ? 256 : 1024, quick() ? 100 : 1000, true, GK_ACT_RELU, 98);
  }
}

// ---------------------------------------------------------------- batch norm folding

struct BnStats {
  std::vector<float> gamma, beta, mean, var;
  float eps;
};
BnStats make_bn(int64_t c, uint32_t seed) {
  BnStats s;
  s.gamma = random_vector(size_t(c), seed, 0.5f, 2.0f);
  for (size_t i = 0; i < s.gamma.size(); i += 3) s.gamma[i] = -s.gamma[i];  // negative scales too
  s.beta = random_vector(size_t(c), seed + 1, -1.0f, 1.0f);
  s.mean = random_vector(size_t(c), seed + 2, -0.5f, 0.5f);
  s.var = random_vector(size_t(c), seed + 3, 0.1f, 3.0f);
  s.eps = 1e-5f;
  return s;
}

// Fold, then a conv plan on the folded weights and bias, against conv then batch norm (and
// the activation) in double.
void check_conv_bn(gk_conv_desc d, bool with_bias, uint32_t seed) {
  SCOPED_TRACE(gktest::describe(d) + (with_bias ? " bias" : ""));
  const gk_activation act = d.activation;
  d.activation = GK_ACT_NONE;
  gktest::ConvCase raw = gktest::make_conv_case(d, with_bias, seed);  // the unfolded layer
  const BnStats bn = make_bn(d.out_channels, seed + 10);
  const int64_t per_channel = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  std::vector<float> w = raw.w, bias = with_bias ? raw.bias : std::vector<float>(size_t(d.out_channels), 0.0f);
  ASSERT_EQ(gk_fold_batch_norm(d.out_channels, per_channel, w.data(), bias.data(), bn.gamma.data(), bn.beta.data(),
                               bn.mean.data(), bn.var.data(), bn.eps),
            GK_OK)
      << gk_last_error();
  std::vector<double> want, bound;
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t oc = 0; oc < d.out_channels; ++oc) {
      const double scale = bn.gamma[size_t(oc)] / std::sqrt(double(bn.var[size_t(oc)]) + bn.eps);
      const double shift = bn.beta[size_t(oc)] - bn.mean[size_t(oc)] * scale;
      for (int64_t oh = 0; oh < raw.oh; ++oh)
        for (int64_t ow = 0; ow < raw.ow; ++ow) {
          double mag = 0;
          const double conv = gktest::reference_output(raw, n, oc, oh, ow, &mag);
          want.push_back(act_ref(conv * scale + shift, act));
          // The folded weights and bias are each rounded once more.
          bound.push_back((per_channel + 8) * double(FLT_EPSILON) * (mag * std::fabs(scale) + std::fabs(shift)) + 1e-6);
        }
    }
  for (gk_layout l : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8}) {
    gk_conv_desc dl = d;
    dl.layout = l;
    dl.activation = act;
    gk_conv_plan* plan = nullptr;
    ASSERT_EQ(gk_conv_plan_create(&dl, w.data(), bias.data(), GK_CONV_ALGO_AUTO, &plan), GK_OK) << gk_last_error();
    const gk_tensor_desc in = desc(d.batch, d.in_channels, d.in_height, d.in_width, l);
    const gk_tensor_desc out = desc(d.batch, d.out_channels, raw.oh, raw.ow, l);
    const std::vector<float> xl = to_layout(raw.x, in, false);
    std::vector<float> y(floats(out), kNaN);
    EXPECT_EQ(gk_conv_run(plan, xl.data(), y.data()), GK_OK) << gk_last_error();
    gk_conv_plan_destroy(plan);
    EXPECT_TRUE(matches(to_nchw(y, out), want, [&](size_t i) { return bound[i]; })) << layout_name(l);
  }
}

TEST(Ops, FoldBatchNormIntoConv) {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 2, d.in_channels = 5, d.in_height = 9, d.in_width = 7, d.out_channels = 11;
  d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
  check_conv_bn(d, true, 1);
  check_conv_bn(d, false, 2);
  d.activation = GK_ACT_RELU;
  check_conv_bn(d, true, 3);
  // Depthwise (groups == channels: one weight plane per output channel), ReLU6.
  d.in_channels = d.out_channels = d.groups = 6;
  d.activation = GK_ACT_RELU6;
  check_conv_bn(d, true, 4);
  // 1x1, stride 2.
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = 16, d.in_height = 6, d.in_width = 5, d.out_channels = 9;
  d.kernel_h = d.kernel_w = 1, d.stride_h = d.stride_w = 2;
  check_conv_bn(d, false, 5);
}

TEST(Ops, FoldBatchNormIntoFullyConnected) {
  const int64_t batch = 3, in = 20, out = 7;
  const std::vector<float> x = random_vector(size_t(batch * in), 1);
  const std::vector<float> w0 = random_vector(size_t(out * in), 2), b0 = random_vector(size_t(out), 3);
  const BnStats bn = make_bn(out, 4);
  std::vector<float> w = w0, b = b0;
  ASSERT_EQ(gk_fold_batch_norm(out, in, w.data(), b.data(), bn.gamma.data(), bn.beta.data(), bn.mean.data(),
                               bn.var.data(), bn.eps),
            GK_OK);
  std::vector<float> y(size_t(batch * out), kNaN);
  ASSERT_EQ(gk_fully_connected(batch, in, out, x.data(), w.data(), b.data(), GK_ACT_NONE, y.data()), GK_OK);
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b0[size_t(o)], mag = std::fabs(acc);
      for (int64_t i = 0; i < in; ++i) {
        acc += double(x[size_t(r * in + i)]) * w0[size_t(o * in + i)];
        mag += std::fabs(double(x[size_t(r * in + i)]) * w0[size_t(o * in + i)]);
      }
      const double scale = bn.gamma[size_t(o)] / std::sqrt(double(bn.var[size_t(o)]) + bn.eps);
      const double want = (acc - bn.mean[size_t(o)]) * scale + bn.beta[size_t(o)];
      EXPECT_NEAR(y[size_t(r * out + o)], want, (in + 8) * FLT_EPSILON * (mag + 1) * (std::fabs(scale) + 1));
    }
}

// ---------------------------------------------------------------- invalid arguments

// Runs `call` on an output buffer of `floats` sentinels: expects `want`, a message, and
// the buffer untouched. A successful call first clears the last error, so the message is
// this call's.
template <typename Call>
void expect_refused(const char* what, size_t count, Call call, gk_status want = GK_ERR_INVALID_ARGUMENT,
                    const char* message_part = nullptr) {
  SCOPED_TRACE(what);
  std::vector<float> clean(8, 1.0f), out(8);
  const gk_tensor_desc t = desc(1, 1, 2, 4, GK_LAYOUT_NCHW);
  ASSERT_EQ(gk_add(&t, clean.data(), clean.data(), out.data(), GK_ACT_NONE), GK_OK);
  ASSERT_STREQ(gk_last_error(), "");
  std::vector<float> y(count, gktest::kSentinel);
  EXPECT_EQ(call(y.data()), want);
  EXPECT_STRNE(gk_last_error(), "");
  if (message_part) {
    EXPECT_NE(std::string(gk_last_error()).find(message_part), std::string::npos) << gk_last_error();
  }
  for (size_t i = 0; i < count; ++i)
    if (y[i] != gktest::kSentinel) {
      ADD_FAILURE() << "output element " << i << " written";
      break;
    }
}

// A layout field holding a value that is no gk_layout (as a C caller could store).
gk_tensor_desc bad_layout_desc(int value) {
  gk_tensor_desc t = desc(1, 3, 4, 4, GK_LAYOUT_NCHW);
  std::memcpy(&t.layout, &value, sizeof value);
  return t;
}

TEST(Ops, PoolRejectsInvalidArguments) {
  const gk_tensor_desc in = desc(1, 3, 4, 4, GK_LAYOUT_NCHW8);
  const std::vector<float> x(floats(in), 1.0f);
  const gk_pool_desc ok = pool_desc(GK_POOL_MAX, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0);
  const size_t out = floats(in);  // 4x4 output
  auto with = [&](gk_pool_desc p) { return [=, &x](float* y) { return gk_pool2d(&in, &p, x.data(), y); }; };
  auto tweak = [&](auto f) {
    gk_pool_desc p = ok;
    f(p);
    return p;
  };
  expect_refused("NULL in", out, [&](float* y) { return gk_pool2d(nullptr, &ok, x.data(), y); }, GK_ERR_INVALID_ARGUMENT, "in");
  expect_refused("NULL pool", out, [&](float* y) { return gk_pool2d(&in, nullptr, x.data(), y); }, GK_ERR_INVALID_ARGUMENT, "pool");
  expect_refused("NULL x", out, [&](float* y) { return gk_pool2d(&in, &ok, nullptr, y); }, GK_ERR_INVALID_ARGUMENT, "x");
  EXPECT_EQ(gk_pool2d(&in, &ok, x.data(), nullptr), GK_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(gk_last_error(), "");
  const gk_tensor_desc bad_layout = bad_layout_desc(7);
  expect_refused("unknown layout", out, [&](float* y) { return gk_pool2d(&bad_layout, &ok, x.data(), y); },
                 GK_ERR_INVALID_ARGUMENT, "layout");
  for (int field = 0; field < 4; ++field) {
    gk_tensor_desc t = in;
    int64_t& v = field == 0 ? t.n : field == 1 ? t.c : field == 2 ? t.h : t.w;
    v = field == 1 ? -1 : 0;
    expect_refused("n, c, h or w < 1", out, [&](float* y) { return gk_pool2d(&t, &ok, x.data(), y); });
  }
  const gk_tensor_desc huge = desc(int64_t{1} << 40, int64_t{1} << 30, 4, 4, GK_LAYOUT_NCHW);
  expect_refused("overflowing size", out, [&](float* y) { return gk_pool2d(&huge, &ok, x.data(), y); },
                 GK_ERR_INVALID_ARGUMENT, "2^62");
  const gk_tensor_desc big = desc(int64_t{1} << 30, int64_t{1} << 20, 2048, 1, GK_LAYOUT_NCHW);  // 2^61 floats
  expect_refused("size past 2^62 bytes", out, [&](float* y) { return gk_pool2d(&big, &ok, x.data(), y); });
  expect_refused("unknown kind", out, with(tweak([](gk_pool_desc& p) {
                   int v = 2;
                   std::memcpy(&p.kind, &v, sizeof v);
                 })), GK_ERR_INVALID_ARGUMENT, "kind");
  expect_refused("kernel 0", out, with(tweak([](gk_pool_desc& p) { p.kernel_w = 0; })));
  expect_refused("stride 0", out, with(tweak([](gk_pool_desc& p) { p.stride_h = 0; })));
  expect_refused("negative stride", out, with(tweak([](gk_pool_desc& p) { p.stride_w = -2; })));
  expect_refused("negative pad", out, with(tweak([](gk_pool_desc& p) { p.pad_left = -1; })), GK_ERR_INVALID_ARGUMENT,
                 "pad_left");
  expect_refused("pad > kernel / 2", out, with(tweak([](gk_pool_desc& p) { p.pad_bottom = 2; })),
                 GK_ERR_INVALID_ARGUMENT, "pad_bottom");
  expect_refused("huge pad", out, with(tweak([](gk_pool_desc& p) {
                   p.kernel_h = INT64_MAX, p.pad_top = p.pad_bottom = INT64_MAX / 2;
                 })));
  expect_refused("ceil_mode 2", out, with(tweak([](gk_pool_desc& p) { p.ceil_mode = 2; })), GK_ERR_INVALID_ARGUMENT,
                 "ceil_mode");
  expect_refused("count_include_pad -1", out, with(tweak([](gk_pool_desc& p) { p.count_include_pad = -1; })));
  expect_refused("window larger than the padded input", out, with(tweak([](gk_pool_desc& p) {
                   p.kernel_h = p.kernel_w = 7, p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
                 })), GK_ERR_INVALID_ARGUMENT, "window 7x7 larger than the padded input 6x6");
  // y overlapping x.
  std::vector<float> buf(floats(in) * 2, 1.0f);
  expect_refused("y overlaps x", 1, [&](float*) { return gk_pool2d(&in, &ok, buf.data(), buf.data() + 8); },
                 GK_ERR_INVALID_ARGUMENT, "overlaps");
  // gk_pool2d_output_size leaves its outputs alone on error.
  int64_t oh = -7, ow = -7;
  gk_pool_desc bad = ok;
  bad.stride_h = 0;
  EXPECT_EQ(gk_pool2d_output_size(&in, &bad, &oh, &ow), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oh, -7);
  EXPECT_EQ(ow, -7);
  EXPECT_EQ(gk_pool2d_output_size(&in, &ok, nullptr, &ow), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ow, -7);
  // A valid call clears the error.
  EXPECT_EQ(gk_pool2d_output_size(&in, &ok, &oh, &ow), GK_OK);
  EXPECT_STREQ(gk_last_error(), "");
}

TEST(Ops, GlobalAvgPoolAndAddRejectInvalidArguments) {
  const gk_tensor_desc t = desc(2, 5, 3, 3, GK_LAYOUT_NCHW4);
  const size_t n = floats(t);
  const std::vector<float> a(n, 1.0f), b(n, 2.0f);
  expect_refused("gap NULL in", 16, [&](float* y) { return gk_global_avg_pool(nullptr, a.data(), y); });
  expect_refused("gap NULL x", 16, [&](float* y) { return gk_global_avg_pool(&t, nullptr, y); });
  const gk_tensor_desc bad_layout = bad_layout_desc(-1);
  expect_refused("gap unknown layout", 16, [&](float* y) { return gk_global_avg_pool(&bad_layout, a.data(), y); });
  const gk_tensor_desc zero_w = desc(2, 5, 3, 0, GK_LAYOUT_NCHW4);
  expect_refused("gap w 0", 16, [&](float* y) { return gk_global_avg_pool(&zero_w, a.data(), y); });
  std::vector<float> buf(n + 16, 1.0f);
  expect_refused("gap y overlaps x", 1, [&](float*) { return gk_global_avg_pool(&t, buf.data(), buf.data() + n - 1); });

  expect_refused("add NULL t", n, [&](float* y) { return gk_add(nullptr, a.data(), b.data(), y, GK_ACT_NONE); });
  expect_refused("add NULL a", n, [&](float* y) { return gk_add(&t, nullptr, b.data(), y, GK_ACT_NONE); });
  expect_refused("add NULL b", n, [&](float* y) { return gk_add(&t, a.data(), nullptr, y, GK_ACT_NONE); });
  gk_activation bad_act;
  const int v = 3;
  std::memcpy(&bad_act, &v, sizeof v);
  expect_refused("add unknown activation", n, [&](float* y) { return gk_add(&t, a.data(), b.data(), y, bad_act); },
                 GK_ERR_INVALID_ARGUMENT, "activation");
  const gk_tensor_desc huge = desc(int64_t{1} << 62, 4, 4, 4, GK_LAYOUT_NCHW);
  expect_refused("add overflowing size", n, [&](float* y) { return gk_add(&huge, a.data(), b.data(), y, GK_ACT_NONE); });
  // y overlapping a (or b) other than exactly: refused, nothing written.
  std::vector<float> big(2 * n, gktest::kSentinel);
  const std::vector<float> before = big;
  EXPECT_EQ(gk_add(&t, big.data(), b.data(), big.data() + 1, GK_ACT_NONE), GK_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(gk_last_error(), "");
  EXPECT_EQ(gk_add(&t, a.data(), big.data() + n - 1, big.data(), GK_ACT_RELU), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gk_add(&t, big.data(), big.data() + 3, big.data(), GK_ACT_RELU), GK_ERR_INVALID_ARGUMENT);  // y == a, overlaps b
  EXPECT_EQ(0, std::memcmp(big.data(), before.data(), big.size() * sizeof(float)));
}

TEST(Ops, ConcatSplitShuffleRejectInvalidArguments) {
  const gk_tensor_desc p0 = desc(1, 3, 2, 2, GK_LAYOUT_NCHW8), p1 = desc(1, 6, 2, 2, GK_LAYOUT_NCHW8);
  const gk_tensor_desc out = desc(1, 9, 2, 2, GK_LAYOUT_NCHW8);
  const std::vector<float> x0(floats(p0), 1.0f), x1(floats(p1), 2.0f);
  const gk_tensor_desc parts[] = {p0, p1};
  const float* xs[] = {x0.data(), x1.data()};
  const size_t n = floats(out);
  expect_refused("count 0", n, [&](float* y) { return gk_concat_channels(0, parts, xs, &out, y); });
  expect_refused("count -1", n, [&](float* y) { return gk_concat_channels(-1, parts, xs, &out, y); });
  expect_refused("NULL parts", n, [&](float* y) { return gk_concat_channels(2, nullptr, xs, &out, y); });
  expect_refused("NULL xs", n, [&](float* y) { return gk_concat_channels(2, parts, nullptr, &out, y); });
  expect_refused("NULL out", n, [&](float* y) { return gk_concat_channels(2, parts, xs, nullptr, y); });
  const float* xs_null[] = {x0.data(), nullptr};
  expect_refused("NULL xs[1]", n, [&](float* y) { return gk_concat_channels(2, parts, xs_null, &out, y); },
                 GK_ERR_INVALID_ARGUMENT, "xs[1]");
  const gk_tensor_desc wrong_h[] = {p0, desc(1, 6, 3, 2, GK_LAYOUT_NCHW8)};
  expect_refused("part h differs", n, [&](float* y) { return gk_concat_channels(2, wrong_h, xs, &out, y); },
                 GK_ERR_INVALID_ARGUMENT, "parts[1]");
  const gk_tensor_desc wrong_layout[] = {p0, desc(1, 6, 2, 2, GK_LAYOUT_NCHW4)};
  expect_refused("part layout differs", n, [&](float* y) { return gk_concat_channels(2, wrong_layout, xs, &out, y); });
  const gk_tensor_desc too_many[] = {p0, desc(1, 7, 2, 2, GK_LAYOUT_NCHW8)};
  expect_refused("channels sum too large", n, [&](float* y) { return gk_concat_channels(2, too_many, xs, &out, y); });
  expect_refused("channels sum too small", n, [&](float* y) { return gk_concat_channels(1, parts, xs, &out, y); });
  const gk_tensor_desc zero_c[] = {p0, desc(1, 0, 2, 2, GK_LAYOUT_NCHW8)};
  expect_refused("part with 0 channels", n, [&](float* y) { return gk_concat_channels(2, zero_c, xs, &out, y); });
  std::vector<float> shared(n + floats(p0), 1.0f);
  const float* xs_overlap[] = {shared.data() + n - 4, x1.data()};
  expect_refused("y overlaps a part", 1, [&](float*) { return gk_concat_channels(2, parts, xs_overlap, &out, shared.data()); });

  // Split.
  const std::vector<float> x(n, 1.0f);
  const int64_t channels[] = {3, 6};
  std::vector<float> y0(floats(p0), gktest::kSentinel), y1(floats(p1), gktest::kSentinel);
  auto untouched = [&] {
    for (float v : y0) EXPECT_EQ(v, gktest::kSentinel);
    for (float v : y1) EXPECT_EQ(v, gktest::kSentinel);
  };
  float* ys[] = {y0.data(), y1.data()};
  auto split = [&](const gk_tensor_desc* in, const float* xp, int count, const int64_t* ch, float* const* yp,
                   const char* part) {
    SCOPED_TRACE(part);
    EXPECT_EQ(gk_split_channels(in, xp, count, ch, yp), GK_ERR_INVALID_ARGUMENT);
    EXPECT_STRNE(gk_last_error(), "");
    untouched();
  };
  split(nullptr, x.data(), 2, channels, ys, "NULL in");
  split(&out, nullptr, 2, channels, ys, "NULL x");
  split(&out, x.data(), 0, channels, ys, "count 0");
  split(&out, x.data(), 2, nullptr, ys, "NULL channels");
  split(&out, x.data(), 2, channels, nullptr, "NULL ys");
  const int64_t zero[] = {0, 9}, short_sum[] = {3, 5}, long_sum[] = {3, 7}, negative[] = {-1, 10};
  split(&out, x.data(), 2, zero, ys, "channels[0] 0");
  split(&out, x.data(), 2, short_sum, ys, "sum 8");
  split(&out, x.data(), 2, long_sum, ys, "sum 10");
  split(&out, x.data(), 2, negative, ys, "negative channels");
  float* ys_null[] = {y0.data(), nullptr};
  split(&out, x.data(), 2, long_sum, ys_null, "NULL ys[1], sum 10");  // a skipped part is still checked
  float* ys_same[] = {y1.data(), y1.data()};
  split(&out, x.data(), 2, channels, ys_same, "ys[0] overlaps ys[1]");
  std::vector<float> xy(n + floats(p0), 1.0f);
  float* ys_in_x[] = {xy.data() + n - 1, y1.data()};
  split(&out, xy.data(), 2, channels, ys_in_x, "ys[0] overlaps x");

  // Shuffle.
  const gk_tensor_desc t = desc(1, 6, 2, 2, GK_LAYOUT_NHWC);
  const std::vector<float> xt(floats(t), 1.0f);
  expect_refused("shuffle groups 0", floats(t), [&](float* y) { return gk_channel_shuffle(&t, 0, xt.data(), y); },
                 GK_ERR_INVALID_ARGUMENT, "groups");
  expect_refused("shuffle groups 4 of 6", floats(t), [&](float* y) { return gk_channel_shuffle(&t, 4, xt.data(), y); });
  expect_refused("shuffle NULL x", floats(t), [&](float* y) { return gk_channel_shuffle(&t, 2, nullptr, y); });
  expect_refused("shuffle NULL t", floats(t), [&](float* y) { return gk_channel_shuffle(nullptr, 2, xt.data(), y); });
  std::vector<float> inplace(floats(t), gktest::kSentinel);
  EXPECT_EQ(gk_channel_shuffle(&t, 2, inplace.data(), inplace.data()), GK_ERR_INVALID_ARGUMENT);
  for (float v : inplace) EXPECT_EQ(v, gktest::kSentinel);
}

TEST(Ops, ConcatShuffleRejectsInvalidArguments) {
  const gk_tensor_desc p0 = desc(1, 10, 2, 2, GK_LAYOUT_NCHW8), p1 = desc(1, 5, 2, 2, GK_LAYOUT_NCHW8);
  const gk_tensor_desc out = desc(1, 10, 2, 2, GK_LAYOUT_NCHW8);
  const std::vector<float> x0(floats(p0), 1.0f), x1(floats(p1), 2.0f);
  const gk_tensor_desc parts[] = {p0, p1};
  const float* xs[] = {x0.data(), x1.data()};
  const size_t n = floats(out);
  auto run = [&](int64_t groups, const gk_tensor_desc* pp, const float* const* xp, const gk_tensor_desc* o) {
    return [=](float* y) { return gk_concat_shuffle_channels(groups, pp, xp, o, y); };
  };
  expect_refused("groups 0", n, run(0, parts, xs, &out), GK_ERR_INVALID_ARGUMENT, "groups");
  expect_refused("groups 3 of 10", n, run(3, parts, xs, &out), GK_ERR_INVALID_ARGUMENT, "groups");
  expect_refused("groups 20 of 10", n, run(20, parts, xs, &out), GK_ERR_INVALID_ARGUMENT, "groups");
  expect_refused("NULL parts", n, run(2, nullptr, xs, &out));
  expect_refused("NULL xs", n, run(2, parts, nullptr, &out));
  expect_refused("NULL out", n, run(2, parts, xs, nullptr));
  const float* xs_null[] = {x0.data(), nullptr};
  expect_refused("NULL xs[1]", n, run(2, parts, xs_null, &out), GK_ERR_INVALID_ARGUMENT, "xs[1]");
  const gk_tensor_desc few[] = {p0, desc(1, 4, 2, 2, GK_LAYOUT_NCHW8)};
  expect_refused("part with fewer than c / groups channels", n, run(2, few, xs, &out), GK_ERR_INVALID_ARGUMENT,
                 "parts[1]");
  const gk_tensor_desc wrong_w[] = {p0, desc(1, 5, 2, 3, GK_LAYOUT_NCHW8)};
  expect_refused("part w differs", n, run(2, wrong_w, xs, &out), GK_ERR_INVALID_ARGUMENT, "parts[1]");
  const gk_tensor_desc wrong_layout[] = {desc(1, 10, 2, 2, GK_LAYOUT_NHWC), p1};
  expect_refused("part layout differs", n, run(2, wrong_layout, xs, &out), GK_ERR_INVALID_ARGUMENT, "parts[0]");
  std::vector<float> shared(n + floats(p1), 1.0f);
  const float* xs_overlap[] = {x0.data(), shared.data() + n - 4};
  expect_refused("y overlaps a part", 1, [&](float*) {
    return gk_concat_shuffle_channels(2, parts, xs_overlap, &out, shared.data());
  });
}

// gk_concat_shuffle_split_channels: the parts checked as gk_concat_shuffle_channels checks
// them, the split as gk_split_channels checks it, its outputs against every part; on each
// refusal a message and both outputs untouched.
TEST(Ops, ConcatShuffleSplitRejectsInvalidArguments) {
  const gk_tensor_desc p0 = desc(1, 10, 2, 2, GK_LAYOUT_NCHW8), p1 = desc(1, 5, 2, 2, GK_LAYOUT_NCHW8);
  const gk_tensor_desc out = desc(1, 10, 2, 2, GK_LAYOUT_NCHW8);
  const std::vector<float> x0(floats(p0), 1.0f), x1(floats(p1), 2.0f);
  const gk_tensor_desc parts[] = {p0, p1};
  const float* xs[] = {x0.data(), x1.data()};
  const int64_t halves[] = {5, 5};
  std::vector<float> y0(floats(desc(1, 5, 2, 2, GK_LAYOUT_NCHW8)), gktest::kSentinel), y1(y0);
  float* ys[] = {y0.data(), y1.data()};
  auto refused = [&](const char* what, int64_t groups, const gk_tensor_desc* pp, const float* const* xp,
                     const gk_tensor_desc* o, int count, const int64_t* ch, float* const* yp, const char* part) {
    SCOPED_TRACE(what);
    EXPECT_EQ(gk_concat_shuffle_split_channels(groups, pp, xp, o, count, ch, yp), GK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gk_last_error()).find(part), std::string::npos) << gk_last_error();
    for (float v : y0) EXPECT_EQ(v, gktest::kSentinel);
    for (float v : y1) EXPECT_EQ(v, gktest::kSentinel);
  };
  refused("groups 3 of 10", 3, parts, xs, &out, 2, halves, ys, "groups");
  refused("NULL parts", 2, nullptr, xs, &out, 2, halves, ys, "parts");
  refused("NULL out", 2, parts, xs, nullptr, 2, halves, ys, "out");
  const float* xs_null[] = {x0.data(), nullptr};
  refused("NULL xs[1]", 2, parts, xs_null, &out, 2, halves, ys, "xs[1]");
  const gk_tensor_desc few[] = {p0, desc(1, 4, 2, 2, GK_LAYOUT_NCHW8)};
  refused("part with fewer than c / groups channels", 2, few, xs, &out, 2, halves, ys, "parts[1]");
  refused("count 0", 2, parts, xs, &out, 0, halves, ys, "count");
  refused("NULL channels", 2, parts, xs, &out, 2, nullptr, ys, "channels");
  refused("NULL ys", 2, parts, xs, &out, 2, halves, nullptr, "ys");
  const int64_t short_sum[] = {5, 4}, zero[] = {0, 10};
  refused("channels sum to 9", 2, parts, xs, &out, 2, short_sum, ys, "sum");
  refused("channels[0] 0", 2, parts, xs, &out, 2, zero, ys, "channels[0]");
  float* ys_same[] = {y1.data(), y1.data()};
  refused("ys[0] overlaps ys[1]", 2, parts, xs, &out, 2, halves, ys_same, "ys[1]");
  std::vector<float> shared(floats(p1) + y0.size(), 1.0f);
  const float* xs_overlap[] = {x0.data(), shared.data()};
  float* ys_in_part[] = {y0.data(), shared.data() + floats(p1) - 1};
  refused("ys[1] overlaps xs[1]", 2, parts, xs_overlap, &out, 2, halves, ys_in_part, "xs[1]");
  std::vector<float> shared0(floats(p0) + y0.size(), 1.0f);
  const float* xs_overlap0[] = {shared0.data(), x1.data()};
  float* ys_in_part0[] = {shared0.data() + floats(p0) - 1, y1.data()};
  refused("ys[0] overlaps xs[0]", 2, parts, xs_overlap0, &out, 2, halves, ys_in_part0, "xs[0]");
  const gk_tensor_desc wrong_layout[] = {desc(1, 10, 2, 2, GK_LAYOUT_NHWC), p1};
  refused("part layout differs", 2, wrong_layout, xs, &out, 2, halves, ys, "parts[0]");
}

TEST(Ops, FullyConnectedAndFoldRejectInvalidArguments) {
  const std::vector<float> x(12, 1.0f), w(24, 1.0f), bias(6, 0.5f);
  const size_t n = 12;  // batch 2 x out 6
  auto fc = [&](int64_t batch, int64_t in, int64_t out, const float* xp, const float* wp, const float* bp,
                gk_activation act) {
    return [=](float* y) { return gk_fully_connected(batch, in, out, xp, wp, bp, act, y); };
  };
  expect_refused("batch 0", n, fc(0, 4, 6, x.data(), w.data(), nullptr, GK_ACT_NONE), GK_ERR_INVALID_ARGUMENT, "batch");
  expect_refused("in 0", n, fc(2, 0, 6, x.data(), w.data(), nullptr, GK_ACT_NONE));
  expect_refused("out -1", n, fc(2, 4, -1, x.data(), w.data(), nullptr, GK_ACT_NONE));
  expect_refused("NULL x", n, fc(2, 4, 6, nullptr, w.data(), nullptr, GK_ACT_NONE));
  expect_refused("NULL weights", n, fc(2, 4, 6, x.data(), nullptr, nullptr, GK_ACT_NONE), GK_ERR_INVALID_ARGUMENT,
                 "weights");
  gk_activation bad_act;
  const int v = 3;  // (a value outside the enum's range would be undefined in C++ already)
  std::memcpy(&bad_act, &v, sizeof v);
  expect_refused("unknown activation", n, fc(2, 4, 6, x.data(), w.data(), nullptr, bad_act));
  expect_refused("overflowing weights", n, fc(2, int64_t{1} << 40, int64_t{1} << 40, x.data(), w.data(), nullptr,
                                              GK_ACT_NONE), GK_ERR_INVALID_ARGUMENT, "2^62");
  EXPECT_EQ(gk_fully_connected(2, 4, 6, x.data(), w.data(), nullptr, GK_ACT_NONE, nullptr), GK_ERR_INVALID_ARGUMENT);
  std::vector<float> buf(40, gktest::kSentinel);
  const std::vector<float> before = buf;
  EXPECT_EQ(gk_fully_connected(2, 4, 6, buf.data(), w.data(), nullptr, GK_ACT_NONE, buf.data() + 4),
            GK_ERR_INVALID_ARGUMENT);  // y overlaps x
  EXPECT_EQ(gk_fully_connected(2, 4, 6, x.data(), buf.data(), nullptr, GK_ACT_NONE, buf.data() + 20),
            GK_ERR_INVALID_ARGUMENT);  // y overlaps weights
  EXPECT_EQ(0, std::memcmp(buf.data(), before.data(), buf.size() * sizeof(float)));

  // Batch norm folding: weights and bias untouched on error.
  const BnStats bn = make_bn(6, 1);
  std::vector<float> wf(24, 1.0f), bf(6, 0.5f);
  auto fold_refused = [&](const char* what, int64_t out, int64_t per, float* wp, float* bp, const float* g,
                          const float* be, const float* m, const float* var, float eps, const char* part = nullptr) {
    SCOPED_TRACE(what);
    const std::vector<float> w0 = wf, b0 = bf;
    EXPECT_EQ(gk_fold_batch_norm(out, per, wp, bp, g, be, m, var, eps), GK_ERR_INVALID_ARGUMENT);
    EXPECT_STRNE(gk_last_error(), "");
    if (part) {
      EXPECT_NE(std::string(gk_last_error()).find(part), std::string::npos) << gk_last_error();
    }
    EXPECT_EQ(wf, w0);
    EXPECT_EQ(bf, b0);
  };
  const float *g = bn.gamma.data(), *be = bn.beta.data(), *m = bn.mean.data();
  std::vector<float> var = bn.var;
  fold_refused("out 0", 0, 4, wf.data(), bf.data(), g, be, m, var.data(), 1e-5f);
  fold_refused("per channel 0", 6, 0, wf.data(), bf.data(), g, be, m, var.data(), 1e-5f);
  fold_refused("NULL weights", 6, 4, nullptr, bf.data(), g, be, m, var.data(), 1e-5f, "weights");
  fold_refused("NULL bias", 6, 4, wf.data(), nullptr, g, be, m, var.data(), 1e-5f, "bias");
  fold_refused("NULL gamma", 6, 4, wf.data(), bf.data(), nullptr, be, m, var.data(), 1e-5f, "gamma");
  fold_refused("NULL beta", 6, 4, wf.data(), bf.data(), g, nullptr, m, var.data(), 1e-5f, "beta");
  fold_refused("NULL mean", 6, 4, wf.data(), bf.data(), g, be, nullptr, var.data(), 1e-5f, "mean");
  fold_refused("NULL var", 6, 4, wf.data(), bf.data(), g, be, m, nullptr, 1e-5f, "var");
  fold_refused("eps < 0", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), -1e-5f, "eps");
  fold_refused("eps NaN", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), kNaN, "eps");
  fold_refused("eps inf", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), INFINITY, "eps");
  var[5] = -1.0f;  // the last channel: nothing of the earlier ones may be written either
  fold_refused("var + eps < 0", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), 0.5f, "var[5]");
  var[5] = 0.0f;
  fold_refused("var + eps == 0", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), 0.0f, "var[5]");
  var[5] = kNaN;
  fold_refused("var NaN", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), 1e-5f);
  var[5] = INFINITY;
  fold_refused("var inf", 6, 4, wf.data(), bf.data(), g, be, m, var.data(), 1e-5f);
  var[5] = 1.0f;
  fold_refused("bias overlaps weights", 6, 4, wf.data(), wf.data() + 20, g, be, m, var.data(), 1e-5f);
  fold_refused("weights overlap var", 6, 4, wf.data(), bf.data(), g, be, m, wf.data() + 3, 1e-5f);
  fold_refused("overflowing weights", int64_t{1} << 40, int64_t{1} << 40, wf.data(), bf.data(), g, be, m, var.data(),
               1e-5f, "2^62");
  // eps 0 with var > 0 is fine.
  EXPECT_EQ(gk_fold_batch_norm(6, 4, wf.data(), bf.data(), g, be, m, var.data(), 0.0f), GK_OK);
  EXPECT_STREQ(gk_last_error(), "");
}

}  // namespace
