// Winograd F(m, 3) transform matrices, derived from interpolation points (Toom-Cook):
// y = A^T [ (G g) .* (B^T d) ] computes the m outputs y_i = sum_k d[i + k] g[k] of a
// 3-tap correlation over alpha = m + 2 inputs. With E_a, E_g the evaluation matrices of
// polynomials of m and 3 coefficients at the points (the point at infinity takes the
// leading coefficient) and V the evaluation matrix of degree alpha - 1, correlation is the
// transpose of linear convolution, so A = E_a, G = D E_g, B^T = D^-1 (V^-1)^T, where the
// diagonal D (1 / prod_{l != j}(p_j - p_l), the Lagrange denominators) cancels and only
// moves the scaling into G, which keeps B^T's entries small. Row-major doubles.
#pragma once
#include <vector>

namespace gk {
namespace conv {

struct WinogradMatrices {
  int m = 0, alpha = 0;
  std::vector<double> at;  // m x alpha
  std::vector<double> g;   // alpha x 3
  std::vector<double> bt;  // alpha x alpha
};

// m = 2, 4 or 6; points 0, +-1 (F(2,3)); 0, +-1, +-2 (F(4,3)); 0, +-1, +-2, +-1/2 (F(6,3)).
WinogradMatrices winograd_matrices(int m);

}  // namespace conv
}  // namespace gk
