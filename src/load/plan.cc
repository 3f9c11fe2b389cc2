#include "load/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/check.h"
#include "core/rng.h"

namespace bakeoff::load {

const char* ArrivalProcessName(ArrivalProcess process) {
  switch (process) {
    case ArrivalProcess::kConstant: return "constant";
    case ArrivalProcess::kPoisson: return "poisson";
    case ArrivalProcess::kGamma: return "gamma";
  }
  return "unknown";
}

Result<ArrivalProcess> ParseArrivalProcess(std::string_view name) {
  if (name == "constant") return ArrivalProcess::kConstant;
  if (name == "poisson") return ArrivalProcess::kPoisson;
  if (name == "gamma") return ArrivalProcess::kGamma;
  return MakeError(ErrorCode::kInvalidInput, "unknown arrival process '" + std::string(name) +
                                                 "' (expected constant, poisson or gamma)");
}

std::vector<PlannedSend> BuildOpenLoopSchedule(const OpenLoopShape& shape, const StepLimits& limits,
                                               std::uint64_t seed) {
  BAKEOFF_CHECK(shape.rate_per_s > 0 && shape.burstiness > 0);
  BAKEOFF_CHECK(limits.duration || limits.requests) << "a step needs a duration or a count";
  Rng rng(seed);
  const double mean_gap_s = 1.0 / shape.rate_per_s;
  const double warmup_s = ToSeconds(limits.warmup);
  const double end_s = limits.duration ? warmup_s + ToSeconds(*limits.duration) : INFINITY;
  std::vector<PlannedSend> plan;
  std::uint64_t measured = 0;
  // Arrival instants are kept in seconds as a double sum of gaps; for the constant process the
  // k-th instant is k / rate exactly (no accumulation at all).
  double at_s = 0;
  for (std::uint64_t k = 0;; ++k) {
    if (k > 0) {
      switch (shape.process) {
        case ArrivalProcess::kConstant:
          at_s = static_cast<double>(k) * mean_gap_s;
          break;
        case ArrivalProcess::kPoisson:
          at_s += rng.Exponential(mean_gap_s);
          break;
        case ArrivalProcess::kGamma:
          at_s += rng.Gamma(shape.burstiness, mean_gap_s / shape.burstiness);
          break;
      }
    }
    if (!(at_s <= kMaxDurationSeconds)) break;  // not representable as an instant (see plan.h)
    const bool warmup = at_s < warmup_s || k < limits.warmup_requests;
    if (!warmup) {
      if (at_s >= end_s) break;
      if (limits.requests && measured >= *limits.requests) break;
      ++measured;
    }
    plan.push_back(PlannedSend{FromSeconds(at_s), warmup});
  }
  return plan;
}

TracePlan BuildTracePlan(const workload::Trace& trace, double time_scale, const StepLimits& limits) {
  BAKEOFF_CHECK(time_scale > 0);
  const auto& requests = trace.requests;
  TracePlan plan;
  plan.next_turn.assign(requests.size(), -1);
  // Chain each session's turns in turn order (arrival order breaks ties and missing turn numbers).
  std::map<std::string, std::vector<std::size_t>> sessions;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].session_id) sessions[*requests[i].session_id].push_back(i);
  }
  std::vector<bool> follow_up(requests.size(), false);
  for (auto& [id, turns] : sessions) {
    std::stable_sort(turns.begin(), turns.end(), [&](std::size_t a, std::size_t b) {
      return requests[a].turn.value_or(0) < requests[b].turn.value_or(0);
    });
    for (std::size_t k = 1; k < turns.size(); ++k) {
      plan.next_turn[turns[k - 1]] = static_cast<std::int64_t>(turns[k]);
      follow_up[turns[k]] = true;
    }
  }
  const double warmup_s = ToSeconds(limits.warmup);
  const double end_s = limits.duration ? warmup_s + ToSeconds(*limits.duration) : INFINITY;
  std::uint64_t measured = 0;
  std::uint64_t index = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (follow_up[i]) continue;
    const double at_s = requests[i].arrival_s * time_scale;
    if (!(at_s <= kMaxDurationSeconds)) break;  // not representable as an instant (see plan.h)
    const bool warmup = at_s < warmup_s || index < limits.warmup_requests;
    if (!warmup) {
      if (at_s >= end_s) break;
      if (limits.requests && measured >= *limits.requests) break;
      ++measured;
    }
    plan.schedule.push_back(PlannedSend{FromSeconds(at_s), warmup, i});
    ++index;
  }
  return plan;
}

}  // namespace bakeoff::load
