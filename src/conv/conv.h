// Convolution internals: the validated shape, the algorithm interface, and the layout
// conversions. Data flows conv -> gemm -> arch -> common; nothing below knows of images.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "common/c_boundary.h"
#include "gemm/gemm.h"
#include "gemmkit.h"

namespace gk {
namespace conv {

// A validated descriptor with the derived sizes every algorithm needs.
struct Shape {
  gk_conv_desc d;
  gk_layout in_layout;   // the input's: d.layout, or NCHW with GK_CONV_FLAG_NCHW_INPUT
  int64_t oh, ow;        // output height, width
  int64_t icg, ocg;      // input / output channels per group
  int64_t k_gemm;        // icg * kernel_h * kernel_w: the GEMM's K
  int64_t pixels() const { return oh * ow; }
  bool depthwise() const { return d.groups == d.in_channels && icg == 1; }
  double flops() const { return 2.0 * d.batch * d.out_channels * pixels() * k_gemm; }
  // GK_CONV_FLAG_ADD_TO_OUTPUT: each output is added to the value already there (the
  // residual) before the activation; otherwise the output is never read.
  bool adds_to_output() const { return d.flags & GK_CONV_FLAG_ADD_TO_OUTPUT; }
};

using gk::raw_enum;  // src/common/c_boundary.h

// Checks every field; on failure sets the thread's last error and returns false.
bool validate(const gk_conv_desc& d, Shape* shape);

// The memory one run works in, acquired on the calling thread before any work is split
// (a failure is then a status, never an abort inside a parallel region): `shared` for the
// buffers every thread reads (a GEMM's shared packed B block among them), and one block per
// thread, `stride` floats apart.
struct Workspace {
  float* shared = nullptr;
  float* blocks = nullptr;
  int64_t stride = 0;
  int threads = 1;  // blocks there are: a run uses at most this many threads
  float* block(int t) const { return blocks + t * stride; }
  // `wanted` threads (threads_for's answer) capped to the blocks there are.
  int cap(int wanted) const { return wanted < threads ? wanted : threads; }
};
// What a prepared algorithm needs of a Workspace, in floats.
struct WorkspaceNeed {
  int64_t shared_floats = 0, thread_floats = 0;
};

// An algorithm object (MegEngine / oneDNN style): whether it can serve a shape (and if not,
// why), and a prepared instance holding its packed weights.
class Prepared {
 public:
  virtual ~Prepared() = default;
  // Output in the plan's layout when native_layout() says it runs that layout, else NCHW
  // (run_in_layout converts); input in the same, except that a plan whose input is NCHW
  // (GK_CONV_FLAG_NCHW_INPUT) passes it as it is where reads_nchw_input(). When the shape
  // adds_to_output(), the output holds the tensor to add, in that same layout. Thread-safe
  // (no mutable state).
  // Every buffer it uses is in `ws` (sized from need()): nothing allocates while it runs.
  virtual void run(const float* input, float* output, const Workspace& ws) const = 0;
  virtual bool native_layout(gk_layout layout) const { return layout == GK_LAYOUT_NCHW; }
  virtual bool reads_nchw_input() const { return false; }
  // The workspace run() uses (layout copies are extra).
  virtual WorkspaceNeed need() const = 0;
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual gk_conv_algo id() const = 0;
  virtual const char* name() const = 0;
  // "" when usable, else the reason it is not.
  virtual std::string unusable_reason(const Shape& s) const = 0;
  // Less accurate than direct convolution (excluded by GK_CONV_FLAG_HIGH_ACCURACY).
  virtual bool lossy() const { return false; }
  // The algorithm's tunable parameter, for Fast-Run: its name ("" when it has none) and the
  // values worth timing for a shape besides the default derived from the caches.
  virtual const char* tuning_name() const { return ""; }
  virtual std::vector<int64_t> tunings(const Shape&) const { return {}; }
  // tuning 0: the cache-derived default. nullptr (with the last error set) when out of memory.
  virtual std::unique_ptr<Prepared> prepare(const Shape& s, const float* weights,
                                            const float* bias, int64_t tuning = 0) const = 0;
  // Whether prepare(s) runs an NHWC shape in place (else prepare_in_layout may run its
  // NCHW8 form on copies).
  virtual bool runs_nhwc(const Shape&) const { return false; }
};

// One configuration Fast-Run can time: an algorithm and a value of its tunable parameter.
struct Candidate {
  const Algorithm* algorithm;
  int64_t tuning;    // 0: the default
  std::string name;  // "im2col_gemm:tile=192", "winograd_f43:nr_tiles=96", "depthwise"
};
// Every usable configuration for a shape, the AUTO choice first; lossy ones only if allowed.
std::vector<Candidate> candidates(const Shape& s, bool allow_lossy);
// AUTO's choice: the first usable algorithm not rejected by the heuristic (tuning 0).
// `rejected` collects the reasons for the others (GEMMKIT_VERBOSE).
const Algorithm* heuristic_choice(const Shape& s, std::string* rejected);

// Every algorithm, in the order AUTO prefers them.
const std::vector<const Algorithm*>& algorithms();

// Algorithm constructors (one file each).
const Algorithm* gemm_1x1_algorithm();
const Algorithm* im2col_gemm_algorithm();
const Algorithm* direct_algorithm();
// Whether direct runs `s` a whole image's panel at a time (algo_direct.cpp): NCHW, or
// NCHW8 without copies; `wide`: on 16-lane vectors too (AVX-512, rows wider than 8).
bool direct_takes_whole_images(const Shape& s, bool wide = false);
const Algorithm* depthwise_algorithm();
// Bands of output rows the depthwise threads split an NCHW8 image of oh x ow outputs into
// when they read it in place (1: they split its channel blocks instead).
int64_t depthwise_nchw8_bands(int64_t oh, int64_t ow, int threads);
const Algorithm* winograd_algorithm(int m);  // m = 2, 4, 6
const Algorithm* pointwise_nchw8_algorithm();
const Algorithm* direct_nchw8_algorithm();

// Where a run's time goes, for the benchmark's per-phase breakdown (Winograd reports its
// input transform, GEMMs and output transform). The sink is set on the calling thread and
// only single-threaded runs report into it (with more threads the phases overlap).
struct PhaseTimes {
  double input_s = 0, gemm_s = 0, output_s = 0;
};
void set_phase_times(PhaseTimes* sink);  // nullptr: off

// An NHWC shape (its input NHWC too) that algorithms without an NHWC form run as its NCHW8
// form on copies: NCHW8 ones, or under 8 input channels an NCHW input copy
// (GK_CONV_FLAG_NCHW_INPUT) where the algorithm reads that in place. *s8: that form.
bool nchw8_form(const Shape& s, Shape* s8);
// An NCHW shape as NCHW8 (input NCHW8 too), the form algorithms that run NCHW on blocked
// copies through_nchw8 run inside: nchw_engine_form, nchw_through_blocked. False for
// other layouts.
bool nchw_as_nchw8(const Shape& s, Shape* s8);
// `inner`, prepared for `form` (outer's NCHW8 form), run on NCHW8 copies of outer's input
// and output (or an NCHW copy of the input where form's input is NCHW and inner reads it).
std::unique_ptr<Prepared> through_nchw8(const Shape& outer, const Shape& form, std::unique_ptr<Prepared> inner);
// An algorithm prepared for a shape: a.prepare(s, ...), except that for an NHWC shape with
// an NCHW8 form an algorithm that does not run NHWC (runs_nhwc) but runs that form in place
// runs it on copies (nchw8_form). nullptr (the last error set) when out of memory.
std::unique_ptr<Prepared> prepare_in_layout(const Algorithm& a, const Shape& s, const float* weights,
                                            const float* bias, int64_t tuning);

// Runs a prepared algorithm on tensors in the shape's layouts: directly when the algorithm
// runs them natively, else through copies in this thread's workspace (NCHW, or for an NCHW
// input the output's layout; the conversions are part of the time gk_conv_run and
// Fast-Run measure). Adding to the output, the output is first converted into its copy.
// `memory`: 64-byte aligned, workspace_in_layout(s, p, threads, min_stride) bytes;
// `threads` blocks, at least min_stride floats apart. Writes nothing but the output and the
// workspace.
void run_in_layout(const Shape& s, const Prepared& p, const float* input, float* output, void* memory,
                   int threads, int64_t min_stride = 0);
// The workspace that takes for `threads` threads, in bytes (the algorithm's own plus any
// layout copies); -1 when it overflows int64.
int64_t workspace_in_layout(const Shape& s, const Prepared& p, int threads, int64_t min_stride = 0);
// run_in_layout in the calling thread's cached workspace (grown on demand, for the
// current thread setting); GK_ERR_OUT_OF_MEMORY, naming the bytes, when it cannot be had.
gk_status run_with_cached_workspace(const Shape& s, const Prepared& p, const float* input, float* output,
                                    const char* function);
// The same, for tests and tools holding a Prepared rather than a plan.
inline gk_status run_in_layout(const Shape& s, const Prepared& p, const float* input, float* output) {
  return run_with_cached_workspace(s, p, input, output, "gk_conv_run");
}

// Checked arithmetic for sizes: false when the result overflows int64 (one helper, used
// by validation and workspace sizing).
inline bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }
// The most bytes a tensor, weight set or workspace may take: more than any 64-bit
// process can address, so a larger size is a wrong descriptor, not a big one.
constexpr int64_t kMaxBytes = int64_t{1} << 56;
// 4 bytes times the product of `factors` (all >= 0) into *bytes; false when it exceeds
// kMaxBytes (or overflows on the way).
bool float_bytes_within_limit(std::initializer_list<int64_t> factors, int64_t* bytes);

// Channels per block of a layout (1 for NCHW and NHWC).
int64_t channel_block(gk_layout layout);

// The kernel a convolution in `layout` runs its GEMMs on: the active one where it has the
// fused epilogue and the layout is not blocked, else conv_config()'s (which serves the
// blocked layouts in place). So NCHW and NHWC convolutions run on AVX-512 14x32, and NCHW8
// on AVX-512's pointwise kernels (pointwise_kernel()) or AVX2's GEMM kernel.
inline const KernelConfig& conv_gemm_config(gk_layout layout) {
  const KernelConfig& active = active_config();
  return active.kernel->fused_epilogue && channel_block(layout) == 1 ? active : conv_config();
}
// Sets the padding channels of an NCHWx tensor (n images of c channels of `pixels`) to 0;
// nothing for other layouts or whole blocks.
void zero_padding_channels(float* t, gk_layout layout, int64_t n, int64_t c, int64_t pixels);
bool valid_layout(int layout);

// The epilogue for output channels [oc0, oc0 + count) of a plan's bias and activation.
Epilogue make_epilogue(const Shape& s, const float* bias, int64_t oc0);

}  // namespace conv
}  // namespace gk
