// emulate/engine_config.h
//
// Owns: the settings of one emulated engine (what a preset file in examples/engines/ describes):
// batching limits, the scheduling policy, chunked prefill, the paged KV cache and its prefix-cache
// flavour, the step-cost model with its optional noise, and early-EOS behaviour; and their
// validation, including the impossible combinations (a KV budget that cannot hold one max-length
// request). docs/emulator.md explains each setting and which engine family it imitates.
// Does not own: reading preset files (emulate/engine_preset.h), or the model itself
// (emulate/scheduler.h, emulate/kv_cache.h).
//
// Thread-safety: plain values and pure functions.
// Units: token counts; cost coefficients in milliseconds (cost_model.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "emulate/cost_model.h"

namespace bakeoff::emulate {

// How a step is composed (docs/emulator.md, "Scheduling policies").
enum class SchedulingPolicy : std::uint8_t {
  // Mixed steps: every running sequence decodes, unfinished (chunked) prefills continue, then
  // waiting requests are admitted in arrival order with the remaining token budget (vLLM V1).
  kFcfs,
  // A step prefills only (decodes pause) whenever a prefill can be scheduled; decodes run only in
  // steps with no prefill (vLLM V0 without chunked prefill, TGI). Best TTFT, worst ITL.
  kPrefillFirst,
  // Mixed steps, but a step that decodes takes at most one prefill chunk (of at most
  // prefill_chunk_tokens); with nothing decoding, admission is as kFcfs. Protects ITL, costs TTFT.
  kDecodeFirst,
  // As kFcfs, but the waiting queue is ordered by the longest cached prefix first (ties by
  // arrival), as SGLang's LPM; needs a prefix cache.
  kLongestPrefixMatch,
  // Request-level batching: when nothing runs, up to max_num_seqs waiting requests start
  // together (all prompts prefilled in one step); the batch decodes until its longest member
  // finishes, finished members staying in the step as padding; arrivals wait for the next batch.
  kStaticBatch,
};

enum class PrefixCaching : std::uint8_t {
  kNone,
  // Full blocks identified by a hash of their tokens chained to the previous block's hash
  // (vLLM automatic prefix caching); unreferenced cached blocks are evicted LRU.
  kHashedBlocks,
  // A radix tree over token ids at token granularity; unreferenced leaves evicted LRU (SGLang).
  kRadix,
};

std::string_view PolicyName(SchedulingPolicy policy);  // "fcfs", "prefill-first", ...
std::optional<SchedulingPolicy> ParsePolicy(std::string_view name);
std::string_view PrefixCachingName(PrefixCaching caching);  // "none", "hashed-blocks", "radix"
std::optional<PrefixCaching> ParsePrefixCaching(std::string_view name);

struct KvCacheConfig {
  std::int64_t block_tokens = 16;    // tokens per KV block (page)
  std::int64_t num_blocks = 16384;   // blocks in the pool: capacity = num_blocks * block_tokens
  // Share of the blocks an admission must leave free (vLLM V0's watermark); running sequences
  // may use them. In [0, 1).
  double watermark = 0.01;
  PrefixCaching prefix_caching = PrefixCaching::kNone;
};

struct EngineConfig {
  std::string name = "default";            // preset name, for logs and summaries
  std::int64_t max_num_seqs = 256;         // most sequences running at once
  std::int64_t max_batched_tokens = 8192;  // token budget of one step (prefill + decode)
  std::int64_t max_model_len = 32768;      // context limit: prompt + output tokens
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool chunked_prefill = true;
  // Most prompt tokens one sequence prefills in one step when chunked_prefill; 0 = up to the
  // step's remaining budget.
  std::int64_t prefill_chunk_tokens = 0;
  // Each of the max_num_seqs slots keeps the KV of the last request it served (its prompt and
  // output) after that request ends, until the slot takes another, as llama.cpp's server does: a
  // request takes the idle slot used least recently, whose kept cells it replaces. The kept cells
  // take no capacity from the pool (llama.cpp gives each slot its share of the context); under
  // cost.whole_batch_attention every step attends them (StepWork::idle_kv_tokens).
  bool slots_keep_kv = false;
  KvCacheConfig kv;
  CostModel cost;
  // Relative standard deviation of step time: each step's duration is multiplied by a
  // log-normal factor with mean 1 and this coefficient of variation, drawn from `seed`. 0 = none.
  double step_noise_cv = 0.0;
  double eos_probability = 0.0;  // chance per token of an early EOS (after min_tokens); 0 = never
  // LoRA adapters at once (vLLM's --max-loras): the running sequences use at most this many (a
  // waiting request with another adapter waits, in queue order), and as many are resident in the
  // engine's slots; a step whose sequences need an adapter not resident loads it
  // (cost.lora_load_ms), evicting the least recently used.
  std::int64_t max_loras = 4;
  std::uint64_t seed = 0;        // seeds the EOS and noise draws
};

// OK when the config is usable; otherwise kInvalidInput naming the field (as the preset file
// spells it): max_num_seqs >= 1; max_batched_tokens >= max_num_seqs (as vLLM requires);
// max_model_len >= 2; without chunked prefill max_batched_tokens >= max_model_len (or a prompt
// could never be scheduled); prefill_chunk_tokens >= 0; block_tokens >= 1; num_blocks >= 1;
// watermark in [0, 1); the pool minus the watermark holds one max_model_len request; kLongestPrefixMatch
// only with a prefix cache; cost coefficients valid; step_noise_cv in [0, 10]; eos_probability in [0, 1].
Status ValidateEngineConfig(const EngineConfig& config);

}  // namespace bakeoff::emulate
