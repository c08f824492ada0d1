#include "conv/winograd_matrices.h"

namespace gk {
namespace conv {
namespace {

template <int M>
WinogradMatrices flatten() {
  constexpr const WinogradConstants<M>& c = kWinograd<M>;
  constexpr int a = M + 2;
  WinogradMatrices w;
  w.m = M, w.alpha = a;
  w.at.assign(&c.at[0][0], &c.at[0][0] + M * a);
  w.g.assign(&c.g[0][0], &c.g[0][0] + a * 3);
  w.bt.assign(&c.bt[0][0], &c.bt[0][0] + a * a);
  return w;
}

}  // namespace

WinogradMatrices winograd_matrices(int m) {
  return m == 2 ? flatten<2>() : m == 4 ? flatten<4>() : flatten<6>();
}

}  // namespace conv
}  // namespace gk
