// gk_pointwise_4x24_avx2: see pointwise_avx2.inc.
#define GK_MR 4
#define GK_NR 24
#include "pointwise_avx2.inc"
