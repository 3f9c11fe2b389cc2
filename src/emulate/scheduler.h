// emulate/scheduler.h
//
// Owns: the engine model: the waiting queue, the running sequences, the composition of each
// engine step under the configured policy (engine_config.h), chunked prefill, KV admission and
// preemption by recompute (through emulate/kv_cache.h), and the tokens each step produces. It is
// a pure state machine driven by explicit time (no clock, no threads, no I/O), so the real-time
// server (emulate/server.h) and the virtual-clock simulator (emulate/simulator.h) run the same
// code. docs/emulator.md, "The engine model", is the user-facing description.
// Does not own: step durations (emulate/cost_model.h), text, HTTP, or wall time.
//
// One step, planned by BeginStep(now) (policy kFcfs; the others differ as engine_config.h says):
//   1. every running sequence whose prompt is fully computed decodes one token (1 token of budget
//      each). Its KV grows by one token; when no block is left, the most recently admitted
//      running sequence is preempted (victim policy: last admitted first, as vLLM): its KV is
//      released, it goes back to the front of the waiting queue keeping the tokens it generated,
//      and it recomputes prompt + generated tokens as a prefill when readmitted. A sequence that
//      is itself the last admitted preempts itself.
//   2. running sequences with an unfinished (chunked) prefill continue it, in admission order;
//   3. waiting requests are admitted in queue order while running < max_num_seqs, budget remains
//      and their KV fits (keeping the watermark free): a prompt's cached prefix is not
//      recomputed; the rest is prefilled now, whole, or a chunk of it with chunked prefill.
//      Without chunked prefill a prompt that does not fit the remaining budget stops admission
//      (no skipping: later requests never overtake it).
//   4. the step ends at now + StepTime(cost, work), times the optional noise factor.
// FinishStep() emits the step's tokens: a sequence whose prefill completed in this step produces
// its first output token (or, after a preemption, its next one), and each decode one more token.
// A sequence finishes after max_tokens tokens (finish reason "length"), or earlier with "stop"
// when the optional EOS draw fires. Finished and aborted sequences release their KV at once;
// with slots_keep_kv (engine_config.h) their slot keeps its size, attended as
// StepWork::idle_kv_tokens until a sequence admitted later takes the slot.
//
// Thread-safety: none; one owner thread.
// Units: token counts; MonoTime instants; Nanos durations.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "core/rng.h"
#include "emulate/cost_model.h"
#include "emulate/engine_config.h"
#include "emulate/kv_cache.h"

namespace bakeoff::emulate {

using SequenceId = std::uint64_t;

struct SequenceRequest {
  std::vector<TokenId> prompt;  // the prompt's token ids (tokenizer.h); its size is the length
  std::int64_t max_tokens = 16;  // >= 1; prompt + max_tokens <= max_model_len
  std::int64_t min_tokens = 0;   // no EOS before this many tokens
  bool ignore_eos = false;       // no EOS at all
  // Output token i has the id of the word OutputPiece(output_seed, i) (tokenizer.h; the word
  // without its trailing space), so a later prompt that quotes this answer shares its tokens
  // (multi-turn prefix reuse).
  std::uint64_t output_seed = 0;
  bool constrained = false;  // under a grammar (structured output, tool call): cost.grammar_ms_per_token
  std::uint32_t lora = 0;    // the LoRA adapter it runs with (1-based), 0 = the base model
};

// kToolCalls is never produced by the engine model: it is how the server ends a choice that
// answers with a tool call (emulate/openai_api.h).
enum class FinishReason : std::uint8_t { kLength, kStop, kToolCalls };

// One output token produced at the end of a step.
struct TokenEvent {
  SequenceId id = 0;
  std::int64_t index = 0;              // 0-based output token index
  std::optional<FinishReason> finish;  // set on the sequence's last token
  // On index 0: prompt tokens served from the prefix cache at the sequence's first admission,
  // and the start of the step that first admitted it (queue time = admitted - arrival).
  std::int64_t cached_prompt_tokens = 0;
  MonoTime admitted;
};

// The composition of a planned step.
struct StepPlan {
  MonoTime start;
  MonoTime end;
  StepWork work;
  std::int64_t prefill_seqs = 0;  // sequences with prefill tokens in the step
  std::int64_t preempted = 0;     // sequences preempted while planning it
};

// Cumulative and current figures of the engine, for /metrics and summaries.
struct EngineCounters {
  std::int64_t running = 0;
  std::int64_t waiting = 0;
  std::uint64_t steps = 0;
  std::uint64_t preemptions = 0;
  std::uint64_t prompt_tokens = 0;      // prompt tokens of admitted requests (first admission)
  std::uint64_t prefill_tokens = 0;     // tokens actually prefilled (recomputes included)
  std::uint64_t generation_tokens = 0;  // output tokens produced
  std::uint64_t lora_loads = 0;         // LoRA adapters loaded into a slot
  // The prefix cache as vLLM exports it (vllm:prefix_cache_queries and _hits): each request's
  // prompt tokens looked up once, when it is first admitted, and the tokens found cached. A
  // preempted request looked up again when it is admitted again (its prompt and generated tokens)
  // counts in resumed_* instead, as vLLM keeps those apart (preempted_queries, not exported).
  // kv's own prefix_* count every lookup the cache made, refused admissions included.
  std::uint64_t prefix_queries_tokens = 0;
  std::uint64_t prefix_hit_tokens = 0;
  std::uint64_t resumed_queries_tokens = 0;
  std::uint64_t resumed_hit_tokens = 0;
  KvCacheStats kv;
};

// Expected timings of one request alone on an idle engine.
struct SingleRequestTiming {
  Nanos ttft{0};  // the prefill step(s)
  Nanos tpot{0};  // mean decode step over the request's output; 0 when output_tokens == 1
  Nanos e2e{0};   // prefill step(s) + every decode step
};

// The timing a lone request of `prompt_tokens` tokens (none cached) generating `output_tokens`
// tokens gets, without noise:
//   ttft = sum over its prefill chunks c_j of StepTime({c_j prefill, 0 decodes, kv c_1+..+c_j})
//          (one chunk, the whole prompt, without chunking or when it fits the budget)
//   tpot = mean over k = 1 .. N-1 of StepTime({0 prefill, 1 decode, kv P + k})
//        = base + decode_ms_per_seq + kv_ms_per_1k_tokens * (P + N/2) / 1000   (exactly, in ms)
// Queueing and transport are excluded.
// REQUIRES: prompt_tokens >= 1, output_tokens >= 1.
SingleRequestTiming ExpectedSingleRequest(const EngineConfig& config, std::int64_t prompt_tokens,
                                          std::int64_t output_tokens);

class Scheduler {
 public:
  // REQUIRES: ValidateEngineConfig(config).ok().
  explicit Scheduler(EngineConfig config);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const EngineConfig& config() const { return config_; }

  // Queues a request and returns its id (ids are never reused). kInvalidInput when the prompt is
  // empty, max_tokens < 1, min_tokens < 0 or prompt + max_tokens > max_model_len. May be called
  // while a step is in flight; the request joins at the next BeginStep.
  Result<SequenceId> Add(SequenceRequest request);

  // Drops a waiting or running sequence and releases its KV; if it is part of the step in
  // flight, that step produces no token for it (its duration is unchanged). No-op for an unknown
  // or finished id.
  void Abort(SequenceId id);

  // True when a waiting or running sequence exists.
  bool HasWork() const;
  bool StepInFlight() const { return step_in_flight_; }

  // Plans the next step starting at `now` and returns its plan (plan.end is when FinishStep
  // should be called); nullopt when there is no work, or when the waiting work cannot start
  // before running work frees KV (then HasWork() stays true; on an idle engine this never
  // happens, as validation guarantees room for one max_model_len request).
  // REQUIRES: !StepInFlight().
  std::optional<StepPlan> BeginStep(MonoTime now);

  // Completes the step in flight and returns its tokens: decodes in admission order, then the
  // tokens of sequences whose prefill completed, in the order they were scheduled. The span is
  // valid until the next BeginStep.
  // REQUIRES: StepInFlight().
  std::span<const TokenEvent> FinishStep();

  std::size_t num_running() const;
  std::size_t num_waiting() const;
  // How many leading tokens of `prompt` the prefix cache holds now (0 without caching); read-only,
  // as a cache-aware router asks it.
  std::int64_t CachedPrefixLength(std::span<const TokenId> prompt) const;
  EngineCounters counters() const;

 private:
  struct Sequence;
  struct Impl;
  // kLongestPrefixMatch ranks the queue only up to this length, beyond it FCFS (as SGLang).
  static constexpr std::size_t kLpmMaxQueue = 128;
  void SortWaitingByPrefixMatch();
  // kStaticBatch: frees the finished members' KV once no member of the batch runs.
  void ReleasePaddingIfBatchOver();
  // Makes every LoRA adapter of the step's sequences resident (least recently used evicted first);
  // returns how many had to be loaded.
  std::int64_t LoadAdapters();
  // The id of output word `index` for `seed` (see SequenceRequest::output_seed), memoised for
  // seed 0.
  TokenId OutputTokenId(std::uint64_t seed, std::int64_t index);
  EngineConfig config_;
  bool step_in_flight_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bakeoff::emulate
