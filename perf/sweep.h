// The random sweep of `make bench`: shapes drawn log-uniform in 1..4000 (fixed seed, every
// transpose pair), each timed at each thread count for gemmkit and its peers back to back,
// against the faster peer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace gkbench {

struct SweepOptions {
  int shapes = 300;           // shapes drawn (each at every thread count)
  uint64_t seed = 20261201;   // the draw's seed: the same shapes on every machine
  int max_dim = 4000;         // m, n and k are drawn log-uniform in 1..max_dim
  double max_gflop = 8.0;     // shapes over 2mnk = max_gflop GFLOP are drawn again
  double min_seconds = 0.02;  // timed per library and point (at least 3 calls)
  std::vector<int> threads = {1, 2};
  std::string out_dir = "build/bench";
};

// Runs the sweep over `libs` (libs[0] is gemmkit, the rest its peers), writes
// out_dir/sweep.md and out_dir/sweep.csv, and returns sweep.md's text.
std::string run_sweep(const std::vector<Library>& libs, const SweepOptions& options);

}  // namespace gkbench
