// 64-bit index arithmetic: leading dimension times columns beyond 2^31 elements, on a
// sparse mapping (MAP_NORESERVE) so only the touched pages take memory.
#include <sys/mman.h>

#include "gemm_test_util.h"

TEST(LargeIndex, LeadingDimensionTimesColumnsBeyond2To31) {
  const int64_t ld = (int64_t{1} << 30) + 7;  // fits in int; ld * 3 does not fit in int32
  const int m = 5, n = 3, k = 3;
  // A takes k columns of ld; C takes max(m, n) = m rows or columns of ld.
  const size_t bytes = static_cast<size_t>(ld * (k + m)) * sizeof(float);
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) GTEST_SKIP() << "cannot reserve " << bytes << " bytes of address space";
  float* a = static_cast<float*>(map);  // column-major m x k, lda = ld
  float* c = a + ld * k;                // column-major m x n, ldc = ld
  float b[k * n];
  for (int p = 0; p < k; ++p)
    for (int i = 0; i < m; ++i) a[p * ld + i] = float(i + 10 * p);
  for (int i = 0; i < k * n; ++i) b[i] = float(i % 4) - 1.0f;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) c[j * ld + i] = gktest::kNaN;
  for (bool trans : {false, true}) {
    // trans: the same memory read as A^T (k x m, row-major view of a column-major buffer).
    if (trans) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a, int(ld), b, n,
                  0.0f, c, int(ld));
    } else {
      cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, int(ld), b, k,
                  0.0f, c, int(ld));
    }
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        // Row-major C(i, j) lives at c[i * ld + j]; column-major at c[j * ld + i].
        double want = 0;
        for (int p = 0; p < k; ++p)
          want += double(a[p * ld + i]) * (trans ? b[p * n + j] : b[j * k + p]);
        const float got = trans ? c[i * ld + j] : c[j * ld + i];
        ASSERT_EQ(got, float(want)) << "i=" << i << " j=" << j << " trans=" << trans;
      }
    if (!trans) {  // reset for the row-major pass, which writes other elements
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c[i * ld + j] = gktest::kNaN;
    }
  }
  munmap(map, bytes);
}
