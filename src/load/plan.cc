#include "load/plan.h"

#include <cmath>

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

}  // namespace bakeoff::load
