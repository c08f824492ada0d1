// gk_pointwise_1x8_avx2: see pointwise_avx2.inc.
#define GK_MR 1
#define GK_NR 8
#include "pointwise_avx2.inc"
