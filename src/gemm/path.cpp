// Which path serves a GEMM, and why: the one place sgemm_rowstored's choice is made
// (choose_gemm_path), the limits each path hands over at (PathLimits, one set per kernel,
// in its KernelConfig) and the measurements that set them. GEMMKIT_VERBOSE=1 prints the
// choice once per call shape.
//
// The order of the tests is policy: a one-column (or one-row) C first, then the paths for
// small products on one thread, then the ones for few columns, then the packed driver.
#include <algorithm>
#include <atomic>
#include <cstdio>

#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {

PathLimits path_limits(const KernelInfo& kernel) {
  const CacheSizes& c = caches();
  PathLimits l;
  // The tiny paths' blocks are x86-64 vector code (AVX2 and AVX-512).
#if defined(__x86_64__)
  l.tiny_blocks = kernel.simd != SimdLevel::Baseline;
  // The micro path where its estimate (micro_choice, about cycles) is at most 224, or for
  // its columns form twice the product's vector multiply-adds (the paths it replaces gather
  // B or stride down A: 16x3x128 TT 554 -> 200 ns, 12x4x200 TT 792 -> 278, 64x8x32 TT 480
  // -> 395; the dots form at that bound lost, 4x4x512 NT 194 -> 232); always C of at most
  // 512 elements and at most 16384 multiply-adds. Xeon (AVX-512), 1 thread, ns per
  // cblas_sgemm call, before -> micro (AVX2 forced alike): 2x1x1 33 -> 23, 1x1x57 NT 54 ->
  // 27, 1x71x4 56 -> 34, 31x2x10 TT 92 -> 57, 22x14x2 TN 66 -> 47, 46x1x5 TT 56 -> 34,
  // 7x2x7 46 -> 38, 17x17x1 59 -> 43, 3x1x118 TN 176 -> 65, 2x13x6 NT 95 -> 53, 1x143x4 75
  // -> 43, 44x6x30 TT 366 -> 253. Past the bounds it lost: 16x16x4 NT 97 -> 464 (256
  // horizontal sums), 1x1024x1 74 -> 176 (64 blocks, before the groups of vectors),
  // 1024x1x1 TT 72 -> 493 (lanes stored one by one), 2x2x256 165 -> 197, 16x16x16 NN 103 ->
  // 115 (the tiny path's 8-row blocks). Products the test turns away pay for it (about 2
  // ns; 64x4x4 TT 78 -> 80-86 with the code's placement).
  l.micro_lanes = kernel.simd == SimdLevel::Avx512 ? 16 : l.tiny_blocks ? 8 : 0;
  l.micro_max_multiply_adds = 16384;
  l.micro_max_c_elements = 512;
  l.micro_columns_cost_per_vector = 2;
  l.micro_max_cost = 224;
  // The micro path's columns and dots forms past its bounds (wide_columns_serve,
  // wide_dots_serve), fitted on the Xeon (AVX-512; 48 KiB L1d) against the tiny and GEMV
  // paths: columns with 4 to 12 columns of C, m up to 1000 and k up to 250, a gain up to
  // 256 rows with A within 12288 floats; dots where K is at least 4 times the shorter side.
  // Not measured with AVX2's 8-float vectors (2 per group, 2-row dot blocks): off there.
  if (l.micro_lanes == 16) {
    l.micro_columns_max_m = 256;
    l.micro_columns_max_n = 12;
    l.micro_columns_max_a_elements = 12288;
    l.micro_dots_k_per_row = 4;
  }
#endif
  // Up to about 96^3 multiply-adds everything fits in L2 and one thread is fastest
  // (perf/bench_gemm against the packed path).
  l.small_multiply_adds = 96.0 * 96 * 96;
  // The no-pack path has no K blocking: the A micro-panel (MR x K) must stay in L1.
  l.small_max_k = 1024;
  // The per-panel driver's kernel reads B's rows in place (rs_b apart) where its packed
  // panel would not stay in L1 anyway, and a row of the panel is whole cache lines when B's
  // rows are aligned (AVX-512 14x32's 32 columns, AVX2 6x16's 16; not 4x24's 24, which
  // straddle lines). Packing then saves nothing: the panel comes from L2 for each A panel
  // either way. Same process, 1 thread, ms, packed / in place: 14x32 64x3136x576 1.43 /
  // 1.22, 16x1000x512 0.20 / 0.16, 24x4000x4000 10.5 / 7.0-8.4, 128x784x1152 1.33 / 1.26,
  // 224x1000x1000 2.29-2.43 / 2.19-2.21; K 32 and 64, panels within L1, 96x12544x32 0.45 /
  // 0.48, 48x12544x64 0.53 / 0.51. 6x16: 24x4000x4000 14.0 / 12.3-12.6, 64x3136x576 and
  // 128x784x1152 even. 4x24: 64x3136x576 2.34 / 2.40-2.45, 48x12544x64 0.80-0.95 / 1.03-1.05.
  l.b_in_place_min_panel_bytes = kernel.nr * sizeof(float) % 64 == 0 ? c.l1d / 2 : 0;
  // Read in place, the panel's rows must also stay in L2 and in the TLB while the A panels
  // pass (b_panel_rows_in_place). Intel Xeon model 207 (2048-entry second-level TLB, 8 MiB
  // of 4 KiB pages), 14x32, 1 thread, GFLOP/s in place / packed, with the span of B's rows
  // and C's strip: 448 x N x 576, N = 512-1152 (2-4.7 MiB) 205-218 / 199-212, N = 1600
  // (6.6 MiB) 217 / 214, N = 2500 (10 MiB) 193 / 218, N = 4000 (16 MiB) 168 / 216;
  // 64x3136x576 (8 MiB) 137 / 158; 24x4000x4000 (10.7 MiB) 88 / 107; N = 1024 and 2048
  // (rows 4 and 8 KiB apart, in few of L2's sets) 96 and 81 / 200. The bound, 3/4 of the
  // reach, leaves the rest to the A block, the code and the stack.
  l.b_in_place_max_span_bytes = c.tlb_reach * 3 / 4;
  // A lower bound on L2's set period where it has at most 20 ways: the largest power of
  // two within L2 / 16, at least 64 KiB (512 KiB 8-way, 1.25 MiB 20-way: 64 KiB; 2 MiB
  // 16-way: 128 KiB).
  int64_t period = 64 << 10;
  while (period * 2 <= c.l2 / 16) period *= 2;
  l.l2_set_period_bytes = period;
  // Up to 24 columns (one block wide) at any M, with B small enough to stay near (in half
  // of L2) while every 4-row block reads all of it: packing A there costs about what the
  // multiply does. Against the packed path, same process, median GFLOP/s, 1 thread (A
  // transposed, so the in-place-A path does not apply): 482x11x486 35.8 / 19.4, 1465x11x108
  // 32.9 / 19.5, 2322x18x84 39.3 / 28.9, 99x18x2155 37.6 / 25.8, 2000x24x500 59.4 / 55.5,
  // 5000x3x200 12.9 / 7.1; at 40 columns about even (49.5 / 48.0), hence one block.
  l.narrow_max_columns = kTinyNarrowColumns;
  l.narrow_max_b_bytes = c.l2 / 2;
  // While the matrix fits L2 the packed path's kernels run from cache at a higher rate;
  // past it, they wait on packing it from L3 or memory. Median GFLOP/s, 1 thread, calls
  // back to back, packed / streamed: R x N x K = 4x362x362 (511 KiB) 41 / 32, 4x512x512
  // 28 / 53, 3x256x256 44 / 35, 3x400x400 34 / 43, 16x724x724 66 / 54, 16x1024x1024
  // 47 / 53, 12x886x886 44 / 48; from memory (4096^2) the streamed path runs 1.5-3x faster.
  l.gemv_min_matrix_bytes = c.l2;
  // A B block shared by the threads is packed by all of them, each a part, and read whole
  // by each: its other parts come from the other cores' caches (420 ns a line on the Zen 5
  // VM), after a barrier, and the next packing pass takes the lines back. Up to a quarter
  // of L2 each thread packs the panels it reads into a block of its own, without barriers.
  // 2 threads, median us, shared / own: 448x249x9 NT 43.7 / 40.7, 896x249x9 47.1 / 41.5,
  // 1911x249x9 62.1 / 58.2, 1864x186x4 NN 44.3 / 39.9, 448x249x32 56.5 / 46.4, 1792x249x32
  // 117 / 109, 448x249x128 107 / 100, 600x100x256 NN 136 / 131.
  l.private_b_max_bytes = c.l2 / 4;
  // Within half of L2 one core streams the matrix from its cache faster than two split it
  // (a parallel region costs 3.6 us on the Zen 5 VM). There, GFLOP/s 1 / 2 threads:
  // 512x1x256 (512 KiB) 44 / 26, 342x1x148 NT 36 / 14, 512x1x512 (1 MiB) 34 / 32,
  // 1024x1x512 30 / 35, 4096x1x1024 18 / 40. With several vectors two threads are even
  // from there (us: 652x2x293 10.1 / 10.0, 600x4x300 8.5 / 8.5, 512x4x512 14 / 10.5); with
  // one vector in dot form one thread stays ahead up to L2 (1x652x293 NT 5.5 / 8.2,
  // 600x1x300 4.8 / 7.1, 1x1000x256 (1 MiB) 7.9-10.7 / 7.6-8.1, 1x1000x300 11.6-15.5 /
  // 9.5-10.7, 1x1200x400 24 / 14).
  l.gemv_threads_min_matrix_bytes = c.l2 / 2;
  l.gemv_dot_threads_min_matrix_bytes = c.l2;
  // One vector in axpy form (the matrix's columns contiguous): each thread takes a range of
  // every column's rows, shorter runs than one thread's whole columns, and one core streams
  // the matrix from L2 and L3 faster than two up to 8 L2s. Zen 5 VM (1 MiB L2), us 1 / 2
  // threads, matrix hot / after 64 MiB of other data: 1050x1x287 TN (1.2 MiB) 12.9 / 18.8-
  // 20.6, 13.1 / 15.6-16.5; 1x2000x500 NN (3.8 MiB) 48-49 / 61-67, 46 / 53; 2048x1x1024
  // TN (8 MiB) 92-96 / 109-114; 4096x1x1024 TN 265-276 / 194-195; 4096x1x2048 800-889 /
  // 426-437. (The dot form gains from 2 MiB: 2048x1x512 NN 65-66 / 62.)
  l.gemv_axpy_threads_min_matrix_bytes = 8 * c.l2;
  // A's rows and B's columns both contiguous along K (row-major NT) with C at most 4 rows
  // or columns: the GEMV's dot form, each element of C one dot product of two contiguous
  // runs, where the tiny path first gathers B's columns into rows. Against the tiny path,
  // same process, alternating, median us, 1 thread, AVX-512 (Xeon; AVX2 alike): 2x6x492
  // 1.35 / 0.31, 10x3x528 2.36 / 0.43, 2x100x64 1.69 / 0.66, 3x3x64 0.19 / 0.06, 16x3x128
  // 0.74 / 0.25, 4x24x64 0.38 / 0.30; even at 4x4x32, behind at K 16-24 (6x6x16 0.09 /
  // 0.14) and with more vectors (8x16x128 0.58 / 0.68; 8x8x128 0.41 / 0.36), or the matrix
  // past L1 (6x200x300 21 / 23; with x copied row by row, 17.6 / 8.0: the long-K rule).
  l.dot_max_vectors = 4;
  l.dot_min_k = 32;
  l.dot_max_matrix_bytes = c.l1d;
  // With long K, within L1 or past it, up to 8 columns (one 8-vector group of the dot
  // form on 32 registers) or 16 rows: the tiny path gathers all of B's K x N, and its
  // vectors run along the few columns. Same process, 1 thread, Xeon (AVX-512), us, tiny ->
  // dot form: 4x34x1000 10.7 -> 2.8, 8x34x1000 13.0 -> 5.9, 12x34x1000 16.3 -> 8.6,
  // 6x100x256 8.5 -> 3.2, 16x100x256 12.5 -> 9.0, 12x300x256 25.9 -> 18.9, 34x6x1000 11.2
  // -> 5.1, 100x8x256 7.1 -> 4.3, 6x200x300 17.6 -> 8.0; within L1 8x8x128 0.47 -> 0.32,
  // 30x5x128 1.27 -> 0.71, 8x12x258 1.02 -> 0.78, even at 8x16x128 and 16x16x128. K = 64
  // gains less or loses (16x34x64 0.98 -> 1.07, 300x8x64 5.7 -> 6.2), 12-16 columns lose
  // (100x12x1000 21 -> 27, 300x16x256 15 -> 29), and past half of L2 either (300x8x1000 44
  // -> 45, 4x300x1000 70 -> 95). AVX2 forced (groups of 4 vectors, 8 columns read the
  // matrix twice): 4x34x1000 12.4 -> 4.9, 34x6x1000 9.7 -> 6.7, 8x300x256 36.6 -> 19.1,
  // 30x5x128 1.12 -> 0.75, 40x6x128 1.47 -> 1.11, within 6% at 12x300x256 (20.5 -> 21.1),
  // 100x8x256 (5.9 -> 6.3), 16x16x128 and 10x10x500.
  // (Measured where the tiny path runs, x86-64's vector code; elsewhere not.)
  l.dot_long_min_k = 128;
  l.dot_long_max_matrix_bytes = c.l2 / 2;
  l.dot_long_max_columns = l.tiny_blocks ? 8 : 0;
  l.dot_long_max_rows = l.tiny_blocks ? kGemvMaxVectors : 0;
  // Up to 4 columns of C (the tiny paths' vectors run along C's rows, 2 of 16 lanes busy
  // at 2 columns) or up to 4 rows with B's columns contiguous (B gathered, then the same),
  // or up to 3 rows with B's rows contiguous (the tiny path's vectors run along N, but
  // each B vector serves only 2-3 rows), at any matrix size on one thread: the GEMV loops
  // read the matrix once for all vectors.
  // Against the tiny paths, same process, median GFLOP/s, 1 thread, AVX-512 (Zen 4;
  // OpenBLAS 0.3.21 in brackets): dot form 1209x2x279 12 -> 31 (48), 300x2x300 12 -> 38
  // (66), 1000x4x300 25 -> 39 (34), 2x512x512 NT 12 -> 47 (66), 2x3347x68 NT 9 -> 29 (13);
  // axpy form (A transposed) 2225x2x41 11 -> 33 (59), 300x3x300 19 -> 82 (50), 362x4x362
  // 25 -> 73 (97), 3021x2x10 9 -> 19 (30). With the AVX2 kernel forced alike: 1209x2x279
  // 13-17 -> 30-37, 2x512x512 NT 11 -> 46, 2225x2x41 A transposed 15 -> 39, 362x4x362
  // both transposed 23-28 -> 51-64; 3x256x256 A transposed about even. Behind below:
  // 4 rows with B's rows contiguous, where the tiny path's vectors run
  // along N (4x362x362 103 -> 92; at 2 and 3 rows ahead: 2x512x512 45 -> 73, 3x256x256 A
  // transposed 62 -> 99). From 8 rows on, with a row-major C's rows stored as interleaved
  // vectors (A transposed unless noted; tiny -> GEMV, OpenBLAS in brackets): 54x2x177 both
  // transposed 10 -> 27 (43), 56x2x1320 10 -> 33 (49), 46x3x244 16 -> 31 (38), 40x2x40 9 ->
  // 27 (32), 48x4x48 19 -> 44 (55), 30x2x500 A not transposed 12 -> 28 (58), 8x2x100 4.7 ->
  // 7.8 (18); 60x4x60 and 32x4x128 B transposed even; 8x4x8 5.0 -> 4.5. Few rows of C
  // store whole vectors already and gain nothing from the interleaving: below 64 columns
  // the tiny path stays ahead (2x40x300 62 against 45).
  l.few_vectors_min_rows = 8;
  l.few_rows_min_columns = 64;
  // The dot form from K 16 (a whole 16-float vector), with its last vector masked in place
  // and the sums of all the (row, vector) pairs folded at once, where each had a horizontal
  // sum and a scalar tail (K >= 32 for 1-2 vectors, 64 for 3-4 then). Tiny path -> dot
  // form, AVX-512 (AVX2 forced), OpenBLAS in brackets: 2001x4x63 21 -> 38 (28 -> 41) (60),
  // 742x4x50 21 -> 38 (30 -> 39) (55), 300x2x24 8 -> 21 (10 -> 31) (12), 2000x4x16 13 -> 19
  // (22 -> 29) (26), 117x3x54 15 -> 29 (23 -> 32) (41); behind at 500x4x20, 17 -> 14 (23 ->
  // 20). The folded sums over the horizontal ones, dot form both: 742x4x64 25 -> 46-54,
  // 300x2x300 42 -> 53-57, 1000x4x300 48 -> 86 (with 4-row passes for 3-4 vectors on
  // AVX-512's 32 registers).
  l.few_vectors_dot_min_k = 16;
  // 3-4 rows of C (B^T the matrix, each of its rows read for all of them) gain less: one
  // thread, AVX-512, GFLOP/s, dot form / tiny path, two runs each: 4x300x16 15 / 27,
  // 3x2000x16 21 / 27, 3x200x17 13-18 / 17-25, 4x500x17 19-20 / 22-26, 3x500x18 15-19 /
  // 14-19, 3x300x20 21-23 / 16-18, 4x1000x30 32-36 / 22, 4x200x31 30-38 / 21-24.
  l.few_rows_dot_min_k = 20;
  // 5-8 columns of C against A's contiguous rows: one dot-form pass for all of them on
  // 16-float vectors (2 rows x 8 sums in 32 registers; 8-float ones would read A twice),
  // where A is past half of L2 and within 8 L2s. Against the tiny-narrow path, one
  // thread, Zen 5, us: 1024x8x1024 209 -> 123, 1024x6x1024 218 -> 87, 2048x8x1024 429 ->
  // 284, 512x8x2048 208 -> 173, 1000x5x500 92 -> 60; from memory it loses with 8 columns
  // (4096x8x4096 4.1 -> 4.7 ms, 4096x8x1536 1.44 -> 1.54, 2048x8x2048 even) and within L2
  // (300x8x300 16.1 -> 16.9).
  l.wide_dot_max_vectors = kernel.simd == SimdLevel::Avx512 ? 8 : 0;
  l.wide_dot_min_matrix_bytes = c.l2 / 2;
  l.wide_dot_max_matrix_bytes = 8 * c.l2;
  l.few_rows_axpy_max_vectors = 3;
  // 5-8 columns of C against A's contiguous columns (A transposed, row-major): the axpy
  // form, A read once, 16 rows of C per vector of A, the rows stored from a transpose in
  // registers (on 16-float vectors: finish_rows_transposed), where the tiny path's vectors
  // ran along the few columns. From 128 rows, and past kGemvAxpyDirectColumns of K with C
  // in half of L1 (the partial sums pass through it). Same process, Xeon (AVX-512), us,
  // tiny -> axpy, 1 thread (2 alike: these run on one): 183x5x15 TT 1.20 -> 0.57, 249x7x3
  // TT 1.06 -> 0.61, 1104x8x13 TN 6.3 -> 2.7, 4000x5x12 TT 21.2 -> 7.9, 128x6x40 1.65 ->
  // 0.88, 150x8x100 4.6 -> 3.3, 300x8x300 26.9 -> 14.1, 600x7x200 23.4 -> 17.8, 128x7x1
  // even; behind below 128 rows (44x6x30 0.56 -> 0.76, 92x7x86 2.2 -> 2.6, 20x8x100 0.77
  // -> 1.47: the rows past the last 16 go lane by lane) and with C past L1 (3000x8x50 26.3
  // -> 28.2, 5000x6x200 81 -> 82). Past half of L2 the GEMV's two threads run about even
  // with one (50000x8x16 TN 90-96 us either way, 400000x8x16 0.77-1.07 ms / 0.77-0.96).
  l.few_columns_axpy_max_columns = kernel.simd == SimdLevel::Avx512 ? 8 : 0;
  l.few_columns_axpy_min_rows = 128;
  l.few_columns_axpy_max_sums_bytes = c.l1d / 2;
  // Up to one row block of the tiny path (8 rows with AVX-512, 4 with AVX2)
  // with B's rows contiguous, B is read once, in place, at any size: 7x742x181 ran at 33
  // GFLOP/s packed, where 7x700x180 (within the small products) ran at 100 on the tiny path;
  // 8x500x500 32 -> 95. AVX2 forced: 4x500x460 41 -> 53, 4x480x480 A transposed 32 -> 48.
  l.tiny_block_rows = tiny_rows_per_block(kernel.simd);
  // In-place A needs pointwise kernels with one-pixel variants whose MR divides the row unit.
  l.in_place_a_kernels = kernel.pointwise[0].fn != nullptr;
  for (const KernelInfo::Pointwise& k : kernel.pointwise)
    if (k.fn && (!k.one_row || kInPlaceARowUnit % k.mr)) l.in_place_a_kernels = false;
  // AVX-512 (Xeon model 207, 1 thread, 14x32 packed -> in place on the 16-channel
  // kernels): 512x49x4608 73 -> 102, 128x32x1152 45 -> 72, 1000x16x512 38 -> 54; but up to
  // 8 columns the packed path won (4096x8x4096 34 -> 30, 10000x8x64 56 -> 37, on AVX2's
  // 8-wide kernel; on the 16-wide one, half of it past C, not measured).
  l.in_place_a_min_columns = kernel.simd == SimdLevel::Avx512 ? 9 : 1;
  // C' within 1 MiB: 4000x250x300, 4 MiB of C' for one K block, ran 71 -> 51 GFLOP/s.
  l.in_place_a_max_staged = int64_t{1} << 18;
  return l;
}

namespace {

double multiply_adds(int64_t m, int64_t n, int64_t k) { return static_cast<double>(m) * n * k; }

// A matrix times `vectors` vectors, streamed: one vector always; several when the matrix
// has rows enough for whole vector steps (6x6x100000 would run on scalars), is past L2, and
// has contiguous columns (axpy form) or, with `dot_form_too`, rows of at least 256 floats
// (dot form). Each vector adds compute the packed path does at the kernel's rate: the
// threshold grows with R past 4.
bool gemv_serves(const PathLimits& l, int64_t rows, int64_t cols, const MatrixView& mat, int64_t vectors,
                 bool dot_form_too) {
  if (vectors == 1) return true;
  constexpr int64_t kMinRows = 64, kDotMinCols = 256;
  const bool axpy_form = mat.rs == 1 && mat.cs != 1;
  const bool dot_form = dot_form_too && mat.cs == 1 && mat.rs != 1 && cols >= kDotMinCols;
  if (vectors > kGemvMaxVectors || !(axpy_form || dot_form) || rows < kMinRows) return false;
  return rows * cols * static_cast<int64_t>(sizeof(float)) > l.gemv_min_matrix_bytes * std::max<int64_t>(1, vectors / 4);
}

// Dot products: A's rows and B's columns contiguous along K (nothing to gather), few rows or
// columns of C, the larger operand (the GEMV's matrix) within L1, or with long K within
// half of L2.
bool dots_serve(const PathLimits& l, const GemmProblem& p, const MatrixView& a, const MatrixView& b) {
  if (a.cs != 1 || b.rs != 1 || a.rs == 1 || b.cs == 1) return false;
  const int64_t vectors = std::min(p.m, p.n), rows = std::max(p.m, p.n);
  const int64_t matrix_bytes = rows * p.k * static_cast<int64_t>(sizeof(float));
  if (vectors <= l.dot_max_vectors && p.k >= l.dot_min_k && matrix_bytes <= l.dot_max_matrix_bytes) return true;
  const int64_t max_vectors = p.m < p.n ? l.dot_long_max_rows : l.dot_long_max_columns;
  return vectors <= max_vectors && p.k >= l.dot_long_min_k && matrix_bytes <= l.dot_long_max_matrix_bytes;
}

// At most dot_max_vectors columns of C, or rows with B's columns contiguous, against at
// least min_rows of the other side (see path_limits). The matrix (A, or B
// transposed) in axpy form (columns contiguous) at any K, in dot form (rows contiguous)
// from a whole vector of K.
bool few_vectors_serve(const PathLimits& l, const MatrixView& mat, int64_t rows, int64_t min_rows, int64_t k,
                       int64_t vectors, int64_t dot_min_k) {
  if (vectors > l.dot_max_vectors || rows < min_rows) return false;
  if (mat.rs == 1) return true;
  return mat.cs == 1 && k >= dot_min_k;
}

// 5-8 columns of C against A's contiguous columns, C long enough (see path_limits).
bool few_columns_axpy_serves(const PathLimits& l, const MatrixView& a, int64_t m, int64_t k, int64_t n) {
  if (n <= l.dot_max_vectors || n > l.few_columns_axpy_max_columns || a.rs != 1 || a.cs == 1) return false;
  return m >= l.few_columns_axpy_min_rows &&
         (k <= kGemvAxpyDirectColumns || m * n * static_cast<int64_t>(sizeof(float)) <= l.few_columns_axpy_max_sums_bytes);
}

// 5-8 columns of C against A's rows contiguous, A within the window where one dot-form
// pass over it beats the tiny-narrow path (see path_limits).
bool wide_dot_serves(const PathLimits& l, const MatrixView& a, int64_t m, int64_t k, int64_t n) {
  if (n <= l.dot_max_vectors || n > l.wide_dot_max_vectors || a.cs != 1 || a.rs == 1) return false;
  const int64_t bytes = m * k * static_cast<int64_t>(sizeof(float));
  return m >= l.few_vectors_min_rows && k >= l.few_vectors_dot_min_k && bytes > l.wide_dot_min_matrix_bytes &&
         bytes <= l.wide_dot_max_matrix_bytes;
}

// A GEMV's threads: one while the matrix is within gemv_threads_min_matrix_bytes (one
// vector in axpy form: gemv_axpy_threads_min_matrix_bytes; in dot form:
// gemv_dot_threads_min_matrix_bytes), and no more than it has row
// units (61x1x2651 NT ran all on one thread, at half speed with two).
int gemv_threads(const PathLimits& l, int64_t rows, int64_t cols, const MatrixView& mat, int64_t vectors) {
  const int64_t alone = vectors > 1 ? l.gemv_threads_min_matrix_bytes
                       : mat.rs == 1 ? l.gemv_axpy_threads_min_matrix_bytes
                                     : l.gemv_dot_threads_min_matrix_bytes;
  if (rows * cols * static_cast<int64_t>(sizeof(float)) <= alone) return 1;
  return static_cast<int>(std::min<int64_t>(threads_for(32.0 * rows * cols), ceil_div(rows, kGemvRowUnit)));
}

}  // namespace

// Measured against the packed path, 1 thread, AVX2, GFLOP/s (packed -> in place):
// 512x49x4608 45 -> 65, 4096x8x4096 22 -> 38, 128x32x1152 54 -> 89, 1000x16x512 63 -> 85,
// 512x96x2304 64 -> 80, 1024x128x1024 63 -> 77, 512x192x1024 69 -> 74, 1024x256x1024 70 ->
// 74; past that no gain (1024^3 81 both, 512^3 81 -> 77, 2048^3 86 -> 73: packing is a
// small share there, and C' outgrows L2). Packing A costs a share of about 1/N, C'
// (written, and read back per K block and at the end) about 1/K: K at least 2N. K from
// 128, or from 32 with at most 8 columns, where the packed path's kernel tile is mostly
// padding: 10000x2x100 5.7 -> 10.4, 10000x4x100 10.7 -> 19.0, 5000x6x32 11.0 -> 15.4,
// 10000x8x64 23 -> 26; with 16 or 24 columns and K ~ 100 packing A pays (35 -> 31, 43 -> 38).
bool in_place_a_serves(const PathLimits& l, const GemmProblem& p, const MatrixView& a) {
  if (!l.in_place_a_kernels || p.epilogue.active() || p.c_block_stride || a.cs != 1) return false;
  if (p.n < l.in_place_a_min_columns || p.n > kInPlaceAMaxColumns || p.m < kInPlaceARowUnit) return false;
  const int64_t min_k = p.n <= 8 ? 32 : 128;
  const int64_t staged = round_up(p.m, kInPlaceARowUnit) * round_up(p.n, 8);
  return p.k >= std::max<int64_t>(min_k, 2 * p.n) && staged <= l.in_place_a_max_staged;
}

GemmPathChoice choose_gemm_path(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                                const KernelConfig& cfg) {
  if (micro_serves(cfg.paths, p.m, p.n, p.k, a, b, p.rs_c))
    return {GemmPath::Micro, 1, "small products, or few columns or long dot products on one thread: each element of C in one pass"};
  return choose_gemm_path_past_micro(p, a, b, cfg);
}

GemmPathChoice choose_gemm_path_past_micro(const GemmProblem& p, const MatrixView& a, const MatrixView& b,
                                           const KernelConfig& cfg) {
  const PathLimits& l = cfg.paths;
  const int64_t m = p.m, n = p.n, k = p.k;
  // A matrix times one vector, or a few whose matrix has contiguous columns, is
  // memory-bound: the matrix is streamed once. A second core's share of L3 bandwidth pays
  // off past half of L2, for one vector past L2 in dot form and 8 L2s in axpy form
  // (gemv_threads; on the Xeon 1000x512 ran 1.4x faster on 2 threads).
  // Few rows of C against B's columns contiguous (a batch of images times a layer's weights,
  // X W^T) take the dot form too: the packed path transposes B as it packs, and ran
  // 8x4096x25088 at 25 GFLOP/s, 5x1000x2048 at 19 (now 45 and 75). Few columns against A's
  // rows contiguous keep the in-place-A path (4096x8x4096 68 GFLOP/s there, 48 in dot form).
  if (gemv_serves(l, m, k, a, n, false) && (n == 1 || m > n))
    return {GemmPath::GemvColumns, gemv_threads(l, m, k, a, n),
            n == 1 ? "one column of C: A streamed once" : "few columns of C, A past L2 with contiguous columns"};
  if (gemv_serves(l, n, k, b.transposed(), m, true))
    return {GemmPath::GemvRows, gemv_threads(l, n, k, b.transposed(), m),
            m == 1 ? "one row of C: B streamed once" : "few rows of C, B past L2 with contiguous rows"};
  const int threads = threads_for(2.0 * m * n * k);
  if (threads == 1 && dots_serve(l, p, a, b))
    return {m >= n ? GemmPath::GemvColumns : GemmPath::GemvRows, 1,
            "at most 4 rows or columns of C, A's rows and B's columns contiguous: dot products in place"};
  // At any thread count, on the GEMV's threads where the flops give more than one: the
  // tiny-narrow path on two ran slower than the GEMV on one (Zen 5, A's rows contiguous:
  // 1024x2x1024 129 against 55 us, 37 on two; 2000x4x300 71 against 41, 33 on two).
  if (l.tiny_blocks && few_vectors_serve(l, a, m, l.few_vectors_min_rows, k, n, l.few_vectors_dot_min_k))
    return {GemmPath::GemvColumns, std::min(threads, gemv_threads(l, m, k, a, n)),
            "at most 4 columns of C: A read once for all of them"};
  if (l.tiny_blocks && few_columns_axpy_serves(l, a, m, k, n))
    return {GemmPath::GemvColumns, std::min(threads, gemv_threads(l, m, k, a, n)),
            "5-8 columns of C against A's contiguous columns: A read once, C's rows transposed in registers"};
  if (l.tiny_blocks && wide_dot_serves(l, a, m, k, n))
    return {GemmPath::GemvColumns, std::min(threads, gemv_threads(l, m, k, a, n)),
            "5-8 columns of C, A's rows contiguous and within 8 L2s: A read once for all of them"};
  const MatrixView bt = b.transposed();
  if (threads == 1 && l.tiny_blocks && (bt.cs == 1 || m <= l.few_rows_axpy_max_vectors) &&
      few_vectors_serve(l, bt, n, l.few_rows_min_columns, k, m, m >= 3 ? l.few_rows_dot_min_k : l.few_vectors_dot_min_k))
    return {GemmPath::GemvRows, 1, "at most 4 rows of C (3 unless B's columns are contiguous): B read once for all"};
  if (threads == 1 && l.tiny_blocks && m <= l.tiny_block_rows && b.cs == 1)
    return {GemmPath::Tiny, 1, "one row block of the tiny path, B's rows contiguous: B read once, in place"};
  // Any K: nothing is packed, so no A panel has to stay in L1. Against the small path and
  // the packed one, same process, median GFLOP/s: 16x16x3000 92.8 / 62.5 / 43.6, 8x8x10000
  // 56.8 / 38.8 / 21.7, 4x24x5000 83.2 / 69.2 / 28.7, 2x2x100000 10.3 / 2.4 / 1.7.
  if (threads == 1 && l.tiny_blocks && multiply_adds(m, n, k) <= l.small_multiply_adds)
    return {GemmPath::Tiny, 1, "at most 96^3 multiply-adds on one thread: computed straight from the operands"};
  // Where there are no tiny blocks (the generic kernel, NEON).
  if (threads == 1 && multiply_adds(m, n, k) <= l.small_multiply_adds && k <= l.small_max_k)
    return {GemmPath::Small, 1, "at most 96^3 multiply-adds, K <= 1024, on one thread, no tiny blocks: B read in place"};
  if (in_place_a_serves(l, p, a))
    return {GemmPath::InPlaceA, threads, "few columns, long contiguous rows of A: the pointwise kernels read A in place"};
  if (l.tiny_blocks && n <= l.narrow_max_columns && k * n * static_cast<int64_t>(sizeof(float)) <= l.narrow_max_b_bytes)
    return {GemmPath::TinyNarrow, threads, "at most 24 columns with B in half of L2: A read in place, nothing packed"};
  if (few_rows_b_in_place_serves(cfg, m, n, b))
    return {GemmPath::FewRowsBInPlace, threads, "at most 16 rows of C, B's rows contiguous: B's panels read in place"};
  if (packs_b_per_panel(p, cfg))
    return {GemmPath::PackedPerPanel, threads, "M within one MC block: B packed one panel at a time"};
  if (packing_sizes(m, n, k, false, cfg).private_b)
    return {GemmPath::PackedSharedB, threads, "M past one MC block, a small B block: each thread packs the panels it reads"};
  return {GemmPath::PackedSharedB, threads, "M past one MC block: B packed once into a shared block"};
}

bool b_panel_rows_in_place(const PathLimits& l, int64_t kc, int nr, int64_t rs_b, int64_t c_span) {
  const int64_t f = sizeof(float);
  if (l.b_in_place_min_panel_bytes <= 0 || kc * nr * f < l.b_in_place_min_panel_bytes) return false;
  // Rows a power of two apart fall into few of L2's sets and evict each other; up to 12
  // rows per set leaves a 16-way L2 room for A (an 8-way one less: measured on 16 ways).
  const int64_t period = std::max<int64_t>(l.l2_set_period_bytes, 64);
  const int64_t low_bit = std::min((rs_b * f) & -(rs_b * f), period);
  const int64_t rows_per_set = ceil_div(kc, period / std::max<int64_t>(low_bit, 1));
  // An empirical bound on the address span of B's rows and C's strip, against the TLB's
  // reach: the pages touched are fewer (a row, or two, per page where rows are far apart),
  // but past about the reach in-place reads lost 10-20% (path_limits).
  const int64_t span = (kc * rs_b + c_span) * f;
  return rows_per_set <= 12 && span <= l.b_in_place_max_span_bytes;
}

const char* path_name(GemmPath path) {
  switch (path) {
    case GemmPath::Micro: return "micro";
    case GemmPath::GemvColumns: return "gemv-columns";
    case GemmPath::GemvRows: return "gemv-rows";
    case GemmPath::Tiny: return "tiny";
    case GemmPath::Small: return "small";
    case GemmPath::InPlaceA: return "in-place-a";
    case GemmPath::TinyNarrow: return "tiny-narrow";
    case GemmPath::FewRowsBInPlace: return "few-rows-b-in-place";
    case GemmPath::PackedPerPanel: return "packed-per-panel";
    case GemmPath::PackedSharedB: return "packed-shared-b";
    case GemmPath::NoHeap: return "no-heap";
    case GemmPath::QuickReturn: return "quick-return";
  }
  return "unknown";
}

}  // namespace gk
