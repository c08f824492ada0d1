// gk_sgemm_<MR>x32_avx512: single-precision micro-kernel, AVX-512F, MR rows x 32 columns.
// Contract and argument block: src/arch/ukernel.h (one pointer argument in %rdi).
//
// MR = 14 was chosen by measurement on Zen 4 (see README, "Kernels"): it uses 28 of the
// 32 zmm registers as accumulators (row i in zmm(i) and zmm(i+16)), zmm30/31 for a row of
// B and zmm14/15 for the broadcasts, so per k step 2 B loads + 14 broadcasts feed 28 FMAs.
// GK_AVX512_MR may be 8, 12 or 14 (the other shapes exist for that experiment).
//
//   rdi  args        rsi  A (packed, MR floats per k)   rdx  B row   r11  rs_b in bytes
//   rcx  k / 4       r8   k % 4                          rax  C row   r9   rs_c in bytes

#ifndef GK_AVX512_MR
#define GK_AVX512_MR 14
#endif
#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define KERNEL CAT3(gk_sgemm_, GK_AVX512_MR, x32_avx512)
#define A_STEP_BYTES (4 * GK_AVX512_MR)
// C's tile is prefetched this many 4-step groups before the end of K (at the start when K
// is shorter): fetched at the start of a long K, the A and B streams evicted it from L1
// before the stores. Intel Xeon model 207, 1 thread, 2040^3 215 -> 221 GFLOP/s. The
// driver knows it as KernelInfo::prefetches_c_late (kDriverPrefetchesCMaxK, driver.cpp).
#define C_AHEAD_GROUPS 16

#define FMA_ROW(off, i, bc, c0, c1) \
  vbroadcastss off+4*i(%rsi), bc; \
  vfmadd231ps %zmm30, bc, c0; \
  vfmadd231ps %zmm31, bc, c1;

// Row lists in groups so that MR picks a prefix. X(i, broadcast reg, acc lo, acc hi).
#define ROWS_0_7(X, off) \
  X(off, 0, %zmm14, %zmm0, %zmm16) X(off, 1, %zmm15, %zmm1, %zmm17) \
  X(off, 2, %zmm14, %zmm2, %zmm18) X(off, 3, %zmm15, %zmm3, %zmm19) \
  X(off, 4, %zmm14, %zmm4, %zmm20) X(off, 5, %zmm15, %zmm5, %zmm21) \
  X(off, 6, %zmm14, %zmm6, %zmm22) X(off, 7, %zmm15, %zmm7, %zmm23)
#define ROWS_8_11(X, off) \
  X(off, 8, %zmm14, %zmm8, %zmm24) X(off, 9, %zmm15, %zmm9, %zmm25) \
  X(off, 10, %zmm14, %zmm10, %zmm26) X(off, 11, %zmm15, %zmm11, %zmm27)
#define ROWS_12_13(X, off) \
  X(off, 12, %zmm14, %zmm12, %zmm28) X(off, 13, %zmm15, %zmm13, %zmm29)
#if GK_AVX512_MR == 14
#define FOR_EACH_ROW(X, off) ROWS_0_7(X, off) ROWS_8_11(X, off) ROWS_12_13(X, off)
#elif GK_AVX512_MR == 12
#define FOR_EACH_ROW(X, off) ROWS_0_7(X, off) ROWS_8_11(X, off)
#elif GK_AVX512_MR == 8
#define FOR_EACH_ROW(X, off) ROWS_0_7(X, off)
#else
#error "GK_AVX512_MR must be 8, 12 or 14"
#endif

#define K_STEP(off) \
  vmovups (%rdx), %zmm30; \
  vmovups 64(%rdx), %zmm31; \
  add %r11, %rdx; \
  FOR_EACH_ROW(FMA_ROW, off)

#define ZERO(off, i, bc, c0, c1) vpxord c0, c0, c0; vpxord c1, c1, c1;
#define SCALE_BY_ALPHA(off, i, bc, c0, c1) vmulps %zmm30, c0, c0; vmulps %zmm30, c1, c1;
#define PREFETCH_C_ROW(off, i, bc, c0, c1) \
  prefetcht0 (%rax); prefetcht0 64(%rax); prefetcht0 124(%rax); add %r9, %rax;
// acc += beta * C row (zmm31 = beta), then next row.
#define ADD_BETA_C(off, i, bc, c0, c1) \
  vfmadd231ps (%rax), %zmm31, c0; vfmadd231ps 64(%rax), %zmm31, c1; add %r9, %rax;
// The fused epilogue: acc += row_bias[i] (r10 = row_bias); acc = max(acc, 0) (zmm14 = 0;
// a NaN becomes 0, as in the C++ epilogue); acc = min(acc, 6) (zmm15 = 6).
#define ADD_ROW_BIAS(off, i, bc, c0, c1) \
  vbroadcastss 4*i(%r10), %zmm30; vaddps %zmm30, c0, c0; vaddps %zmm30, c1, c1;
#define RELU_ROW(off, i, bc, c0, c1) vmaxps %zmm14, c0, c0; vmaxps %zmm14, c1, c1;
#define CLAMP6_ROW(off, i, bc, c0, c1) vminps %zmm15, c0, c0; vminps %zmm15, c1, c1;
// C row = acc (C is read above only when beta != 0: with beta == 0 it may hold NaN).
#define STORE_ROW(off, i, bc, c0, c1) vmovups c0, (%rax); vmovups c1, 64(%rax); add %r9, %rax;

  .text
  .globl KERNEL
  .hidden KERNEL
  .type KERNEL, @function
  .p2align 5
KERNEL:
  mov 0(%rdi), %rsi
  mov 8(%rdi), %rdx
  mov 24(%rdi), %rcx
  mov 32(%rdi), %r11
  shl $2, %r11
  mov 16(%rdi), %rax
  mov 40(%rdi), %r9
  shl $2, %r9

  mov %rcx, %r8
  shr $2, %rcx
  and $3, %r8
  cmp $C_AHEAD_GROUPS, %rcx
  jae 1f
  FOR_EACH_ROW(PREFETCH_C_ROW, 0)
1:
  FOR_EACH_ROW(ZERO, 0)
  test %rcx, %rcx
  jz .Lk_tail

  .p2align 5
.Lk_loop4:
  cmp $C_AHEAD_GROUPS, %rcx
  jne 2f
  FOR_EACH_ROW(PREFETCH_C_ROW, 0)
2:
  prefetcht0 512(%rsi)
  prefetcht0 576(%rsi)
  prefetcht0 640(%rsi)
  prefetcht0 704(%rsi)
  K_STEP(0)
  K_STEP(A_STEP_BYTES)
  K_STEP(2*A_STEP_BYTES)
  K_STEP(3*A_STEP_BYTES)
  add $4*A_STEP_BYTES, %rsi
  dec %rcx
  jnz .Lk_loop4

.Lk_tail:
  test %r8, %r8
  jz .Lstore
.Lk_loop1:
  K_STEP(0)
  add $A_STEP_BYTES, %rsi
  dec %r8
  jnz .Lk_loop1

.Lstore:
  mov 16(%rdi), %rax
  // alpha == 1.0f exactly (its bits; the BLAS and every convolution call): x * 1 is x for
  // every float, NaN and -0 included, so the multiplies are skipped.
  cmpl $0x3f800000, 48(%rdi)
  je .Lscaled
  vbroadcastss 48(%rdi), %zmm30
  FOR_EACH_ROW(SCALE_BY_ALPHA, 0)
.Lscaled:
  vbroadcastss 52(%rdi), %zmm31
  vxorps %xmm14, %xmm14, %xmm14
  vucomiss %xmm14, %xmm31
  jp .Lbeta_general          // beta is NaN: it must propagate, so C is read
  je .Lepilogue
.Lbeta_general:
  FOR_EACH_ROW(ADD_BETA_C, 0)
  mov 16(%rdi), %rax
.Lepilogue:
  mov 56(%rdi), %r10
  test %r10, %r10
  jz .Lactivation
  FOR_EACH_ROW(ADD_ROW_BIAS, 0)
.Lactivation:
  mov 64(%rdi), %r10d
  test %r10d, %r10d
  jz .Lstore_rows
  vpxord %zmm14, %zmm14, %zmm14
  FOR_EACH_ROW(RELU_ROW, 0)
  cmp $2, %r10d
  jne .Lstore_rows
  mov $0x40c00000, %r10d     // 6.0f
  vpbroadcastd %r10d, %zmm15
  FOR_EACH_ROW(CLAMP6_ROW, 0)
.Lstore_rows:
  FOR_EACH_ROW(STORE_ROW, 0)
  vzeroupper
  ret
  .size KERNEL, .-KERNEL

  .section .note.GNU-stack,"",@progbits
