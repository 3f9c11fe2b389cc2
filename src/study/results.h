// study/results.h
//
// Owns: the one in-memory model of a study's results: per candidate its gate row, what its probes
// found, the figures of every load phase (single request, concurrency sweep, capacity search,
// workload replay) and why anything was skipped or failed; the workload's fingerprint figures
// that the verdict's revisit conditions read; and the verdict. verdict.json, report.md and the
// terminal tables are all rendered from this value (study/verdict.h, report/), never from each
// other. Each phase's part is also written as JSON when the phase ends, and read back on resume,
// so an interrupted study keeps what it measured (the From/To JSON pairs here are exact inverses).
// Does not own: computing the figures (analyze/), running anything (study/runner.h).
//
// Thread-safety: plain values.
// Units: milliseconds for latencies, seconds for durations, per-second rates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/capacity_search.h"
#include "analyze/step_analysis.h"
#include "study/gate.h"
#include "study/study.h"
#include "workload/fingerprint.h"

namespace bakeoff::study {

struct TermFigure {
  std::string text;  // "ttft_p99=2s"
  double observed_ms = 0;
  double threshold_ms = 0;
  bool met = false;
};

// One measured step, as the verdict and the report use it.
struct StepFigures {
  std::string label;
  std::string records;  // records.jsonl, relative to the bundle
  std::uint64_t measured = 0, ok = 0, good = 0;
  double attainment = 0;
  double offered_rate_per_s = 0, request_rate_per_s = 0, goodput_per_s = 0, output_tokens_per_s = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p50_ms = 0, tpot_p99_ms = 0, e2e_p50_ms = 0, e2e_p99_ms = 0;
  double mean_prompt_tokens = 0, mean_output_tokens = 0;
  bool generator_limited = false;
  bool p99_bounded = true;  // enough samples for a two-sided bound on p99
  std::vector<TermFigure> terms;
  // Replay: TTFT p99 of the shortest and the longest quarter of prompts (head-of-line blocking).
  double short_ttft_p99_ms = 0, long_ttft_p99_ms = 0;
  std::uint64_t short_count = 0, long_count = 0;
};
StepFigures FiguresOf(const analyze::StepAnalysis& step, std::string records);

struct PhaseResult {
  Phase phase = Phase::kSingle;
  std::uint32_t round = 0;
  std::vector<StepFigures> steps;
  std::string error;  // a step was given up: the candidate failed there (kept, restored on resume)
  bool simulated = false;  // measured on the virtual clock
  bool emulated = false;   // against the emulated engine
  // What the requests asked for and this engine's answers did not give (summary.json fairness of
  // the phase's run): a forced length not sent or not honoured, outputs counted by the client.
  std::vector<std::string> unequal_work;
};

// A probe finding as the study judged it (study/contracts.h).
struct ProbeFinding {
  std::string code;
  std::string severity;  // the probe's own: disqualifying, warning, info
  std::string message;
  std::string judgement;  // JudgementName: disqualifies, risk, accepted_risk, note
  std::string breaks;     // BrokenName: "feature:streaming_cancel", "contract:bounded_queue", ... or ""
  std::string accepted_reason;  // accepted_risk: the study's reason
  std::string known_limit;      // the catalog entry's known limit that names this finding
  std::vector<std::string> evidence;  // files relative to the probes folder
};

struct ProbeSummary {
  bool ran = false;
  std::string skipped_reason;
  bool disqualified = false;  // the probes' own severities; the gate row holds the study's judgement
  std::vector<std::string> verdicts;  // "readiness: pass", ...
  std::vector<ProbeFinding> findings;
  double cold_start_s = -1;  // spawn to first answer; -1: not measured
  double drain_s = -1;       // SIGTERM to exit; -1: not measured
  std::string path;          // probes.json, relative to the bundle
  std::vector<GateCell> gate_cells;  // the candidate's gate row after the probes' evidence
};

struct CapacitySummary {
  bool ran = false;
  std::string skipped_reason;
  std::string error;
  std::string bracket;  // analyze::BracketName
  double capacity_per_s = -1;       // -1: none found
  double first_failing_per_s = -1;  // -1: none found
  std::vector<std::string> notes;
  std::string stopped_reason;
  struct Point {
    double rate_per_s = 0;
    bool passed = false;
    bool marginal = false;
    std::string why_not;
    double attainment = 0, attainment_lower = 0, attainment_upper = 0, availability = 0;
    std::vector<StepFigures> trials;
  };
  std::vector<Point> points;
  const Point* AtCapacity() const;
  bool simulated = false;
  bool emulated = false;
  std::string path;  // capacity/result.json, relative to the bundle
};

struct CandidateResult {
  std::string name;
  CandidateKind kind = CandidateKind::kEmulated;
  std::string engine;   // adapter or "emulated"
  std::string version;  // discovered, else the catalog's; empty: not recorded
  std::string version_source;  // "discovered", "catalog", ""
  bool emulated = false;
  bool eliminated = false;  // at the gate (catalog or probes)
  std::string failed;       // failed mid-study: what happened
  // Where this candidate could not be given the same work as the others (e.g. no forced output
  // length): every comparison with it is flagged.
  std::vector<std::string> unequal_work;
  // The catalog lint's findings on the candidate's entry (an unpinned image, a stale
  // verification, ...): the decision record carries them as risks.
  std::vector<std::string> catalog_findings;
  std::vector<std::string> known_limits;  // the catalog entry's (study/catalog.h KnownLimit text)
  ProbeSummary probes;
  std::vector<PhaseResult> phases;
  CapacitySummary capacity;
};

// The workload figures the verdict's revisit conditions read (from fingerprint.json).
struct WorkloadFigures {
  std::string source;
  std::uint64_t requests = 0;
  double rate_per_s = 0;
  double prefix_reuse = -1;          // share of prompt tokens in reused prefix blocks; -1: unknown
  double output_input_ratio = 0;     // mean output / mean input tokens
  double peak_to_mean_1s = 0;
  double input_tokens_mean = 0, output_tokens_mean = 0;
  bool lengths_fixed = false;        // every prompt the same length and every answer too
  bool synthesized = false;
  std::string classification;
};

// The figures of the workload every candidate was given, from its fingerprint. `source` names the
// study's traffic as the study names it (relative to the study file), so the record reads the same
// wherever the study lives; traffic from a fingerprint or a shape is synthesized.
WorkloadFigures WorkloadFiguresOf(const workload::Fingerprint& fp, const Study& study);

// Every JSON pair below is exact: From(To(x)) == x for the fields listed.
nlohmann::json ToJson(const StepFigures& f);
StepFigures StepFiguresFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const PhaseResult& p);
PhaseResult PhaseResultFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const ProbeSummary& p);
ProbeSummary ProbeSummaryFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const CapacitySummary& c);
CapacitySummary CapacitySummaryFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const GateCell& c);
GateCell GateCellFromJson(const nlohmann::json& j);
GateTable GateTableFromJson(const nlohmann::json& j);  // gate.json read back (study/gate.h ToJson)

CapacitySummary SummarizeCapacity(const analyze::CapacityResult& result,
                                  const std::vector<std::vector<StepFigures>>& trials_per_point);

}  // namespace bakeoff::study
