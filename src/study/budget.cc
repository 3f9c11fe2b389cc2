// study/budget.cc
#include "study/budget.h"

#include <algorithm>

namespace bakeoff::study {

Nanos ProbeShare(const Study& study, std::size_t probing_candidates, bool load_takes_wall_time) {
  const bool load_follows = std::any_of(study.plan.phases.begin(), study.plan.phases.end(),
                                        [](Phase p) { return p != Phase::kProbes; });
  const double share = load_follows && load_takes_wall_time ? kProbeShare : 1.0;
  return std::chrono::duration_cast<Nanos>(
      study.budget * share / static_cast<double>(std::max<std::size_t>(probing_candidates, 1)));
}

double PhaseWeight(const Study& study, Phase phase) {
  if (!study.Runs(phase)) return 0;
  switch (phase) {
    case Phase::kSingle:
      return 1;
    case Phase::kSweep:
      return static_cast<double>(study.plan.concurrency.size());
    case Phase::kReplay:
      return 2;
    case Phase::kCapacity:
      return 4;
    case Phase::kProbes:
      return 0;
  }
  return 0;
}

double CandidateLoadWeight(const Study& study) {
  double rounds = 0;
  for (Phase p : {Phase::kSingle, Phase::kSweep, Phase::kReplay}) rounds += PhaseWeight(study, p);
  return rounds * study.plan.repeats + PhaseWeight(study, Phase::kCapacity);
}

Nanos SliceOf(Nanos left, double weight, double pending) {
  if (left <= Nanos{0} || pending <= 0) return Nanos{0};
  return std::chrono::duration_cast<Nanos>(left * std::clamp(weight / pending, 0.0, 1.0));
}

}  // namespace bakeoff::study
