// cli/table.h
//
// Owns: the end of a `bakeoff bench` or `bakeoff simulate` run on the terminal: the plain-text
// table (one row per step, the latency percentiles next to send lag, failures, SLO attainment,
// and an "emulated" label when the target is bakeoff's emulated engine), the output paths, and
// the exit code.
#pragma once

#include <string>

#include "run/bench.h"

namespace bakeoff::cli {

std::string FormatBenchTable(const run::BenchOutcome& outcome);

// Prints the table and the output paths to stdout (and to stderr what could not be written) and
// returns the exit code, by the first rule that applies:
//   `interrupted_exit_code` (128 + signal) when a stop signal ended the run;
//   1 when summary.json or some record could not be written;
//   1 when a step was given up because no request succeeded for --give-up-after;
//   1 when fewer than half of all measured requests succeeded ("most requests failed");
//   0 otherwise: the run measured what it planned, failures included.
int ReportRun(const run::BenchOutcome& outcome, int interrupted_exit_code);

}  // namespace bakeoff::cli
