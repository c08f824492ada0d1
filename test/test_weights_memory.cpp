// Plan weights' memory (src/common/weights_memory.h): aligned, whole, and on huge pages
// where the system grants them; a request no system can meet fails with nullptr, and the
// allocator reports it as std::bad_alloc (which plan creation turns into a status).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "common/weights_memory.h"
#include "gemm_test_util.h"

namespace {

// /sys/kernel/mm/transparent_hugepage/enabled's selected mode ("always", "madvise",
// "never"), "" where unreadable (not Linux, or THP not built).
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

// The kB of AnonHugePages in /proc/self/smaps that cover [p, p + bytes), -1 if unreadable.
long huge_kb_in(const void* p, size_t bytes) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return -1;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  long total = 0;
  bool inside = false;
  for (std::string line; std::getline(f, line);) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) == 2 && line.find(':') > line.find('-')) {
      inside = a < hi && b > lo;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      total += std::stol(line.substr(14));
    }
  }
  return total;
}

}  // namespace

TEST(WeightsMemory, SmallAndLargeBuffersAreAlignedAndWhole) {
  for (size_t bytes : {size_t(1), size_t(4096 + 4), size_t(2) << 20, (size_t(9) << 20) + 12}) {
    void* p = gk::allocate_weights(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes >= (size_t(2) << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20), 0u) << bytes;
    }
    std::memset(p, 0x5a, bytes);  // every byte writable (ASan checks the small ones' bounds)
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
    gk::free_weights(p, bytes);
  }
}

TEST(WeightsMemory, LargeBuffersOnHugePagesWhereTheSystemGrantsThem) {
  // qemu-user's /proc/self/smaps is the host's view of the emulator.
  if (gktest::quick()) GTEST_SKIP() << "emulated";
  const std::string mode = thp_mode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages: '" << mode << "'";
  const size_t bytes = size_t(8) << 20;
  void* p = gk::allocate_weights(bytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  const long kb = huge_kb_in(p, bytes);
  gk::free_weights(p, bytes);
  if (kb < 0) GTEST_SKIP() << "/proc/self/smaps unreadable";
  // The kernel may lack free huge pages (fragmented memory): then none, never a crash;
  // where it has them, all four.
  if (kb == 0) GTEST_SKIP() << "no huge page granted (memory fragmented?)";
  EXPECT_EQ(kb, 8 * 1024);
}

TEST(WeightsMemory, AnImpossibleRequestFailsCleanly) {
  EXPECT_EQ(gk::allocate_weights(std::numeric_limits<size_t>::max() / 2), nullptr);
  gk::WeightsAllocator<float> alloc;
  EXPECT_THROW(alloc.allocate(std::numeric_limits<size_t>::max() / 8), std::bad_alloc);
  gk::free_weights(nullptr, 123);  // a no-op
}
