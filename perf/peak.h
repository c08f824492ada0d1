// The machine's measured FMA peak and capacity, for "percent of peak" and "percent of the
// probed capacity" in the benchmark tables.
#pragma once

namespace gkbench {
// GFLOP/s of a register-only FMA loop on `threads` threads, with 256-bit (AVX2) or
// 512-bit (AVX-512) vectors. Returns 0 when the CPU lacks the ISA.
double measure_fma_peak_gflops(int vector_bits, int threads);
// The FMA capacity `threads` threads get right now: one short run of the loop above with
// the widest vectors the CPU has (a few ms). The benchmark probes it before and after each
// point: on a shared VM the capacity itself moves, and a fixed peak hides that.
double probe_fma_capacity_gflops(int threads);
}
