// gk_sgemm_4x8_avx2: see sgemm_avx2.inc.
#define GK_MR 4
#define GK_NR 8
#include "sgemm_avx2.inc"
