// stats/regression.h
//
// Owns: ordinary least squares for a handful of predictors (an intercept and up to a few
// regressors), with the fit's quality: R², the root-mean-square residual and every residual, so a
// fitted coefficient is never shown without how well it fits. bakeoff calibrate fits the engine
// model's costs with it.
// Does not own: which points to measure or what a coefficient means (run/calibrate.h).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <vector>

namespace bakeoff::stats {

struct LinearFit {
  std::vector<double> coefficients;  // intercept first, then one per regressor, in order
  double r_squared = 0;              // 1 - SS_residual / SS_total; 1 when y does not vary and fits
  double rms_residual = 0;           // sqrt(SS_residual / n), in y's unit
  std::vector<double> residuals;     // y - fitted, per point
};

// Fits y = b0 + b1 x1 + ... + bk xk over rows[i] = {x1..xk}. nullopt when there are fewer points
// than coefficients, a row's width differs, or the regressors are collinear (the normal equations
// are singular).
std::optional<LinearFit> FitLinear(const std::vector<std::vector<double>>& rows, const std::vector<double>& y);

}  // namespace bakeoff::stats
