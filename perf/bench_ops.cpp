// Network operations on the shapes of ShuffleNetV2 x1.0 and ResNet-18 (batch 1, 224x224):
// channel concat / split / shuffle, and for reference max pooling 3x3/2, add (in place,
// with ReLU) and global average pooling, in NCHW8, NCHW and NHWC. Each op is timed next to a
// memcpy that moves the same bytes (half its traffic copied: as many read and written), in
// the same interleaved rounds (the order rotating by round): these ops move memory, so the
// memcpy rate is the bar. Reports medians (ms, GB/s of the op's traffic, op / memcpy), and
// per-network totals of the channel ops (time x how often the shape occurs).
//
// Timing on a shared VM is noisy: the rounds interleave op and memcpy so that both see the
// same phases; compare the ratio more than the milliseconds.
//
//   bench_ops [--rounds=N] [--min-time=S] [--threads=1,2] [--out=DIR]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "common/aligned_vector.h"
#include "gemmkit.h"
#include "harness.h"

namespace {

using gkbench::arg;
using gkbench::median;
using Tensor = gk::aligned_vector<float>;

// The layouts every op is timed in: the blocked one, and the two plain ones.
constexpr gk_layout kLayouts[] = {GK_LAYOUT_NCHW8, GK_LAYOUT_NCHW, GK_LAYOUT_NHWC};
const char* layout_name(gk_layout l) {
  return l == GK_LAYOUT_NCHW ? "NCHW" : l == GK_LAYOUT_NHWC ? "NHWC" : "NCHW8";
}

Tensor random_tensor(const gk_tensor_desc& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor nchw(size_t(t.n * t.c * t.h * t.w)), v(size_t(gk_tensor_size(t.layout, t.n, t.c, t.h, t.w)));
  for (float& f : nchw) f = dist(rng);
  gk_convert_layout(nchw.data(), GK_LAYOUT_NCHW, v.data(), t.layout, t.n, t.c, t.h, t.w);
  return v;
}

int64_t floats(const gk_tensor_desc& t) { return gk_tensor_size(t.layout, t.n, t.c, t.h, t.w); }

// One op on one shape and layout, its tensors allocated: run() is the timed call.
struct Point {
  std::string net, op, shape;
  int count;  // occurrences in the network
  gk_layout layout;
  double bytes = 0;  // read + written
  std::vector<Tensor> tensors;
  std::function<gk_status()> run;
};

gk_tensor_desc tensor(int64_t c, int64_t hw, gk_layout l) { return {1, c, hw, hw, l}; }

std::unique_ptr<Point> new_point(const std::string& net, const std::string& op, const std::string& shape, int count,
                                 gk_layout l) {
  auto p = std::make_unique<Point>();
  p->net = net, p->op = op, p->shape = shape, p->count = count, p->layout = l;
  return p;
}

std::string shape_name(const std::string& channels, int64_t hw) {
  return channels + "x" + std::to_string(hw) + "x" + std::to_string(hw);
}

// Concat of two halves of c / 2 channels (ShuffleNetV2's units end this way).
std::unique_ptr<Point> concat_point(int64_t c, int64_t hw, int count, gk_layout l) {
  const gk_tensor_desc out = tensor(c, hw, l), half = tensor(c / 2, hw, l);
  const std::string halves = std::to_string(c / 2) + "+" + std::to_string(c / 2);
  auto p = new_point("shufflenet_v2", "concat", shape_name(halves, hw), count, l);
  p->tensors = {random_tensor(half, 1), random_tensor(half, 2), Tensor(size_t(floats(out)))};
  p->bytes = 4.0 * double(2 * floats(half) + floats(out));
  Point* q = p.get();
  p->run = [q, out, half] {
    const gk_tensor_desc parts[2] = {half, half};
    const float* xs[2] = {q->tensors[0].data(), q->tensors[1].data()};
    return gk_concat_channels(2, parts, xs, &out, q->tensors[2].data());
  };
  return p;
}

// Split into two halves (ShuffleNetV2's basic units begin this way).
std::unique_ptr<Point> split_point(int64_t c, int64_t hw, int count, gk_layout l) {
  const gk_tensor_desc in = tensor(c, hw, l), half = tensor(c / 2, hw, l);
  auto p = new_point("shufflenet_v2", "split", shape_name(std::to_string(c), hw), count, l);
  p->tensors = {random_tensor(in, 3), Tensor(size_t(floats(half))), Tensor(size_t(floats(half)))};
  p->bytes = 4.0 * double(floats(in) + 2 * floats(half));
  Point* q = p.get();
  p->run = [q, in, c] {
    const int64_t channels[2] = {c / 2, c / 2};
    float* ys[2] = {q->tensors[1].data(), q->tensors[2].data()};
    return gk_split_channels(&in, q->tensors[0].data(), 2, channels, ys);
  };
  return p;
}

std::unique_ptr<Point> shuffle_point(int64_t c, int64_t hw, int count, gk_layout l) {
  const gk_tensor_desc t = tensor(c, hw, l);
  auto p = new_point("shufflenet_v2", "shuffle", shape_name(std::to_string(c), hw) + " g2", count, l);
  p->tensors = {random_tensor(t, 4), Tensor(size_t(floats(t)))};
  p->bytes = 4.0 * double(2 * floats(t));
  Point* q = p.get();
  p->run = [q, t] { return gk_channel_shuffle(&t, 2, q->tensors[0].data(), q->tensors[1].data()); };
  return p;
}

// Max pooling 3x3, stride 2, pad 1 (both networks' stems).
std::unique_ptr<Point> maxpool_point(const std::string& net, int64_t c, int64_t hw, gk_layout l) {
  const gk_tensor_desc in = tensor(c, hw, l), out = tensor(c, hw / 2, l);
  auto p = new_point(net, "maxpool 3x3/2", shape_name(std::to_string(c), hw), 1, l);
  p->tensors = {random_tensor(in, 5), Tensor(size_t(floats(out)))};
  p->bytes = 4.0 * double(floats(in) + floats(out));
  Point* q = p.get();
  p->run = [q, in] {
    gk_pool_desc pool = {};
    pool.kind = GK_POOL_MAX;
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride_h = pool.stride_w = 2;
    pool.pad_top = pool.pad_bottom = pool.pad_left = pool.pad_right = 1;
    return gk_pool2d(&in, &pool, q->tensors[0].data(), q->tensors[1].data());
  };
  return p;
}

// ResNet's residual join relu(x + shortcut), in place as the network runs it.
std::unique_ptr<Point> add_point(int64_t c, int64_t hw, int count, gk_layout l) {
  const gk_tensor_desc t = tensor(c, hw, l);
  auto p = new_point("resnet18", "add+relu", shape_name(std::to_string(c), hw), count, l);
  p->tensors = {random_tensor(t, 6), random_tensor(t, 7)};
  p->bytes = 4.0 * double(3 * floats(t));
  Point* q = p.get();
  p->run = [q, t] {
    return gk_add(&t, q->tensors[0].data(), q->tensors[1].data(), q->tensors[0].data(), GK_ACT_RELU);
  };
  return p;
}

std::unique_ptr<Point> gap_point(const std::string& net, int64_t c, int64_t hw, gk_layout l) {
  const gk_tensor_desc in = tensor(c, hw, l), out = tensor(c, 1, l);
  auto p = new_point(net, "global avg pool", shape_name(std::to_string(c), hw), 1, l);
  p->tensors = {random_tensor(in, 8), Tensor(size_t(floats(out)))};
  p->bytes = 4.0 * double(floats(in) + floats(out));
  Point* q = p.get();
  p->run = [q, in] { return gk_global_avg_pool(&in, q->tensors[0].data(), q->tensors[1].data()); };
  return p;
}

std::vector<std::unique_ptr<Point>> make_points(gk_layout l) {
  std::vector<std::unique_ptr<Point>> v;
  // ShuffleNetV2 x1.0's stages: 116 channels at 28x28 (4 units, 3 of them basic), 232 at
  // 14x14 (8, 7 basic), 464 at 7x7 (4, 3 basic). Each unit ends in a concat and a shuffle;
  // a basic unit begins with a split.
  const struct {
    int64_t c, hw;
    int units;
  } stages[] = {{116, 28, 4}, {232, 14, 8}, {464, 7, 4}};
  for (const auto& s : stages) v.push_back(concat_point(s.c, s.hw, s.units, l));
  for (const auto& s : stages) v.push_back(split_point(s.c, s.hw, s.units - 1, l));
  for (const auto& s : stages) v.push_back(shuffle_point(s.c, s.hw, s.units, l));
  v.push_back(maxpool_point("shufflenet_v2", 24, 112, l));
  v.push_back(gap_point("shufflenet_v2", 1024, 7, l));
  v.push_back(maxpool_point("resnet18", 64, 112, l));
  const struct {
    int64_t c, hw;
  } joins[] = {{64, 56}, {128, 28}, {256, 14}, {512, 7}};
  for (const auto& j : joins) v.push_back(add_point(j.c, j.hw, 2, l));
  v.push_back(gap_point("resnet18", 512, 7, l));
  return v;
}

// A memcpy of `bytes` on t threads (equal contiguous shares), the reference rate.
struct Memcpy {
  Tensor src, dst;
  explicit Memcpy(double bytes) : src(size_t(bytes / 4), 1.0f), dst(size_t(bytes / 4)) {}
  void run(int threads) {
    const size_t n = src.size();
#pragma omp parallel num_threads(threads)
    {
      const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
      const size_t begin = n * t / nt, end = n * (t + 1) / nt;
      std::memcpy(dst.data() + begin, src.data() + begin, (end - begin) * sizeof(float));
    }
  }
};

std::string point_name(const Point& p, int threads, const char* what) {
  return std::string(what) + "/" + p.net + "/" + p.op + "/" + p.shape + "/" + layout_name(p.layout) + "/t" +
         std::to_string(threads);
}

using Samples = std::map<std::string, std::vector<double>>;

// Registers the op and its memcpy as one interleaved group; false if the op fails.
bool register_point(Point* p, Memcpy* mc, int threads, double min_time, std::vector<std::vector<std::string>>* groups) {
  gk_set_num_threads(threads);
  if (p->run() != GK_OK) {
    std::fprintf(stderr, "bench_ops: %s: %s\n", point_name(*p, threads, "op").c_str(), gk_last_error());
    return false;
  }
  auto reg = [&](const std::string& name, std::function<void()> body) {
    benchmark::RegisterBenchmark(name.c_str(), [body](benchmark::State& st) {
      body();  // untimed: the first run pages the output in
      for (auto _ : st) body();
    })->MinTime(min_time)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  reg(point_name(*p, threads, "op"), [p, threads] {
    gk_set_num_threads(threads);
    p->run();  // checked above
  });
  reg(point_name(*p, threads, "memcpy"), [mc, threads] { mc->run(threads); });
  groups->push_back({point_name(*p, threads, "op"), point_name(*p, threads, "memcpy")});
  return true;
}

// Per-shape rows (markdown and CSV), and the channel ops' per-network total of one layout
// and thread count.
std::string report_layout(const std::vector<std::unique_ptr<Point>>& points, Samples& samples, gk_layout l, int t,
                          std::ostringstream* table, std::ostringstream* csv) {
  double concat = 0, split = 0, shuffle = 0, copy = 0;
  char buf[512];
  for (const auto& p : points) {
    if (p->layout != l) continue;
    const double op_s = median(samples[point_name(*p, t, "op")]), mc_s = median(samples[point_name(*p, t, "memcpy")]);
    const double op_gbps = p->bytes / op_s * 1e-9, mc_gbps = p->bytes / mc_s * 1e-9;
    std::snprintf(buf, sizeof buf, "| %s | %s | %s | %s | %d | %.4f | %.1f | %.4f | %.1f | %.2f |\n", p->net.c_str(),
                  p->op.c_str(), p->shape.c_str(), layout_name(l), t, op_s * 1e3, op_gbps, mc_s * 1e3, mc_gbps,
                  op_s / mc_s);
    *table << buf;
    *csv << p->net << "," << p->op << "," << p->shape << "," << layout_name(l) << "," << t << "," << p->count << ","
         << p->bytes << "," << op_s * 1e3 << "," << op_gbps << "," << mc_s * 1e3 << "," << mc_gbps << "\n";
    double* sum = p->op == "concat" ? &concat : p->op == "split" ? &split : p->op == "shuffle" ? &shuffle : nullptr;
    if (!sum) continue;
    *sum += op_s * p->count;
    copy += mc_s * p->count;
  }
  std::snprintf(buf, sizeof buf, "| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f |\n", layout_name(l), t, concat * 1e3,
                split * 1e3, shuffle * 1e3, (concat + split + shuffle) * 1e3, copy * 1e3);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = std::stoi(arg(argc, argv, "rounds", "7"));
  const double min_time = std::stod(arg(argc, argv, "min-time", "0.02"));  // seconds per run
  const std::string out_dir = arg(argc, argv, "out", "build/bench");
  const std::vector<int> thread_counts = gkbench::thread_list(argc, argv);

  std::vector<std::unique_ptr<Point>> points;
  for (gk_layout l : kLayouts)
    for (auto& p : make_points(l)) points.push_back(std::move(p));
  std::vector<std::unique_ptr<Memcpy>> copies;
  std::vector<std::vector<std::string>> groups;
  for (int t : thread_counts)
    for (auto& p : points) {
      copies.emplace_back(new Memcpy(p->bytes / 2));
      if (!register_point(p.get(), copies.back().get(), t, min_time, &groups)) return 1;
    }
  benchmark::Initialize(&argc, argv);
  Samples samples = gkbench::run_interleaved(groups, rounds, {});

  if (std::system(("mkdir -p '" + out_dir + "'").c_str()) != 0) return 1;
  std::ostringstream table, csv, totals;
  csv << "net,op,shape,layout,threads,count,bytes,op_ms,op_gbps,memcpy_ms,memcpy_gbps\n";
  table << "| net | op | shape | layout | threads | ms | GB/s | memcpy ms | memcpy GB/s | op / memcpy |\n"
        << "|---|---|---|---|---|---|---|---|---|---|\n";
  totals << "| layout | threads | concat ms | split ms | shuffle ms | together ms | memcpy of the same bytes ms |\n"
         << "|---|---|---|---|---|---|---|\n";
  for (int t : thread_counts)
    for (gk_layout l : kLayouts) totals << report_layout(points, samples, l, t, &table, &csv);
  std::ostringstream report;
  report << "# Network operations against memcpy (medians of " << rounds << " interleaved rounds)\n\n"
         << "## ShuffleNetV2 x1.0's channel operations per forward pass (time x count)\n\n"
         << totals.str() << "\n## Per shape\n\n"
         << table.str();
  std::printf("\n%s", report.str().c_str());
  std::printf("tables: %s/ops.md, medians: %s/ops.csv\n", out_dir.c_str(), out_dir.c_str());
  std::ofstream(out_dir + "/ops.md") << report.str();
  std::ofstream(out_dir + "/ops.csv") << csv.str();
  return 0;
}
