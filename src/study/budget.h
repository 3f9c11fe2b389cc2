// study/budget.h
//
// Owns: how a study's wall-time budget is shared (docs/formats/study.md, "Budget"). Before
// anything runs, the probes of each candidate get an equal part of kProbeShare of the budget (all
// of it when no load phase follows), and every load phase run of every candidate gets a weight.
// When a load phase run starts it gets the part of the time then left that its weight is of the
// weights still to run: a phase that ends early leaves its time to the ones after it, and the last
// candidate is never starved, so a study cut short still measures every candidate on the same
// phases, each with fewer requests, and says so.
// Does not own: running the phases (study/runner*.cc) and recording what a cut cost
// (study/runner_budget.cc).
#pragma once

#include <cstddef>

#include "core/clock.h"
#include "study/study.h"

namespace bakeoff::study {

// The share of the budget the probes may take when load phases that take wall time follow them
// (not when every candidate is emulated: its load phases run on the virtual clock).
inline constexpr double kProbeShare = 0.5;

// What each probing candidate's probes may take.
Nanos ProbeShare(const Study& study, std::size_t probing_candidates, bool load_takes_wall_time);

// A load phase run's weight: single 1, sweep 1 per concurrency level, replay 2, capacity 4 (it
// measures several rates). 0 for a phase the plan does not run.
double PhaseWeight(const Study& study, Phase phase);

// All the load phase runs of one candidate: every round of single, sweep and replay, and capacity.
double CandidateLoadWeight(const Study& study);

// The part of `left` a run of `weight` gets when `pending` (its own weight included) is still to
// run. REQUIRES: 0 < weight <= pending.
Nanos SliceOf(Nanos left, double weight, double pending);

}  // namespace bakeoff::study
