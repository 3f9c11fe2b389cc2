// report/study_data.h
//
// Owns: what a study's report.html draws, read back from its results bundle (docs/formats/bundle.md):
// the manifest, the verdict with its rationale and evidence pointers, the elimination table, each
// candidate's probe findings, capacity search points, sweep and workload replay (its latency
// quantile curves from the replay's records, report/run_data.h), and the workload as given (its
// arrivals and length histograms from workload/trace.jsonl, headline figures of fingerprint.json).
// The bundle's JSON files are the results model's own serializations (study/results.h), so the page
// drawn after `bakeoff run` and the one `bakeoff report` draws later from the same bundle are the
// same page.
// Does not own: the decision (study/verdict.h), drawing (report/html_page.h).
//
// Thread-safety: pure functions over files.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace bakeoff::report {

// kInvalidInput (one line saying why): no manifest.json and verdict.json, or they are not a bakeoff
// bundle's of schema 1.
Result<nlohmann::json> ReadStudyData(const std::filesystem::path& bundle);

}  // namespace bakeoff::report
