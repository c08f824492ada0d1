// Memory for a plan's packed weights. A layer reads its weights once per run, and in a
// network whose packed weights outgrow the last-level cache it reads them from memory
// (docs/design.md, "Weights in memory"). Large buffers are mapped on their own, 2 MiB
// aligned, and marked for transparent huge pages (madvise: the system's THP setting
// decides), which spares the stream a page walk every 4 KiB.
#pragma once
#include <cstddef>
#include <vector>

#include "common/aligned_vector.h"

namespace gk {

// Whether a buffer of `bytes` gets a mapping of its own: from 2 MiB up on Linux, except
// under AddressSanitizer (which checks only the heap's bounds).
bool weights_mapped_alone(std::size_t bytes);
// Cache-line aligned (2 MiB aligned when mapped alone); nullptr when out of memory.
// Freed by free_weights with the same size.
void* allocate_weights(std::size_t bytes);
void free_weights(void* p, std::size_t bytes);

struct WeightsMemory {
  static void* allocate(std::size_t bytes) { return allocate_weights(bytes); }
  static void free(void* p, std::size_t bytes) { free_weights(p, bytes); }
};

template <class T>
using weights_vector = std::vector<T, MemoryAllocator<T, WeightsMemory>>;

}  // namespace gk
