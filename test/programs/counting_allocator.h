// The allocator of the reliability helper programs (test/programs/reliability_child.cpp,
// test/programs/conv_reliability_child.cpp): every malloc / calloc / realloc / memalign /
// aligned_alloc / posix_memalign / operator new of the process is counted here, and the
// n-th can be made to fail. Include it in exactly one translation unit of a program.
//
// Under AddressSanitizer the allocations go on to ASan's own allocator (its exported
// __interceptor_ entry points), so that its leak checker sees what a failure path leaves
// behind; operator delete is replaced too, to free what our operator new took with malloc
// (ASan checks that the two match).
#pragma once
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

#include <unistd.h>

// The address space the process maps now, in bytes (the RLIMIT_AS tests' starting point).
inline long long mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long long pages = 0;
  if (f) {
    if (std::fscanf(f, "%lld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * sysconf(_SC_PAGESIZE);
}

// The allocator runs before ASan has mapped its shadow memory (the dynamic linker
// allocates while ASan starts): none of it may be instrumented.
#if defined(__SANITIZE_ADDRESS__)
#define GK_TEST_ALLOC __attribute__((no_sanitize_address))
#else
#define GK_TEST_ALLOC
#endif

extern "C" {
#if defined(__SANITIZE_ADDRESS__)
void* __interceptor_malloc(size_t);
void* __interceptor_calloc(size_t, size_t);
void* __interceptor_realloc(void*, size_t);
void* __interceptor_memalign(size_t, size_t);
void __interceptor_free(void*);
#define GK_TEST_REAL(name) __interceptor_##name
#else
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
#define GK_TEST_REAL(name) __libc_##name
#endif
}

namespace counting_allocator {
namespace detail {
inline std::atomic<long> g_calls{0};
inline std::atomic<long> g_fail_at{0};  // the allocation number that fails; 0: none
inline std::atomic<bool> g_failed{false};

// Counts one allocation; true when it is the one to fail.
GK_TEST_ALLOC inline bool next_allocation_fails() {
  const long n = g_calls.fetch_add(1) + 1;
  if (n != g_fail_at.load()) return false;
  g_failed = true;
  return true;
}
GK_TEST_ALLOC inline bool valid_alignment(size_t align) { return align >= sizeof(void*) && (align & (align - 1)) == 0; }
GK_TEST_ALLOC inline void* counted_memalign(size_t align, size_t size) {
  return next_allocation_fails() ? nullptr : GK_TEST_REAL(memalign)(align, size);
}
GK_TEST_ALLOC inline void* new_or_null(size_t size, size_t align) {
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) return next_allocation_fails() ? nullptr : GK_TEST_REAL(malloc)(size);
  return counted_memalign(align, size);
}
GK_TEST_ALLOC inline void* new_or_throw(size_t size, size_t align) {
  void* p = new_or_null(size, align);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace detail

// Allocations so far (every thread's).
inline long calls() { return detail::g_calls.load(); }
// The allocation with this number (as calls() counts them) fails; 0: none does.
inline void fail_number(long n) { detail::g_fail_at = n; }
inline bool injected_failure_happened() { return detail::g_failed.load(); }
inline void reset_injected() { detail::g_failed = false; }

}  // namespace counting_allocator

extern "C" {
GK_TEST_ALLOC void* malloc(size_t size) {
  return counting_allocator::detail::next_allocation_fails() ? nullptr : GK_TEST_REAL(malloc)(size);
}
GK_TEST_ALLOC void* calloc(size_t count, size_t size) {
  return counting_allocator::detail::next_allocation_fails() ? nullptr : GK_TEST_REAL(calloc)(count, size);
}
GK_TEST_ALLOC void* realloc(void* p, size_t size) {
  return counting_allocator::detail::next_allocation_fails() ? nullptr : GK_TEST_REAL(realloc)(p, size);
}
GK_TEST_ALLOC void* memalign(size_t align, size_t size) { return counting_allocator::detail::counted_memalign(align, size); }
GK_TEST_ALLOC void* aligned_alloc(size_t align, size_t size) { return counting_allocator::detail::counted_memalign(align, size); }
GK_TEST_ALLOC int posix_memalign(void** out, size_t align, size_t size) {
  if (!counting_allocator::detail::valid_alignment(align)) return EINVAL;
  void* p = counting_allocator::detail::counted_memalign(align, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}

// operator new too, explicitly (libstdc++'s would reach malloc anyway). Without ASan,
// delete stays libstdc++'s, which frees with free().
GK_TEST_ALLOC void* operator new(size_t n) { return counting_allocator::detail::new_or_throw(n, 0); }
GK_TEST_ALLOC void* operator new[](size_t n) { return counting_allocator::detail::new_or_throw(n, 0); }
GK_TEST_ALLOC void* operator new(size_t n, const std::nothrow_t&) noexcept { return counting_allocator::detail::new_or_null(n, 0); }
GK_TEST_ALLOC void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counting_allocator::detail::new_or_null(n, 0); }
GK_TEST_ALLOC void* operator new(size_t n, std::align_val_t a) { return counting_allocator::detail::new_or_throw(n, size_t(a)); }
GK_TEST_ALLOC void* operator new[](size_t n, std::align_val_t a) { return counting_allocator::detail::new_or_throw(n, size_t(a)); }
GK_TEST_ALLOC void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counting_allocator::detail::new_or_null(n, size_t(a));
}
GK_TEST_ALLOC void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counting_allocator::detail::new_or_null(n, size_t(a));
}
#if defined(__SANITIZE_ADDRESS__)
GK_TEST_ALLOC void operator delete(void* p) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete[](void* p) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete(void* p, size_t) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete[](void* p, size_t) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete(void* p, const std::nothrow_t&) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete[](void* p, const std::nothrow_t&) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete(void* p, std::align_val_t) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete[](void* p, std::align_val_t) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete(void* p, size_t, std::align_val_t) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete[](void* p, size_t, std::align_val_t) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { __interceptor_free(p); }
GK_TEST_ALLOC void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { __interceptor_free(p); }
#endif
#undef GK_TEST_REAL
#undef GK_TEST_ALLOC
