// analyze/capacity_search.cc: the bracketing search for capacity under SLO (capacity_search.h).
#include "analyze/capacity_search.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace bakeoff::analyze {
namespace {


bool Finite(double x) { return std::isfinite(x); }

nlohmann::json ProportionJson(const stats::ProportionEstimate& e) {
  return {{"value", e.value}, {"lower", e.lower}, {"upper", e.upper}, {"successes", e.successes},
          {"trials", e.trials}};
}

}  // namespace

RatePoint DecideRate(double rate, std::vector<RateTrial> trials, const CapacitySearchOptions& o) {
  RatePoint p;
  p.rate_per_s = rate;
  std::uint64_t measured = 0, ok = 0, good = 0;
  for (const RateTrial& t : trials) {
    measured += t.measured;
    ok += t.ok;
    good += t.good;
  }
  p.attainment = stats::EstimateProportion(good, measured);
  p.availability = stats::EstimateProportion(ok, measured);
  p.marginal = measured > 0 && p.attainment.lower < o.target_attainment &&
               p.attainment.upper >= o.target_attainment;
  for (const RateTrial& t : trials) {
    if (!p.why_not.empty()) break;
    if (t.interrupted) p.why_not = "interrupted";
    else if (!t.stopped_reason.empty()) p.why_not = "given up: " + t.stopped_reason;
    else if (t.generator_limited) p.why_not = "generator-limited (the client, not the target, set the pace)";
    else if (t.measured == 0) p.why_not = "no measured requests";
    else if (!t.terms_met) p.why_not = fmt::format("a percentile term of the SLO failed (repeat {})", t.repeat);
  }
  if (p.why_not.empty() && p.attainment.value < o.target_attainment) {
    p.why_not = fmt::format("SLO attainment {:.2f}% < target {:.2f}%", 100 * p.attainment.value,
                            100 * o.target_attainment);
  }
  if (p.why_not.empty() && p.availability.value < o.min_availability) {
    p.why_not = fmt::format("availability {:.2f}% < target {:.2f}%", 100 * p.availability.value,
                            100 * o.min_availability);
  }
  p.passed = p.why_not.empty();
  p.trials = std::move(trials);
  return p;
}

RateTrial TrialFromStep(const StepAnalysis& step, double rate_per_s, std::uint32_t repeat) {
  RateTrial t;
  t.rate_per_s = rate_per_s;
  t.repeat = repeat;
  t.measured = step.measured_requests;
  t.ok = step.ok_requests;
  t.good = step.good_requests;
  t.terms_met = std::all_of(step.slo.begin(), step.slo.end(), [](const SloResult& r) { return r.met; });
  t.generator_limited = step.generator_limited;
  t.stopped_reason = step.stopped_reason;
  t.interrupted = step.interrupted;
  t.goodput_per_s = step.goodput_per_s;
  t.output_tokens_per_s = step.output_tokens_per_s;
  return t;
}

Status ValidateCapacitySearchOptions(const CapacitySearchOptions& o) {
  if (!Finite(o.min_rate_per_s) || o.min_rate_per_s <= 0) return InvalidInput("capacity: min_rate must be > 0");
  if (!Finite(o.max_rate_per_s) || o.max_rate_per_s < o.min_rate_per_s) {
    return InvalidInput("capacity: max_rate must be at least min_rate");
  }
  if (!Finite(o.start_rate_per_s) || o.start_rate_per_s < o.min_rate_per_s ||
      o.start_rate_per_s > o.max_rate_per_s) {
    return InvalidInput(fmt::format("capacity: start_rate {} is outside [{}, {}]", o.start_rate_per_s,
                               o.min_rate_per_s, o.max_rate_per_s));
  }
  if (!Finite(o.precision) || o.precision <= 0.001 || o.precision > 1) {
    return InvalidInput("capacity: precision must be in (0.001, 1]");
  }
  if (o.repeats < 1 || o.repeats > 100) return InvalidInput("capacity: repeats must be in [1, 100]");
  if (!(o.target_attainment > 0 && o.target_attainment <= 1)) {
    return InvalidInput("capacity: the attainment target must be in (0, 1]");
  }
  if (!(o.min_availability >= 0 && o.min_availability <= 1)) {
    return InvalidInput("capacity: the availability target must be in [0, 1]");
  }
  if (o.max_points < 2 || o.max_points > 200) return InvalidInput("capacity: max_points must be in [2, 200]");
  return Ok{};
}

const char* BracketName(Bracket bracket) {
  switch (bracket) {
    case Bracket::kBracketed: return "bracketed";
    case Bracket::kAboveRange: return "above_range";
    case Bracket::kBelowRange: return "below_range";
    case Bracket::kUnfinished: return "unfinished";
  }
  return "?";
}

const RatePoint* CapacityResult::AtCapacity() const {
  if (!capacity_per_s) return nullptr;
  for (const RatePoint& p : points) {
    if (p.rate_per_s == *capacity_per_s) return &p;
  }
  return nullptr;
}

CapacityResult SearchCapacity(const CapacitySearchOptions& o, const MeasureRate& measure,
                              const std::atomic<bool>& stop) {
  CapacityResult result;
  std::optional<double> lo;  // highest passing rate so far (below hi)
  std::optional<double> hi;  // lowest failing rate so far
  // Measures `rate` (all repeats); false when the search must end.
  auto probe = [&](double rate) -> std::optional<bool> {
    if (stop) {
      result.interrupted = true;
      result.stopped_reason = "interrupted";
      return std::nullopt;
    }
    if (result.points.size() >= o.max_points) {
      result.stopped_reason = fmt::format("measured {} rates (max_points) before the bracket was narrow enough",
                                          o.max_points);
      return std::nullopt;
    }
    std::vector<RateTrial> trials;
    for (std::uint32_t r = 0; r < o.repeats; ++r) {
      Result<RateTrial> trial = measure(rate, r);
      if (!trial.ok()) {
        result.stopped_reason = fmt::format("measuring {:.4g}/s: {}", rate, trial.error().message);
        return std::nullopt;
      }
      trials.push_back(std::move(trial.value()));
      if (trials.back().interrupted) {
        result.interrupted = true;
        result.stopped_reason = "interrupted";
        result.points.push_back(DecideRate(rate, std::move(trials), o));
        return std::nullopt;
      }
    }
    RatePoint point = DecideRate(rate, std::move(trials), o);
    const bool passed = point.passed;
    result.points.push_back(std::move(point));
    return passed;
  };

  // Expand from the start until one rate passes and a higher one fails.
  const double start = o.start_rate_per_s;
  std::optional<bool> first = probe(start);
  if (!first) return result;
  if (*first) {
    lo = start;
    while (!hi) {
      if (*lo >= o.max_rate_per_s) {
        result.bracket = Bracket::kAboveRange;
        result.capacity_per_s = lo;
        return result;
      }
      const double next = std::min(*lo * 2, o.max_rate_per_s);
      std::optional<bool> passed = probe(next);
      if (!passed) {
        result.capacity_per_s = lo;
        return result;
      }
      (*passed ? lo : hi) = next;
    }
  } else {
    hi = start;
    while (!lo) {
      if (*hi <= o.min_rate_per_s) {
        result.bracket = Bracket::kBelowRange;
        result.first_failing_per_s = hi;
        return result;
      }
      const double next = std::max(*hi / 2, o.min_rate_per_s);
      std::optional<bool> passed = probe(next);
      if (!passed) {
        result.first_failing_per_s = hi;
        return result;
      }
      (*passed ? lo : hi) = next;
    }
  }
  // Bisect geometrically: rates are compared by ratio, not difference.
  while (*lo * (1 + o.precision) < *hi) {
    const double mid = std::sqrt(*lo * *hi);
    std::optional<bool> passed = probe(mid);
    if (!passed) {
      result.capacity_per_s = lo;
      result.first_failing_per_s = hi;
      return result;
    }
    (*passed ? lo : hi) = mid;
  }
  result.bracket = Bracket::kBracketed;
  result.capacity_per_s = lo;
  result.first_failing_per_s = hi;
  if (const RatePoint* at = result.AtCapacity(); at != nullptr && at->marginal) {
    result.notes.push_back(fmt::format(
        "marginal: at {:.4g}/s the attainment's 95% interval [{:.2f}%, {:.2f}%] contains the target "
        "{:.2f}%; more requests per step would settle it",
        at->rate_per_s, 100 * at->attainment.lower, 100 * at->attainment.upper, 100 * o.target_attainment));
  }
  return result;
}

nlohmann::json ToJson(const CapacityResult& r, const CapacitySearchOptions& o) {
  nlohmann::json points = nlohmann::json::array();
  for (const RatePoint& p : r.points) {
    nlohmann::json trials = nlohmann::json::array();
    for (const RateTrial& t : p.trials) {
      trials.push_back({{"repeat", t.repeat},
                        {"measured", t.measured},
                        {"ok", t.ok},
                        {"good", t.good},
                        {"terms_met", t.terms_met},
                        {"generator_limited", t.generator_limited},
                        {"stopped_reason", t.stopped_reason},
                        {"goodput_per_s", t.goodput_per_s},
                        {"output_tokens_per_s", t.output_tokens_per_s},
                        {"records", t.where}});
    }
    points.push_back({{"rate_per_s", p.rate_per_s},
                      {"passed", p.passed},
                      {"marginal", p.marginal},
                      {"why_not", p.why_not},
                      {"attainment", ProportionJson(p.attainment)},
                      {"availability", ProportionJson(p.availability)},
                      {"trials", trials}});
  }
  nlohmann::json j = {{"bracket", BracketName(r.bracket)},
                      {"capacity_per_s", r.capacity_per_s ? nlohmann::json(*r.capacity_per_s) : nlohmann::json()},
                      {"first_failing_per_s",
                       r.first_failing_per_s ? nlohmann::json(*r.first_failing_per_s) : nlohmann::json()},
                      {"interrupted", r.interrupted},
                      {"stopped_reason", r.stopped_reason},
                      {"notes", r.notes},
                      {"options",
                       {{"start_rate_per_s", o.start_rate_per_s},
                        {"min_rate_per_s", o.min_rate_per_s},
                        {"max_rate_per_s", o.max_rate_per_s},
                        {"precision", o.precision},
                        {"repeats", o.repeats},
                        {"target_attainment", o.target_attainment},
                        {"min_availability", o.min_availability}}},
                      {"points", points}};
  return j;
}

}  // namespace bakeoff::analyze
