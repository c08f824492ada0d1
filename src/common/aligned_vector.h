// std::vector storage aligned to a cache line, for buffers read with 32-byte vector loads.
// A large plain std::vector<float> starts 16 bytes past a 64-byte boundary (malloc's
// header), so a third to a half of those loads straddle two cache lines. It matters for
// activations (the benchmark's tensors: a 960-channel 7x7 depthwise layer 10% slower
// unaligned); the pointwise plans' biases and zero rows use it because it costs nothing.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace gk {

constexpr std::size_t kCacheLine = 64;

// A std::allocator over Memory::allocate(bytes) (nullptr when out of memory) and
// Memory::free(p, bytes), given the bytes allocate was.
template <class T, class Memory>
struct MemoryAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = MemoryAllocator<U, Memory>;
  };
  MemoryAllocator() = default;
  template <class U>
  MemoryAllocator(const MemoryAllocator<U, Memory>&) {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    void* p = Memory::allocate(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) { Memory::free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const MemoryAllocator<U, Memory>&) const { return true; }
  template <class U>
  bool operator!=(const MemoryAllocator<U, Memory>&) const { return false; }
};

struct CacheAlignedMemory {
  static void* allocate(std::size_t bytes) {
    return ::operator new(bytes, std::align_val_t(kCacheLine), std::nothrow);
  }
  static void free(void* p, std::size_t) { ::operator delete(p, std::align_val_t(kCacheLine)); }
};

template <class T>
using aligned_vector = std::vector<T, MemoryAllocator<T, CacheAlignedMemory>>;

}  // namespace gk
