// load/request_builder.h
//
// Owns: what one planned request contains: its prompt text (from the corpus or the trace), its
// history, max_tokens and per-request seed. The live runner (load/runner.h) and the virtual-clock
// simulation (run/simulate.h) both build requests here, so a simulated run sees exactly the
// prompts a real run against the same seed would send.
// Does not own: when requests are sent (load/plan.h, load/runner.h) or their encoding (dialect/).
//
// Thread-safety: pure functions over immutable inputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dialect/openai.h"
#include "load/prompt_text.h"
#include "workload/trace.h"

namespace bakeoff::load {

struct RunSpec;

// Earlier (role, content) messages of a session.
using History = std::vector<std::pair<std::string, std::string>>;

// The seed of request `id` of step `step` in a run seeded with `run_seed`.
std::uint64_t RequestSeed(std::uint64_t run_seed, std::uint32_t step, std::uint64_t id);
// The seed of step `step`'s open-loop arrival process: a stream of its own, so the arrival gaps
// are not drawn from the same numbers as any request's prompt (request 0's included).
std::uint64_t ArrivalSeed(std::uint64_t run_seed, std::uint32_t step);

// The prompt tokens a request of the run plans for texts of `tokens_per_text` tokens: the text
// itself for a generation; a pooling request's every input (rerank: each document with the query).
std::uint64_t PlannedPromptTokens(const RunSpec& run, std::uint32_t tokens_per_text);

// A request of the run's fixed shape with its own corpus text (a pooling route: `shape.batch`
// texts).
dialect::GenerationRequest BuildSyntheticRequest(const RunSpec& run, const PromptText& prompts,
                                                 std::uint32_t step, std::uint64_t id);

// Trace request `item`, after the real earlier turns of its session in `history` (a pooling
// route: `shape.batch` texts of the request's input length, no history).
dialect::GenerationRequest BuildTraceRequest(const RunSpec& run, const workload::Trace& trace,
                                             const PromptText& prompts, std::uint32_t step,
                                             std::size_t item, History history);

}  // namespace bakeoff::load
