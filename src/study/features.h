// study/features.h
//
// Owns: the fixed vocabulary of runtime features that runtime catalogs (study/catalog.h: what a
// runtime offers) and study files (what a study requires) share, as an enum with one name and
// one line of meaning per feature, and the reading of a feature name with a did-you-mean for a
// near miss. A feature is a capability a client can rely on; the names are those written in the
// files (snake_case) and docs/formats/catalog.md lists them.
// Does not own: which runtime has which feature (the catalog), how a feature is checked live
// (qualify/), or the gate that compares them.
//
// Thread-safety: constant data.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bakeoff::study {

enum class Feature {
  kStreaming,            // streaming answers (SSE) on the OpenAI routes
  kStreamingCancel,      // a client that disconnects mid-stream stops its generation
  kUsageInStream,        // token usage reported in a stream (stream_options.include_usage)
  kSeed,                 // a request seed makes sampling repeatable
  kLogprobs,             // per-token log probabilities
  kStructuredOutput,     // output constrained to JSON / a JSON schema (response_format)
  kToolCalls,            // OpenAI tools / tool_choice
  kMultiLora,            // several LoRA adapters served at once, chosen per request
  kPrefixCaching,        // prompt prefixes reuse cached KV across requests
  kChunkedPrefill,       // long prompts prefilled in chunks mixed with decodes
  kSpeculativeDecoding,  // draft-model / n-gram speculative decoding
  kPdDisaggregation,     // prefill and decode on separate workers
  kOpenaiChat,           // POST /v1/chat/completions
  kOpenaiCompletions,    // POST /v1/completions
  kEmbeddings,           // POST /v1/embeddings
  kRerank,               // a rerank route
};

// Every feature, in enum order.
std::span<const Feature> AllFeatures();
// Every feature's name, in enum order.
std::span<const std::string_view> FeatureNames();

// "streaming", "streaming_cancel", ... as written in catalogs and studies.
std::string_view FeatureName(Feature feature);
// One line: what having the feature means.
std::string_view FeatureMeaning(Feature feature);

// Whether the feature is about generating text (streaming, sampling, output form, how decoding is
// served, the generation routes): it means nothing to an embedding or rerank study.
bool GenerationFeature(Feature feature);

// The feature named exactly `name`; nullopt for anything else.
std::optional<Feature> ParseFeature(std::string_view name);
// For a name that is no feature: the nearest feature name when it is close enough to be a typo.
std::optional<std::string> SuggestFeature(std::string_view name);
// "'strem' is not a feature; did you mean streaming?" or, with no near miss, "'x' is not a
// feature (features: streaming, ...)".
std::string UnknownFeatureMessage(std::string_view name);

}  // namespace bakeoff::study
