// report/compare.h
//
// Owns: comparing two bench or simulate results (their summary.json), or two study bundles (each
// read as one run: every candidate's phase steps and its capacity), for upgrades and regressions: whether the two runs measured the same load (the settings that decide the figures;
// which differ, listed), which steps match (by label), and per step and metric the change with the
// 95% order-statistic bounds both runs already hold, and a verdict against a tolerance the user
// sets: worse, better, or no detectable change. A latency percentile is worse only when the new
// run's bound lies wholly above the old run's and the change exceeds the tolerance, so a small
// noisy sample gives "no detectable change", never a false alarm; throughput has no bounds, so it
// gates the verdict only when asked (CompareOptions::gate_throughput). Either run's unequal work
// (summary.json fairness) and emulated figures are said first.
// Does not own: running anything, or the study's decision (study/verdict.h).
//
// Thread-safety: pure functions over values.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace bakeoff::report {

enum class Verdict { kBetter, kWorse, kNoDetectableChange };
const char* VerdictName(Verdict verdict);  // "better", "worse", "no detectable change"

struct MetricChange {
  std::string step;
  std::string metric;  // "ttft_ms p99", "output_tokens_per_s", ...
  bool lower_is_better = true;
  bool gates = true;  // counts toward "regressed"
  double old_value = 0;
  double new_value = 0;
  std::optional<std::pair<double, double>> old_ci;  // 95% bounds, where the run had enough requests
  std::optional<std::pair<double, double>> new_ci;
  double relative = 0;  // new / old - 1
  Verdict verdict = Verdict::kNoDetectableChange;
  std::string basis;  // why: "bounds separate", "bounds overlap", "within the tolerance", ...
};

struct Comparison {
  std::filesystem::path old_dir, new_dir;
  std::vector<std::string> differences;      // settings that differ ("output_tokens: 128 -> 256")
  std::vector<std::string> unmatched_steps;  // in one run only
  std::vector<std::string> unequal_work;     // either run's fairness findings, named by run
  bool emulated = false;                     // either run measured the emulated engine
  double tolerance = 0.05;
  std::vector<MetricChange> changes;
  // Some gating metric is worse.
  bool Regressed() const;
};

struct CompareOptions {
  double tolerance = 0.05;       // relative change below which nothing is called better or worse
  bool allow_different = false;  // compare even when the settings differ (they are listed first)
  bool gate_throughput = false;  // let throughput (no bounds) decide "regressed" too
};

// DIR/summary.json, or a study bundle as one run (docs/formats/compare.md, "Two study bundles").
// Errors: no such file or not JSON (kIo / kInvalidInput naming the file), not a bakeoff result, or
// a schema version this build does not read (kInvalidInput, with both versions).
Result<nlohmann::json> LoadRunSummary(const std::filesystem::path& dir);

// kInvalidInput when the settings differ (the message lists them) unless allow_different, or
// when no step matches.
Result<Comparison> CompareRuns(const nlohmann::json& old_summary, const nlohmann::json& new_summary,
                               const CompareOptions& options);

nlohmann::json ToJson(const Comparison& comparison);  // compare.json (docs/formats/compare.md)
std::string CompareTable(const Comparison& comparison);  // the terminal's view

}  // namespace bakeoff::report
