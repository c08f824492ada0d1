// std::vector storage aligned to a cache line, for buffers read with 32-byte vector loads.
// A large plain std::vector<float> starts 16 bytes past a 64-byte boundary (malloc's
// header), so a third to a half of those loads straddle two cache lines. It matters for
// activations (the benchmark's tensors: a 960-channel 7x7 depthwise layer 10% slower
// unaligned); for the pointwise plans' weights, biases and zero rows it measured no
// difference, and is used there because it costs nothing.
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
