// run/calibrate_slots.h
//
// Owns: what `bakeoff calibrate` does about slots that keep their last request's KV
// (emulate::EngineConfig::slots_keep_kv: llama.cpp's server keeps a slot's cells for a later
// prompt that starts alike, and on a CPU every step attends every cell in use):
//   - ClearSlots, before each point of the step-cost experiments (calibrate.h steps 1 to 3):
//     `slots` one-token requests at once, one output token each, so that every slot then keeps a
//     few tokens instead of an earlier point's prompt, and the point measures what it costs itself.
//     A busy slot is never given another request, so a burst reaches every slot whatever rule the
//     server picks slots by (llama.cpp: the cached prompt most alike, else the least recently used).
//   - MeasureIdleSlots (calibrate.h step 4): for prompts of kIdleSlotPrompts tokens, each in
//     kIdleSlotRounds rounds (a probe is one request, as noisy as one step): clear,
//     one probe request (its TTFT: "cleared"); fill (`slots` prompts of `fill_tokens` at once, one
//     output token each, so every slot keeps about that many), the same probe again ("filled"). The
//     probe takes one of the filled slots (the least recently used), so an engine that attends
//     what idle slots keep prefills it against the other slots - 1 slots' cells: the whole-batch
//     prefill fit gives that time (kept_ms), and the time with only the cleared slots' cells
//     (none_ms) is what an engine whose idle slots cost nothing answers. The preset takes
//     slots_keep_kv when the filled probes took on average over kKeptMinSlowdown longer than the
//     fit gives them with nothing kept (beyond what a shared machine's speed moves single requests by), and the
//     fit's time with the kept cells attended is nearer their measured TTFT than its time
//     without, as the RMS of ln(measured / predicted). The cleared probe is shown, not judged:
//     on llama.cpp b4748 one request after clearing is erratic (the same 256-token prompt can
//     take more than twice as long one time as the next), so a rule of filled over cleared
//     leaves the kept cells out even where every filled probe is nearer the fit's time with
//     them (docs/engines/llama.cpp.md).
// Does not own: the whole-batch fit it is given (run/calibrate.cc), the loads (run/calibration_load.h).
//
// Thread-safety: blocks; `stop` may be set from a signal watcher.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "load/runner.h"

namespace bakeoff::run {

inline constexpr std::uint32_t kIdleSlotPrompts[] = {256, 512};
inline constexpr int kIdleSlotRounds = 2;
inline constexpr double kKeptMinSlowdown = 0.2;
inline constexpr std::uint32_t kMaxSlotsProbed = 16;  // more slots than this: not probed

// Sends the clearing burst (above); returns the prompt tokens each slot keeps after it (the
// server's count, else the planned one), 0 when no request of it was answered.
double ClearSlots(const load::TargetSpec& target, std::uint32_t slots, std::uint64_t seed,
                  const std::atomic<bool>& stop);

// The prefill time the whole-batch fit gives a `prompt`-token prompt beside `kept` KV tokens of
// other slots: overhead + per token x prompt + per million pairs x prompt x (prompt + kept) / 1e6,
// plus the decode fit's per-1,000-KV-token cost of reading the kept tokens.
struct WholeBatchPrefill {
  double overhead_ms = 0;
  double ms_per_token = 0;
  double ms_per_1m_pairs = 0;
  double kv_ms_per_1k_tokens = 0;
  double Ms(double prompt, double kept) const;
};

struct IdleSlotProbe {
  std::uint32_t prompt_tokens = 0;  // planned
  double prefilled_tokens = 0;      // the server's count less what it found cached (filled probe)
  double cleared_kept_tokens = 0;   // the other slots' cells when the cleared probe ran
  double filled_kept_tokens = 0;    // ... and when the filled one ran: (slots - 1) x the fill's prompt
  double cleared_ms = 0;            // TTFT
  double filled_ms = 0;
  double predicted_ratio = 0;       // filled over cleared, as WholeBatchPrefill gives them
  double kept_ms = 0;               // the filled probe's TTFT as the fit gives it, the kept cells attended
  double none_ms = 0;               // ... with only the cleared slots' cells
};

struct IdleSlotsOutcome {
  std::vector<IdleSlotProbe> probes;  // those measured in full
  double kept_residual = 0;  // RMS of ln(filled_ms / kept_ms)
  double none_residual = 0;  // ... of ln(filled_ms / none_ms) (idle slots cost nothing)
  double mean_slowdown = 0;  // of filled over none_ms, less 1
  bool slots_keep_kv = false;
  std::string finding;      // what was seen, in words (also when nothing was measured)
  std::string first_error;  // of the first failed request, when any failed
};

IdleSlotsOutcome MeasureIdleSlots(const load::TargetSpec& target, std::uint32_t slots, std::uint32_t fill_tokens,
                                  const WholeBatchPrefill& fit, std::uint64_t& seed,
                                  const std::function<bool()>& over_budget, const std::atomic<bool>& stop,
                                  const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::run
