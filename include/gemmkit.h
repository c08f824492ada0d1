/* gemmkit: single-precision GEMM and convolution for CPUs. Public C API. */
#ifndef GEMMKIT_H
#define GEMMKIT_H

#include <stdint.h>

#include "gemmkit_cblas.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GEMMKIT_VERSION_MAJOR 0
#define GEMMKIT_VERSION_MINOR 1
#define GEMMKIT_VERSION_PATCH 0
#define GEMMKIT_VERSION_STRING "0.1.0"

typedef enum {
  GK_OK = 0,
  GK_ERR_INVALID_ARGUMENT,
  GK_ERR_UNSUPPORTED,
  GK_ERR_OUT_OF_MEMORY,
  GK_ERR_IO,
  GK_ERR_INTERNAL
} gk_status;

/* Threads used by every following call from any thread of the process (but threads with
 * a local setting, below). n < 1 restores the default (GEMMKIT_NUM_THREADS, then
 * OMP_NUM_THREADS, then the number of CPUs).
 * Calls made inside an OpenMP parallel region, and calls in a child forked from a
 * threaded parent (libgomp is not fork-safe), always run on one thread. */
void gk_set_num_threads(int n);
/* The threads of this calling thread's following calls, whatever the process setting
 * (MKL's mkl_set_num_threads_local, OpenBLAS's openblas_set_num_threads_local): n >= 1 sets
 * it, n < 1 returns the thread to the process setting. Returns the thread's previous local
 * setting (0: none), so a caller can restore it. Other threads are unaffected. */
int gk_set_num_threads_local(int n);
/* The calling thread's setting: its local one, else the process's; 1 in a child forked
 * from a threaded parent. (A call inside an OpenMP parallel region runs on one thread
 * whatever it says.) */
int gk_get_num_threads(void);

/* One line describing what runs: ISA and kernel, MR x NR, MC/KC/NC, detected caches,
 * threads. Valid until the next call that changes the configuration. */
const char *gk_config_string(void);

/* Name of the micro-kernel in use ("avx512", "avx2", "neon", "generic"). */
const char *gk_kernel_name(void);

/* Forces a micro-kernel by name (as GEMMKIT_KERNEL does); NULL or "" returns to automatic
 * selection. Returns GK_ERR_UNSUPPORTED when this CPU cannot run it. Not thread-safe
 * with concurrent GEMM calls: meant for tests and experiments. */
gk_status gk_set_kernel(const char *name);

const char *gk_status_string(gk_status s);
/* This thread's last error message ("" when none). */
const char *gk_last_error(void);

/* A strided batch of SGEMMs: for i < batch, C_i = alpha op(A_i) op(B_i) + beta C_i with
 * A_i = a + i * stride_a, B_i = b + i * stride_b, C_i = c + i * stride_c (floats), the other
 * arguments as cblas_sgemm's. A stride of 0 shares one A or B between the products (a
 * layer's weights over a batch of inputs); stride_c must keep the C matrices apart. Small
 * products run side by side, one per thread; larger ones one after another on every
 * thread. An invalid argument gives GK_ERR_INVALID_ARGUMENT with a message naming it, and
 * nothing is written; batch 0 does nothing. beta == 0 never reads C, as cblas_sgemm. */
gk_status gk_sgemm_batch_strided(CBLAS_ORDER order, CBLAS_TRANSPOSE transa, CBLAS_TRANSPOSE transb, int64_t m,
                                 int64_t n, int64_t k, float alpha, const float *a, int64_t lda, int64_t stride_a,
                                 const float *b, int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                                 int64_t stride_c, int64_t batch);

/* A batch of SGEMMs in groups of one shape each, the cblas_sgemm_batch convention (oneMKL,
 * OpenBLAS 0.3.27): group g has group_size[g] products, all with transa_array[g],
 * transb_array[g], m_array[g], n_array[g], k_array[g], alpha_array[g], lda_array[g],
 * ldb_array[g], beta_array[g], ldc_array[g]; the pointer arrays hold one A, B and C per
 * product, group after group (sum of group_size entries). Products too small for several
 * threads run side by side, one per thread, whatever their group; larger ones one after
 * another on every thread. The C matrices must not overlap one another (not checked: the
 * products run in any order). Every argument and pointer is checked before anything is
 * computed: an invalid one gives GK_ERR_INVALID_ARGUMENT naming the group and product,
 * and nothing is written. group_count 0 does nothing. */
gk_status gk_sgemm_batch(CBLAS_ORDER order, const CBLAS_TRANSPOSE *transa_array, const CBLAS_TRANSPOSE *transb_array,
                         const int64_t *m_array, const int64_t *n_array, const int64_t *k_array,
                         const float *alpha_array, const float *const *a_array, const int64_t *lda_array,
                         const float *const *b_array, const int64_t *ldb_array, const float *beta_array,
                         float *const *c_array, const int64_t *ldc_array, int64_t group_count,
                         const int64_t *group_size);

/* ------------------------------------------------------------------ inference-side SGEMM
 * What an inference engine wants around its GEMMs: an epilogue applied as C is stored, and
 * a weight packed once for this machine's kernel and reused by every call (oneMKL's
 * cblas_sgemm_pack / cblas_sgemm_compute). */

/* The activation applied after bias (gk_epilogue, gk_conv_desc, the network operations). */
typedef enum { GK_ACT_NONE = 0, GK_ACT_RELU, GK_ACT_RELU6 } gk_activation;

typedef enum { GK_BIAS_NONE = 0, GK_BIAS_PER_ROW, GK_BIAS_PER_COLUMN } gk_bias_mode;

/* C = act(alpha op(A) op(B) + beta C + bias): bias[i] added to row i of C (m floats,
 * GK_BIAS_PER_ROW) or bias[j] to column j (n floats, GK_BIAS_PER_COLUMN), in either
 * order, then the activation. Applied to each tile of C while it is in cache, not as a
 * second pass (the few-column and tiny paths excepted). */
typedef struct {
  const float *bias; /* NULL with GK_BIAS_NONE */
  gk_bias_mode bias_mode;
  gk_activation activation;
} gk_epilogue;

/* cblas_sgemm with an epilogue (NULL: none) and a status: arguments as cblas_sgemm's, an
 * invalid one gives GK_ERR_INVALID_ARGUMENT with a message naming it, and nothing is
 * written. beta == 0 never reads C. */
gk_status gk_sgemm_ex(CBLAS_ORDER order, CBLAS_TRANSPOSE transa, CBLAS_TRANSPOSE transb, int64_t m, int64_t n,
                      int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc, const gk_epilogue *epilogue);

/* Which operand a packed buffer holds: op(A), m x k, or op(B), k x n. */
typedef enum { GK_PACK_A = 0, GK_PACK_B = 1 } gk_pack_operand;
/* gk_sgemm_compute's transa / transb for an operand given packed (oneMKL's CblasPacked). */
#define GK_PACKED 151

/* Bytes a packed A (op(A) m x k: n is not used) or B (op(B) k x n: m is not used) takes,
 * a 128-byte header included, for the kernel active now; -1 for invalid arguments
 * (gk_last_error says which). The size and the format differ between CPUs and kernels. */
int64_t gk_sgemm_pack_get_size(gk_pack_operand which, int64_t m, int64_t n, int64_t k);
/* Packs alpha op(src) into dest, 64-byte aligned, of dest_bytes >= gk_sgemm_pack_get_size
 * bytes, for gk_sgemm_compute calls in the same order with the same m and k (A) or k and n
 * (B); the other dimension is free (one packed weight serves any number of columns or
 * rows). trans and ld describe src as cblas_sgemm's transa / lda do. The buffer holds the
 * active kernel's micro-panels (the library's own packing) behind a header that records the
 * kernel, its MR / NR / KC, the shape, trans and alpha: a buffer packed for another shape,
 * order or kernel (another CPU, gk_set_kernel) is refused by gk_sgemm_compute. It does not
 * point into src. */
gk_status gk_sgemm_pack(CBLAS_ORDER order, gk_pack_operand which, CBLAS_TRANSPOSE trans, int64_t m, int64_t n,
                        int64_t k, float alpha, const float *src, int64_t ld, void *dest, int64_t dest_bytes);
/* C = act(op(A) op(B) + beta C + bias) where A and/or B is a buffer from gk_sgemm_pack
 * (its transa / transb GK_PACKED, its ld ignored; the alpha it was packed with applies)
 * and the other a plain matrix (CblasNoTrans / CblasTrans / CblasConjTrans, as
 * cblas_sgemm's). epilogue: NULL or as gk_sgemm_ex's. The packed panels are read in place:
 * no packing of that operand, and no allocation once the calling thread's scratch has
 * grown. A packed buffer that is NULL, misaligned, corrupted (its header's checksum) or
 * packed for another operand, order, shape or kernel gives GK_ERR_INVALID_ARGUMENT naming
 * the difference, and nothing is written. */
gk_status gk_sgemm_compute(CBLAS_ORDER order, int transa, int transb, int64_t m, int64_t n, int64_t k,
                           const void *a, int64_t lda, const void *b, int64_t ldb, float beta, float *c,
                           int64_t ldc, const gk_epilogue *epilogue);

/* ------------------------------------------------------------------ convolution
 * 2-D convolution for inference. A plan is made once per layer (it validates the
 * descriptor, picks an algorithm, packs the weights); running it is thread-safe and
 * allocates nothing beyond a per-thread workspace reused across calls. */

typedef enum {
  GK_LAYOUT_NCHW = 0,
  GK_LAYOUT_NHWC,
  GK_LAYOUT_NCHW4, /* NCHWx: channels in blocks of x, zero-padded to a multiple of x */
  GK_LAYOUT_NCHW8,
  GK_LAYOUT_NCHW16
} gk_layout;

typedef enum {
  GK_CONV_ALGO_AUTO = 0,
  GK_CONV_ALGO_FASTRUN, /* measure the candidates on this machine, keep the fastest */
  GK_CONV_ALGO_IM2COL_GEMM,
  GK_CONV_ALGO_GEMM_1X1,
  /* NCHW (other layouts through copies), any grouping: register tiles of 4 output channels
   * by a row's columns (or several narrow rows) over zero-padded, stride-split copies of
   * the input rows. NCHW8 without copies where groups make whole 8-channel blocks, stride 1
   * across, 16 or more of them in a batch (a whole image's rows copied at once). AUTO takes
   * it for grouped convolutions of small groups: in NCHW on rows of 14 or more, in NCHW8
   * and NHWC with AVX-512 for groups of up to 8 channels. */
  GK_CONV_ALGO_DIRECT,
  GK_CONV_ALGO_DEPTHWISE,
  GK_CONV_ALGO_WINOGRAD_F23,
  GK_CONV_ALGO_WINOGRAD_F43,
  GK_CONV_ALGO_WINOGRAD_F63,
  /* NCHW8 (or NHWC: ungrouped in place, a 1x1 reading the rows, others gathering them;
   * grouped through NCHW8 copies; or grouped NCHW, through NCHW8 copies)
   * on the CPU's pointwise kernels (x86-64 AVX2 / AVX-512): a 1x1 read in place, other
   * kernels and strides from im2col chunks; 8 input channels or more (or a 1x1 in place). Grouped convolutions too
   * where up to 4 consecutive groups make whole 8-channel blocks of input and output
   * channels (a group of 8 or more channels by itself, of 2 or 4 merged). */
  GK_CONV_ALGO_POINTWISE_NCHW8,
  /* NCHW8 (or an NCHW input, GK_CONV_FLAG_NCHW_INPUT; or NHWC: in place where out_channels
   * is a multiple of 8, else through an NCHW copy of the input), ungrouped, under 8 input
   * channels (RGB stems): the pointwise kernels read the image in place through per-tap
   * offsets. */
  GK_CONV_ALGO_DIRECT_NCHW8
} gk_conv_algo;

typedef struct {
  int64_t batch, in_channels, in_height, in_width, out_channels;
  int64_t kernel_h, kernel_w, stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups;
  gk_layout layout;         /* input and output (input: see GK_CONV_FLAG_NCHW_INPUT) */
  gk_activation activation; /* fused after bias */
  uint32_t flags;           /* GK_CONV_FLAG_* */
} gk_conv_desc;

/* AUTO/FASTRUN never pick an algorithm less accurate than direct (Winograd F43, F63). */
#define GK_CONV_FLAG_HIGH_ACCURACY 1u
/* The input is NCHW whatever `layout` is; the output is in `layout`. For a network's first
 * layer in a blocked layout: the image is read as it comes (3 planes), not first padded to
 * a channel block (an RGB image in NCHW8 is 8/3 as many bytes). */
#define GK_CONV_FLAG_NCHW_INPUT 2u
/* Residual join (oneDNN's "sum" post-op): output = act(conv(input) + bias + output). The
 * output holds the tensor to add when gk_conv_run is called (in the output's layout and
 * shape; NCHWx padding channels ignored), so ResNet's relu(conv(x) + shortcut) is one pass
 * over the output. */
#define GK_CONV_FLAG_ADD_TO_OUTPUT 4u

typedef struct gk_conv_plan gk_conv_plan;

/* Zeroes the descriptor, then sets strides, dilations and groups to 1. */
void gk_conv_desc_init(gk_conv_desc *d);
gk_status gk_conv_output_size(const gk_conv_desc *d, int64_t *out_h, int64_t *out_w);
/* weights: OIHW, [out_channels][in_channels / groups][kernel_h][kernel_w], copied.
 * bias: NULL or out_channels floats, copied. */
gk_status gk_conv_plan_create(const gk_conv_desc *d, const float *weights, const float *bias,
                              gk_conv_algo algo, gk_conv_plan **plan);
/* Runs in this thread's cached workspace, grown on demand for the current thread setting
 * (after one run of a plan, later runs allocate nothing). Never aborts: when the workspace
 * cannot be allocated it returns GK_ERR_OUT_OF_MEMORY (gk_last_error names the bytes),
 * having written nothing to the output. */
gk_status gk_conv_run(const gk_conv_plan *plan, const float *input, float *output);
/* gk_conv_run in memory the caller gives: `workspace`, 64-byte aligned, of at least
 * gk_conv_plan_workspace_size(plan) bytes (else GK_ERR_INVALID_ARGUMENT naming the sizes).
 * Every buffer the run uses is in it, the GEMM packing buffers of the GEMM-based algorithms
 * included, so it allocates nothing, from its first call on (OpenMP itself may allocate the
 * first time a thread opens a parallel region). It runs on at most the thread count the
 * plan was created with (a later gk_set_num_threads or gk_set_num_threads_local lowers it,
 * never raises it). */
gk_status gk_conv_run_with_workspace(const gk_conv_plan *plan, const float *input, float *output,
                                     void *workspace, int64_t workspace_bytes);
const char *gk_conv_plan_algo_name(const gk_conv_plan *plan);
/* Bytes of workspace gk_conv_run_with_workspace needs for this plan: the layout copies, the
 * algorithm's shared buffers and one block per thread (GEMM packing buffers included), for
 * gk_get_num_threads() at plan creation. (im2col_gemm's is a phase-split image and packing
 * tiles, not the K x OH*OW im2col matrix.) */
int64_t gk_conv_plan_workspace_size(const gk_conv_plan *plan);
void gk_conv_plan_destroy(gk_conv_plan *plan);
/* Floats a tensor of this shape takes in this layout (NCHWx pads the channels). -1 when the
 * arguments are invalid. */
int64_t gk_tensor_size(gk_layout layout, int64_t n, int64_t c, int64_t h, int64_t w);

/* Fast-Run (GK_CONV_ALGO_FASTRUN) times every candidate configuration of a layer at plan
 * time and keeps the fastest; the choice is cached in the process and, with these calls or
 * GEMMKIT_FASTRUN_CACHE=path (loaded at first use, saved after each new entry), in a file.
 * A file for another machine or library version is ignored; a malformed one is rejected
 * with GK_ERR_IO and the cache is left as it was. Saves are atomic (write, then rename). */
gk_status gk_fastrun_cache_load(const char *path);
gk_status gk_fastrun_cache_save(const char *path);
gk_status gk_convert_layout(const float *src, gk_layout src_layout, float *dst,
                            gk_layout dst_layout, int64_t n, int64_t c, int64_t h, int64_t w);

/* ------------------------------------------------------------------ network operations
 * The operations a CNN needs around its convolutions, in every layout the convolutions take
 * (NCHW, NHWC, NCHW4/8/16), so a network stays in one layout from its first convolution to
 * its classifier. Each call validates its arguments (status, message in gk_last_error(),
 * nothing written on error) and runs on gk_get_num_threads() threads. In NCHWx the padded
 * channels of an output are written as zeros, whatever the inputs' padding holds. Outputs
 * must not overlap inputs, except where a call says otherwise (gk_add in place). */

/* A 4-D activation tensor: its logical shape and its layout. */
typedef struct {
  int64_t n, c, h, w;
  gk_layout layout;
} gk_tensor_desc;

typedef enum { GK_POOL_MAX = 0, GK_POOL_AVG } gk_pool_kind;

/* 2-D pooling with PyTorch's semantics (MaxPool2d / AvgPool2d, dilation 1): padding on
 * each side, 0 to kernel / 2 (max pooling pads with -inf and propagates NaN), ceil_mode
 * (the last window may run past the padded input but must start inside the input or the
 * leading padding), and count_include_pad (average pooling divides by the window clipped
 * to the padded input, else by the elements inside the input). The window must fit in the
 * padded input. */
typedef struct {
  gk_pool_kind kind;
  int64_t kernel_h, kernel_w, stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int ceil_mode;         /* 0 or 1 */
  int count_include_pad; /* 0 or 1, average pooling only */
} gk_pool_desc;

gk_status gk_pool2d_output_size(const gk_tensor_desc *in, const gk_pool_desc *pool, int64_t *out_h,
                                int64_t *out_w);
/* y: a tensor of in->n x in->c x out_h x out_w in in->layout. */
gk_status gk_pool2d(const gk_tensor_desc *in, const gk_pool_desc *pool, const float *x, float *y);
/* Mean over each channel's plane: y is in->n x in->c x 1 x 1 in in->layout. */
gk_status gk_global_avg_pool(const gk_tensor_desc *in, const float *x, float *y);

/* y = act(a + b), all three of shape t. y may be a or b (in place); other overlaps are
 * refused. */
gk_status gk_add(const gk_tensor_desc *t, const float *a, const float *b, float *y, gk_activation act);

/* Channel concat: parts[i] (same n, h, w and layout as out) stacked along channels in order;
 * their channels must sum to out->c. */
gk_status gk_concat_channels(int count, const gk_tensor_desc *parts, const float *const *xs,
                             const gk_tensor_desc *out, float *y);
/* The inverse: ys[i] gets `channels[i]` consecutive channels of x, in x's layout; the counts
 * must sum to in->c. A null ys[i] skips that part. */
gk_status gk_split_channels(const gk_tensor_desc *in, const float *x, int count, const int64_t *channels,
                            float *const *ys);
/* ShuffleNet's channel shuffle: channel g * (c / groups) + i of x becomes channel
 * i * groups + g of y (x viewed as groups x c/groups, transposed). c % groups == 0; y must
 * not overlap x. */
gk_status gk_channel_shuffle(const gk_tensor_desc *t, int64_t groups, const float *x, float *y);
/* A concat and a shuffle in one pass (ShuffleNetV2's unit end): y = the channel shuffle
 * (groups) of the concat of `groups` parts of out->c / groups channels each, part g being
 * the first out->c / groups channels of xs[g] (described by parts[g]: same n, h, w and
 * layout as out, at least that many channels), so a unit's pass-through half is read
 * straight from the unit's input. y must not overlap any xs[g]. */
gk_status gk_concat_shuffle_channels(int64_t groups, const gk_tensor_desc *parts, const float *const *xs,
                                     const gk_tensor_desc *out, float *y);
/* gk_concat_shuffle_channels followed by gk_split_channels, in one pass: `out` describes the
 * shuffled tensor (not written), and ys[i] gets its next `channels[i]` channels, in out's
 * layout (counts >= 1 summing to out->c; a null ys[i] skips that part). ShuffleNetV2's unit
 * end and the next unit's split: each half written where it is read, none copied again.
 * No ys[i] may overlap another or any xs[g]. */
gk_status gk_concat_shuffle_split_channels(int64_t groups, const gk_tensor_desc *parts, const float *const *xs,
                                           const gk_tensor_desc *out, int count, const int64_t *channels,
                                           float *const *ys);

/* Fully connected: y[b][o] = act(bias[o] + sum_i x[b][i] * weights[o][i]) (PyTorch's
 * Linear: weights out_features x in_features, row-major), on the SGEMM core. bias may be
 * NULL. */
gk_status gk_fully_connected(int64_t batch, int64_t in_features, int64_t out_features, const float *x,
                             const float *weights, const float *bias, gk_activation act, float *y);

/* Folds an inference batch norm y = gamma * (x - mean) / sqrt(var + eps) + beta that
 * follows a convolution (or fully connected layer) into its weights and bias, in place:
 * weights holds out_channels rows of weights_per_channel floats (OIHW: in/groups * kh * kw),
 * bias out_channels floats (set it to zeros for a layer without bias). eps must be finite
 * and >= 0, every var[o] + eps finite and > 0; weights and bias must not overlap each
 * other or the statistics. The scale is computed in double, each weight rounded once. */
gk_status gk_fold_batch_norm(int64_t out_channels, int64_t weights_per_channel, float *weights, float *bias,
                             const float *gamma, const float *beta, const float *mean, const float *var,
                             float eps);

#ifdef __cplusplus
}
#endif
#endif
