// workload/synthesis_arrivals.cc
//
// Owns: the arrival process of synthesis (docs/workloads.md, "The model"): a renewal process of
// events in operational time whose gaps are zero (batches of the fingerprint's sizes, or ties of a
// share) or non-zero (Gamma, the source's own gap quantiles with a spread, or the two-state burst
// / idle gaps), with the stratified schedules that keep the realized shares at their expectation,
// and the rate profile that warps operational time into real time.
// Does not own: fitting the process to a fingerprint (synthesis_arrival_fit.cc) or turning its
// events into requests (synthesis_generate.cc).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "workload/synthesis_internal.h"

namespace bakeoff::workload::synthesis_internal {

// --- BatchSizes ---

BatchSizes::BatchSizes(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& counts) {
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

// --- RateProfile ---

RateProfile::RateProfile(const std::vector<double>& widths,
                         const std::vector<double>& multipliers) {
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

double RateProfile::MeanInverse() const {
  if (flat()) return 1;
  double sum = 0;
  for (std::size_t k = 0; k < m_.size(); ++k) {
    const double width = (k + 1 < m_.size() ? starts_[k + 1] : period_) - starts_[k];
    if (m_[k] > 0) sum += width / m_[k];
  }
  return sum / period_;
}

// --- GapTable ---

GapTable::GapTable(const std::vector<std::pair<double, double>>& knots, std::size_t strata)
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

void GapTable::SetSpread(double x) {
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

// --- BurstIdleGaps ---

void BurstIdleGaps::SetIdleShare(double share, double gaps) {
  idle_share = share;
  idle_mean = (1 - (1 - share) * body_mean) / share;
  idle_run = static_cast<std::size_t>(std::clamp(std::round(gaps), 1.0, 1e6));
  idle_per_run =
      static_cast<std::size_t>(std::clamp(std::round(share * static_cast<double>(idle_run)), 1.0,
                                          std::min(4096.0, static_cast<double>(idle_run))));
  SetIdleSpread(1);
}

double BurstIdleGaps::MaxIdleSpread() const {
  const double shortest = ExponentialStratumMean(0);
  return shortest < 1 ? 1 / (1 - shortest) : 1;
}

void BurstIdleGaps::SetIdleSpread(double spread) {
  const std::size_t k = idle_per_run;
  const double per_gap =
      idle_share * static_cast<double>(idle_run) * idle_mean / static_cast<double>(k);
  idle_values.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    idle_values[i] = per_gap * std::max(0.0, 1 + spread * (ExponentialStratumMean(i) - 1));
  }
}

double BurstIdleGaps::Cv2() const {
  const double body2 = body_mean * body_mean * (1 + body->cv2());
  double idle2 = 0;
  for (const double v : idle_values) idle2 += v * v / static_cast<double>(idle_values.size());
  const double idle = static_cast<double>(idle_per_run) / static_cast<double>(idle_run);
  return (1 - idle) * body2 + idle * idle2 - 1;
}

double BurstIdleGaps::ExponentialStratumMean(std::size_t i) const {
  const auto times_log = [](double q) { return q > 0 ? -q * std::log(q) : 0.0; };  // (1-x) L(x)
  const double k = static_cast<double>(idle_per_run);
  const double a = static_cast<double>(i) / k, b = static_cast<double>(i + 1) / k;
  return 1 + (times_log(1 - a) - times_log(1 - b)) / (b - a);
}

// --- The schedules ---

std::size_t StratumSchedule::Next(std::size_t strata, Rng& rng) {
  if (next_ == order_.size()) {
    order_.resize(strata);
    for (std::size_t i = 0; i < strata; ++i) order_[i] = static_cast<std::uint32_t>(i);
    for (std::size_t i = strata; i > 1; --i) std::swap(order_[i - 1], order_[rng.Below(i)]);
    next_ = 0;
  }
  return order_[next_++];
}

void TieSchedule::Refill(Rng& rng) {
  const double want = share_ * static_cast<double>(run_) + carry_;
  const auto ties = static_cast<std::size_t>(std::floor(want));
  carry_ = want - static_cast<double>(ties);
  chunk_.assign(run_, 0);
  std::fill(chunk_.begin(), chunk_.begin() + static_cast<std::ptrdiff_t>(std::min(ties, run_)), 1);
  for (std::size_t i = run_ - 1; i > 0; --i) std::swap(chunk_[i], chunk_[rng.Below(i + 1)]);
  next_ = 0;
}

// --- The gaps ---

GapState::GapState(const Model& m)
    : ties(m.tied_share),
      idle(m.burst_idle ? static_cast<double>(m.burst_idle->idle_per_run) /
                              static_cast<double>(m.burst_idle->idle_run)
                        : 0,
           m.burst_idle ? m.burst_idle->idle_run : 1) {
  if (m.batches) batches.emplace(*m.batches);
}

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

}  // namespace bakeoff::workload::synthesis_internal
