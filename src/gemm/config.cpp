// Kernel selection, cache-derived blocking, and the configuration the user can inspect.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/c_boundary.h"
#include "common/runtime.h"
#include "gemm/gemm.h"
#include "gemmkit.h"

namespace gk {
namespace {

int64_t round_down_to(int64_t v, int64_t step) { return std::max(step, v / step * step); }

}  // namespace

// Blocking (BLIS analytical model, refined by measurement with perf/bench_gemm):
//  - KC: each kernel's table entry holds the KC measured best with a 32 KiB L1d (Zen 3:
//    4x24 best at 336 among 168/256/336, 6x16 at 256 among 128..512); it scales with the
//    detected L1d, since the KC x NR B micro-panel is what must stay in L1.
//  - MC: the MC x KC packed A block takes half of L2 (the other half: B panels, C tiles).
//  - NC: the KC x NC packed B block takes half of L3, at most 4096 columns.
// Defaults from the kernel table when a level is unknown; GEMMKIT_MC/KC/NC override.
KernelConfig derive_blocking(const KernelInfo& kernel) {
  const CacheSizes& c = caches();
  const int64_t l1 = c.l1d, l2 = c.l2, l3 = c.l3;
  KernelConfig cfg{&kernel, kernel.default_mc, kernel.default_kc, kernel.default_nc, path_limits(kernel)};
  if (c.l1d_detected) cfg.kc = std::clamp<int64_t>(round_down_to(kernel.default_kc * l1 / (32 << 10), 8), 64, 1024);
  if (c.l2_detected) cfg.mc = std::clamp<int64_t>(round_down_to(l2 / 2 / (cfg.kc * 4), kernel.mr),
                                       kernel.mr, 2048);
  if (c.l3_detected) cfg.nc = std::clamp<int64_t>(round_down_to(l3 / 2 / (cfg.kc * 4), kernel.nr),
                                       kernel.nr, 4096 / kernel.nr * kernel.nr);
  cfg.mc = round_down_to(env_int("GEMMKIT_MC", cfg.mc), kernel.mr);
  cfg.kc = std::max<int64_t>(1, env_int("GEMMKIT_KC", cfg.kc));
  cfg.nc = round_down_to(env_int("GEMMKIT_NC", cfg.nc), kernel.nr);
  return cfg;
}

namespace {

// Nothing here allocates: the first GEMM of a process short of memory must still find its
// kernel (the no-heap path needs one too).
struct Registry {
  static constexpr int kMaxKernels = 16;
  KernelConfig configs[kMaxKernels];  // one per table entry, same order
  int count = 0;
  std::atomic<const KernelConfig*> active{nullptr};
  std::mutex mutex;
  char description[512] = "";  // gk_config_string's, guarded by `mutex`

  Registry() {
    const KernelInfo* table = arch_kernels(&count);
    count = std::min(count, kMaxKernels);
    for (int i = 0; i < count; ++i) configs[i] = derive_blocking(table[i]);
    const char* forced = std::getenv("GEMMKIT_KERNEL");
    if (forced && *forced && !choose(forced))
      std::fprintf(stderr,
                   "gemmkit: GEMMKIT_KERNEL=%s is unknown or not supported by this CPU; "
                   "using automatic selection\n",
                   forced);
    if (!active.load()) choose("");
  }

  // "" picks the first supported automatic entry (the table is ordered best first).
  bool choose(const char* name) {
    for (int i = 0; i < count; ++i) {
      const KernelConfig& cfg = configs[i];
      const bool named = *name ? std::strcmp(name, cfg.kernel->name) == 0 : cfg.kernel->automatic;
      if (named && cfg.kernel->cpu_supports()) {
        active.store(&cfg);
        return true;
      }
    }
    return false;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const KernelConfig& active_config() { return *registry().active.load(std::memory_order_acquire); }

namespace {
// A kernel convolutions can run in the blocked layouts in place: its own pointwise
// kernels, the epilogue fused, an MR that divides the 8 channels of an NCHW8 block.
bool serves_blocked_conv(const KernelInfo& k) { return k.pointwise[0].fn && k.fused_epilogue && 8 % k.mr == 0; }
}  // namespace

const KernelConfig& conv_config() {
  Registry& r = registry();
  const KernelConfig* active = r.active.load(std::memory_order_acquire);
  if (serves_blocked_conv(*active->kernel)) return *active;
  // The table is best first: the next entry that serves, as the CPU runs it.
  for (int i = int(active - r.configs) + 1; i < r.count; ++i)
    if (r.configs[i].kernel->cpu_supports() && serves_blocked_conv(*r.configs[i].kernel)) return r.configs[i];
  return *active;
}

const KernelInfo& pointwise_kernel() {
  const KernelInfo& active = *active_config().kernel;
  return active.pointwise[0].fn ? active : *conv_config().kernel;
}

bool select_kernel(const char* name) { return registry().choose(name); }

}  // namespace gk

extern "C" {

__attribute__((visibility("default"))) const char* gk_config_string(void) {
  const char* result = "gemmkit: configuration unavailable";
  gk::guard_c_boundary("gk_config_string", [&] {
    gk::Registry& r = gk::registry();
    const gk::KernelConfig& cfg = gk::active_config();
    const gk::CpuInfo& c = gk::cpu();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::snprintf(r.description, sizeof r.description,
                  "gemmkit %s; kernel %s (%s) %dx%d; MC=%lld KC=%lld NC=%lld; "
                  "caches L1d=%lldK L2=%lldK L3=%lldK, TLB reach %lldK; threads=%d%s; cpu=%s",
                  GEMMKIT_VERSION_STRING, cfg.kernel->name, cfg.kernel->isa, cfg.kernel->mr,
                  cfg.kernel->nr, (long long)cfg.mc, (long long)cfg.kc, (long long)cfg.nc,
                  (long long)(c.l1d_bytes >> 10), (long long)(c.l2_bytes >> 10),
                  (long long)(c.l3_bytes >> 10), (long long)(gk::caches().tlb_reach >> 10), gk_get_num_threads(),
                  gk::in_forked_child_serial_mode() ? " (forked child: serial)" : "",
                  c.model.c_str());
    result = r.description;
    return GK_OK;
  });
  return result;
}

__attribute__((visibility("default"))) const char* gk_kernel_name(void) {
  const char* name = "unknown";
  gk::guard_c_boundary("gk_kernel_name", [&] {
    name = gk::active_config().kernel->name;
    return GK_OK;
  });
  return name;
}

__attribute__((visibility("default"))) gk_status gk_set_kernel(const char* name) {
  return gk::guard_c_boundary("gk_set_kernel", [&] {
    if (gk::select_kernel(name ? name : "")) return GK_OK;
    gk::set_last_error("gk_set_kernel: kernel '%s' is unknown or not supported by this CPU", name);
    return GK_ERR_UNSUPPORTED;
  });
}
}
