// cli/table.h
//
// Owns: the plain-text table `bakeoff bench` prints at the end of a run: one row per step, the
// latency percentiles next to send lag, failures, SLO attainment, and an "emulated" label when
// the target is bakeoff's emulated engine.
#pragma once

#include <string>

#include "analyze/bench.h"

namespace bakeoff::cli {

std::string FormatBenchTable(const analyze::BenchOutcome& outcome);

}  // namespace bakeoff::cli
