// analyze/capacity_search.h
//
// Owns: finding the highest arrival rate a target sustains within its SLO ("capacity under SLO"):
// a bracketing search over the offered rate (double until a rate fails, or halve until one
// passes, then bisect geometrically until the bracket is as narrow as asked), each rate measured
// `repeats` times by a caller-supplied function, the repeats pooled. A rate passes when
//   - the pooled SLO attainment (requests that completed and met every per-request threshold,
//     over all measured requests: failures count as misses) is at least the target,
//   - the pooled availability (completed requests over measured ones) is at least its target,
//   - every repeat met every percentile term of the SLO, and
//   - no repeat was generator-limited or given up (such a measurement says nothing about the
//     target: the rate is not passed, with that reason).
// Each pooled share carries its Wilson interval; a rate whose interval contains the target is
// "marginal" (the verdict of that one rate could flip with more requests), and reports say so.
// The capacity is the highest passing rate below the lowest failing one; the true boundary lies
// between the two (the bracket), whose width is the stated bound of the answer.
// Does not own: how a rate is measured (the run layer: a bench step against a server or a
// simulated step), nor the SLO's definition (analyze/slo.h).
//
// Thread-safety: SearchCapacity blocks and calls `measure` on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/step_analysis.h"
#include "core/result.h"
#include "stats/proportion.h"

namespace bakeoff::analyze {

// One measured step at one rate.
struct RateTrial {
  double rate_per_s = 0;
  std::uint32_t repeat = 0;
  std::uint64_t measured = 0;  // measured requests (warm-up excluded)
  std::uint64_t ok = 0;        // of which completed
  std::uint64_t good = 0;      // of which met every per-request threshold
  bool terms_met = true;       // every percentile term of the SLO held
  bool generator_limited = false;
  std::string stopped_reason;  // non-empty: the step was given up
  bool interrupted = false;
  double goodput_per_s = 0;
  double output_tokens_per_s = 0;
  std::string where;  // where its records are (relative path), for evidence
};

// The trial a step's figures make.
RateTrial TrialFromStep(const StepAnalysis& step, double rate_per_s, std::uint32_t repeat);

struct RatePoint {
  double rate_per_s = 0;
  std::vector<RateTrial> trials;
  stats::ProportionEstimate attainment;    // pooled good / measured
  stats::ProportionEstimate availability;  // pooled ok / measured
  bool passed = false;
  bool marginal = false;  // the attainment's interval contains the target
  std::string why_not;    // when not passed: the first reason
};

struct CapacitySearchOptions {
  double start_rate_per_s = 1;
  double min_rate_per_s = 0.01;
  double max_rate_per_s = 10'000;
  double precision = 0.1;       // stop when highest-passing * (1 + precision) >= lowest-failing
  std::uint32_t repeats = 2;    // measurements per rate, pooled
  double target_attainment = 0.99;
  double min_availability = 0.99;
  std::uint32_t max_points = 16;  // rates measured at most
};

// OK, or kInvalidInput naming the field.
Status ValidateCapacitySearchOptions(const CapacitySearchOptions& options);

enum class Bracket {
  kBracketed,   // capacity and first_failing are both known
  kAboveRange,  // even max_rate passed: the capacity is at least max_rate
  kBelowRange,  // even min_rate failed: no rate in range meets the SLO
  kUnfinished,  // stopped (interrupted, measurement failed, out of points) before bracketing
};
const char* BracketName(Bracket bracket);

struct CapacityResult {
  std::vector<RatePoint> points;  // in the order they were measured
  Bracket bracket = Bracket::kUnfinished;
  std::optional<double> capacity_per_s;       // highest passing rate below first_failing
  std::optional<double> first_failing_per_s;  // lowest failing rate above capacity
  bool interrupted = false;
  std::string stopped_reason;      // why the search ended early, when it did
  std::vector<std::string> notes;  // e.g. the capacity's own attainment is marginal
  // The point measured at the capacity, when there is one.
  const RatePoint* AtCapacity() const;
};

// Pools the trials of one rate and decides it, by the rule at the top of this file (the first
// reason it fails is why_not). `bakeoff plan` judges a fleet size with it.
RatePoint DecideRate(double rate, std::vector<RateTrial> trials, const CapacitySearchOptions& options);

// Measures one rate once; an error ends the search (its message becomes stopped_reason).
using MeasureRate = std::function<Result<RateTrial>(double rate_per_s, std::uint32_t repeat)>;

// REQUIRES: ValidateCapacitySearchOptions(options) is OK.
CapacityResult SearchCapacity(const CapacitySearchOptions& options, const MeasureRate& measure,
                              const std::atomic<bool>& stop);

nlohmann::json ToJson(const CapacityResult& result, const CapacitySearchOptions& options);

}  // namespace bakeoff::analyze
