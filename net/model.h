// A network as gk-infer runs it: a list of operations over numbered tensors, read from the
// model file that scripts/export_torchvision.py writes. The file format (version 1):
//
//   gknet 1                                   first line
//   name resnet18                             free text, one word
//   input 3 224 224                           tensor 0: channels, height, width (per image)
//   <op> key=value ...                        one line per operation (below), in run order
//   <raw little-endian float32 data>          right after the line of an op that has weights
//   output T                                  the logits: a flat tensor (fc or flatten)
//   end
//
// Operations (tensor numbers are assigned in order: each op's outputs are the next unused
// numbers, listed in out=; inputs must already exist):
//   conv in=A out=B oc= kh= kw= sh= sw= pt= pl= pb= pr= dh= dw= groups= act=none|relu|relu6
//        [add=T] bias=0|1          then oc*(c/groups)*kh*kw weights (OIHW), then oc biases
//        add=T: output = act(conv + bias + T), T of the output's shape (the residual join)
//   maxpool|avgpool in=A out=B kh= kw= sh= sw= pt= pl= pb= pr= ceil=0|1 [count_pad=0|1]
//   gap in=A out=B                            global average pooling to C x 1 x 1
//   add in=A,B out=C act=none|relu|relu6
//   concat in=A,B,... out=C
//   split in=A out=B,C,... channels=c1,c2,...
//   shuffle in=A out=B groups=G
//   flatten in=A out=B                        C x H x W -> C*H*W features (PyTorch order)
//   fc in=A out=B features=F act=none|relu|relu6 bias=0|1   then F x in weights, F biases
//
// Loading validates everything a malformed or truncated file could get wrong (syntax,
// ranges, shapes of every tensor, data lengths) and reports the line that is wrong.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gemmkit.h"

namespace gknet {

// ConcatShuffle and ConcatShuffleSplit are never read from a file: the runner fuses a
// concat and a shuffle into the one, and that and the split reading it into the other.
enum class OpKind {
  Conv, MaxPool, AvgPool, GlobalAvgPool, Add, Concat, Split, Shuffle, Flatten, FullyConnected, ConcatShuffle,
  ConcatShuffleSplit
};
constexpr int kOpKinds = int(OpKind::ConcatShuffleSplit) + 1;

// A tensor's per-image shape; `flat` tensors are feature vectors (c features, h = w = 1).
struct TensorShape {
  int64_t c = 0, h = 0, w = 0;
  bool flat = false;
};

struct Op {
  OpKind kind = OpKind::Conv;
  int line = 0;  // in the model file, for messages
  std::vector<int> in, out;
  gk_conv_desc conv{};   // Conv: everything but batch, layout and flags (set per run)
  int residual = -1;     // Conv: the tensor added before the activation (add=T)
  gk_pool_desc pool{};   // MaxPool, AvgPool
  gk_activation act = GK_ACT_NONE;
  int64_t groups = 1;                 // Shuffle, ConcatShuffle, ConcatShuffleSplit
  std::vector<int64_t> channels;      // Split, ConcatShuffleSplit
  int64_t features = 0;               // FullyConnected: out features
  std::vector<float> weights, bias;   // Conv, FullyConnected (bias empty when none)
};

struct Model {
  std::string name;
  std::vector<TensorShape> tensors;  // tensor 0 is the input
  std::vector<Op> ops;
  int output = -1;
};

// Reads and validates a model file. false with a message ("model.gk line 12: ...") when
// the file is missing, malformed, truncated or inconsistent.
bool load_model(const std::string& path, Model* model, std::string* error);

const char* op_name(OpKind kind);

}  // namespace gknet
