// gk_pointwise_4x16_avx512: see pointwise_avx512.inc.
#define GK_MR 4
#define GK_NR 16
#include "pointwise_avx512.inc"
