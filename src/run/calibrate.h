// run/calibrate.h
//
// Owns: `bakeoff calibrate`, first part (docs/engine-presets.md): the emulated engine's
// step-cost model (emulate/cost_model.h) fitted to a live endpoint from the outside, by a short
// designed experiment within a time budget:
//   1. prefill: one request at a time at several prompt lengths P of one chunk (the base preset's
//      step budget), one output token, in five passes over the lengths (every other one longest
//      first, against drift): the median TTFT against the tokens the server prefilled (its count
//      less what it found cached) is a line whose slope is the cost per prompt token (prefill
//      plus its KV term) and whose intercept is one step's fixed cost plus the client-to-server
//      overhead; or, when the points curve upwards beyond noise, that line plus the pair term
//      (prefill_ms_per_1m_pairs x P (P + 1) / 2 / 1e6: attention growing with P's square);
//   2. decode: c streams at once (closed loop, c from 1 to max_concurrency, stopping where the
//      engine never runs all c together) at two prompt lengths: the median gap between token
//      events while all c decode (after the last first token, before the first stream ends) is
//      one decode step, fitted as base + decode_ms_per_seq x c + kv_ms_per_1k x (c x context) /
//      1000 with context = P + half the answer, or, when one stream's step is far cheaper than
//      two streams' beyond noise (the pair term's rule), with multi_token_ms x (c > 1) added; then,
//      by the same rule, with decode_ms_per_1m_pairs x c x c x context / 1e6 (each stream's token
//      against every stream's KV: the step grows with the streams' square).
//      The sweep runs twice, the second time in reverse, each point's median over both passes'
//      gaps, so a drifting machine speed does not tilt the fit;
//   3. a prompt among streams: prompts of 256 and 512 tokens (twice each), each arriving while two
//      streams of the long decode context decode. Its TTFT, less that step's decode share and half
//      a decode step of waiting (from the decode fit), is what the prompt's prefill cost there. An
//      engine whose attention covers only each sequence's own tokens (vLLM's paged kernels) costs
//      what the prompt costs alone; one that scores every prompt token against the whole batch's
//      KV (llama.cpp b4748 on a CPU) costs more, by the pairs with the streams' KV. Both are
//      fitted (prefill's line or curve on the lone points, predicting these; and the line plus
//      prefill_ms_per_1m_pairs x P x (P + the streams' KV) / 1e6 on all of them), and the preset
//      takes whole_batch_attention (emulate/cost_model.h) when that fit leaves under half the
//      other's relative residual with a pair cost above 0.
//   4. what idle slots keep, when step 3 took whole_batch_attention and the engine has at most
//      kMaxSlotsProbed slots (the server's count where it says one, else the base preset's
//      max_num_seqs): run/calibrate_slots.h; the preset takes slots_keep_kv from it.
// Before each point of steps 1 to 3 the slots are cleared (run/calibrate_slots.h ClearSlots) when
// there are at most kMaxSlotsProbed: an engine whose idle slots keep their last prompt and attend
// it (llama.cpp) would otherwise price every point with whatever earlier points left there.
// Each pass's speed against the points' median across passes is kept (and a change of more than
// 15% said): an endpoint whose speed changed mid-run yields a preset of an average machine.
// A fit needs two points more than its coefficients, and the decode fit two prompt lengths.
// Both fit relative residuals (timing noise grows with the time; see Fit in calibrate.cc).
// The preset it writes is the base preset with the fitted costs, parseable by the emulator and
// simulator (docs/engine-presets.md), and a `calibration` block: each fit's coefficients, R²,
// RMS residual (in ms and relative) and raw points, its quality (costs are fitted non-negative, the ones held at 0
// named; a fit under kGoodFitR2, or one where nothing grows with the load, is flagged poor and
// its figures are not used), the limits found (run/calibrate_limits.h) with their
// points, and what was not determined. The server's context limit, where it says one, becomes
// max_model_len.
// Does not own: the fits' arithmetic (stats/regression.h) or the load (load/runner.h).
//
// Thread-safety: blocks; `stop` may be set from a signal watcher (what was measured is kept).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "emulate/engine_preset.h"
#include "load/runner.h"
#include "run/calibrate_limits.h"
#include "run/calibrate_slots.h"

namespace bakeoff::run {

inline constexpr double kGoodFitR2 = 0.9;

struct CalibrateConfig {
  // Endpoint, client, request template (model: "" = the first listed), its forced-length fields
  // fitted to the engine (run::FitRequestToEngine): answers must be as long as asked.
  load::TargetSpec target;
  std::string url;          // as given, for the record
  std::uint64_t seed = 1;
  Nanos budget = std::chrono::minutes(2);  // the experiment stops starting new points past it
  emulate::EnginePreset base;              // everything the experiment does not measure
  std::filesystem::path out;               // the preset file to write
  std::uint32_t max_concurrency = 32;      // the decode experiment's largest c
  std::uint32_t max_burst = 256;           // the max_num_seqs experiment's largest burst
  bool costs = true;                       // run the step-cost experiments (else the base's costs)
  bool limits = true;                      // run the limits experiments (run/calibrate_limits.h)
};

// One measured point: the figure (ms) at its inputs.
struct CalibrationPoint {
  std::uint32_t prompt_tokens = 0;
  std::uint32_t concurrency = 1;
  // Prefill: the prompt tokens the server prefilled (its count less those it found cached);
  // decode: the mean context of a stream over its answer.
  double context_tokens = 0;
  double ms = 0;              // prefill: median TTFT; decode: median gap between token events
  std::uint64_t requests = 0;
  // A prompt among streams (step 3): the KV tokens the other streams held when it arrived; its ms
  // is its TTFT less the streams' share of the step. 0 for every other point.
  double others_kv_tokens = 0;
  // Prefill points: the KV tokens the cleared slots beside it kept (the clearing burst's prompts;
  // run/calibrate_slots.h), 0 when the slots are not cleared.
  double idle_kv_tokens = 0;
};

struct CalibrationFit {
  std::string name;     // "prefill" or "decode"
  std::string formula;  // what was fitted, in words
  std::vector<double> coefficients;
  std::vector<std::string> coefficient_names;  // in the order of coefficients
  std::vector<std::string> held_at_zero;       // coefficients the non-negative fit held at 0
  double r_squared = 0;
  double rms_residual_ms = 0;
  double rms_relative_residual = 0;  // of residual / measured, what the fit minimised (0.05 = 5%)
  bool good = false;
  std::vector<CalibrationPoint> points;
  std::string problem;  // why it is not good ("" when good)
};

struct CalibrationOutcome {
  emulate::EnginePreset preset;  // the base with the fitted costs
  std::vector<CalibrationFit> fits;
  std::vector<LimitFinding> limits;  // run/calibrate_limits.h, in its order
  std::vector<std::string> not_determined;
  std::vector<std::string> notes;
  // Each pass's speed against the points' median across passes (1 = as usual, 1.2 = 20% slower;
  // empty when no point was measured twice): an endpoint whose speed changed mid-run shows here,
  // and a spread beyond 15% is said in `notes`.
  std::vector<double> prefill_pass_speed;
  std::vector<double> decode_pass_speed;
  // Step 3: the prompts among streams, each fit's RMS relative residual over every prefill point
  // (the lone ones and these), and whether the whole-batch fit was taken. Empty when not measured.
  std::vector<CalibrationPoint> mixed_points;
  double own_attention_residual = 0;
  double whole_batch_residual = 0;
  bool whole_batch_attention = false;
  // Step 4: the slots probed (0: not probed) and what was seen.
  std::uint32_t slots = 0;
  IdleSlotsOutcome idle_slots;
  bool interrupted = false;
  std::string preset_text;  // as written to config.out
};

// kUnavailable: the endpoint could not be reached or served nothing; kCancelled: stopped before
// any point; kIo: the preset could not be written. A fit that could not be made is said in its
// problem, and the preset keeps the base's figures for it (base_ms included: the prefill line's
// intercept holds the client's overhead too).
Result<CalibrationOutcome> Calibrate(const CalibrateConfig& config, const std::atomic<bool>& stop,
                                     const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::run
