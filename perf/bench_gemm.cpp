// gemmkit vs OpenBLAS and BLIS sgemm in the same process (both peers are dlopen'ed with
// RTLD_LOCAL so the cblas_sgemm symbols never clash). Every point is timed for the three
// libraries back to back, the order rotating by round; each round is one google-benchmark
// measurement per point, and the table reports medians over rounds and the best round.
// Rounds are many and short (7 of 0.1 s): this VM's speed changes in phases of a second or
// more, which 3 rounds of 0.25 s left to chance per point. Around each point, in each
// round, the FMA capacity of its threads is probed (a few ms before and after): the
// "% cap" columns are the median over rounds of GFLOP/s / that round's capacity.
//
// Then a strided batch (gk_sgemm_batch_strided, 1000 products of 16^3 and 32^3) against
// loops of cblas_sgemm calls, gemmkit's and OpenBLAS's; then the inference-side API
// (inference_table: pre-packed A, the fused epilogue, the pointer-array batch).
//
// Then the random sweep (perf/sweep.cpp): 300 shapes, log-uniform in 1..4000, against the
// faster peer.
//
//   bench_gemm [--rounds=N] [--threads=1,2] [--quick] [--out=DIR] [--openblas=LIB] [--blis=LIB]
//              [--shapes=LABEL,...]   (only the shapes with these labels, e.g. 512x49x4608,1024)
//              [--sweep=N] [--sweep_seed=S]   (N random shapes, 0: no sweep)
//
// Writes DIR/gemm.md (the table), DIR/gemm.csv (every round), DIR/gemm.png (gnuplot),
// DIR/sweep.md and DIR/sweep.csv (the sweep).
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit.h"
#include "harness.h"
#include "peak.h"
#include "sweep.h"

namespace {

using gkbench::arg;
using gkbench::Library;
using gkbench::median;

struct Shape {
  std::string label;
  int m, n, k;
  CBLAS_TRANSPOSE ta, tb;
};

std::vector<Shape> shapes(bool quick) {
  std::vector<Shape> v;
  std::vector<int> squares = {32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096};
  if (quick) squares = {64, 256, 1024};
  for (int s : squares) v.push_back({std::to_string(s), s, s, s, CblasNoTrans, CblasNoTrans});
  v.push_back({"NT 1024", 1024, 1024, 1024, CblasNoTrans, CblasTrans});
  v.push_back({"TN 1024", 1024, 1024, 1024, CblasTrans, CblasNoTrans});
  // GEMMs that conv layers make (M = output channels, N = output pixels, K = C*R*S).
  v.push_back({"64x3136x576", 64, 3136, 576, CblasNoTrans, CblasNoTrans});
  v.push_back({"256x3136x64", 256, 3136, 64, CblasNoTrans, CblasNoTrans});
  v.push_back({"512x49x4608", 512, 49, 4608, CblasNoTrans, CblasNoTrans});
  v.push_back({"1000x1x512", 1000, 1, 512, CblasNoTrans, CblasNoTrans});
  // The same fully connected layer with its weights stored the other way (the matrix's
  // columns contiguous), and at batch 4 against a 64 MiB matrix: the streamed GEMV paths.
  v.push_back({"TN 1000x1x512", 1000, 1, 512, CblasTrans, CblasNoTrans});
  if (!quick) v.push_back({"4x4096x4096", 4, 4096, 4096, CblasNoTrans, CblasNoTrans});
  if (!quick) v.push_back({"96x12544x32", 96, 12544, 32, CblasNoTrans, CblasNoTrans});
  // Small odd products, where a call's fixed costs count (the tiny path): every tile
  // partial, and one with B transposed.
  if (!quick) v.push_back({"5x5x5", 5, 5, 5, CblasNoTrans, CblasNoTrans});
  if (!quick) v.push_back({"13x17x19", 13, 17, 19, CblasNoTrans, CblasNoTrans});
  if (!quick) v.push_back({"NT 20x20x20", 20, 20, 20, CblasNoTrans, CblasTrans});
  return v;
}

// The shapes whose labels are in the comma-separated `labels` ("" or "1": all).
std::vector<Shape> selected(const std::vector<Shape>& all, const std::string& labels) {
  if (labels.empty() || labels == "1") return all;
  std::vector<Shape> v;
  for (const Shape& s : all)
    if (("," + labels + ",").find("," + s.label + ",") != std::string::npos) v.push_back(s);
  if (v.empty()) std::fprintf(stderr, "bench: no shape labelled %s; running all\n", labels.c_str());
  return v.empty() ? all : v;
}

// Operands for a shape, row-major as the conv GEMMs are, allocated once.
struct Operands {
  std::vector<float> a, b, c;
  int lda, ldb, ldc;
  explicit Operands(const Shape& s) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> d(-1, 1);
    a.resize(size_t(s.m) * s.k);
    b.resize(size_t(s.k) * s.n);
    c.assign(size_t(s.m) * s.n, 0.0f);
    for (float& x : a) x = d(rng);
    for (float& x : b) x = d(rng);
    lda = s.ta == CblasNoTrans ? s.k : s.m;
    ldb = s.tb == CblasNoTrans ? s.n : s.k;
    ldc = s.n;
  }
};

std::string point_name(const Shape& s, int threads, const std::string& lib) {
  std::string label = s.label;
  std::replace(label.begin(), label.end(), ' ', '_');
  return "sgemm/" + label + "/t" + std::to_string(threads) + "/" + lib;
}

// ---- the inference-side API: a pre-packed operand against the same call unpacked, the
// pointer-array batch against loops, the fused epilogue against a second pass. Its own
// interleaved rounds (each group's entries back to back, the order rotating), medians in
// ms; returns the markdown.
std::string inference_table(const std::vector<Library>& libs, const std::vector<int>& thread_counts, int rounds,
                            bool quick) {
  struct Packed {
    std::string label;
    CBLAS_ORDER order;
    int m, n, k;
  };
  std::vector<Packed> packed = {{"64x3136x576", CblasRowMajor, 64, 3136, 576}};
  for (int n : quick ? std::vector<int>{1, 16, 64} : std::vector<int>{1, 2, 4, 8, 16, 32, 64})
    packed.push_back({"1024x" + std::to_string(n) + "x1024", CblasRowMajor, 1024, n, 1024});
  if (!quick) {  // the weight on the other side of the internal problem (NR-wide panels)
    packed.push_back({"col 64x3136x576", CblasColMajor, 64, 3136, 576});
    packed.push_back({"col 1024x16x1024", CblasColMajor, 1024, 16, 1024});
  }
  struct Buffers {
    std::vector<float> a, b, c, bias;
    void* pa = nullptr;
  };
  static std::vector<std::unique_ptr<Buffers>> keep;  // alive while the benchmarks are registered
  std::vector<std::vector<std::string>> groups;
  std::set<std::string> spinners;
  auto name_of = [](const std::string& what, const std::string& label, int t, const std::string& how) {
    std::string l = label;
    std::replace(l.begin(), l.end(), ' ', '_');
    return "inference/" + what + "/" + l + "/t" + std::to_string(t) + "/" + how;
  };
  auto add = [&](const std::string& name, std::function<void()> body, int t, bool spins) {
    groups.back().push_back(name);
    if (spins) spinners.insert(name);
    benchmark::RegisterBenchmark(name.c_str(), [body, t, spins, &libs](benchmark::State& st) {
      (void)spins;
      for (const Library& lib : libs) lib.set_threads(t);
      for (auto _ : st) body();
    })->MinTime(0.1)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (float& x : v) x = dist(rng);
  };
  for (const Packed& p : packed) {
    keep.emplace_back(new Buffers);
    Buffers* d = keep.back().get();
    fill(d->a, size_t(p.m) * p.k), fill(d->b, size_t(p.k) * p.n), fill(d->bias, size_t(std::max(p.m, p.n)));
    d->c.assign(size_t(p.m) * p.n, 0.0f);
    const bool row = p.order == CblasRowMajor;
    const int lda = row ? p.k : p.m, ldb = row ? p.n : p.k, ldc = row ? p.n : p.m;
    const int64_t bytes = gk_sgemm_pack_get_size(GK_PACK_A, p.m, p.n, p.k);
    if (posix_memalign(&d->pa, 64, size_t(bytes)) != 0 ||
        gk_sgemm_pack(p.order, GK_PACK_A, CblasNoTrans, p.m, p.n, p.k, 1.0f, d->a.data(), lda, d->pa, bytes) != GK_OK) {
      std::fprintf(stderr, "bench: gk_sgemm_pack failed: %s\n", gk_last_error());
      continue;
    }
    for (int t : thread_counts) {
      groups.emplace_back();
      for (const Library& lib : libs)
        add(name_of("packed", p.label, t, lib.name), [=] {
          lib.sgemm(p.order, CblasNoTrans, CblasNoTrans, p.m, p.n, p.k, 1.0f, d->a.data(), lda, d->b.data(), ldb, 0.0f,
                    d->c.data(), ldc);
        }, t, lib.spins_after_call);
      add(name_of("packed", p.label, t, "gemmkit-packed"), [=] {
        gk_sgemm_compute(p.order, GK_PACKED, CblasNoTrans, p.m, p.n, p.k, d->pa, 0, d->b.data(), ldb, 0.0f,
                         d->c.data(), ldc, nullptr);
      }, t, false);
      if (p.label != "64x3136x576") continue;
      // The epilogue: bias per row (fused into the kernel), per column (applied to each
      // tile as it is stored), and cblas_sgemm followed by the caller's own pass.
      const gk_epilogue row_bias{d->bias.data(), GK_BIAS_PER_ROW, GK_ACT_RELU};
      const gk_epilogue col_bias{d->bias.data(), GK_BIAS_PER_COLUMN, GK_ACT_RELU};
      const std::pair<const char*, gk_epilogue> epilogues[] = {{"ex-row-bias-relu", row_bias},
                                                               {"ex-col-bias-relu", col_bias}};
      for (const auto& pe : epilogues) {
        const gk_epilogue e = pe.second;
        add(name_of("packed", p.label, t, pe.first), [=] {
          gk_sgemm_ex(p.order, CblasNoTrans, CblasNoTrans, p.m, p.n, p.k, 1.0f, d->a.data(), lda, d->b.data(), ldb,
                      0.0f, d->c.data(), ldc, &e);
        }, t, false);
      }
      add(name_of("packed", p.label, t, "sgemm+pass-row-bias-relu"), [=] {
        cblas_sgemm(p.order, CblasNoTrans, CblasNoTrans, p.m, p.n, p.k, 1.0f, d->a.data(), lda, d->b.data(), ldb, 0.0f,
                    d->c.data(), ldc);
        for (int i = 0; i < p.m; ++i)
          for (int j = 0; j < p.n; ++j) {
            float& v = d->c[size_t(i) * ldc + j];
            v = std::max(v + d->bias[size_t(i)], 0.0f);
          }
      }, t, false);
      add(name_of("packed", p.label, t, "packed-row-bias-relu"), [=] {
        gk_sgemm_compute(p.order, GK_PACKED, CblasNoTrans, p.m, p.n, p.k, d->pa, 0, d->b.data(), ldb, 0.0f,
                         d->c.data(), ldc, &row_bias);
      }, t, false);
    }
  }
  // The pointer-array batch: kProducts products of 32^3 in one group, and of 16^3 and 32^3
  // in two groups, against loops of cblas_sgemm over the same operands.
  constexpr int kProducts = 1000;
  struct Batch {
    std::string label;
    int sizes[2];
  };
  const Batch batches[] = {{"1000x32^3", {32, 32}}, {"500x16^3+500x32^3", {16, 32}}};
  for (const Batch& bt : batches) {
    keep.emplace_back(new Buffers);
    Buffers* d = keep.back().get();
    const int64_t step = 32 * 32;
    fill(d->a, size_t(kProducts * step)), fill(d->b, size_t(kProducts * step));
    d->c.assign(size_t(kProducts * step), 0.0f);
    auto* ptrs = new std::vector<const float*>[2];  // kept for the process's life, as `keep`
    auto* cps = new std::vector<float*>;
    for (int i = 0; i < kProducts; ++i) {
      ptrs[0].push_back(d->a.data() + i * step), ptrs[1].push_back(d->b.data() + i * step);
      cps->push_back(d->c.data() + i * step);
    }
    const Batch b = bt;
    for (int t : thread_counts) {
      groups.emplace_back();
      for (const Library& lib : libs)
        add(name_of("batch", b.label, t, lib.name + "-loop"), [=] {
          for (int i = 0; i < kProducts; ++i) {
            const int s = b.sizes[i * 2 / kProducts];
            lib.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, ptrs[0][size_t(i)], s,
                      ptrs[1][size_t(i)], s, 0.0f, (*cps)[size_t(i)], s);
          }
        }, t, lib.spins_after_call);
      add(name_of("batch", b.label, t, "gemmkit-batch"), [=] {
        const CBLAS_TRANSPOSE tr[] = {CblasNoTrans, CblasNoTrans};
        const bool one = b.sizes[0] == b.sizes[1];  // one group of kProducts, else two halves
        const int64_t sz[] = {b.sizes[0], b.sizes[1]}, size[] = {one ? kProducts : kProducts / 2, kProducts / 2};
        const float alpha[] = {1.0f, 1.0f}, beta[] = {0.0f, 0.0f};
        gk_sgemm_batch(CblasRowMajor, tr, tr, sz, sz, sz, alpha, ptrs[0].data(), sz, ptrs[1].data(), sz, beta,
                       cps->data(), sz, one ? 1 : 2, size);
      }, t, false);
    }
  }
  const std::map<std::string, std::vector<double>> samples = gkbench::run_interleaved(groups, rounds, spinners);
  auto ms = [&](const std::string& name) {
    const auto it = samples.find(name);
    return it == samples.end() || it->second.empty() ? 0.0 : median(it->second) * 1e3;
  };
  std::ostringstream out;
  char row[320];
  out << "\n## Pre-packed A: gk_sgemm_compute against the same cblas_sgemm unpacked (ms per call, median of "
      << rounds << " rounds)\n\n| shape (MxNxK) | threads | gemmkit unpacked | OpenBLAS | gemmkit packed A | "
      << "unpacked / packed |\n|---|---|---|---|---|---|\n";
  for (const Packed& p : packed)
    for (int t : thread_counts) {
      const double own = ms(name_of("packed", p.label, t, "gemmkit")), ob = ms(name_of("packed", p.label, t, "openblas"));
      const double pk = ms(name_of("packed", p.label, t, "gemmkit-packed"));
      std::snprintf(row, sizeof row, "| %s | %d | %.3f | %.3f | %.3f | %.2f |\n", p.label.c_str(), t, own, ob, pk,
                    pk > 0 ? own / pk : 0.0);
      out << row;
    }
  out << "\n## Epilogue on 64x3136x576: bias + ReLU (ms per call, median)\n\n| threads | sgemm alone | "
      << "gk_sgemm_ex row bias | gk_sgemm_ex column bias | sgemm + a bias pass | packed A + row bias |\n"
      << "|---|---|---|---|---|---|\n";
  for (int t : thread_counts) {
    auto m = [&](const char* how) { return ms(name_of("packed", "64x3136x576", t, how)); };
    std::snprintf(row, sizeof row, "| %d | %.3f | %.3f | %.3f | %.3f | %.3f |\n", t, m("gemmkit"), m("ex-row-bias-relu"),
                  m("ex-col-bias-relu"), m("sgemm+pass-row-bias-relu"), m("packed-row-bias-relu"));
    out << row;
  }
  out << "\n## Pointer-array batch: gk_sgemm_batch against loops of cblas_sgemm (ms per batch, median)\n\n"
      << "| products | threads | gemmkit batch | gemmkit loop | OpenBLAS loop | speedup over the faster loop |\n"
      << "|---|---|---|---|---|---|\n";
  for (const Batch& b : batches)
    for (int t : thread_counts) {
      const double bat = ms(name_of("batch", b.label, t, "gemmkit-batch"));
      const double own = ms(name_of("batch", b.label, t, "gemmkit-loop")), ob = ms(name_of("batch", b.label, t, "openblas-loop"));
      const double faster = ob > 0 ? std::min(own, ob) : own;
      std::snprintf(row, sizeof row, "| %s | %d | %.3f | %.3f | %.3f | %.2f |\n", b.label.c_str(), t, bat, own, ob,
                    bat > 0 ? faster / bat : 0.0);
      out << row;
    }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = arg(argc, argv, "quick", "") == "1";
  const int rounds = std::stoi(arg(argc, argv, "rounds", quick ? "2" : "7"));
  const std::string out_dir = arg(argc, argv, "out", "build/bench");
  const std::string openblas_path = arg(argc, argv, "openblas", "libopenblas.so.0");
  const std::string blis_path = arg(argc, argv, "blis", "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4");
  const std::vector<int> thread_counts = gkbench::thread_list(argc, argv);
  const std::string load_at_start = gkbench::load_average();

  std::vector<Library> libs = {{"gemmkit", cblas_sgemm, gk_set_num_threads, false}};
  const gkbench::OpenBlas openblas = gkbench::load_openblas(openblas_path);
  const std::string openblas_core = openblas.description;
  if (openblas.ok()) {
    libs.push_back({"openblas", openblas.sgemm, openblas.set_threads, true});
  } else {
    std::fprintf(stderr, "bench: OpenBLAS %s; its columns show -\n", openblas_core.c_str());
  }
  const gkbench::Blis blis = gkbench::load_blis(blis_path);
  if (blis.ok()) {
    libs.push_back({"blis", blis.sgemm, blis.set_threads, false});
  } else {
    std::fprintf(stderr, "bench: BLIS %s (Debian: apt-get install libblis4-openmp); its columns show -\n",
                 blis.description.c_str());
  }

  std::map<int, double> peak;  // threads -> GFLOP/s of the widest FMA the CPU has
  double peak256_1 = gkbench::measure_fma_peak_gflops(256, 1);
  double peak512_1 = gkbench::measure_fma_peak_gflops(512, 1);
  for (int t : thread_counts)
    peak[t] = std::max(gkbench::measure_fma_peak_gflops(256, t), gkbench::measure_fma_peak_gflops(512, t));

  const std::vector<Shape> all_shapes = selected(shapes(quick), arg(argc, argv, "shapes", ""));
  std::vector<std::unique_ptr<Operands>> data;
  for (const Shape& s : all_shapes) data.emplace_back(new Operands(s));

  for (size_t si = 0; si < all_shapes.size(); ++si)
    for (int t : thread_counts)
      for (const Library& lib : libs) {
        const Shape s = all_shapes[si];
        Operands* d = data[si].get();
        benchmark::RegisterBenchmark(point_name(s, t, lib.name).c_str(),
                                     [s, d, t, lib](benchmark::State& st) {
                                       lib.set_threads(t);
                                       for (auto _ : st)
                                         lib.sgemm(CblasRowMajor, s.ta, s.tb, s.m, s.n, s.k, 1.0f,
                                                   d->a.data(), d->lda, d->b.data(), d->ldb,
                                                   0.0f, d->c.data(), d->ldc);
                                       st.counters["GFLOPS"] = benchmark::Counter(
                                           2.0 * s.m * s.n * s.k * 1e-9,
                                           benchmark::Counter::kIsIterationInvariantRate);
                                     })
            ->MinTime(0.1)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
  // The strided batch (gk_sgemm_batch_strided) of kBatch products of each size against a
  // loop of cblas_sgemm calls over the same operands, gemmkit's and OpenBLAS's.
  constexpr int kBatch = 1000;
  const int batch_sizes[] = {16, 32};
  std::vector<std::unique_ptr<Operands>> batch_data;
  std::vector<std::vector<std::string>> batch_groups;
  auto batch_name = [](int size, int t, const std::string& how) {
    return "batch/" + std::to_string(kBatch) + "x" + std::to_string(size) + "^3/t" + std::to_string(t) + "/" + how;
  };
  for (int size : batch_sizes) {
    // kBatch products' A, B and C back to back: product i's at i * size^2.
    batch_data.emplace_back(new Operands({"batch", size * kBatch, size, size, CblasNoTrans, CblasNoTrans}));
    Operands* d = batch_data.back().get();
    d->b = d->a;
    d->c.assign(d->a.size(), 0.0f);
    for (int t : thread_counts) {
      batch_groups.emplace_back();
      for (const Library& lib : libs) {
        if (lib.name == "blis") continue;  // the batch table's loops: gemmkit's and OpenBLAS's
        const std::string name = batch_name(size, t, lib.name + "-loop");
        batch_groups.back().push_back(name);
        benchmark::RegisterBenchmark(name.c_str(), [size, d, t, lib](benchmark::State& st) {
          lib.set_threads(t);
          const int64_t step = int64_t(size) * size;
          for (auto _ : st)
            for (int i = 0; i < kBatch; ++i)
              lib.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, d->a.data() + i * step,
                        size, d->b.data() + i * step, size, 0.0f, d->c.data() + i * step, size);
        })->MinTime(0.1)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
      const std::string name = batch_name(size, t, "gemmkit-batch");
      batch_groups.back().push_back(name);
      benchmark::RegisterBenchmark(name.c_str(), [size, d, t](benchmark::State& st) {
        gk_set_num_threads(t);
        const int64_t step = int64_t(size) * size;
        for (auto _ : st)
          gk_sgemm_batch_strided(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, d->a.data(), size,
                                 step, d->b.data(), size, step, 0.0f, d->c.data(), size, step, kBatch);
      })->MinTime(0.1)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);

  // samples[name] = seconds per call, one per round; capacity[group][round] = the FMA
  // capacity of the group's threads probed before and after it, averaged.
  std::vector<std::vector<std::string>> groups;
  std::vector<int> group_threads;
  std::set<std::string> spinners;
  for (const Shape& s : all_shapes)
    for (int t : thread_counts) {
      groups.emplace_back();
      group_threads.push_back(t);
      for (const Library& lib : libs) {
        groups.back().push_back(point_name(s, t, lib.name));
        if (lib.spins_after_call) spinners.insert(point_name(s, t, lib.name));
      }
    }
  std::vector<std::vector<double>> capacity(groups.size(), std::vector<double>(rounds, 0.0));
  double probe_before = 0;
  auto probe = [&](size_t g, int r, bool after) {
    const double cap = gkbench::probe_fma_capacity_gflops(group_threads[g]);
    if (!after) probe_before = cap;
    else capacity[g][r] = 0.5 * (probe_before + cap);
  };
  std::map<std::string, std::vector<double>> samples = gkbench::run_interleaved(groups, rounds, spinners, probe);
  for (const auto& g : batch_groups)
    for (const std::string& name : g)
      if (name.find("openblas") != std::string::npos) spinners.insert(name);
  std::map<std::string, std::vector<double>> batch_samples =
      gkbench::run_interleaved(batch_groups, rounds, spinners);

  // ---- report
  std::string cmd = "mkdir -p '" + out_dir + "'";
  if (std::system(cmd.c_str()) != 0) return 1;
  std::ofstream csv(out_dir + "/gemm.csv"), md(out_dir + "/gemm.md"), dat(out_dir + "/gemm.dat");
  csv << "shape,m,n,k,threads,library,round,seconds,gflops,fma_cap\n";
  std::ostringstream table;
  table << "# gemmkit vs OpenBLAS and BLIS sgemm (row-major, alpha=1, beta=0)\n\n"
        << "- gemmkit: " << gk_config_string() << "\n"
        << "- OpenBLAS: " << openblas_core << "\n"
        << "- BLIS: " << blis.description << "\n"
        << "- measured FMA peak, 1 thread: " << std::lround(peak256_1) << " GFLOP/s (AVX2)"
        << (peak512_1 > 0 ? ", " + std::to_string(std::lround(peak512_1)) + " (AVX-512)" : std::string());
  for (const auto& [t, gflops] : peak)
    if (t > 1) table << "; " << t << " threads: " << std::lround(gflops);
  table << " (each thread's rate, summed: the % peak column)\n"
        << "- cap: the FMA capacity of the point's threads, probed just before and just after it in each "
        << "round (median over rounds, GFLOP/s); % cap: the median over rounds of GFLOP/s / that round's cap\n- "
        << rounds << " rounds, libraries interleaved point by point; ratios are gemmkit's median GFLOP/s "
        << "over the peer's; \"faster\": over the faster of OpenBLAS and BLIS\n"
        << "- load average (1, 5, 15 min) at the start: " << load_at_start << "; after the table: "
        << gkbench::load_average() << " (" << std::thread::hardware_concurrency() << " CPUs)\n\n"
        << "| shape (MxNxK) | threads | cap | gemmkit GFLOP/s (median / best) | % peak | % cap "
        << "| OpenBLAS (median / best) | % cap | BLIS (median / best) | % cap "
        << "| / OpenBLAS | / BLIS | / faster |\n"
        << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  // Columns by library: gemmkit, OpenBLAS, BLIS (absent peers: "-").
  const std::vector<std::string> column_libs = {"gemmkit", "openblas", "blis"};
  std::map<std::string, std::vector<double>> log_ratios;  // "openblas", "blis", "faster"
  std::map<std::string, double> lowest;
  int index = 0;
  for (size_t si = 0; si < all_shapes.size(); ++si) {
    const Shape& s = all_shapes[si];
    for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
      const int t = thread_counts[ti];
      const size_t g = si * thread_counts.size() + ti;
      const double flops = 2.0 * s.m * s.n * s.k;
      double med[3] = {0, 0, 0}, best[3] = {0, 0, 0}, of_cap[3] = {0, 0, 0};
      for (size_t li = 0; li < column_libs.size(); ++li) {
        const std::string name = point_name(s, t, column_libs[li]);
        if (!samples.count(name)) continue;
        std::vector<double> gf, fraction;
        int round = 0;
        for (double sec : samples[name]) {
          gf.push_back(flops / sec * 1e-9);
          const double cap = round < rounds ? capacity[g][round] : 0.0;
          if (cap > 0) fraction.push_back(gf.back() / cap);
          csv << '"' << s.label << "\"," << s.m << ',' << s.n << ',' << s.k << ',' << t << ','
              << column_libs[li] << ',' << round++ << ',' << sec << ',' << gf.back() << ',' << cap << '\n';
        }
        med[li] = median(gf);
        best[li] = gf.empty() ? 0 : *std::max_element(gf.begin(), gf.end());
        of_cap[li] = median(fraction);
      }
      auto cell = [](double m, double b) {
        char c[64];
        if (m > 0) std::snprintf(c, sizeof c, "%.1f / %.1f", m, b);
        else std::snprintf(c, sizeof c, "-");
        return std::string(c);
      };
      auto percent = [](double f) { return f > 0 ? std::to_string(std::lround(100 * f)) + "%" : std::string("-"); };
      auto ratio_cell = [&](const std::string& key, double peer) {
        if (med[0] <= 0 || peer <= 0) return std::string("-");
        const double r = med[0] / peer;
        log_ratios[key].push_back(std::log(r));
        lowest[key] = lowest.count(key) ? std::min(lowest[key], r) : r;
        char c[32];
        std::snprintf(c, sizeof c, "%.2f", r);
        return std::string(c);
      };
      const double faster = std::max(med[1], med[2]);
      char row[512];
      std::snprintf(row, sizeof row, "| %s (%dx%dx%d) | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    s.label.c_str(), s.m, s.n, s.k, t, median(capacity[g]), cell(med[0], best[0]).c_str(),
                    percent(med[0] / peak[t]).c_str(), percent(of_cap[0]).c_str(), cell(med[1], best[1]).c_str(),
                    percent(of_cap[1]).c_str(), cell(med[2], best[2]).c_str(), percent(of_cap[2]).c_str(),
                    ratio_cell("OpenBLAS", med[1]).c_str(), ratio_cell("BLIS", med[2]).c_str(),
                    ratio_cell("the faster peer", faster).c_str());
      table << row;
      dat << index << " \"" << s.label << "\" " << t;
      for (double m : med) dat << ' ' << (m > 0 ? std::to_string(m) : std::string("NaN"));  // NaN: not loaded
      dat << '\n';
    }
    ++index;
  }
  table << "\n";
  for (const auto& [key, logs] : log_ratios) {
    double sum = 0;
    for (double l : logs) sum += l;
    char line[200];
    std::snprintf(line, sizeof line, "Geometric mean ratio gemmkit / %s: %.3f over %zu points; lowest: %.3f\n",
                  key.c_str(), std::exp(sum / logs.size()), logs.size(), lowest[key]);
    table << line;
  }
  table << "\n## Strided batch: " << kBatch << " products, gk_sgemm_batch_strided against a loop of "
        << "cblas_sgemm calls (ms per batch, median of rounds)\n\n"
        << "| products | threads | gemmkit batch | gemmkit loop | OpenBLAS loop | speedup over the faster loop |\n"
        << "|---|---|---|---|---|---|\n";
  for (int size : batch_sizes)
    for (int t : thread_counts) {
      auto ms = [&](const std::string& how) {
        const std::vector<double>& v = batch_samples[batch_name(size, t, how)];
        return v.empty() ? 0.0 : median(v) * 1e3;
      };
      const double batch = ms("gemmkit-batch"), own = ms("gemmkit-loop"), ob = ms("openblas-loop");
      const double faster = ob > 0 ? std::min(own, ob) : own;
      char row[200];
      std::snprintf(row, sizeof row, "| %dx%d^3 | %d | %.3f | %.3f | %s | %.2f |\n", kBatch, size, t, batch, own,
                    ob > 0 ? std::to_string(ob).substr(0, 5).c_str() : "-", batch > 0 ? faster / batch : 0.0);
      table << row;
    }
  table << inference_table(libs, thread_counts, rounds, quick);
  md << table.str();
  md.close();
  csv.close();
  dat.close();  // gnuplot reads it below
  std::printf("\n%s", table.str().c_str());

  std::ofstream gp(out_dir + "/gemm.gp");
  gp << "set terminal pngcairo size 1400,700\nset output '" << out_dir << "/gemm.png'\n"
     << "set title 'sgemm GFLOP/s (median of rounds): gemmkit vs OpenBLAS and BLIS'\n"
     << "set ylabel 'GFLOP/s'\nset xtics rotate by -45\nset key top left\nset grid ytics\n"
     << "plot";
  for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
    const int t = thread_counts[ti];
    gp << (ti ? "," : "") << " '" << out_dir << "/gemm.dat' using 1:($3==" << t
       << "?$4:1/0):xtic(2) with linespoints title 'gemmkit " << t << "T', '" << out_dir
       << "/gemm.dat' using 1:($3==" << t << "?$5:1/0) with linespoints dt 2 title 'OpenBLAS " << t << "T', '"
       << out_dir << "/gemm.dat' using 1:($3==" << t << "?$6:1/0) with linespoints dt 3 title 'BLIS " << t << "T'";
  }
  gp << '\n';
  gp.close();
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    std::string plot = "gnuplot '" + out_dir + "/gemm.gp' 2>/dev/null";
    if (std::system(plot.c_str()) == 0) std::printf("plot: %s/gemm.png\n", out_dir.c_str());
  }
  std::printf("table: %s/gemm.md, samples: %s/gemm.csv\n", out_dir.c_str(), out_dir.c_str());

  // The random sweep: 300 shapes by default (60, shorter and smaller, with --quick); none
  // with --sweep=0, nor when --shapes chose shapes unless --sweep=N asks for it too.
  gkbench::SweepOptions sweep;
  const std::string sweep_arg = arg(argc, argv, "sweep", arg(argc, argv, "shapes", "").empty() ? "default" : "0");
  if (quick) sweep.shapes = 60, sweep.min_seconds = 0.005, sweep.max_gflop = 1.0;
  if (sweep_arg != "default" && sweep_arg != "1") sweep.shapes = std::stoi(sweep_arg);
  sweep.seed = std::stoull(arg(argc, argv, "sweep_seed", std::to_string(sweep.seed)));
  sweep.threads = thread_counts;
  sweep.out_dir = out_dir;
  if (sweep.shapes > 0) {
    std::printf("\n%s", gkbench::run_sweep(libs, sweep).c_str());
    std::printf("sweep: %s/sweep.md, points: %s/sweep.csv\n", out_dir.c_str(), out_dir.c_str());
  }
  return 0;
}
