// run/calibrate_slots.cc: clearing the slots and probing what idle slots keep (contract in
// calibrate_slots.h).
#include "run/calibrate_slots.h"

#include <cmath>

#include <fmt/format.h>

#include "run/calibration_load.h"

namespace bakeoff::run {

double WholeBatchPrefill::Ms(double prompt, double kept) const {
  return overhead_ms + ms_per_token * prompt + ms_per_1m_pairs * prompt * (prompt + kept) / 1e6 +
         kv_ms_per_1k_tokens * kept / 1000;
}

double ClearSlots(const load::TargetSpec& target, std::uint32_t slots, std::uint64_t seed,
                  const std::atomic<bool>& stop) {
  const CalibrationLoad load = RunClosedPoint(target, 1, 1, slots, slots, seed, stop);
  return load.ok.empty() ? 0 : CountedPrompt(load.ok, 1).tokens;
}

IdleSlotsOutcome MeasureIdleSlots(const load::TargetSpec& target, std::uint32_t slots,
                                  std::uint32_t fill_tokens, const WholeBatchPrefill& fit,
                                  std::uint64_t& seed, const std::function<bool()>& over_budget,
                                  const std::atomic<bool>& stop,
                                  const std::function<void(const std::string&)>& log) {
  IdleSlotsOutcome out;
  const auto note_error = [&](const CalibrationLoad& load) {
    if (out.first_error.empty()) out.first_error = load.first_error;
  };
  const double others = slots - 1.0;
  for (int round = 0; round < kIdleSlotRounds; ++round) {
    for (std::uint32_t prompt : kIdleSlotPrompts) {
      if (over_budget()) break;
      log(fmt::format("what idle slots keep ({} of {}): a {}-token prompt after clearing the {} "
                      "slots and after filling them with {}-token prompts",
                      round + 1, kIdleSlotRounds, prompt, slots, fill_tokens));
      const double cleared_each = ClearSlots(target, slots, ++seed, stop);
      const CalibrationLoad cleared = RunClosedPoint(target, prompt, 1, 1, 1, ++seed, stop);
      const CalibrationLoad fill =
          RunClosedPoint(target, fill_tokens, 1, slots, slots, ++seed, stop);
      const CalibrationLoad filled = RunClosedPoint(target, prompt, 1, 1, 1, ++seed, stop);
      note_error(cleared);
      note_error(fill);
      note_error(filled);
      if (cleared.ok.size() != 1 || filled.ok.size() != 1 || fill.ok.size() != slots) continue;
      IdleSlotProbe probe;
      probe.prompt_tokens = prompt;
      const PromptCount before = CountedPrompt(cleared.ok, prompt);
      const PromptCount after = CountedPrompt(filled.ok, prompt);
      probe.prefilled_tokens = after.tokens - after.cached;
      probe.cleared_kept_tokens = others * cleared_each;
      probe.filled_kept_tokens = others * CountedPrompt(fill.ok, fill_tokens).tokens;
      probe.cleared_ms = TtftMs(cleared.ok[0]);
      probe.filled_ms = TtftMs(filled.ok[0]);
      probe.kept_ms = fit.Ms(probe.prefilled_tokens, probe.filled_kept_tokens);
      probe.none_ms = fit.Ms(probe.prefilled_tokens, probe.cleared_kept_tokens);
      probe.predicted_ratio = probe.kept_ms / fit.Ms(before.tokens - before.cached, probe.cleared_kept_tokens);
      out.probes.push_back(probe);
    }
  }
  if (out.probes.empty()) {
    out.finding = "not measured: " +
                  (over_budget() ? std::string("the budget ran out")
                                 : "a request failed" +
                                       (out.first_error.empty() ? "" : ": " + out.first_error));
    return out;
  }
  double kept_ss = 0, none_ss = 0;
  std::vector<std::string> seen;
  for (const IdleSlotProbe& p : out.probes) {
    // The filled probe against the fit's two predictions, not against the cleared probe: one
    // request after clearing is erratic on llama.cpp (the same 256-token prompt can take more than
    // twice as long one time as the next; cells left high in the cache, keeping the attended span
    // wide, would do it: docs/engines/llama.cpp.md), the fit's eleven points of five requests are
    // not. Compared as logarithms: twice too slow is as far off as twice too fast (a relative
    // residual caps "no slowdown"'s miss at 100%, however large the slowdown).
    kept_ss += std::pow(std::log(p.filled_ms / p.kept_ms), 2);
    none_ss += std::pow(std::log(p.filled_ms / p.none_ms), 2);
    out.mean_slowdown += (p.filled_ms / p.none_ms - 1) / static_cast<double>(out.probes.size());
    seen.push_back(fmt::format("{} tokens {:.0f} -> {:.0f} ms ({:.0f} ms if the kept cells are attended, {:.0f} "
                               "if not)",
                               p.prompt_tokens, p.cleared_ms, p.filled_ms, p.kept_ms, p.none_ms));
  }
  const double n = static_cast<double>(out.probes.size());
  out.kept_residual = std::sqrt(kept_ss / n);
  out.none_residual = std::sqrt(none_ss / n);
  out.slots_keep_kv =
      out.mean_slowdown > kKeptMinSlowdown && out.kept_residual < out.none_residual;
  out.finding = fmt::format(
      "a prompt after the {} slots were filled with {}-token prompts against after they were "
      "cleared: {}; {}",
      slots, fill_tokens, fmt::join(seen, ", "),
      out.slots_keep_kv ? fmt::format("the idle slots' cells are attended (measured within {:.2f} times the "
                                      "prediction with them, {:.2f} without, as RMS log ratios): "
                                      "the preset takes slots_keep_kv",
                                      std::exp(out.kept_residual), std::exp(out.none_residual))
                        : fmt::format("not the slowdown of attended kept cells (measured within {:.2f} times "
                                      "the prediction with them, {:.2f} without, as RMS log ratios): "
                                      "slots_keep_kv stays false",
                                      std::exp(out.kept_residual), std::exp(out.none_residual)));
  return out;
}

}  // namespace bakeoff::run
