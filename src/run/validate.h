// run/validate.h
//
// Owns: `bakeoff calibrate --validate` (docs/engine-presets.md, "Validation"): how far the
// simulator, given an engine preset (a calibrated one, typically), is from a live endpoint on
// loads it was not fitted on.
//   1. capacity: a closed loop on the endpoint at min(the preset's max_num_seqs, 64) streams;
//      its request throughput is "measured capacity"; the same loop on the simulator gives the
//      preset's own capacity, and their difference says how near its saturation the model thinks
//      each load is;
//   2. held-out loads: Poisson at each of `fractions` of that capacity and one bursty load
//      (Gamma arrivals, inter-arrival CV 2, at `bursty_fraction`), one step each (its share of the
//      budget, or at least 40 requests when the endpoint is slow), run on the
//      endpoint (bench) and on the simulator with the preset (simulate) on the same schedule: the
//      same seed gives the same arrival instants and prompts;
//      Before each load, kLoneRequests requests one at a time (on both sides): the lone request's
//      TTFT and TPOT medians tell the preset's error with nothing else running at that minute, so
//      where the endpoint's speed has moved since calibration (a shared machine's does by 20-30%
//      between minutes, docs/engines/llama.cpp.md) the load's error beyond it is the model's. When
//      the preset's slots keep their KV (slots_keep_kv), as many lone requests as slots go first,
//      left out, so that the slots hold the same on both sides;
//   3. per step and metric (TTFT and TPOT p50/p90/p99, request and output-token throughput, and
//      goodput under the SLO when one is given) the prediction error (simulated - measured) /
//      measured; a step "holds" when throughput is within kThroughputTolerance and the TTFT and
//      TPOT medians within kMedianTolerance (the targets docs/engine-presets.md states), and the
//      outcome says from which load on the model stops holding. The verdict is on the raw error;
//      the error beyond the lone request, (1 + load's) / (1 + lone's) - 1, is shown beside it,
//      not judged.
// Files: DIR/capacity, DIR/simulated_capacity, DIR/measured and DIR/simulated are ordinary run
// folders (records.jsonl, summary.json, report.html); DIR/validation.json the comparison
// (docs/engine-presets.md, "Validation").
// Does not own: the runs (run/load_target.h RunLoadJob), the preset (emulate/engine_preset.h).
//
// Thread-safety: blocks; `stop` may be set from a signal watcher (the steps done are compared).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/slo.h"
#include "emulate/engine_preset.h"
#include "run/load_target.h"

namespace bakeoff::run {

inline constexpr double kThroughputTolerance = 0.10;
inline constexpr double kMedianTolerance = 0.15;

struct ValidateConfig {
  LoadTarget server;             // the endpoint (url, client, adapter)
  dialect::GenerationRequest request;  // template: model, api, ignore_eos
  emulate::EnginePreset preset;  // what the simulator runs
  std::string preset_name;       // as given, for the record
  std::filesystem::path out_dir;
  std::uint64_t seed = 1;
  Nanos budget = std::chrono::minutes(2);  // of endpoint time, split over capacity and the loads
  std::uint32_t prompt_tokens = 256;
  std::uint32_t output_tokens = 64;
  std::vector<double> fractions = {0.3, 0.5, 0.8};
  double bursty_fraction = 0.5;  // 0: no bursty load
  analyze::Slo slo;              // optional: goodput compared when given
};

// OK, or kInvalidInput naming the field.
Status ValidateValidateConfig(const ValidateConfig& config);

struct MetricError {
  std::string metric;  // "ttft_p50_ms", "output_tokens_per_s", ...
  double measured = 0;
  double simulated = 0;
  double error = 0;  // (simulated - measured) / measured; 0 when both are 0
};

struct ValidationStep {
  std::string label;        // "30% of capacity", "bursty (CV 2) at 50%"
  double fraction = 0;
  double rate_per_s = 0;
  bool bursty = false;
  std::vector<MetricError> metrics;
  // The lone-request probe run just before the load (TTFT and TPOT p50; empty when none was
  // answered): the preset's error with nothing else running, at that minute.
  std::vector<MetricError> lone;
  bool holds = false;
  std::string why_not;  // when it does not hold: the metrics out of tolerance
};

struct ValidationOutcome {
  double capacity_per_s = 0;
  std::uint32_t capacity_concurrency = 0;
  // The same closed loop on the simulator with the preset: where the model saturates. Near it a
  // load's queue wait is most of its TTFT, so a capacity error shows there many times over.
  MetricError capacity;  // requests_per_s, simulated against measured
  std::vector<ValidationStep> steps;
  std::string summary;  // where the model holds and where it stops
  bool interrupted = false;
};

Result<ValidationOutcome> ValidatePreset(const ValidateConfig& config, const std::atomic<bool>& stop,
                                         const std::function<void(const std::string&)>& log);

nlohmann::json ToJson(const ValidationOutcome& outcome, const ValidateConfig& config);
std::string FormatValidation(const ValidationOutcome& outcome);

}  // namespace bakeoff::run
