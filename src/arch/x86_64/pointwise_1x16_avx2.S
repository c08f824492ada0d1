// gk_pointwise_1x16_avx2: see pointwise_avx2.inc.
#define GK_MR 1
#define GK_NR 16
#include "pointwise_avx2.inc"
