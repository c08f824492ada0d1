// gk_sgemm_6x16_avx2: see sgemm_avx2.inc.
#define GK_MR 6
#define GK_NR 16
#include "sgemm_avx2.inc"
