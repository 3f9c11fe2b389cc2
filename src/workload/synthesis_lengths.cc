// workload/synthesis_lengths.cc
//
// Owns: the length distributions of synthesis (docs/workloads.md, "Synthesis"): quantile functions
// rebuilt from a fingerprint's percentiles and log2 histogram or from a shape's distribution, and
// the (input, output) pairs drawn through a Gaussian copula on them, its correlation tuned to the
// target correlation of log lengths.
// Does not own: when the lengths are drawn or what a session does with them
// (synthesis_generate.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "stats/quantile.h"
#include "workload/synthesis_internal.h"

namespace bakeoff::workload::synthesis_internal {

namespace {

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

// --- QuantileFunction ---

QuantileFunction::QuantileFunction(std::vector<std::pair<double, double>> knots)
    : knots_(std::move(knots)) {
  for (auto& [p, v] : knots_) v = std::log1p(std::max(0.0, v));
}

QuantileFunction QuantileFunction::FromLengths(const LengthDistribution& d) {
  const stats::Summary& s = d.summary;
  if (s.count == 0) return QuantileFunction({{0, 0}, {1, 0}});
  std::vector<std::pair<double, double>> q = {
      {0, s.min},          {0.5, s.p50.value},    {0.9, s.p90.value}, {0.95, s.p95.value},
      {0.99, s.p99.value}, {0.999, s.p999.value}, {1, s.max}};
  for (std::size_t i = 1; i < q.size(); ++i) q[i].second = std::max(q[i].second, q[i - 1].second);
  std::uint64_t n = 0;
  for (const std::uint64_t c : d.log2_counts) n += c;
  std::vector<std::pair<double, double>> knots = q;
  std::uint64_t below = 0;
  for (std::size_t b = 0; n > 0 && b + 1 < d.log2_counts.size(); ++b) {
    below += d.log2_counts[b];
    const double p = static_cast<double>(below) / static_cast<double>(n);
    const double edge =
        static_cast<double>(std::uint64_t{1} << b) - 0.5;  // between buckets b and b+1
    // Keep the edge only where it sits strictly between the percentile knots around it.
    auto hi = std::upper_bound(q.begin(), q.end(), p,
                               [](double x, const auto& k) { return x < k.first; });
    if (hi == q.begin() || hi == q.end()) continue;
    const auto lo = std::prev(hi);
    if (p <= lo->first || p >= hi->first || edge < lo->second || edge > hi->second) continue;
    knots.emplace_back(p, edge);
  }
  std::sort(knots.begin(), knots.end());
  return QuantileFunction(std::move(knots));
}

QuantileFunction QuantileFunction::FromShape(const LengthShape& s) {
  switch (s.kind) {
    case LengthShape::Kind::kFixed:
      return QuantileFunction({{0, s.fixed}, {1, s.fixed}});
    case LengthShape::Kind::kUniform: {
      std::vector<std::pair<double, double>> k;
      for (int i = 0; i <= 64; ++i) k.emplace_back(i / 64.0, s.min + (s.max - s.min) * i / 64.0);
      return QuantileFunction(std::move(k));
    }
    case LengthShape::Kind::kLognormal: {
      // log(value) ~ N(mu, sigma) with exp(mu) = median and the 99th percentile at p99.
      const double mu = std::log(s.median), sigma = std::log(s.p99 / s.median) / 2.326348;
      std::vector<std::pair<double, double>> k;
      for (int i = 1; i < 400; ++i) {
        const double z = -4.0 + 8.0 * i / 400.0;
        k.emplace_back(NormalCdf(z), std::exp(mu + sigma * z));
      }
      k.insert(k.begin(), {0, std::exp(mu - 4 * sigma)});
      k.emplace_back(1, std::exp(mu + 4 * sigma));
      return QuantileFunction(std::move(k));
    }
  }
  return {};
}

double QuantileFunction::LogAt(double u) const {
  if (knots_.empty()) return 0;
  if (u <= knots_.front().first) return knots_.front().second;
  if (u >= knots_.back().first) return knots_.back().second;
  auto hi = std::upper_bound(knots_.begin(), knots_.end(), u,
                             [](double x, const auto& k) { return x < k.first; });
  const auto lo = std::prev(hi);
  const double w = hi->first > lo->first ? (u - lo->first) / (hi->first - lo->first) : 0;
  return lo->second + w * (hi->second - lo->second);
}

std::uint32_t QuantileFunction::At(double u) const {
  const double v = std::expm1(LogAt(u));
  return static_cast<std::uint32_t>(std::clamp(std::llround(v), 0LL, 4'000'000'000LL));
}

// --- LengthSampler ---

LengthSampler::LengthSampler(QuantileFunction in, QuantileFunction out, double target_log_corr)
    : in_(std::move(in)), out_(std::move(out)) {
  rho_ = std::clamp(target_log_corr, -0.999, 0.999);
  if (std::abs(target_log_corr) < 1e-9) return;
  // Common random numbers: the same normals for every trial rho, from a fixed stream.
  Rng rng(0x5eed'c0b1aULL);
  std::vector<std::pair<double, double>> z(20'000);
  for (auto& [a, b] : z) a = rng.Normal(), b = rng.Normal();
  for (int iter = 0; iter < 6; ++iter) {
    const double measured = LogCorrelation(z);
    const double next = std::clamp(rho_ + (target_log_corr - measured), -0.999, 0.999);
    if (std::abs(next - rho_) < 1e-4) break;
    rho_ = next;
  }
}

std::pair<std::uint32_t, std::uint32_t> LengthSampler::Sample(Rng& rng) const {
  const double a = rng.Normal(), b = rng.Normal();
  const double z2 = rho_ * a + std::sqrt(1 - rho_ * rho_) * b;
  return {in_.At(NormalCdf(a)), out_.At(NormalCdf(z2))};
}

double LengthSampler::LogCorrelation(const std::vector<std::pair<double, double>>& z) const {
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (const auto& [a, b] : z) {
    const double x = std::log1p(in_.At(NormalCdf(a)));
    const double y = std::log1p(out_.At(NormalCdf(rho_ * a + std::sqrt(1 - rho_ * rho_) * b)));
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
  }
  const double n = static_cast<double>(z.size());
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n;
  return vx > 0 && vy > 0 ? (sxy - sx * sy / n) / std::sqrt(vx * vy) : 0;
}

}  // namespace bakeoff::workload::synthesis_internal
