// analyze/step_analysis.h
//
// Owns: every aggregate figure of one load step, computed from the step's merged
// measure::StepRecorder (counts, totals and one quantile sketch per figure; the raw records are
// on disk, not in memory): latency summaries (bakeoff's own definitions, docs/TERMINOLOGY.md),
// the same figures under the vLLM, AIPerf and GuideLLM conventions, throughput, outcome
// breakdown, SLO attainment and goodput, and the generator-limited verdict. Only
// measurement-phase requests count; warm-up requests are counted separately and otherwise
// ignored. A summary's percentiles are exact up to the sketch's cap and approximate past it, with
// a stated bound (stats/sketch.h); summary.json says which.
// Does not own: formatting (cli/ prints the table; summary.json is written by ToJson here as
// the contract documented in docs/formats/summary.md).
//
// Thread-safety: pure functions over values.
// Units: milliseconds for latencies, seconds for durations, per-second rates.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/slo.h"
#include "load/runner.h"
#include "stats/quantile.h"

namespace bakeoff::analyze {

// The quantiles the latency curves are read at, as "nines" x = -log10(1 - q) from 0 to 4 (q from 0
// to 99.99%) in 161 even steps, so the tail has as many points as the body.
std::vector<double> LatencyCurveNines();
// The same grid as quantiles: 1 - 10^-x for each x of LatencyCurveNines().
std::vector<double> LatencyCurveQuantiles();

// Thresholds past which the client, not the server, may have shaped the numbers.
inline constexpr double kGeneratorLimitedSendLagP99Ms = 5.0;
inline constexpr double kGeneratorLimitedLoopLagP99Ms = 5.0;
inline constexpr double kGeneratorLimitedWorkerCpu = 0.9;  // share of one core

// One convention's view of the same requests (see docs/TERMINOLOGY.md "Other tools' names").
struct ConventionFigures {
  stats::Summary ttft_ms;
  stats::Summary itl_ms;
  stats::Summary tpot_ms;
  stats::Summary e2e_ms;
};

struct SloResult {
  SloTerm term;
  double observed_ms = 0;  // the metric's percentile over ok requests
  bool met = false;        // observed <= threshold (and there were ok requests)
};

struct StepAnalysis {
  std::string label;
  std::uint64_t planned = 0;
  std::uint64_t warmup_requests = 0;
  std::uint64_t measured_requests = 0;
  std::uint64_t ok_requests = 0;    // measured requests that completed without error
  std::uint64_t good_requests = 0;  // ok requests that met every per-request SLO threshold
  std::map<std::string, std::uint64_t> outcomes;  // outcome name -> count (measure phase)
  std::vector<std::string> error_examples;        // the first failure (lowest id) of each outcome kind
  double duration_s = 0;  // first measured send to last measured finish

  // bakeoff's own definitions, over measured ok requests.
  stats::Summary ttft_ms;
  stats::Summary ttft_answer_ms;  // time to first non-reasoning token
  stats::Summary itl_event_ms;    // gaps between token events
  stats::Summary itl_token_ms;    // gaps per token (an event of n tokens gives n gaps of gap/n)
  stats::Summary tpot_ms;
  stats::Summary e2e_ms;          // service time: send start -> end of stream
  stats::Summary response_ms;     // response time: intended send -> end of stream
  stats::Summary send_lag_ms;     // over every measured request that was sent
  stats::Summary loop_lag_ms;
  double busiest_worker_cpu = 0;  // share of one core used by the busiest client thread
  stats::Summary output_tokens;
  stats::Summary prompt_tokens;   // server-reported when available
  // The latency distributions as curves a report draws: for each of ttft_ms, tpot_ms,
  // itl_token_ms and e2e_ms, the nearest-rank value at each quantile of LatencyCurveNines()
  // (empty when the figure has no sample). From every measured request, with the summaries'
  // exactness, whatever records.jsonl keeps.
  std::map<std::string, std::vector<double>> latency_curves;

  double request_rate_per_s = 0;        // ok requests / duration
  double offered_rate_per_s = 0;        // measured requests sent / duration
  double input_tokens_per_s = 0;
  double output_tokens_per_s = 0;
  bool output_tokens_estimated = false; // some ok request had no server usage report
  std::uint64_t output_counted_by_server = 0;  // ok requests whose output the server counted
  std::uint64_t ended_before_max_tokens = 0;   // ok requests shorter than their max_tokens
  bool prompt_tokens_from_server = false;
  // Mean prompt length planned and as the server counted it, over ok requests with usage; the
  // deviation is (counted - planned) / planned. Absent without usage.
  std::optional<double> prompt_planned_mean;
  std::optional<double> prompt_counted_mean;
  std::optional<double> PromptDeviation() const {
    if (!prompt_planned_mean || !prompt_counted_mean || *prompt_planned_mean <= 0) return std::nullopt;
    return (*prompt_counted_mean - *prompt_planned_mean) / *prompt_planned_mean;
  }

  std::vector<SloResult> slo;
  double slo_attainment = 0;  // share of measured requests that are ok and meet every term
  double goodput_per_s = 0;   // such requests per second

  bool generator_limited = false;
  std::vector<std::string> generator_limited_reasons;
  bool interrupted = false;
  std::string stopped_reason;  // non-empty: the step was given up because nothing succeeded
  std::uint64_t stale_retries = 0;  // requests resent once after a stale kept-alive connection
  std::uint64_t backoff_waits = 0;  // closed loop: sends delayed after connection failures
  double backoff_total_s = 0;
  std::uint64_t session_turns_skipped = 0;  // trace replay: turns not sent after a failed turn

  ConventionFigures vllm;
  ConventionFigures aiperf;
  ConventionFigures guidellm;
};

// REQUIRES: step.recorder was fed slo.RequestThresholds() (RunSpec::slo), so its good-request
// count is the one `slo` defines.
StepAnalysis AnalyzeStep(const load::StepResult& step, const Slo& slo);

// The step as it appears in summary.json.
nlohmann::json ToJson(const StepAnalysis& analysis);
nlohmann::json ToJson(const stats::Summary& summary);

}  // namespace bakeoff::analyze
