// The contract with the caller (DESIGN.md) on the convolution side: a run never aborts
// (its workspace is taken before the work is split, GK_ERR_OUT_OF_MEMORY otherwise), a
// steady-state run allocates nothing, and descriptors whose sizes exceed what a process can
// address are refused naming the field. Checks that could crash run in a child process
// (test/programs/child_process.h, shared with the GEMM side's test/test_reliability.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/runtime.h"
#include "conv/conv.h"
#include "conv/fastrun.h"
#include "conv_test_util.h"
#include "gemm/gemm.h"
#include "gemmkit.h"
#include "programs/child_process.h"
#include "programs/conv_cases.h"

namespace {

using namespace child_process;

gk_conv_desc small_desc() {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = 4, d.in_height = 8, d.in_width = 8, d.out_channels = 4;
  d.kernel_h = d.kernel_w = 3;
  return d;
}

// The desc's int64 fields, by name, for the oversized-descriptor checks.
struct Field {
  const char* name;
  int64_t gk_conv_desc::*member;
  bool zero_is_invalid;
};
const Field kFields[] = {
    {"batch", &gk_conv_desc::batch, true},           {"in_channels", &gk_conv_desc::in_channels, true},
    {"in_height", &gk_conv_desc::in_height, true},   {"in_width", &gk_conv_desc::in_width, true},
    {"out_channels", &gk_conv_desc::out_channels, true}, {"kernel_h", &gk_conv_desc::kernel_h, true},
    {"kernel_w", &gk_conv_desc::kernel_w, true},     {"stride_h", &gk_conv_desc::stride_h, true},
    {"stride_w", &gk_conv_desc::stride_w, true},     {"dilation_h", &gk_conv_desc::dilation_h, true},
    {"dilation_w", &gk_conv_desc::dilation_w, true}, {"pad_top", &gk_conv_desc::pad_top, false},
    {"pad_left", &gk_conv_desc::pad_left, false},    {"pad_bottom", &gk_conv_desc::pad_bottom, false},
    {"pad_right", &gk_conv_desc::pad_right, false},  {"groups", &gk_conv_desc::groups, true},
};

// Every int64 field at 2^62 (past the 2^31 field limit) is refused naming it; at -1 (and 0
// where a size must be positive) refused. Validation only: nothing is allocated.
TEST(ConvReliabilityDescriptors, OversizedAndNegativeFieldsRefusedNamingTheField) {
  std::vector<float> w(4 * 4 * 9, 0.0f);
  for (const Field& f : kFields) {
    for (int64_t v : {int64_t{1} << 62, int64_t{-1}, int64_t{0}}) {
      if (v == 0 && !f.zero_is_invalid) continue;
      gk_conv_desc d = small_desc();
      d.*f.member = v;
      int64_t oh = 0, ow = 0;
      EXPECT_EQ(gk_conv_output_size(&d, &oh, &ow), GK_ERR_INVALID_ARGUMENT) << f.name << " = " << v;
      gk_conv_plan* plan = nullptr;
      EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_AUTO, &plan), GK_ERR_INVALID_ARGUMENT)
          << f.name << " = " << v;
      EXPECT_EQ(plan, nullptr);
      const std::string message = gk_last_error();
      if (v > 0) {
        EXPECT_NE(message.find(f.name), std::string::npos) << f.name << ": " << message;
      }
    }
  }
}

// Products past 2^56 bytes are refused although each field is within 2^31: the issue's
// in_height = in_width = 2^31, and the same through the tensor helpers.
TEST(ConvReliabilityDescriptors, TensorsPastTheAddressSpaceRefused) {
  std::vector<float> w(4 * 4 * 9, 0.0f);
  gk_conv_desc d = small_desc();
  d.in_height = d.in_width = int64_t{1} << 31;
  for (gk_conv_algo algo : {GK_CONV_ALGO_AUTO, GK_CONV_ALGO_IM2COL_GEMM, GK_CONV_ALGO_DIRECT}) {
    gk_conv_plan* plan = nullptr;
    EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, algo, &plan), GK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gk_last_error()).find("in_height"), std::string::npos) << gk_last_error();
    EXPECT_EQ(plan, nullptr);
  }
  const int64_t big = int64_t{1} << 31;
  EXPECT_EQ(gk_tensor_size(GK_LAYOUT_NCHW, 1, 1, big, big), -1);
  EXPECT_EQ(gk_tensor_size(GK_LAYOUT_NCHW8, big, big, big, big), -1);
  EXPECT_EQ(gk_tensor_size(GK_LAYOUT_NHWC, 1, 3, 224, 224), 3 * 224 * 224);
  float x = 0, y = 0;
  EXPECT_EQ(gk_convert_layout(&x, GK_LAYOUT_NCHW, &y, GK_LAYOUT_NHWC, 1, 1, big, big), GK_ERR_INVALID_ARGUMENT);
}

// gk_conv_run_with_workspace refuses a misaligned or short workspace naming the sizes, and
// runs in one of gk_conv_plan_workspace_size bytes.
TEST(ConvReliabilityWorkspace, AlignmentAndSizeChecked) {
  gk_conv_desc d = small_desc();
  d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 1;
  std::vector<float> w(4 * 4 * 9, 0.5f), x(4 * 64, 1.0f), y(4 * 64), y2(4 * 64);
  gk_conv_plan* plan = nullptr;
  ASSERT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, GK_CONV_ALGO_IM2COL_GEMM, &plan), GK_OK);
  const int64_t bytes = gk_conv_plan_workspace_size(plan);
  ASSERT_GT(bytes, 0);
  void* ws = nullptr;
  ASSERT_EQ(posix_memalign(&ws, 64, static_cast<size_t>(bytes) + 64), 0);
  EXPECT_EQ(gk_conv_run_with_workspace(plan, x.data(), y.data(), static_cast<char*>(ws) + 4, bytes),
            GK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("aligned"), std::string::npos) << gk_last_error();
  EXPECT_EQ(gk_conv_run_with_workspace(plan, x.data(), y.data(), ws, bytes - 1), GK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find(std::to_string(bytes)), std::string::npos) << gk_last_error();
  EXPECT_EQ(gk_conv_run_with_workspace(plan, x.data(), y.data(), ws, bytes), GK_OK);
  EXPECT_EQ(gk_conv_run(plan, x.data(), y2.data()), GK_OK);
  EXPECT_EQ(y, y2);
  std::free(ws);
  gk_conv_plan_destroy(plan);
}

// The fuzzers' seconds: GEMMKIT_TEST_FUZZ_S (default 8) in all, 5/8 for descriptors and
// 3/8 for Fast-Run cache files.
double fuzz_seconds(double share) {
  const char* env = std::getenv("GEMMKIT_TEST_FUZZ_S");
  return (env && std::atof(env) > 0 ? std::atof(env) : 8.0) * share;
}

// Random and mutated descriptors through gk_conv_output_size, gk_tensor_size and plan
// creation with every algorithm (plans whose tensors are small are run), in a forked child
// for 5/8 of GEMMKIT_TEST_FUZZ_S seconds (default 5): no crash, every status a known one.
TEST(ConvReliabilityFuzz, RandomDescriptorsNeverCrash) {
  const double seconds = fuzz_seconds(5.0 / 8);
  const ChildResult r = run_in_child([seconds]() -> std::string {
    std::mt19937_64 rng(18);
#if defined(__SANITIZE_ADDRESS__)
    // ASan ends the process on an allocation it cannot serve instead of throwing bad_alloc,
    // and a small tensor with a padding of 2^31 makes plan creation ask for hundreds of GB
    // (GK_ERR_OUT_OF_MEMORY in a normal build): no huge values here.
    const int64_t specials[] = {0, 1, 2, 3, -1, INT64_MIN, 7, 16};
#else
    const int64_t specials[] = {0, 1, 2, 3, -1, int64_t{1} << 31, int64_t{1} << 62, INT64_MAX, INT64_MIN, 7, 16};
#endif
    auto pick = [&](int64_t small_max) -> int64_t {
      return rng() % 4 == 0 ? specials[rng() % (sizeof specials / sizeof *specials)]
                            : static_cast<int64_t>(rng() % static_cast<uint64_t>(small_max + 1));
    };
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    long runs = 0;
    while (std::chrono::steady_clock::now() < end) {
      gk_conv_desc d = small_desc();
      for (const Field& f : kFields)
        if (rng() % 3 == 0) d.*f.member = pick(f.member == &gk_conv_desc::groups ? 4 : 9);
      // Unknown layouts as a C caller can pass them: stored as bytes, never loaded as the
      // enum here (a value outside its range is undefined in C++; UBSan stops on it).
      if (rng() % 8 == 0) {
        const int raw = static_cast<int>(rng() % 7) - 1;
        std::memcpy(&d.layout, &raw, sizeof raw);
      }
      int raw_layout = 0;
      std::memcpy(&raw_layout, &d.layout, sizeof raw_layout);
      const bool known_layout = raw_layout >= GK_LAYOUT_NCHW && raw_layout <= GK_LAYOUT_NCHW16;
      if (rng() % 8 == 0) d.flags = static_cast<uint32_t>(rng() % 9);
      int64_t oh = 0, ow = 0;
      const gk_status st = gk_conv_output_size(&d, &oh, &ow);
      if (known_layout) (void)gk_tensor_size(d.layout, d.batch, d.in_channels, d.in_height, d.in_width);
      if (st != GK_OK || !known_layout) continue;
      const int64_t in = gk_tensor_size(d.layout, d.batch, d.in_channels, d.in_height, d.in_width);
      const int64_t out = gk_tensor_size(d.layout, d.batch, d.out_channels, oh, ow);
      const int64_t wn = d.out_channels * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w;
      if (in < 0 || out < 0 || in > (1 << 16) || out > (1 << 16) || wn > (1 << 16)) continue;  // small tensors only
      std::vector<float> w(static_cast<size_t>(wn), 0.5f), x(static_cast<size_t>(in), 1.0f),
          y(static_cast<size_t>(out), 0.0f);
      for (int a = GK_CONV_ALGO_AUTO; a <= GK_CONV_ALGO_WINOGRAD_F63; ++a) {
        if (a == GK_CONV_ALGO_FASTRUN) continue;  // timing: too slow for a fuzz loop
        gk_conv_plan* plan = nullptr;
        const gk_status c = gk_conv_plan_create(&d, w.data(), nullptr, static_cast<gk_conv_algo>(a), &plan);
        // A descriptor may need more memory than there is (padding of 2^31): a status too.
        if (c != GK_OK && c != GK_ERR_UNSUPPORTED && c != GK_ERR_OUT_OF_MEMORY)
          return "plan creation: status " + std::to_string(c) + ": " + gk_last_error();
        if (!plan) continue;
        // Small tensors may still need a huge workspace (padding of 2^31): such a run is a
        // status when the memory is refused, but minutes of page faults when the system
        // grants it, so only plans with a bounded workspace run.
        if (gk_conv_plan_workspace_size(plan) > (int64_t{64} << 20)) {
          gk_conv_plan_destroy(plan);
          continue;
        }
        const gk_status run = gk_conv_run(plan, x.data(), y.data());
        if (run != GK_OK && run != GK_ERR_OUT_OF_MEMORY) return std::string("run: ") + gk_last_error();
        gk_conv_plan_destroy(plan);
        ++runs;
      }
    }
    std::printf("%ld fuzzed plans run\n", runs);
    std::fflush(stdout);
    return "";
  }, static_cast<int>(seconds) + 300);
  EXPECT_EQ(child_failure(r), "");
}


// ---------------------------------------------------------------- Fast-Run cache files

// A layer of the cache-file fuzz: its data, a double reference, the names of its Fast-Run
// candidates, AUTO's choice without a cache, and its key in a cache file.
struct CacheLayer {
  gktest::ConvCase c;
  std::vector<float> x, y;  // x in the layer's layout; y its output
  std::vector<double> want, magnitude;  // NCHW
  std::set<std::string> names;
  std::string heuristic, key;
};

CacheLayer cache_layer(const gk_conv_desc& d, uint32_t seed) {
  CacheLayer L;
  L.c = gktest::make_conv_case(d, true, seed);
  const gk_conv_desc& e = L.c.d;
  L.x.assign(size_t(gk_tensor_size(e.layout, e.batch, e.in_channels, e.in_height, e.in_width)), 0.0f);
  for (int64_t n = 0; n < e.batch; ++n)
    for (int64_t c = 0; c < e.in_channels; ++c)
      for (int64_t h = 0; h < e.in_height; ++h)
        for (int64_t w = 0; w < e.in_width; ++w)
          L.x[size_t(conv_cases::index_of(e.layout, e.in_channels, e.in_height, e.in_width, n, c, h, w))] =
              L.c.x[size_t(((n * e.in_channels + c) * e.in_height + h) * e.in_width + w)];
  L.y.resize(size_t(gk_tensor_size(e.layout, e.batch, e.out_channels, L.c.oh, L.c.ow)));
  for (int64_t n = 0; n < e.batch; ++n)
    for (int64_t oc = 0; oc < e.out_channels; ++oc)
      for (int64_t oh = 0; oh < L.c.oh; ++oh)
        for (int64_t ow = 0; ow < L.c.ow; ++ow) {
          double mag = 0;
          L.want.push_back(gktest::reference_output(L.c, n, oc, oh, ow, &mag));
          L.magnitude.push_back(mag);
        }
  gk::conv::Shape shape;
  gk::conv::validate(e, &shape);
  for (const gk::conv::Candidate& c : gk::conv::candidates(shape, !(e.flags & GK_CONV_FLAG_HIGH_ACCURACY)))
    L.names.insert(c.name);
  L.heuristic = gk::conv::candidates(shape, !(e.flags & GK_CONV_FLAG_HIGH_ACCURACY)).front().name;
  L.key = gk::conv::descriptor_key(e);
  return L;
}

// Creates the layer's plan with `algo` and runs it: "" when the plan is one of its
// candidates (`expected` exactly, when given) and computes right, else what is wrong.
std::string run_cache_layer(CacheLayer& L, gk_conv_algo algo, const std::string& expected, std::string* chosen) {
  const gk_conv_desc& d = L.c.d;
  gk_conv_plan* plan = nullptr;
  const gk_status st = gk_conv_plan_create(&d, L.c.w.data(), L.c.bias.data(), algo, &plan);
  if (st != GK_OK) return std::string("plan creation returned ") + gk_status_string(st) + ": " + gk_last_error();
  const std::string name = gk_conv_plan_algo_name(plan);
  if (chosen) *chosen = name;
  std::string wrong;
  if (!L.names.count(name)) wrong = "chose " + name + ", not a candidate of the layer";
  if (wrong.empty() && !expected.empty() && name != expected) wrong = "chose " + name + ", the cache says " + expected;
  if (wrong.empty()) {
    std::fill(L.y.begin(), L.y.end(), gktest::kNaN);
    if (gk_conv_run(plan, L.x.data(), L.y.data()) != GK_OK) wrong = std::string("run: ") + gk_last_error();
  }
  gk_conv_plan_destroy(plan);
  if (!wrong.empty()) return wrong;
  const bool winograd = name.rfind("winograd", 0) == 0;
  double largest = 0;
  for (double v : L.want) largest = std::max(largest, std::fabs(v));
  const int64_t k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  size_t i = 0;
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t oc = 0; oc < d.out_channels; ++oc)
      for (int64_t oh = 0; oh < L.c.oh; ++oh)
        for (int64_t ow = 0; ow < L.c.ow; ++ow, ++i) {
          const float got = L.y[size_t(conv_cases::index_of(d.layout, d.out_channels, L.c.oh, L.c.ow, n, oc, oh, ow))];
          const double bound = winograd ? 1e-4 * (largest + 1) : (k + 4) * double(FLT_EPSILON) * L.magnitude[i] + 1e-30;
          if (!(std::fabs(got - L.want[i]) <= bound))
            return name + ": output " + std::to_string(i) + " = " + std::to_string(got) + ", expected " +
                   std::to_string(L.want[i]);
        }
  return "";
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_whole_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// What an accepted file says for a key: the name of its last "entry <key> <name>" line
// (words as the loader splits them), or "".
std::string entry_for(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line, found;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind, a, b;
    if ((words >> kind >> a >> b) && kind == "entry" && a == key) found = b;
  }
  return found;
}

// Mutated Fast-Run cache files through gk_fastrun_cache_load and GEMMKIT_FASTRUN_CACHE, in
// a forked child for 3/8 of GEMMKIT_TEST_FUZZ_S seconds (default 3; the truncation at every
// length runs in full whatever the time, at every 11th under GEMMKIT_TEST_QUICK): a well-formed file of this machine whose entries
// name a non-default candidate for each of four layers (one of them high-accuracy, where
// the lossy Winograd variants are no candidates), mutated by truncation, bit flips, NUL and
// random bytes, huge numbers, entries naming other layers' or no algorithm's candidates,
// tens of thousands of entries, whitespace and header changes. After each load: a status
// (GK_OK or GK_ERR_IO), and each layer's AUTO plan exactly what the file says when it was
// accepted and names a candidate of the layer, else AUTO's own choice; every plan right.
// Now and then Fast-Run profiles and saves over the file, and a saved cache loads back.
TEST(ConvReliabilityFuzz, MutatedFastRunCacheFiles) {
  const double seconds = fuzz_seconds(3.0 / 8);
  const ChildResult r = run_in_child([seconds]() -> std::string {
    setenv("GEMMKIT_FASTRUN_BUDGET_MS", "2", 1);
    unsetenv("GEMMKIT_FASTRUN_CACHE");
    gk::conv::clear_cache();
    gk_conv_desc d3 = small_desc();
    d3.in_channels = d3.out_channels = 8, d3.in_height = d3.in_width = 12;
    d3.pad_top = d3.pad_left = d3.pad_bottom = d3.pad_right = 1, d3.activation = GK_ACT_RELU;
    gk_conv_desc exact = d3;
    exact.flags = GK_CONV_FLAG_HIGH_ACCURACY;
    gk_conv_desc pointwise = small_desc();
    pointwise.in_channels = 16, pointwise.out_channels = 12, pointwise.in_height = pointwise.in_width = 10;
    pointwise.kernel_h = pointwise.kernel_w = 1, pointwise.layout = GK_LAYOUT_NCHW8;
    gk_conv_desc depthwise = d3;
    depthwise.groups = 8, depthwise.layout = GK_LAYOUT_NHWC;
    std::vector<CacheLayer> layers;
    uint32_t seed = 40;
    for (const gk_conv_desc& d : {d3, exact, pointwise, depthwise}) layers.push_back(cache_layer(d, seed++));

    // The good file: a non-default candidate per layer (the last other than AUTO's), and more entries.
    std::vector<std::string> pool{"winograd_f63", "winograd_f43", "winograd_f23", "depthwise", "gemm_1x1",
                                  "direct",       "im2col_gemm",  "im2col_gemm:tile=0", "im2col_gemm:tile=-1",
                                  "winograd_f43:nr_tiles=99999999999999999999", "depthwise:vectorize=7",
                                  "depthwise:vectorize=3", "x"};
    std::string good = "gemmkit-fastrun 1\nmachine " + gk::conv::machine_key() + "\n";
    for (const CacheLayer& L : layers) {
      auto other_name = std::find_if(L.names.rbegin(), L.names.rend(), [&](const std::string& n) { return n != L.heuristic; });
      if (other_name == L.names.rend()) return "layer " + L.key + " has a single candidate";
      good += "entry " + L.key + " " + *other_name + "\n";
      pool.insert(pool.end(), L.names.begin(), L.names.end());
    }
    gk_conv_desc other = d3;
    other.in_height = 13;
    good += "entry " + gk::conv::descriptor_key(other) + " winograd_f23\n";
    const std::string path = "/tmp/gemmkit-cache-fuzz-" + std::to_string(getpid());
    const std::string saved = path + ".saved";

    // A new seed each run (GEMMKIT_TEST_FUZZ_SEED repeats one), named in any failure.
    const char* seed_env = std::getenv("GEMMKIT_TEST_FUZZ_SEED");
    const uint64_t fuzz_seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device()();
    std::mt19937_64 rng(fuzz_seed);
    auto below = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
    auto mutate = [&](std::string t) {
      const int kind = int(rng() % 12);
      const size_t at = below(t.size() + 1);
      switch (kind) {
        case 0: t.resize(at); break;
        case 1:
          for (int b = 0, flips = 1 + int(rng() % 3); b < flips && !t.empty(); ++b)
            t[below(t.size())] ^= char(1u << (rng() % 8));
          break;
        case 2: t.insert(at, std::string(1 + rng() % 8, '\0')); break;
        case 3:
          for (size_t i = at, end = std::min(t.size(), at + 1 + below(32)); i < end; ++i) t[i] = char(rng());
          break;
        case 4: {
          std::string junk(1 + rng() % 40, ' ');
          for (char& c : junk) c = char(rng());
          t.insert(at, junk);
          break;
        }
        case 5: t.erase(at, 1 + below(40)); break;
        case 6: {  // a number in a key (or the header) made huge, negative or zero
          static const char* const numbers[] = {"99999999999999999999999", "9223372036854775807", "-1", "0",
                                                "18446744073709551616", "4294967296", "1e9"};
          const size_t digit = t.find_first_of("0123456789", at);
          if (digit == std::string::npos) break;
          const size_t end = t.find_first_not_of("0123456789", digit);
          t.replace(digit, (end == std::string::npos ? t.size() : end) - digit, numbers[rng() % 7]);
          break;
        }
        case 7: {  // an entry names another layer's candidate, a lossy one, or none at all
          const size_t line = t.find("\nentry ", at ? at - 1 : 0);
          if (line == std::string::npos) break;
          const size_t name = t.find(' ', line + 7), end = t.find('\n', line + 1);
          if (name == std::string::npos || name > end) break;
          t.replace(name + 1, (end == std::string::npos ? t.size() : end) - name - 1, pool[below(pool.size())]);
          break;
        }
        case 8: {  // a line duplicated, or two lines swapped
          std::vector<std::string> lines;
          std::istringstream in(t);
          for (std::string l; std::getline(in, l);) lines.push_back(l);
          if (lines.empty()) break;
          if (rng() % 2) {
            lines.insert(lines.begin() + long(below(lines.size() + 1)), lines[below(lines.size())]);
          } else {
            std::swap(lines[below(lines.size())], lines[below(lines.size())]);
          }
          t.clear();
          for (const std::string& l : lines) t += l + "\n";
          break;
        }
        case 9:  // tens of thousands of entries, or an over-long token
          if (rng() % 8 == 0) {
            for (int e = 0, count = 1 + int(rng() % 30000); e < count; ++e)
              t += "entry n=" + std::to_string(rng() % 100000) + ";c=3 " + pool[below(pool.size())] + "\n";
          } else {
            t.insert(at, std::string(500 + below(40), 'k'));
          }
          break;
        case 10: {  // whitespace: tabs, doubled spaces, CRLF, trailing blanks
          const size_t space = t.find(' ', at);
          const int how = int(rng() % 4);
          if (how == 0 && space != std::string::npos) t[space] = '\t';
          if (how == 1 && space != std::string::npos) t.insert(space, "  ");
          if (how == 2) {
            for (size_t i = 0; (i = t.find('\n', i)) != std::string::npos; i += 2) t.insert(i, "\r");
          }
          if (how == 3) t += "   \n\n";
          break;
        }
        default: {  // the header or the machine line changed, dropped or doubled
          const size_t first = t.find('\n'), second = first == std::string::npos ? first : t.find('\n', first + 1);
          const int how = int(rng() % 4);
          if (how == 0) t.replace(0, std::min(first, t.size()), "gemmkit-fastrun 2");
          if (how == 1 && first != std::string::npos) t.erase(0, first + 1);
          if (how == 2 && second != std::string::npos) t.erase(first + 1, second - first);
          if (how == 3 && second != std::string::npos) t.insert(second + 1, t.substr(first + 1, second - first));
          break;
        }
      }
      return t;
    };

    long loads = 0, accepted = 0, through_env = 0, profiled = 0;
    // One mutated file: loaded (or read through GEMMKIT_FASTRUN_CACHE at first use), then
    // every layer's AUTO plan checked against what the file says.
    auto try_file = [&](const std::string& text, bool env) -> std::string {
      write_whole_file(path, text);
      gk::conv::clear_cache();
      gk::clear_last_error();
      gk_status st = GK_OK;
      if (env) {
        setenv("GEMMKIT_FASTRUN_CACHE", path.c_str(), 1);
        ++through_env;
      } else {
        st = gk_fastrun_cache_load(path.c_str());
        if (st != GK_OK && st != GK_ERR_IO) return std::string("load returned ") + gk_status_string(st);
      }
      ++loads;
      // What the loader should have kept: the file when it is accepted and for this machine.
      std::string header, machine_line, kind, machine;
      {
        std::istringstream in(text);
        std::getline(in, header);
        std::getline(in, machine_line);
        std::istringstream(machine_line) >> kind >> machine;
      }
      const bool used = st == GK_OK && std::string(gk_last_error()).find("ignored") == std::string::npos &&
                        kind == "machine" && machine == gk::conv::machine_key();
      for (CacheLayer& L : layers) {
        std::string expected;
        if (!env) {
          const std::string named = used ? entry_for(text, L.key) : "";
          expected = L.names.count(named) ? named : L.heuristic;
        }
        const std::string wrong = run_cache_layer(L, GK_CONV_ALGO_AUTO, expected, nullptr);
        if (!wrong.empty()) return "layer " + L.key + ": " + wrong;
      }
      if (!env && used) {
        ++accepted;
        // A cache the library saves loads back as it was.
        if (rng() % 16 == 0) {
          if (gk_fastrun_cache_save(saved.c_str()) != GK_OK) return std::string("save: ") + gk_last_error();
          gk::conv::clear_cache();
          if (gk_fastrun_cache_load(saved.c_str()) != GK_OK) return "a saved cache does not load: " + read_whole_file(saved);
          for (CacheLayer& L : layers) {
            const std::string named = entry_for(text, L.key);
            const std::string wrong =
                run_cache_layer(L, GK_CONV_ALGO_AUTO, L.names.count(named) ? named : L.heuristic, nullptr);
            if (!wrong.empty()) return "reloaded, layer " + L.key + ": " + wrong;
          }
        }
      }
      // Fast-Run on top of it, saving over the file: whatever it picks is a candidate and right.
      if (env && rng() % 8 == 0) {
        ++profiled;
        CacheLayer& L = layers[below(layers.size())];
        const std::string wrong = run_cache_layer(L, GK_CONV_ALGO_FASTRUN, "", nullptr);
        if (!wrong.empty()) return "Fast-Run, layer " + L.key + ": " + wrong;
      }
      unsetenv("GEMMKIT_FASTRUN_CACHE");
      return "";
    };

    std::string wrong = try_file(good, false);
    if (!wrong.empty()) return "the unmutated file: " + wrong;
    if (accepted != 1) return "the unmutated file was not used: " + std::string(gk_last_error());
    long truncations = 0;
    for (size_t length = 0; length <= good.size(); length += gktest::quick() ? 11 : 1, ++truncations) {
      wrong = try_file(good.substr(0, length), length % 7 == 3);
      if (!wrong.empty()) return "truncated to " + std::to_string(length) + " bytes: " + wrong;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    long mutated = 0;
    while (std::chrono::steady_clock::now() < end) {
      std::string text = good;
      for (int m = 0, count = 1 + int(rng() % 3); m < count; ++m) text = mutate(text);
      ++mutated;
      wrong = try_file(text, rng() % 8 == 0);
      if (!wrong.empty()) {
        std::ofstream keep(path + ".failed", std::ios::binary);
        keep << text;
        return "mutated file (kept in " + path + ".failed; GEMMKIT_TEST_FUZZ_SEED=" + std::to_string(fuzz_seed) +
               "): " + wrong;
      }
    }
    std::remove(path.c_str());
    std::remove(saved.c_str());
    std::printf("%ld cache files loaded (%ld truncations, %ld mutated, %ld through GEMMKIT_FASTRUN_CACHE), %ld "
                "accepted; %ld Fast-Run profiles over them\n",
                loads, truncations, mutated, through_env, accepted, profiled);
    std::fflush(stdout);
    return "";
  }, static_cast<int>(seconds) + 300);
  EXPECT_EQ(child_failure(r), "");
}

}  // namespace

namespace {

// The plans the helper program runs (test/programs/conv_cases.h) take the GEMM driver's
// shared-B path where they mean to: the wide layer's output channels exceed MC (of the
// kernel its NCHW plans run on, and of the blocked layouts' one).
TEST(ConvReliabilityCases, WideLayerSpansSeveralMcBlocks) {
  for (const gk::KernelConfig* cfg : {&gk::conv::conv_gemm_config(GK_LAYOUT_NCHW), &gk::conv_config()}) {
    EXPECT_GT(conv_cases::kWideChannels, cfg->mc) << cfg->kernel->name;
    gk::GemmProblem p;
    p.m = conv_cases::kWideChannels;
    EXPECT_FALSE(gk::packs_b_per_panel(p, *cfg)) << cfg->kernel->name;
  }
}

// A prepared algorithm that only records where its workspace blocks lie.
class BlockRecorder final : public gk::conv::Prepared {
 public:
  explicit BlockRecorder(int64_t thread_floats) : thread_floats_(thread_floats) {}
  void run(const float*, float*, const gk::conv::Workspace& ws) const override {
    blocks.clear();
    for (int t = 0; t < ws.threads; ++t) blocks.push_back(ws.block(t));
  }
  gk::conv::WorkspaceNeed need() const override { return {0, thread_floats_}; }
  mutable std::vector<const float*> blocks;

 private:
  int64_t thread_floats_;
};

// Runs body on a thread of its own: a fresh cached workspace and block stride, whatever
// earlier tests left on this one.
void on_fresh_thread(const std::function<void()>& body) {
  std::thread t(body);
  t.join();
}

// In the cached workspace of gk_conv_run each thread's block stays where it was from one
// plan to the next, whatever each needs (so its lines stay in that core's cache), without
// overlapping the next thread's.
TEST(ConvReliabilitySteadyState, CachedWorkspaceKeepsEachThreadsBlockInPlace) {
  gk::conv::Shape s;
  ASSERT_TRUE(gk::conv::validate(small_desc(), &s));
  std::vector<float> in(size_t(4 * 8 * 8)), out(size_t(4 * 8 * 8));
  const int saved = gk_get_num_threads();
  gk_set_num_threads(2);
  const BlockRecorder small(1000), large(50000);
  std::vector<gk_status> status;
  on_fresh_thread([&] {
    for (const BlockRecorder* p : {&small, &large, &small})
      status.push_back(gk::conv::run_with_cached_workspace(s, *p, in.data(), out.data(), "test"));
  });
  gk_set_num_threads(saved);
  EXPECT_EQ(status, std::vector<gk_status>(3, GK_OK));
  ASSERT_EQ(small.blocks.size(), 2u);
  ASSERT_EQ(large.blocks.size(), 2u);
  EXPECT_EQ(small.blocks[0], large.blocks[0]);
  EXPECT_EQ(small.blocks[1], large.blocks[1]);
  EXPECT_GE(large.blocks[1] - large.blocks[0], 50000);
}

// Where the memory for blocks at that stride cannot be had, a plan runs in its own layout
// (and the stride does not grow from a request that failed).
TEST(ConvReliabilitySteadyState, CachedWorkspaceFallsBackToThePlansOwnStride) {
  gk::conv::Shape s;
  ASSERT_TRUE(gk::conv::validate(small_desc(), &s));
  std::vector<float> in(size_t(4 * 8 * 8)), out(size_t(4 * 8 * 8));
  const int saved = gk_get_num_threads();
  gk_set_num_threads(2);
  const BlockRecorder small(1008), large(60000), huge(1000000);
  std::vector<gk_status> status;
  std::vector<const float*> own;
  on_fresh_thread([&] {
    status.push_back(gk::conv::run_with_cached_workspace(s, large, in.data(), out.data(), "test"));
    gk::set_scratch_growth_limit(4 * 2 * 60000);
    status.push_back(gk::conv::run_with_cached_workspace(s, huge, in.data(), out.data(), "test"));
    gk::release_scratch();
    gk::set_scratch_growth_limit(4 * 4 * 1008);  // two blocks of 1008 floats, not of 60000
    status.push_back(gk::conv::run_with_cached_workspace(s, small, in.data(), out.data(), "test"));
    gk::set_scratch_growth_limit(-1);
    own = small.blocks;
    gk::release_scratch();
    status.push_back(gk::conv::run_with_cached_workspace(s, large, in.data(), out.data(), "test"));
  });
  gk_set_num_threads(saved);
  EXPECT_EQ(status, (std::vector<gk_status>{GK_OK, GK_ERR_OUT_OF_MEMORY, GK_OK, GK_OK}));
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[1] - own[0], 1008);
  ASSERT_EQ(large.blocks.size(), 2u);
  EXPECT_EQ(large.blocks[1] - large.blocks[0], 60000) << "the failed request must not have raised the stride";
}

// After one warm-up run of a plan, gk_conv_run and gk_conv_run_with_workspace allocate
// nothing: every forced algorithm, layouts NCHW / NHWC / NCHW8, 1 and 2 threads (the child
// counts every allocation of the process; both runs must also agree).
TEST(ConvReliabilitySteadyState, NoAllocationPerRunOnEveryAlgorithmAndLayout) {
  const ChildResult r = run_conv_helper({"count"});
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

// The first gk_conv_run_with_workspace of a plan allocates nothing either, GEMM packing
// included: every plan of conv_cases::kPlans, 1 and 2 threads, each result right.
TEST(ConvReliabilitySteadyState, FirstRunWithWorkspaceAllocatesNothing) {
  const ChildResult r = run_conv_helper({"first"});
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

// A cold process's convolutions (every algorithm, AUTO and FASTRUN: create, run, run in a
// workspace, destroy), layout conversions and network operations, with its n-th allocation
// failing for every n up to the allocations such a run makes: never a crash, a status
// (GK_OK where nothing needs memory), every GK_OK result right, everything right again with
// the injector off, and under ASan no leak.
TEST(ConvReliabilityAllocationFailure, EachAllocationOfAColdRunFailsInTurn) {
  const ChildResult r = run_conv_helper({"inject"}, {}, 900);
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.substr(r.output.rfind("ok:")).c_str());
}

// Every plan of conv_cases::kPlans (megabyte layers) with the address space limited to what
// the process maps plus a budget stepped down from 256 MiB to nothing, 1 and 2 threads:
// plan creation, runs (Fast-Run's profiling included) GK_OK with right results or
// GK_ERR_OUT_OF_MEMORY, runs in the caller's workspace, layout conversions and the network
// operations GK_OK, never a signal; some calls run out of memory (else nothing was proved).
TEST(ConvReliabilityAddressSpace, LimitsSteppedDownUntilAllocationsFail) {
  if (emulated()) GTEST_SKIP() << "qemu-user does not apply RLIMIT_AS to the emulated program";
  const ChildResult r = run_conv_helper({"rlimit"});
  if (child_failure(r, kSkipped).empty()) GTEST_SKIP() << r.output;
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

// 8 user threads sharing every plan of conv_cases::kPlans (gk threads = 2, oversubscribed
// on this machine) and calling gk_conv_run, gk_conv_run_with_workspace and cblas_sgemm for
// GEMMKIT_TEST_SOAK_S seconds (default 10): every output equal, bit for bit, to the serial
// run at one gk thread (the child checks first that 1 and 2 threads agree bit for bit).
TEST(ConvReliabilityConcurrency, EightUserThreadsTwoGkThreadsEach) {
  const char* env = std::getenv("GEMMKIT_TEST_SOAK_S");
  const double seconds = env && std::atof(env) > 0 ? std::atof(env) : 10.0;
  const ChildResult r = run_conv_helper({"soak", std::to_string(seconds)}, {}, static_cast<int>(seconds) + 600);
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

}  // namespace
