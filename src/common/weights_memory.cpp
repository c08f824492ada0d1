// See weights_memory.h.
#include "common/weights_memory.h"

#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace gk {
namespace {

constexpr std::size_t kHugePage = std::size_t(2) << 20;

#if defined(__linux__)
std::size_t page_size() {
  const long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<std::size_t>(p) : 4096;
}

// Mapped with a huge page's slack, then trimmed to a 2 MiB aligned start and the pages
// the buffer needs (its tail past the last whole huge page stays on small pages).
void* map_alone(std::size_t bytes) {
  const std::size_t page = page_size();
  if (bytes > static_cast<std::size_t>(-1) - kHugePage - page) return nullptr;
  const std::size_t length = (bytes + page - 1) / page * page, mapped = length + kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePage - 1) & ~(std::uintptr_t(kHugePage) - 1);
  if (aligned > start) munmap(raw, aligned - start);
  munmap(reinterpret_cast<void*>(aligned + length), start + mapped - (aligned + length));
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, length, MADV_HUGEPAGE);  // advice only: refused (THP off), small pages serve
  return p;
}
#endif

}  // namespace

bool weights_mapped_alone(std::size_t bytes) {
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
  return bytes >= kHugePage;
#else
  (void)bytes;
  return false;
#endif
}

void* allocate_weights(std::size_t bytes) {
#if defined(__linux__)
  if (weights_mapped_alone(bytes)) return map_alone(bytes);
#endif
  void* p = nullptr;
  return posix_memalign(&p, kCacheLine, bytes ? bytes : 1) == 0 ? p : nullptr;
}

void free_weights(void* p, std::size_t bytes) {
  if (!p) return;
#if defined(__linux__)
  if (weights_mapped_alone(bytes)) {
    const std::size_t page = page_size();
    munmap(p, (bytes + page - 1) / page * page);
    return;
  }
#endif
  std::free(p);
}

}  // namespace gk
