// gk_pointwise_1x32_avx512: see pointwise_avx512.inc.
#define GK_MR 1
#define GK_NR 32
#include "pointwise_avx512.inc"
