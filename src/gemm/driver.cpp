// The Goto / BLIS five-loop driver with packed A and B, threaded with OpenMP.
//
//   for jc in N step NC:          B block (KC x NC) packed once, shared by all threads
//     for pc in K step KC:        balanced: a tail between KC and 2*KC is split in halves
//       pack B cooperatively; barrier  (a small block: each thread packs its own panels)
//       for ic in my rows step MC:    each thread packs its own A block (L2)
//         for jr in my panels:        B micro-panel stays in L1 ...
//           for ir in MC step MR:     ... while A micro-panels stream through it
//       barrier (B is repacked next)
//
// Threads split the (ic, jr) work as a wm x wn grid chosen per NC block to balance tiles.
// When all of M fits one MC block, B micro-panels are instead packed just before use
// (gemm_packed_b_per_panel). The calling thread takes every buffer (a part per thread)
// before the work is split, or is given them by its caller; without them the product runs
// on gemm_no_heap.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/runtime.h"
#include "common/simd.h"
#include "gemm/gemm.h"
#include "gemm/partition.h"

namespace gk {
namespace {

// The A block of rows [ic, ic + mc) x K range [pc, pc + kc), as micro-panels.
APanels pack_a_block(const GemmProblem& p, int mr, int64_t ic, int64_t mc, int64_t pc, int64_t kc, float* a_block) {
  return p.a->block(ic, mc, pc, kc, mr, a_block);
}

// Prefetches rows x cols of C for writing (each row's first and last line).
GK_INLINE void prefetch_c_tile(float* c, int64_t rs_c, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    __builtin_prefetch(c + i * rs_c, 1);
    __builtin_prefetch(c + i * rs_c + cols - 1, 1);
  }
}

// What the ir loop prefetches, spread over its kernel calls: columns [j, j + cols) of K
// range [k0, k0 + kc) of the B source (panels still to be packed), parts [first_part,
// first_part + calls) of `parts` (0: one part per call), the source slicing the region
// along its own layout; or, when `packed` is set, `packed_floats` of a B panel already
// packed.
struct PrefetchTarget {
  int64_t k0 = 0, kc = 0, j = 0, cols = 0;
  int64_t first_part = 0, parts = 0;
  const float* packed = nullptr;
  int64_t packed_floats = 0;
};

// Lines [first, first + count) of a packed buffer, into L2 (prefetcht1): the panel in use
// fills much of L1.
constexpr int64_t kLineFloats = 16;  // floats per 64-byte cache line
GK_INLINE void prefetch_packed_lines(const float* packed, int64_t floats, int64_t first, int64_t count) {
  const int64_t end = std::min(ceil_div(floats, kLineFloats), first + count);
  for (int64_t line = first; line < end; ++line) __builtin_prefetch(packed + line * kLineFloats, 0, 2);
}

// For a kernel that prefetches its own C late (KernelInfo::prefetches_c_late, 64 k steps
// before its end), the driver prefetches the next call's C tile only up to this K. Past
// it the kernel's prefetch has time to land, and the driver's, a whole call early, only
// evicted lines: with C's rows a power of two apart all 14 rows of a 14x32 tile share one
// L1 set. Intel Xeon model 207, 1 thread, 2048^3 203-205 -> 211-215 GFLOP/s.
constexpr int64_t kDriverPrefetchesCMaxK = 64;

// The ir loop: every A micro-panel of the block against one packed B micro-panel. After
// each kernel call it prefetches a slice of `next` (if any), so fetching the next B panel
// overlaps this panel's computation.
//
// `converge`: other threads have the rows before and after the block, and its tiles run
// from both ends toward the middle. Down the rows, a core's prefetchers learn the step
// from one tile to the next and take the tiles past the block's end for writing: the
// rows of the next thread, which then writes them from this core's cache (420 ns a line
// on the Zen 5 VM), every pass. 2 threads, 224 rows each, B blocks per thread, us, down /
// toward the middle: 448x249x9 NT 33.7-34.4 / 15.3-16.1, 896x249x9 38.3-41.4 / 23.9-24.3;
// with the B blocks per thread, 256^3 from 207 to 142 and 1024^3 from 9.1 to 8.7 ms. On
// one thread the rows run down (448x249x9 14.8 us, 16.0 the other way: C's lines are
// fetched ahead).
void run_panel_column(const GemmProblem& p, const KernelInfo& ker, int64_t ic, int64_t mc,
                      int64_t j, int64_t cols, int64_t kc, float beta, bool last_k,
                      const APanels& a_panels, const float* b_panel,
                      const PrefetchTarget& next = {}, int64_t rs_b = 0, bool converge = false) {
  if (!rs_b) rs_b = ker.nr;  // B packed at the kernel's width
  const int64_t calls = ceil_div(mc, ker.mr);
  const int64_t packed_slice = ceil_div(ceil_div(next.packed_floats, kLineFloats), calls);
  auto prefetch_next_b = [&](int64_t call) {
    if (next.packed) return prefetch_packed_lines(next.packed, next.packed_floats, call * packed_slice, packed_slice);
    if (next.kc > 0)
      p.b->prefetch(next.k0, next.kc, next.j, next.cols, next.first_part + call, next.parts ? next.parts : calls);
  };
  // Tile `call` of the order: down the rows, or from both ends toward the middle (0, n - 1,
  // 1, n - 2, ...).
  auto tile_row = [&](int64_t t) { return (!converge ? t : t % 2 ? calls - 1 - t / 2 : t / 2) * ker.mr; };
  FullTiles full(ker, cols, kc, p.alpha, b_panel, rs_b, beta, p.rs_c, last_k ? &p.epilogue : nullptr);
  const bool full_ready = !p.c_block_stride && full.ready();
  for (int64_t call = 0; call < calls; ++call) {
    const int64_t ir = tile_row(call), rows = std::min<int64_t>(ker.mr, mc - ir);
    if (p.c_block_stride) {
      run_ukernel_blocked_c(ker, rows, cols, kc, p.alpha, a_panels[ir / ker.mr], b_panel, rs_b, beta, p.c,
                            p.c_block_stride, last_k ? &p.epilogue : nullptr, ic + ir, j);
    } else {
      // The next call's C tile, for writing: when C is not in cache (a conv output, K
      // small) its read-for-ownership would otherwise stall the store of this tile.
      if (call + 1 < calls && (!ker.prefetches_c_late || kc <= kDriverPrefetchesCMaxK)) {
        const int64_t next_ir = tile_row(call + 1);
        prefetch_c_tile(p.c + (ic + next_ir) * p.rs_c + j, p.rs_c, std::min<int64_t>(ker.mr, mc - next_ir), cols);
      }
      if (rows == ker.mr && full_ready) {
        full.run(a_panels[ir / ker.mr], p.c + (ic + ir) * p.rs_c + j, ic + ir);
      } else {
        run_ukernel(ker, rows, cols, kc, p.alpha, a_panels[ir / ker.mr], b_panel, rs_b, beta,
                    p.c + (ic + ir) * p.rs_c + j, p.rs_c, last_k ? &p.epilogue : nullptr, ic + ir, j);
      }
    }
    prefetch_next_b(call);
  }
}

// B micro-panels packed in one pass (BPacker::pack_panels): runs of 8 x 24 floats, 12
// cache lines, from each row of B.
constexpr int64_t kPanelsPackedTogether = 8;

// All of M in one MC block: each thread takes a share of the B micro-panels and packs
// them just before their ir loops, into a buffer that stays in L1/L2. The packed B block
// of the general path would not fit L2 when N is large (336 x 3136 floats is 4 MiB), so
// for few rows its trip through L3 and back costs more than it saves. Nothing is shared
// between threads, so there are no barriers; each thread packs the (small) A block.
//
// How many full-width panels are packed in one pass: the A block leaves (MC - M) / NR
// panels' worth of the half of L2 that MC was sized for. With few rows the kernel is
// quick and B's packing is the cost: one panel at a time read 96 bytes of each of KC
// rows of B per pass, 8 at a time read 768 contiguous bytes. Median GFLOP/s, 1 thread,
// one panel / grouped: 96x12544x32 50-57 / 57-74, 24x4000x4000 41-42 / 45-48,
// 16x1000x512 49-52 / 54-58, 64x3136x576 and 128x784x1152 equal. With MC rows there is
// no room, and one panel stays in L1 as before.
int64_t panels_per_pass(const KernelConfig& cfg, int64_t m) {
  const int64_t room = (cfg.mc - round_up(m, cfg.kernel->mr)) / cfg.kernel->nr;
  return std::clamp<int64_t>(room, 1, kPanelsPackedTogether);
}

bool gemm_packed_b_per_panel(const GemmProblem& p, const KernelConfig& cfg, int threads, const PackingMemory* given) {
  const KernelInfo& ker = *cfg.kernel;
  const int mr = ker.mr, nr = ker.nr;
  const int64_t mc = p.m;
  const int64_t group = panels_per_pass(cfg, mc);
  const PackingSizes sizes = packing_sizes(p.m, p.n, p.k, p.a->prepacked(), cfg);
  const int64_t a_floats = sizes.a_floats;
  ThreadParts a_blocks, b_passes;
  if (given) {  // each thread's part: its A block, then its B panels
    a_blocks = {given->blocks, given->stride};
    b_passes = {given->blocks + round_up(a_floats, kLineFloats), given->stride};
  } else {
    if (a_floats) a_blocks = thread_parts(ScratchSlot::PackedA, threads, a_floats);
    b_passes = thread_parts(ScratchSlot::PackedB, threads, sizes.b_floats);
  }
  if ((a_floats && !a_blocks.parts) || !b_passes.parts)
    return workspace_unavailable("the packing buffers", threads * (a_floats + sizes.b_floats));
  const ColumnPanels panels(ker, p.n);
  const int64_t c_span = p.c_block_stride ? ceil_div(mc, 8) * p.c_block_stride : mc * p.rs_c;
  parallel_parts(threads, [&](int tid, int nt) {
    float* a_block = a_floats ? a_blocks.part(tid) : nullptr;
    float* b_panels = b_passes.part(tid);
    APanels a_panels;
    const int64_t count = panels.size();
    const Range mine = share(count, tid, nt, 1, count);
    auto full = [&](int64_t q) { return panels[q].cols == nr; };
    auto pass_length = [&](int64_t q) {  // full-width panels packed together from q
      int64_t run = 1;
      while (run < group && q + run < mine.end && full(q) && full(q + run)) ++run;
      return run;
    };
    for_each_balanced_block(p.k, cfg.kc, 1, [&](int64_t pc, int64_t kc) {
      const bool last_k = pc + kc == p.k;
      const float beta = pc == 0 ? p.beta : 1.0f;
      if (mine.begin < mine.end) a_panels = pack_a_block(p, mr, 0, mc, pc, kc, a_block);
      for (int64_t q = mine.begin; q < mine.end;) {
        const int64_t run = pass_length(q);
        const ColumnPanel first = panels[q];
        int64_t rs_in_place = 0;
        const float* in_place = first.cols == nr ? p.b->rows_in_place(pc, first.j, &rs_in_place) : nullptr;
        if (in_place && !b_panel_rows_in_place(cfg.paths, kc, nr, rs_in_place, c_span)) in_place = nullptr;
        if (in_place) {  // the kernel reads the panel from B; the next one prefetched as packing would
          PrefetchTarget next_pass;
          if (q + 1 < mine.end) next_pass = {pc, kc, panels[q + 1].j, panels[q + 1].cols};
          run_panel_column(p, ker, 0, mc, first.j, nr, kc, beta, last_k, a_panels, in_place, next_pass, rs_in_place);
          ++q;
          continue;
        }
        if (run > 1) {
          p.b->pack_panels(pc, kc, first.j, run * nr, nr, b_panels);
        } else {
          p.b->pack_panel(pc, kc, first.j, first.cols, static_cast<int>(first.width), b_panels);
        }
        // The next pass's region, a share of it prefetched (into L2) after each kernel call
        // of this pass. Against prefetching only the next pass's first panel during
        // this pass's last, same-process alternation, median GFLOP/s: 64x3136x576 +9-21%,
        // 64x12544x147 +12-28%, 24x4000x4000 +13-19%, 48x12544x64 +12%, 128x784x1152 +5%;
        // with 16-32 rows and B in cache -7..+6%, within this VM's noise.
        PrefetchTarget next_pass;
        if (q + run < mine.end) {
          const int64_t nq = q + run;
          const ColumnPanel n0 = panels[nq];
          const ColumnPanel nl = panels[nq + pass_length(nq) - 1];
          next_pass = {pc, kc, n0.j, nl.j + nl.cols - n0.j};
        }
        const int64_t calls_per_panel = ceil_div(mc, mr);
        for (int64_t g = 0; g < run; ++g) {
          const ColumnPanel c = panels[q + g];
          PrefetchTarget next = next_pass;
          next.first_part = g * calls_per_panel;
          next.parts = run * calls_per_panel;
          run_panel_column(p, ker, 0, mc, c.j, c.cols, kc, beta, last_k, a_panels,
                           b_panels + g * kc * nr, next, c.width);
        }
        q += run;
      }
    });
  });
  return true;
}

// The general case: the B block (KC x NC) is packed once by all threads together and
// shared, or within private_b_max_bytes by each thread for itself (its panels); threads
// split the (ic, jr) work as a grid.
bool gemm_packed_shared_b(const GemmProblem& p, const KernelConfig& cfg, int threads, const PackingMemory* given) {
  const KernelInfo& ker = *cfg.kernel;
  const int mr = ker.mr, nr = ker.nr;
  const PackingSizes sizes = packing_sizes(p.m, p.n, p.k, p.a->prepacked(), cfg);
  const bool private_b = sizes.private_b;
  // Each thread's part: its A block, then (private_b) its B block.
  const int64_t a_floats = sizes.a_floats, b_offset = round_up(a_floats, kLineFloats);
  const int64_t part_floats = private_b ? b_offset + sizes.b_floats : a_floats;
  float* shared_b = private_b ? nullptr : given ? given->shared : scratch(ScratchSlot::PackedB, sizes.b_floats);
  ThreadParts parts;
  if (part_floats)
    parts = given ? ThreadParts{given->blocks, given->stride} : thread_parts(ScratchSlot::PackedA, threads, part_floats);
  if ((!private_b && !shared_b) || (part_floats && !parts.parts))
    return workspace_unavailable("the packed blocks", (private_b ? 0 : sizes.b_floats) + threads * part_floats);

  parallel_parts(threads, [&](int tid, int nt) {
    float* a_block = a_floats ? parts.part(tid) : nullptr;
    float* b_block = private_b ? parts.part(tid) + b_offset : shared_b;
    // Alone (nt == 1, maybe on a thread of someone else's team) no barrier is needed, and
    // one would bind to that team; with B blocks of their own, threads share nothing.
    auto barrier = [nt, private_b] {
      if (nt > 1 && !private_b) {
#pragma omp barrier
      }
    };

    for_each_balanced_block(p.n, cfg.nc, nr, [&](int64_t jc, int64_t nc) {
      const int64_t panels = ceil_div(nc, nr), row_tiles = ceil_div(p.m, mr);
      const ThreadGrid grid = choose_grid(nt, row_tiles, panels);
      const Range rows = share(row_tiles, tid / grid.wn, grid.wm, mr, p.m);
      const Range my_panels = share(panels, tid % grid.wn, grid.wn, 1, panels);
      const Range packed_by_me = !private_b ? share(panels, tid, nt, 1, panels)
                                 : rows.begin < rows.end ? my_panels : Range{0, 0};

      for_each_balanced_block(p.k, cfg.kc, 1, [&](int64_t pc, int64_t kc) {
        const bool last_k = pc + kc == p.k;
        const float beta = pc == 0 ? p.beta : 1.0f;
        for (int64_t q = packed_by_me.begin; q < packed_by_me.end; q += kPanelsPackedTogether)
          p.b->pack_panels(pc, kc, jc + q * nr,
                           std::min(std::min(packed_by_me.end - q, kPanelsPackedTogether) * nr, nc - q * nr), nr,
                           b_block + q * kc * nr);
        barrier();
        for_each_balanced_block(rows.end - rows.begin, cfg.mc, mr, [&](int64_t off, int64_t mc) {
          const int64_t ic = rows.begin + off;
          const APanels a_panels = pack_a_block(p, mr, ic, mc, pc, kc, a_block);
          for (int64_t q = my_panels.begin; q < my_panels.end; ++q) {
            // The next packed panel, into L2 while this one runs (it was packed into L3, or
            // by another thread into a shared block): same-process alternation, median GFLOP/s, 1 thread,
            // without / with: 1024^3 74.9 / 76.2, 77.4 / 77.5, 77.3 / 77.9; 1536^3 86.1 /
            // 88.2; 2048^3 76.6 / 79.2; 2 threads 1024^3 158 / 158. The macro-kernel alone
            // (192 x 336 A block, 4080 columns): 84.3 / 86.7.
            PrefetchTarget next;
            if (q + 1 < my_panels.end) next.packed = b_block + (q + 1) * kc * nr, next.packed_floats = kc * nr;
            run_panel_column(p, ker, ic, mc, jc + q * nr, std::min<int64_t>(nr, nc - q * nr), kc,
                             beta, last_k, a_panels, b_block + q * kc * nr, next, 0, grid.wm > 1);
          }
        });
        barrier();
      });
    });
  });
  return true;
}

}  // namespace

bool workspace_unavailable(const char* what, int64_t floats) {
  note_no_heap_fallback(what, floats);
  return false;
}

ThreadParts thread_parts(ScratchSlot slot, int threads, int64_t each) {
  const int64_t stride = round_up(std::max<int64_t>(each, 1), kLineFloats);  // no line shared between threads
  return {scratch(slot, std::max(threads, 1) * stride), stride};
}

PackingSizes packing_sizes(int64_t m, int64_t n, int64_t k, bool a_prepacked, const KernelConfig& cfg) {
  const int64_t mr = cfg.kernel->mr, nr = cfg.kernel->nr, kc_max = std::min(cfg.kc, k);
  GemmProblem shape;
  shape.m = m;
  PackingSizes s;
  s.per_panel = packs_b_per_panel(shape, cfg);
  if (s.per_panel) {
    s.a_floats = a_prepacked ? 0 : round_up(m, mr) * kc_max;
    s.b_floats = kc_max * nr * panels_per_pass(cfg, m);
  } else {
    s.a_floats = a_prepacked ? 0 : std::min(cfg.mc, round_up(m, mr)) * kc_max;
    s.b_floats = kc_max * std::min(cfg.nc, round_up(n, nr));
    s.private_b = s.b_floats * 4 <= cfg.paths.private_b_max_bytes;
  }
  return s;
}

PackingNeed packing_need(int64_t m, int64_t n, int64_t k, bool a_prepacked, const KernelConfig& cfg) {
  const PackingSizes s = packing_sizes(m, n, k, a_prepacked, cfg);
  if (s.per_panel || s.private_b) return {0, round_up(s.a_floats, kLineFloats) + s.b_floats};
  return {s.b_floats, s.a_floats};
}

void gemm_packed(const GemmProblem& p, const KernelConfig& cfg, int threads, const PackingMemory* given) {
  if (given && threads > given->threads) threads = given->threads;
  const bool done = packs_b_per_panel(p, cfg) ? gemm_packed_b_per_panel(p, cfg, threads, given)
                                              : gemm_packed_shared_b(p, cfg, threads, given);
  if (!done) gemm_no_heap(p, cfg);
}

}  // namespace gk
