// Fast-Run: selection with an injected clock (fastest wins, ties keep AUTO's choice, budget
// and early cuts), the cache in process and on disk (round trip, other machine or version
// ignored, thousands of corrupted files rejected without harm, the environment variable,
// atomic saves), concurrent plan creation, and every candidate it can pick computes right.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "common/runtime.h"
#include "conv/fastrun.h"
#include "conv_test_util.h"

namespace {

// A 3x3 stride-1 layer: candidates are im2col_gemm (AUTO's choice for 8 channels, or with
// AVX-512 the NCHW8 engine on copies), the Winograd variants and their tunings, and direct.
gk_conv_desc layer() {
  gk_conv_desc d;
  gk_conv_desc_init(&d);
  d.batch = 1, d.in_channels = 8, d.in_height = d.in_width = 24, d.out_channels = 8;
  d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
  d.activation = GK_ACT_RELU;
  return d;
}

std::vector<std::string> candidate_names(const gk_conv_desc& d) {
  gk::conv::Shape s;
  EXPECT_TRUE(gk::conv::validate(d, &s));
  std::vector<std::string> names;
  for (const auto& c : gk::conv::candidates(s, !(d.flags & GK_CONV_FLAG_HIGH_ACCURACY))) names.push_back(c.name);
  return names;
}

// Fake clock: each candidate's run takes durations[name] (default 1 ms); records the calls.
struct FakeClock {
  std::map<std::string, double> durations;
  std::map<std::string, int> calls;
  std::mutex mutex;
  void install() {
    gk::conv::set_fake_durations([this](const std::string& name) {
      std::lock_guard<std::mutex> lock(mutex);
      ++calls[name];
      auto it = durations.find(name);
      return it == durations.end() ? 1e-3 : it->second;
    });
  }
};

std::string plan_name(const gk_conv_desc& d, gk_conv_algo algo) {
  const std::vector<float> w(size_t(d.out_channels * d.in_channels / d.groups * d.kernel_h * d.kernel_w), 0.1f);
  gk_conv_plan* plan = nullptr;
  EXPECT_EQ(gk_conv_plan_create(&d, w.data(), nullptr, algo, &plan), GK_OK) << gk_last_error();
  const std::string name = plan ? gk_conv_plan_algo_name(plan) : "";
  gk_conv_plan_destroy(plan);
  return name;
}

std::string temp_path(const char* tag) {
  return "/tmp/gemmkit-fastrun-test-" + std::to_string(getpid()) + "-" + tag;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Fast-Run chooses "direct" for layer() (a fake clock makes it the fastest) and the cache is
// saved to `path`; returns the file's text.
std::string save_cache_choosing_direct(const std::string& path) {
  FakeClock clock;
  clock.durations["direct"] = 1e-5;
  clock.install();
  EXPECT_EQ(plan_name(layer(), GK_CONV_ALGO_FASTRUN), "direct");
  gk::conv::set_fake_durations(nullptr);  // the clock dies here
  EXPECT_EQ(gk_fastrun_cache_save(path.c_str()), GK_OK) << gk_last_error();
  return read_file(path);
}

class FastRun : public ::testing::Test {
 protected:
  void SetUp() override { gk::conv::clear_cache(); }
  void TearDown() override {
    gk::conv::set_fake_durations(nullptr);
    gk::conv::clear_cache();
  }
};

}  // namespace

TEST_F(FastRun, FastestCandidateWinsAndNamesIt) {
  const gk_conv_desc d = layer();
  const std::vector<std::string> names = candidate_names(d);
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], plan_name(d, GK_CONV_ALGO_AUTO));  // AUTO's choice is timed first
  ASSERT_NE(names[0], "direct");
  FakeClock clock;
  clock.durations["direct"] = 1e-4;
  clock.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), "direct");
  // Cached: neither FASTRUN nor AUTO measures again, both use the choice.
  clock.calls.clear();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), "direct");
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_AUTO), "direct");
  EXPECT_TRUE(clock.calls.empty());
}

TEST_F(FastRun, TiesAndNearTiesKeepTheHeuristicChoice) {
  const gk_conv_desc d = layer();
  const std::vector<std::string> names = candidate_names(d);
  FakeClock clock;  // every candidate 1 ms
  clock.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[0]);
  gk::conv::clear_cache();
  FakeClock near;
  near.durations[names[1]] = 0.97e-3;  // 3% faster: within the noise margin
  near.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[0]);
  gk::conv::clear_cache();
  FakeClock clear;
  clear.durations[names[1]] = 0.90e-3;  // 10% faster: switches
  clear.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[1]);
}

TEST_F(FastRun, BudgetStopsProfilingAndSlowCandidatesAreCutEarly) {
  const gk_conv_desc d = layer();
  const std::vector<std::string> names = candidate_names(d);
  ASSERT_GE(names.size(), 3u);
  FakeClock clock;
  clock.durations[names[0]] = 0.2;  // warm-up + 3 runs = 0.6 s, over the 0.25 s budget
  clock.durations[names[1]] = 1e-6;
  clock.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[0]);  // the rest were never timed
  EXPECT_EQ(clock.calls.size(), 1u);
  EXPECT_EQ(clock.calls[names[0]], 4);  // warm-up and three timed runs

  gk::conv::clear_cache();
  FakeClock cut;
  cut.durations[names[1]] = 2e-3;  // 2x the best (1 ms): one timed run, then cut
  cut.durations[names[2]] = 5e-3;  // over 3x: cut after its warm-up
  cut.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[0]);
  EXPECT_EQ(cut.calls[names[0]], 4);
  EXPECT_EQ(cut.calls[names[1]], 2);  // warm-up and one timed run
  EXPECT_EQ(cut.calls[names[2]], 1);  // warm-up only
}

// A candidate much shorter than a timed sample (1 ms) is timed over batches of runs:
// 0.1 ms per run gives samples of 10 runs; a 2 ms one is still timed run by run. Having
// beaten AUTO's choice, it is confirmed against it in two more rounds of 3 samples each
// (of the challenger's batch size).
TEST_F(FastRun, ShortCandidatesAreTimedInBatches) {
  const gk_conv_desc d = layer();
  const std::vector<std::string> names = candidate_names(d);
  FakeClock clock;
  clock.durations[names[0]] = 2e-3;
  clock.durations[names[1]] = 1e-4;  // the fastest: wins
  clock.install();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[1]);
  EXPECT_EQ(clock.calls[names[0]], 4 + 2 * 3 * 10);       // warm-up, three runs; confirmation
  EXPECT_EQ(clock.calls[names[1]], 1 + 3 * 10 + 2 * 3 * 10);  // warm-up, three samples of 10; confirmation
}

// A challenger that won its profile only because AUTO's choice was timed in a slow
// moment loses the confirmation, and AUTO's choice is kept.
TEST_F(FastRun, ChallengerMustWinTheConfirmation) {
  const gk_conv_desc d = layer();
  const std::vector<std::string> names = candidate_names(d);
  int first_calls = 0;
  gk::conv::set_fake_durations([&](const std::string& name) {
    if (name == names[0]) return ++first_calls <= 4 ? 3e-3 : 1e-3;  // slow only while profiled
    return name == names[1] ? 2e-3 : 1.0;                          // the rest: far slower
  });
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), names[0]);
  EXPECT_GT(first_calls, 4);  // it was timed again
}

TEST_F(FastRun, HighAccuracyFlagExcludesLossyCandidates) {
  gk_conv_desc d = layer();
  d.flags = GK_CONV_FLAG_HIGH_ACCURACY;
  for (const std::string& n : candidate_names(d))
    EXPECT_TRUE(n.rfind("winograd_f43", 0) != 0 && n.rfind("winograd_f63", 0) != 0) << n;
  FakeClock clock;
  clock.durations["winograd_f63"] = 1e-9;  // would win if it were a candidate
  clock.install();
  const std::string chosen = plan_name(d, GK_CONV_ALGO_FASTRUN);
  EXPECT_TRUE(chosen.rfind("winograd_f63", 0) != 0) << chosen;
}

TEST_F(FastRun, CacheFileRoundTrip) {
  const gk_conv_desc d = layer();
  const std::string path = temp_path("roundtrip");
  const std::string text = save_cache_choosing_direct(path);
  EXPECT_EQ(text.rfind("gemmkit-fastrun 1\nmachine " + gk::conv::machine_key() + "\nentry ", 0), 0u) << text;
  gk::conv::clear_cache();
  EXPECT_NE(plan_name(d, GK_CONV_ALGO_AUTO), "direct");
  ASSERT_EQ(gk_fastrun_cache_load(path.c_str()), GK_OK) << gk_last_error();
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_AUTO), "direct");
  std::remove(path.c_str());
}

TEST_F(FastRun, FileForAnotherMachineOrVersionIsIgnored) {
  const gk_conv_desc d = layer();
  const std::string path = temp_path("mismatch");
  const std::string good = save_cache_choosing_direct(path);
  const std::string changes[][2] = {{"cpu=", "cpu=Other_CPU_"},
                                    {"threads=", "threads=9"},
                                    {"version=", "version=9."},
                                    {"kernel=", "kernel=x"},
                                    {"algos=", "algos=winograd_f43,"}};
  for (const auto& change : changes) {
    std::string text = good;
    const size_t at = text.find(change[0]);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, std::string(change[0]).size(), change[1]);
    write_file(path, text);
    gk::conv::clear_cache();
    EXPECT_EQ(gk_fastrun_cache_load(path.c_str()), GK_OK);  // ignored, not an error
    EXPECT_NE(std::string(gk_last_error()).find("ignored"), std::string::npos) << change[0];
    EXPECT_NE(plan_name(d, GK_CONV_ALGO_AUTO), "direct") << "entry of another machine used: " << change[0];
  }
  std::remove(path.c_str());
}

TEST_F(FastRun, CorruptedAndHostileFilesAreRejectedWithoutHarm) {
  const gk_conv_desc d = layer();
  const std::string path = temp_path("fuzz");
  const std::string good = save_cache_choosing_direct(path);
  const std::string good_path = temp_path("fuzz-good");
  write_file(good_path, good);
  const std::vector<std::string> names = candidate_names(d);
  std::mt19937 rng(99);
  const int mutations = gktest::quick() ? 300 : 3000;
  int rejected = 0;
  for (int i = 0; i < mutations; ++i) {
    ASSERT_EQ(gk_fastrun_cache_load(good_path.c_str()), GK_OK);  // known state: "direct"
    std::string text = good;
    const int kind = int(rng() % 5);
    const size_t at = rng() % text.size();
    if (kind == 0) text[at] = char(rng() % 256);                        // flip a byte
    if (kind == 1) text.resize(at);                                     // truncate
    if (kind == 2) text.insert(at, std::string(1 + rng() % 40, char(rng() % 256)));  // insert junk
    if (kind == 3) text.erase(at, 1 + rng() % 20);                      // delete a run
    if (kind == 4) text += "entry " + std::string(600, 'x') + " direct\n";  // over-long key
    write_file(path, text);
    const gk_status st = gk_fastrun_cache_load(path.c_str());
    ASSERT_TRUE(st == GK_OK || st == GK_ERR_IO) << "mutation " << i;
    const std::string message = gk_last_error();
    const std::string chosen = plan_name(d, GK_CONV_ALGO_AUTO);
    if (st == GK_ERR_IO) {  // rejected: the cache is exactly as before
      ++rejected;
      ASSERT_NE(message.find("rejected"), std::string::npos) << message;
      ASSERT_EQ(chosen, "direct") << "mutation " << i << " was rejected but changed the cache";
    } else {  // accepted (still well-formed): whatever it says, only a real candidate runs
      ASSERT_NE(std::find(names.begin(), names.end(), chosen), names.end()) << chosen;
    }
  }
  EXPECT_GT(rejected, mutations / 4);
  std::remove(good_path.c_str());
  // Hostile: a directory, a missing file, a file over the size limit.
  EXPECT_EQ(gk_fastrun_cache_load("/tmp"), GK_ERR_IO);
  EXPECT_EQ(gk_fastrun_cache_load((path + ".missing").c_str()), GK_ERR_IO);
  {
    std::ofstream big(path, std::ios::binary | std::ios::trunc);
    big << "gemmkit-fastrun 1\n";
    big.seekp((17L << 20));
    big << 'x';
  }
  EXPECT_EQ(gk_fastrun_cache_load(path.c_str()), GK_ERR_IO);
  EXPECT_EQ(gk_fastrun_cache_load(nullptr), GK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gk_fastrun_cache_save("/nonexistent-dir/x"), GK_ERR_IO);
  std::remove(path.c_str());
}

TEST_F(FastRun, EnvironmentCacheIsLoadedAtFirstUseAndSavedAfterEachEntry) {
  const gk_conv_desc d = layer();
  const std::string path = temp_path("env");
  FakeClock clock;
  clock.durations["direct"] = 1e-5;
  clock.install();
  ASSERT_EQ(setenv("GEMMKIT_FASTRUN_CACHE", path.c_str(), 1), 0);
  gk::conv::clear_cache();
  ASSERT_EQ(plan_name(d, GK_CONV_ALGO_FASTRUN), "direct");
  EXPECT_NE(read_file(path).find(" direct\n"), std::string::npos);  // saved
  gk::conv::clear_cache();  // a new process, in effect
  gk::conv::set_fake_durations(nullptr);
  EXPECT_EQ(plan_name(d, GK_CONV_ALGO_AUTO), "direct");  // loaded at first use
  unsetenv("GEMMKIT_FASTRUN_CACHE");
  std::remove(path.c_str());
}

TEST_F(FastRun, ConcurrentPlanCreationProfilesCorrectly) {
  setenv("GEMMKIT_FASTRUN_BUDGET_MS", "20", 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      gk_conv_desc d = layer();
      d.in_height = d.in_width = 10 + 3 * t;  // different shapes, and two of the same
      if (t == 3) d.in_height = d.in_width = 10;
      gktest::check_conv(gktest::make_conv_case(d, true, uint32_t(t)), GK_CONV_ALGO_FASTRUN, 0, 3e-5);
    });
  for (auto& th : threads) th.join();
  unsetenv("GEMMKIT_FASTRUN_BUDGET_MS");
}

TEST_F(FastRun, EveryCandidateItCanPickComputesCorrectly) {
  const gk_conv_desc shapes[] = {layer(), [] {
                                   gk_conv_desc d = layer();
                                   d.kernel_h = d.kernel_w = 1;
                                   d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 0;
                                   return d;
                                 }()};
  for (const gk_conv_desc& d : shapes) {
    const gktest::ConvCase c = gktest::make_conv_case(d, true, 5);
    for (const std::string& name : candidate_names(d)) {
      gk::conv::clear_cache();
      FakeClock clock;
      clock.durations[name] = 1e-7;
      clock.install();
      const double bound = name.rfind("winograd_f", 0) == 0 ? 5e-5 : 0;
      EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_FASTRUN, 0, bound), name);
    }
  }
}

// im2col_gemm's tile is tuned where the output channels pass one MC block, in NCHW and in
// NCHW8 (a GEMM there too); in NCHW8 the pointwise kernels' engine is a candidate of its
// own beside it, where the CPU has them (and in NCHW through copies where the engine runs it).
TEST_F(FastRun, Im2colTileTunedAndTheNchw8EngineTimedBeside) {
  auto count = [](const std::vector<std::string>& names, const std::string& prefix) {
    int n = 0;
    for (const std::string& name : names) n += name.rfind(prefix, 0) == 0;
    return n;
  };
  for (gk_layout layout : {GK_LAYOUT_NCHW, GK_LAYOUT_NCHW8}) {
    gk_conv_desc d = layer();
    d.layout = layout;
    d.out_channels = 2 * gk::conv::conv_gemm_config(layout).mc + 8;
    const std::vector<std::string> names = candidate_names(d);
    EXPECT_GT(count(names, "im2col_gemm:tile="), 0) << layout;
    const bool engine = gktest::engine_runs_layout(d) && gk::pointwise_kernel().pointwise[0].fn != nullptr;
    EXPECT_EQ(count(names, "pointwise_nchw8"), engine ? 1 : 0) << layout;
  }
}

// NHWC depthwise in place: rows in long segments (tuning 3) are a candidate where the image
// is past L2, where the default runs 8-column segments, and not where it fits; the plan
// Fast-Run picks with it computes correctly.
TEST_F(FastRun, DepthwiseNhwcLongSegmentsTunedPastL2) {
  auto depthwise = [](int64_t side) {
    gk_conv_desc d = layer();
    d.in_channels = d.out_channels = d.groups = 32, d.in_height = d.in_width = side;
    d.layout = GK_LAYOUT_NHWC;
    return d;
  };
  const std::string tuned = "depthwise:vectorize=3";
  // 32 channels in and out: 256 bytes a pixel.
  const int64_t past = int64_t(std::sqrt(double(gk::caches().l2) / 256.0)) + 4;
  const std::vector<std::string> small = candidate_names(depthwise(8)), large = candidate_names(depthwise(past));
  EXPECT_EQ(std::count(small.begin(), small.end(), tuned), 0);
  ASSERT_EQ(std::count(large.begin(), large.end(), tuned), 1);
  const gktest::ConvCase c = gktest::make_conv_case(depthwise(past), true, 6);
  FakeClock clock;
  clock.durations[tuned] = 1e-7;
  clock.install();
  EXPECT_EQ(gktest::check_conv(c, GK_CONV_ALGO_FASTRUN, 0, 0), tuned);
}
