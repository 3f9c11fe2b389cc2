// emulate/scheduler.h
//
// Owns: the continuous-batching engine model: a FCFS waiting queue, the set of running sequences,
// the composition of each engine step, and the tokens each step produces. It is a pure state
// machine driven by explicit time (no clock, no threads, no I/O), so the real-time server
// (emulate/server.h) and a virtual-clock simulator can share it.
// Does not own: step durations (emulate/cost_model.h), text, HTTP, or wall time.
//
// One step, planned by BeginStep(now):
//   1. every running sequence decodes one token (budget 1 token each);
//   2. waiting requests are admitted in arrival order while running < max_num_seqs and the
//      remaining token budget (max_batched_tokens - decodes) covers the whole prompt: the whole
//      prompt is prefilled in this step (no chunked prefill yet). Admission stops at the first
//      request that does not fit (strict FCFS, no skipping).
//      A prompt longer than max_batched_tokens can never fit; it is admitted when it is at the
//      head of the queue and no other prefill is in the step, and it takes the rest of the
//      step's budget (it is the step's only prefill; running sequences still decode).
//   3. the step ends at now + StepTime(cost, work) (cost_model.h).
// FinishStep() then emits the step's tokens: an admitted request's first output token at the end
// of its prefill step (TTFT at low load = queueing + one prefill step), then one token per decode
// step. A sequence finishes after max_tokens tokens (finish reason "length"), or earlier with
// "stop" when the optional EOS draw fires (eos_probability per token after min_tokens, never with
// ignore_eos). Finished and aborted sequences free their slot at once.
//
// Thread-safety: none; one owner thread.
// Units: token counts; MonoTime instants; Nanos durations.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "core/rng.h"
#include "emulate/cost_model.h"

namespace bakeoff::emulate {

struct EngineConfig {
  std::int64_t max_num_seqs = 256;         // most sequences running (decoding) at once
  std::int64_t max_batched_tokens = 8192;  // token budget of one step (prefill + decode)
  std::int64_t max_model_len = 32768;      // context limit: prompt + output tokens
  CostModel cost;
  double eos_probability = 0.0;  // chance per token of an early EOS (after min_tokens); 0 = never
  std::uint64_t seed = 0;        // seeds the EOS draws
};

// OK when the config is usable; otherwise kInvalidInput naming the field: max_num_seqs >= 1,
// max_batched_tokens >= max_num_seqs (as vLLM requires), max_model_len >= 2, cost coefficients
// valid, eos_probability in [0, 1].
Status ValidateEngineConfig(const EngineConfig& config);

using SequenceId = std::uint64_t;

struct SequenceRequest {
  std::int64_t prompt_tokens = 0;  // >= 0
  std::int64_t max_tokens = 16;    // >= 1; prompt_tokens + max_tokens <= max_model_len
  std::int64_t min_tokens = 0;     // no EOS before this many tokens
  bool ignore_eos = false;         // no EOS at all
};

enum class FinishReason : std::uint8_t { kLength, kStop };

// One output token produced at the end of a step.
struct TokenEvent {
  SequenceId id = 0;
  std::int64_t index = 0;                    // 0-based output token index
  std::optional<FinishReason> finish;        // set on the sequence's last token
};

// The composition of a planned step.
struct StepPlan {
  MonoTime start;
  MonoTime end;
  StepWork work;
  std::int64_t prefill_seqs = 0;
};

// Expected timings of one request alone on an idle engine.
struct SingleRequestTiming {
  Nanos ttft{0};  // one prefill step
  Nanos tpot{0};  // mean decode step over the request's output; 0 when output_tokens == 1
  Nanos e2e{0};   // prefill step + every decode step
};

// The timing a lone request of `prompt_tokens` tokens generating `output_tokens` tokens gets:
//   ttft = StepTime({prefill P, 0 decodes, kv P})
//   tpot = mean over k = 1 .. N-1 of StepTime({0 prefill, 1 decode, kv P + k})
//        = base + decode_ms_per_seq + kv_ms_per_1k_tokens * (P + N/2) / 1000   (exactly, in ms)
// (for P > max_batched_tokens the same: it runs alone). Queueing and transport are excluded.
// REQUIRES: prompt_tokens >= 0, output_tokens >= 1.
SingleRequestTiming ExpectedSingleRequest(const EngineConfig& config, std::int64_t prompt_tokens,
                                          std::int64_t output_tokens);

class Scheduler {
 public:
  // REQUIRES: ValidateEngineConfig(config).ok().
  explicit Scheduler(EngineConfig config);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const EngineConfig& config() const { return config_; }

  // Queues a request (FCFS) and returns its id (ids are never reused). kInvalidInput when
  // prompt_tokens < 0, max_tokens < 1, min_tokens < 0 or prompt + max_tokens > max_model_len.
  // May be called while a step is in flight; the request joins at the next BeginStep.
  Result<SequenceId> Add(const SequenceRequest& request);

  // Drops a waiting or running sequence and frees its slot; if it is part of the step in flight,
  // that step produces no token for it (its duration is unchanged). No-op for an unknown or
  // finished id.
  void Abort(SequenceId id);

  // True when a waiting or running sequence exists.
  bool HasWork() const { return !running_.empty() || num_waiting_ > 0; }
  bool StepInFlight() const { return step_in_flight_; }

  // Plans the next step starting at `now` and returns its plan (plan.end is when FinishStep
  // should be called); nullopt, and nothing changes, when there is no work.
  // REQUIRES: !StepInFlight().
  std::optional<StepPlan> BeginStep(MonoTime now);

  // Completes the step in flight and returns its tokens: decodes in admission order, then the
  // first tokens of this step's prefills in arrival order.
  // REQUIRES: StepInFlight().
  std::vector<TokenEvent> FinishStep();

  std::size_t num_running() const { return running_.size(); }
  std::size_t num_waiting() const { return num_waiting_; }
  std::uint64_t steps_completed() const { return steps_completed_; }

 private:
  struct Sequence {
    SequenceRequest request;
    std::int64_t generated = 0;  // output tokens produced so far
    bool running = false;
  };

  // Produces the next token of `seq`; erases it from sequences_ when it finishes.
  TokenEvent Emit(SequenceId id, Sequence& seq);

  EngineConfig config_;
  Rng rng_;
  std::unordered_map<SequenceId, Sequence> sequences_;  // waiting and running, by id
  std::deque<SequenceId> waiting_;  // arrival order; aborted ids are skipped lazily
  std::size_t num_waiting_ = 0;     // waiting_ entries still in sequences_
  std::vector<SequenceId> running_;  // admission order
  SequenceId next_id_ = 1;
  bool step_in_flight_ = false;
  std::vector<SequenceId> step_decodes_;
  std::vector<SequenceId> step_prefills_;
  std::uint64_t steps_completed_ = 0;
};

}  // namespace bakeoff::emulate
