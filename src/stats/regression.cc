// stats/regression.cc: least squares by the normal equations (contract in regression.h).
#include "stats/regression.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"

namespace bakeoff::stats {
namespace {

bool WellFormed(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                const std::vector<double>& weights) {
  if (rows.size() != y.size() || y.empty()) return false;
  if (!weights.empty() &&
      (weights.size() != y.size() || !std::all_of(weights.begin(), weights.end(), [](double w) { return w > 0 && std::isfinite(w); }))) {
    return false;
  }
  const std::size_t k = rows.front().size() + 1;  // with the intercept
  if (y.size() < k) return false;
  return std::all_of(rows.begin(), rows.end(), [&](const std::vector<double>& row) { return row.size() + 1 == k; });
}

double WeightOf(const std::vector<double>& weights, std::size_t i) { return weights.empty() ? 1.0 : weights[i]; }

// Weighted least squares over the chosen columns of [1 | rows], the others held at 0: every
// column's coefficient, nullopt when the chosen columns are collinear. Each column is scaled to
// unit RMS first, which keeps the normal equations well conditioned.
std::optional<std::vector<double>> Solve(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                         const std::vector<double>& weights, const std::vector<bool>& chosen) {
  const std::size_t n = y.size();
  const auto x = [&](std::size_t i, std::size_t column) { return column == 0 ? 1.0 : rows[i][column - 1]; };
  std::vector<std::size_t> columns;
  for (std::size_t c = 0; c < chosen.size(); ++c) {
    if (chosen[c]) columns.push_back(c);
  }
  const std::size_t m = columns.size();
  std::vector<double> scale(m, 0);
  for (std::size_t j = 0; j < m; ++j) {
    for (std::size_t i = 0; i < n; ++i) scale[j] += x(i, columns[j]) * x(i, columns[j]);
    scale[j] = std::sqrt(scale[j] / static_cast<double>(n));
    if (!(scale[j] > 0)) return std::nullopt;
  }
  std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0));  // [X'X | X'y], scaled
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t r = 0; r < m; ++r) {
      const double xr = WeightOf(weights, i) * x(i, columns[r]) / scale[r];
      for (std::size_t c = 0; c < m; ++c) a[r][c] += xr * x(i, columns[c]) / scale[c];
      a[r][m] += xr * y[i];
    }
  }
  // Gauss-Jordan elimination with partial pivoting.
  for (std::size_t col = 0; col < m; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < m; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (!(std::abs(a[pivot][col]) > 1e-12 * static_cast<double>(n))) return std::nullopt;
    std::swap(a[col], a[pivot]);
    for (std::size_t r = 0; r < m; ++r) {
      if (r == col) continue;
      const double factor = a[r][col] / a[col][col];
      for (std::size_t c = col; c <= m; ++c) a[r][c] -= factor * a[col][c];
    }
  }
  std::vector<double> coefficients(chosen.size(), 0);
  for (std::size_t j = 0; j < m; ++j) coefficients[columns[j]] = a[j][m] / a[j][j] / scale[j];
  return coefficients;
}

LinearFit WithQuality(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                      const std::vector<double>& weights, std::vector<double> coefficients) {
  const std::size_t n = y.size();
  double mean_y = 0;
  for (double v : y) mean_y += v / static_cast<double>(n);
  LinearFit fit;
  fit.coefficients = std::move(coefficients);
  double ss_residual = 0, ss_total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double fitted = fit.coefficients[0];
    for (std::size_t j = 0; j < rows[i].size(); ++j) fitted += fit.coefficients[j + 1] * rows[i][j];
    fit.residuals.push_back(y[i] - fitted);
    ss_residual += fit.residuals.back() * fit.residuals.back();
    fit.weighted_ss_residual += WeightOf(weights, i) * fit.residuals.back() * fit.residuals.back();
    ss_total += (y[i] - mean_y) * (y[i] - mean_y);
  }
  fit.r_squared = ss_total > 0 ? 1 - ss_residual / ss_total : (ss_residual == 0 ? 1 : 0);
  fit.rms_residual = std::sqrt(ss_residual / static_cast<double>(n));
  return fit;
}

}  // namespace

std::optional<LinearFit> FitLinear(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                   const std::vector<double>& weights) {
  if (!WellFormed(rows, y, weights)) return std::nullopt;
  std::optional<std::vector<double>> coefficients =
      Solve(rows, y, weights, std::vector<bool>(rows.front().size() + 1, true));
  if (!coefficients) return std::nullopt;
  return WithQuality(rows, y, weights, std::move(*coefficients));
}

std::optional<NonNegativeFit> FitNonNegative(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                             const std::vector<double>& weights) {
  if (!WellFormed(rows, y, weights)) return std::nullopt;
  const std::size_t k = rows.front().size() + 1;
  BAKEOFF_CHECK(k <= kMostNonNegativeCoefficients) << "FitNonNegative of " << k << " coefficients";
  std::optional<NonNegativeFit> best;
  double best_ss = 0;
  // Every choice of free coefficients (the rest at 0): the least squares one whose free
  // coefficients all come out non-negative is the constrained optimum.
  for (std::size_t mask = 0; mask < (std::size_t{1} << k); ++mask) {
    std::vector<bool> chosen(k);
    for (std::size_t c = 0; c < k; ++c) chosen[c] = (mask >> c) & 1;
    const std::optional<std::vector<double>> coefficients = Solve(rows, y, weights, chosen);
    if (!coefficients || std::any_of(coefficients->begin(), coefficients->end(), [](double c) { return c < 0; })) {
      continue;
    }
    LinearFit fit = WithQuality(rows, y, weights, *coefficients);
    const double ss = fit.weighted_ss_residual;
    if (best && ss >= best_ss) continue;
    best_ss = ss;
    std::vector<bool> held(k);
    for (std::size_t c = 0; c < k; ++c) held[c] = !chosen[c];
    best = NonNegativeFit{std::move(fit), std::move(held)};
  }
  return best;
}

}  // namespace bakeoff::stats
