// workload/synthesis_internal.h (internal to workload/synthesis*.cc)
//
// Owns: the synthesis model that the parts of synthesis share (docs/workloads.md, "Synthesis"):
// the Model a source (fingerprint or shape) is turned into and the pieces it is built of, the
// length distributions (QuantileFunction, LengthSampler; synthesis_lengths.cc) and the arrival
// process (batches, the rate profile's time warp, the gap tables and the two-state gaps, the
// schedules of the random choices behind the gaps; synthesis_arrivals.cc); and the entry points
// between the parts: Synthesize (the trace from a Model, synthesis_generate.cc), FitArrivals (the
// arrival process of a fingerprint, synthesis_arrival_fit.cc) and the option checks shared by the
// public functions (synthesis.cc).
// Does not own: the public API (workload/synthesis.h), the model of a fingerprint
// (synthesis_fingerprint.cc) or of a shape and its YAML (synthesis_shape.cc).
//
// Thread-safety: the classes are values without shared state; the functions are pure.
// Units: seconds, requests per second, tokens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/rng.h"
#include "workload/fingerprint.h"
#include "workload/synthesis.h"
#include "workload/trace.h"

namespace bakeoff::workload::synthesis_internal {

constexpr std::uint64_t kMaxRequests = 50'000'000;
constexpr double kArrivalTicksPerSecond = 1e6;  // synthesized arrivals are whole microseconds

inline Error Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidInput, std::move(message));
}

// ---------------------------------------------------------------------------------------------
// Lengths (synthesis_lengths.cc).

// A quantile function through (probability, value) knots, linear in log(1 + value).
class QuantileFunction {
 public:
  QuantileFunction() = default;
  explicit QuantileFunction(std::vector<std::pair<double, double>> knots);
  // A distribution from a fingerprint: its percentiles, with the histogram's bucket edges between.
  static QuantileFunction FromLengths(const LengthDistribution& d);
  static QuantileFunction FromShape(const LengthShape& s);
  // log(1 + value) at probability u.
  double LogAt(double u) const;
  std::uint32_t At(double u) const;

 private:
  std::vector<std::pair<double, double>> knots_;  // (p, log1p(value)), p ascending
};

// Correlated (input, output) pairs: a Gaussian copula whose correlation is tuned so that the
// Pearson correlation of log(1 + length) comes out at the target.
class LengthSampler {
 public:
  LengthSampler(QuantileFunction in, QuantileFunction out, double target_log_corr);
  std::pair<std::uint32_t, std::uint32_t> Sample(Rng& rng) const;

 private:
  double LogCorrelation(const std::vector<std::pair<double, double>>& z) const;
  QuantileFunction in_, out_;
  double rho_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The arrival process (synthesis_arrivals.cc). What runs once a gap or an event (the draws, the
// schedules' Next, the time warp) is defined here, inline, so that the simulations that fit the
// process (synthesis_arrival_fit.cc) and the generation can inline it.

// Batch sizes (events at one instant) drawn from a fingerprint's exact distribution.
class BatchSizes {
 public:
  // REQUIRES: counts not empty, every count > 0.
  explicit BatchSizes(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& counts);
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
  RateProfile(const std::vector<double>& widths, const std::vector<double>& multipliers);
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
  double MeanInverse() const;

 private:
  std::vector<double> starts_, m_;
  std::vector<double> cumulative_;  // operational time at each bin's start; back(): one period
  double period_ = 0;
};

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
  GapTable(const std::vector<std::pair<double, double>>& knots, std::size_t strata);
  // x >= 0: the body below the 99th percentile as the source's, the tail above it raised to the
  // power x around it (1: as the source's; 0: flat). -1 <= x < 0: the tail flat and the whole
  // raised to the power 1 + x around the median (-1: constant). The CV grows with x.
  void SetSpread(double x);
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
  void SetIdleShare(double share, double gaps);
  // The most spread that keeps every idle gap above 0.
  double MaxIdleSpread() const;
  void SetIdleSpread(double spread);
  double Cv2() const;

 private:
  // The mean of a unit exponential in stratum [i/K, (i+1)/K), K = idle_per_run:
  // E[-ln(1 - u) | a <= u < b] = 1 + ((1 - a) L(a) - (1 - b) L(b)) / (b - a), L(x) = -ln(1 - x).
  double ExponentialStratumMean(std::size_t i) const;
};

// Which stratum of a GapTable the next draw takes: a fresh random order of all strata per run.
class StratumSchedule {
 public:
  std::size_t Next(std::size_t strata, Rng& rng);

 private:
  std::vector<std::uint32_t> order_;
  std::size_t next_ = 0;
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
  void Refill(Rng& rng);
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

// ---------------------------------------------------------------------------------------------
// The model.

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

// The state of the random choices behind the gaps (which are zero, which strata come next).
struct GapState {
  explicit GapState(const Model& m);
  TieSchedule ties;
  std::optional<BatchSchedule> batches;
  StratumSchedule strata;
  TieSchedule idle;  // which non-zero gaps are idle ones (BurstIdleGaps)
  StratumSchedule idle_strata;
};

// The gap before the next event, in operational time (RateProfile). (synthesis_arrivals.cc)
double SampleGap(const Model& m, GapState& s, Rng& rng);

// Turns a model's weights into the cumulative weights of Model::models, the last 1.
// (synthesis_generate.cc)
void NormalizeWeights(std::vector<std::pair<std::string, double>>& models);

// ---------------------------------------------------------------------------------------------
// Between the parts.

// The trace of a model: the events of its arrival process, each a request or a session, their
// lengths, prefix ids, models and structured output, cut to `options` (or, when they say nothing
// of how much, to the default request count or else duration). (synthesis_generate.cc)
Result<Trace> Synthesize(const Model& m, const SynthesisOptions& options,
                         std::optional<std::uint64_t> default_requests,
                         std::optional<double> default_duration);

// Sets the arrival process of a fingerprint: batches or ties, the Gamma shape of the non-zero
// gaps and the rate profile, so that the synthesized gaps have the fingerprint's tied share and
// CV and its rate follows the fingerprint's over time. (synthesis_arrival_fit.cc)
void FitArrivals(const Fingerprint& f, Model& m);

// A source without arrival times (ShareGPT) puts every request at 0: a rate scale or a window
// would change nothing, or drop everything, without saying so. (synthesis.cc)
Status RefuseTimeOptionsWithoutArrivals(const SynthesisOptions& options, const std::string& source);

}  // namespace bakeoff::workload::synthesis_internal
