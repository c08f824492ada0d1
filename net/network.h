// A model made runnable: one convolution plan per conv, the other operations as gemmkit
// calls, and the tensors' memory. A client of the public C API only (no library internals),
// as an inference engine built on gemmkit would be.
//
// A batch on T threads runs as lanes: each of min(T, batch) threads takes its share of the
// images through the operations before the classifier (the first fc), its calls on one
// thread; the classifier runs on the whole batch. In a lane, the first operations, whose
// activations outweigh their weights, run image by image, so that one image's tensors stay
// in the caches from op to op; the rest runs on all of the lane's images, which reads each
// weight once for all of them (docs/design.md, "Whole networks").
//
// Memory: tensors share buffers by liveness (a buffer is reused once every reader of its
// tensor has run), which keeps the working set small; a residual join takes over its
// shortcut's buffer when the conv is the shortcut's last reader (the conv then adds in
// place, GK_CONV_FLAG_ADD_TO_OUTPUT), and so does an add of its first dying operand, where
// both hold as many images (one image, a lane's, or the batch).
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
  // How many of the first operations run image by image in a lane (each of its images
  // through all of them in turn) before the rest runs on all of its images: below 0
  // chooses (Network::Impl::choose_head), 0 runs none image by image.
  int64_t image_by_image_ops = -1;
  // Threads that each run their own share of a batch's images (a lane, on one thread): below
  // 1 chooses (min(gk_get_num_threads(), batch)); 1 runs the batch as one, each op split
  // between the threads (then no op runs image by image unless asked); more than the
  // threads oversubscribe.
  int64_t lanes = -1;
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
  // With several lanes it plans the lanes' convolutions on one thread through the calling
  // thread's local setting (gk_set_num_threads_local), restored after; other threads'
  // settings are untouched.
  bool build(const Model& model, int64_t batch, const BuildOptions& options, std::string* error);
  // input: batch x C x H x W floats in NCHW; logits: batch x output features.
  bool run(const float* input, float* logits, std::string* error, RunProfile* profile = nullptr);
  int64_t output_features() const;
  // How many of the first operations run image by image in a lane (0: none), for reports.
  int64_t image_by_image_ops() const;
  // How many lanes run the batch (1: the batch as one).
  int64_t lanes() const;
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
