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

OpenLoopGenerator::OpenLoopGenerator(const OpenLoopShape& shape, const StepLimits& limits,
                                     std::uint64_t seed)
    : shape_(shape),
      limits_(limits),
      rng_(seed),
      warmup_s_(ToSeconds(limits.warmup)),
      end_s_(limits.duration ? ToSeconds(limits.warmup + *limits.duration) : INFINITY) {
  BAKEOFF_CHECK(shape.rate_per_s > 0 && shape.burstiness > 0);
  BAKEOFF_CHECK(limits.duration || limits.requests) << "a step needs a duration or a count";
  Plan();
}

void OpenLoopGenerator::Advance() {
  BAKEOFF_CHECK(!done_);
  ++index_;
  Plan();
}

void OpenLoopGenerator::Plan() {
  // Arrival instants are kept in seconds as a double sum of gaps; for the constant process the
  // k-th instant is k / rate exactly (no accumulation at all).
  const double mean_gap_s = 1.0 / shape_.rate_per_s;
  if (index_ > 0) {
    switch (shape_.process) {
      case ArrivalProcess::kConstant:
        at_s_ = static_cast<double>(index_) * mean_gap_s;
        break;
      case ArrivalProcess::kPoisson:
        at_s_ += rng_.Exponential(mean_gap_s);
        break;
      case ArrivalProcess::kGamma:
        at_s_ += rng_.Gamma(shape_.burstiness, mean_gap_s / shape_.burstiness);
        break;
    }
  }
  if (!(at_s_ <= kMaxDurationSeconds)) {  // not representable as an instant (see plan.h)
    done_ = true;
    return;
  }
  const bool warmup = at_s_ < warmup_s_ || index_ < limits_.warmup_requests;
  if (!warmup) {
    if (at_s_ >= end_s_ || (limits_.requests && measured_ >= *limits_.requests)) {
      done_ = true;
      return;
    }
    ++measured_;
  }
  current_ = PlannedSend{FromSeconds(at_s_), warmup};
}

std::vector<PlannedSend> BuildOpenLoopSchedule(const OpenLoopShape& shape, const StepLimits& limits,
                                               std::uint64_t seed) {
  std::vector<PlannedSend> plan;
  for (OpenLoopGenerator generator(shape, limits, seed); !generator.done(); generator.Advance()) {
    plan.push_back(generator.current());
  }
  return plan;
}

ScheduleCursor::ScheduleCursor(OpenLoopGenerator generator, std::size_t first, std::size_t stride)
    : generator_(std::move(generator)), next_(first), stride_(stride) {
  BAKEOFF_CHECK(stride >= 1 && generator_->index() == 0);
  while (!generator_->done() && generator_->index() < first) generator_->Advance();
}

std::size_t ScheduleCursor::CountToEnd() {
  if (schedule_ != nullptr) return schedule_->size();
  while (!generator_->done()) generator_->Advance();
  return generator_->index();
}

void ScheduleCursor::Advance() {
  next_ += stride_;
  if (generator_) {
    while (!generator_->done() && generator_->index() < next_) generator_->Advance();
  }
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
