// stats/regression.h
//
// Owns: ordinary, weighted and non-negative least squares for a handful of predictors (an
// intercept and up to a few regressors), with the fit's quality: R², the root-mean-square residual
// and every residual, so a fitted coefficient is never shown without how well it fits. bakeoff calibrate fits the engine
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
  double weighted_ss_residual = 0;   // sum of weight x residual², what the fit minimised
  std::vector<double> residuals;     // y - fitted, per point
};

// `weights` (one per point, each > 0; empty = all 1) make a fit minimise the sum of weight x
// residual²: weights 1 / y² fit relative residuals, for data whose noise grows with y. R² and
// rms_residual stay unweighted, in y's unit.

// Fits y = b0 + b1 x1 + ... + bk xk over rows[i] = {x1..xk}. nullopt when there are fewer points
// than coefficients, a row's width or the weights' count differs, a weight is not > 0, or the
// regressors are collinear (the normal equations are singular).
std::optional<LinearFit> FitLinear(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                   const std::vector<double>& weights = {});

// The same fit with every coefficient, the intercept too, at least 0 (a cost cannot be negative):
// exact, by trying each set of coefficients held at 0 (2^k fits, for the handful it is meant
// for). held_at_zero[j] says coefficient j was held. nullopt as FitLinear's malformed input.
// REQUIRES: at most kMostNonNegativeCoefficients coefficients (the intercept counted).
inline constexpr std::size_t kMostNonNegativeCoefficients = 12;
struct NonNegativeFit {
  LinearFit fit;
  std::vector<bool> held_at_zero;
};
std::optional<NonNegativeFit> FitNonNegative(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                             const std::vector<double>& weights = {});

}  // namespace bakeoff::stats
