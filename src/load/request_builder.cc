// load/request_builder.cc: the contents of planned requests (contract in request_builder.h).
#include "load/request_builder.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/rng.h"
#include "load/runner.h"
#include "load/trace_prompt.h"

namespace bakeoff::load {

std::uint64_t RequestSeed(std::uint64_t run_seed, std::uint32_t step, std::uint64_t id) {
  Rng rng(run_seed ^ (step * 0x9e3779b97f4a7c15ULL) ^ (id * 0xc2b2ae3d27d4eb4fULL));
  return rng.Next();
}

std::uint64_t ArrivalSeed(std::uint64_t run_seed, std::uint32_t step) {
  constexpr std::uint64_t kArrivals = 0x6172726976616c73ULL;  // "arrivals"
  Rng rng(run_seed ^ (step * 0x9e3779b97f4a7c15ULL) ^ kArrivals);
  return rng.Next();
}

namespace {

// The step whose request seeds (and so prompts) step `step` uses: its baseline when a variant.
std::uint32_t SeedStep(const RunSpec& run, std::uint32_t step) {
  return step < run.steps.size() && run.steps[step].variant ? run.steps[step].baseline : step;
}

// A LoRA adapter for a request with `seed`: uniform, or Zipf with exponent `s`.
const std::string& DrawAdapter(const TargetSpec& target, std::uint64_t seed) {
  const std::vector<std::string>& names = target.lora_adapters;
  Rng rng(seed ^ 0x6c6f7261ULL);
  if (target.lora_zipf <= 0) return names[rng.Next() % names.size()];
  double total = 0;
  for (std::size_t k = 1; k <= names.size(); ++k) total += std::pow(static_cast<double>(k), -target.lora_zipf);
  double u = static_cast<double>(rng.Next() >> 11) * 0x1.0p-53 * total;
  for (std::size_t k = 1; k <= names.size(); ++k) {
    u -= std::pow(static_cast<double>(k), -target.lora_zipf);
    if (u < 0) return names[k - 1];
  }
  return names.back();
}

// What a variant step changes in a request with `seed`.
void ApplyVariant(const RunSpec& run, std::uint32_t step, std::uint64_t seed, dialect::GenerationRequest& request) {
  if (step >= run.steps.size() || !run.steps[step].variant) return;
  if (run.target.constraint) request.constraint = run.target.constraint;
  if (!run.target.lora_adapters.empty()) request.model = DrawAdapter(run.target, seed);
}

// The texts of a pooling request of `run.shape.batch` inputs, `words` words each: an embeddings
// request's texts, or a rerank's query (its prompt) and documents. Each text has its own seed.
void FillPoolingInputs(const RunSpec& run, const PromptText& prompts, std::uint32_t words, std::uint64_t seed,
                       dialect::GenerationRequest& request) {
  if (request.api != dialect::Api::kEmbeddings) request.prompt = prompts.Build(words, seed);
  for (std::uint32_t i = 0; i < std::max<std::uint32_t>(1, run.shape.batch); ++i) {
    request.inputs.push_back(prompts.Build(words, seed ^ ((i + 1) * 0x9e3779b97f4a7c15ULL)));
  }
}

}  // namespace

std::uint64_t PlannedPromptTokens(const RunSpec& run, std::uint32_t tokens_per_text) {
  if (dialect::ApiGenerates(run.target.request.api)) return tokens_per_text;
  const std::uint64_t inputs = std::max<std::uint32_t>(1, run.shape.batch);
  // A rerank pairs the query with each document, as an engine's usage counts it.
  return run.target.request.api == dialect::Api::kEmbeddings ? inputs * tokens_per_text : 2 * inputs * tokens_per_text;
}

dialect::GenerationRequest BuildSyntheticRequest(const RunSpec& run, const PromptText& prompts,
                                                 std::uint32_t step, std::uint64_t id) {
  dialect::GenerationRequest request = run.target.request;
  const std::uint64_t seed = RequestSeed(run.seed, SeedStep(run, step), id);
  const std::uint32_t words = PromptWords(run.shape.prompt_tokens, run.target.prompt_sizing);
  if (dialect::ApiGenerates(request.api)) {
    request.prompt = prompts.Build(words, seed);
  } else {
    FillPoolingInputs(run, prompts, words, seed, request);
  }
  request.max_tokens = run.shape.output_tokens;
  ApplyVariant(run, step, seed, request);
  return request;
}

dialect::GenerationRequest BuildTraceRequest(const RunSpec& run, const workload::Trace& trace,
                                             const PromptText& prompts, std::uint32_t step,
                                             std::size_t item, History history) {
  const workload::TraceRequest& source = trace.requests[item];
  const std::uint64_t seed = RequestSeed(run.seed, SeedStep(run, step), item);
  if (!dialect::ApiGenerates(run.target.request.api)) {
    // A pooling request is its texts alone, each of the trace request's input length: no
    // conversation, system prompt or output length.
    dialect::GenerationRequest request = run.target.request;
    FillPoolingInputs(run, prompts, PromptWords(source.input_tokens, run.target.prompt_sizing), seed, request);
    if (source.model) request.model = *source.model;
    ApplyVariant(run, step, seed, request);
    return request;
  }
  TracePrompt text = BuildTracePrompt(prompts, source, trace.block_tokens, run.target.prompt_sizing, seed);
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
  ApplyVariant(run, step, seed, request);
  return request;
}

}  // namespace bakeoff::load
