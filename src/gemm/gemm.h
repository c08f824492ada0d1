// The GEMM core's internal interface: the problem description the driver runs, the A and
// B operand sources (plain matrices now, conv's fused im2col / pre-packed weights later),
// the epilogue, the active kernel and its blocking.
//
// Internally C is always row-stored (unit column stride): a column-major BLAS call is run
// as the transposed problem C^T = op(B)^T op(A)^T, which is the same memory.
#pragma once
#include <cstdint>
#include <vector>
#include <string>

#include "arch/ukernel.h"
#include "common/runtime.h"

namespace gk {

// A strided matrix: element (i, j) at p[i * rs + j * cs].
struct MatrixView {
  const float* p;
  int64_t rs, cs;
  const float& at(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
  MatrixView transposed() const { return {p, cs, rs}; }
};

// The A micro-panels of one block, evenly spaced: panel q at first + q * stride.
struct APanels {
  const float* first = nullptr;
  int64_t stride = 0;
  const float* operator[](int64_t q) const { return first + q * stride; }
};

// Where the driver gets A micro-panels: MR rows [i0, i0 + rows) x K range [k0, k0 + kc),
// as kc steps of MR floats (rows past `rows` zero). Returns a pointer to the panel: either
// `scratch` after packing into it, or memory the source already holds packed.
class ASource {
 public:
  virtual ~ASource() = default;
  virtual const float* panel(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr,
                             float* scratch) const = 0;
  // True when panel() never writes `scratch` (the driver then allocates none).
  virtual bool prepacked() const { return false; }
  // The panels of rows [i0, i0 + rows), MR at a time: packed at scratch + q * kc * mr by
  // default (one panel() after another); a source holding them packed returns its own.
  virtual APanels block(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr, float* scratch) const;
};

// Where the driver gets B micro-panels: "fill this kc x NR micro-panel" for K range
// [k0, k0 + kc) and columns [j0, j0 + cols), as kc rows of nr floats, columns past `cols`
// zero. A plain matrix is one packer; conv's fused im2col is another.
class BPacker {
 public:
  virtual ~BPacker() = default;
  virtual void pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                          float* dst) const = 0;
  // Hints that rows [k0, k0 + kc) of columns [j0, j0 + cols) will be packed soon, so the
  // driver can overlap fetching them with computing on the current panel: this call
  // fetches part `part` of `parts` equal parts of that region, cut along the source's own
  // layout (each cache line in one part).
  virtual void prefetch(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t part, int64_t parts) const {
    (void)k0, (void)kc, (void)j0, (void)cols, (void)part, (void)parts;
  }
  // The panels of columns [j0, j0 + cols), nr at a time (panel q at dst + q * kc * nr). By
  // default one pack_panel() after another.
  virtual void pack_panels(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const;
  // Row k0's first element of columns [j0, ...) where the source's rows are contiguous (a
  // kernel can read them in place, rs_b apart), else nullptr.
  virtual const float* rows_in_place(int64_t k0, int64_t j0, int64_t* rs_b) const {
    (void)k0, (void)j0, (void)rs_b;
    return nullptr;
  }
};

// A plain strided A matrix, packed on the fly.
class PlainA final : public ASource {
 public:
  explicit PlainA(MatrixView a) : a_(a) {}
  const float* panel(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr,
                     float* scratch) const override;
  APanels block(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr, float* scratch) const override;

 private:
  MatrixView a_;
};

// A matrix packed once into MR-row micro-panels over its whole K (conv weights, packed at
// plan time): panel i occupies [i * K * MR, (i + 1) * K * MR). Only valid with the MR it
// was packed for, and with i0 a multiple of MR (as the driver asks).
class PackedA final : public ASource {
 public:
  PackedA(const MatrixView& a, int64_t m, int64_t k, int mr);
  ~PackedA() override;
  PackedA(const PackedA&) = delete;
  PackedA& operator=(const PackedA&) = delete;
  const float* panel(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr,
                     float* scratch) const override;
  bool prepacked() const override { return true; }
  APanels block(int64_t i0, int64_t rows, int64_t k0, int64_t kc, int mr, float* scratch) const override;
  bool ok() const { return data_ != nullptr; }
  int mr() const { return mr_; }

 private:
  float* data_ = nullptr;  // allocate_weights (a conv plan's weights)
  size_t bytes_ = 0;
  int64_t k_;
  int mr_;
};

// A plain strided B matrix.
class PlainB final : public BPacker {
 public:
  explicit PlainB(MatrixView b) : b_(b) {}
  void pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr,
                  float* dst) const override;
  void prefetch(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t part, int64_t parts) const override;
  void pack_panels(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const override;
  const float* rows_in_place(int64_t k0, int64_t j0, int64_t* rs_b) const override {
    if (b_.cs != 1) return nullptr;
    *rs_b = b_.rs;
    return &b_.at(k0, j0);
  }
  const MatrixView& view() const { return b_; }

 private:
  MatrixView b_;
};

// Applied to each C tile when its last K block is stored, while the tile is in L1:
// C = act(C + bias). Conv uses it so it never makes a second pass over its output.
enum class BiasMode { None, PerRow, PerColumn };
enum class Activation { None, Relu, Relu6 };  // the values gk_ukernel_args::activation takes
struct Epilogue {
  const float* bias = nullptr;
  BiasMode bias_mode = BiasMode::None;
  Activation act = Activation::None;
  bool active() const { return bias_mode != BiasMode::None || act != Activation::None; }
};

// C[m x n] (row stride rs_c, unit column stride) = alpha * A * B + beta * C, then epilogue.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const ASource* a = nullptr;
  const BPacker* b = nullptr;
  float* c = nullptr;
  int64_t rs_c = 0;
  // Non-zero: C is stored channel-blocked by 8 rows (a conv output in NCHW8), element
  // (i, j) at c[(i / 8) * c_block_stride + j * 8 + i % 8], and rs_c is unused. Needs an MR
  // that divides 8.
  int64_t c_block_stride = 0;
  Epilogue epilogue;
};

// Where sgemm_rowstored's paths hand over (choose_gemm_path, src/gemm/path.cpp, which says
// what measured each limit), for one kernel on this machine's caches.
struct PathLimits {
  bool tiny_blocks = false;           // the tiny paths' vector blocks run this kernel's ISA
  int64_t micro_lanes = 0;            // micro: its vectors' lanes (0: no micro path),
  int64_t micro_max_multiply_adds = 0;  // at most this many multiply-adds,
  int64_t micro_max_c_elements = 0;   // C at most this many elements
  int64_t micro_max_cost = 0;         // and micro_choice's estimate at most this,
  int64_t micro_columns_cost_per_vector = 0;  // or, columns form, this per vector multiply-add
  int64_t micro_columns_max_m = 0;   // past them, the columns form (a few columns of C,
  int64_t micro_columns_max_n = 0;   // A in L1: wide_columns_serve) up to m x n and
  int64_t micro_columns_max_a_elements = 0;  // m k within these
  int64_t micro_dots_k_per_row = 0;  // and the dots form with K this many times min(m, n)
  double small_multiply_adds = 0;     // tiny and small: at most this many, one thread
  int64_t small_max_k = 0;            // small: its MR x K A micro-panel stays in L1
  int64_t narrow_max_columns = 0;     // tiny-narrow: one block of columns
  int64_t narrow_max_b_bytes = 0;     // tiny-narrow: B stays in half of L2
  int64_t gemv_min_matrix_bytes = 0;  // GEMV of several vectors: the matrix is past L2
  int64_t gemv_threads_min_matrix_bytes = 0;  // a GEMV on more than one thread
  int64_t gemv_axpy_threads_min_matrix_bytes = 0;  // the same for one vector in axpy form
  int64_t gemv_dot_threads_min_matrix_bytes = 0;  // and for one vector in dot form
  int64_t dot_max_vectors = 0;        // dot products: at most this many rows or columns of C,
  int64_t dot_min_k = 0;              // K at least this,
  int64_t dot_max_matrix_bytes = 0;   // and the other operand within L1;
  int64_t dot_long_min_k = 0;         // or K at least this,
  int64_t dot_long_max_matrix_bytes = 0;  // the other operand within this,
  int64_t dot_long_max_columns = 0;   // and at most this many columns of C against more rows
  int64_t dot_long_max_rows = 0;      // or this many rows against more columns
  int64_t few_vectors_min_rows = 0;   // few columns of C: C at least this long
  int64_t few_rows_min_columns = 0;   // few rows of C: C at least this wide
  int64_t few_vectors_dot_min_k = 0;  // few vectors in dot form: K at least this,
  int64_t few_rows_dot_min_k = 0;     // and with 3-4 rows of C at least this
  int64_t wide_dot_max_vectors = 0;   // 5 to this many columns of C in dot form (0: none),
  int64_t wide_dot_min_matrix_bytes = 0;  // the matrix past this
  int64_t wide_dot_max_matrix_bytes = 0;  // and within this
  int64_t few_columns_axpy_max_columns = 0;  // 5 to this many columns against A's contiguous columns (0: none),
  int64_t few_columns_axpy_min_rows = 0;     // C at least this long,
  int64_t few_columns_axpy_max_sums_bytes = 0;  // and past kGemvAxpyDirectColumns of K, C within this
  int64_t few_rows_axpy_max_vectors = 0;  // few rows of C with B's rows contiguous: at most this many
  int64_t tiny_block_rows = 0;        // one tiny row block with B's rows contiguous: any size
  bool in_place_a_kernels = false;    // pointwise kernels that can read A in place
  int64_t in_place_a_min_columns = 0; // below, the packed path wins (AVX-512's 8-wide kernel)
  int64_t in_place_a_max_staged = 0;  // floats of the staged C'
  int64_t b_in_place_min_panel_bytes = 0;  // B per panel: rows read in place from this panel size (0: never)
  int64_t b_in_place_max_span_bytes = 0;   // ... spanning at most this, with C's strip
  int64_t l2_set_period_bytes = 64 << 10;  // addresses this far apart share an L2 set (a lower bound)
  int64_t private_b_max_bytes = 0;    // a B block at most this size: each thread packs its own panels
};
PathLimits path_limits(const KernelInfo& kernel);
// Whether the per-panel driver's kernel reads a B panel (kc rows rs_b apart) in place, with
// C's strip spanning c_span floats, rather than packing it.
bool b_panel_rows_in_place(const PathLimits& l, int64_t kc, int nr, int64_t rs_b, int64_t c_span);

// The kernel in use, the blocking derived for it and its paths' limits.
struct KernelConfig {
  const KernelInfo* kernel;
  int64_t mc, kc, nc;
  PathLimits paths;
};
const KernelConfig& active_config();
// The kernel convolutions run on: the active one, or, when it cannot run NCHW8 in place (no
// pointwise kernels, no fused epilogue, an MR that does not divide 8: AVX-512 14x32), the
// next entry of the table that can. Measured on an Intel Xeon (model 207) with AVX-512 14x32
// active, Winograd ran NCHW8 through NCHW copies: whole ResNet-18 39-40 ms against 33-36
// on AVX2 4x24.
const KernelConfig& conv_config();
// The kernel whose pointwise kernels ungrouped NCHW8 convolutions run on: the active one
// where it has them (AVX-512: its 16-channel pointwise kernels beside the 14x32 GEMM, whose
// MR keeps the GEMM-based paths on conv_config()'s), else conv_config()'s.
const KernelInfo& pointwise_kernel();
// Selects the kernel by name ("" = automatic). false if unknown or unsupported here.
bool select_kernel(const char* name);
// Blocking for `kernel` from the detected caches (or its defaults), then GEMMKIT_MC/KC/NC.
KernelConfig derive_blocking(const KernelInfo& kernel);

// The narrowest kernel of `kernel`'s shape family that covers n <= NR columns (the full
// tile kernel if none is narrower); *width receives the columns it computes.
gk_ukernel_fn kernel_for_columns(const KernelInfo& kernel, int64_t n, int64_t* width);

// The one rule for splitting columns among tiles of 24, 16 and 8: with `left` columns to
// go and 24 the widest width, take 16 when 24 would leave 8 or fewer (16 + 9..16 rather
// than 24 + 1..8): a 4x8 tile spends 4 broadcasts per k on 4 FMAs (32^3 took as long in
// its last 8 columns as in the first 24, 128^3 at 1 thread ran 0.93x OpenBLAS).
constexpr bool takes_16_not_24(int64_t widest, int64_t left) { return widest == 24 && left > 24 && left <= 32; }

// Column panels of one kernel width each: the widest kernel while more columns than it
// are left, but 16 rather than 24 where takes_16_not_24; the rest on the narrowest kernel
// that covers it (a partial panel, cols < width, when the columns are fewer).
struct ColumnPanel {
  int64_t j, width, cols;  // first column, kernel width, real columns
};
// Computed, not stored (a GEMM call allocates nothing): full-width panels, then a tail
// of one or two.
class ColumnPanels {
 public:
  ColumnPanels(const KernelInfo& kernel, int64_t n);
  int64_t size() const { return full_ + tail_count_; }
  ColumnPanel operator[](int64_t q) const { return q < full_ ? ColumnPanel{q * nr_, nr_, nr_} : tail_[q - full_]; }

 private:
  int64_t nr_, full_ = 0;
  ColumnPanel tail_[2] = {};
  int tail_count_ = 0;
};
// The same for the pointwise kernels (KernelInfo::pointwise) over `columns` rounded up to
// whole 8-column blocks: the widest kernel while it fits, but 16 rather than 24 where
// takes_16_not_24 (two 12-accumulator tiles rather than a 6-accumulator one). Empty
// without them. With `past_last_block`, a last 8 or 24 columns go to a kernel one block
// wider that skips its last block (skips_last_block) where there is one: AVX-512's 16 and
// 32 wide ones rather than AVX2's 6x8 (figures: docs/design.md, "Panels and ISAs").
struct PointwisePanel {
  int64_t j;  // first column (a multiple of 8)
  const KernelInfo::Pointwise* kernel;
  int64_t blocks;  // 8-column blocks stored: kernel->nr / 8, or one fewer
};
std::vector<PointwisePanel> pointwise_panels(const KernelInfo& kernel, int64_t columns, bool past_last_block = false);
// The same into panels[0, capacity) without allocating; returns how many (at most capacity).
int pointwise_panels(const KernelInfo& kernel, int64_t columns, PointwisePanel* panels, int capacity,
                     bool past_last_block = false);
// The rows (K) of one block of the pointwise kernels' weights when `k_rows` must be cut:
// balanced whole 8-row blocks whose panel (rows x `widest` columns x 4 B) takes half of L1
// (AVX2, Zen 3), or with AVX-512's kernels a sixteenth of L2: they stream a panel from L2
// with ease, and longer blocks mean fewer read-modify-write passes over the output (Xeon
// model 207, conv 3x3 stride-2 layers, ms at 1 / 2 threads, 192 -> 1024 rows: 256->256
// 28x28 1.95 -> 1.81 / 1.67 -> 1.45, 512->512 14x14 2.99 -> 2.54 / 1.86 -> 1.52).
int64_t pointwise_k_block(const KernelInfo& kernel, int64_t k_rows, int64_t widest);

// Runs one micro-kernel call on a tile of m <= MR rows and n <= NR columns: full tiles go
// straight to the kernel, partial ones through a local tile (the kernel never touches C
// outside the m x n tile, and still never reads C when beta == 0). Applies the epilogue
// when given; (row0, col0) locate the tile for the bias.
void run_ukernel(const KernelInfo& kernel, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, int64_t rs_b, float beta, float* c,
                 int64_t rs_c, const Epilogue* epilogue, int64_t row0, int64_t col0);

// The full MR-row tiles of one column of C, called back to back with one argument block
// (only A, C and the row bias move): the inner loop of a large GEMM, where run_ukernel's
// per-call checks cost 2-3% of the time. `ready` is false when the column is narrower than
// its kernel or its epilogue cannot be fused into the kernel: run_ukernel then.
class FullTiles {
 public:
  FullTiles(const KernelInfo& kernel, int64_t n, int64_t k, float alpha, const float* b, int64_t rs_b,
            float beta, int64_t rs_c, const Epilogue* epilogue);
  bool ready() const { return ready_; }
  // The tile of rows [row0, row0 + MR) (row0 locates the bias): A micro-panel a, C at c.
  void run(const float* a, float* c, int64_t row0) {
    args_.a = a;
    args_.c = c;
    if (bias_) args_.row_bias = bias_ + row0;
    fn_(&args_);
  }

 private:
  gk_ukernel_fn fn_ = nullptr;
  gk_ukernel_args args_{};
  const float* bias_ = nullptr;  // per-row bias to fuse, or nullptr
  bool ready_ = false;
};

// run_ukernel for a C stored channel-blocked by 8 rows (GemmProblem::c_block_stride): the
// kernel computes a local tile (reading C into it first when beta != 0), which is then
// stored transposed, MR rows of a column at a time. c is C's element (0, 0).
void run_ukernel_blocked_c(const KernelInfo& kernel, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, const float* b, int64_t rs_b, float beta, float* c,
                           int64_t block_stride, const Epilogue* epilogue, int64_t row0, int64_t col0);

// Applies the epilogue to an m x n block of C whose top-left is (row0, col0).
void apply_epilogue(const Epilogue& e, float* c, int64_t rs_c, int64_t m, int64_t n,
                    int64_t row0, int64_t col0);

// C = beta * C (beta == 0 writes zeros without reading C), then the epilogue.
void scale_c(float beta, float* c, int64_t rs_c, int64_t m, int64_t n, const Epilogue& e);

// Every GEMM path takes the memory it needs (gk::scratch of the calling thread, a part per
// thread) before it splits the work, and when it cannot, returns false having written
// nothing: the caller then runs gemm_no_heap. Nothing in a path allocates once it runs.
// workspace_unavailable() says so (note_no_heap_fallback) and returns false.
bool workspace_unavailable(const char* what, int64_t floats);
// `each` floats per thread in one scratch buffer, thread t's part at parts + t * stride
// (whole cache lines apart); nullptr when it cannot be had.
struct ThreadParts {
  float* parts = nullptr;
  int64_t stride = 0;
  float* part(int t) const { return parts + t * stride; }
};
ThreadParts thread_parts(ScratchSlot slot, int threads, int64_t each);

// The GEMM of last resort, on the calling thread, with no heap memory at all: one A and
// one B micro-panel in a fixed stack buffer, K in short blocks (src/gemm/no_heap.cpp).
// Any sources, epilogue and C layout, as the packed driver.
void gemm_no_heap(const GemmProblem& p, const KernelConfig& cfg);

// The packing buffers gemm_packed takes for an m x n x k product: with all of M in one MC
// block (per_panel), an A block (none when A comes packed) and a pass of B panels per
// thread; else an A block per thread and a B block, shared or (private_b) per thread. In
// floats.
struct PackingSizes {
  bool per_panel = true;
  bool private_b = false;  // the B block packed by each thread for itself (private_b_max_bytes)
  int64_t a_floats = 0, b_floats = 0;
};
PackingSizes packing_sizes(int64_t m, int64_t n, int64_t k, bool a_prepacked, const KernelConfig& cfg);
// The same as a caller's workspace holds them (a convolution's, so that a run in the
// caller's memory allocates nothing, not even on its first call): `shared_floats` once,
// `thread_floats` per thread.
struct PackingNeed {
  int64_t shared_floats = 0, thread_floats = 0;
};
PackingNeed packing_need(int64_t m, int64_t n, int64_t k, bool a_prepacked, const KernelConfig& cfg);
// Such memory: `shared` of shared_floats, thread t's part at blocks + t * stride (stride
// at least thread_floats, a multiple of 16 floats, 64-byte aligned), for up to `threads`.
struct PackingMemory {
  float* shared = nullptr;
  float* blocks = nullptr;
  int64_t stride = 0;
  int threads = 1;
};

// The Goto five-loop driver with packed A and B, on `threads` threads (at most
// given->threads); its buffers in `given` (packing_need() of the product), else in the
// calling thread's scratch, and on gemm_no_heap when those cannot be had.
void gemm_packed(const GemmProblem& p, const KernelConfig& cfg, int threads, const PackingMemory* given = nullptr);
// Whether gemm_packed packs B panels just before use (all of M in one MC block) rather
// than a B block per KC x NC step.
inline bool packs_b_per_panel(const GemmProblem& p, const KernelConfig& cfg) { return p.m <= cfg.mc; }
// The paths sgemm_rowstored chooses among (choose_gemm_path, src/gemm/path.cpp). Each runs
// a problem whose choice named it and returns false when its buffers could not be had
// (nothing written); the caller then runs gemm_no_heap.
//
// Few columns and long rows of A (its rows contiguous along K): the ISA's pointwise kernels
// read A in place instead of packing it (src/gemm/in_place_a.cpp). p.a is `a`. Rows are
// shared among threads in multiples of kInPlaceARowUnit (every pointwise MR divides it).
constexpr int64_t kInPlaceAMaxColumns = 256;
constexpr int64_t kInPlaceARowUnit = 12;
bool gemm_in_place_a(const GemmProblem& p, const MatrixView& a, const KernelConfig& cfg, int threads);
// The no-pack path for small problems (one thread): B is read in place when it has unit
// column stride, A is packed one micro-panel at a time.
bool gemm_small(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                const KernelConfig& cfg);
// C = alpha * A B + beta * C straight from the operands, nothing packed (src/gemm/tiny.cpp):
// x86-64 with AVX2 or wider. `simd`: the active kernel's level; AVX-512 runs 16-float
// vectors.
constexpr int64_t kTinyNarrowColumns = 24;
// The tiny path's rows per block: 8 with AVX-512's vectors, 4 with AVX2's.
constexpr int64_t tiny_rows_per_block(SimdLevel simd) { return simd == SimdLevel::Avx512 ? 8 : 4; }
bool gemm_tiny(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b,
               float beta, float* c, int64_t rs_c, int threads, SimdLevel simd);
// The smallest products, one thread (src/gemm/micro.cpp): each element of C in one pass
// from the operands, no buffer, where the strides allow one of its forms and its cost
// estimate is within l's limits, or (AVX-512) its columns or dots form past them where l's
// wide rules allow; x86-64 with AVX2 or wider. gemm_micro returns false where
// micro_serves would.
bool micro_serves(const PathLimits& l, int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b,
                  int64_t rs_c);
bool gemm_micro(const PathLimits& l, int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                const MatrixView& b, float beta, float* c, int64_t rs_c);
// Turns the micro path off (or back on) for the process: the tests of the paths it
// precedes run their small shapes there (and A/B measurements against it).
void set_micro_path(bool on);
// Matrix times a few vectors: Y(i, r) = alpha * sum_j M(i, j) X(j, r) + beta * Y(i, r) for
// i < rows, j < cols, r < vectors, where X is a cols x vectors view and Y(i, r) is
// y[i * incy + r * ldy]. Up to kGemvMaxVectors vectors.
constexpr int64_t kGemvMaxVectors = 16;
// In axpy form, up to this many columns of the matrix skip the partial-sums buffer: each
// vector of rows takes all the columns at once and is written out (a GEMM with K = 6 is a
// few short streams, and three passes over R x rows floats of partial sums cost more than
// the products).
constexpr int64_t kGemvAxpyDirectColumns = 16;
// Threads share a GEMV's rows in multiples of this (whole vector steps each).
constexpr int64_t kGemvRowUnit = 128;
// `cfg`: the active kernel's (its vector code runs that ISA's loops) and its path limits.
bool gemv(int64_t rows, int64_t cols, int64_t vectors, float alpha, const MatrixView& mat,
          const MatrixView& x, float beta, float* y, int64_t incy, int64_t ldy, int threads,
          const KernelConfig& cfg);

// The path sgemm_rowstored takes for a problem (PlainA / PlainB on views a and b), on how
// many threads, and why (one sentence, static): chosen here only. NoHeap is never chosen:
// it is what ran when the chosen path could not have its buffers; QuickReturn, a call with
// nothing to multiply (m or n 0, alpha 0 or k 0: C = beta C).
enum class GemmPath {
  Micro, GemvColumns, GemvRows, Tiny, Small, InPlaceA, TinyNarrow, FewRowsBInPlace, PackedPerPanel, PackedSharedB, NoHeap,
  QuickReturn
};
struct GemmPathChoice {
  GemmPath path;
  int threads;
  const char* reason;
};
GemmPathChoice choose_gemm_path(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                                const KernelConfig& cfg);
// The same where the micro path does not serve (sgemm_rowstored tries it first itself).
GemmPathChoice choose_gemm_path_past_micro(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                                           const KernelConfig& cfg);
// The in-place-A path's own test (choose_gemm_path's fourth): also asked by the pre-packed
// compute, whose B comes packed and whose A may still be read in place.
bool in_place_a_serves(const PathLimits& limits, const GemmProblem& p, const MatrixView& a);
const char* path_name(GemmPath path);

// At most 16 rows of C (where the narrow loop takes them in two chunks) against B's own
// rows, contiguous, as NR-wide panels ldb apart per K step: the narrow loop of a packed B
// (src/gemm/prepacked.cpp), with only B's last, partial panel packed. The driver's MR x NR
// tile would run 16 rows as 14 + 2 on AVX-512.
bool few_rows_b_in_place_serves(const KernelConfig& cfg, int64_t m, int64_t n, const MatrixView& b);
// false when its buffers cannot be had (nothing written).
bool gemm_few_rows_b_in_place(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b,
                              float beta, float* c, int64_t rs_c, const Epilogue& e);
// The path the calling thread's last sgemm_rowstored ran (tests assert it).
GemmPath last_gemm_path();

// The whole internal SGEMM on strided views (row-stored C): quick returns, alpha == 0,
// and the choice between GEMV, no-pack and packed paths. Arguments already validated.
void sgemm_rowstored(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                     const MatrixView& b, float beta, float* c, int64_t rs_c);
// The same on gemm_no_heap alone (what the BLAS entry points run should anything throw).
void sgemm_rowstored_no_heap(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a,
                             const MatrixView& b, float beta, float* c, int64_t rs_c);

}  // namespace gk
