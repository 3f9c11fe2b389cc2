// stats/regression.cc: least squares by the normal equations (contract in regression.h).
#include "stats/regression.h"

#include <cmath>
#include <utility>

namespace bakeoff::stats {

std::optional<LinearFit> FitLinear(const std::vector<std::vector<double>>& rows, const std::vector<double>& y) {
  const std::size_t n = y.size();
  if (rows.size() != n || n == 0) return std::nullopt;
  const std::size_t k = rows.front().size() + 1;  // with the intercept
  if (n < k) return std::nullopt;
  for (const std::vector<double>& row : rows) {
    if (row.size() + 1 != k) return std::nullopt;
  }
  // Centred normal equations: the intercept comes out of the means, which keeps them well scaled.
  std::vector<double> mean_x(k - 1, 0);
  double mean_y = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j + 1 < k; ++j) mean_x[j] += rows[i][j] / static_cast<double>(n);
    mean_y += y[i] / static_cast<double>(n);
  }
  const std::size_t m = k - 1;
  std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0));  // [X'X | X'y]
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t r = 0; r < m; ++r) {
      const double xr = rows[i][r] - mean_x[r];
      for (std::size_t c = 0; c < m; ++c) a[r][c] += xr * (rows[i][c] - mean_x[c]);
      a[r][m] += xr * (y[i] - mean_y);
    }
  }
  // Gaussian elimination with partial pivoting.
  for (std::size_t col = 0; col < m; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < m; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    double scale = 0;
    for (std::size_t r = 0; r < m; ++r) scale = std::max(scale, std::abs(a[r][r]));
    if (!(std::abs(a[pivot][col]) > 1e-12 * std::max(scale, 1e-300))) return std::nullopt;
    std::swap(a[col], a[pivot]);
    for (std::size_t r = 0; r < m; ++r) {
      if (r == col) continue;
      const double factor = a[r][col] / a[col][col];
      for (std::size_t c = col; c <= m; ++c) a[r][c] -= factor * a[col][c];
    }
  }
  LinearFit fit;
  fit.coefficients.assign(k, 0);
  double intercept = mean_y;
  for (std::size_t j = 0; j < m; ++j) {
    fit.coefficients[j + 1] = a[j][m] / a[j][j];
    intercept -= fit.coefficients[j + 1] * mean_x[j];
  }
  fit.coefficients[0] = intercept;
  double ss_residual = 0, ss_total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double fitted = intercept;
    for (std::size_t j = 0; j < m; ++j) fitted += fit.coefficients[j + 1] * rows[i][j];
    fit.residuals.push_back(y[i] - fitted);
    ss_residual += fit.residuals.back() * fit.residuals.back();
    ss_total += (y[i] - mean_y) * (y[i] - mean_y);
  }
  fit.r_squared = ss_total > 0 ? 1 - ss_residual / ss_total : (ss_residual == 0 ? 1 : 0);
  fit.rms_residual = std::sqrt(ss_residual / static_cast<double>(n));
  return fit;
}

}  // namespace bakeoff::stats
