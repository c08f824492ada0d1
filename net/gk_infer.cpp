// gk-infer: runs a whole network exported by scripts/export_torchvision.py on a .npy batch.
//
//   gk-infer MODEL --input IN.npy [--output OUT.npy] [--threads T] [--layout NCHW|NHWC|NCHW8|NCHW16]
//            [--algo auto|fastrun] [--high-accuracy] [--image-by-image-ops K] [--lanes L] [--time]
//            [--time-ops] [--rounds R]
//
// IN.npy: float32 N x C x H x W (the model's C, H, W); OUT.npy: float32 N x classes.
// --time runs the network R more times (default 10) and ends with the line `median_ms=X`,
// after a line of medians per kind of operation (`conv_ms=X maxpool_ms=Y ...`) and the line
// `conv_ms=X other_ms=Y` (the medians of the time in convolutions and in the rest).
// --time-ops: --time, and first one line per operation run with its median milliseconds
// (`op I KIND line L out CxHxW [in C kRxS sT [dD] [gG] ALGO] ms=X`), to find which layer a
// network spends its time in.
// --image-by-image-ops K: in a lane, the first K operations run image by image (0: none; by
// default the runner chooses, gknet::BuildOptions::image_by_image_ops); --time also prints
// the count that ran, `image_by_image_ops=N` (at most the operations run).
// --lanes L (1-1024): a batch runs as L lanes, each a thread taking its share of the images
// through the operations before the classifier (1: the batch as one, each op split between
// the threads; by default min(threads, batch), gknet::BuildOptions::lanes); --time prints
// `lanes=L`.
// Exit status: 0 done, 1 the model, input or a run failed (message on stderr), 2 bad usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gemmkit.h"
#include "net/model.h"
#include "net/network.h"
#include "net/npy.h"

namespace {

struct Args {
  std::string model, input, output;
  int threads = 0;
  gknet::BuildOptions build;
  bool time = false, time_ops = false;
  int rounds = 10;
};

const char kUsage[] =
    "usage: gk-infer MODEL --input IN.npy [--output OUT.npy] [--threads T]\n"
    "                [--layout NCHW|NHWC|NCHW8|NCHW16] [--algo auto|fastrun] [--high-accuracy]\n"
    "                [--image-by-image-ops K] [--lanes L] [--time] [--time-ops] [--rounds R]\n";

bool parse_int(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = int(v);
  return true;
}

bool parse_layout(const std::string& s, gk_layout* layout) {
  const struct { const char* name; gk_layout layout; } kLayouts[] = {
      {"NCHW", GK_LAYOUT_NCHW}, {"NHWC", GK_LAYOUT_NHWC}, {"NCHW4", GK_LAYOUT_NCHW4},
      {"NCHW8", GK_LAYOUT_NCHW8}, {"NCHW16", GK_LAYOUT_NCHW16}};
  for (const auto& l : kLayouts)
    if (s == l.name) return *layout = l.layout, true;
  return false;
}

enum class Parsed { Run, Help, Bad };

Parsed parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    auto value = [&]() { return std::string(argv[++i]); };
    if (arg == "--input" && has_value) a->input = value();
    else if (arg == "--output" && has_value) a->output = value();
    else if (arg == "--threads" && has_value) {
      if (!parse_int(argv[++i], 1, 1024, &a->threads)) return std::fprintf(stderr, "gk-infer: bad --threads\n"), Parsed::Bad;
    } else if (arg == "--rounds" && has_value) {
      if (!parse_int(argv[++i], 1, 100000, &a->rounds)) return std::fprintf(stderr, "gk-infer: bad --rounds\n"), Parsed::Bad;
    } else if (arg == "--image-by-image-ops" && has_value) {
      int k = 0;
      if (!parse_int(argv[++i], 0, 1 << 30, &k)) return std::fprintf(stderr, "gk-infer: bad --image-by-image-ops\n"), Parsed::Bad;
      a->build.image_by_image_ops = k;
    } else if (arg == "--lanes" && has_value) {
      int l = 0;
      if (!parse_int(argv[++i], 1, 1024, &l)) return std::fprintf(stderr, "gk-infer: bad --lanes\n"), Parsed::Bad;
      a->build.lanes = l;
    } else if (arg == "--layout" && has_value) {
      if (!parse_layout(value(), &a->build.layout)) return std::fprintf(stderr, "gk-infer: unknown --layout\n"), Parsed::Bad;
    } else if (arg == "--algo" && has_value) {
      const std::string v = value();
      if (v == "auto") a->build.algo = GK_CONV_ALGO_AUTO;
      else if (v == "fastrun") a->build.algo = GK_CONV_ALGO_FASTRUN;
      else return std::fprintf(stderr, "gk-infer: --algo takes auto or fastrun\n"), Parsed::Bad;
    } else if (arg == "--high-accuracy") a->build.conv_flags |= GK_CONV_FLAG_HIGH_ACCURACY;
    else if (arg == "--time") a->time = true;
    else if (arg == "--time-ops") a->time = a->time_ops = true;
    else if (arg == "--help" || arg == "-h") return std::fputs(kUsage, stdout), Parsed::Help;
    else if (arg.compare(0, 2, "--") != 0 && a->model.empty()) a->model = arg;
    else return std::fprintf(stderr, "gk-infer: unexpected argument '%s'\n%s", arg.c_str(), kUsage), Parsed::Bad;
  }
  if (a->model.empty() || a->input.empty()) return std::fputs(kUsage, stderr), Parsed::Bad;
  return Parsed::Run;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "gk-infer: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  const Parsed parsed = parse_args(argc, argv, &args);
  if (parsed != Parsed::Run) return parsed == Parsed::Help ? 0 : 2;
  if (args.threads > 0) gk_set_num_threads(args.threads);

  std::string error;
  gknet::Model model;
  if (!gknet::load_model(args.model, &model, &error)) return fail(error);
  gknet::NpyArray in;
  if (!gknet::read_npy(args.input, &in, &error)) return fail(error);
  const gknet::TensorShape& image = model.tensors[0];
  if (in.shape.size() != 4 || in.shape[1] != image.c || in.shape[2] != image.h || in.shape[3] != image.w)
    return fail(args.input + ": expected shape (N, " + std::to_string(image.c) + ", " + std::to_string(image.h) +
                ", " + std::to_string(image.w) + ") for model '" + model.name + "'");

  gknet::Network net;
  if (!net.build(model, in.shape[0], args.build, &error)) return fail(error);
  gknet::NpyArray out;
  out.shape = {in.shape[0], net.output_features()};
  out.data.resize(size_t(in.shape[0] * net.output_features()));
  if (!net.run(in.data.data(), out.data.data(), &error)) return fail(error);
  if (!args.output.empty() && !gknet::write_npy(args.output, out, &error)) return fail(error);

  if (args.time) {
    std::vector<double> total, conv, other;
    std::vector<std::vector<double>> by_kind(gknet::kOpKinds), by_op;
    for (int r = 0; r < args.rounds + 1; ++r) {  // one more warm-up after the first run
      gknet::RunProfile p;
      const auto t0 = std::chrono::steady_clock::now();
      if (!net.run(in.data.data(), out.data.data(), &error, &p)) return fail(error);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) continue;
      total.push_back(s * 1e3), conv.push_back(p.conv_s * 1e3), other.push_back(p.other_s * 1e3);
      for (size_t k = 0; k < by_kind.size(); ++k) by_kind[k].push_back(p.by_kind_s[k] * 1e3);
      by_op.resize(p.op_s.size());
      for (size_t i = 0; i < p.op_s.size(); ++i) by_op[i].push_back(p.op_s[i] * 1e3);
    }
    if (args.time_ops) {
      const std::vector<std::string> ops = net.describe_ops();
      for (size_t i = 0; i < by_op.size() && i < ops.size(); ++i)
        std::printf("op %zu %s ms=%.3f\n", i, ops[i].c_str(), median(by_op[i]));
    }
    for (size_t k = 0; k < by_kind.size(); ++k)
      if (median(by_kind[k]) > 0) std::printf("%s_ms=%.3f ", gknet::op_name(gknet::OpKind(k)), median(by_kind[k]));
    std::printf("\n");
    std::printf("conv_ms=%.3f other_ms=%.3f\n", median(conv), median(other));
    std::printf("image_by_image_ops=%lld lanes=%lld\n", static_cast<long long>(net.image_by_image_ops()),
                static_cast<long long>(net.lanes()));
    std::printf("median_ms=%.3f\n", median(total));
  }
  return 0;
}
