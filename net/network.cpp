// Building a network: a layout and a buffer for every tensor, a plan for every conv; then
// running the operations in order.
#include "net/network.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <omp.h>

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

// What a tensor's buffer holds: one image (made and read in the head only), a lane's images
// (read in the lanes only), or the batch (read after the lanes, or the caller's).
enum class Extent { Image, Lane, Batch };

// What an op sees in a run: lane `lane`'s images [first, first + count), or of those only
// `image` in the head; after the lanes, the batch (lane 0, first 0, count batch).
struct Pass {
  int lane = 0;
  int64_t first = 0, count = 0;
  int64_t image = -1;
};

// Per op, the argument arrays of concat and split, sized once the buffers exist and filled
// as the op runs (one set per lane: the lanes run at once).
struct PartArrays {
  std::vector<std::vector<gk_tensor_desc>> descs;
  std::vector<std::vector<const float*>> inputs;
  std::vector<std::vector<float*>> outputs;
};

struct Network::Impl {
  const Model* model = nullptr;
  // The operations run, in order: the model's, with each concat + shuffle pair (and the
  // split feeding it a pass-through half, or the split that alone reads its result)
  // replaced by a fused op held in `fused`.
  std::vector<const Op*> ops;
  std::vector<std::unique_ptr<Op>> fused;
  std::vector<std::vector<bool>> skipped;  // per op: outputs not written (a split's fused half)
  int64_t batch = 0;
  int lanes = 1;                     // threads running their own images (choose_lanes)
  int64_t lane_images = 0;           // the most images a lane has (the others one fewer)
  BuildOptions options;
  size_t head = 0;                   // ops [0, head) run image by image (choose_head)
  size_t lanes_end = 0;              // ops [0, lanes_end) run in lanes, the rest on the batch
  std::vector<Extent> extent;        // per tensor
  std::vector<gk_layout> layouts;    // per tensor (flat tensors: NCHW)
  std::vector<int> buffer_of;        // per tensor: index into buffers, -1 for the caller's input
  std::vector<int64_t> capacity;     // per buffer, floats
  std::vector<bool> lane_copies;     // per buffer: it holds an image or lane tensor
  std::vector<int64_t> lane_stride;  // per buffer: floats between the lanes' copies (0: one copy)
  std::vector<Buffer> buffers;
  std::vector<std::unique_ptr<ConvPlan>> plans;  // per op (null for non-conv ops)
  // Per conv of the lanes after the head, where the shares differ: lane_images - 1 images.
  std::vector<std::unique_ptr<ConvPlan>> short_plans;
  std::vector<Buffer> fc_inputs;     // per op: a contiguous copy of a padded fc input, or null
  std::vector<PartArrays> parts;     // per lane
  const float* input = nullptr;      // during a run
  std::vector<RunProfile> lane_profiles;  // per lane, during a timed run
  std::vector<std::string> lane_errors;   // per lane, the first error of a run

  int64_t image_floats(int t) const {
    const TensorShape& s = model->tensors[size_t(t)];
    return s.flat ? s.c : gk_tensor_size(layouts[size_t(t)], 1, s.c, s.h, s.w);
  }
  int64_t buffer_floats(int t) const {
    const Extent e = extent[size_t(t)];
    return (e == Extent::Batch ? batch : e == Extent::Lane ? lane_images : 1) * image_floats(t);
  }
  int64_t lane_first(int lane) const { return lane * batch / lanes; }
  int64_t images(const Pass& p) const { return p.image < 0 ? p.count : 1; }
  int64_t run_floats(int t, const Pass& p) const { return images(p) * image_floats(t); }
  gk_tensor_desc desc(int t, const Pass& p) const {
    const TensorShape& s = model->tensors[size_t(t)];
    return {images(p), s.c, s.h, s.w, layouts[size_t(t)]};
  }
  // Of a batch tensor, the pass's images; of a lane or image tensor, the lane's copy, and
  // of a lane tensor in the head, the image's part of it.
  int64_t offset(int t, const Pass& p) const {
    const Extent e = extent[size_t(t)];
    if (e == Extent::Batch) return (p.image >= 0 ? p.image : p.first) * image_floats(t);
    const int64_t image = e == Extent::Lane && p.image >= 0 ? p.image - p.first : 0;
    return p.lane * lane_stride[size_t(buffer_of[size_t(t)])] + image * image_floats(t);
  }
  float* data(int t, const Pass& p) const { return buffers[size_t(buffer_of[size_t(t)])].get() + offset(t, p); }
  const float* cdata(int t, const Pass& p) const {
    return buffer_of[size_t(t)] < 0 ? input + offset(t, p) : data(t, p);
  }

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
  int choose_lanes() const;
  size_t choose_lanes_end() const;
  void mark_extents();
  bool skips(size_t op, size_t output) const;  // whether op's output is not written
  void assign_buffers();
  bool allocate(std::string* error);
  bool make_plans(std::string* error);
  void fill_parts(size_t i, const Pass& p);
  bool run_op(size_t i, const Pass& p, std::string* error);
  bool run_timed(size_t i, const Pass& p, std::string* error, RunProfile* profile);
  bool run_lane(int lane, std::string* error, RunProfile* profile);
  bool run_lanes(std::string* error, RunProfile* profile);
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

// Of a lane's images, the ops before the first conv whose weights outweigh one image of
// its output (or before the first fc) run image by image: up to there the activations are
// the traffic, and one image's stay in the caches from op to op, where 8 images at 112x112
// go to memory between ops; from there the weights are, and the lane's images together
// read each once (docs/performance.md, "a batch's first layers image by image"). A batch
// run as one on several threads has none: one image's small layers split poorly.
size_t Network::Impl::choose_head() const {
  if (options.image_by_image_ops >= 0) return size_t(std::min<int64_t>(options.image_by_image_ops, int64_t(ops.size())));
  if (lane_images == 1 || (lanes == 1 && gk_get_num_threads() > 1)) return 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind == OpKind::FullyConnected) return i;
    if (op.kind == OpKind::Conv && int64_t(op.weights.size()) > image_floats(op.out[0])) return i;
  }
  return ops.size();
}

// A batch on T threads runs as min(T, batch) lanes, each a thread taking its share of the
// images through the ops before the classifier, its calls on that thread alone (gemmkit
// runs a call made inside a parallel region on its calling thread). Splitting one image's
// layers between threads wakes and joins them per op, and the small layers split poorly:
// ShuffleNetV2 at batch 8 ran 1.56 ms an image on two threads as one batch and 1.13 as two
// lanes (docs/performance.md, "a batch's images side by side").
int Network::Impl::choose_lanes() const {
  if (options.lanes >= 1) return int(std::min<int64_t>(options.lanes, batch));
  return int(std::min<int64_t>(batch, std::max(1, gk_get_num_threads())));
}

// Lanes run every op before the classifier: its first fc multiplies the batch by its
// weights, and in lanes each would read them (VGG-16's 411 MB layer) once per lane.
size_t Network::Impl::choose_lanes_end() const {
  if (lanes == 1) return ops.size();
  size_t end = head;
  while (end < ops.size() && ops[end]->kind != OpKind::FullyConnected) ++end;
  return end;
}

// A tensor an op after the lanes reads or makes, and the input and output, hold the batch;
// one the lanes' ops after the head read or make holds a lane's images; the rest, made and
// read in the head, one image. A lane or batch tensor made in the head gets each image's
// pass's part.
void Network::Impl::mark_extents() {
  extent.assign(model->tensors.size(), Extent::Image);
  auto mark = [&](size_t i, Extent e) {
    const Op& op = *ops[i];
    for (int t : op.out) extent[size_t(t)] = std::max(extent[size_t(t)], e);
    for (int t : op.in) extent[size_t(t)] = std::max(extent[size_t(t)], e);
    if (op.residual >= 0) extent[size_t(op.residual)] = std::max(extent[size_t(op.residual)], e);
  };
  for (size_t i = head; i < lanes_end; ++i) mark(i, Extent::Lane);
  for (size_t i = lanes_end; i < ops.size(); ++i) mark(i, Extent::Batch);
  extent[0] = extent[size_t(model->output)] = Extent::Batch;
}

// Liveness: a buffer returns to the free list after the last op that reads any tensor in
// it. Outputs are assigned before the op's inputs are released, so an op never writes a
// buffer it reads, except for the aliases chosen on purpose (in-place residual and add,
// flatten of a tensor already in feature order), which join tensors of one extent (an
// image, a lane's images or the batch). A lane or batch tensor made in the head takes a
// buffer of its own: the next image's pass reruns the ops before it, which would write into
// a buffer it had from them; so does a batch tensor made in the lanes, whose parts the
// lanes write at their own pace.
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
    return dies_here(from, i) && sole_tenant(from) && extent[size_t(t)] == extent[size_t(from)];
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
               extent[size_t(y)] == extent[size_t(op.in[0])]) {
      share(y, op.in[0]);
    } else {
      for (size_t j = 0; j < op.out.size(); ++j) {
        const int t = op.out[j];
        if (skips(i, j)) continue;  // read by nothing
        const Extent e = extent[size_t(t)];
        buffer_of[size_t(t)] = take(t, (i < head && e != Extent::Image) || (i < lanes_end && e == Extent::Batch));
        ++tenants[size_t(buffer_of[size_t(t)])];
      }
    }
    for (int t : op.out)
      if (buffer_of[size_t(t)] >= 0 && extent[size_t(t)] != Extent::Batch) {
        lane_copies.resize(capacity.size(), false);
        lane_copies[size_t(buffer_of[size_t(t)])] = true;
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

// A buffer of image or lane tensors has a copy per lane, 64-byte aligned: the lanes run
// their ops at their own pace, so a buffer that one lane has moved on to reuse may still be
// read by another.
bool Network::Impl::allocate(std::string* error) {
  lane_copies.resize(capacity.size(), false);
  lane_stride.assign(capacity.size(), 0);
  for (size_t b = 0; b < capacity.size(); ++b) {
    if (lanes > 1 && lane_copies[b]) lane_stride[b] = (capacity[b] + 15) / 16 * 16;
    const int64_t floats = capacity[b] + (lanes - 1) * lane_stride[b];
    buffers.emplace_back(aligned_floats(floats));
    if (!buffers.back()) {
      *error = "out of memory for the network's tensors (" + std::to_string(floats * 4) + " bytes)";
      return false;
    }
  }
  fc_inputs.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind != OpKind::FullyConnected || features_in_place(op.in[0])) continue;
    fc_inputs[i].reset(aligned_floats(lanes * lane_images * model->tensors[size_t(op.in[0])].c));
    if (!fc_inputs[i]) return *error = "out of memory for a fully connected input", false;
  }
  parts.resize(size_t(lanes));
  for (PartArrays& a : parts) {
    a.descs.resize(ops.size()), a.inputs.resize(ops.size()), a.outputs.resize(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = *ops[i];
      if (op.kind == OpKind::Concat || op.kind == OpKind::ConcatShuffle || op.kind == OpKind::ConcatShuffleSplit)
        a.descs[i].resize(op.in.size()), a.inputs[i].resize(op.in.size());
      if (op.kind == OpKind::Split || op.kind == OpKind::ConcatShuffleSplit) a.outputs[i].resize(op.out.size());
    }
  }
  lane_profiles.assign(size_t(lanes), RunProfile{});
  for (RunProfile& p : lane_profiles) p.op_s.assign(ops.size(), 0.0);
  lane_errors.assign(size_t(lanes), std::string());
  return true;
}

// The parts of concat and split as this pass of op i sees them.
void Network::Impl::fill_parts(size_t i, const Pass& p) {
  const Op& op = *ops[i];
  PartArrays& a = parts[size_t(p.lane)];
  for (size_t j = 0; j < a.inputs[i].size(); ++j) a.descs[i][j] = desc(op.in[j], p), a.inputs[i][j] = cdata(op.in[j], p);
  for (size_t j = 0; j < a.outputs[i].size(); ++j) a.outputs[i][j] = skips(i, j) ? nullptr : data(op.out[j], p);
}

// A plan per conv for the images it runs on: one in the head, a lane's after it (and
// where the lanes' shares differ, one fewer), the batch after the lanes. The lanes' convs
// are planned on one thread, as they run: the setting is lowered while they are made
// (Fast-Run measures, and keys its cache, by it), through this thread's local setting, so
// other threads' calls meanwhile keep theirs.
bool Network::Impl::make_plans(std::string* error) {
  plans.resize(ops.size());
  short_plans.resize(ops.size());
  const bool uneven = batch % lanes != 0;
  struct RestoreLocalThreads {  // also when an allocation throws
    int threads = gk_get_num_threads();
    int local = gk_set_num_threads_local(threads);
    ~RestoreLocalThreads() { gk_set_num_threads_local(local); }
  } setting;
  const int threads = setting.threads;
  bool ok = true;
  for (size_t i = 0; ok && i < ops.size(); ++i) {
    const Op& op = *ops[i];
    if (op.kind != OpKind::Conv) continue;
    gk_set_num_threads_local(i < lanes_end && lanes > 1 ? 1 : threads);
    gk_conv_desc d = op.conv;
    d.layout = options.layout;
    d.flags = options.conv_flags;
    if (op.in[0] == 0 && options.layout != GK_LAYOUT_NCHW) d.flags |= GK_CONV_FLAG_NCHW_INPUT;
    if (op.residual >= 0) d.flags |= GK_CONV_FLAG_ADD_TO_OUTPUT;
    auto make = [&](int64_t images, std::unique_ptr<ConvPlan>* plan) {
      d.batch = images;
      plan->reset(new ConvPlan);
      const gk_status s = gk_conv_plan_create(&d, op.weights.data(), op.bias.empty() ? nullptr : op.bias.data(),
                                              options.algo, &(*plan)->plan);
      if (s == GK_OK) return true;
      *error = "conv on model line " + std::to_string(op.line) + ": " + gk_status_string(s) + ": " + gk_last_error();
      return false;
    };
    if (i < head) ok = make(1, &plans[i]);
    else if (i < lanes_end) ok = make(lane_images, &plans[i]) && (!uneven || make(lane_images - 1, &short_plans[i]));
    else ok = make(batch, &plans[i]);
  }
  return ok;
}

bool Network::Impl::run_op(size_t i, const Pass& pass, std::string* error) {
  const Op& op = *ops[i];
  const int x = op.in[0], y = op.out[0];
  fill_parts(i, pass);
  const PartArrays& a = parts[size_t(pass.lane)];
  auto desc = [&](int t) { return this->desc(t, pass); };
  auto data = [&](int t) { return this->data(t, pass); };
  auto cdata = [&](int t) { return this->cdata(t, pass); };
  const int64_t images = this->images(pass);
  gk_status s = GK_OK;
  switch (op.kind) {
    case OpKind::Conv:
      if (op.residual >= 0 && buffer_of[size_t(op.residual)] != buffer_of[size_t(y)])
        std::memcpy(data(y), cdata(op.residual), size_t(run_floats(y, pass)) * sizeof(float));
      s = gk_conv_run((i < head || i >= lanes_end || images == lane_images ? plans : short_plans)[i]->plan, cdata(x), data(y));
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
      s = gk_concat_channels(int(op.in.size()), a.descs[i].data(), a.inputs[i].data(), &out, data(y));
      break;
    }
    case OpKind::Split: {
      const gk_tensor_desc in = desc(x);
      s = gk_split_channels(&in, cdata(x), int(op.out.size()), op.channels.data(), a.outputs[i].data());
      break;
    }
    case OpKind::ConcatShuffle: {
      const gk_tensor_desc out = desc(y);
      s = gk_concat_shuffle_channels(op.groups, a.descs[i].data(), a.inputs[i].data(), &out, data(y));
      break;
    }
    case OpKind::ConcatShuffleSplit: {
      // The shuffled tensor, not stored: the parts' channels, the split's pixels and layout.
      gk_tensor_desc shuffled = desc(y);
      shuffled.c = 0;
      for (int64_t c : op.channels) shuffled.c += c;
      s = gk_concat_shuffle_split_channels(op.groups, a.descs[i].data(), a.inputs[i].data(), &shuffled,
                                           int(op.out.size()), op.channels.data(), a.outputs[i].data());
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
      s = gk_convert_layout(cdata(x), layouts[size_t(x)], data(y), GK_LAYOUT_NCHW, images, t.c, t.h, t.w);
      break;
    }
    case OpKind::FullyConnected: {
      const TensorShape& t = model->tensors[size_t(x)];
      const float* features = cdata(x);
      if (fc_inputs[i]) {  // (lane_images x features per lane)
        float* rows = fc_inputs[i].get() + pass.lane * lane_images * t.c;
        s = gk_convert_layout(features, layouts[size_t(x)], rows, GK_LAYOUT_NCHW, images, t.c, 1, 1);
        features = rows;
      }
      if (s == GK_OK)
        s = gk_fully_connected(images, t.c, op.features, features, op.weights.data(),
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
  m.lanes = m.choose_lanes();
  m.lane_images = (batch + m.lanes - 1) / m.lanes;
  m.head = m.choose_head();
  m.lanes_end = m.choose_lanes_end();
  m.mark_extents();
  m.assign_buffers();
  return m.allocate(error) && m.make_plans(error);
}

// Runs op i for the pass, adding its time to the profile if any.
bool Network::Impl::run_timed(size_t i, const Pass& pass, std::string* error, RunProfile* profile) {
  if (!profile) return run_op(i, pass, error);
  const auto t0 = std::chrono::steady_clock::now();
  if (!run_op(i, pass, error)) return false;
  const double s = seconds_since(t0);
  const OpKind kind = ops[i]->kind;
  (kind == OpKind::Conv ? profile->conv_s : profile->other_s) += s;
  profile->by_kind_s[int(kind)] += s;
  profile->op_s.resize(ops.size());
  profile->op_s[i] += s;
  return true;
}

// Lane `lane`'s images through the lanes' ops: the head's one image at a time, then the
// rest on all of them.
bool Network::Impl::run_lane(int lane, std::string* error, RunProfile* profile) {
  const int64_t first = lane_first(lane), count = lane_first(lane + 1) - first;
  for (int64_t image = first; head > 0 && image < first + count; ++image)
    for (size_t i = 0; i < head; ++i)
      if (!run_timed(i, Pass{lane, first, count, image}, error, profile)) return false;
  for (size_t i = head; i < lanes_end; ++i)
    if (!run_timed(i, Pass{lane, first, count, -1}, error, profile)) return false;
  return true;
}

// One lane runs in this thread; several run a thread each (a smaller team takes several
// lanes a thread). A timed run adds the lanes' op times scaled to the lanes' wall time.
// Nothing thrown leaves the parallel region (it would end the process): a lane that
// throws fails with a message.
bool Network::Impl::run_lanes(std::string* error, RunProfile* profile) {
  if (lanes == 1) return run_lane(0, error, profile);
  for (RunProfile& p : lane_profiles) {
    p.conv_s = p.other_s = 0;
    std::fill(std::begin(p.by_kind_s), std::end(p.by_kind_s), 0.0);
    std::fill(p.op_s.begin(), p.op_s.end(), 0.0);
  }
  for (std::string& e : lane_errors) e.clear();
  bool ok = true;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(lanes) reduction(&& : ok)
  for (int lane = omp_get_thread_num(); lane < lanes; lane += omp_get_num_threads()) {
    try {
      ok = run_lane(lane, &lane_errors[size_t(lane)], profile ? &lane_profiles[size_t(lane)] : nullptr) && ok;
    } catch (...) {
      ok = false;
    }
  }
  const double wall_s = seconds_since(t0);
  if (!ok) {
    for (const std::string& e : lane_errors)
      if (!e.empty()) return *error = e, false;
    return *error = "a lane failed (out of memory)", false;
  }
  if (profile) {
    double lanes_s = 0;
    for (const RunProfile& p : lane_profiles) lanes_s += p.conv_s + p.other_s;
    const double scale = lanes_s > 0 ? wall_s / lanes_s : 0;
    profile->op_s.resize(ops.size());
    for (const RunProfile& p : lane_profiles) {
      profile->conv_s += p.conv_s * scale, profile->other_s += p.other_s * scale;
      for (int k = 0; k < kOpKinds; ++k) profile->by_kind_s[k] += p.by_kind_s[k] * scale;
      for (size_t i = 0; i < ops.size(); ++i) profile->op_s[i] += p.op_s[i] * scale;
    }
  }
  return true;
}

bool Network::run(const float* input, float* logits, std::string* error, RunProfile* profile) {
  Impl& m = *impl_;
  m.input = input;
  bool ok = m.run_lanes(error, profile);
  for (size_t i = m.lanes_end; ok && i < m.ops.size(); ++i) ok = m.run_timed(i, Pass{0, 0, m.batch, -1}, error, profile);
  if (!ok) return false;
  std::memcpy(logits, m.cdata(m.model->output, Pass{0, 0, m.batch, -1}),
              size_t(m.buffer_floats(m.model->output)) * sizeof(float));
  return true;
}

int64_t Network::image_by_image_ops() const { return int64_t(impl_->head); }

int64_t Network::lanes() const { return impl_->lanes; }

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
