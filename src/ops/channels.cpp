// Channel concat, split and shuffle: copies between tensors of one layout whose channels
// map to each other. Whole channel blocks that map to whole source blocks are contiguous
// copies (every NCHW part; NCHWx parts aligned to the block); the other blocks are copied
// pixel by pixel in runs of consecutive channels (NHWC, and NCHWx parts that start or end
// inside a block). Copies are bound by memory, not by vector width: there is no per-ISA
// variant here.
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "ops/ops.h"

namespace gk {
namespace ops {
namespace {

// Channels [src_c0, src_c0 + count) of `src` to [dst_c0, dst_c0 + count) of `dst`, a tensor
// of the same layout, n, h and w.
struct ChannelCopy {
  const Blocked* src;
  const float* x;
  int64_t src_c0;
  const Blocked* dst;
  float* y;
  int64_t dst_c0, count;
};

// How a copy runs: dst blocks [full0, full1) take whole source blocks, one contiguous run
// per image (every NCHW copy; NCHWx parts whose start is aligned as in the source); the
// others, [first, full0) and [full1, last], row by row, lane run by lane run.
struct CopyPlan {
  int64_t first, last, full0, full1, src_full0;
  int64_t partial_blocks() const { return (full0 - first) + (last + 1 - full1); }
  int64_t partial_block(int64_t k) const { return k < full0 - first ? first + k : full1 + k - (full0 - first); }
};
CopyPlan plan_copy(const ChannelCopy& cc) {
  const int64_t lanes = cc.dst->lanes;
  CopyPlan p;
  p.first = cc.dst_c0 / lanes;
  p.last = (cc.dst_c0 + cc.count - 1) / lanes;
  p.full0 = p.full1 = p.first;
  if (cc.src->lanes == lanes && (cc.src_c0 - cc.dst_c0) % lanes == 0) {
    p.full0 = (cc.dst_c0 + lanes - 1) / lanes;
    p.full1 = std::max(p.full0, (cc.dst_c0 + cc.count) / lanes);
  }
  p.src_full0 = p.full0 + (cc.src_c0 - cc.dst_c0) / lanes;
  return p;
}

// `pixels` pixels of `len` consecutive lanes: from pixels src_lanes floats apart to pixels
// dst_lanes apart.
GK_INLINE void copy_lane_run(float* __restrict dst, int64_t dst_lanes, const float* __restrict src,
                             int64_t src_lanes, int64_t len, int64_t pixels) {
  if (len == 1) {
    for (int64_t p = 0; p < pixels; ++p) dst[p * dst_lanes] = src[p * src_lanes];
    return;
  }
  for (int64_t p = 0; p < pixels; ++p) conv::copy_run(dst + p * dst_lanes, src + p * src_lanes, len);
}

// Row i of dst block db of image img, a block only partly this copy's or not aligned with
// the source's blocks: runs of channels that lie within one source block.
void copy_partial_row(const ChannelCopy& cc, int64_t img, int64_t db, int64_t i) {
  const Blocked &s = *cc.src, &d = *cc.dst;
  float* y_row = cc.y + d.row_offset(img, db, i);
  int64_t c = std::max(cc.dst_c0, db * d.lanes);  // dst channels [c, end)
  const int64_t end = std::min(cc.dst_c0 + cc.count, (db + 1) * d.lanes), shift = cc.src_c0 - cc.dst_c0;
  while (c < end) {
    const int64_t sc = c + shift, lane = sc % s.lanes, len = std::min(end - c, s.lanes - lane);
    copy_lane_run(y_row + (c - db * d.lanes), d.lanes, cc.x + s.row_offset(img, sc / s.lanes, i) + lane, s.lanes,
                  len, d.w);
    c += len;
  }
}

// Whole-block runs go in pieces of this many floats, so that one image's run still spreads
// over the threads.
constexpr int64_t kPieceFloats = 16384;

// Inside a parallel region: one copy shared among the threads, no barrier after it (the
// copies of a concat or split write disjoint floats).
void copy_channels(const ChannelCopy& cc) {
  const Blocked &s = *cc.src, &d = *cc.dst;
  const CopyPlan p = plan_copy(cc);
  const int64_t run = (p.full1 - p.full0) * d.block_floats(), pieces = (run + kPieceFloats - 1) / kPieceFloats;
#pragma omp for schedule(static) nowait
  for (int64_t u = 0; u < d.n * pieces; ++u) {
    const int64_t img = u / pieces, at = u % pieces * kPieceFloats;
    conv::copy_run(cc.y + d.row_offset(img, p.full0, 0) + at, cc.x + s.row_offset(img, p.src_full0, 0) + at,
                   std::min(kPieceFloats, run - at));
  }
  const int64_t blocks = p.partial_blocks(), rows = d.n * blocks * d.h;
#pragma omp for schedule(static) nowait
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ib = r / d.h;
    copy_partial_row(cc, ib / blocks, p.partial_block(ib % blocks), r % d.h);
  }
}

// Inside a parallel region: zeros in the padding lanes of t's last block, no barrier.
void zero_padding(const Blocked& t, float* y) {
  if (!t.padded()) return;
  const int64_t rows = t.n * t.h, b = t.blocks - 1;
#pragma omp for schedule(static) nowait
  for (int64_t r = 0; r < rows; ++r)
    zero_padding_lanes(y + t.row_offset(r / t.h, b, r % t.h), t.w, t.lanes, t.real_lanes(b));
}

// "parts[12]" and the like, for messages.
struct Name {
  char s[32];
  Name(const char* base, int i) { std::snprintf(s, sizeof s, "%s[%d]", base, i); }
};

bool check_concat(const char* fn, int count, const gk_tensor_desc* parts, const float* const* xs,
                  const gk_tensor_desc* out, const float* y) {
  if (!check_tensor(fn, "out", out) || !check_pointer(fn, "parts", parts) || !check_pointer(fn, "xs", xs) ||
      !check_pointer(fn, "y", y))
    return false;
  if (count < 1) {
    set_last_error("%s: count %d must be >= 1", fn, count);
    return false;
  }
  const int64_t y_floats = blocked(*out).floats();
  int64_t channels = 0;
  for (int i = 0; i < count; ++i) {
    const gk_tensor_desc& p = parts[i];
    if (!check_tensor(fn, Name("parts", i).s, &p) || !check_pointer(fn, Name("xs", i).s, xs[i])) return false;
    if (p.n != out->n || p.h != out->h || p.w != out->w || p.layout != out->layout) {
      set_last_error("%s: parts[%d] is %" PRId64 " x . x %" PRId64 " x %" PRId64 " in layout %d, out %" PRId64
                     " x . x %" PRId64 " x %" PRId64 " in layout %d (n, h, w and layout must match)",
                     fn, i, p.n, p.h, p.w, int(p.layout), out->n, out->h, out->w, int(out->layout));
      return false;
    }
    channels += p.c;  // each c <= 2^60 and the sum stops at out->c: no overflow
    if (channels > out->c) break;
    if (!check_disjoint(fn, "y", y, y_floats, Name("xs", i).s, xs[i], blocked(p).floats())) return false;
  }
  if (channels != out->c) {
    set_last_error("%s: the parts' channels sum to %s%" PRId64 ", out->c is %" PRId64, fn,
                   channels > out->c ? "more than " : "", channels, out->c);
    return false;
  }
  return true;
}

bool check_split(const char* fn, const gk_tensor_desc* in, const float* x, int count, const int64_t* channels,
                 float* const* ys) {
  if (!check_tensor(fn, "in", in) || !check_pointer(fn, "x", x) || !check_pointer(fn, "channels", channels) ||
      !check_pointer(fn, "ys", ys))
    return false;
  if (count < 1) {
    set_last_error("%s: count %d must be >= 1", fn, count);
    return false;
  }
  const int64_t x_floats = blocked(*in).floats();
  int64_t sum = 0;
  for (int i = 0; i < count; ++i) {
    if (channels[i] < 1 || channels[i] > in->c - sum) {
      set_last_error("%s: channels[%d] = %" PRId64 " (each >= 1, together in->c = %" PRId64 ")", fn, i, channels[i],
                     in->c);
      return false;
    }
    sum += channels[i];
    if (!check_pointer(fn, Name("ys", i).s, ys[i])) return false;
    const gk_tensor_desc part = {in->n, channels[i], in->h, in->w, in->layout};
    const int64_t floats = blocked(part).floats();
    if (!check_disjoint(fn, Name("ys", i).s, ys[i], floats, "x", x, x_floats)) return false;
    for (int j = 0; j < i; ++j) {  // outputs must not share memory either
      const gk_tensor_desc other = {in->n, channels[j], in->h, in->w, in->layout};
      if (overlaps(ys[i], floats, ys[j], blocked(other).floats())) {
        set_last_error("%s: ys[%d] overlaps ys[%d]", fn, i, j);
        return false;
      }
    }
  }
  if (sum != in->c) {
    set_last_error("%s: channels sum to %" PRId64 ", in->c is %" PRId64, fn, sum, in->c);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- shuffle

// Output channel k of a shuffle with `groups` groups of `per_group` channels reads this
// input channel.
GK_INLINE int64_t shuffle_source(int64_t k, int64_t groups, int64_t per_group) {
  return k % groups * per_group + k / groups;
}

// Output row r (image, block, row) of a shuffle in a blocked layout (NCHWx, NHWC).
void shuffle_row(const Blocked& t, int64_t groups, const float* x, float* y, int64_t r) {
  const int64_t per_group = t.c / groups, i = r % t.h, ib = r / t.h, img = ib / t.blocks, b = ib % t.blocks;
  float* y_row = y + t.row_offset(img, b, i);
  if (t.blocks == 1 && t.lanes == t.c) {  // NHWC: each pixel's groups x per_group transposed
    const float* x_row = x + t.row_offset(img, 0, i);
    for (int64_t p = 0; p < t.w; ++p)
      for (int64_t q = 0; q < per_group; ++q)
        for (int64_t g = 0; g < groups; ++g) y_row[p * t.c + q * groups + g] = x_row[p * t.c + g * per_group + q];
    return;
  }
  // NCHWx: each lane from its own source row (x <= 16 of them).
  const float* src[16];
  const int64_t real = t.real_lanes(b);
  for (int64_t l = 0; l < real; ++l) {
    const int64_t s = shuffle_source(b * t.lanes + l, groups, per_group);
    src[l] = x + t.row_offset(img, s / t.lanes, i) + s % t.lanes;
  }
  for (int64_t p = 0; p < t.w; ++p)
    for (int64_t l = 0; l < real; ++l) y_row[p * t.lanes + l] = src[l][p * t.lanes];
  zero_padding_lanes(y_row, t.w, t.lanes, real);
}

}  // namespace
}  // namespace ops
}  // namespace gk

using gk::ops::Blocked;
using gk::ops::ChannelCopy;

GK_OPS_EXPORT gk_status gk_concat_channels(int count, const gk_tensor_desc* parts, const float* const* xs,
                                           const gk_tensor_desc* out, float* y) {
  const char* fn = "gk_concat_channels";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_concat(fn, count, parts, xs, out, y)) return GK_ERR_INVALID_ARGUMENT;
    const Blocked bo = gk::ops::blocked(*out);
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bo.floats())), [&] {
      int64_t c0 = 0;
      for (int i = 0; i < count; ++i) {
        const Blocked bp = gk::ops::blocked(parts[i]);
        gk::ops::copy_channels(ChannelCopy{&bp, xs[i], 0, &bo, y, c0, parts[i].c});
        c0 += parts[i].c;
      }
      gk::ops::zero_padding(bo, y);
    });
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_split_channels(const gk_tensor_desc* in, const float* x, int count,
                                          const int64_t* channels, float* const* ys) {
  const char* fn = "gk_split_channels";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_split(fn, in, x, count, channels, ys)) return GK_ERR_INVALID_ARGUMENT;
    const Blocked bi = gk::ops::blocked(*in);
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bi.floats())), [&] {
      int64_t c0 = 0;
      for (int i = 0; i < count; ++i) {
        const Blocked bp = gk::ops::blocked({in->n, channels[i], in->h, in->w, in->layout});
        gk::ops::copy_channels(ChannelCopy{&bi, x, c0, &bp, ys[i], 0, channels[i]});
        gk::ops::zero_padding(bp, ys[i]);
        c0 += channels[i];
      }
    });
    return GK_OK;
  });
}

GK_OPS_EXPORT gk_status gk_channel_shuffle(const gk_tensor_desc* t, int64_t groups, const float* x, float* y) {
  const char* fn = "gk_channel_shuffle";
  return gk::ops::guarded(fn, [&] {
    if (!gk::ops::check_tensor(fn, "t", t) || !gk::ops::check_pointer(fn, "x", x) ||
        !gk::ops::check_pointer(fn, "y", y))
      return GK_ERR_INVALID_ARGUMENT;
    if (groups < 1 || t->c % groups != 0) {
      gk::set_last_error("%s: groups %" PRId64 " must be >= 1 and divide t->c = %" PRId64, fn, groups, t->c);
      return GK_ERR_INVALID_ARGUMENT;
    }
    const Blocked bt = gk::ops::blocked(*t);
    if (!gk::ops::check_disjoint(fn, "y", y, bt.floats(), "x", x, bt.floats())) return GK_ERR_INVALID_ARGUMENT;
    const int64_t rows = bt.rows(), planes = bt.n * bt.c, plane = bt.h * bt.w, per_group = bt.c / groups;
    gk::parallel_region(gk::ops::threads_for_bytes(8.0 * double(bt.floats())), [&] {
      if (bt.lanes == 1) {  // NCHW: whole planes
#pragma omp for schedule(static)
        for (int64_t k = 0; k < planes; ++k) {
          const int64_t img = k / bt.c, src = gk::ops::shuffle_source(k % bt.c, groups, per_group);
          gk::conv::copy_run(y + k * plane, x + (img * bt.c + src) * plane, plane);
        }
        return;
      }
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) gk::ops::shuffle_row(bt, groups, x, y, r);
    });
    return GK_OK;
  });
}
