// gk_sgemm_6x16_avx2: 6x16 single-precision micro-kernel, AVX2 + FMA3.
// Contract and argument block: src/arch/ukernel.h (one pointer argument in %rdi).
// With GK_AVX2_NR defined to 8 this file assembles gk_sgemm_6x8_avx2, the half-width
// kernel for the last panel of an N that is not a multiple of 16 (sgemm_6x8_avx2.S).
//
// Registers: ymm0..ymm11 hold C (row i in ymm(2i), ymm(2i+1)); ymm12/13 one row of B;
// ymm14/15 alternate as the broadcast of A[i]. Per k step: 2 loads of B, 6 broadcasts,
// 12 FMAs, so the two FMA pipes are the bottleneck, not the load ports.
//
//   rdi  args        rsi  A (packed, MR floats per k)   rdx  B row   r11  rs_b in bytes
//   rcx  k / 4       r8   k % 4                          rax  C row   r9   rs_c in bytes

#ifndef GK_AVX2_NR
#define GK_AVX2_NR 16
#endif
#if GK_AVX2_NR == 16
#define IF_NR16(...) __VA_ARGS__
#elif GK_AVX2_NR == 8
#define IF_NR16(...)
#else
#error "GK_AVX2_NR must be 16 or 8"
#endif
#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define KERNEL CAT3(gk_sgemm_6x, GK_AVX2_NR, _avx2)

#define A_STEP_BYTES 24

#define FMA_ROW(off, i, bc, c0, c1) \
  vbroadcastss off+4*i(%rsi), bc; \
  vfmadd231ps %ymm12, bc, c0; \
  IF_NR16(vfmadd231ps %ymm13, bc, c1;)

// One k step; `off` is the byte offset of this step's A column from %rsi.
#define K_STEP(off) \
  vmovups (%rdx), %ymm12; \
  IF_NR16(vmovups 32(%rdx), %ymm13;) \
  add %r11, %rdx; \
  FMA_ROW(off, 0, %ymm14, %ymm0, %ymm1) \
  FMA_ROW(off, 1, %ymm15, %ymm2, %ymm3) \
  FMA_ROW(off, 2, %ymm14, %ymm4, %ymm5) \
  FMA_ROW(off, 3, %ymm15, %ymm6, %ymm7) \
  FMA_ROW(off, 4, %ymm14, %ymm8, %ymm9) \
  FMA_ROW(off, 5, %ymm15, %ymm10, %ymm11)

#define FOR_EACH_ROW(X) \
  X(%ymm0, %ymm1) X(%ymm2, %ymm3) X(%ymm4, %ymm5) \
  X(%ymm6, %ymm7) X(%ymm8, %ymm9) X(%ymm10, %ymm11)

#define ZERO(c0, c1) vxorps c0, c0, c0; vxorps c1, c1, c1;
#define SCALE_BY_ALPHA(c0, c1) vmulps %ymm12, c0, c0; IF_NR16(vmulps %ymm12, c1, c1;)
#define PREFETCH_C_ROW(c0, c1) prefetcht0 (%rax); prefetcht0 60(%rax); add %r9, %rax;
// C row = alpha*acc + beta*C (ymm13 = beta), then next row.
#define STORE_ROW_BETA(c0, c1) \
  vfmadd231ps (%rax), %ymm13, c0; vmovups c0, (%rax); \
  IF_NR16(vfmadd231ps 32(%rax), %ymm13, c1; vmovups c1, 32(%rax);) \
  add %r9, %rax;
// C row = alpha*acc, C never read (beta == 0: C may hold NaN).
#define STORE_ROW(c0, c1) vmovups c0, (%rax); IF_NR16(vmovups c1, 32(%rax);) add %r9, %rax;

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

  FOR_EACH_ROW(PREFETCH_C_ROW)
  FOR_EACH_ROW(ZERO)

  mov %rcx, %r8
  shr $2, %rcx
  and $3, %r8
  test %rcx, %rcx
  jz .Lk_tail

  .p2align 5
.Lk_loop4:
  prefetcht0 512(%rsi)
  prefetcht0 576(%rsi)
  K_STEP(0)
  K_STEP(24)
  K_STEP(48)
  K_STEP(72)
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
  vbroadcastss 48(%rdi), %ymm12
  vbroadcastss 52(%rdi), %ymm13
  FOR_EACH_ROW(SCALE_BY_ALPHA)
  vxorps %xmm14, %xmm14, %xmm14
  vucomiss %xmm14, %xmm13
  jp .Lbeta_general          // beta is NaN: it must propagate, so C is read
  je .Lbeta_zero
.Lbeta_general:
  FOR_EACH_ROW(STORE_ROW_BETA)
  vzeroupper
  ret
.Lbeta_zero:
  FOR_EACH_ROW(STORE_ROW)
  vzeroupper
  ret
  .size KERNEL, .-KERNEL

  .section .note.GNU-stack,"",@progbits
