// report/report_folder.h
//
// Owns: the pages of a results folder: report.html beside a bench or simulate run's summary.json,
// and beside a study bundle's verdict.json; and `bakeoff report DIR`, which recognises which of the two a
// folder is and renders its pages again from what the folder holds. A folder that is neither gets
// one line saying what was looked for.
// Does not own: the pages' data (report/run_data.h, report/study_data.h) or their drawing
// (report/html_page.h).
//
// Thread-safety: writes files; one call per folder at a time.
#pragma once

#include <filesystem>
#include <vector>

#include "core/result.h"
#include "report/compare.h"

namespace bakeoff::report {

// Writes DIR/report.html for a bench or simulate run; returns its path.
Result<std::filesystem::path> WriteRunReport(const std::filesystem::path& dir);

// Writes BUNDLE/report.html for a study bundle; returns its path.
Result<std::filesystem::path> WriteStudyReport(const std::filesystem::path& bundle);

// Writes `file` (compare.html): the comparison's table and verdict with both runs' latency curves
// overlaid (each run read back from its folder; one that cannot be read is drawn without curves and
// said so). Returns its path.
Result<std::filesystem::path> WriteComparePage(const Comparison& comparison, const std::filesystem::path& file);

// `bakeoff report DIR`: the pages of whichever kind DIR is, written again; their paths. A study
// bundle's report.md is rendered from the results model read back (study/bundle_reader.h).
// kInvalidInput: DIR is not a bakeoff results folder (the message says what was looked for).
Result<std::vector<std::filesystem::path>> RenderResultsFolder(const std::filesystem::path& dir);

}  // namespace bakeoff::report
