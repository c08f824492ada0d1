// Winograd F(m, 3) transform matrices, derived from interpolation points (Toom-Cook):
// y = A^T [ (G g) .* (B^T d) ] computes the m outputs y_i = sum_k d[i + k] g[k] of a
// 3-tap correlation over alpha = m + 2 inputs. With E_a, E_g the evaluation matrices of
// polynomials of m and 3 coefficients at the points (the point at infinity takes the
// leading coefficient) and V the evaluation matrix of degree alpha - 1, correlation is the
// transpose of linear convolution, so A = E_a, G = D E_g, B^T = D^-1 (V^-1)^T, where the
// diagonal D (1 / prod_{l != j}(p_j - p_l), the Lagrange denominators) cancels and only
// moves the scaling into G, which keeps B^T's entries small.
//
// Points: 0, +-1 (F(2,3)); 0, +-1, +-2 (F(4,3)); 0, +-1, +-2, +-1/2 (F(6,3)), the
// choice that keeps the entries of A and B^T smallest (Lavin & Gray; Barabasz et al.).
//
// Everything is constexpr: the transforms are compiled against these constants, so their
// zeros cost nothing and their +-1 entries no multiplication.
#pragma once
#include <vector>

namespace gk {
namespace conv {

template <int M>
struct WinogradConstants {
  static constexpr int kAlpha = M + 2;
  double at[M][kAlpha];       // output transform A^T, m x alpha
  double g[kAlpha][3];        // weight transform G, alpha x 3
  double bt[kAlpha][kAlpha];  // input transform B^T, alpha x alpha
};

namespace toom_cook_detail {

constexpr double power(double x, int n) {
  double r = 1.0;
  for (int i = 0; i < n; ++i) r *= x;
  return r;
}
constexpr double magnitude(double x) { return x < 0 ? -x : x; }

template <int N>
struct Square {
  double v[N][N];
};

// Inverse by Gauss-Jordan with partial pivoting.
template <int N>
constexpr Square<N> inverse(Square<N> a) {
  Square<N> inv{};
  for (int i = 0; i < N; ++i) inv.v[i][i] = 1.0;
  for (int col = 0; col < N; ++col) {
    int pivot = col;
    for (int r = col + 1; r < N; ++r)
      if (magnitude(a.v[r][col]) > magnitude(a.v[pivot][col])) pivot = r;
    for (int k = 0; k < N; ++k) {
      double t = a.v[col][k];
      a.v[col][k] = a.v[pivot][k], a.v[pivot][k] = t;
      t = inv.v[col][k];
      inv.v[col][k] = inv.v[pivot][k], inv.v[pivot][k] = t;
    }
    const double p = a.v[col][col];
    for (int k = 0; k < N; ++k) a.v[col][k] /= p, inv.v[col][k] /= p;
    for (int r = 0; r < N; ++r) {
      if (r == col) continue;
      const double f = a.v[r][col];
      for (int k = 0; k < N; ++k) a.v[r][k] -= f * a.v[col][k], inv.v[r][k] -= f * inv.v[col][k];
    }
  }
  return inv;
}

// Row j of the evaluation matrix of polynomials with `coeffs` coefficients: p_j^i, or for
// the point at infinity (j == alpha - 1) the leading coefficient.
template <int M>
constexpr double eval(int j, int i, int coeffs) {
  constexpr double points[] = {0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5};
  if (j == M + 1) return i == coeffs - 1 ? 1.0 : 0.0;
  return power(points[j], i);
}

}  // namespace toom_cook_detail

template <int M>
constexpr WinogradConstants<M> toom_cook() {
  using namespace toom_cook_detail;
  static_assert(M == 2 || M == 4 || M == 6, "F(2,3), F(4,3) and F(6,3) only");
  constexpr int a = M + 2, n = a - 1;  // n finite points
  Square<a> v{};
  for (int j = 0; j < a; ++j)
    for (int i = 0; i < a; ++i) v.v[j][i] = eval<M>(j, i, a);
  const Square<a> c = inverse(v);  // values -> coefficients
  double scale[a] = {};
  for (int j = 0; j < a; ++j) scale[j] = 1.0;
  for (int j = 0; j < n; ++j)
    for (int l = 0; l < n; ++l)
      if (l != j) scale[j] /= eval<M>(j, 1, a) - eval<M>(l, 1, a);
  WinogradConstants<M> w{};
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < a; ++j) w.at[i][j] = eval<M>(j, i, M);
  for (int j = 0; j < a; ++j)
    for (int k = 0; k < 3; ++k) w.g[j][k] = scale[j] * eval<M>(j, k, 3);
  for (int j = 0; j < a; ++j)
    for (int i = 0; i < a; ++i) w.bt[j][i] = c.v[i][j] / scale[j];
  return w;
}

template <int M>
inline constexpr WinogradConstants<M> kWinograd = toom_cook<M>();

// The same matrices as row-major vectors, for code that picks m at run time (tests).
struct WinogradMatrices {
  int m = 0, alpha = 0;
  std::vector<double> at;  // m x alpha
  std::vector<double> g;   // alpha x 3
  std::vector<double> bt;  // alpha x alpha
};
WinogradMatrices winograd_matrices(int m);  // m = 2, 4 or 6

}  // namespace conv
}  // namespace gk
