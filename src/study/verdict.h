// study/verdict.h
//
// Owns: the decision of a study, from its results model: per candidate its status (eliminated at
// the gate, disqualified by a probe, failed mid-study, not measured, fails the SLO, meets the
// SLO) with one evidence item per SLO clause (observed, threshold, and where in the bundle the
// number is); the ranking of the candidates that meet the SLO by the study's objective; the
// choice and the runner-up as rollback; a rationale whose every sentence points at a number in
// the bundle; the conditions under which to revisit the choice (read from the workload and the
// winner's strengths); and the method's common mistakes checked on the study itself.
// Does not own: measuring anything, or rendering beyond verdict.json (report/).
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "study/results.h"

namespace bakeoff::study {

enum class CandidateStatus { kEliminated, kDisqualified, kFailed, kNotMeasured, kFailsSlo, kMeetsSlo };
std::string_view CandidateStatusName(CandidateStatus status);

struct EvidenceItem {
  std::string clause;  // "ttft_p99=2s", "availability", "min_goodput", "cold_start", "drain", "cost"
  CellStatus status = CellStatus::kUnknown;
  double observed = 0;
  double threshold = 0;
  std::string unit;     // "ms", "s", "share", "req/s", "<currency>/Mtok"
  std::string text;     // one sentence
  std::string pointer;  // "candidates/x/capacity/result.json#/points/3"
};

struct CandidateVerdict {
  std::string name;
  CandidateStatus status = CandidateStatus::kNotMeasured;
  std::vector<std::string> reasons;  // why eliminated / disqualified / failed / not measured
  std::vector<std::string> risks;    // unknown gate cells and unknown SLO clauses
  std::vector<EvidenceItem> evidence;
  // Named findings from the figures ("head_of_line_blocking: ...") and notes beside them.
  std::vector<std::string> findings;
  bool has_objective = false;
  double objective = 0;  // the objective's value (higher is better after Better())
  std::string objective_unit;
  int rank = 0;  // 1 = best among those that meet the SLO; 0: not ranked
  double capacity_per_s = -1;
  double goodput_per_s = -1;
  double cost_per_million_tokens = -1;
  double ttft_p99_ms = -1;  // at capacity (worst repeat), else on the replay; -1 in a pooling study
  // A pooling study's figures, where TTFT means nothing (a whole answer): E2E p99 and inputs
  // (texts or documents) per second, at capacity or else on the replay; -1 otherwise.
  double e2e_p99_ms = -1;
  double inputs_per_s = -1;
  // The latency that breaks ties and is shown: TTFT p99, or E2E p99 in a pooling study.
  double TailLatencyMs() const { return ttft_p99_ms >= 0 ? ttft_p99_ms : e2e_p99_ms; }
  std::string engine, version;
  bool emulated = false;
};

struct Sentence {
  std::string text;
  std::vector<std::string> pointers;  // bundle paths (with a JSON pointer) the sentence's numbers come from
};

struct Mistake {
  std::string code;
  std::string message;
};

struct Verdict {
  std::string objective;
  std::vector<CandidateVerdict> candidates;  // the study's order
  std::string choice;    // empty: no candidate meets the SLO
  std::string rollback;  // empty: no second candidate meets it
  // The choice and the rollback are within the capacity search's precision of each other on the
  // objective, so the lower TTFT p99 decided between them.
  bool tied = false;
  std::vector<Sentence> rationale;
  std::vector<std::string> revisit;
  std::vector<Mistake> mistakes;
  bool emulated = false;  // some figure comes from the emulated engine
  bool simulated = false;  // some figure comes from the virtual clock
};

Verdict Decide(const Study& study, const WorkloadFigures& workload, const GateTable& gate,
               const std::vector<CandidateResult>& candidates);

nlohmann::json ToJson(const Verdict& verdict);
// The exact inverse of ToJson (verdict.json read back). Throws nlohmann::json::exception on a
// document of another shape.
Verdict VerdictFromJson(const nlohmann::json& j);

}  // namespace bakeoff::study
