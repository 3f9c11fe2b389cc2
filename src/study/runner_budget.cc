// study/runner_budget.cc: the study runner's side of the budget (how it is shared is
// study/budget.h): the plan's lines for the manifest and report.md (budget_plan), each load phase
// run's slice of the time then left and its steps' parts of it, and every cut recorded
// (budget_cuts): probes skipped for the budget, steps that measured fewer requests than planned
// in their slice, a capacity search ended at its slice. Declarations in runner_impl.h.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "study/budget.h"
#include "study/runner_impl.h"

namespace bakeoff::study::runner_internal {

void StudyRunner::PlanBudget() {
  std::size_t probing = 0;
  bool real = false;
  for (std::size_t i = 0; i < results_.candidates.size(); ++i) {
    if (results_.candidates[i].eliminated) continue;
    ++probing;
    real = real || study_.candidates[i].kind != CandidateKind::kEmulated;
  }
  std::string line = fmt::format("budget {:.0f} s", ToSeconds(study_.budget));
  if (study_.Runs(Phase::kProbes) && probing > 0) {
    probe_share_ = ProbeShare(study_, probing, real);
    line += fmt::format(": the probes of each of {} candidates up to {:.0f} s (a probe whose worst case does not "
                        "fit what is left is skipped)",
                        probing, ToSeconds(*probe_share_));
  }
  results_.budget_plan.push_back(line);
  log_(line);
}

// Emulated candidates' load runs on the virtual clock and takes no share.
void StudyRunner::PlanLoadBudget(const std::vector<std::size_t>& survivors) {
  std::size_t real = 0;
  for (std::size_t i : survivors) real += study_.candidates[i].kind == CandidateKind::kEmulated ? 0 : 1;
  const double per_candidate = CandidateLoadWeight(study_);
  pending_weight_ = per_candidate * static_cast<double>(real);
  if (pending_weight_ <= 0) return;
  const Nanos left = std::max(Nanos{0}, deadline_ - std::chrono::steady_clock::now());
  std::string line = fmt::format(
      "load phases: {:.0f} s left for {} candidate(s), shared by weight when each phase starts (single 1, "
      "sweep 1 per level, replay 2 per round, capacity 4): about {:.0f} s each",
      ToSeconds(left), real, ToSeconds(left) / static_cast<double>(real));
  if (study_.Runs(Phase::kSweep)) {
    line += fmt::format(", {:.0f} s per sweep level",
                        ToSeconds(SliceOf(left, 1, pending_weight_)));
  }
  if (study_.Runs(Phase::kCapacity)) {
    line += fmt::format(", {:.0f} s per capacity search",
                        ToSeconds(SliceOf(left, PhaseWeight(study_, Phase::kCapacity), pending_weight_)));
  }
  results_.budget_plan.push_back(line);
  log_(line);
}

std::optional<Nanos> StudyRunner::TakeSlice(std::size_t i, Phase phase) {
  if (study_.candidates[i].kind == CandidateKind::kEmulated) return std::nullopt;
  const double weight = PhaseWeight(study_, phase);
  const Nanos left = std::max(Nanos{0}, deadline_ - std::chrono::steady_clock::now());
  const Nanos slice = SliceOf(left, weight, pending_weight_);
  pending_weight_ = std::max(0.0, pending_weight_ - weight);
  return slice;
}

// The slice is shared evenly by the steps, at least a second each.
StepsSlice StudyRunner::SliceSteps(const std::optional<Nanos>& slice, bool simulated,
                                   std::vector<load::StepSpec>& steps) const {
  StepsSlice sliced;
  if (slice) sliced.per_step = *slice / static_cast<std::int64_t>(std::max<std::size_t>(1, steps.size()));
  for (load::StepSpec& step : steps) {
    sliced.planned.push_back(step.limits.requests.value_or(0));
    if (slice && !simulated) {
      step.limits.duration = std::max<Nanos>(std::chrono::seconds(1), *sliced.per_step);
    }
  }
  return sliced;
}

void StudyRunner::Cut(std::string what) {
  log_("budget: " + what);
  results_.budget_cuts.push_back(std::move(what));
}

void StudyRunner::NoteProbeCuts(std::size_t i, const qualify::ProbeRun& probed) {
  for (const std::string& skipped : probed.skipped_for_budget) {
    Cut(fmt::format("{}/probes: {} not run: skipped for the budget", study_.candidates[i].name, skipped));
  }
}

void StudyRunner::NoteStepCuts(std::size_t i, const std::string& name, const PhaseResult& result,
                               const StepsSlice& sliced) {
  const std::vector<std::uint64_t>& planned = sliced.planned;
  for (std::size_t k = 0; k < result.steps.size() && k < planned.size() && result.error.empty(); ++k) {
    if (sliced.per_step && result.steps[k].measured < planned[k]) {
      Cut(fmt::format("{}/{} {}: {} of {} requests measured in its {:.0f} s of the budget (wider confidence "
                      "intervals)",
                      study_.candidates[i].name, name, result.steps[k].label, result.steps[k].measured, planned[k],
                      ToSeconds(*sliced.per_step)));
    }
  }
}

// Trials that measured fewer requests than planned, and a search ended before its bracket was
// narrow enough (its result a lower bound).
void StudyRunner::NoteCapacityCut(std::size_t i, const analyze::CapacityResult& found,
                                  const std::vector<std::vector<StepFigures>>& per_point, Nanos slice,
                                  bool cut_at_slice) {
  const std::string& name = study_.candidates[i].name;
  std::size_t short_trials = 0, all_trials = 0;
  for (const std::vector<StepFigures>& point : per_point) {
    for (const StepFigures& t : point) {
      ++all_trials;
      short_trials += t.measured < study_.plan.step_requests ? 1 : 0;
    }
  }
  if (short_trials > 0) {
    Cut(fmt::format("{}/capacity: {} of {} trials measured fewer than {} requests (a trial may take a fifth of the "
                    "search's {:.0f} s)",
                    name, short_trials, all_trials, study_.plan.step_requests, ToSeconds(slice)));
  }
  if (!cut_at_slice) return;
  const std::string what =
      found.capacity_per_s
          ? fmt::format("capacity is at least {:.3g} req/s{}", *found.capacity_per_s,
                        found.first_failing_per_s ? fmt::format(" and below {:.3g}", *found.first_failing_per_s) : "")
          : found.first_failing_per_s ? fmt::format("no rate passed; {:.3g} req/s failed", *found.first_failing_per_s)
                                      : "no rate was measured whole";
  const std::string note = fmt::format("the search ended at its {:.0f} s of the budget after {} rate(s): {}",
                                       ToSeconds(slice), found.points.size(), what);
  results_.candidates[i].capacity.notes.push_back(note);
  Cut(fmt::format("{}/capacity: {}", name, note));
}

}  // namespace bakeoff::study::runner_internal
