// std::vector storage aligned to a cache line, for plan-time buffers the kernels read with
// 32-byte vector loads (packed weights, biases, zero rows). A plain std::vector<float> of
// this size starts 16 bytes past a 64-byte boundary (malloc's header), so a third to a half
// of those loads straddle two cache lines and cost two load slots each.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace gk {

constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  CacheAlignedAllocator() = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine)));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheAlignedAllocator<U>&) const { return false; }
};

template <class T>
using aligned_vector = std::vector<T, CacheAlignedAllocator<T>>;

}  // namespace gk
