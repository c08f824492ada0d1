// gk_sgemm_4x24_avx2: see sgemm_avx2.inc.
#define GK_MR 4
#define GK_NR 24
#include "sgemm_avx2.inc"
