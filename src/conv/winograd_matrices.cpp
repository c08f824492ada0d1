#include "conv/winograd_matrices.h"

#include <cmath>
#include <utility>

namespace gk {
namespace conv {
namespace {

// Inverse of an n x n row-major matrix by Gauss-Jordan with partial pivoting.
std::vector<double> inverse(std::vector<double> a, int n) {
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i) inv[size_t(i * n + i)] = 1.0;
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r)
      if (std::fabs(a[size_t(r * n + col)]) > std::fabs(a[size_t(pivot * n + col)])) pivot = r;
    for (int k = 0; k < n; ++k) {
      std::swap(a[size_t(col * n + k)], a[size_t(pivot * n + k)]);
      std::swap(inv[size_t(col * n + k)], inv[size_t(pivot * n + k)]);
    }
    const double p = a[size_t(col * n + col)];
    for (int k = 0; k < n; ++k) a[size_t(col * n + k)] /= p, inv[size_t(col * n + k)] /= p;
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[size_t(r * n + col)];
      for (int k = 0; k < n; ++k) {
        a[size_t(r * n + k)] -= f * a[size_t(col * n + k)];
        inv[size_t(r * n + k)] -= f * inv[size_t(col * n + k)];
      }
    }
  }
  return inv;
}

// Row j of the evaluation matrix of polynomials with `coeffs` coefficients: p_j^i, or for
// the point at infinity (j == alpha - 1) the leading coefficient.
double eval(const std::vector<double>& points, int j, int i, int coeffs) {
  if (j == static_cast<int>(points.size())) return i == coeffs - 1 ? 1.0 : 0.0;
  return std::pow(points[size_t(j)], i);
}

}  // namespace

WinogradMatrices winograd_matrices(int m) {
  std::vector<double> points = {0.0, 1.0, -1.0};
  if (m >= 4) points.insert(points.end(), {2.0, -2.0});
  if (m >= 6) points.insert(points.end(), {0.5, -0.5});
  WinogradMatrices w;
  w.m = m;
  w.alpha = m + 2;
  const int a = w.alpha, n = a - 1;  // n finite points
  std::vector<double> v(size_t(a * a));
  for (int j = 0; j < a; ++j)
    for (int i = 0; i < a; ++i) v[size_t(j * a + i)] = eval(points, j, i, a);
  const std::vector<double> c = inverse(v, a);  // values -> coefficients
  std::vector<double> scale(size_t(a), 1.0);
  for (int j = 0; j < n; ++j)
    for (int l = 0; l < n; ++l)
      if (l != j) scale[size_t(j)] /= points[size_t(j)] - points[size_t(l)];
  w.at.assign(size_t(m * a), 0.0);
  w.g.assign(size_t(a * 3), 0.0);
  w.bt.assign(size_t(a * a), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < a; ++j) w.at[size_t(i * a + j)] = eval(points, j, i, m);
  for (int j = 0; j < a; ++j)
    for (int k = 0; k < 3; ++k) w.g[size_t(j * 3 + k)] = scale[size_t(j)] * eval(points, j, k, 3);
  for (int j = 0; j < a; ++j)
    for (int i = 0; i < a; ++i) w.bt[size_t(j * a + i)] = c[size_t(i * a + j)] / scale[size_t(j)];
  return w;
}

}  // namespace conv
}  // namespace gk
