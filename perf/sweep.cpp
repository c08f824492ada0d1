// The random sweep: `options.shapes` GEMMs with m, n and k drawn log-uniform in 1..4000
// (a fixed seed, so every machine draws the same shapes; the transpose pairs NN, NT, TN
// and TT in turn; shapes over `max_gflop` drawn again so the sweep stays within minutes),
// each at every thread count. Point by point, the libraries run back to back, the order
// rotating by point; each library gets an untimed call, then calls timed in 5 batches
// (each batch 1/5 of `min_seconds`, and at least 3 calls in all), and its figure is the
// median over the batches. Between libraries the sweep waits until the process is idle:
// OpenBLAS's pthread workers spin for ~0.1 s after a 2-thread call, libgomp's (gemmkit's
// and BLIS's) for a few ms, and the next library would share the core with them.
#include "sweep.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

namespace gkbench {
namespace {

struct SweepShape {
  int m, n, k;
  CBLAS_TRANSPOSE ta, tb;
};

const char* pair_name(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb) {
  return ta == CblasNoTrans ? (tb == CblasNoTrans ? "NN" : "NT") : (tb == CblasNoTrans ? "TN" : "TT");
}

// Log-uniform integers in 1..max_dim from the raw 64-bit generator (std::uniform_real_
// distribution's algorithm is the library's own: the same seed could draw other shapes).
std::vector<SweepShape> draw_shapes(const SweepOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto dim = [&] {
    const double u = double(rng() >> 11) * 0x1p-53;  // [0, 1)
    return std::clamp(int(std::floor(std::exp(u * std::log(o.max_dim + 1.0)))), 1, o.max_dim);
  };
  const CBLAS_TRANSPOSE pairs[4][2] = {
      {CblasNoTrans, CblasNoTrans}, {CblasNoTrans, CblasTrans}, {CblasTrans, CblasNoTrans}, {CblasTrans, CblasTrans}};
  std::vector<SweepShape> shapes;
  while (int(shapes.size()) < o.shapes) {
    const int m = dim(), n = dim(), k = dim();
    if (2.0 * m * n * k > o.max_gflop * 1e9) continue;
    const auto& p = pairs[shapes.size() % 4];
    shapes.push_back({m, n, k, p[0], p[1]});
  }
  return shapes;
}

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

double process_cpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Sleeps in 2 ms steps until a step in which the process used under a quarter of a core
// (every library's workers asleep), 0.4 s at most. Workers that never sleep (as with
// OMP_WAIT_POLICY=active) would cost 0.4 s a library and point: after 3 waits in a row
// run out, it stops waiting and says so.
void wait_until_idle() {
  static int timeouts = 0;
  if (timeouts >= 3) return;
  for (int step = 0; step < 200; ++step) {
    const double c0 = process_cpu();
    usleep(2000);
    if (process_cpu() - c0 < 0.5e-3) {
      timeouts = 0;
      return;
    }
  }
  if (++timeouts == 3)
    std::fprintf(stderr, "sweep: the process never goes idle (OMP_WAIT_POLICY=active?); no more waits between libraries\n");
}

// Seconds per call: the median over 5 timed batches (and the best), after one untimed call.
struct Timing {
  double median, best;
};
Timing time_point(const Library& lib, const SweepShape& s, int threads, const float* a, const float* b, float* c,
                  double min_seconds) {
  const int lda = s.ta == CblasNoTrans ? s.k : s.m, ldb = s.tb == CblasNoTrans ? s.n : s.k, ldc = s.n;
  auto call = [&] { lib.sgemm(CblasRowMajor, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc); };
  lib.set_threads(threads);
  call();
  double t0 = now();
  call();
  const double first = now() - t0;
  std::vector<double> per_call;
  if (first * 5 >= min_seconds) {
    // Long calls: one per sample, 3 in all (the one above included), or 2 past 0.5 s.
    per_call.push_back(first);
    while (per_call.size() < 3 && (per_call.size() < 2 || first < 0.5)) {
      t0 = now();
      call();
      per_call.push_back(now() - t0);
    }
  } else {
    const int64_t calls = std::max<int64_t>(1, int64_t(min_seconds / 5 / std::max(first, 1e-8)));
    for (int batch = 0; batch < 5; ++batch) {
      t0 = now();
      for (int64_t i = 0; i < calls; ++i) call();
      per_call.push_back((now() - t0) / calls);
    }
  }
  return {median(per_call), *std::min_element(per_call.begin(), per_call.end())};
}

std::string fixed(double x, int digits) {
  char s[64];
  std::snprintf(s, sizeof s, "%.*f", digits, x);
  return s;
}

}  // namespace

std::string run_sweep(const std::vector<Library>& libs, const SweepOptions& o) {
  const std::vector<SweepShape> shapes = draw_shapes(o);
  size_t max_a = 1, max_b = 1, max_c = 1;
  for (const SweepShape& s : shapes) {
    max_a = std::max(max_a, size_t(s.m) * s.k);
    max_b = std::max(max_b, size_t(s.k) * s.n);
    max_c = std::max(max_c, size_t(s.m) * s.n);
  }
  std::vector<float> a(max_a), b(max_b), c(max_c, 0.0f);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& x : a) x = d(rng);
  for (float& x : b) x = d(rng);

  // gflops[point][library]; points: thread counts outer, shapes inner.
  struct Point {
    size_t shape;
    int threads;
    std::vector<double> gflops, best;  // by library: median over batches, best batch
  };
  std::vector<Point> points;
  const double start = now();
  const std::string load_at_start = load_average();
  for (int t : o.threads)
    for (size_t si = 0; si < shapes.size(); ++si) {
      const SweepShape& s = shapes[si];
      Point p{si, t, std::vector<double>(libs.size(), 0.0), std::vector<double>(libs.size(), 0.0)};
      for (size_t i = 0; i < libs.size(); ++i) {
        const size_t li = (i + points.size()) % libs.size();
        const Timing seconds = time_point(libs[li], s, t, a.data(), b.data(), c.data(), o.min_seconds);
        p.gflops[li] = 2.0 * s.m * s.n * s.k / seconds.median * 1e-9;
        p.best[li] = 2.0 * s.m * s.n * s.k / seconds.best * 1e-9;
        wait_until_idle();
      }
      points.push_back(p);
    }
  const double elapsed = now() - start;

  // ---- report
  std::ofstream csv(o.out_dir + "/sweep.csv");
  csv << "index,m,n,k,transpose,threads";
  for (const Library& lib : libs) csv << ',' << lib.name << "_gflops";
  for (const Library& lib : libs) csv << ',' << lib.name << "_best_gflops";
  csv << ",faster_peer_gflops,ratio\n";
  struct Ratio {
    double ratio;
    size_t point;
  };
  std::vector<Ratio> ratios;
  std::vector<double> logs_all, logs_by_peer[8];
  for (size_t pi = 0; pi < points.size(); ++pi) {
    const Point& p = points[pi];
    const SweepShape& s = shapes[p.shape];
    double faster = 0;
    for (size_t li = 1; li < libs.size(); ++li) {
      faster = std::max(faster, p.gflops[li]);
      if (li < 8 && p.gflops[li] > 0) logs_by_peer[li].push_back(std::log(p.gflops[0] / p.gflops[li]));
    }
    const double ratio = faster > 0 ? p.gflops[0] / faster : 0;
    if (ratio > 0) {
      ratios.push_back({ratio, pi});
      logs_all.push_back(std::log(ratio));
    }
    csv << p.shape << ',' << s.m << ',' << s.n << ',' << s.k << ',' << pair_name(s.ta, s.tb) << ',' << p.threads;
    for (double g : p.gflops) csv << ',' << g;
    for (double g : p.best) csv << ',' << g;
    csv << ',' << faster << ',' << ratio << '\n';
  }
  auto geomean = [](const std::vector<double>& logs) {
    double sum = 0;
    for (double l : logs) sum += l;
    return logs.empty() ? 0.0 : std::exp(sum / logs.size());
  };

  std::ostringstream md;
  md << "## Random sweep: " << shapes.size() << " shapes x " << o.threads.size() << " thread counts\n\n"
     << "- m, n, k log-uniform in 1.." << o.max_dim << " (seed " << o.seed << ", shapes over " << o.max_gflop
     << " GFLOP drawn again), transpose pairs NN, NT, TN, TT in turn, row-major, alpha=1, beta=0\n"
     << "- each point: the libraries back to back (order rotating), an untimed call, then the median of 5 "
     << "timed batches of " << fixed(o.min_seconds * 1e3 / 5, 1) << " ms (at least 3 calls); "
     << fixed(elapsed, 0) << " s in all\n"
     << "- load average (1, 5, 15 min) at the start: " << load_at_start << "; at the end: " << load_average() << "\n";
  if (libs.size() < 2) {
    md << "\nNo peer library was loaded: gemmkit's figures only (sweep.csv).\n";
  } else {
    std::string peers;
    for (size_t li = 1; li < libs.size(); ++li) peers += (li > 1 ? " and " : "") + libs[li].name;
    md << "- ratio: gemmkit's GFLOP/s over the faster of " << peers << " at that point\n\n";
    md << "| over | points | geometric mean | lowest | below 0.9 | below 1.0 |\n|---|---|---|---|---|---|\n";
    auto summary_row = [&](const std::string& what, const std::vector<double>& logs) {
      if (logs.empty()) return;
      const double lowest = std::exp(*std::min_element(logs.begin(), logs.end()));
      const auto below = [&](double x) { return std::count_if(logs.begin(), logs.end(), [x](double l) { return l < std::log(x); }); };
      md << "| " << what << " | " << logs.size() << " | " << fixed(geomean(logs), 3) << " | " << fixed(lowest, 3)
         << " | " << below(0.9) << " | " << below(1.0) << " |\n";
    };
    summary_row("the faster peer, all points", logs_all);
    for (int t : o.threads) {
      std::vector<double> logs;
      for (const Ratio& r : ratios)
        if (points[r.point].threads == t) logs.push_back(std::log(r.ratio));
      summary_row("the faster peer, " + std::to_string(t) + " thread" + (t > 1 ? "s" : ""), logs);
    }
    for (const char* pair : {"NN", "NT", "TN", "TT"}) {
      std::vector<double> logs;
      for (const Ratio& r : ratios) {
        const SweepShape& s = shapes[points[r.point].shape];
        if (std::string(pair_name(s.ta, s.tb)) == pair) logs.push_back(std::log(r.ratio));
      }
      summary_row(std::string("the faster peer, ") + pair, logs);
    }
    for (size_t li = 1; li < libs.size() && li < 8; ++li) summary_row(libs[li].name, logs_by_peer[li]);

    std::sort(ratios.begin(), ratios.end(), [](const Ratio& x, const Ratio& y) { return x.ratio < y.ratio; });
    md << "\nWorst 10 (GFLOP/s):\n\n| MxNxK | transpose | threads | gemmkit";
    for (size_t li = 1; li < libs.size(); ++li) md << " | " << libs[li].name;
    md << " | ratio |\n|---|---|---|---";
    for (size_t li = 1; li < libs.size(); ++li) md << "|---";
    md << "|---|\n";
    for (size_t i = 0; i < ratios.size() && i < 10; ++i) {
      const Point& p = points[ratios[i].point];
      const SweepShape& s = shapes[p.shape];
      md << "| " << s.m << 'x' << s.n << 'x' << s.k << " | " << pair_name(s.ta, s.tb) << " | " << p.threads;
      for (double g : p.gflops) md << " | " << fixed(g, g < 10 ? 2 : 1);
      md << " | " << fixed(ratios[i].ratio, 3) << " |\n";
    }
  }
  std::ofstream(o.out_dir + "/sweep.md") << md.str();
  return md.str();
}

}  // namespace gkbench
