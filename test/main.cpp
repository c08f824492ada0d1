// googletest entry point that ends with "gemmkit-tests: N passed, N failed", the line
// scripts/run-tests.sh sums into make test's closing line.
#include <gtest/gtest.h>

#include <cstdio>

namespace {
class CountingListener : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    const testing::TestResult* r = info.result();
    if (r->Skipped()) ++skipped_;
    else if (r->Failed()) ++failed_;
    else ++passed_;
  }
  void OnTestProgramEnd(const testing::UnitTest&) override {
    std::printf("gemmkit-tests: %d passed, %d failed, %d skipped\n", passed_, failed_, skipped_);
    std::fflush(stdout);
  }

 private:
  int passed_ = 0, failed_ = 0, skipped_ = 0;
};
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::UnitTest::GetInstance()->listeners().Append(new CountingListener);
  return RUN_ALL_TESTS();
}
