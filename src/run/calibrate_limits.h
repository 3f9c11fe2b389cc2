// run/calibrate_limits.h
//
// Owns: `bakeoff calibrate`, second part (docs/engine-presets.md): the scheduler's limits and
// features seen from the outside, each by a short experiment of its own, in this order (a later
// one uses what an earlier one found):
//   1. max_num_seqs: n short requests sent at once, n = 8, 16, ... and the cap itself; those whose
//      first token comes before the first answer ends were running together. In the first burst
//      where fewer ran than were sent, those that ran are the limit; otherwise it is at least the
//      cap. Only where the answers' lengths are forced (the first to end had its planned length).
//   2. prefix cache: one prompt sent twice, then prompts sharing its first 6 to 17 blocks of 50
//      tokens. Where the server counts cached tokens, the counts decide: the repeat under half
//      cached is no cache; else blocks of the largest power of two dividing every count (4 to
//      256, from at least two partly shared prompts; PrefixBlockOfCounts), or token-granular
//      (radix) when that is under 4, or the block size undetermined. Without counts, from TTFT
//      alone (the repeat at most 60% of the first), the block size undetermined.
//   3. chunked prefill: two streams decode while one long prompt (the longest the context allows,
//      at most 16,384 tokens) arrives. A stream stalled for most of that prompt's prefill (or slowed in
//      one step only) means one step took it all; otherwise the steps that carried prefill (gaps over twice the stream's
//      usual one) give the chunk: prompt / steps. "No chunking" needs the server's context.
//   4. KV capacity: as many prompts of that long length as the step (3) prefill time lets the
//      remaining budget afford, at most max_num_seqs, sent at once: fewer running together than
//      sent means the KV pool ran out, at (running + 1/2) prompts' worth of tokens (only when
//      step 1 measured max_num_seqs, or fewer were sent).
// Each finding says what it measured, its raw points, and whether it determined the setting; a
// setting it did not determine stays the base preset's and is named.
// Does not own: the step costs (run/calibrate.h), the loads (run/calibration_load.h).
//
// Thread-safety: blocks; `stop` may be set from a signal watcher.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "emulate/engine_config.h"
#include "load/runner.h"

namespace bakeoff::run {

struct LimitsExperiment {
  load::TargetSpec target;  // calibrated, model chosen
  std::uint64_t seed = 1;
  std::uint64_t context_tokens = 8192;  // prompt + output limit (the server's, else a guess)
  bool context_known = false;           // context_tokens is the server's
  std::uint32_t max_burst = 256;        // step 1's largest n
  std::function<bool()> over_budget;    // true: start no new measurement
  std::function<Nanos()> budget_left;
};

struct LimitFinding {
  std::string setting;     // "max_num_seqs", "prefix_caching", "chunked_prefill", "kv_capacity"
  bool determined = false;
  std::string finding;     // what was seen, in words
  std::string points_format;     // what each point's numbers are
  std::vector<std::vector<double>> points;
};

struct LimitsOutcome {
  std::vector<LimitFinding> findings;
  std::vector<std::string> notes;
  std::string first_error;  // of the first failed request, when any failed
};

// Measures and writes what it determined into `config` (a copy of the base preset's engine
// settings); leaves the rest as they are. A finding that would make `config` invalid is not
// applied, and says so (the others stand). REQUIRES: config is valid.
LimitsOutcome MeasureLimits(const LimitsExperiment& experiment, emulate::EngineConfig& config,
                            const std::atomic<bool>& stop, const std::function<void(const std::string&)>& log);

// The prefix cache's block size read off cached-token counts of prompts that share a prefix with
// an earlier one (each above 0): the largest power of two dividing their greatest common divisor
// when that divisor is at most kLargestPrefixBlock, else the divisor itself. Engines' KV blocks
// are powers of two (vLLM 16, TensorRT-LLM 32 or 64, LMDeploy 64), so counts that share an odd
// factor by chance (llama.cpp's slot reuse can give 10, 560, 705 and 1020: divisor 5) read as 1,
// token-granular matching. 0 for no counts.
inline constexpr std::uint64_t kLargestPrefixBlock = 256;
std::uint64_t PrefixBlockOfCounts(const std::vector<std::uint64_t>& counts);

// The fewest KV blocks that hold one max_model_len request beside the watermark
// (emulate::ValidateEngineConfig's rule).
std::int64_t SmallestValidPoolBlocks(const emulate::EngineConfig& config);

}  // namespace bakeoff::run
