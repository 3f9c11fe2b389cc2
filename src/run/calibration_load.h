// run/calibration_load.h
//
// Owns: the loads `bakeoff calibrate`'s experiments send (a closed loop of c streams, or a small
// trace of requests at set instants, with shared prompt prefixes where the trace says), kept in
// memory, and the few figures every experiment reads off their records: the server's prompt count
// and the medians. run/calibrate.h (the step costs) and run/calibrate_limits.h (the scheduler's
// limits and features) are the experiments.
// Does not own: the load itself (load/runner.h).
//
// Thread-safety: each call blocks; `stop` may be set from a signal watcher.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "load/runner.h"
#include "measure/record.h"
#include "workload/trace.h"

namespace bakeoff::run {

struct CalibrationLoad {
  // The requests that were answered in full, with their send and first token, in plan order (a
  // trace's: its request order).
  std::vector<measure::RequestRecord> ok;
  std::uint64_t failed = 0;
  std::string first_error;  // of the first failed request, when any failed
};

// `requests` requests of prompt_tokens / output_tokens, `concurrency` in flight at once (all sent
// together when requests == concurrency), forced to the asked length where the template can.
CalibrationLoad RunClosedPoint(const load::TargetSpec& target, std::uint32_t prompt_tokens,
                               std::uint32_t output_tokens, std::uint32_t concurrency, std::uint64_t requests,
                               std::uint64_t seed, const std::atomic<bool>& stop);

// The trace's requests at its arrival instants (its prefix ids become shared prompt text,
// load/trace_prompt.h), each answer forced to its output_tokens where the template can. Requests
// still running `drain_timeout` after the last send are cancelled.
CalibrationLoad RunTracePoint(const load::TargetSpec& target, const workload::Trace& trace, std::uint64_t seed,
                              const std::atomic<bool>& stop, Nanos drain_timeout);

// One request of a calibration trace: sent at `arrival_s`, `input` prompt tokens (its text shared
// with other requests naming the same prefix `blocks`), `output` answer tokens.
workload::TraceRequest TraceRequestOf(double arrival_s, std::uint32_t input, std::uint32_t output,
                                      std::vector<std::uint64_t> blocks = {});
workload::Trace TraceOf(std::vector<workload::TraceRequest> requests, std::uint32_t block_tokens = 0);

// The prompt length the server counted, on average (the planned one without usage), and of it
// the tokens it found in its prefix cache (0 when it does not say).
struct PromptCount {
  double tokens = 0;
  double cached = 0;
};
PromptCount CountedPrompt(const std::vector<measure::RequestRecord>& ok, std::uint32_t planned);

double MedianOf(std::vector<double> values);  // 0 for none
double TtftMs(const measure::RequestRecord& r);  // REQUIRES: r has send_start and first_token

}  // namespace bakeoff::run
