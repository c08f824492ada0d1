// The contract with the caller (DESIGN.md) on the convolution side: a run never aborts
// (its workspace is taken before the work is split, GK_ERR_OUT_OF_MEMORY otherwise), a
// steady-state run allocates nothing, and descriptors whose sizes exceed what a process can
// address are refused naming the field. Checks that could crash run in a child process
// (test/programs/child_process.h, shared with the GEMM side's test/test_reliability.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gemmkit.h"
#include "programs/child_process.h"

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

// Random and mutated descriptors through gk_conv_output_size, gk_tensor_size and plan
// creation with every algorithm (plans whose tensors are small are run), in a forked child
// for GEMMKIT_TEST_FUZZ_S seconds (default 5): no crash, every status a known one.
TEST(ConvReliabilityFuzz, RandomDescriptorsNeverCrash) {
  const char* env = std::getenv("GEMMKIT_TEST_FUZZ_S");
  const double seconds = env && std::atof(env) > 0 ? std::atof(env) : 5.0;
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
    return "";
  }, static_cast<int>(seconds) + 300);
  EXPECT_EQ(child_failure(r), "");
}

}  // namespace

namespace {

// After one warm-up run of a plan, gk_conv_run and gk_conv_run_with_workspace allocate
// nothing: every forced algorithm, layouts NCHW / NHWC / NCHW8, 1 and 2 threads (the child
// counts every allocation of the process; both runs must also agree).
TEST(ConvReliabilitySteadyState, NoAllocationPerRunOnEveryAlgorithmAndLayout) {
  const ChildResult r = run_helper({"conv-count"});
  if (child_failure(r, kSkipped).empty()) GTEST_SKIP() << r.output;
  ASSERT_EQ(child_failure(r), "");
  std::printf("%s", r.output.c_str());
}

}  // namespace
