// gk_pointwise_4x32_avx512: see pointwise_avx512.inc.
#define GK_MR 4
#define GK_NR 32
#include "pointwise_avx512.inc"
