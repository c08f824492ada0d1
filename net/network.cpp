// Building a network: a layout and a buffer for every tensor, a plan for every conv; then
// running the operations in order.
#include "net/network.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace gknet {
namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

float* aligned_floats(int64_t count) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, size_t(std::max<int64_t>(count, 16)) * sizeof(float)) != 0) return nullptr;
  return static_cast<float*>(p);
}

// Channels per block of a layout, from the public API: one channel's padded count.
int64_t channel_block(gk_layout layout) { return gk_tensor_size(layout, 1, 1, 1, 1); }

struct ConvPlan {
  gk_conv_plan* plan = nullptr;
  ~ConvPlan() { gk_conv_plan_destroy(plan); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct Network::Impl {
  const Model* model = nullptr;
  // The operations run, in order: the model's, with each concat + shuffle pair (and the
  // split feeding it a pass-through half, or the split that alone reads its result)
  // replaced by a fused op held in `fused`.
  std::vector<const Op*> ops;
  std::vector<std::unique_ptr<Op>> fused;
  std::vector<std::vector<bool>> skipped;  // per op: outputs not written (a split's fused half)
  int64_t batch = 0;
  BuildOptions options;
  size_t head = 0;                   // ops [0, head) run image by image (choose_head)
  std::vector<bool> whole;           // per tensor: its buffer holds every image, else one
  int64_t image = -1;                // during a run: the image the head runs on, -1 for all
  std::vector<gk_layout> layouts;    // per tensor (flat tensors: NCHW)
  std::vector<int> buffer_of;        // per tensor: index into buffers, -1 for the caller's input
  std::vector<int64_t> capacity;     // per buffer, floats
  std::vector<Buffer> buffers;
  std::vector<std::unique_ptr<ConvPlan>> plans;  // per op (null for non-conv ops)
  std::vector<Buffer> fc_inputs;     // per op: a contiguous copy of a padded fc input, or null
  // Per op, the argument arrays of concat and split, sized once the buffers exist and filled
  // as the op runs (in the head, with the image's part of each tensor).
  std::vector<std::vector<gk_tensor_desc>> part_descs;
  std::vector<std::vector<const float*>> part_inputs;
  std::vector<std::vector<float*>> part_outputs;
  const float* input = nullptr;      // during a run

  int64_t image_floats(int t) const {
    const TensorShape& s = model->tensors[size_t(t)];
    return s.flat ? s.c : gk_tensor_size(layouts[size_t(t)], 1, s.c, s.h, s.w);
  }
  int64_t buffer_floats(int t) const { return (whole[size_t(t)] ? batch : 1) * image_floats(t); }
  // What an op sees during a run: one image in the head, else the batch.
  int64_t images() const { return image < 0 ? batch : 1; }
  int64_t run_floats(int t) const { return images() * image_floats(t); }
  gk_tensor_desc desc(int t) const {
    const TensorShape& s = model->tensors[size_t(t)];
    return {images(), s.c, s.h, s.w, layouts[size_t(t)]};
  }
  int64_t image_offset(int t) const { return image >= 0 && whole[size_t(t)] ? image * image_floats(t) : 0; }
  float* data(int t) const { return buffers[size_t(buffer_of[size_t(t)])].get() + image_offset(t); }
  const float* cdata(int t) const { return buffer_of[size_t(t)] < 0 ? input + image_offset(t) : data(t); }

  // A flat tensor in the layout's memory is a plain batch x features matrix when the
  // channels fill whole blocks (or there are no blocks).
  bool features_in_place(int t) const {
    const TensorShape& s = model->tensors[size_t(t)];
    const gk_layout l = layouts[size_t(t)];
    if (s.flat || l == GK_LAYOUT_NCHW) return true;
    return s.h == 1 && s.w == 1 && s.c % channel_block(l) == 0;
  }

  void fuse_concat_shuffles();
  bool assign_layouts(std::string* error);
  size_t choose_head() const;
  void mark_whole_tensors();
  bool skips(size_t op, size_t output) const;  // whether op's output is not written
  void assign_buffers();
  bool allocate(std::string* error);
  bool make_plans(std::string* error);
  void fill_parts(size_t i);
  bool run_op(size_t i, std::string* error);
  bool run_timed(size_t i, std::string* error, RunProfile* profile);
};

// ShuffleNetV2's unit end, concat then shuffle, as one gk_concat_shuffle_channels (one
// pass over the output instead of two); and where a part is the first half of a split
// read by nothing else (the unit's pass-through half), the fused op reads the split's
// input and the split skips that half (ShuffleNetV2, 1 thread: split + concat + shuffle
// 0.45 ms -> split + fused 0.19 ms). Where the shuffled tensor's one reader is a split
// (the next unit's), gk_concat_shuffle_split_channels writes the split's parts and the
// split is dropped: its copy of the branch half is gone.
void Network::Impl::fuse_concat_shuffles() {
  const size_t tensors = model->tensors.size();
  std::vector<int> readers(tensors, 0), producer(tensors, -1), sole_reader(tensors, -1);
  for (size_t i = 0; i < model->ops.size(); ++i) {
    const Op& op = model->ops[i];
    for (int t : op.in) ++readers[size_t(t)], sole_reader[size_t(t)] = int(i);
    if (op.residual >= 0) ++readers[size_t(op.residual)];
    for (int t : op.out) producer[size_t(t)] = int(i);
  }
  ++readers[size_t(model->output)];
  std::vector<bool> dropped(model->ops.size(), false);
  std::vector<const Op*> replaced(model->ops.size(), nullptr);
  skipped.assign(model->ops.size(), {});
  for (size_t i = 0; i < model->ops.size(); ++i) {
    const Op& shuffle = model->ops[i];
    if (shuffle.kind != OpKind::Shuffle) continue;
    const int t = shuffle.in[0], c = producer[size_t(t)];
    if (c < 0 || readers[size_t(t)] != 1 || model->ops[size_t(c)].kind != OpKind::Concat) continue;
    const Op& concat = model->ops[size_t(c)];
    const int64_t per_group = model->tensors[size_t(t)].c / shuffle.groups;
    if (int64_t(concat.in.size()) != shuffle.groups) continue;
    bool equal = true;
    for (int p : concat.in) equal &= model->tensors[size_t(p)].c == per_group;
    if (!equal) continue;
    std::unique_ptr<Op> f(new Op);
    f->kind = OpKind::ConcatShuffle, f->line = shuffle.line, f->groups = shuffle.groups;
    f->in = concat.in, f->out = shuffle.out;
    for (int& p : f->in) {
      const int s = producer[size_t(p)];
      if (s < 0 || dropped[size_t(s)] || readers[size_t(p)] != 1 || model->ops[size_t(s)].kind != OpKind::Split ||
          model->ops[size_t(s)].out[0] != p)
        continue;
      skipped[size_t(s)].assign(model->ops[size_t(s)].out.size(), false);
      skipped[size_t(s)][0] = true;
      p = model->ops[size_t(s)].in[0];  // its first per_group channels
    }
    const int shuffled = shuffle.out[0], reader = readers[size_t(shuffled)] == 1 ? sole_reader[size_t(shuffled)] : -1;
    if (reader >= 0 && model->ops[size_t(reader)].kind == OpKind::Split) {
      const Op& split = model->ops[size_t(reader)];
      f->kind = OpKind::ConcatShuffleSplit, f->out = split.out, f->channels = split.channels;
      dropped[size_t(reader)] = true;
    }
    dropped[size_t(c)] = true;
    replaced[i] = f.get();
    fused.push_back(std::move(f));
  }
  std::vector<std::vector<bool>> kept_skips;
  for (size_t i = 0; i < model->ops.size(); ++i) {
    if (dropped[i]) continue;
    ops.push_back(replaced[i] ? replaced[i] : &model->ops[i]);
    kept_skips.push_back(skipped[i]);
  }
  skipped = std::move(kept_skips);
}

bool Network::Impl::skips(size_t op, size_t output) const {
  return output < skipped[op].size() && skipped[op][output];
}

// Every image tensor in the chosen layout, except the input, which stays NCHW: the convs
// that read it take GK_CONV_FLAG_NCHW_INPUT (an RGB image is not padded to a block).
bool Network::Impl::assign_layouts(std::string* error) {
  layouts.assign(model->tensors.size(), options.layout);
  layouts[0] = GK_LAYOUT_NCHW;
  for (const Op* o : ops) {
    const Op& op = *o;
    for (int t : op.in)
      if (t == 0 && op.kind != OpKind::Conv) {
        *error = std::string("the input feeds a ") + op_name(op.kind) + "; only convolutions may read it";
        return false;
      }
    if (op.residual == 0) {
      *error = "the input cannot be a conv's add= tensor";
      return false;
    }
  }
  for (size_t t = 0; t < model->tensors.size(); ++t)
    if (model->tensors[t].flat) layouts[t] = GK_LAYOUT_NCHW;
  return true;
}

// Of a batch on one thread, the ops before the first conv whose weights outweigh one image
// of its output (or before the first fc) run image by image: up to there the activations
// are the traffic, and one image's stay in the caches from op to op, where a batch of 8 at
// 112x112 goes to memory between ops; from there the weights are, and the whole batch
// reads each once. On more threads the whole batch splits better than one image's small
// layers (docs/performance.md, "a batch's first layers image by image").
size_t Network::Impl::choose_head() const {
  if (batch == 1) return 0;
  if (options.image_by_image_ops >= 0) return size_t(std::min<int64_t>(options.image_by_image_ops, int64_t(ops.size())));
  if (gk_get_num_threads() > 1) return 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind == OpKind::FullyConnected) return i;
    if (op.kind == OpKind::Conv && int64_t(op.weights.size()) > image_floats(op.out[0])) return i;
  }
  return ops.size();
}

// A tensor made in the head holds one image, unless an op after the head (or the caller)
// reads it: then it holds the batch, each image's pass writing its own part.
void Network::Impl::mark_whole_tensors() {
  whole.assign(model->tensors.size(), head == 0);
  whole[0] = true;
  whole[size_t(model->output)] = true;
  for (size_t i = head; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    for (int t : op.out) whole[size_t(t)] = true;
    for (int t : op.in) whole[size_t(t)] = true;
    if (op.residual >= 0) whole[size_t(op.residual)] = true;
  }
}

// Liveness: a buffer returns to the free list after the last op that reads any tensor in
// it. Outputs are assigned before the op's inputs are released, so an op never writes a
// buffer it reads, except for the aliases chosen on purpose (in-place residual and add,
// flatten of a tensor already in feature order), which keep a buffer's size (one image or
// the batch). A whole tensor made in the head takes a buffer of its own: the next image's
// pass reruns the ops before it, which would write into a buffer it had from them.
void Network::Impl::assign_buffers() {
  const size_t tensors = model->tensors.size();
  // The last op that reads each tensor; an output nobody reads dies where it is made.
  std::vector<size_t> last_use(tensors, 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    for (int t : op.out) last_use[size_t(t)] = i;
    for (int t : op.in) last_use[size_t(t)] = i;
    if (op.residual >= 0) last_use[size_t(op.residual)] = i;
  }
  last_use[size_t(model->output)] = std::numeric_limits<size_t>::max();

  buffer_of.assign(tensors, -1);
  std::vector<int> tenants;  // per buffer: the live tensors it holds
  std::vector<int> free_list;
  const std::vector<int> none;
  auto take = [&](int t, bool fresh) {
    const int64_t need = buffer_floats(t);
    int best = -1;
    for (int b : fresh ? none : free_list)  // the smallest that fits, else the largest (grown)
      if (best < 0 || (capacity[size_t(b)] >= need
                           ? capacity[size_t(best)] < need || capacity[size_t(b)] < capacity[size_t(best)]
                           : capacity[size_t(best)] < need && capacity[size_t(b)] > capacity[size_t(best)]))
        best = b;
    if (best < 0) {
      best = int(capacity.size());
      capacity.push_back(0);
      tenants.push_back(0);
    } else {
      free_list.erase(std::find(free_list.begin(), free_list.end(), best));
    }
    capacity[size_t(best)] = std::max(capacity[size_t(best)], need);
    return best;
  };
  auto share = [&](int t, int from) {  // (callers check can_share)
    buffer_of[size_t(t)] = buffer_of[size_t(from)];
    ++tenants[size_t(buffer_of[size_t(t)])];
  };
  auto dies_here = [&](int t, size_t i) { return t != 0 && last_use[size_t(t)] == i; };
  auto sole_tenant = [&](int t) { return tenants[size_t(buffer_of[size_t(t)])] == 1; };
  auto can_share = [&](int t, int from, size_t i) {
    return dies_here(from, i) && sole_tenant(from) && whole[size_t(t)] == whole[size_t(from)];
  };

  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    const int y = op.out.empty() ? -1 : op.out[0];
    if (op.kind == OpKind::Conv && op.residual >= 0 && op.residual != op.in[0] && can_share(y, op.residual, i)) {
      share(y, op.residual);
    } else if (op.kind == OpKind::Add && can_share(y, op.in[0], i)) {
      share(y, op.in[0]);
    } else if (op.kind == OpKind::Add && can_share(y, op.in[1], i)) {
      share(y, op.in[1]);
    } else if (op.kind == OpKind::Flatten && op.in[0] != 0 && features_in_place(op.in[0]) &&
               whole[size_t(y)] == whole[size_t(op.in[0])]) {
      share(y, op.in[0]);
    } else {
      for (size_t j = 0; j < op.out.size(); ++j) {
        const int t = op.out[j];
        if (skips(i, j)) continue;  // read by nothing
        buffer_of[size_t(t)] = take(t, i < head && whole[size_t(t)]);
        ++tenants[size_t(buffer_of[size_t(t)])];
      }
    }
    std::vector<int> released = op.in;
    if (op.residual >= 0) released.push_back(op.residual);
    released.insert(released.end(), op.out.begin(), op.out.end());
    std::sort(released.begin(), released.end());
    released.erase(std::unique(released.begin(), released.end()), released.end());
    for (int t : released) {
      if (!dies_here(t, i) || buffer_of[size_t(t)] < 0) continue;
      const int b = buffer_of[size_t(t)];
      if (--tenants[size_t(b)] == 0) free_list.push_back(b);
    }
  }
}

bool Network::Impl::allocate(std::string* error) {
  for (int64_t c : capacity) {
    buffers.emplace_back(aligned_floats(c));
    if (!buffers.back()) {
      *error = "out of memory for the network's tensors (" + std::to_string(c * 4) + " bytes)";
      return false;
    }
  }
  fc_inputs.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind != OpKind::FullyConnected || features_in_place(op.in[0])) continue;
    fc_inputs[i].reset(aligned_floats(batch * model->tensors[size_t(op.in[0])].c));
    if (!fc_inputs[i]) return *error = "out of memory for a fully connected input", false;
  }
  part_descs.resize(ops.size()), part_inputs.resize(ops.size()), part_outputs.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind == OpKind::Concat || op.kind == OpKind::ConcatShuffle || op.kind == OpKind::ConcatShuffleSplit)
      part_descs[i].resize(op.in.size()), part_inputs[i].resize(op.in.size());
    if (op.kind == OpKind::Split || op.kind == OpKind::ConcatShuffleSplit) part_outputs[i].resize(op.out.size());
  }
  return true;
}

// The parts of concat and split as this run of op i sees them.
void Network::Impl::fill_parts(size_t i) {
  const Op& op = *ops[i];
  for (size_t j = 0; j < part_inputs[i].size(); ++j)
    part_descs[i][j] = desc(op.in[j]), part_inputs[i][j] = cdata(op.in[j]);
  for (size_t j = 0; j < part_outputs[i].size(); ++j) part_outputs[i][j] = skips(i, j) ? nullptr : data(op.out[j]);
}

bool Network::Impl::make_plans(std::string* error) {
  plans.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind != OpKind::Conv) continue;
    gk_conv_desc d = op.conv;
    d.batch = i < head ? 1 : batch;
    d.layout = options.layout;
    d.flags = options.conv_flags;
    if (op.in[0] == 0 && options.layout != GK_LAYOUT_NCHW) d.flags |= GK_CONV_FLAG_NCHW_INPUT;
    if (op.residual >= 0) d.flags |= GK_CONV_FLAG_ADD_TO_OUTPUT;
    plans[i].reset(new ConvPlan);
    const gk_status s = gk_conv_plan_create(&d, op.weights.data(), op.bias.empty() ? nullptr : op.bias.data(),
                                            options.algo, &plans[i]->plan);
    if (s != GK_OK) {
      *error = "conv on model line " + std::to_string(op.line) + ": " + gk_status_string(s) + ": " + gk_last_error();
      return false;
    }
  }
  return true;
}

bool Network::Impl::run_op(size_t i, std::string* error) {
  const Op& op = *ops[i];
  const int x = op.in[0], y = op.out[0];
  fill_parts(i);
  gk_status s = GK_OK;
  switch (op.kind) {
    case OpKind::Conv:
      if (op.residual >= 0 && buffer_of[size_t(op.residual)] != buffer_of[size_t(y)])
        std::memcpy(data(y), cdata(op.residual), size_t(run_floats(y)) * sizeof(float));
      s = gk_conv_run(plans[i]->plan, cdata(x), data(y));
      break;
    case OpKind::MaxPool:
    case OpKind::AvgPool: {
      const gk_tensor_desc t = desc(x);
      s = gk_pool2d(&t, &op.pool, cdata(x), data(y));
      break;
    }
    case OpKind::GlobalAvgPool: {
      const gk_tensor_desc t = desc(x);
      s = gk_global_avg_pool(&t, cdata(x), data(y));
      break;
    }
    case OpKind::Add: {
      const gk_tensor_desc t = desc(y);
      s = gk_add(&t, cdata(op.in[0]), cdata(op.in[1]), data(y), op.act);
      break;
    }
    case OpKind::Concat: {
      const gk_tensor_desc out = desc(y);
      s = gk_concat_channels(int(op.in.size()), part_descs[i].data(), part_inputs[i].data(), &out, data(y));
      break;
    }
    case OpKind::Split: {
      const gk_tensor_desc in = desc(x);
      s = gk_split_channels(&in, cdata(x), int(op.out.size()), op.channels.data(), part_outputs[i].data());
      break;
    }
    case OpKind::ConcatShuffle: {
      const gk_tensor_desc out = desc(y);
      s = gk_concat_shuffle_channels(op.groups, part_descs[i].data(), part_inputs[i].data(), &out, data(y));
      break;
    }
    case OpKind::ConcatShuffleSplit: {
      // The shuffled tensor, not stored: the parts' channels, the split's pixels and layout.
      gk_tensor_desc shuffled = desc(y);
      shuffled.c = 0;
      for (int64_t c : op.channels) shuffled.c += c;
      s = gk_concat_shuffle_split_channels(op.groups, part_descs[i].data(), part_inputs[i].data(), &shuffled,
                                           int(op.out.size()), op.channels.data(), part_outputs[i].data());
      break;
    }
    case OpKind::Shuffle: {
      const gk_tensor_desc t = desc(x);
      s = gk_channel_shuffle(&t, op.groups, cdata(x), data(y));
      break;
    }
    case OpKind::Flatten: {
      if (buffer_of[size_t(x)] == buffer_of[size_t(y)]) break;  // already in feature order
      const TensorShape& t = model->tensors[size_t(x)];
      s = gk_convert_layout(cdata(x), layouts[size_t(x)], data(y), GK_LAYOUT_NCHW, images(), t.c, t.h, t.w);
      break;
    }
    case OpKind::FullyConnected: {
      const TensorShape& t = model->tensors[size_t(x)];
      const float* features = cdata(x);
      if (fc_inputs[i]) {
        s = gk_convert_layout(features, layouts[size_t(x)], fc_inputs[i].get(), GK_LAYOUT_NCHW, images(), t.c, 1, 1);
        features = fc_inputs[i].get();
      }
      if (s == GK_OK)
        s = gk_fully_connected(images(), t.c, op.features, features, op.weights.data(),
                               op.bias.empty() ? nullptr : op.bias.data(), op.act, data(y));
      break;
    }
  }
  if (s != GK_OK) {
    *error = std::string(op_name(op.kind)) + " on model line " + std::to_string(op.line) + ": " +
             gk_status_string(s) + ": " + gk_last_error();
    return false;
  }
  return true;
}

Network::Network() : impl_(new Impl) {}
Network::~Network() = default;

bool Network::build(const Model& model, int64_t batch, const BuildOptions& options, std::string* error) {
  impl_.reset(new Impl);
  Impl& m = *impl_;
  m.model = &model;
  m.batch = batch;
  m.options = options;
  if (batch < 1 || batch > (int64_t(1) << 20)) return *error = "batch out of range", false;
  if (model.output < 0) return *error = "the model has no output", false;
  m.fuse_concat_shuffles();
  if (!m.assign_layouts(error)) return false;
  m.head = m.choose_head();
  m.mark_whole_tensors();
  m.assign_buffers();
  return m.allocate(error) && m.make_plans(error);
}

// Runs op i (for the image set, or the batch), adding its time to the profile if any.
bool Network::Impl::run_timed(size_t i, std::string* error, RunProfile* profile) {
  if (!profile) return run_op(i, error);
  const auto t0 = std::chrono::steady_clock::now();
  if (!run_op(i, error)) return false;
  const double s = seconds_since(t0);
  const OpKind kind = ops[i]->kind;
  (kind == OpKind::Conv ? profile->conv_s : profile->other_s) += s;
  profile->by_kind_s[int(kind)] += s;
  profile->op_s.resize(ops.size());
  profile->op_s[i] += s;
  return true;
}

bool Network::run(const float* input, float* logits, std::string* error, RunProfile* profile) {
  Impl& m = *impl_;
  m.input = input;
  bool ok = true;
  for (int64_t image = 0; ok && m.head > 0 && image < m.batch; ++image) {
    m.image = image;
    for (size_t i = 0; ok && i < m.head; ++i) ok = m.run_timed(i, error, profile);
  }
  m.image = -1;
  for (size_t i = m.head; ok && i < m.ops.size(); ++i) ok = m.run_timed(i, error, profile);
  if (!ok) return false;
  std::memcpy(logits, m.cdata(m.model->output), size_t(m.buffer_floats(m.model->output)) * sizeof(float));
  return true;
}

int64_t Network::image_by_image_ops() const { return int64_t(impl_->head); }

int64_t Network::output_features() const { return impl_->model->tensors[size_t(impl_->model->output)].c; }

std::vector<std::string> Network::conv_algorithms() const {
  std::vector<std::string> names;
  for (const auto& p : impl_->plans)
    if (p) names.push_back(gk_conv_plan_algo_name(p->plan));
  return names;
}

std::vector<std::string> Network::describe_ops() const {
  const Impl& m = *impl_;
  std::vector<std::string> lines;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = *m.ops[i];
    std::string line = std::string(op_name(op.kind)) + " line " + std::to_string(op.line);
    if (!op.out.empty()) {
      const TensorShape& o = m.model->tensors[size_t(op.out[0])];
      line += " out " + std::to_string(o.c) + "x" + std::to_string(o.h) + "x" + std::to_string(o.w);
    }
    if (i < m.plans.size() && m.plans[i]) {
      const gk_conv_desc& d = op.conv;
      const auto pair = [](int64_t h, int64_t w) { return std::to_string(h) + (h == w ? "" : "x" + std::to_string(w)); };
      line += " in " + std::to_string(d.in_channels) + " k" + std::to_string(d.kernel_h) + "x" +
              std::to_string(d.kernel_w) + " s" + pair(d.stride_h, d.stride_w) +
              (d.dilation_h * d.dilation_w > 1 ? " d" + pair(d.dilation_h, d.dilation_w) : "") +
              (d.groups > 1 ? " g" + std::to_string(d.groups) : "") + " " + gk_conv_plan_algo_name(m.plans[i]->plan);
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace gknet
