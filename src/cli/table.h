// cli/table.h
//
// Owns: the end of a `bakeoff bench` or `bakeoff simulate` run on the terminal: the plain-text
// table (one row per step, the latency percentiles next to send lag, failures, SLO attainment,
// and an "emulated" label when the target is bakeoff's emulated engine), the output paths, and
// the exit code.
#pragma once

#include <string>

#include "analyze/bench.h"

namespace bakeoff::cli {

std::string FormatBenchTable(const analyze::BenchOutcome& outcome);

// Prints the table and the output paths to stdout and returns the exit code: 130 when
// interrupted, 0 when some request succeeded, 1 when none did.
int ReportRun(const analyze::BenchOutcome& outcome);

}  // namespace bakeoff::cli
