// measure/step_recorder.h
//
// Owns: StepRecorder, everything one load step keeps in memory about its finished requests, fed
// one RequestRecord at a time and merged across workers: phase and outcome counts, one error
// example per outcome kind, the measurement window, token totals, whether token counts came from
// the server, one QuantileSketch (stats/sketch.h) per per-request figure the step analysis
// reports, the event-loop lag samples, and how many requests met every per-request SLO
// threshold. The per-request threshold check (SloThreshold, RequestFigures) lives here too,
// because it needs the request. Its memory is bounded: it does not grow with the number of
// requests once every sketch is past its exact cap (the raw records go to disk through
// load::RecordSink, never here).
// Does not own: the definitions' prose (docs/TERMINOLOGY.md), the SLO grammar and the step's
// aggregate verdicts (analyze/slo.h, analyze/step_analysis.h), or the raw-record format (record.h).
//
// Only measurement-phase requests feed the figures; warm-up requests are only counted. Latency
// figures come from ok requests (send lag from every measured request that was sent).
// Thread-safety: none; one recorder per worker thread, merged when the step ends.
// Units: milliseconds for latencies and lags, tokens for token figures.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "measure/record.h"
#include "stats/sketch.h"

namespace bakeoff::measure {

// The per-request figures an SLO threshold can name.
enum class SloMetric : std::uint8_t { kTtft, kTpot, kItl, kE2e };

// One per-request threshold: a request meets it when its figure is at most threshold_ms
// (or it has no such figure: a one-token answer has no TPOT). analyze::Slo converts to these.
struct SloThreshold {
  SloMetric metric = SloMetric::kTtft;
  double threshold_ms = 0;
  bool operator==(const SloThreshold&) const = default;
};

// One ok request's figures an SLO is checked against, in ms; NaN when the request lacks it.
struct RequestFigures {
  double ttft = std::numeric_limits<double>::quiet_NaN();
  double tpot = std::numeric_limits<double>::quiet_NaN();
  double e2e = std::numeric_limits<double>::quiet_NaN();
  double itl_max = 0;  // worst per-token gap: an ITL threshold is checked against it
};

bool MeetsThresholds(const RequestFigures& figures, const std::vector<SloThreshold>& thresholds);

// One sketch per figure (definitions in docs/TERMINOLOGY.md), over measured ok requests unless
// noted.
struct StepSketches {
  explicit StepSketches(std::size_t exact_cap = stats::QuantileSketch::kDefaultExactCap);
  stats::QuantileSketch ttft_ms, ttft_answer_ms;
  stats::QuantileSketch itl_event_ms;  // gaps between token events
  stats::QuantileSketch itl_token_ms;  // an event of n tokens gives n gaps of gap / n
  stats::QuantileSketch tpot_ms;
  stats::QuantileSketch e2e_ms;       // send start -> end of stream
  stats::QuantileSketch response_ms;  // intended send -> end of stream
  stats::QuantileSketch send_lag_ms;  // every measured request that was sent
  stats::QuantileSketch output_tokens;
  stats::QuantileSketch prompt_tokens;  // server-reported only
  // Other tools' conventions (docs/TERMINOLOGY.md "Other tools' names").
  stats::QuantileSketch vllm_ttft_ms;     // to the first chunk with choices
  stats::QuantileSketch vllm_tpot_ms;     // (last token - first chunk) / (N - 1)
  stats::QuantileSketch vllm_e2e_ms;      // to the last token
  stats::QuantileSketch guidellm_tpot_ms; // (last token - send start) / N
  stats::QuantileSketch loop_lag_ms;      // event-loop lag samples (AddLoopLag)
};

// Counts and totals.
struct StepCounts {
  std::uint64_t warmup = 0;
  std::uint64_t measured = 0;
  std::uint64_t sent = 0;  // measured requests with a send start
  std::uint64_t ok = 0;
  std::uint64_t good = 0;  // measured ok requests meeting every SloThreshold
  std::array<std::uint64_t, kOutcomeCount> outcomes{};  // measured, by Outcome
  std::uint64_t input_tokens = 0;   // server usage when reported, else planned (ok requests)
  std::uint64_t output_tokens = 0;  // ok requests
  bool output_tokens_estimated = false;  // some ok request had no server usage report
  bool prompt_tokens_from_server = false;
  std::uint64_t output_counted_by_server = 0;  // ok requests whose output the server counted
  std::uint64_t ended_before_max_tokens = 0;   // ok requests with fewer output tokens than max_tokens
  std::uint64_t stale_retries = 0;  // measured requests resent after a stale kept-alive connection
  // Ok requests whose usage counted the prompt: their planned and their counted prompt tokens,
  // so a step says how far the server's count was from the plan.
  std::uint64_t prompts_counted = 0;
  std::uint64_t prompt_tokens_planned = 0;
  std::uint64_t prompt_tokens_counted = 0;
  std::optional<MonoTime> first_send;    // earliest measured send start
  std::optional<MonoTime> last_finish;   // latest measured finish
};

class StepRecorder {
 public:
  static constexpr std::size_t kMaxErrorExamples = 5;

  explicit StepRecorder(std::vector<SloThreshold> slo = {},
                        std::size_t exact_cap = stats::QuantileSketch::kDefaultExactCap);

  // Takes what the figures need from one finished request.
  void Add(const RequestRecord& record);
  // One event-loop lag sample, in ms.
  void AddLoopLag(double ms) { sketches_.loop_lag_ms.Add(ms); }
  // Adds everything `other` recorded. REQUIRES: the same SLO thresholds.
  void Merge(const StepRecorder& other);

  const StepCounts& counts() const { return counts_; }
  const StepSketches& sketches() const { return sketches_; }
  const std::vector<SloThreshold>& slo() const { return slo_; }
  // The error message of the first (lowest id) measured failure of each outcome kind, in id
  // order, at most kMaxErrorExamples: the kinds that failed first.
  std::vector<std::string> ErrorExamples() const;

 private:
  struct ErrorExample {
    std::uint64_t id = 0;
    std::string message;
  };

  std::vector<SloThreshold> slo_;
  StepCounts counts_;
  StepSketches sketches_;
  std::array<std::optional<ErrorExample>, kOutcomeCount> first_errors_;  // by Outcome
};

}  // namespace bakeoff::measure
