// Fast-Run: measure the candidate configurations of a layer on this machine, keep the
// fastest, and remember it in process and in a file (GEMMKIT_FASTRUN_CACHE).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "conv/conv.h"

namespace gk {
namespace conv {

// What identifies the answer: this machine and library (CPU model, kernel and kernel set,
// caches, threads, version) and the layer (every descriptor field).
std::string machine_key();
std::string descriptor_key(const gk_conv_desc& d);

// The cached choice for a shape, if any (loads GEMMKIT_FASTRUN_CACHE on first use).
bool cached_choice(const Shape& s, std::string* candidate_name);

// Times every candidate (the AUTO choice first; later ones only while the time budget
// lasts, and each cut after one run when clearly slower than the best; a later one wins
// only when at least 5% faster than the best so far), stores the winner
// in the cache (and saves GEMMKIT_FASTRUN_CACHE) and returns it prepared. Serialized
// across threads, so concurrent plans never time on top of each other.
struct Choice {
  Candidate candidate;
  std::unique_ptr<Prepared> prepared;
};
Choice profile_and_choose(const Shape& s, const std::vector<Candidate>& candidates,
                          const float* weights, const float* bias);

// For tests: replace the clock with fake durations per candidate name (nullptr restores the
// real one), and forget every cache entry (GEMMKIT_FASTRUN_CACHE is then read again).
void set_fake_durations(std::function<double(const std::string&)> seconds_per_run);
void clear_cache();
// Seconds of profiling per plan (GEMMKIT_FASTRUN_BUDGET_MS, default 250).
double profile_budget_seconds();

}  // namespace conv
}  // namespace gk
