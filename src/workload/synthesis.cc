// workload/synthesis.cc
//
// Owns: the synthesis model of docs/workloads.md ("Synthesis"): a renewal process of events
// (single requests or session starts) with Gamma gaps (beyond Gamma's reach, stratified draws
// from the source's own gap quantiles, their spread fitted by simulation; from CV 5 a two-state
// burst / idle renewal process whose idle share and burst scale are fitted by simulation, with
// the rate profile kept only when it brings the peaks nearer the source's) and batches of zero
// gaps (the fingerprint's batch sizes), time-warped through the fingerprint's rate profile (or
// diurnal shape) after the counting noise is taken out of it (its idle periods kept empty), so
// that the rate over time and the peak-to-mean ratios over every window come back; lengths drawn
// as (input, output) pairs through a Gaussian copula on quantile functions rebuilt from the
// fingerprint's percentiles and log2 histogram; prefix ids from shared group prefixes whose length
// is fitted to the fingerprint's ideal prefix-cache share, plus session history. Also the YAML
// shape parser and the time transforms.
#include "workload/synthesis.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/check.h"
#include "core/file.h"
#include "core/rng.h"

namespace bakeoff::workload {

namespace {

constexpr std::uint64_t kMaxRequests = 50'000'000;
constexpr std::uint32_t kDefaultBlockTokens = 512;
constexpr std::uint64_t kMaxDefaultGroups = 256;
constexpr std::uint64_t kDefaultGroups = 16;
// Non-zero gaps whose 0.1% and 99.9% quantiles are within this share of each other, and whose
// squared CV (from the gaps' CV and the batches) is below it, are constant.
constexpr double kEvenGapSpread = 0.01;
constexpr double kMinNonzeroGapCv2 = 1e-3;  // floor on the squared CV of the non-zero gaps
// Below this Gamma shape (CV above 1.8) a Gamma draw puts a visible share of gaps below the
// arrivals' resolution (and, below shape 0.01, below 1e-100 s), which would become same-instant
// arrivals the source does not have; the source's own gap distribution is used instead.
constexpr double kMinGammaShape = 0.3;
constexpr double kArrivalTicksPerSecond = 1e6;  // synthesized arrivals are whole microseconds
constexpr std::size_t kMinGapStrata = 1024, kMaxGapStrata = 65536;
// The two-state gap model (FitBurstIdle): the burst state's gaps reach at most this many times
// their median, and their mean is below this share of the mean gap.
constexpr double kBurstSpan = 12;
constexpr double kMaxBodyMean = 0.98;
// The round trip's tolerances of docs/workloads.md that model choices are judged by: mean rate and
// peak-to-mean over a window (relative).
constexpr double kRoundTripRateTolerance = 0.05;
double RoundTripPeakToMeanTolerance(double window_s) {
  return window_s <= 10 ? 0.30 : window_s <= 60 ? 0.15 : 0.10;
}
// A rate profile is kept when it brings the simulated shape nearer the source's by more than this
// (in tolerances, SimulatedShapeError): one realization's peaks are noisy.
constexpr double kProfileMargin = 1;
// The two-state model is used from this squared CV of the non-zero gaps (CV 5); below it the
// source's gap quantiles with a fitted spread (GapTable) hold the peaks better.
constexpr double kMinBurstIdleCv2 = 25;
// A run of empty rate bins at least this many times the source's p99.9 non-zero gap is an idle
// period of the traffic (a night, a switched-off hour), beyond what its own gaps reach: the rate
// profile keeps it empty instead of smoothing it away as counting noise.
constexpr double kIdleRunGaps = 10;
constexpr double kHour = 3600;
constexpr double kDay = 86400;

Error Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidInput, std::move(message));
}

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// A quantile function through (probability, value) knots, linear in log(1 + value).
class QuantileFunction {
 public:
  QuantileFunction() = default;
  explicit QuantileFunction(std::vector<std::pair<double, double>> knots)
      : knots_(std::move(knots)) {
    for (auto& [p, v] : knots_) v = std::log1p(std::max(0.0, v));
  }
  // A distribution from a fingerprint: its percentiles, with the histogram's bucket edges between.
  static QuantileFunction FromLengths(const LengthDistribution& d) {
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
  static QuantileFunction FromShape(const LengthShape& s) {
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
  // log(1 + value) at probability u.
  double LogAt(double u) const {
    if (knots_.empty()) return 0;
    if (u <= knots_.front().first) return knots_.front().second;
    if (u >= knots_.back().first) return knots_.back().second;
    auto hi = std::upper_bound(knots_.begin(), knots_.end(), u,
                               [](double x, const auto& k) { return x < k.first; });
    const auto lo = std::prev(hi);
    const double w = hi->first > lo->first ? (u - lo->first) / (hi->first - lo->first) : 0;
    return lo->second + w * (hi->second - lo->second);
  }
  std::uint32_t At(double u) const {
    const double v = std::expm1(LogAt(u));
    return static_cast<std::uint32_t>(std::clamp(std::llround(v), 0LL, 4'000'000'000LL));
  }

 private:
  std::vector<std::pair<double, double>> knots_;  // (p, log1p(value)), p ascending
};

// Correlated (input, output) pairs: a Gaussian copula whose correlation is tuned so that the
// Pearson correlation of log(1 + length) comes out at the target.
class LengthSampler {
 public:
  LengthSampler(QuantileFunction in, QuantileFunction out, double target_log_corr)
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
  std::pair<std::uint32_t, std::uint32_t> Sample(Rng& rng) const {
    const double a = rng.Normal(), b = rng.Normal();
    const double z2 = rho_ * a + std::sqrt(1 - rho_ * rho_) * b;
    return {in_.At(NormalCdf(a)), out_.At(NormalCdf(z2))};
  }

 private:
  double LogCorrelation(const std::vector<std::pair<double, double>>& z) const {
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
  QuantileFunction in_, out_;
  double rho_ = 0;
};

// Batch sizes (events at one instant) drawn from a fingerprint's exact distribution.
class BatchSizes {
 public:
  // REQUIRES: counts not empty, every count > 0.
  explicit BatchSizes(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& counts) {
    BAKEOFF_CHECK(!counts.empty());
    double total = 0, sum = 0, squares = 0;
    for (const auto& [size, n] : counts) total += static_cast<double>(n);
    double running = 0;
    for (const auto& [size, n] : counts) {
      const double w = static_cast<double>(n) / total;
      sizes_.push_back(size);
      cumulative_.push_back(running += w);
      sum += w * size;
      squares += w * static_cast<double>(size) * size;
    }
    cumulative_.back() = 1;
    mean_ = sum;
    variance_ = std::max(0.0, squares - sum * sum);
  }
  std::uint32_t Draw(Rng& rng) const {
    if (sizes_.size() == 1) return sizes_.front();
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), rng.Uniform());
    return sizes_[std::min<std::size_t>(static_cast<std::size_t>(it - cumulative_.begin()),
                                        sizes_.size() - 1)];
  }
  double mean() const { return mean_; }
  double variance() const { return variance_; }

 private:
  std::vector<std::uint32_t> sizes_;
  std::vector<double> cumulative_;
  double mean_ = 1, variance_ = 0;
};

// A piecewise-constant rate multiplier m(t) >= 0 that repeats with its period and has time
// average 1, and the time warp through it: the arrival process runs in operational time u at the
// mean rate, and an event at u arrives at the real time t where the integral of m from 0 to t
// reaches u. Gaps therefore shrink where m > 1 and stretch where m < 1, zero gaps stay zero, and
// the process's burstiness (its CV and batches in operational time) is kept at every rate.
class RateProfile {
 public:
  RateProfile() = default;  // flat: m = 1
  // REQUIRES: widths > 0, multipliers >= 0 with a positive integral.
  RateProfile(const std::vector<double>& widths, const std::vector<double>& multipliers) {
    double length = 0, mass = 0;
    for (std::size_t k = 0; k < widths.size(); ++k)
      length += widths[k], mass += widths[k] * multipliers[k];
    double t = 0, u = 0;
    for (std::size_t k = 0; k < widths.size(); ++k) {
      const double m = multipliers[k] * length / mass;
      starts_.push_back(t);
      cumulative_.push_back(u);
      m_.push_back(m);
      t += widths[k];
      u += widths[k] * m;
    }
    period_ = length;
    cumulative_.push_back(u);
  }
  bool flat() const { return m_.empty(); }
  double period() const { return period_; }
  double Warp(double u) const {
    if (flat()) return u;
    const double mass = cumulative_.back();
    const double cycles = std::floor(u / mass);
    const double r = u - cycles * mass;
    // The bin whose operational interval [cumulative_[k], cumulative_[k + 1]) holds r; bins with
    // m = 0 have empty intervals and are never chosen.
    auto it = std::upper_bound(cumulative_.begin() + 1, cumulative_.end(), r);
    std::size_t k = static_cast<std::size_t>(it - (cumulative_.begin() + 1));
    if (k >= m_.size()) k = m_.size() - 1;
    while (m_[k] <= 0 && k > 0) --k;  // only at r == mass after rounding
    return cycles * period_ + starts_[k] + (m_[k] > 0 ? (r - cumulative_[k]) / m_[k] : 0);
  }
  // The time average of 1/m over the period, where m > 0 (1 when flat): non-zero gaps of a process
  // warped through m have E[g^2] this many times their operational E[g^2] (Jensen: >= 1).
  double MeanInverse() const {
    if (flat()) return 1;
    double sum = 0;
    for (std::size_t k = 0; k < m_.size(); ++k) {
      const double width = (k + 1 < m_.size() ? starts_[k + 1] : period_) - starts_[k];
      if (m_[k] > 0) sum += width / m_[k];
    }
    return sum / period_;
  }

 private:
  std::vector<double> starts_, m_;
  std::vector<double> cumulative_;  // operational time at each bin's start; back(): one period
  double period_ = 0;
};

// Removes from a profile of observed rates the variance that the arrival process will add back.
// Observed rate r_k over a bin of width w_k is the true rate plus counting noise of variance
// D r_k / w_k, where D, the index of dispersion of the synthesized process's counts, is given.
// On a Haar decomposition (pairwise means and half-differences, bins padded to a power of two
// with the mean rate and no noise), the details of each level are scaled by
// sqrt(max(0, 1 - noise / observed)) of that level: what is left, plus the process's own noise,
// has the observed variance at every dyadic time scale, so peaks over windows of every length
// come out as observed instead of with the noise counted twice.
std::vector<double> RemoveCountingNoise(const std::vector<double>& rates,
                                        const std::vector<double>& widths, double dispersion) {
  const std::size_t n = rates.size();
  std::size_t size = 1;
  while (size < n) size *= 2;
  double mass = 0, length = 0;
  for (std::size_t k = 0; k < n; ++k) mass += rates[k] * widths[k], length += widths[k];
  std::vector<double> value(size, mass / length), noise(size, 0);
  for (std::size_t k = 0; k < n; ++k) {
    value[k] = rates[k];
    noise[k] = dispersion * rates[k] / widths[k];
  }
  std::vector<std::vector<double>> details;
  std::vector<double> factors;
  for (std::size_t len = size; len > 1; len /= 2) {
    std::vector<double> d(len / 2);
    double observed = 0, expected = 0;
    for (std::size_t i = 0; i < len / 2; ++i) {
      const double a = value[2 * i], b = value[2 * i + 1];
      const double noise_ab = (noise[2 * i] + noise[2 * i + 1]) / 4;
      d[i] = (a - b) / 2;
      observed += d[i] * d[i];
      expected += noise_ab;
      value[i] = (a + b) / 2;
      noise[i] = noise_ab;
    }
    factors.push_back(observed > 0 ? std::sqrt(std::max(0.0, 1 - expected / observed)) : 0);
    details.push_back(std::move(d));
  }
  for (std::size_t level = details.size(); level-- > 0;) {
    const std::vector<double>& d = details[level];
    for (std::size_t i = d.size(); i-- > 0;) {
      const double mean = value[i], half = factors[level] * d[i];
      value[2 * i] = mean + half;
      value[2 * i + 1] = mean - half;
    }
  }
  value.resize(n);
  for (double& v : value) v = std::max(0.0, v);
  return value;
}

// Non-zero gaps drawn from a source's own gap distribution, for burstiness beyond what a Gamma
// draw can give (kMinGammaShape): a quantile function through the fingerprint's gap percentiles
// (linear in log(gap) between them) with one "spread" parameter x that widens or narrows it in
// log space (SetSpread), normalized to mean 1. Draws are stratified: each run of `strata` draws
// takes every stratum [i/K, (i+1)/K) once, in random order, at a uniform place in it, so that the
// realized mean and CV (dominated by a few very long gaps at such burstiness) do not wander with
// the sampling noise of independent draws.
class GapTable {
 public:
  static constexpr double kTailFrom = 0.99;  // the tail that SetSpread(x >= 0) reshapes
  // `knots`: (probability, gap) of the non-zero gaps, probability ascending from 0 to 1, gaps > 0
  // and non-decreasing. REQUIRES: knots.size() >= 2, strata >= 2.
  GapTable(const std::vector<std::pair<double, double>>& knots, std::size_t strata)
      : logs_(strata + 1) {
    for (std::size_t i = 0; i <= strata; ++i) {
      const double u = static_cast<double>(i) / static_cast<double>(strata);
      auto hi = std::upper_bound(knots.begin(), knots.end(), u,
                                 [](double x, const auto& k) { return x < k.first; });
      if (hi == knots.end()) {
        logs_[i] = std::log(knots.back().second);
        continue;
      }
      const auto lo = hi == knots.begin() ? hi : std::prev(hi);
      const double w = hi->first > lo->first ? (u - lo->first) / (hi->first - lo->first) : 0;
      logs_[i] = std::log(lo->second) + w * (std::log(hi->second) - std::log(lo->second));
    }
    SetSpread(1);
  }
  // x >= 0: the body below the 99th percentile as the source's, the tail above it raised to the
  // power x around it (1: as the source's; 0: flat). -1 <= x < 0: the tail flat and the whole
  // raised to the power 1 + x around the median (-1: constant). The CV grows with x.
  void SetSpread(double x) {
    const std::size_t strata = logs_.size() - 1;
    const auto tail = static_cast<std::size_t>(kTailFrom * static_cast<double>(strata));
    const double pivot = logs_[tail], median = logs_[strata / 2];
    edges_.resize(logs_.size());
    for (std::size_t i = 0; i <= strata; ++i) {
      double l = logs_[i];
      if (i > tail) l = pivot + std::max(x, 0.0) * (l - pivot);
      if (x < 0) l = median + (1 + x) * (l - median);
      edges_[i] = std::exp(l - median);
    }
    double m1 = 0, m2 = 0;  // moments of a uniform place in each stratum, linear between its edges
    for (std::size_t i = 0; i < strata; ++i) {
      m1 += (edges_[i] + edges_[i + 1]) / 2;
      m2 += (edges_[i] * edges_[i] + edges_[i] * edges_[i + 1] + edges_[i + 1] * edges_[i + 1]) / 3;
    }
    m1 /= static_cast<double>(strata);
    m2 /= static_cast<double>(strata);
    cv2_ = m2 / (m1 * m1) - 1;
    mean_ = m1 * std::exp(median);
    for (double& e : edges_) e /= m1;
  }
  std::size_t strata() const { return edges_.size() - 1; }
  double cv2() const { return cv2_; }
  double mean() const { return mean_; }  // in the knots' unit, before the normalization to 1
  // A gap of stratum i, mean 1 over all strata.
  double Draw(std::size_t i, Rng& rng) const {
    return edges_[i] + rng.Uniform() * (edges_[i + 1] - edges_[i]);
  }

 private:
  std::vector<double> logs_;   // log of the source's quantile function at i / strata
  std::vector<double> edges_;  // the quantile function in use at i / strata, mean 1
  double cv2_ = 0, mean_ = 1;
};

// The non-zero gaps of a two-state (burst / idle) renewal process, mean 1: with probability
// `idle_share` an idle gap, exponential with mean idle_mean; otherwise a gap of the burst state
// from `body` (the source's gaps up to a quantile), scaled by body_mean. idle_mean follows from
// the mean: idle_share * idle_mean + (1 - idle_share) * body_mean = 1.
struct BurstIdleGaps {
  std::shared_ptr<const GapTable> body;
  double body_mean = 1;  // the burst state's mean gap, relative to the mean gap (< 1)
  double idle_share = 0;
  double idle_mean = 1;
  // Idle gaps are stratified like the burst state's: each run of K of them takes every stratum
  // [i/K, (i+1)/K) of the exponential once, at its conditional mean, so that the few idle gaps
  // that carry the CV come in their proportion. K is the number of idle gaps expected among `gaps`
  // (the source's non-zero gaps), rounded, at least 1. Each run of that many non-zero gaps
  // (idle_run) has exactly K idle gaps at random places, one of each stratum, scaled so that
  // together they last the idle time expected of the run: a synthesis of the source's size then
  // has the source's idle time, not a handful of idle gaps drawn by luck (or a share of 2.4
  // rounded to 2), which at a few hour-long idle gaps decides the mean rate. SetIdleSpread scales
  // the strata's spread around their mean (1: the exponential's), so that the CV, which jumps
  // as K does, can still be fitted; it stops where the shortest idle gap would reach 0.
  std::vector<double> idle_values;
  std::size_t idle_run = 1;
  std::size_t idle_per_run = 1;
  void SetIdleShare(double share, double gaps) {
    idle_share = share;
    idle_mean = (1 - (1 - share) * body_mean) / share;
    idle_run = static_cast<std::size_t>(std::clamp(std::round(gaps), 1.0, 1e6));
    idle_per_run =
        static_cast<std::size_t>(std::clamp(std::round(share * static_cast<double>(idle_run)), 1.0,
                                            std::min(4096.0, static_cast<double>(idle_run))));
    SetIdleSpread(1);
  }
  // The most spread that keeps every idle gap above 0.
  double MaxIdleSpread() const {
    const double shortest = ExponentialStratumMean(0);
    return shortest < 1 ? 1 / (1 - shortest) : 1;
  }
  void SetIdleSpread(double spread) {
    const std::size_t k = idle_per_run;
    const double per_gap =
        idle_share * static_cast<double>(idle_run) * idle_mean / static_cast<double>(k);
    idle_values.resize(k);
    for (std::size_t i = 0; i < k; ++i) {
      idle_values[i] = per_gap * std::max(0.0, 1 + spread * (ExponentialStratumMean(i) - 1));
    }
  }
  double Cv2() const {
    const double body2 = body_mean * body_mean * (1 + body->cv2());
    double idle2 = 0;
    for (const double v : idle_values) idle2 += v * v / static_cast<double>(idle_values.size());
    const double idle = static_cast<double>(idle_per_run) / static_cast<double>(idle_run);
    return (1 - idle) * body2 + idle * idle2 - 1;
  }

 private:
  // The mean of a unit exponential in stratum [i/K, (i+1)/K), K = idle_per_run:
  // E[-ln(1 - u) | a <= u < b] = 1 + ((1 - a) L(a) - (1 - b) L(b)) / (b - a), L(x) = -ln(1 - x).
  double ExponentialStratumMean(std::size_t i) const {
    const auto times_log = [](double q) { return q > 0 ? -q * std::log(q) : 0.0; };  // (1-x) L(x)
    const double k = static_cast<double>(idle_per_run);
    const double a = static_cast<double>(i) / k, b = static_cast<double>(i + 1) / k;
    return 1 + (times_log(1 - a) - times_log(1 - b)) / (b - a);
  }
};

// Which stratum of a GapTable the next draw takes: a fresh random order of all strata per run.
class StratumSchedule {
 public:
  std::size_t Next(std::size_t strata, Rng& rng) {
    if (next_ == order_.size()) {
      order_.resize(strata);
      for (std::size_t i = 0; i < strata; ++i) order_[i] = static_cast<std::uint32_t>(i);
      for (std::size_t i = strata; i > 1; --i) std::swap(order_[i - 1], order_[rng.Below(i)]);
      next_ = 0;
    }
    return order_[next_++];
  }

 private:
  std::vector<std::uint32_t> order_;
  std::size_t next_ = 0;
};

// Everything synthesis needs, from a fingerprint or a shape.
struct Model {
  std::string source;
  bool arrivals_known = true;
  std::optional<std::int64_t> origin_unix_ns;
  double event_rate = 0;  // events (single requests or session starts) per second; 0: all at 0
  double tied_share = 0;  // share of zero gaps between events (without batch sizes)
  std::optional<BatchSizes> batches;  // events at one instant; replaces tied_share's schedule
  double gap_shape = 1;  // Gamma shape of the non-zero gaps (operational time); 0: constant gaps
  std::shared_ptr<const GapTable> gap_table;  // when set, non-zero gaps come from it, not Gamma
  std::shared_ptr<const BurstIdleGaps> burst_idle;  // when set, before gap_table and Gamma
  RateProfile profile;                              // the rate over time; flat by default
  std::optional<LengthSampler> lengths;
  // Prefix: `prefix_share` of requests carry group prefix ids; their length in blocks is either
  // fixed (prefix_blocks) or fitted to `target_reuse`.
  std::uint32_t block_tokens = 0;  // 0: no prefix ids
  double prefix_share = 0;
  std::optional<double> prefix_blocks;
  std::optional<double> target_reuse;
  std::uint64_t groups = 1;
  bool name_groups = false;
  // Sessions: an event is a session with probability session_prob.
  double session_prob = 0;
  double extra_turns_mean = 0;  // turns - 1, geometric
  std::function<double(Rng&)> think_time;
  double structured_share = 0;
  std::vector<std::pair<std::string, double>> models;  // cumulative weights, last = 1
};

struct Draft {
  double t = 0;
  std::uint32_t in = 0, out = 0;
  std::uint32_t session = 0;  // 1-based; 0: none
  std::uint32_t turn = 0;
  double think = 0;
  std::int32_t group = -1;
  double extra_u = 0;  // decides the fractional prefix block
  bool structured = false;
  std::int32_t model = -1;
};

// Which gaps are zero: in each run of `run` gaps (kTieChunk by default), exactly the tied share of
// them (carrying the rounding to the next run) at random places, so the realized share, and with
// it the mean rate, does not wander with the binomial noise of independent draws.
class TieSchedule {
 public:
  static constexpr std::size_t kTieChunk = 1000;
  explicit TieSchedule(double share, std::size_t run = kTieChunk) : share_(share), run_(run) {}
  bool Next(Rng& rng) {
    if (share_ <= 0) return false;
    if (next_ == chunk_.size()) Refill(rng);
    return chunk_[next_++] != 0;
  }

 private:
  void Refill(Rng& rng) {
    const double want = share_ * static_cast<double>(run_) + carry_;
    const auto ties = static_cast<std::size_t>(std::floor(want));
    carry_ = want - static_cast<double>(ties);
    chunk_.assign(run_, 0);
    std::fill(chunk_.begin(), chunk_.begin() + static_cast<std::ptrdiff_t>(std::min(ties, run_)),
              1);
    for (std::size_t i = run_ - 1; i > 0; --i) std::swap(chunk_[i], chunk_[rng.Below(i + 1)]);
    next_ = 0;
  }
  double share_;
  std::size_t run_;
  double carry_ = 0.5;       // so that a run takes the share rounded, not floored
  std::vector<char> chunk_;  // 1: a zero gap
  std::size_t next_ = 0;
};

// Batches of events at one instant, sizes drawn from BatchSizes: Next says whether the gap before
// the next event is zero (it belongs to the current batch).
class BatchSchedule {
 public:
  explicit BatchSchedule(const BatchSizes& sizes) : sizes_(sizes) {}
  bool Next(Rng& rng) {
    if (!started_) started_ = true, left_ = sizes_.Draw(rng) - 1;  // the first event's batch
    if (left_ > 0) {
      --left_;
      return true;
    }
    left_ = sizes_.Draw(rng) - 1;
    return false;
  }

 private:
  const BatchSizes& sizes_;
  bool started_ = false;
  std::uint32_t left_ = 0;
};

// The state of the random choices behind the gaps (which are zero, which strata come next).
struct GapState {
  explicit GapState(const Model& m)
      : ties(m.tied_share),
        idle(m.burst_idle ? static_cast<double>(m.burst_idle->idle_per_run) /
                                static_cast<double>(m.burst_idle->idle_run)
                          : 0,
             m.burst_idle ? m.burst_idle->idle_run : 1) {
    if (m.batches) batches.emplace(*m.batches);
  }
  TieSchedule ties;
  std::optional<BatchSchedule> batches;
  StratumSchedule strata;
  TieSchedule idle;  // which non-zero gaps are idle ones (BurstIdleGaps)
  StratumSchedule idle_strata;
};

// The gap before the next event, in operational time (RateProfile).
double SampleGap(const Model& m, GapState& s, Rng& rng) {
  if (m.event_rate <= 0) return 0;
  double mean;
  if (s.batches) {
    if (s.batches->Next(rng)) return 0;
    mean = m.batches->mean() / m.event_rate;
  } else {
    if (s.ties.Next(rng)) return 0;
    mean = 1 / (m.event_rate * (1 - m.tied_share));
  }
  if (m.burst_idle) {
    const BurstIdleGaps& g = *m.burst_idle;
    if (s.idle.Next(rng))
      return mean * g.idle_values[s.idle_strata.Next(g.idle_values.size(), rng)];
    return mean * g.body_mean * g.body->Draw(s.strata.Next(g.body->strata(), rng), rng);
  }
  if (m.gap_table) return mean * m.gap_table->Draw(s.strata.Next(m.gap_table->strata(), rng), rng);
  if (m.gap_shape <= 0) return mean;
  return rng.Gamma(m.gap_shape, mean / m.gap_shape);
}

std::uint32_t Blocks(std::uint32_t tokens, std::uint32_t block) {
  return (tokens + block - 1) / block;
}

// Served tokens of an ideal cache for a request of `in` tokens whose first `hist_blocks` blocks
// repeat its session's previous turn and whose first `prefix_blocks` are its group's.
double Served(std::uint32_t in, std::uint32_t hist_blocks, std::uint32_t prefix_blocks,
              std::uint32_t block) {
  const double hist = std::min<double>(static_cast<double>(hist_blocks) * block, in);
  const double pre = std::min<double>(static_cast<double>(prefix_blocks) * block, in);
  return std::max(hist, pre);
}

std::uint32_t PrefixBlocksOf(const Draft& d, double x) {
  const double whole = std::floor(x);
  return static_cast<std::uint32_t>(whole) + (d.extra_u < x - whole ? 1u : 0u);
}

Result<Trace> Synthesize(const Model& m, const SynthesisOptions& options,
                         std::optional<std::uint64_t> default_requests,
                         std::optional<double> default_duration) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid.error();
  // With a window, the window bounds generation and the request count applies after it.
  std::optional<std::uint64_t> count = options.window ? std::nullopt : options.requests;
  std::optional<double> gen_end = options.duration_s;
  if (options.window) gen_end = options.window->second / options.time_scale;
  if (!count && !gen_end) {
    count = default_requests;  // a window always sets gen_end, so this is the no-option case
    if (!count) gen_end = default_duration;
  }
  if (!count && !gen_end) return Invalid("say how much to make: requests or a duration");
  if (m.event_rate <= 0 && !count) {
    return Invalid(
        "the source has no arrival rate, so a duration or window cannot bound it: give a request "
        "count");
  }
  if (count && *count > kMaxRequests)
    return Invalid(fmt::format("requests: at most {}", kMaxRequests));
  const std::uint64_t limit = count.value_or(0);  // 0: bounded by time only
  if (gen_end && m.event_rate > 0 && *gen_end * m.event_rate > static_cast<double>(kMaxRequests)) {
    return Invalid(fmt::format("duration x rate gives more than {} requests", kMaxRequests));
  }

  Rng master(options.seed);
  Rng arrivals = master.Fork(), lengths = master.Fork(), sessions = master.Fork(),
      mix = master.Fork();
  std::vector<Draft> drafts;
  std::priority_queue<double, std::vector<double>, std::greater<>>
      pending;  // arrivals not yet settled
  std::uint64_t settled = 0;
  std::uint32_t next_session = 0;
  double start = 0, operational = 0;
  std::vector<Draft> turns;
  GapState gaps(m);
  for (bool first = true;; first = false) {
    if (!first) {
      operational += SampleGap(m, gaps, arrivals);
      start = m.profile.Warp(operational);
    }
    if (gen_end && start >= *gen_end && !(m.event_rate <= 0)) break;
    while (!pending.empty() && pending.top() <= start) pending.pop(), ++settled;
    if (limit > 0 && settled >= limit) break;
    if (limit > 0 && m.event_rate <= 0 && drafts.size() >= limit) break;
    // One event: a single request or a session of several turns.
    std::uint32_t n_turns = 1;
    const bool session = m.session_prob > 0 && sessions.Uniform() < m.session_prob;
    if (session && m.extra_turns_mean > 0) {
      const double stop = 1 / (1 + m.extra_turns_mean);
      n_turns += static_cast<std::uint32_t>(
          std::min(1e4, std::floor(std::log(1 - sessions.Uniform()) / std::log(1 - stop))));
    }
    turns.assign(n_turns, Draft{});
    for (Draft& d : turns) std::tie(d.in, d.out) = m.lengths->Sample(lengths);
    // A conversation's history grows: its turns take the sampled lengths in increasing input order.
    std::stable_sort(turns.begin(), turns.end(),
                     [](const Draft& a, const Draft& b) { return a.in < b.in; });
    const std::int32_t group =
        m.block_tokens > 0 && m.prefix_share > 0 && mix.Uniform() < m.prefix_share
            ? static_cast<std::int32_t>(mix.Below(m.groups))
            : -1;
    double t = start;
    if (session) ++next_session;
    for (std::uint32_t i = 0; i < n_turns; ++i) {
      Draft& d = turns[i];
      if (session) {
        d.session = next_session;
        d.turn = i;
        if (i > 0) {
          d.think = m.think_time(sessions);
          if (m.event_rate > 0) t += d.think;
        }
      }
      d.t = t;
      d.group = group;
      d.extra_u = mix.Uniform();
      d.structured = m.structured_share > 0 && mix.Uniform() < m.structured_share;
      if (!m.models.empty()) {
        const double u = mix.Uniform();
        std::size_t k = 0;
        while (k + 1 < m.models.size() && u >= m.models[k].second) ++k;
        d.model = static_cast<std::int32_t>(k);
      }
      pending.push(d.t);
      drafts.push_back(d);
    }
  }
  std::stable_sort(drafts.begin(), drafts.end(),
                   [](const Draft& a, const Draft& b) { return a.t < b.t; });
  if (gen_end && m.event_rate > 0) {
    const double end = *gen_end;
    drafts.erase(std::lower_bound(drafts.begin(), drafts.end(), end,
                                  [](const Draft& d, double e) { return d.t < e; }),
                 drafts.end());
  }
  if (limit > 0 && drafts.size() > limit) drafts.resize(limit);
  for (Draft& d : drafts) d.t *= options.time_scale, d.think *= options.time_scale;
  if (options.window) {
    const auto [ws, we] = *options.window;
    std::vector<Draft> kept;
    for (const Draft& d : drafts) {
      if (d.t >= ws && d.t < we) kept.push_back(d), kept.back().t -= ws;
    }
    drafts = std::move(kept);
    if (options.requests && drafts.size() > *options.requests) drafts.resize(*options.requests);
  }

  // Prefix ids, in final order: history blocks from the session's previous turn, group blocks.
  Trace trace;
  trace.source = m.source;
  trace.arrivals_known = m.arrivals_known;
  if (m.origin_unix_ns) {
    trace.origin_unix_ns = *m.origin_unix_ns;
    if (options.window) *trace.origin_unix_ns += std::llround(options.window->first * 1e9);
  }
  const std::uint32_t block = m.block_tokens;
  std::vector<std::uint32_t> hist(drafts.size(), 0);
  if (block > 0) {
    std::unordered_map<std::uint32_t, std::uint32_t> prev_in;
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      const Draft& d = drafts[i];
      if (d.session == 0) continue;
      auto it = prev_in.find(d.session);
      if (it != prev_in.end()) hist[i] = std::min(it->second, d.in) / block;
      prev_in[d.session] = d.in;
    }
  }
  double x = m.prefix_blocks.value_or(0);
  if (block > 0 && m.target_reuse) {
    // Fit the group prefix length (in blocks, fractional through extra_u) to the target share.
    double total = 0;
    for (const Draft& d : drafts) total += d.in;
    auto share = [&](double blocks) {
      double served = 0;
      for (std::size_t i = 0; i < drafts.size(); ++i) {
        const Draft& d = drafts[i];
        served += Served(d.in, hist[i], d.group >= 0 ? PrefixBlocksOf(d, blocks) : 0, block);
      }
      return total > 0 ? served / total : 0;
    };
    double lo = 0, hi = 1;
    std::uint32_t max_in = 0;
    for (const Draft& d : drafts) max_in = std::max(max_in, d.in);
    hi = static_cast<double>(Blocks(max_in, block)) + 1;
    if (share(lo) >= *m.target_reuse) {
      x = 0;
    } else {
      for (int iter = 0; iter < 40; ++iter) {
        const double mid = (lo + hi) / 2;
        (share(mid) < *m.target_reuse ? lo : hi) = mid;
      }
      x = hi;
    }
  }
  if (block > 0) trace.block_tokens = block;
  Rng ids = master.Fork();
  std::vector<std::vector<std::uint64_t>> group_ids(m.groups);
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> prev_ids;
  trace.requests.reserve(drafts.size());
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    const Draft& d = drafts[i];
    TraceRequest r;
    // Whole microseconds: finer than any trace's clock, and no arrival like 1e-139 s.
    r.arrival_s = std::round(d.t * kArrivalTicksPerSecond) / kArrivalTicksPerSecond;
    r.input_tokens = d.in;
    r.output_tokens = d.out;
    if (block > 0) {
      const std::uint32_t n = Blocks(d.in, block);
      std::vector<std::uint64_t>& h = r.prefix_hashes;
      h.reserve(n);
      if (hist[i] > 0) {
        const std::vector<std::uint64_t>& p = prev_ids[d.session];
        h.assign(p.begin(), p.begin() + std::min<std::size_t>({hist[i], p.size(), n}));
      }
      if (d.group >= 0) {
        const std::uint32_t pre = std::min(n, PrefixBlocksOf(d, x));
        std::vector<std::uint64_t>& g = group_ids[static_cast<std::size_t>(d.group)];
        while (g.size() < pre) g.push_back(ids.Next());
        while (h.size() < pre) h.push_back(g[h.size()]);
      }
      while (h.size() < n) h.push_back(ids.Next());
      if (d.session != 0) prev_ids[d.session] = h;
      if (d.group >= 0 && m.name_groups) r.prefix_group = fmt::format("prefix-{}", d.group);
    }
    if (d.session != 0) {
      r.session_id = fmt::format("s{}", d.session);
      r.turn = d.turn;
      if (d.turn > 0) r.think_time_s = d.think;
    }
    r.structured_output = d.structured;
    if (d.model >= 0) r.model = m.models[static_cast<std::size_t>(d.model)].first;
    trace.requests.push_back(std::move(r));
  }
  if (trace.requests.empty()) trace.block_tokens = 0;
  return trace;
}

// The rate profile of a fingerprint before noise removal (ObservedProfile): bin widths, observed
// rates, whether they carry counting noise, and which bins lie in idle periods (kIdleRunGaps).
struct ObservedRates {
  std::vector<double> widths, rates;
  std::vector<bool> idle;
  bool noisy = true;
  bool has_idle() const { return std::find(idle.begin(), idle.end(), true) != idle.end(); }
};

// Marks the bins of runs of empty bins that last at least idle_s.
void MarkIdleRuns(ObservedRates& o, double idle_s) {
  const std::size_t n = o.rates.size();
  o.idle.assign(n, false);
  for (std::size_t k = 0; k < n;) {
    if (o.rates[k] > 0) {
      ++k;
      continue;
    }
    std::size_t end = k;
    double length = 0;
    while (end < n && !(o.rates[end] > 0)) length += o.widths[end++];
    if (length >= idle_s)
      std::fill(o.idle.begin() + static_cast<std::ptrdiff_t>(k),
                o.idle.begin() + static_cast<std::ptrdiff_t>(end), true);
    k = end;
  }
}

// The rate profile of a fingerprint (docs/workloads.md, "The model"), before noise removal: bin
// widths and observed rates. From the rate profile when there is one (cut to whole days when the
// trace spans at least one, so that repeating it keeps the hours of the day), else from the
// diurnal requests per hour, starting at the first arrival's hour of day; empty otherwise. Runs
// of empty bins of at least idle_s are marked idle.
ObservedRates ObservedProfile(const Fingerprint& f, double idle_s) {
  ObservedRates o;
  std::vector<double>& widths = o.widths;
  std::vector<double>& rates = o.rates;
  if (f.rate_bins.size() >= 2 && f.rate_bin_s > 0 && f.duration_s > 0) {
    std::size_t n = f.rate_bins.size();
    double last = f.duration_s - f.rate_bin_s * static_cast<double>(n - 1);
    if (f.duration_s >= kDay && std::fmod(kDay, f.rate_bin_s) == 0) {
      n = std::min(n,
                   static_cast<std::size_t>(std::floor(f.duration_s / kDay) * kDay / f.rate_bin_s));
      last = f.rate_bin_s;
    }
    for (std::size_t k = 0; k < n; ++k) {
      widths.push_back(k + 1 < n ? f.rate_bin_s : std::max(last, 1e-9));
      rates.push_back(static_cast<double>(f.rate_bins[k]) / widths.back());
    }
    MarkIdleRuns(o, idle_s);
    return o;
  }
  if (f.hourly) {
    o.noisy = false;  // summed over days: the hours' counting noise is small next to their shape
    const double origin_s = f.origin_unix_ns ? static_cast<double>(*f.origin_unix_ns) * 1e-9 : 0;
    const double into_day = origin_s - std::floor(origin_s / kDay) * kDay;
    const auto hour = static_cast<std::size_t>(into_day / kHour) % 24;
    const double first = kHour - (into_day - static_cast<double>(hour) * kHour);
    for (std::size_t i = 0; i <= 24; ++i) {
      const double width = i == 0 ? first : i == 24 ? kHour - first : kHour;
      if (width <= 0) continue;
      widths.push_back(width);
      rates.push_back(static_cast<double>((*f.hourly)[(hour + i) % 24]) / kHour);
    }
  }
  o.idle.assign(rates.size(), false);  // not noisy: no noise removal to keep idle hours from
  return o;
}

// The non-zero gaps' quantile knots (probability, gap) from a fingerprint's gap percentiles,
// which are over all gaps, zero ones included: a percentile q above the tied share t is the
// non-zero gaps' (q - t) / (1 - t) quantile. Below the lowest known one the gaps reach down to a
// tenth of it (the fingerprint does not say how far). Empty when fewer than two are known.
std::vector<std::pair<double, double>> NonzeroGapKnots(const Fingerprint& f) {
  const stats::Summary& g = f.gap_s;
  if (!f.nonzero_gap_quantiles.empty()) {
    // Recorded: the lowest at a tenth of the smallest, the highest at the largest gap.
    std::vector<std::pair<double, double>> knots = {
        {0.0, f.nonzero_gap_quantiles.front().second / 10}};
    for (const auto& [q, v] : f.nonzero_gap_quantiles) {
      if (q > knots.back().first && v >= knots.back().second) knots.emplace_back(q, v);
    }
    if (g.max >= knots.back().second) knots.emplace_back(1.0, g.max);
    if (knots.size() >= 2 && knots.back().first == 1) return knots;
  }
  const double t = std::clamp(f.tied_share, 0.0, 1.0);
  const std::pair<double, double> all[] = {
      {0, g.min},          {0.5, g.p50.value},    {0.9, g.p90.value}, {0.95, g.p95.value},
      {0.99, g.p99.value}, {0.999, g.p999.value}, {1, g.max}};
  std::vector<std::pair<double, double>> knots;
  for (const auto& [q, v] : all) {
    if (!(v > 0) || !std::isfinite(v) || t >= 1 || (q <= t && q < 1)) continue;
    const double u = (q - t) / (1 - t);
    if (!knots.empty() && (u <= knots.back().first || v < knots.back().second)) {
      if (v > knots.back().second) knots.back().second = v;  // keep the function non-decreasing
      continue;
    }
    knots.emplace_back(u, v);
  }
  if (knots.empty()) return {};
  if (knots.front().first > 0) knots.insert(knots.begin(), {0.0, knots.front().second / 10});
  if (knots.size() < 2 || knots.back().first < 1) return {};
  return knots;
}

// Sets m.profile from the observed bin rates, less the counting noise that a process of events
// (batches or ties with zero-gap share p, non-zero gaps of squared CV cv2) will add back. Idle
// bins stay empty, and the noise is taken out of the other bins as if they were one stretch of
// traffic (the idle periods' on and off is no counting noise to measure the rest by). Returns
// false, leaving the profile flat, when there is no profile to shape.
bool ShapeProfile(Model& m, const ObservedRates& observed, double p, double cv2) {
  const std::vector<double>& widths = observed.widths;
  if (widths.size() < 2) return false;
  // Index of dispersion of counts: batches of mean b and variance v at renewal instants of CV^2
  // cv2 give (v + b^2 cv2) / b per event (CV^2 of the gaps for single events).
  const double b = m.batches ? m.batches->mean() : 1 / (1 - p);
  const double v = m.batches ? m.batches->variance() : p / ((1 - p) * (1 - p));
  const double dispersion = (v + b * b * cv2) / b;
  std::vector<double> shaped = observed.rates;
  if (observed.noisy) {
    std::vector<double> busy_rates, busy_widths;
    for (std::size_t k = 0; k < widths.size(); ++k) {
      if (observed.idle[k]) continue;
      busy_rates.push_back(observed.rates[k]);
      busy_widths.push_back(widths[k]);
    }
    if (busy_rates.empty()) return false;
    const std::vector<double> busy = RemoveCountingNoise(busy_rates, busy_widths, dispersion);
    for (std::size_t k = 0, i = 0; k < widths.size(); ++k) {
      shaped[k] = observed.idle[k] ? 0 : busy[i++];
    }
  }
  double mass = 0;
  for (std::size_t k = 0; k < shaped.size(); ++k) mass += shaped[k] * widths[k];
  if (!(mass > 0)) return false;
  m.profile = RateProfile(widths, shaped);
  return true;
}

// The CV of the gaps, zero ones included, of `events` arrivals of m's arrival process (its gaps,
// batches and warp; sessions left out) at microsecond resolution, from a fixed random stream so
// that a fit over it is deterministic.
double SimulatedGapCv(const Model& m, std::uint64_t events, double* nonzero_median = nullptr) {
  Rng rng(0x9a95'c0feULL);
  std::vector<double> nonzero;
  GapState gaps(m);
  double operational = 0, previous = 0, sum = 0, squares = 0;
  for (std::uint64_t i = 1; i < events; ++i) {
    operational += SampleGap(m, gaps, rng);
    const double t =
        std::round(m.profile.Warp(operational) * kArrivalTicksPerSecond) / kArrivalTicksPerSecond;
    const double gap = t - previous;
    previous = t;
    sum += gap;
    squares += gap * gap;
    if (nonzero_median != nullptr && gap > 0) nonzero.push_back(gap);
  }
  if (nonzero_median != nullptr) {
    *nonzero_median = 0;
    if (!nonzero.empty()) {
      const auto mid = nonzero.begin() + static_cast<std::ptrdiff_t>(nonzero.size() / 2);
      std::nth_element(nonzero.begin(), mid, nonzero.end());
      *nonzero_median = *mid;
    }
  }
  const double n = static_cast<double>(events - 1);
  const double mean = sum / n;
  const double variance = std::max(0.0, (squares - n * mean * mean) / (n - 1));
  return mean > 0 ? std::sqrt(variance) / mean : 0;
}

// How far `events` simulated arrivals of m (fixed random stream) are from the fingerprint's
// peak-to-mean ratios over its windows that fit in the simulated span, and from the model's mean
// rate: the largest |log(simulated / wanted)|, in units of the round trip's tolerance for each
// (1: at the tolerance), so that the noisy one-second peaks weigh no more than the documented
// tolerances let them. (With a few idle gaps in a source's length, their realized count can leave
// the rate far from the mean that each gap keeps in expectation.)
double SimulatedShapeError(const Fingerprint& f, const Model& m, std::uint64_t events) {
  Rng rng(0x7ea4'5eedULL);
  GapState gaps(m);
  std::vector<double> times;
  times.reserve(events);
  double operational = 0;
  for (std::uint64_t i = 0; i < events; ++i) {
    if (i > 0) operational += SampleGap(m, gaps, rng);
    times.push_back(m.profile.Warp(operational));
  }
  const double span = times.back() - times.front();
  if (!(span > 0)) return INFINITY;
  const double mean = static_cast<double>(events) / span;
  double worst = m.event_rate > 0
                     ? std::abs(std::log(mean / m.event_rate)) / std::log1p(kRoundTripRateTolerance)
                     : 0;
  for (const RateWindow& w : f.rate_windows) {
    if (w.window_s > span || !(w.peak_to_mean > 0)) continue;
    std::size_t most = 0;
    for (std::size_t i = 0, j = 0; i < times.size(); ++i) {
      while (j < times.size() && times[j] < times[i] + w.window_s) ++j;
      most = std::max(most, j - i);
    }
    const double ratio = static_cast<double>(most) / w.window_s / mean;
    worst = std::max(worst, std::abs(std::log(ratio / w.peak_to_mean)) /
                                std::log1p(RoundTripPeakToMeanTolerance(w.window_s)));
  }
  return worst;
}

// The quantile function through knots (probability, gap), linear in log(gap).
double KnotQuantile(const std::vector<std::pair<double, double>>& knots, double u) {
  auto hi = std::upper_bound(knots.begin(), knots.end(), u,
                             [](double x, const auto& k) { return x < k.first; });
  if (hi == knots.end()) return knots.back().second;
  if (hi == knots.begin()) return hi->second;
  const auto lo = std::prev(hi);
  const double w = hi->first > lo->first ? (u - lo->first) / (hi->first - lo->first) : 0;
  return std::exp(std::log(lo->second) + w * (std::log(hi->second) - std::log(lo->second)));
}

// The two-state (burst / idle) gap model of docs/workloads.md ("The model"), for gaps burstier
// than Gamma can draw: the burst state's gaps are the source's own up to its p90, p95, p99 or
// p99.9 (of the non-zero gaps), and the idle gaps are exponential. For each of those ends, three
// things are fitted by simulation of the warped process: the idle share (with the idle mean that
// keeps the mean gap) and the idle gaps' spread, so that the gaps, zero ones included, have the
// fingerprint's CV; and the burst state's scale, so that the median non-zero gap is the source's.
// The end whose simulation comes nearest the fingerprint's rate and peak-to-mean ratios is kept
// (without those ratios: the last end within kBurstSpan times the median). Returns false, changing
// nothing, when no end leaves a body below the mean.
bool FitBurstIdle(const Fingerprint& f, Model& m,
                  const std::vector<std::pair<double, double>>& knots,
                  const ObservedRates& observed, double p) {
  const double median = KnotQuantile(knots, 0.5);
  const double nonzero_mean = f.gap_s.mean / (1 - std::clamp(f.tied_share, 0.0, 0.999));
  if (!(median > 0) || !(nonzero_mean > 0)) return false;
  const double b_mean = m.batches ? m.batches->mean() : 1 / (1 - p);
  const std::size_t strata =
      std::clamp<std::size_t>(static_cast<std::size_t>(static_cast<double>(f.requests) / b_mean),
                              kMinGapStrata, kMaxGapStrata);
  const std::uint64_t events = std::clamp<std::uint64_t>(f.requests, 1000, 200'000);
  const double nonzero_gaps = static_cast<double>(events) * (1 - p);
  // The burst state's gaps: the source's up to quantile body_to; null when that leaves no body
  // below the mean.
  const auto body_up_to = [&](double body_to) -> std::shared_ptr<BurstIdleGaps> {
    std::vector<std::pair<double, double>> body_knots;
    for (const auto& [u, v] : knots) {
      if (u < body_to) body_knots.emplace_back(u / body_to, v);
    }
    body_knots.emplace_back(1.0, KnotQuantile(knots, body_to));
    if (body_knots.size() < 2) return nullptr;
    auto gaps = std::make_shared<BurstIdleGaps>();
    gaps->body = std::make_shared<GapTable>(body_knots, strata);
    gaps->body_mean = gaps->body->mean() / nonzero_mean;
    return gaps->body_mean < kMaxBodyMean ? gaps : nullptr;
  };
  std::shared_ptr<BurstIdleGaps> gaps;
  // The idle share whose simulated CV is the fingerprint's; it falls as the share grows (fewer,
  // longer idle gaps: more CV). At least one idle gap among the source's.
  const auto fit_share = [&] {
    double lo = std::log(std::max(1e-7, 1 / nonzero_gaps)), hi = std::log(0.5);
    for (int iter = 0; iter < 24; ++iter) {
      const double mid = (lo + hi) / 2;
      gaps->SetIdleShare(std::exp(mid), nonzero_gaps);
      (SimulatedGapCv(m, events) > f.gap_cv ? lo : hi) = mid;
    }
    gaps->SetIdleShare(std::exp(hi), nonzero_gaps);
  };
  // Then the idle gaps' spread, for the CV that the share's whole idle gaps step over.
  const auto fit_spread = [&] {
    double lo = 0, hi = gaps->MaxIdleSpread();
    gaps->SetIdleSpread(hi);
    if (SimulatedGapCv(m, events) <= f.gap_cv) return;
    gaps->SetIdleSpread(lo);
    if (SimulatedGapCv(m, events) >= f.gap_cv) return;
    for (int iter = 0; iter < 20; ++iter) {
      const double mid = (lo + hi) / 2;
      gaps->SetIdleSpread(mid);
      (SimulatedGapCv(m, events) < f.gap_cv ? lo : hi) = mid;
    }
    gaps->SetIdleSpread((lo + hi) / 2);
  };
  const auto fit = [&] {
    for (int round = 0; round < 3; ++round) {
      gaps->body_mean = std::min(gaps->body_mean, kMaxBodyMean);
      fit_share();
      double simulated = 0;
      SimulatedGapCv(m, events, &simulated);
      if (simulated > 0) gaps->body_mean *= median / simulated;
    }
    gaps->body_mean = std::min(gaps->body_mean, kMaxBodyMean);
    fit_share();
    fit_spread();
  };
  const RateProfile profile_before = m.profile;
  m.profile = RateProfile();
  std::vector<double> body_ends;
  for (const double u : {0.9, 0.95, 0.99, 0.999}) {
    if (!f.rate_windows.empty()) {
      body_ends.push_back(u);
    } else if (KnotQuantile(knots, u) <= kBurstSpan * median) {
      body_ends.assign(1, u);
    }
  }
  double best_error = INFINITY;
  std::shared_ptr<BurstIdleGaps> best;
  for (const double u : body_ends) {
    gaps = body_up_to(u);
    if (!gaps) continue;
    m.burst_idle = gaps;
    fit();
    const double error = SimulatedShapeError(f, m, events);
    if (error < best_error) best_error = error, best = gaps;
  }
  if (!best) {
    m.burst_idle = nullptr;
    m.profile = profile_before;
    return false;
  }
  gaps = best;
  m.burst_idle = gaps;
  // That was without the rate profile: the process alone, idle gaps and all. Then the profile, less
  // what that process's own counting noise explains at each time scale (idle gaps of a bursty
  // process make bins with nothing and bins with a lot; a renewal source's profile is all that);
  // when some of it stays (a day's swing), the gaps are fitted again under it.
  if (f.rate_windows.empty()) return true;
  const BurstIdleGaps alone = *gaps;
  const double alone_error = best_error;
  if (!ShapeProfile(m, observed, p, gaps->Cv2())) return true;
  fit();
  // Of the two explanations of the profile, the process alone unless the profile brings the
  // peaks over the fingerprint's windows clearly nearer the source's (kProfileMargin); but idle
  // periods longer than the source's gaps reach are the traffic's, not the process's: a profile
  // with them is kept unless it comes out clearly further from the source.
  const double profiled_error = SimulatedShapeError(f, m, events);
  if (observed.has_idle() ? profiled_error > alone_error + kProfileMargin
                          : profiled_error >= alone_error - kProfileMargin) {
    *gaps = alone;
    m.profile = RateProfile();
  }
  return true;
}

// Sets the arrival process of a fingerprint: batches or ties, the Gamma shape of the non-zero
// gaps and the rate profile, so that the synthesized gaps have the fingerprint's tied share and
// CV and its rate follows the fingerprint's over time.
void FitArrivals(const Fingerprint& f, Model& m) {
  // Zero gaps with share p and Gamma gaps otherwise keep the gaps' mean and CV when the non-zero
  // gaps have CV^2 = (1 + CV^2)(1 - p) - 1 (floored: ties may explain all of it).
  double p;
  if (!f.batch_sizes.empty()) {
    m.batches.emplace(f.batch_sizes);
    p = 1 - 1 / m.batches->mean();
  } else {
    m.tied_share = std::clamp(f.tied_share, 0.0, 0.999);
    p = m.tied_share;
  }
  const double raw_cv2 = (1 + f.gap_cv * f.gap_cv) * (1 - p) - 1;
  const double real_cv2 = std::max(kMinNonzeroGapCv2, raw_cv2);
  const std::vector<std::pair<double, double>> knots = NonzeroGapKnots(f);
  const ObservedRates observed =
      ObservedProfile(f, knots.size() >= 2 ? kIdleRunGaps * KnotQuantile(knots, 0.999) : INFINITY);
  // Evenly spaced instants (alone, or each holding a batch): constant gaps at a constant rate,
  // nothing to fit. The non-zero gaps' quantiles say so where they are known; the CV alone leaves
  // a rounding residue once batches explain it.
  const auto& q = f.nonzero_gap_quantiles;
  const bool even_instants = raw_cv2 <= kEvenGapSpread && q.size() >= 2 && q.front().second > 0 &&
                             q.back().second <= q.front().second * (1 + kEvenGapSpread);
  if ((raw_cv2 <= 0 && p <= 0) || even_instants) {
    m.gap_shape = 0;
    return;
  }
  // Warping through m multiplies the non-zero gaps' E[g^2] by A = MeanInverse(), so the process
  // runs with CV^2 = (1 + real CV^2) / A - 1 in operational time; its counting noise, which the
  // profile must not contain twice, depends on that CV, and A on the profile: a few rounds settle.
  double a = 1;
  for (int round = 0; round < 4; ++round) {
    const double cv2 = std::max(kMinNonzeroGapCv2, (1 + real_cv2) / a - 1);
    m.gap_shape = 1 / cv2;
    if (!ShapeProfile(m, observed, p, cv2)) break;
    const double next = m.profile.MeanInverse();
    if (std::abs(next - a) < 1e-6) break;
    a = next;
  }
  if (m.gap_shape >= kMinGammaShape) return;
  if (knots.size() < 2) return;  // too little is known of the gaps: Gamma it stays
  if (real_cv2 >= kMinBurstIdleCv2 && FitBurstIdle(f, m, knots, observed, p)) return;
  // Burstier than Gamma can draw: the source's own gaps, their spread fitted by simulation so that
  // the gaps of the warped process, zero ones included, have the source's CV. The warp's own
  // contribution (idle bins stretch the gaps that span them) is then counted once, whatever the
  // profile; the profile's noise removal follows the fitted CV, a second round settles it.
  const double b_mean = m.batches ? m.batches->mean() : 1 / (1 - p);
  const std::size_t strata =
      std::clamp<std::size_t>(static_cast<std::size_t>(static_cast<double>(f.requests) / b_mean),
                              kMinGapStrata, kMaxGapStrata);
  auto table = std::make_shared<GapTable>(knots, strata);
  m.gap_table = table;
  const std::uint64_t events = std::clamp<std::uint64_t>(f.requests, 1000, 200'000);
  for (int round = 0; round < 2; ++round) {
    double lo = -1, hi = 1;
    table->SetSpread(hi);
    while (SimulatedGapCv(m, events) < f.gap_cv && hi < 64) table->SetSpread(hi *= 2);
    for (int iter = 0; iter < 30; ++iter) {
      const double mid = (lo + hi) / 2;
      table->SetSpread(mid);
      (SimulatedGapCv(m, events) < f.gap_cv ? lo : hi) = mid;
    }
    table->SetSpread(hi);
    if (!ShapeProfile(m, observed, p, table->cv2())) break;
  }
}

// Sessions: the probability that an event is a session, given the share of requests in sessions
// and the mean turns per session.
double SessionProbability(double share, double turns_mean) {
  if (share <= 0 || turns_mean <= 0) return 0;
  if (share >= 1) return 1;
  return share / (turns_mean * (1 - share) + share);
}

void NormalizeWeights(std::vector<std::pair<std::string, double>>& models) {
  double total = 0;
  for (const auto& [name, w] : models) total += w;
  double running = 0;
  for (auto& [name, w] : models) w = (running += w) / total;
  if (!models.empty()) models.back().second = 1;
}

// --- YAML shape ---

class ShapeReader {
 public:
  explicit ShapeReader(std::string file) : file_(std::move(file)) {}
  Error Fail(const YAML::Node& node, const std::string& field, const std::string& what) const {
    return Invalid(fmt::format("{}:{}: {}: {}", file_, node.Mark().line + 1, field, what));
  }
  Result<double> Number(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) return Fail(node, field, "expected a number");
    try {
      const double v = node.as<double>();
      if (!std::isfinite(v)) return Fail(node, field, "expected a finite number");
      return v;
    } catch (const YAML::Exception&) {
      return Fail(node, field, fmt::format("expected a number, got '{}'", node.Scalar()));
    }
  }
  Result<double> NumberIn(const YAML::Node& node, const std::string& field, double lo, double hi,
                          bool lo_open = false) const {
    Result<double> v = Number(node, field);
    if (!v.ok()) return v;
    if (*v < lo || *v > hi || (lo_open && *v == lo)) {
      return Fail(node, field,
                  fmt::format("{} is out of range {}{}, {}]", *v, lo_open ? "(" : "[", lo, hi));
    }
    return v;
  }
  Status KnownKeys(const YAML::Node& map, const std::string& where,
                   std::initializer_list<std::string_view> keys) const {
    if (!map.IsMap()) return Fail(map, where, "expected a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string known;
        for (const std::string_view k : keys)
          known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
        return Fail(kv.first, where.empty() ? key : where + "." + key,
                    fmt::format("unknown field (known: {})", known));
      }
    }
    return Ok{};
  }
  Result<LengthShape> Length(const YAML::Node& node, const std::string& field) const {
    LengthShape s;
    if (node.IsScalar()) {
      Result<double> v = NumberIn(node, field, 0, 4e9);
      if (!v.ok()) return v.error();
      s.fixed = *v;
      return s;
    }
    if (Status k = KnownKeys(node, field, {"distribution", "fixed", "median", "p99", "min", "max"});
        !k.ok()) {
      return k.error();
    }
    if (node["fixed"]) {
      Result<double> v = NumberIn(node["fixed"], field + ".fixed", 0, 4e9);
      if (!v.ok()) return v.error();
      s.fixed = *v;
      return s;
    }
    if (!node["distribution"])
      return Fail(node, field, "needs 'fixed: N' or 'distribution: lognormal|uniform'");
    const std::string dist = node["distribution"].Scalar();
    if (dist == "lognormal") {
      s.kind = LengthShape::Kind::kLognormal;
      if (!node["median"] || !node["p99"])
        return Fail(node, field, "lognormal needs median and p99");
      Result<double> median = NumberIn(node["median"], field + ".median", 0, 4e9, true);
      if (!median.ok()) return median.error();
      Result<double> p99 = NumberIn(node["p99"], field + ".p99", *median, 4e9);
      if (!p99.ok()) return p99.error();
      s.median = *median;
      s.p99 = *p99;
    } else if (dist == "uniform") {
      s.kind = LengthShape::Kind::kUniform;
      if (!node["min"] || !node["max"]) return Fail(node, field, "uniform needs min and max");
      Result<double> lo = NumberIn(node["min"], field + ".min", 0, 4e9);
      if (!lo.ok()) return lo.error();
      Result<double> hi = NumberIn(node["max"], field + ".max", *lo, 4e9);
      if (!hi.ok()) return hi.error();
      s.min = *lo;
      s.max = *hi;
    } else {
      return Fail(node["distribution"], field + ".distribution",
                  fmt::format("'{}' is not one of lognormal, uniform (or use fixed: N)", dist));
    }
    return s;
  }

 private:
  std::string file_;
};

// A source without arrival times (ShareGPT) puts every request at 0: a rate scale or a window
// would change nothing, or drop everything, without saying so.
Status RefuseTimeOptionsWithoutArrivals(const SynthesisOptions& options,
                                        const std::string& source) {
  if (options.rate_scale != 1) {
    return Invalid(fmt::format(
        "rate scale (--rate-scale): {} has no arrival times (every request arrives at 0), "
        "so there is no rate to scale",
        source));
  }
  if (options.window) {
    return Invalid(fmt::format(
        "window (--window): {} has no arrival times (every request arrives at 0), so a time "
        "window cannot select from it; use a request count",
        source));
  }
  return Ok{};
}

}  // namespace

Status ValidateSynthesisOptions(const SynthesisOptions& o) {
  if (o.requests && o.duration_s) return Invalid("give requests or a duration, not both");
  if (o.requests && *o.requests == 0) return Invalid("requests: must be at least 1");
  if (o.duration_s && !(*o.duration_s > 0 && std::isfinite(*o.duration_s)))
    return Invalid("duration: must be > 0");
  if (!(o.rate_scale > 0 && std::isfinite(o.rate_scale))) return Invalid("rate scale: must be > 0");
  if (!(o.time_scale > 0 && std::isfinite(o.time_scale))) return Invalid("time scale: must be > 0");
  if (o.window && !(o.window->first >= 0 && o.window->second > o.window->first &&
                    std::isfinite(o.window->second))) {
    return Invalid("window: needs 0 <= start < end");
  }
  if (o.window && o.duration_s) return Invalid("give a window or a duration, not both");
  return Ok{};
}

Result<WorkloadShape> ParseWorkloadShape(std::string_view yaml, const std::string& file_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return Invalid(fmt::format("{}:{}: not valid YAML: {}", file_name, e.mark.line + 1, e.msg));
  }
  const ShapeReader r(file_name);
  if (!root.IsMap())
    return Invalid(fmt::format("{}:1: expected a mapping of shape fields", file_name));
  if (Status k = r.KnownKeys(root, "",
                             {"rate_per_s", "arrival", "burstiness", "duration_s", "requests",
                              "input_tokens", "output_tokens", "correlation", "shared_prefix",
                              "sessions", "structured_output_share", "models"});
      !k.ok()) {
    return k.error();
  }
  WorkloadShape s;
  s.source = file_name;
  auto number = [&](const char* key, double lo, double hi, double& out,
                    bool lo_open = false) -> Status {
    if (!root[key]) return Ok{};
    Result<double> v = r.NumberIn(root[key], key, lo, hi, lo_open);
    if (!v.ok()) return v.error();
    out = *v;
    return Ok{};
  };
  if (!root["rate_per_s"]) return Invalid(fmt::format("{}:1: rate_per_s: required", file_name));
  if (Status st = number("rate_per_s", 0, 1e7, s.rate_per_s, true); !st.ok()) return st.error();
  if (root["arrival"]) {
    const std::string a = root["arrival"].Scalar();
    if (a == "poisson") {
      s.arrival = WorkloadShape::Arrival::kPoisson;
    } else if (a == "gamma") {
      s.arrival = WorkloadShape::Arrival::kGamma;
    } else if (a == "constant") {
      s.arrival = WorkloadShape::Arrival::kConstant;
    } else {
      return r.Fail(root["arrival"], "arrival",
                    fmt::format("'{}' is not one of poisson, gamma, constant", a));
    }
  }
  if (Status st = number("burstiness", 0, 1e6, s.burstiness, true); !st.ok()) return st.error();
  if (root["burstiness"] && s.arrival != WorkloadShape::Arrival::kGamma) {
    return r.Fail(root["burstiness"], "burstiness", "only applies to arrival: gamma");
  }
  if (root["duration_s"]) {
    double d = 0;
    if (Status st = number("duration_s", 0, 1e9, d, true); !st.ok()) return st.error();
    s.duration_s = d;
  }
  if (root["requests"]) {
    double n = 0;
    if (Status st = number("requests", 1, static_cast<double>(kMaxRequests), n); !st.ok())
      return st.error();
    if (n != std::floor(n)) return r.Fail(root["requests"], "requests", "expected a whole number");
    s.requests = static_cast<std::uint64_t>(n);
  }
  if (s.requests && s.duration_s)
    return r.Fail(root["requests"], "requests", "give requests or duration_s, not both");
  for (const char* key : {"input_tokens", "output_tokens"}) {
    if (!root[key]) return Invalid(fmt::format("{}:1: {}: required", file_name, key));
    Result<LengthShape> l = r.Length(root[key], key);
    if (!l.ok()) return l.error();
    (std::string_view(key) == "input_tokens" ? s.input_tokens : s.output_tokens) = *l;
  }
  if (Status st = number("correlation", -1, 1, s.correlation); !st.ok()) return st.error();
  if (Status st = number("structured_output_share", 0, 1, s.structured_share); !st.ok())
    return st.error();
  if (const YAML::Node p = root["shared_prefix"]) {
    if (Status k = r.KnownKeys(p, "shared_prefix", {"tokens", "share", "groups", "block_tokens"});
        !k.ok())
      return k.error();
    if (!p["tokens"]) return r.Fail(p, "shared_prefix.tokens", "required");
    Result<double> tokens = r.NumberIn(p["tokens"], "shared_prefix.tokens", 0, 4e9);
    if (!tokens.ok()) return tokens.error();
    s.prefix_tokens = static_cast<std::uint32_t>(*tokens);
    s.prefix_share = 1;
    if (p["share"]) {
      Result<double> share = r.NumberIn(p["share"], "shared_prefix.share", 0, 1);
      if (!share.ok()) return share.error();
      s.prefix_share = *share;
    }
    if (p["groups"]) {
      Result<double> g = r.NumberIn(p["groups"], "shared_prefix.groups", 1, 1e6);
      if (!g.ok()) return g.error();
      s.prefix_groups = static_cast<std::uint32_t>(*g);
    }
    if (p["block_tokens"]) {
      Result<double> b = r.NumberIn(p["block_tokens"], "shared_prefix.block_tokens", 1, 1e6);
      if (!b.ok()) return b.error();
      s.block_tokens = static_cast<std::uint32_t>(*b);
    }
  }
  if (const YAML::Node p = root["sessions"]) {
    if (Status k = r.KnownKeys(p, "sessions", {"turns_mean", "think_time_s"}); !k.ok())
      return k.error();
    if (!p["turns_mean"]) return r.Fail(p, "sessions.turns_mean", "required");
    Result<double> turns = r.NumberIn(p["turns_mean"], "sessions.turns_mean", 1, 1e4);
    if (!turns.ok()) return turns.error();
    s.turns_mean = *turns;
    if (p["think_time_s"]) {
      Result<double> think = r.NumberIn(p["think_time_s"], "sessions.think_time_s", 0, 1e7);
      if (!think.ok()) return think.error();
      s.think_time_s = *think;
    }
  }
  if (const YAML::Node m = root["models"]) {
    if (!m.IsMap() || m.size() == 0)
      return r.Fail(m, "models", "expected a mapping of model name to weight");
    for (const auto& kv : m) {
      const std::string name = kv.first.Scalar();
      Result<double> w = r.NumberIn(kv.second, "models." + name, 0, 1e9, true);
      if (!w.ok()) return w.error();
      s.models.emplace_back(name, *w);
    }
  }
  return s;
}

Result<WorkloadShape> LoadWorkloadShape(const std::filesystem::path& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.error();
  return ParseWorkloadShape(*text, path.string());
}

Result<Trace> SynthesizeFromFingerprint(const Fingerprint& f, const SynthesisOptions& options) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid.error();
  if (!f.arrivals_known || !(f.mean_rps > 0)) {
    const std::string what = fmt::format("the fingerprint of {}", f.source);
    if (Status refused = RefuseTimeOptionsWithoutArrivals(options, what); !refused.ok())
      return refused.error();
  }
  Model m;
  m.source =
      fmt::format("synthesized from the fingerprint of {} (seed {})", f.source, options.seed);
  m.arrivals_known = f.arrivals_known;
  m.lengths.emplace(QuantileFunction::FromLengths(f.input), QuantileFunction::FromLengths(f.output),
                    f.pearson_log);
  const double requests = static_cast<double>(std::max<std::uint64_t>(f.requests, 1));
  const double session_share = static_cast<double>(f.requests_in_sessions) / requests;
  const double turns_mean = f.sessions > 0 ? f.turns_per_session.mean : 0;
  m.session_prob = SessionProbability(session_share, turns_mean);
  m.extra_turns_mean = std::max(0.0, turns_mean - 1);
  if (f.think_time_source.empty() || f.think_time_s.count == 0) {
    m.think_time = [](Rng&) { return 0.0; };
  } else {
    const double p50 = f.think_time_s.p50.value, p90 = f.think_time_s.p90.value,
                 mean = f.think_time_s.mean;
    if (p50 > 0 && p90 > p50) {
      const double mu = std::log(p50), sigma = std::log(p90 / p50) / 1.281552;
      m.think_time = [mu, sigma](Rng& rng) { return std::exp(mu + sigma * rng.Normal()); };
    } else {
      m.think_time = [mean](Rng& rng) { return mean > 0 ? rng.Exponential(mean) : 0.0; };
    }
  }
  const double requests_per_event =
      m.session_prob * std::max(1.0, turns_mean) + (1 - m.session_prob);
  if (f.arrivals_known && f.mean_rps > 0) {
    // requests / duration counts one request more than the gaps in the duration: the mean gap is
    // duration / (requests - 1), which evenly spaced sources need exactly.
    const double gaps_per_request =
        f.requests > 1 ? static_cast<double>(f.requests - 1) / static_cast<double>(f.requests)
                       : 1.0;
    m.event_rate = f.mean_rps * gaps_per_request * options.rate_scale / requests_per_event;
    m.origin_unix_ns = f.origin_unix_ns;
    FitArrivals(f, m);
  }
  if (f.prefix_reuse) {
    m.block_tokens = f.block_tokens > 0 ? f.block_tokens : kDefaultBlockTokens;
    m.prefix_share = 1;
    m.target_reuse = *f.prefix_reuse;
    m.groups = f.prefix_groups > 0 ? std::min(f.prefix_groups, kMaxDefaultGroups) : kDefaultGroups;
    m.name_groups = f.prefix_groups > 0;
    if (m.name_groups) m.prefix_share = static_cast<double>(f.requests_in_groups) / requests;
  }
  m.structured_share = static_cast<double>(f.structured_output) / requests;
  for (const auto& [name, n] : f.models) m.models.emplace_back(name, static_cast<double>(n));
  NormalizeWeights(m.models);
  return Synthesize(m, options,
                    f.requests > 0 ? std::optional<std::uint64_t>(f.requests) : std::nullopt,
                    std::nullopt);
}

Result<Trace> SynthesizeFromShape(const WorkloadShape& s, const SynthesisOptions& options) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid.error();
  Model m;
  m.source = fmt::format("synthesized from the shape {} (seed {})", s.source, options.seed);
  m.lengths.emplace(QuantileFunction::FromShape(s.input_tokens),
                    QuantileFunction::FromShape(s.output_tokens), s.correlation);
  const double turns_mean = s.turns_mean >= 1 ? s.turns_mean : 0;
  m.session_prob = turns_mean > 0 ? 1 : 0;
  m.extra_turns_mean = std::max(0.0, turns_mean - 1);
  const double think = s.think_time_s;
  m.think_time = [think](Rng& rng) { return think > 0 ? rng.Exponential(think) : 0.0; };
  m.event_rate = s.rate_per_s * options.rate_scale / std::max(1.0, turns_mean);
  switch (s.arrival) {
    case WorkloadShape::Arrival::kPoisson:
      m.gap_shape = 1;
      break;
    case WorkloadShape::Arrival::kGamma:
      m.gap_shape = s.burstiness;
      break;
    case WorkloadShape::Arrival::kConstant:
      m.gap_shape = 0;
      break;
  }
  if ((s.prefix_tokens > 0 && s.prefix_share > 0) || turns_mean > 0) {
    m.block_tokens = s.block_tokens;
    m.prefix_share = s.prefix_tokens > 0 ? s.prefix_share : 0;
    // Only whole blocks of the shared prefix are reusable, as in an engine's paged KV cache.
    m.prefix_blocks = static_cast<double>(s.prefix_tokens / s.block_tokens);
    m.groups = s.prefix_groups;
    m.name_groups = m.prefix_share > 0;
  }
  m.structured_share = s.structured_share;
  m.models = s.models;
  NormalizeWeights(m.models);
  return Synthesize(m, options, s.requests, s.duration_s);
}

void ScaleRate(Trace& trace, double factor) {
  for (TraceRequest& r : trace.requests) r.arrival_s /= factor;
}

void ScaleTime(Trace& trace, double factor) {
  for (TraceRequest& r : trace.requests) {
    r.arrival_s *= factor;
    if (r.think_time_s) *r.think_time_s *= factor;
  }
}

void ApplyWindow(Trace& trace, double start_s, double end_s) {
  if (trace.origin_unix_ns) *trace.origin_unix_ns += std::llround(start_s * 1e9);
  std::vector<TraceRequest> kept;
  for (TraceRequest& r : trace.requests) {
    if (r.arrival_s >= start_s && r.arrival_s < end_s) {
      r.arrival_s -= start_s;
      kept.push_back(std::move(r));
    }
  }
  trace.requests = std::move(kept);
}

Status ApplyTimeOptions(Trace& trace, const SynthesisOptions& options) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid;
  if (options.duration_s)
    return Invalid("a duration does not apply to an existing trace: use a window");
  if (!trace.arrivals_known) {
    if (Status refused = RefuseTimeOptionsWithoutArrivals(options, trace.source); !refused.ok())
      return refused;
    const bool thinks =
        std::any_of(trace.requests.begin(), trace.requests.end(),
                    [](const TraceRequest& r) { return r.think_time_s.has_value(); });
    if (options.time_scale != 1 && !thinks) {
      return Invalid(fmt::format(
          "time scale (--time-scale): {} has no arrival or think times, so scaling them "
          "would change nothing",
          trace.source));
    }
  }
  if (options.rate_scale != 1) ScaleRate(trace, options.rate_scale);
  if (options.time_scale != 1) ScaleTime(trace, options.time_scale);
  if (options.window) ApplyWindow(trace, options.window->first, options.window->second);
  if (options.requests && trace.requests.size() > *options.requests)
    trace.requests.resize(*options.requests);
  return Ok{};
}

Fingerprint FingerprintTrace(const Trace& trace) {
  FingerprintBuilder builder;
  for (const TraceRequest& r : trace.requests)
    builder.Add(r, r.prefix_hashes.empty() ? 0 : trace.block_tokens);
  ImportReport report;
  report.source = trace.source;
  report.format = TraceFormat::kTrace;
  report.arrivals_known = trace.arrivals_known;
  report.origin_unix_ns = trace.origin_unix_ns;
  return builder.Finish(report);
}

}  // namespace bakeoff::workload
