// Operands packed by the caller (gk_sgemm_pack) and read in place by gk_sgemm_compute:
// the buffer's header, and the two sources the driver reads them through. Which side of
// the internal row-stored problem a packed operand lands on depends on the order: row-major
// A and column-major B become the internal A (MR-row panels), row-major B and column-major
// A the internal B (NR-wide panels); see src/gemm/prepacked.cpp.
#pragma once
#include <cstdint>

#include "gemm/gemm.h"

namespace gk {

// The first kPackHeaderBytes of a packed buffer; the panels follow (64-byte aligned).
constexpr uint32_t kPackMagic = 0x4b504b47;  // "GKPK"
constexpr uint16_t kPackVersion = 1;
constexpr int64_t kPackHeaderBytes = 128;
constexpr int64_t kPackSlackFloats = 16;  // after the panels (see packed_panel_floats)
struct PackHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t header_bytes;
  char kernel[32];       // KernelInfo::name of the kernel packed for
  int32_t mr, nr;
  int64_t kc;            // informative: panels span the whole K, so any KC reads them
  int64_t rows, k;       // op(A) rows x k (A) or k x op(B) columns (B): m or n
  int64_t panel_floats;  // floats of panels after the header
  float alpha;
  uint8_t operand;       // gk_pack_operand
  uint8_t row_major;
  uint8_t trans;         // op() was a transpose
  uint8_t internal_b;    // NR-wide panels (the internal B) rather than MR-row ones
  uint64_t checksum;     // FNV-1a of every byte above
};
static_assert(sizeof(PackHeader) <= kPackHeaderBytes, "the header fits its bytes");

// Panel floats behind the header for `rows` x k, whichever side it lands on (the larger of
// the two roundings, since the size query does not know the order).
int64_t packed_panel_floats(const KernelInfo& kernel, int64_t rows, int64_t k);

// An internal A packed over the whole K into MR-row panels in the caller's memory (the
// PackedA format, not owned): panel i at data + i * K * MR.
class PrepackedA final : public ASource {
 public:
  PrepackedA(const float* data, int64_t k, int mr) : data_(data), k_(k), mr_(mr) {}
  const float* panel(int64_t i0, int64_t, int64_t k0, int64_t, int, float*) const override {
    return data_ + (i0 / mr_) * k_ * mr_ + k0 * mr_;
  }
  bool prepacked() const override { return true; }
  APanels block(int64_t i0, int64_t, int64_t k0, int64_t, int, float*) const override {
    return {data_ + (i0 / mr_) * k_ * mr_ + k0 * mr_, k_ * mr_};
  }

 private:
  const float* data_;
  int64_t k_;
  int mr_;
};

// An internal B packed over the whole K into NR-wide panels (panel q at data + q * K * NR,
// K rows of NR floats, zeros past the last column). The driver packs B panels into its own
// buffer at the width of the kernel it runs, so these are copied, not transposed: a whole
// panel is one contiguous run of kc * NR floats.
class PrepackedB final : public BPacker {
 public:
  PrepackedB(const float* data, int64_t k, int nr) : data_(data), k_(k), nr_(nr) {}
  void pack_panel(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int nr, float* dst) const override;
  void prefetch(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t part, int64_t parts) const override;

 private:
  const float* data_;
  int64_t k_;
  int nr_;
};

}  // namespace gk
