// The model file reader: a line-oriented header per operation, raw float32 data after the
// operations that have weights. Every number is range-checked and every tensor's shape
// derived and checked as it is read, so nothing later trusts the file.
#include "net/model.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace gknet {
namespace {

// Per-image tensors beyond this many floats (8 GiB) are refused: no network needs them,
// and every product of sizes below stays far from int64 overflow.
constexpr int64_t kMaxTensorFloats = int64_t(1) << 31;
constexpr int64_t kMaxDim = int64_t(1) << 24;
constexpr size_t kMaxLine = 4096;

struct ParseError {
  std::string message;
};

class Reader {
 public:
  Reader(std::string path, std::string bytes) : path_(std::move(path)), bytes_(std::move(bytes)) {}

  // The next line without its '\n'; false at the end of the file.
  bool next_line(std::string* line) {
    if (pos_ >= bytes_.size()) return false;
    const size_t end = bytes_.find('\n', pos_);
    if (end == std::string::npos) fail("truncated: the last line has no newline");
    if (end - pos_ > kMaxLine) fail("line longer than 4096 bytes (binary data where a line was expected?)");
    line->assign(bytes_, pos_, end - pos_);
    for (unsigned char ch : *line)
      if (ch < 0x20 || ch > 0x7e) fail("non-text byte in a line (binary data where a line was expected?)");
    pos_ = end + 1;
    ++line_no_;
    return true;
  }

  std::vector<float> floats(int64_t count, const char* what) {
    const uint64_t bytes = uint64_t(count) * sizeof(float);
    if (bytes > bytes_.size() - pos_)
      fail(std::string("truncated: ") + what + " needs " + std::to_string(bytes) + " bytes, " +
           std::to_string(bytes_.size() - pos_) + " left");
    std::vector<float> v(static_cast<size_t>(count));
    std::memcpy(v.data(), bytes_.data() + pos_, bytes);
    pos_ += bytes;
    for (float f : v)
      if (!std::isfinite(f)) fail(std::string(what) + " hold a NaN or an infinity");
    return v;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw ParseError{path_ + " line " + std::to_string(line_no_) + ": " + why};
  }
  int line_no() const { return line_no_; }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  std::string path_, bytes_;
  size_t pos_ = 0;
  int line_no_ = 0;
};

// One op line: its first word and its key=value pairs, each key taken at most once.
class Fields {
 public:
  Fields(const std::string& line, Reader& r) : r_(r) {
    std::istringstream in(line);
    in >> word_;
    std::string tok;
    while (in >> tok) {
      const size_t eq = tok.find('=');
      if (eq == std::string::npos || eq == 0) r_.fail("expected key=value, got '" + tok + "'");
      if (!kv_.emplace(tok.substr(0, eq), tok.substr(eq + 1)).second)
        r_.fail("key '" + tok.substr(0, eq) + "' given twice");
    }
  }
  const std::string& word() const { return word_; }

  int64_t integer(const char* key, int64_t lo, int64_t hi) { return parse_int(take(key), key, lo, hi); }
  int64_t integer_or(const char* key, int64_t fallback, int64_t lo, int64_t hi) {
    return kv_.count(key) ? integer(key, lo, hi) : fallback;
  }
  std::vector<int64_t> integers(const char* key, int64_t lo, int64_t hi) {
    std::vector<int64_t> out;
    std::string s = take(key), part;
    std::istringstream in(s);
    while (std::getline(in, part, ',')) out.push_back(parse_int(part, key, lo, hi));
    if (out.empty()) r_.fail(std::string("'") + key + "' lists nothing");
    return out;
  }
  gk_activation activation() {
    if (!kv_.count("act")) return GK_ACT_NONE;
    const std::string v = take("act");
    if (v == "none") return GK_ACT_NONE;
    if (v == "relu") return GK_ACT_RELU;
    if (v == "relu6") return GK_ACT_RELU6;
    r_.fail("unknown activation '" + v + "' (none, relu or relu6)");
  }
  bool has(const char* key) const { return kv_.count(key) != 0; }
  // After an op took the keys it knows: anything left is a mistake.
  void expect_no_more() {
    if (!kv_.empty()) r_.fail("unknown key '" + kv_.begin()->first + "' for " + word_);
  }

 private:
  std::string take(const char* key) {
    auto it = kv_.find(key);
    if (it == kv_.end()) r_.fail(std::string("missing '") + key + "' for " + word_);
    std::string v = it->second;
    kv_.erase(it);
    return v;
  }
  int64_t parse_int(const std::string& s, const char* key, int64_t lo, int64_t hi) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE)
      r_.fail(std::string("'") + key + "' is not an integer: '" + s + "'");
    if (v < lo || v > hi)
      r_.fail(std::string("'") + key + "' = " + s + " out of range [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
    return v;
  }

  Reader& r_;
  std::string word_;
  std::map<std::string, std::string> kv_;
};

class Builder {
 public:
  Builder(Reader& r, Model* m) : r_(r), m_(*m) {}

  void header() {
    std::string line;
    if (!r_.next_line(&line) || line != "gknet 1") r_.fail("not a gemmkit model (first line must be 'gknet 1')");
    if (!r_.next_line(&line) || line.compare(0, 5, "name ") != 0) r_.fail("expected 'name NAME'");
    m_.name = line.substr(5);
    if (!r_.next_line(&line)) r_.fail("truncated: expected 'input C H W'");
    std::istringstream in(line);
    std::string word;
    TensorShape t;
    if (!(in >> word >> t.c >> t.h >> t.w) || word != "input" || !in.eof())
      r_.fail("expected 'input C H W'");
    check_shape(t);
    m_.tensors.push_back(t);
  }

  // Reads op lines up to 'end'.
  void body() {
    std::string line;
    while (r_.next_line(&line)) {
      const std::string w = line.substr(0, line.find(' '));
      if (line == "end") {
        if (m_.output < 0) r_.fail("no 'output' before 'end'");
        return;
      }
      if (w == "output") {
        std::istringstream in(line);
        std::string word;
        int64_t t = -1;
        if (!(in >> word >> t) || !in.eof()) r_.fail("expected 'output T'");
        m_.output = int(existing(t));
        if (!m_.tensors[size_t(t)].flat) r_.fail("the output must be a flat tensor (fc or flatten)");
        continue;
      }
      Fields f(line, r_);
      Op op;
      op.line = r_.line_no();
      if (w == "conv") conv(f, &op);
      else if (w == "maxpool" || w == "avgpool") pool(f, &op, w == "maxpool");
      else if (w == "gap") unary(f, &op, OpKind::GlobalAvgPool);
      else if (w == "add") add(f, &op);
      else if (w == "concat") concat(f, &op);
      else if (w == "split") split(f, &op);
      else if (w == "shuffle") shuffle(f, &op);
      else if (w == "flatten") unary(f, &op, OpKind::Flatten);
      else if (w == "fc") fully_connected(f, &op);
      else r_.fail("unknown operation '" + w + "'");
      m_.ops.push_back(std::move(op));
    }
    r_.fail("truncated: no 'end' line");
  }

 private:
  void check_shape(const TensorShape& t) {
    if (t.c < 1 || t.h < 1 || t.w < 1 || t.c > kMaxDim || t.h > kMaxDim || t.w > kMaxDim ||
        t.c * t.h > kMaxTensorFloats / t.w)
      r_.fail("tensor shape " + std::to_string(t.c) + "x" + std::to_string(t.h) + "x" + std::to_string(t.w) +
              " out of range");
  }
  int64_t existing(int64_t t) {
    if (t < 0 || t >= int64_t(m_.tensors.size()))
      r_.fail("tensor " + std::to_string(t) + " is not defined yet");
    return t;
  }
  const TensorShape& image(int t) {
    const TensorShape& s = m_.tensors[size_t(t)];
    if (s.flat) r_.fail("tensor " + std::to_string(t) + " is flat where an image is expected");
    return s;
  }
  std::vector<int> inputs(Fields& f, size_t min_count, size_t max_count) {
    std::vector<int> out;
    for (int64_t t : f.integers("in", 0, int64_t(1) << 30)) out.push_back(int(existing(t)));
    if (out.size() < min_count || out.size() > max_count) r_.fail("wrong number of inputs");
    return out;
  }
  // The outputs must be the next unused tensor numbers, in order.
  std::vector<int> outputs(Fields& f, const std::vector<TensorShape>& shapes) {
    const std::vector<int64_t> ids = f.integers("out", 0, int64_t(1) << 30);
    f.expect_no_more();  // every op takes "out" last
    if (ids.size() != shapes.size()) r_.fail("wrong number of outputs");
    std::vector<int> out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != int64_t(m_.tensors.size()))
        r_.fail("output " + std::to_string(ids[i]) + " should be tensor " + std::to_string(m_.tensors.size()));
      check_shape(shapes[i]);
      m_.tensors.push_back(shapes[i]);
      out.push_back(int(ids[i]));
    }
    return out;
  }
  void window(Fields& f, int64_t* kh, int64_t* kw, int64_t* sh, int64_t* sw, int64_t* pads) {
    *kh = f.integer("kh", 1, kMaxDim), *kw = f.integer("kw", 1, kMaxDim);
    *sh = f.integer("sh", 1, kMaxDim), *sw = f.integer("sw", 1, kMaxDim);
    const char* keys[4] = {"pt", "pl", "pb", "pr"};
    for (int i = 0; i < 4; ++i) pads[i] = f.integer(keys[i], 0, kMaxDim);
  }

  void conv(Fields& f, Op* op) {
    op->kind = OpKind::Conv;
    op->in = inputs(f, 1, 1);
    const TensorShape x = image(op->in[0]);
    gk_conv_desc& d = op->conv;
    gk_conv_desc_init(&d);
    d.batch = 1, d.in_channels = x.c, d.in_height = x.h, d.in_width = x.w;
    d.out_channels = f.integer("oc", 1, kMaxDim);
    int64_t pads[4];
    window(f, &d.kernel_h, &d.kernel_w, &d.stride_h, &d.stride_w, pads);
    d.pad_top = pads[0], d.pad_left = pads[1], d.pad_bottom = pads[2], d.pad_right = pads[3];
    d.dilation_h = f.integer_or("dh", 1, 1, kMaxDim), d.dilation_w = f.integer_or("dw", 1, 1, kMaxDim);
    d.groups = f.integer_or("groups", 1, 1, kMaxDim);
    d.activation = op->act = f.activation();
    const bool bias = f.integer("bias", 0, 1) == 1;
    if (f.has("add")) op->residual = int(existing(f.integer("add", 0, int64_t(1) << 30)));
    int64_t oh = 0, ow = 0;
    if (gk_conv_output_size(&d, &oh, &ow) != GK_OK) r_.fail(std::string("conv: ") + gk_last_error());
    if (x.c % d.groups || d.out_channels % d.groups) r_.fail("conv: channels not divisible by groups");
    const TensorShape y{d.out_channels, oh, ow};
    if (op->residual >= 0) {
      const TensorShape& t = image(op->residual);
      if (t.c != y.c || t.h != y.h || t.w != y.w) r_.fail("conv: add= tensor's shape differs from the output's");
    }
    op->out = outputs(f, {y});
    const double weights = double(d.out_channels) * double(x.c / d.groups) * double(d.kernel_h) * double(d.kernel_w);
    if (weights > double(kMaxTensorFloats)) r_.fail("conv: weight tensor too large");
    op->weights = r_.floats(d.out_channels * (x.c / d.groups) * d.kernel_h * d.kernel_w, "conv weights");
    if (bias) op->bias = r_.floats(d.out_channels, "conv biases");
  }

  void pool(Fields& f, Op* op, bool max) {
    op->kind = max ? OpKind::MaxPool : OpKind::AvgPool;
    op->in = inputs(f, 1, 1);
    const TensorShape x = image(op->in[0]);
    gk_pool_desc& p = op->pool;
    p.kind = max ? GK_POOL_MAX : GK_POOL_AVG;
    int64_t pads[4];
    window(f, &p.kernel_h, &p.kernel_w, &p.stride_h, &p.stride_w, pads);
    p.pad_top = pads[0], p.pad_left = pads[1], p.pad_bottom = pads[2], p.pad_right = pads[3];
    p.ceil_mode = int(f.integer_or("ceil", 0, 0, 1));
    p.count_include_pad = int(f.integer_or("count_pad", 1, 0, 1));
    const gk_tensor_desc t{1, x.c, x.h, x.w, GK_LAYOUT_NCHW};
    int64_t oh = 0, ow = 0;
    if (gk_pool2d_output_size(&t, &p, &oh, &ow) != GK_OK) r_.fail(std::string("pool: ") + gk_last_error());
    op->out = outputs(f, {{x.c, oh, ow}});
  }

  void unary(Fields& f, Op* op, OpKind kind) {
    op->kind = kind;
    op->in = inputs(f, 1, 1);
    const TensorShape x = image(op->in[0]);
    op->out = outputs(f, {kind == OpKind::Flatten ? TensorShape{x.c * x.h * x.w, 1, 1, true} : TensorShape{x.c, 1, 1}});
  }

  void add(Fields& f, Op* op) {
    op->kind = OpKind::Add;
    op->in = inputs(f, 2, 2);
    const TensorShape a = image(op->in[0]), b = image(op->in[1]);
    if (a.c != b.c || a.h != b.h || a.w != b.w) r_.fail("add: the two inputs' shapes differ");
    op->act = f.activation();
    op->out = outputs(f, {a});
  }

  void concat(Fields& f, Op* op) {
    op->kind = OpKind::Concat;
    op->in = inputs(f, 2, 64);
    TensorShape y = image(op->in[0]);
    y.c = 0;
    for (int t : op->in) {
      const TensorShape x = image(t);
      if (x.h != y.h || x.w != y.w) r_.fail("concat: inputs of different heights or widths");
      y.c += x.c;
    }
    op->out = outputs(f, {y});
  }

  void split(Fields& f, Op* op) {
    op->kind = OpKind::Split;
    op->in = inputs(f, 1, 1);
    const TensorShape x = image(op->in[0]);
    op->channels = f.integers("channels", 1, kMaxDim);
    if (op->channels.size() > 64) r_.fail("split: more than 64 parts");
    std::vector<TensorShape> shapes;
    int64_t sum = 0;
    for (int64_t c : op->channels) shapes.push_back({c, x.h, x.w}), sum += c;
    if (sum != x.c) r_.fail("split: the channels do not sum to the input's " + std::to_string(x.c));
    op->out = outputs(f, shapes);
  }

  void shuffle(Fields& f, Op* op) {
    op->kind = OpKind::Shuffle;
    op->in = inputs(f, 1, 1);
    const TensorShape x = image(op->in[0]);
    op->groups = f.integer("groups", 1, kMaxDim);
    if (x.c % op->groups) r_.fail("shuffle: channels not divisible by groups");
    op->out = outputs(f, {x});
  }

  void fully_connected(Fields& f, Op* op) {
    op->kind = OpKind::FullyConnected;
    op->in = inputs(f, 1, 1);
    const TensorShape x = m_.tensors[size_t(op->in[0])];
    if (!x.flat && (x.h != 1 || x.w != 1)) r_.fail("fc: the input must be flat or C x 1 x 1 (flatten first)");
    op->features = f.integer("features", 1, kMaxDim);
    op->act = f.activation();
    const bool bias = f.integer("bias", 0, 1) == 1;
    if (op->features * x.c > kMaxTensorFloats) r_.fail("fc: weight matrix too large");
    op->out = outputs(f, {{op->features, 1, 1, true}});
    op->weights = r_.floats(op->features * x.c, "fc weights");
    if (bias) op->bias = r_.floats(op->features, "fc biases");
  }

  Reader& r_;
  Model& m_;
};

}  // namespace

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::Conv: return "conv";
    case OpKind::MaxPool: return "maxpool";
    case OpKind::AvgPool: return "avgpool";
    case OpKind::GlobalAvgPool: return "gap";
    case OpKind::Add: return "add";
    case OpKind::Concat: return "concat";
    case OpKind::Split: return "split";
    case OpKind::Shuffle: return "shuffle";
    case OpKind::Flatten: return "flatten";
    case OpKind::FullyConnected: return "fc";
    case OpKind::ConcatShuffle: return "concat_shuffle";
    case OpKind::ConcatShuffleSplit: return "concat_shuffle_split";
  }
  return "?";
}

bool load_model(const std::string& path, Model* model, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot open";
    return false;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) {
    *error = path + ": read error";
    return false;
  }
  Model m;
  try {
    Reader r(path, bytes.str());
    Builder b(r, &m);
    b.header();
    b.body();
    if (!r.at_end()) r.fail("data after 'end'");
  } catch (const ParseError& e) {
    *error = e.message;
    return false;
  } catch (const std::bad_alloc&) {
    *error = path + ": out of memory while reading";
    return false;
  }
  *model = std::move(m);
  return true;
}

}  // namespace gknet
