// Network operations (pooling, add, concat / split / shuffle, fully connected, BN folding):
// what they share. Every layout is read through one view, `Blocked`: an image is `blocks`
// channel blocks of h x w pixels of `lanes` floats each, so
//   NCHW   = 1-lane blocks, one per channel,
//   NCHWx  = x-lane blocks (the last one zero-padded),
//   NHWC   = one block of c lanes,
// and an op that walks (image, block, row) and vectorizes along a row's floats serves all
// five layouts with one loop nest. Data flows ops -> conv (layout rules) -> gemm -> common.
#pragma once
#include <algorithm>
#include <cstdint>
#include <new>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "common/simd.h"
#include "conv/conv.h"
#include "conv/vec.h"
#include "gemmkit.h"

#define GK_OPS_EXPORT extern "C" __attribute__((visibility("default")))

namespace gk {
namespace ops {

// A validated tensor as blocks of rows (see the top of this file).
struct Blocked {
  int64_t n, c, h, w;
  int64_t lanes;   // floats per pixel of a block: 1 (NCHW), x (NCHWx), c (NHWC)
  int64_t blocks;  // channel blocks per image: c (NCHW), ceil(c / x) (NCHWx), 1 (NHWC)
  int64_t row_floats() const { return w * lanes; }
  int64_t block_floats() const { return h * w * lanes; }
  int64_t floats() const { return n * blocks * block_floats(); }
  int64_t rows() const { return n * blocks * h; }  // (image, block, row) triples
  // Offset of row i of block b of image img.
  int64_t row_offset(int64_t img, int64_t b, int64_t i) const { return ((img * blocks + b) * h + i) * w * lanes; }
  // Lanes of block b that hold channels (the rest are NCHWx padding).
  int64_t real_lanes(int64_t b) const { return c - b * lanes < lanes ? c - b * lanes : lanes; }
  bool padded() const { return blocks * lanes != c; }
};
// The view of a tensor already validated (check_tensor), and of one of the same layout
// and n, h, w with other channels (concat / split parts) or other h, w (pool outputs).
Blocked blocked(const gk_tensor_desc& t);

// ---------------------------------------------------------------- validation
// Each check sets the last error, naming the function and the argument, and returns false.

// n, c, h, w >= 1, a known layout, and a float count (channels padded) within 2^60 (2^62
// bytes; no int64 overflow in any offset). `what` names the argument ("in", "parts[2]").
bool check_tensor(const char* fn, const char* what, const gk_tensor_desc* t);
bool check_pointer(const char* fn, const char* what, const void* p);
// By reference: a C caller may pass any int, read as its bytes until checked (raw_enum).
bool check_activation(const char* fn, const gk_activation& act);
// a * b (* c) as a float count within 2^60 (for matrices): false with a message otherwise.
bool check_floats(const char* fn, const char* what, int64_t a, int64_t b, int64_t c, int64_t* floats);
// Whether [a, a + a_floats) and [b, b + b_floats) share a byte.
bool overlaps(const void* a, int64_t a_floats, const void* b, int64_t b_floats);
// Refuses (message naming both) when the output overlaps an input.
bool check_disjoint(const char* fn, const char* out_name, const void* out, int64_t out_floats,
                    const char* in_name, const void* in, int64_t in_floats);

// Runs the body of a C entry point through guard_c_boundary (no C++ exception crosses the
// C boundary), and a successful call clears the last error.
template <typename Body>
gk_status guarded(const char* fn, const Body& body) noexcept {
  const gk_status s = guard_c_boundary(fn, body);
  if (s == GK_OK) clear_last_error();
  return s;
}

// ---------------------------------------------------------------- threads

// These ops move memory rather than compute: an extra thread pays off from about 32 KiB
// read and written. In a network the threads are awake between the layers, and a tensor
// the layer before wrote lies half in each core's cache: a thread alone waits for the
// other core's half line by line. ShuffleNetV2 on two threads (Zen 5, NCHW8, alternated,
// ms): 1.89-2.30 with 256 KiB, where its 14x14 and 7x7 shuffles ran on one thread, against
// 1.78-2.18 with 32 KiB; 8 and 16 KiB no better. Called alone on a tensor one core wrote,
// the small ones lose instead (bench_ops, two threads, us, 256 / 32 KiB: a 232 + 232
// channel concat at 7x7 1.8 / 6.1, 116 + 116 at 14x14 3.7 / 8.6): the networks decide.
inline int threads_for_bytes(double bytes) { return threads_for(bytes, 32.0 * 1024); }

// The calling thread's part of [0, total) inside a parallel_region (all of it outside
// one): equal contiguous shares, cut at multiples of `align` (no cache line shared between
// two writers when align covers one), so each thread streams its own part.
struct Share {
  int64_t begin, end;
};
inline Share my_share(int64_t total, int64_t align) {
  const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
  const int64_t chunk = ((total + nt - 1) / nt + align - 1) / align * align;
  const int64_t begin = std::min(total, t * chunk);
  return {begin, std::min(total, begin + chunk)};
}

// ---------------------------------------------------------------- row helpers

// Lanes [real, lanes) of `pixels` pixels set to 0: the padding channels of an NCHWx
// tensor's last block, written by every op whatever its inputs' padding holds.
void zero_padding_lanes(float* row, int64_t pixels, int64_t lanes, int64_t real);

// The ISA the vector loops are compiled for follows the active GEMM kernel (as conv's
// helpers do), so GEMMKIT_KERNEL=generic also selects the baseline code under test.
inline bool use_avx2() {
#if defined(__x86_64__)
  return active_config().kernel->simd != SimdLevel::Baseline;
#else
  return false;
#endif
}
// The AVX-512 helpers permute 256-bit registers from two sources at once (vpermi2ps ymm):
// that takes AVX-512VL, which the kernel table's AVX-512 entry asks for.
inline bool use_avx512vl() {
#if defined(__x86_64__)
  return active_config().kernel->simd == SimdLevel::Avx512;
#else
  return false;
#endif
}
#if defined(__x86_64__)
#define GK_OPS_AVX2 __attribute__((target("avx2")))
#define GK_OPS_AVX512VL __attribute__((target("avx512f,avx512vl,avx2")))
#endif

// act(v) lane by lane, as conv's epilogues apply it (ReLU turns NaN into 0), and the same
// for one float (the tails).
GK_INLINE v8 activate(v8 v, gk_activation act) { return conv::activate8(v, act); }
GK_INLINE float activate(float v, gk_activation act) {
  if (act == GK_ACT_NONE) return v;
  v = v > 0.0f ? v : 0.0f;
  return act == GK_ACT_RELU6 && v > 6.0f ? 6.0f : v;
}

}  // namespace ops
}  // namespace gk
