// gk_pointwise_1x16_avx512: see pointwise_avx512.inc.
#define GK_MR 1
#define GK_NR 16
#include "pointwise_avx512.inc"
