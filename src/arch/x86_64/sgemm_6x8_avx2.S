// gk_sgemm_6x8_avx2: the half-width AVX2 kernel, for panels of at most 8 columns (the
// last panel of N = 16q + r, r <= 8), so such edges cost half a 6x16 call. Same source
// as the 6x16 kernel, assembled with NR = 8.
#define GK_AVX2_NR 8
#include "sgemm_6x16_avx2.S"
