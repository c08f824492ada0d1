// See weights_memory.h.
#include "common/weights_memory.h"

#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gk {
namespace {

constexpr std::size_t kHugePage = std::size_t(2) << 20;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kAlignment = 64;

std::size_t round_up(std::size_t n, std::size_t unit) { return (n + unit - 1) / unit * unit; }
bool own_mapping(std::size_t bytes) {
#if defined(__linux__)
  return bytes >= kHugePage;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace

void* allocate_weights(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (!own_mapping(bytes)) {
    void* p = nullptr;
    return posix_memalign(&p, kAlignment, round_up(bytes, kAlignment)) == 0 ? p : nullptr;
  }
#if defined(__linux__)
  // Mapped with a huge page's slack, then trimmed to a 2 MiB aligned start and the pages
  // the buffer needs (its tail past the last whole huge page stays on small pages).
  const std::size_t length = round_up(bytes, kPage), mapped = length + kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePage - 1) & ~(std::uintptr_t(kHugePage) - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::size_t tail = start + mapped - (aligned + length);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, length, MADV_HUGEPAGE);  // advice only: refused (THP off), small pages serve
  return p;
#else
  return nullptr;
#endif
}

void free_weights(void* p, std::size_t bytes) {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  if (!own_mapping(bytes)) return std::free(p);
#if defined(__linux__)
  munmap(p, round_up(bytes, kPage));
#endif
}

}  // namespace gk
