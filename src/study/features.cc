// study/features.cc: the feature vocabulary (features.h).
#include "study/features.h"

#include <array>
#include <cstddef>

#include <fmt/format.h>

#include "core/check.h"
#include "core/yaml_doc.h"

namespace bakeoff::study {

namespace {

struct FeatureSpec {
  Feature feature;
  std::string_view name;
  std::string_view meaning;
};

// In enum order (checked by FeatureName).
constexpr FeatureSpec kFeatures[] = {
    {Feature::kStreaming, "streaming", "streams answers as server-sent events"},
    {Feature::kStreamingCancel, "streaming_cancel",
     "a client that disconnects mid-stream stops its generation and frees its KV cache"},
    {Feature::kUsageInStream, "usage_in_stream",
     "reports token usage in a stream (stream_options.include_usage)"},
    {Feature::kSeed, "seed", "a request seed makes sampling repeatable"},
    {Feature::kLogprobs, "logprobs", "returns per-token log probabilities"},
    {Feature::kStructuredOutput, "structured_output",
     "constrains output to JSON or a JSON schema (response_format)"},
    {Feature::kToolCalls, "tool_calls", "OpenAI tool calls (tools, tool_choice)"},
    {Feature::kMultiLora, "multi_lora", "serves several LoRA adapters at once, chosen per request"},
    {Feature::kPrefixCaching, "prefix_caching",
     "reuses the KV cache of shared prompt prefixes across requests"},
    {Feature::kChunkedPrefill, "chunked_prefill",
     "prefills long prompts in chunks mixed with decode steps"},
    {Feature::kSpeculativeDecoding, "speculative_decoding",
     "speculative decoding (draft model, n-gram or similar)"},
    {Feature::kPdDisaggregation, "pd_disaggregation", "runs prefill and decode on separate workers"},
    {Feature::kOpenaiChat, "openai_chat", "POST /v1/chat/completions"},
    {Feature::kOpenaiCompletions, "openai_completions", "POST /v1/completions"},
    {Feature::kEmbeddings, "embeddings", "POST /v1/embeddings"},
    {Feature::kRerank, "rerank", "a rerank route (/v1/rerank or the engine's own)"},
};

constexpr std::size_t kCount = std::size(kFeatures);

constexpr std::array<Feature, kCount> kAll = [] {
  std::array<Feature, kCount> all{};
  for (std::size_t i = 0; i < kCount; ++i) all[i] = kFeatures[i].feature;
  return all;
}();

constexpr std::array<std::string_view, kCount> kNames = [] {
  std::array<std::string_view, kCount> names{};
  for (std::size_t i = 0; i < kCount; ++i) names[i] = kFeatures[i].name;
  return names;
}();

const FeatureSpec& SpecOf(Feature feature) {
  const auto index = static_cast<std::size_t>(feature);
  BAKEOFF_CHECK(index < kCount && kFeatures[index].feature == feature)
      << "feature table out of enum order at " << index;
  return kFeatures[index];
}

}  // namespace

std::span<const Feature> AllFeatures() { return kAll; }
std::span<const std::string_view> FeatureNames() { return kNames; }

std::string_view FeatureName(Feature feature) { return SpecOf(feature).name; }
std::string_view FeatureMeaning(Feature feature) { return SpecOf(feature).meaning; }

bool GenerationFeature(Feature feature) {
  switch (feature) {
    case Feature::kMultiLora:
    case Feature::kPrefixCaching:
    case Feature::kEmbeddings:
    case Feature::kRerank:
      return false;
    default:
      return true;
  }
}

std::optional<Feature> ParseFeature(std::string_view name) {
  for (const FeatureSpec& spec : kFeatures) {
    if (spec.name == name) return spec.feature;
  }
  return std::nullopt;
}

std::optional<std::string> SuggestFeature(std::string_view name) {
  return yaml::NearestName(name, FeatureNames());
}

std::string UnknownFeatureMessage(std::string_view name) {
  if (const std::optional<std::string> suggestion = SuggestFeature(name)) {
    return fmt::format("'{}' is not a feature; did you mean {}?", name, *suggestion);
  }
  return fmt::format("'{}' is not a feature (features: {})", name, yaml::JoinNames(FeatureNames()));
}

}  // namespace bakeoff::study
