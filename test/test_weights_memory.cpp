// Plan weights' memory (src/common/weights_memory.h): aligned and whole; a buffer mapped
// alone leaves no mapping behind and lies on huge pages where THP is on; a request no
// system can meet fails with nullptr, which the allocator reports as std::bad_alloc
// (plan creation turns that into a status).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "common/weights_memory.h"
#include "gemm_test_util.h"

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// /sys/kernel/mm/transparent_hugepage/enabled's selected mode ("always", "madvise",
// "never"), "" where unreadable.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

// Over the mappings of /proc/self/smaps that overlap [p, p + bytes): the bytes of the
// overlap (field "") or the sum of a field's kB ("AnonHugePages:"); -1 if unreadable.
long long smaps_in(const void* p, size_t bytes, const std::string& field) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return -1;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  long long total = 0;
  bool inside = false;
  for (std::string line; std::getline(f, line);) {
    unsigned long a = 0, b = 0;
    char dash = 0;
    if (std::sscanf(line.c_str(), "%lx%c%lx", &a, &dash, &b) == 3 && dash == '-') {
      inside = a < hi && b > lo;
      if (inside && field.empty()) total += static_cast<long long>(std::min<uintptr_t>(b, hi) - std::max<uintptr_t>(a, lo));
    } else if (inside && !field.empty() && line.rfind(field, 0) == 0) {
      total += std::stoll(line.substr(field.size()));
    }
  }
  return total;
}

}  // namespace

TEST(WeightsMemory, SmallAndLargeBuffersAreAlignedAndWhole) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(4096 + 4), kHugePage, 9 * kHugePage / 2 + 12}) {
    void* p = gk::allocate_weights(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (gk::weights_mapped_alone(bytes)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePage, 0u) << bytes;
    }
    std::memset(p, 0x5a, bytes);  // every byte writable (ASan checks the heap's bounds)
    if (bytes) {
      EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
    }
    gk::free_weights(p, bytes);
    // Nothing of a lone mapping stays mapped (its last partial page included).
    if (gk::weights_mapped_alone(bytes) && !gktest::quick()) {
      EXPECT_EQ(smaps_in(p, bytes, ""), 0) << bytes;
    }
  }
  EXPECT_FALSE(gk::weights_mapped_alone(kHugePage - 1));
}

TEST(WeightsMemory, LargeBuffersOnHugePagesWhereTheSystemGrantsThem) {
  // GEMMKIT_TEST_QUICK marks the emulated runs (the Makefile's QEMU), whose
  // /proc/self/smaps is the host's view of the emulator.
  if (gktest::quick()) GTEST_SKIP() << "emulated";
  const size_t bytes = 4 * kHugePage;
  if (!gk::weights_mapped_alone(bytes)) GTEST_SKIP() << "weights are not mapped alone here (AddressSanitizer)";
  const std::string mode = thp_mode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages: '" << mode << "'";
  void* p = gk::allocate_weights(bytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  const long long kb = smaps_in(p, bytes, "AnonHugePages:");
  gk::free_weights(p, bytes);
  if (kb < 0) GTEST_SKIP() << "/proc/self/smaps unreadable";
  // At least one huge page (a fragmented memory may grant fewer than four; without the
  // madvise, THP "madvise" grants none).
  EXPECT_GE(kb, 2048);
}

TEST(WeightsMemory, AnImpossibleRequestFailsCleanly) {
  const size_t max = std::numeric_limits<size_t>::max();
  gk::weights_vector<float>::allocator_type alloc;
  EXPECT_THROW(alloc.allocate(max / 2), std::bad_alloc);  // n * sizeof(float) would wrap
  gk::free_weights(nullptr, 123);  // a no-op
  // AddressSanitizer's heap ends the process on such requests (allocator_may_return_null).
  if (!gk::weights_mapped_alone(max / 2)) GTEST_SKIP() << "weights on the heap (AddressSanitizer)";
  for (size_t bytes : {max, max - 1, max / 2}) EXPECT_EQ(gk::allocate_weights(bytes), nullptr) << bytes;
  EXPECT_THROW(alloc.allocate(max / 8), std::bad_alloc);
}
