// report/study_report.h
//
// Owns: rendering a study's results model (study/runner.h StudyResults) for people: report.md,
// the decision record in Markdown (what was studied, the workload, the elimination table with a
// reason and evidence per cell, each candidate's probes and figures, the verdict with its
// rationale and evidence pointers, revisit conditions, the method's mistakes found, what was
// skipped), and the terminal summary `bakeoff run` prints. Both say "emulated" first when any
// figure comes from the emulated engine.
// Does not own: the results or the decision (study/), verdict.json (study/verdict.h).
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>

#include "study/runner.h"

namespace bakeoff::report {

std::string StudyMarkdown(const study::StudyResults& results);
std::string StudySummaryText(const study::StudyResults& results);

}  // namespace bakeoff::report
