// AArch64: every assembly kernel must preserve d8..d15 (callee-saved under AAPCS64). The
// kernel is called from inline assembly that first fills d8..d15 with known patterns and
// reads them back after the call, so a clobber cannot hide behind compiler spills.
#if defined(__aarch64__)
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gemm_test_util.h"

namespace {

// Calls fn(args) with d8..d15 = in[0..7]; returns d8..d15 after the call in out[0..7].
void call_with_callee_saved(gk_ukernel_fn fn, const gk_ukernel_args* args,
                            const uint64_t in[8], uint64_t out[8]) {
  asm volatile(
      "ldp d8, d9, [%[in]]\n"
      "ldp d10, d11, [%[in], #16]\n"
      "ldp d12, d13, [%[in], #32]\n"
      "ldp d14, d15, [%[in], #48]\n"
      "mov x0, %[args]\n"
      "blr %[fn]\n"
      "stp d8, d9, [%[out]]\n"
      "stp d10, d11, [%[out], #16]\n"
      "stp d12, d13, [%[out], #32]\n"
      "stp d14, d15, [%[out], #48]\n"
      :
      : [in] "r"(in), [out] "r"(out), [fn] "r"(fn), [args] "r"(args)
      : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12",
        "x13", "x14", "x15", "x16", "x17", "x30", "v0", "v1", "v2", "v3", "v4", "v5", "v6",
        "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18",
        "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30",
        "v31", "cc", "memory");
}

}  // namespace

TEST(Arm64Abi, KernelsPreserveD8ToD15) {
  gktest::for_each_kernel([](const gk::KernelInfo& ker) {
    const int k = 13;
    float* a = nullptr;
    ASSERT_EQ(posix_memalign(reinterpret_cast<void**>(&a), 64, sizeof(float) * ker.mr * k), 0);
    std::vector<float> b(size_t(ker.nr) * k, 0.5f), c(size_t(ker.mr) * ker.nr, 1.0f);
    for (int i = 0; i < ker.mr * k; ++i) a[i] = 0.25f;
    const uint64_t in[8] = {0x0123456789abcdefull, 0xfedcba9876543210ull, 0x1111222233334444ull,
                            0x5555666677778888ull, 0x99990000aaaabbbbull, 0xccccddddeeeeffffull,
                            0x0f0f0f0ff0f0f0f0ull, 0x3c3c3c3cc3c3c3c3ull};
    for (float beta : {0.0f, 1.0f}) {
      uint64_t out[8] = {};
      const gk_ukernel_args args{a, b.data(), c.data(), k, ker.nr, ker.nr, 1.0f, beta, nullptr, 0};
      call_with_callee_saved(ker.full_tile, &args, in, out);
      for (int r = 0; r < 8; ++r) EXPECT_EQ(out[r], in[r]) << ker.name << ": d" << 8 + r << " clobbered";
      // The kernel still computed: 13 * 0.25 * 0.5 per call, accumulated when beta == 1.
      const float want = 13 * 0.125f * (beta == 0.0f ? 1.0f : 2.0f);
      for (float v : c) ASSERT_EQ(v, want);
    }
    std::free(a);
  });
}
#endif
