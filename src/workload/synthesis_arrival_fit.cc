// workload/synthesis_arrival_fit.cc
//
// Owns: fitting the arrival process of synthesis to a fingerprint (docs/workloads.md, "The
// model"): batches or ties from its batch sizes or tied share; Gamma gaps of its CV, or beyond
// Gamma's reach stratified draws from its own gap quantiles with a spread fitted by simulation,
// or from CV 5 the two-state burst / idle gaps whose idle share and burst scale are fitted by
// simulation; and the rate profile from its rate bins (or diurnal shape), the counting noise
// taken out of it and its idle periods kept empty, kept in the two-state model only when it brings
// the simulated peaks nearer the source's.
// Does not own: the arrival process itself (synthesis_arrivals.cc) or the rest of the model of a
// fingerprint (synthesis_fingerprint.cc).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "workload/fingerprint.h"
#include "workload/synthesis_internal.h"

namespace bakeoff::workload::synthesis_internal {

namespace {

// Non-zero gaps whose 0.1% and 99.9% quantiles are within this share of each other, and whose
// squared CV (from the gaps' CV and the batches) is below it, are constant.
constexpr double kEvenGapSpread = 0.01;
constexpr double kMinNonzeroGapCv2 = 1e-3;  // floor on the squared CV of the non-zero gaps
// Below this Gamma shape (CV above 1.8) a Gamma draw puts a visible share of gaps below the
// arrivals' resolution (and, below shape 0.01, below 1e-100 s), which would become same-instant
// arrivals the source does not have; the source's own gap distribution is used instead.
constexpr double kMinGammaShape = 0.3;
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

}  // namespace

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

}  // namespace bakeoff::workload::synthesis_internal
