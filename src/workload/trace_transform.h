// workload/trace_transform.h
//
// Owns: the what-if changes `bakeoff plan` applies to a workload before sizing a fleet for it:
// answers made longer or shorter, and prefix reuse cut to a share of what it was. (Rate and time
// scaling are synthesis.h's ScaleRate and ScaleTime.)
// Does not own: how reuse is counted (prefix_reuse.h: an ideal, never-evicting cache).
//
// Thread-safety: plain functions over values.
#pragma once

#include <cstdint>
#include <optional>

#include "workload/trace.h"

namespace bakeoff::workload {

// Multiplies every request's output tokens by `factor` (rounded, at least 1). REQUIRES: factor > 0.
void ScaleOutputs(Trace& trace, double factor);

// The share of prompt tokens an ideal prefix cache serves over the trace (prefix_reuse.h), or
// nullopt when the trace carries no prefix block ids to count it from.
std::optional<double> IdealPrefixReuse(const Trace& trace);

struct ReuseChange {
  double before = 0;  // IdealPrefixReuse before and after
  double after = 0;
  double isolated_share = 0;  // share of the requests whose blocks were made their own
};

// Cuts the trace's prefix reuse to about `keep` of what it was (0.5: reuse halves) by giving a
// deterministic pseudo-random subset of the requests block ids no other request has, the subset's
// size found by bisection on the measured reuse (until within 2% of the reuse before the cut of
// the target, or 20 rounds).
// A request so isolated neither reuses nor is reused, as a user whose prompt shares nothing.
// nullopt when the trace has no prefix block ids (then nothing is changed). REQUIRES: keep in [0, 1].
std::optional<ReuseChange> CutPrefixReuse(Trace& trace, double keep);

}  // namespace bakeoff::workload
