// The machine's measured FMA peak, for "percent of peak" in the benchmark tables.
#pragma once

namespace gkbench {
// GFLOP/s of a register-only FMA loop on `threads` threads, with 256-bit (AVX2) or
// 512-bit (AVX-512) vectors. Returns 0 when the CPU lacks the ISA.
double measure_fma_peak_gflops(int vector_bits, int threads);
}
