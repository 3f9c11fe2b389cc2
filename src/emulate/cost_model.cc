// emulate/cost_model.cc: the step-time formula documented in cost_model.h.
#include "emulate/cost_model.h"

#include <cmath>

#include <fmt/format.h>

namespace bakeoff::emulate {

double StepMillis(const CostModel& model, const StepWork& work) {
  const bool multi_token = work.prefill_tokens + work.decode_seqs > 1;
  const double kv_tokens = static_cast<double>(work.kv_tokens) +
                           (model.whole_batch_attention ? static_cast<double>(work.idle_kv_tokens) : 0.0);
  const double pairs = model.whole_batch_attention ? static_cast<double>(work.prefill_tokens) * kv_tokens
                                                   : static_cast<double>(work.prefill_pairs);
  return model.base_ms + (multi_token ? model.multi_token_ms : 0) +
         model.prefill_ms_per_token * static_cast<double>(work.prefill_tokens) +
         model.prefill_ms_per_1m_pairs * (pairs / 1e6) +
         model.decode_ms_per_seq * static_cast<double>(work.decode_seqs) +
         model.decode_ms_per_1m_pairs * (static_cast<double>(work.decode_seqs) * kv_tokens / 1e6) +
         model.kv_ms_per_1k_tokens * (kv_tokens / 1000.0) +
         model.grammar_ms_per_token * static_cast<double>(work.constrained_decodes) +
         model.lora_load_ms * static_cast<double>(work.lora_loads);
}

Nanos StepTime(const CostModel& model, const StepWork& work) {
  return Nanos(std::llround(StepMillis(model, work) * 1e6));
}

Status ValidateCostModel(const CostModel& model) {
  struct Field {
    const char* name;
    double value;
  };
  const Field fields[] = {{"base_ms", model.base_ms},
                          {"multi_token_ms", model.multi_token_ms},
                          {"prefill_ms_per_token", model.prefill_ms_per_token},
                          {"prefill_ms_per_1m_pairs", model.prefill_ms_per_1m_pairs},
                          {"decode_ms_per_seq", model.decode_ms_per_seq},
                          {"decode_ms_per_1m_pairs", model.decode_ms_per_1m_pairs},
                          {"kv_ms_per_1k_tokens", model.kv_ms_per_1k_tokens},
                          {"grammar_ms_per_token", model.grammar_ms_per_token},
                          {"lora_load_ms", model.lora_load_ms}};
  for (const Field& field : fields) {
    if (!std::isfinite(field.value) || field.value < 0) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("{} must be a finite number >= 0, got {}", field.name, field.value));
    }
  }
  return Ok{};
}

}  // namespace bakeoff::emulate
