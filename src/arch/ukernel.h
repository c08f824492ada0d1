// The micro-kernel contract shared by every ISA (BLIS-style, row-stored C).
//
//   C[0:MR, 0:NR] = alpha * sum_p A[:, p] * B[p, :] + beta * C      (beta == 0: C not read)
//   (kernels with a fused epilogue then add a per-row bias and apply ReLU / ReLU6)
//
// A is a packed micro-panel: k steps of MR floats, 64-byte aligned (always packed by us).
// B is k rows of NR floats with a row stride rs_b: a packed panel (rs_b == NR) or, on the
// no-pack path, the user's matrix itself (unit column stride, any alignment).
// C is row-stored with row stride rs_c and unit column stride, any alignment.
// The assembly kernels compute full MR x NR tiles; gk::run_ukernel() gives every kernel
// partial tiles (m < MR, n < NR) through a local tile, so the contract holds for all.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {
// Field offsets are part of the assembly ABI: keep in step with the .S files.
struct gk_ukernel_args {
  const float* a;  // 0
  const float* b;  // 8
  float* c;        // 16
  int64_t k;       // 24
  int64_t rs_b;    // 32 (floats)
  int64_t rs_c;    // 40 (floats)
  float alpha;     // 48
  float beta;      // 52
  // The fused epilogue, read only by kernels whose KernelInfo says fused_epilogue (others
  // get it applied by gk::run_ukernel): C = act(alpha * A * B + beta * C + row_bias[i]).
  const float* row_bias;  // 56: nullptr, or one bias per row
  int32_t activation;     // 64: 0 none, 1 ReLU, 2 ReLU6 (as gk::Activation)
};
typedef void (*gk_ukernel_fn)(const gk_ukernel_args* args);

// Pointwise (1x1) convolution kernels on NCHW8 tensors (src/arch/x86_64/pointwise_avx2.inc):
//   y[pixel i][oc j] = act(bias[j] + sum_c x[pixel i][c] * w[c][j]),  i < MR, j < NR
// x points at pixel 0 of channel block 0 (channel c of pixel i at (c / 8) * x_block_stride
// + i * x_pixel_stride + c % 8 floats: 8 in an NCHW8 image; the channels of the partial
// block are x_channel_stride apart: 1 there, dilation_w where a direct convolution on an
// NCHW image makes a tap's kernel columns its channels); w is C rows of NR floats
// (packed at plan time); y points at pixel 0 of the first of NR / 8 output channel blocks
// (NCHW8: pixel i at 8 * i), y_block_stride floats apart; with `accumulate` the tile
// already there is added to the sum (a K-blocked convolution passes bias and activation
// with its last block only). MR pixels are read and written: the caller stages a partial
// pixel tile. One call runs `tiles` such tiles side by side.
struct gk_pointwise_args {
  const float* x;          // 0
  const float* w;          // 8
  float* y;                // 16
  int64_t full_blocks;     // 24: channel blocks of 8
  int64_t tail_channels;   // 32: channels of the last, partial block (0..7; any count
                           //     when full_blocks is 0)
  int64_t x_block_stride;  // 40 (floats)
  int64_t y_block_stride;  // 48 (floats)
  const float* bias;       // 56: nullptr, or NR floats
  int32_t activation;      // 64: as gk_ukernel_args
  int64_t x_pixel_stride;  // 72 (floats)
  int32_t accumulate;      // 80: non-zero: the output tile is added in (before bias and activation)
  int64_t tiles;           // 88: consecutive MR-pixel tiles to run (>= 1): tile t reads x +
                           //     t * MR * x_pixel_stride and writes y + t * MR * 8
  // 96, 104: a direct convolution's taps: the K rows are `taps` times (full_blocks,
  // tail_channels), tap t's input at the tile's plus tap_offsets[t] bytes (any sign).
  // Null offsets: one tap at offset 0 (a 1x1 or an im2col buffer); taps >= 1.
  const int64_t* tap_offsets = nullptr;
  int64_t taps = 1;
  int64_t x_channel_stride = 1;  // 112 (floats): between the partial block's channels
};
typedef void (*gk_pointwise_fn)(const gk_pointwise_args* args);
}
// The assembly reads the fields at these byte offsets.
static_assert(offsetof(gk_pointwise_args, tap_offsets) == 96 && offsetof(gk_pointwise_args, taps) == 104 &&
                  offsetof(gk_pointwise_args, x_channel_stride) == 112,
              "gk_pointwise_args layout: see pointwise_avx2.inc");

namespace gk {

// The vector ISA that the C++ helpers around a kernel (packing, GEMV) are compiled for
// while it is active: the same level as the kernel, so forcing a kernel also selects the
// helper code under test.
enum class SimdLevel { Baseline, Avx2, Avx512 };

// A kernel of the same MR and contract but fewer columns, for the last panel of an N that
// is not a multiple of NR (B panels keep their full NR width: rs_b is the packed width).
struct NarrowKernel {
  int nr;
  gk_ukernel_fn fn;
};

// One entry of an ISA's kernel table: the kernel, its shape, and its blocking: MC and NC
// are used when the cache sizes are unknown; KC is the value measured best with a 32 KiB
// L1d, scaled with the L1d detected (src/gemm/config.cpp).
struct KernelInfo {
  const char* name;     // what GEMMKIT_KERNEL / gk_set_kernel take: "avx512", "avx2", ...
  const char* isa;      // human-readable ISA level
  SimdLevel simd;
  int mr, nr;
  gk_ukernel_fn full_tile;
  // Narrower kernels by ascending width; unused entries are {0, nullptr}.
  NarrowKernel narrower[2];
  int64_t default_mc, default_kc, default_nc;
  bool (*cpu_supports)();
  bool automatic;  // eligible for automatic selection (else only when named)
  // Applies row_bias and activation itself (full and narrow kernels alike), so conv
  // epilogues cost no second pass over the C tile.
  bool fused_epilogue = false;
  // Pointwise NCHW8 kernels by descending width ({0, 0, nullptr} unused): where an ISA has
  // them, ungrouped NCHW8 convolutions run on them (src/conv/pointwise.cpp). Shapes are
  // at most kMaxPointwiseMr x kMaxPointwiseNr (the callers' staging is sized for that),
  // MR dividing 12 and NR a multiple of 8; `one_pixel` is the same kernel for one pixel
  // (MR 1, for the pixels past the last whole tile), or nullptr.
  struct Pointwise {
    int mr, nr;
    gk_pointwise_fn fn;
    gk_pointwise_fn one_pixel;
  } pointwise[3] = {};
};

// The ISA's kernel table, best first, ending with the portable kernel. Defined once per
// ARCH (src/arch/<arch>/kernels.cpp).
const KernelInfo* arch_kernels(int* count);

inline bool always_supported() { return true; }

// The portable C++ kernel (src/arch/generic), last entry of every table. constexpr so
// the tables are constant-initialized (no cross-file static initialization order).
extern "C" void gk_sgemm_4x8_generic(const gk_ukernel_args* args);
constexpr KernelInfo generic_kernel_info() {
  return {"generic", "portable C++", SimdLevel::Baseline, 4, 8, gk_sgemm_4x8_generic, {}, 128, 256, 4096,
          always_supported, true};
}

// The largest MR * NR of any kernel: the size of the local tile for partial tiles.
constexpr int kMaxTileFloats = 16 * 32;
// The largest pointwise kernel shape (pixels x output channels).
constexpr int kMaxPointwiseMr = 12, kMaxPointwiseNr = 32;

}  // namespace gk
