// emulate/cost_model.h
//
// Owns: the step-time cost model of the emulated engine: how long one engine step (one forward
// pass over a batch) takes, given what the batch contains. The formula, in milliseconds:
//
//   step_ms = base_ms
//           + multi_token_ms       * [the step computes more than one token]
//           + prefill_ms_per_token * prefill_tokens      (prompt tokens prefilled in this step)
//           + prefill_ms_per_1m_pairs * prefill_pairs / 1e6  (query-key token pairs of their attention)
//           + decode_ms_per_seq    * decode_seqs         (sequences decoding one token)
//           + decode_ms_per_1m_pairs * decode_seqs * kv_tokens / 1e6  (their tokens against the step's KV)
//           + kv_ms_per_1k_tokens  * kv_tokens / 1000    (KV-cache tokens attended in this step)
//           + grammar_ms_per_token * constrained_decodes (decoding sequences under a grammar)
//           + lora_load_ms         * lora_loads          (LoRA adapters loaded into a slot)
//
// where kv_tokens sums, over every sequence in the step, its context length: P for a prefill of a
// P-token prompt, and P + k for a decode of a sequence that has already produced k tokens; and
// prefill_pairs sums, over every prefill chunk of c tokens after the sequence's first s tokens
// (cached or prefilled before), the pairs its causal attention computes: c * s + c * (c + 1) / 2,
// so P * (P + 1) / 2 for a whole P-token prompt. The pair term is attention that grows with the
// prompt's square, which shows where attention is not the memory-bound kernel the KV term models
// (a CPU engine without flash attention); 0 by default. With whole_batch_attention, prefill_pairs
// is instead prefill_tokens * kv_tokens: every prompt token of the step attends every KV token the
// step's sequences hold, its own and the other sequences' alike, as a unified KV cache attended
// whole does (llama.cpp b4748 on a CPU: each token of a batch is scored against every cache cell up
// to the highest in use, masked; docs/engines/llama.cpp.md). A prompt arriving while other streams
// decode then costs more than the same prompt alone; a lone P-token prompt has P * P pairs. Such an
// engine attends the cells its idle slots keep too (EngineConfig::slots_keep_kv): with
// whole_batch_attention, idle_kv_tokens is added to kv_tokens in the pair term and the KV term
// (without it they are held, not attended, and cost nothing).
// The decode pair term is a decoding token scored against every KV token of the step, not only its
// own sequence's: a step of c streams of context L then grows with c * c * L, as llama.cpp's does on
// a CPU whose caches do not hold the KV (docs/engines/llama.cpp.md, 2026-12-04); 0 by default.
// multi_token_ms is the fixed extra cost of
// a step that computes two or more tokens (prefill tokens plus decoding sequences) over one that
// computes a lone decode token: an engine whose kernels take a matrix-vector path for one token
// and a matrix-matrix path for more pays it as a jump in the step time from one stream to two
// (llama.cpp on a CPU, docs/engines/llama.cpp.md); 0 by default.
// base_ms models reading the weights once per step, the prefill term compute-bound prompt
// processing, the decode term per-sequence overhead (sampling, small kernels), and the KV term
// attention's memory reads, the grammar term the token mask a structured-output sequence needs
// each token (computed on the CPU while the step runs, so it adds to the step), and the LoRA term
// copying an adapter's weights into one of the engine's adapter slots (emulate/scheduler.h). Defaults are plausible for a 7-8B dense model in 16-bit precision on
// one datacenter GPU (docs/emulator.md explains each number); they are not a measurement of any
// engine.
// Does not own: which work goes into a step (emulate/scheduler.h).
//
// Thread-safety: plain values and pure functions.
// Units: milliseconds in the coefficients (names end in _ms...), Nanos in results.
#pragma once

#include <cstdint>

#include "core/clock.h"
#include "core/result.h"

namespace bakeoff::emulate {

struct CostModel {
  double base_ms = 6.0;                // fixed cost of every step
  double multi_token_ms = 0;           // extra fixed cost of a step computing more than one token
  double prefill_ms_per_token = 0.06;  // per prompt token prefilled in the step
  double prefill_ms_per_1m_pairs = 0;  // per million query-key pairs of the step's prefill attention
  bool whole_batch_attention = false;  // those pairs: prefill tokens x the step's KV tokens (above)
  double decode_ms_per_seq = 0.08;     // per sequence decoding in the step
  double decode_ms_per_1m_pairs = 0;   // per million pairs of a decoding token and a KV token of the step
  double kv_ms_per_1k_tokens = 0.04;   // per 1000 KV-cache tokens attended in the step
  double grammar_ms_per_token = 0.05;  // per decoding sequence under a grammar (structured output)
  double lora_load_ms = 25.0;          // per LoRA adapter loaded into a slot for this step
};

// What one step contains; the inputs of the formula.
struct StepWork {
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_seqs = 0;
  std::int64_t kv_tokens = 0;
  std::int64_t constrained_decodes = 0;  // decode_seqs under a grammar
  std::int64_t lora_loads = 0;
  std::int64_t prefill_pairs = 0;  // query-key pairs of the prefill chunks' own causal attention (above)
  std::int64_t idle_kv_tokens = 0;  // KV tokens idle slots keep (attended under whole_batch_attention)
};

// The query-key pairs of a prefill chunk of `chunk` tokens after `before` tokens of its sequence.
constexpr std::int64_t PrefillPairs(std::int64_t before, std::int64_t chunk) {
  return chunk * before + chunk * (chunk + 1) / 2;
}

// The formula above in milliseconds.
double StepMillis(const CostModel& model, const StepWork& work);

// StepMillis as a duration, rounded to the nearest nanosecond.
Nanos StepTime(const CostModel& model, const StepWork& work);

// OK when every coefficient is finite and >= 0; otherwise an kInvalidInput error naming the
// field (e.g. "base_ms must be a finite number >= 0, got -1").
Status ValidateCostModel(const CostModel& model);

}  // namespace bakeoff::emulate
