// gk_sgemm_4x16_avx2: see sgemm_avx2.inc.
#define GK_MR 4
#define GK_NR 16
#include "sgemm_avx2.inc"
