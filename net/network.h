// A model made runnable: one convolution plan per conv, the other operations as gemmkit
// calls, and the tensors' memory. A client of the public C API only (no library internals),
// as an inference engine built on gemmkit would be.
//
// A batch on one thread: the first operations, whose activations outweigh their weights,
// run image by image, so that one image's tensors stay in the caches from op to op; the
// rest runs on the whole batch, which reads each weight once for all its images
// (docs/design.md, "Whole networks").
//
// Memory: tensors share buffers by liveness (a buffer is reused once every reader of its
// tensor has run), which keeps the working set small; a residual join takes over its
// shortcut's buffer when the conv is the shortcut's last reader (the conv then adds in
// place, GK_CONV_FLAG_ADD_TO_OUTPUT), and so does an add of its first dying operand, where
// both hold as many images (one in the head, else the batch).
// Everything is allocated when the network is built: a run allocates nothing of its own.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gemmkit.h"
#include "net/model.h"

namespace gknet {

struct BuildOptions {
  gk_layout layout = GK_LAYOUT_NCHW8;  // of every image tensor after the input
  gk_conv_algo algo = GK_CONV_ALGO_AUTO;
  uint32_t conv_flags = 0;  // e.g. GK_CONV_FLAG_HIGH_ACCURACY
  // Of a batch of more than one image, how many of the first operations run image by image
  // (each image through all of them in turn) before the rest runs on the whole batch: -1
  // chooses (Network::Impl::choose_head), 0 runs every operation on the whole batch.
  int64_t image_by_image_ops = -1;
};

// Seconds spent per kind of operation in one run (when asked for).
struct RunProfile {
  double conv_s = 0, other_s = 0;
  double by_kind_s[kOpKinds] = {};
  std::vector<double> op_s;  // per operation run, in order (describe_ops names them)
};

class Network {
 public:
  Network();
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // Plans every operation of `model` for `batch` images. false with a message on error.
  bool build(const Model& model, int64_t batch, const BuildOptions& options, std::string* error);
  // input: batch x C x H x W floats in NCHW; logits: batch x output features.
  bool run(const float* input, float* logits, std::string* error, RunProfile* profile = nullptr);
  int64_t output_features() const;
  // How many of the first operations run image by image (0 when every one runs on the
  // whole batch), for reports.
  int64_t image_by_image_ops() const;
  // The algorithm each conv runs, in order ("winograd_f43", ...), for reports.
  std::vector<std::string> conv_algorithms() const;
  // The operations a run times in RunProfile::op_s, one line each: kind, model line, output
  // shape, and for convolutions the input channels, kernel, stride (dilation, groups) and
  // algorithm.
  std::vector<std::string> describe_ops() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gknet
