// gk_sgemm_6x8_avx2: see sgemm_avx2.inc.
#define GK_MR 6
#define GK_NR 8
#include "sgemm_avx2.inc"
