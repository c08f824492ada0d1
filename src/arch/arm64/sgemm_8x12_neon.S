// gk_sgemm_8x12_neon: 8x12 single-precision micro-kernel, AArch64 Advanced SIMD.
// Contract and argument block: src/arch/ukernel.h (one pointer argument in x0).
//
// Registers: v8..v31 hold C, row i in v(8+3i), v(9+3i), v(10+3i) (columns 0-3, 4-7, 8-11),
// so one st1 {3 registers} stores a row. v0/v1 hold A rows 0-3 / 4-7 of a k step, used by
// element (fmla by lane); v2-v4 and v5-v7 are two sets for B rows, alternating by k step.
// Per k step: 24 fmla, 1 ld1 of B (3 q registers), 2 ldr q of A: 3 load instructions per
// 24 FMAs. The loads for step k+1 sit among the FMAs of step k: the next B row is loaded
// into the idle set first, the next A rows 0-3 as soon as the FMAs of rows 0-3 are done,
// rows 4-7 after those of rows 4-7. The loop runs two k steps so the B sets alternate
// without moves; the last step loads nothing (no read past the panels).
// v8..v15 are callee-saved (their low halves, d8..d15, by AAPCS64): saved on the stack.
//
//   x0 args   x1 A   x2 B (next row)   x3 C row   x4 k steps left   x5 rs_b bytes   x6 rs_c bytes

// The FMAs of rows 0-3 (A in v0) or 4-7 (A in v1) with B in b0..b2.
.macro ROW_FMA a, lane, c0, c1, c2, b0, b1, b2
  fmla \c0\().4s, \b0\().4s, \a\().s[\lane]
  fmla \c1\().4s, \b1\().4s, \a\().s[\lane]
  fmla \c2\().4s, \b2\().4s, \a\().s[\lane]
.endm
.macro FMA_ROWS_0_3 b0, b1, b2
  ROW_FMA v0, 0, v8, v9, v10, \b0, \b1, \b2
  ROW_FMA v0, 1, v11, v12, v13, \b0, \b1, \b2
  ROW_FMA v0, 2, v14, v15, v16, \b0, \b1, \b2
  ROW_FMA v0, 3, v17, v18, v19, \b0, \b1, \b2
.endm
.macro FMA_ROWS_4_7 b0, b1, b2
  ROW_FMA v1, 0, v20, v21, v22, \b0, \b1, \b2
  ROW_FMA v1, 1, v23, v24, v25, \b0, \b1, \b2
  ROW_FMA v1, 2, v26, v27, v28, \b0, \b1, \b2
  ROW_FMA v1, 3, v29, v30, v31, \b0, \b1, \b2
.endm

// One k step on B in b0..b2 while loading step k+1: its B row into n0..n2, its A into v0/v1.
.macro STEP_AND_LOAD_NEXT b0, b1, b2, n0, n1, n2
  ld1 {\n0\().4s, \n1\().4s, \n2\().4s}, [x2]
  add x2, x2, x5
  FMA_ROWS_0_3 \b0, \b1, \b2
  ldr q0, [x1, #32]
  FMA_ROWS_4_7 \b0, \b1, \b2
  ldr q1, [x1, #48]
  add x1, x1, #32
.endm
.macro LAST_STEP b0, b1, b2
  FMA_ROWS_0_3 \b0, \b1, \b2
  FMA_ROWS_4_7 \b0, \b1, \b2
.endm

// C row = alpha*acc (already scaled) + beta*C (beta in v1.s[0]), then next row.
.macro STORE_ROW_BETA c0, c1, c2
  ld1 {v2.4s, v3.4s, v4.4s}, [x3]
  fmla \c0\().4s, v2.4s, v1.s[0]
  fmla \c1\().4s, v3.4s, v1.s[0]
  fmla \c2\().4s, v4.4s, v1.s[0]
  st1 {\c0\().4s, \c1\().4s, \c2\().4s}, [x3]
  add x3, x3, x6
.endm
// C row = alpha*acc, C never read (beta == 0: C may hold NaN).
.macro STORE_ROW c0, c1, c2
  st1 {\c0\().4s, \c1\().4s, \c2\().4s}, [x3]
  add x3, x3, x6
.endm

  .text
  .globl gk_sgemm_8x12_neon
  .hidden gk_sgemm_8x12_neon
  .type gk_sgemm_8x12_neon, %function
  .p2align 4
gk_sgemm_8x12_neon:
  stp d8, d9, [sp, #-64]!
  stp d10, d11, [sp, #16]
  stp d12, d13, [sp, #32]
  stp d14, d15, [sp, #48]

  ldr x1, [x0, #0]
  ldr x2, [x0, #8]
  ldr x3, [x0, #16]
  ldr x4, [x0, #24]
  ldr x5, [x0, #32]
  lsl x5, x5, #2
  ldr x6, [x0, #40]
  lsl x6, x6, #2

  // Prefetch the C tile (8 rows of 48 bytes) for the store at the end.
  mov x7, x3
  .rept 8
  prfm pstl1keep, [x7]
  prfm pstl1keep, [x7, #44]
  add x7, x7, x6
  .endr

  .irp r, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
  movi v\r\().4s, #0
  .endr

  cbz x4, .Lstore
  ldp q0, q1, [x1]
  ld1 {v2.4s, v3.4s, v4.4s}, [x2]
  add x2, x2, x5
  sub x4, x4, #1              // steps after the one loaded

.Lloop2:
  cmp x4, #2
  b.lt .Ltail
  prfm pldl1keep, [x1, #256]  // A streams from L2; B stays in L1
  STEP_AND_LOAD_NEXT v2, v3, v4, v5, v6, v7
  STEP_AND_LOAD_NEXT v5, v6, v7, v2, v3, v4
  sub x4, x4, #2
  b .Lloop2

.Ltail:
  cbz x4, .Llast_in_first_set
  STEP_AND_LOAD_NEXT v2, v3, v4, v5, v6, v7
  LAST_STEP v5, v6, v7
  b .Lstore
.Llast_in_first_set:
  LAST_STEP v2, v3, v4

.Lstore:
  ldr s0, [x0, #48]           // alpha
  ldr s1, [x0, #52]           // beta
  .irp r, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
  fmul v\r\().4s, v\r\().4s, v0.s[0]
  .endr
  fcmp s1, #0.0
  b.eq .Lbeta_zero            // NaN compares unordered (not equal): it propagates
  STORE_ROW_BETA v8, v9, v10
  STORE_ROW_BETA v11, v12, v13
  STORE_ROW_BETA v14, v15, v16
  STORE_ROW_BETA v17, v18, v19
  STORE_ROW_BETA v20, v21, v22
  STORE_ROW_BETA v23, v24, v25
  STORE_ROW_BETA v26, v27, v28
  STORE_ROW_BETA v29, v30, v31
  b .Ldone
.Lbeta_zero:
  STORE_ROW v8, v9, v10
  STORE_ROW v11, v12, v13
  STORE_ROW v14, v15, v16
  STORE_ROW v17, v18, v19
  STORE_ROW v20, v21, v22
  STORE_ROW v23, v24, v25
  STORE_ROW v26, v27, v28
  STORE_ROW v29, v30, v31
.Ldone:
  ldp d14, d15, [sp, #48]
  ldp d12, d13, [sp, #32]
  ldp d10, d11, [sp, #16]
  ldp d8, d9, [sp], #64
  ret
  .size gk_sgemm_8x12_neon, .-gk_sgemm_8x12_neon

  .section .note.GNU-stack,"",%progbits
