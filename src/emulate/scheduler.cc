// emulate/scheduler.cc: FCFS continuous batching over explicit time (contract in scheduler.h).
#include "emulate/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace bakeoff::emulate {

Status ValidateEngineConfig(const EngineConfig& config) {
  if (config.max_num_seqs < 1) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("max_num_seqs must be >= 1, got {}", config.max_num_seqs));
  }
  if (config.max_batched_tokens < config.max_num_seqs) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("max_batched_tokens ({}) must be >= max_num_seqs ({})",
                                 config.max_batched_tokens, config.max_num_seqs));
  }
  if (config.max_model_len < 2) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("max_model_len must be >= 2, got {}", config.max_model_len));
  }
  if (!(config.eos_probability >= 0.0 && config.eos_probability <= 1.0)) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("eos_probability must be in [0, 1], got {}", config.eos_probability));
  }
  return ValidateCostModel(config.cost);
}

SingleRequestTiming ExpectedSingleRequest(const EngineConfig& config, std::int64_t prompt_tokens,
                                          std::int64_t output_tokens) {
  BAKEOFF_CHECK(prompt_tokens >= 0 && output_tokens >= 1)
      << "prompt " << prompt_tokens << " output " << output_tokens;
  SingleRequestTiming timing;
  timing.ttft = StepTime(config.cost, StepWork{prompt_tokens, 0, prompt_tokens});
  // Sum the same per-step durations the scheduler uses, so the rounding matches exactly.
  Nanos decode_total{0};
  for (std::int64_t k = 1; k < output_tokens; ++k) {
    decode_total += StepTime(config.cost, StepWork{0, 1, prompt_tokens + k});
  }
  timing.tpot = output_tokens > 1 ? decode_total / (output_tokens - 1) : Nanos{0};
  timing.e2e = timing.ttft + decode_total;
  return timing;
}

Scheduler::Scheduler(EngineConfig config) : config_(std::move(config)), rng_(config_.seed) {
  Status valid = ValidateEngineConfig(config_);
  BAKEOFF_CHECK(valid.ok()) << valid.error().message;
}

Result<SequenceId> Scheduler::Add(const SequenceRequest& request) {
  if (request.prompt_tokens < 0 || request.max_tokens < 1 || request.min_tokens < 0) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("invalid request: prompt_tokens {}, max_tokens {}, min_tokens {}",
                                 request.prompt_tokens, request.max_tokens, request.min_tokens));
  }
  if (request.prompt_tokens + request.max_tokens > config_.max_model_len) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("prompt_tokens {} + max_tokens {} exceeds max_model_len {}",
                                 request.prompt_tokens, request.max_tokens, config_.max_model_len));
  }
  const SequenceId id = next_id_++;
  sequences_.emplace(id, Sequence{request, 0, false});
  waiting_.push_back(id);
  ++num_waiting_;
  return id;
}

void Scheduler::Abort(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  if (it->second.running) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    --num_waiting_;  // its waiting_ entry is skipped when it reaches the front
  }
  sequences_.erase(it);
}

std::optional<StepPlan> Scheduler::BeginStep(MonoTime now) {
  BAKEOFF_CHECK(!step_in_flight_) << "BeginStep with a step in flight";
  if (!HasWork()) return std::nullopt;
  StepPlan plan;
  plan.start = now;
  std::int64_t budget = config_.max_batched_tokens;
  step_decodes_.clear();
  step_prefills_.clear();

  // 1. Decodes: ValidateEngineConfig guarantees max_batched_tokens >= max_num_seqs >= running,
  // so every running sequence fits.
  for (SequenceId id : running_) {
    const Sequence& seq = sequences_.at(id);
    step_decodes_.push_back(id);
    plan.work.decode_seqs += 1;
    plan.work.kv_tokens += seq.request.prompt_tokens + seq.generated;
    budget -= 1;
  }

  // 2. FCFS admissions.
  while (static_cast<std::int64_t>(running_.size()) < config_.max_num_seqs && !waiting_.empty()) {
    const SequenceId id = waiting_.front();
    auto it = sequences_.find(id);
    if (it == sequences_.end()) {  // aborted while waiting
      waiting_.pop_front();
      continue;
    }
    const std::int64_t prompt = it->second.request.prompt_tokens;
    const bool fits = prompt <= budget;
    const bool oversized_alone = prompt > config_.max_batched_tokens && step_prefills_.empty();
    if (!fits && !oversized_alone) break;
    waiting_.pop_front();
    --num_waiting_;
    it->second.running = true;
    running_.push_back(id);
    step_prefills_.push_back(id);
    plan.work.prefill_tokens += prompt;
    plan.work.kv_tokens += prompt;
    budget = fits ? budget - prompt : 0;
  }
  plan.prefill_seqs = static_cast<std::int64_t>(step_prefills_.size());

  if (step_decodes_.empty() && step_prefills_.empty()) {
    // Only reachable when every queued entry was aborted (skipped above).
    return std::nullopt;
  }
  plan.end = now + StepTime(config_.cost, plan.work);
  step_in_flight_ = true;
  return plan;
}

TokenEvent Scheduler::Emit(SequenceId id, Sequence& seq) {
  TokenEvent event;
  event.id = id;
  event.index = seq.generated;
  seq.generated += 1;
  if (seq.generated >= seq.request.max_tokens) {
    event.finish = FinishReason::kLength;
  } else if (config_.eos_probability > 0.0 && !seq.request.ignore_eos &&
             seq.generated >= seq.request.min_tokens && rng_.Uniform() < config_.eos_probability) {
    event.finish = FinishReason::kStop;
  }
  return event;
}

std::vector<TokenEvent> Scheduler::FinishStep() {
  BAKEOFF_CHECK(step_in_flight_) << "FinishStep without a step in flight";
  step_in_flight_ = false;
  ++steps_completed_;
  std::vector<TokenEvent> events;
  events.reserve(step_decodes_.size() + step_prefills_.size());
  bool any_finished = false;
  auto produce = [&](SequenceId id) {
    auto it = sequences_.find(id);
    if (it == sequences_.end()) return;  // aborted during the step
    TokenEvent event = Emit(id, it->second);
    if (event.finish) {
      sequences_.erase(it);
      any_finished = true;
    }
    events.push_back(event);
  };
  for (SequenceId id : step_decodes_) produce(id);
  for (SequenceId id : step_prefills_) produce(id);
  if (any_finished) {
    std::erase_if(running_, [this](SequenceId id) { return !sequences_.contains(id); });
  }
  return events;
}

}  // namespace bakeoff::emulate
