// load/request_builder.cc: the contents of planned requests (contract in request_builder.h).
#include "load/request_builder.h"

#include <algorithm>
#include <iterator>

#include "core/rng.h"
#include "load/runner.h"
#include "load/trace_prompt.h"

namespace bakeoff::load {

std::uint64_t RequestSeed(std::uint64_t run_seed, std::uint32_t step, std::uint64_t id) {
  Rng rng(run_seed ^ (step * 0x9e3779b97f4a7c15ULL) ^ (id * 0xc2b2ae3d27d4eb4fULL));
  return rng.Next();
}

dialect::GenerationRequest BuildSyntheticRequest(const RunSpec& run, const PromptText& prompts,
                                                 std::uint32_t step, std::uint64_t id) {
  dialect::GenerationRequest request = run.target.request;
  request.prompt = prompts.Build(PromptWords(run.shape.prompt_tokens, run.target.prompt_sizing),
                                 RequestSeed(run.seed, step, id));
  request.max_tokens = run.shape.output_tokens;
  return request;
}

dialect::GenerationRequest BuildTraceRequest(const RunSpec& run, const workload::Trace& trace,
                                             const PromptText& prompts, std::uint32_t step,
                                             std::size_t item, History history) {
  const workload::TraceRequest& source = trace.requests[item];
  TracePrompt text = BuildTracePrompt(prompts, source, trace.block_tokens, run.target.prompt_sizing,
                                      RequestSeed(run.seed, step, item));
  dialect::GenerationRequest request = run.target.request;
  request.system = std::move(text.system);
  request.history = std::move(text.history);
  request.history.insert(request.history.begin(), std::make_move_iterator(history.begin()),
                         std::make_move_iterator(history.end()));
  if (!dialect::ApiTakesMessages(request.api)) {
    // No message structure: the conversation so far, system prompt first, is one text.
    std::string joined;
    if (!request.system.empty()) joined += request.system + "\n";
    request.system.clear();
    for (const auto& [role, content] : request.history) joined += content + "\n";
    request.prompt = joined + text.prompt;
    request.history.clear();
  } else {
    request.prompt = std::move(text.prompt);
  }
  request.max_tokens = std::max<std::uint32_t>(1, source.output_tokens);
  if (request.min_tokens) request.min_tokens = request.max_tokens;
  if (source.model) request.model = *source.model;
  return request;
}

}  // namespace bakeoff::load
