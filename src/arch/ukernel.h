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
// Field offsets are part of the assembly ABI: the static_asserts below hold each one the
// .S files read.
struct gk_ukernel_args {
  const float* a;
  const float* b;
  float* c;
  int64_t k;
  int64_t rs_b;  // floats
  int64_t rs_c;  // floats
  float alpha;
  float beta;
  // The fused epilogue, read only by kernels whose KernelInfo says fused_epilogue (others
  // get it applied by gk::run_ukernel): C = act(alpha * A * B + beta * C + row_bias[i]).
  const float* row_bias;  // nullptr, or one bias per row
  int32_t activation;     // 0 none, 1 ReLU, 2 ReLU6 (as gk::Activation)
};
typedef void (*gk_ukernel_fn)(const gk_ukernel_args* args);

// Pointwise kernels (src/arch/x86_64/pointwise_avx2.inc): the GEMM kernel turned around,
// an MR x NR tile of Y = act(bias + X W) whose K "channels" are read from each row of X
// in blocks of 8 and whose NR columns are stored as NR / 8 blocks of 8:
//   y[i][j] = act(bias[j] + sum_c x[i][c] * w[c][j]),  i < MR, j < NR
// Channel c of row i is at (c / 8) * x_block_stride + i * x_row_stride + c % 8 floats
// from x (the last, partial block's channels x_channel_stride apart); w is K rows of NR
// floats; column j of row i is at (j / 8) * y_block_stride + i * y_row_stride + j % 8
// from y. With `accumulate` the tile already in y is added to the sum (a K-blocked caller
// passes bias and activation with its last block only). MR rows are read and written: the caller
// stages a partial tile. One call runs `tiles` tiles, MR rows apart.
// A tap list: K comes as `taps` runs of (full_blocks, tail_channels) channels, run t read
// at the row's address plus tap_offsets[t] bytes (any sign); null offsets: one run at
// offset 0. (A convolution's rows are pixels, its columns output channels; the in-place-A
// GEMM's rows are A's.)
struct gk_pointwise_args {
  const float* x;
  const float* w;
  float* y;
  int64_t full_blocks;     // blocks of 8 channels per row (per tap)
  int64_t tail_channels;   // channels of the last, partial block (0..7; any count when full_blocks is 0)
  int64_t x_block_stride;  // floats
  int64_t y_block_stride;  // floats
  const float* bias;       // nullptr, or NR floats
  int32_t activation;      // as gk_ukernel_args
  int64_t x_row_stride;    // floats
  int32_t accumulate;      // non-zero: the tile in y is added in (before bias and activation)
  int64_t tiles;           // consecutive MR-row tiles to run (>= 1): tile t reads x + t * MR *
                           // x_row_stride and writes y + t * MR * y_row_stride
  const int64_t* tap_offsets = nullptr;
  int64_t taps = 1;
  int64_t x_channel_stride = 1;  // floats, between the partial block's channels
  // floats between output pixels: 8 in an NCHW8 block; in NHWC rows (y_block_stride 8) the
  // row length, so the kernel stores straight into them
  int64_t y_row_stride = 8;
  // Non-zero: the panel's last 8-channel block is neither stored nor read back (a last
  // panel reaching one block past the output's channels, its weights zero there); only
  // where KernelInfo::Pointwise::skips_last_block.
  int64_t skip_last_block = 0;
  // Bytes from the weights to rows that the call's tiles fetch into L2 (the 12x32 AVX-512
  // kernel and AVX2's whole-tile kernels; full_blocks x 8 rows of NR floats, at a fraction
  // of the rate rows are read):
  // the next panel's, so a driver running several tiles of a panel brings the next one's
  // weights while it computes from these. From the second tile on, or with
  // w_next_from_first_tile from the first. 0: none (the 12x32 then fetches the rows just
  // ahead of those it reads; the others nothing). Prefetches never fault: they may point
  // past the end.
  int64_t w_next_offset = 0;
  int64_t w_next_from_first_tile = 0;
};
typedef void (*gk_pointwise_fn)(const gk_pointwise_args* args);
}

// The byte offsets the assembly reads (sgemm_avx2.inc, sgemm_14x32_avx512.S,
// pointwise_avx2.inc, pointwise_avx512.inc, the NEON kernel).
static_assert(offsetof(gk_ukernel_args, a) == 0 && offsetof(gk_ukernel_args, b) == 8 &&
                  offsetof(gk_ukernel_args, c) == 16 && offsetof(gk_ukernel_args, k) == 24 &&
                  offsetof(gk_ukernel_args, rs_b) == 32 && offsetof(gk_ukernel_args, rs_c) == 40 &&
                  offsetof(gk_ukernel_args, alpha) == 48 && offsetof(gk_ukernel_args, beta) == 52 &&
                  offsetof(gk_ukernel_args, row_bias) == 56 && offsetof(gk_ukernel_args, activation) == 64,
              "gk_ukernel_args layout: see the .S files");
static_assert(offsetof(gk_pointwise_args, x) == 0 && offsetof(gk_pointwise_args, w) == 8 &&
                  offsetof(gk_pointwise_args, y) == 16 && offsetof(gk_pointwise_args, full_blocks) == 24 &&
                  offsetof(gk_pointwise_args, tail_channels) == 32 && offsetof(gk_pointwise_args, x_block_stride) == 40 &&
                  offsetof(gk_pointwise_args, y_block_stride) == 48 && offsetof(gk_pointwise_args, bias) == 56 &&
                  offsetof(gk_pointwise_args, activation) == 64 && offsetof(gk_pointwise_args, x_row_stride) == 72 &&
                  offsetof(gk_pointwise_args, accumulate) == 80 && offsetof(gk_pointwise_args, tiles) == 88 &&
                  offsetof(gk_pointwise_args, tap_offsets) == 96 && offsetof(gk_pointwise_args, taps) == 104 &&
                  offsetof(gk_pointwise_args, x_channel_stride) == 112 &&
                  offsetof(gk_pointwise_args, y_row_stride) == 120 &&
                  offsetof(gk_pointwise_args, skip_last_block) == 128 &&
                  offsetof(gk_pointwise_args, w_next_offset) == 136 &&
                  offsetof(gk_pointwise_args, w_next_from_first_tile) == 144,
              "gk_pointwise_args layout: see pointwise_avx2.inc and pointwise_avx512.inc");

namespace gk {

// The vector ISA that the C++ helpers around a kernel (packing, GEMV) are compiled for
// while it is active: the same level as the kernel, so forcing a kernel also selects the
// helper code under test.
enum class SimdLevel { Baseline, Avx2, Avx512 };

// A kernel of the same MR and contract but fewer columns, for the last panel of an N that
// is not a multiple of NR (B panels keep their full NR width: rs_b is the packed width).
struct NarrowKernel {
  int nr = 0;
  gk_ukernel_fn fn = nullptr;
};

// One entry of an ISA's kernel table, written with the builder below so each field is
// named: the kernel, its shape, and its blocking. MC and NC are used when the cache sizes
// are unknown; KC is the value measured best with a 32 KiB L1d, scaled with the L1d
// detected (src/gemm/config.cpp).
struct KernelInfo {
  const char* name = "";  // what GEMMKIT_KERNEL / gk_set_kernel take: "avx512", "avx2", ...
  const char* isa = "";   // human-readable ISA level
  SimdLevel simd = SimdLevel::Baseline;
  int mr = 0, nr = 0;
  gk_ukernel_fn full_tile = nullptr;
  // Narrower kernels by ascending width; unused entries are {0, nullptr}.
  NarrowKernel narrower[2] = {};
  int64_t default_mc = 0, default_kc = 0, default_nc = 0;
  bool (*cpu_supports)() = nullptr;
  bool automatic = true;  // eligible for automatic selection (else only when named)
  // Applies row_bias and activation itself (full and narrow kernels alike), so epilogues
  // cost no second pass over the C tile.
  bool fused_epilogue = false;
  // Prefetches its own C tile late in K (C_AHEAD_GROUPS in its source): the driver then
  // prefetches the next call's tile only where K is too short for that to land.
  bool prefetches_c_late = false;
  // Pointwise kernels by descending width ({0, 0, nullptr} unused): where an ISA has them,
  // ungrouped NCHW8 convolutions (src/conv/pointwise.cpp) and the in-place-A GEMM path
  // run on them. Shapes are at most kMaxPointwiseMr x kMaxPointwiseNr (the callers'
  // staging is sized for that), MR dividing 12 and NR a multiple of 8; `one_row` is the
  // same kernel for one row (MR 1, for the rows past the last whole tile), or nullptr;
  // `four_rows` the same for 4 rows, or nullptr (for the rows past the last whole tile:
  // whole 4-row tiles, or, where the operand is zero-padded, one reaching past the last row).
  // `skips_last_block`: all three honour gk_pointwise_args::skip_last_block.
  struct Pointwise {
    int mr = 0, nr = 0;
    gk_pointwise_fn fn = nullptr;
    gk_pointwise_fn one_row = nullptr;
    gk_pointwise_fn four_rows = nullptr;
    bool skips_last_block = false;
  } pointwise[3] = {};

  // The builder: KernelInfo::entry(...).tile(...).narrow(...)... Each call names what it
  // sets; narrow() and pointwise_kernel() append in the order given.
  static constexpr KernelInfo entry(const char* name, const char* isa, SimdLevel simd) {
    KernelInfo k;
    k.name = name, k.isa = isa, k.simd = simd;
    return k;
  }
  constexpr KernelInfo tile(int m, int n, gk_ukernel_fn fn) const {
    KernelInfo k = *this;
    k.mr = m, k.nr = n, k.full_tile = fn;
    return k;
  }
  constexpr KernelInfo narrow(int n, gk_ukernel_fn fn) const {
    KernelInfo k = *this;
    (k.narrower[0].nr ? k.narrower[1] : k.narrower[0]) = NarrowKernel{n, fn};
    return k;
  }
  constexpr KernelInfo blocking(int64_t mc, int64_t kc, int64_t nc) const {
    KernelInfo k = *this;
    k.default_mc = mc, k.default_kc = kc, k.default_nc = nc;
    return k;
  }
  constexpr KernelInfo supported_if(bool (*supports)()) const {
    KernelInfo k = *this;
    k.cpu_supports = supports;
    return k;
  }
  constexpr KernelInfo named_only() const {
    KernelInfo k = *this;
    k.automatic = false;
    return k;
  }
  constexpr KernelInfo with_fused_epilogue() const {
    KernelInfo k = *this;
    k.fused_epilogue = true;
    return k;
  }
  constexpr KernelInfo with_late_c_prefetch() const {
    KernelInfo k = *this;
    k.prefetches_c_late = true;
    return k;
  }
  constexpr KernelInfo pointwise_kernel(int m, int n, gk_pointwise_fn fn, gk_pointwise_fn one_row,
                                        gk_pointwise_fn four_rows = nullptr, bool skips_last_block = false) const {
    KernelInfo k = *this;
    int slot = 0;
    while (slot < 2 && k.pointwise[slot].nr) ++slot;  // widths, not pointers: a symbol's
                                                       // address is no constant under UBSan
    k.pointwise[slot] = Pointwise{m, n, fn, one_row, four_rows, skips_last_block};
    return k;
  }
};

// The ISA's kernel table, best first, ending with the portable kernel. Defined once per
// ARCH (src/arch/<arch>/kernels.cpp).
const KernelInfo* arch_kernels(int* count);

inline bool always_supported() { return true; }

// The portable C++ kernel (src/arch/generic), last entry of every table. constexpr so
// the tables are constant-initialized (no cross-file static initialization order).
extern "C" void gk_sgemm_4x8_generic(const gk_ukernel_args* args);
constexpr KernelInfo generic_kernel_info() {
  return KernelInfo::entry("generic", "portable C++", SimdLevel::Baseline)
      .tile(4, 8, gk_sgemm_4x8_generic)
      .blocking(128, 256, 4096)
      .supported_if(always_supported);
}

// The largest MR * NR of any kernel: the size of the local tile for partial tiles.
constexpr int kMaxTileFloats = 16 * 32;
// The largest pointwise kernel shape (pixels x output channels).
constexpr int kMaxPointwiseMr = 12, kMaxPointwiseNr = 32;

}  // namespace gk
