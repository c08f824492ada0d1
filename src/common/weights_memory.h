// Memory for a plan's packed weights. A layer reads its weights once per run, and in a
// network whose weights outgrow the last-level cache it reads them from memory: ResNet-18's
// 256- and 512-channel layers ran 1.5-2.2x their cached time inside the network (Xeon,
// 2026-12-07). From 2 MiB up a buffer is mapped on its own, 2 MiB aligned, and marked for
// transparent huge pages (madvise: the system's THP setting decides), which spares a page
// walk per 4 KiB streamed: those layers with their weights uncached ran 8-13% faster.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace gk {

// 64-byte aligned; nullptr when out of memory. Freed by free_weights with the same size.
void* allocate_weights(std::size_t bytes);
void free_weights(void* p, std::size_t bytes);

template <class T>
struct WeightsAllocator {
  using value_type = T;
  WeightsAllocator() = default;
  template <class U>
  WeightsAllocator(const WeightsAllocator<U>&) {}
  T* allocate(std::size_t n) {
    void* p = allocate_weights(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) { free_weights(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const WeightsAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const WeightsAllocator<U>&) const { return false; }
};

template <class T>
using weights_vector = std::vector<T, WeightsAllocator<T>>;

}  // namespace gk
