// tests/support/one_at_a_time_engine.h
//
// Owns: the engine model whose timing tests compute by hand: one sequence at a time, every step
// 10 ms whatever it holds (no per-token cost, no prefix cache, no noise), so a request of k output
// tokens holds its replica for exactly k steps (one prefill step that gives the first token, then
// k - 1 decodes) and its TTFT alone is 10 ms. Used by the capacity search and plan tests.
#pragma once

#include "emulate/engine_config.h"

namespace bakeoff::testing {

inline emulate::EngineConfig OneAtATimeEngine() {
  emulate::EngineConfig e;
  e.name = "one-at-a-time";
  e.max_num_seqs = 1;
  e.max_batched_tokens = 4096;
  e.max_model_len = 4096;
  e.chunked_prefill = false;
  e.kv.prefix_caching = emulate::PrefixCaching::kNone;
  e.cost.base_ms = 10;
  e.cost.prefill_ms_per_token = 0;  // prompts differ by a few tokens; the service time must not
  e.cost.decode_ms_per_seq = 0;
  e.cost.kv_ms_per_1k_tokens = 0;
  return e;
}

}  // namespace bakeoff::testing
