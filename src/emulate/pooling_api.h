// emulate/pooling_api.h
//
// Owns: the emulated engine's pooling routes, for embedding and reranking loads:
// POST /v1/embeddings (OpenAI's shape: `input` a string, a list of strings or token ids) and
// POST /v1/rerank or /rerank (the shape vLLM, TEI and Infinity share: `query`, `documents`,
// `top_n`). The engine model has no pooling step, so a request is one prefill: its texts' tokens
// (rerank: the query before each document, as a cross-encoder reads each pair) as one sequence
// that generates a single token, which is not an output; the answer comes when that prefill ends.
// The inputs of one request therefore share one sequence's context limit (max_model_len).
// Embeddings are deterministic 64-dimension unit vectors of each text, and relevance scores
// deterministic in (0, 1) of each (query, document), neither depending on the other inputs;
// results are sorted by score.
// Does not own: sockets (emulate/server.h) or generation (emulate/openai_api.h).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "emulate/openai_api.h"

namespace bakeoff::emulate {

// Wire::kEmbeddings or kRerank for these paths, nullopt otherwise.
std::optional<Wire> MatchPoolingRoute(std::string_view path);

// Reads a pooling request into a one-token, non-streaming GenerationSpec (inputs = its texts or
// documents). Errors (400): not JSON, a missing or empty `input` / `query` / `documents`, a text
// that is not a string, token ids that are not non-negative integers, tokens over max_model_len
// - 1 in all; a `model` other than the served one -> 404.
std::variant<GenerationSpec, ApiError> ParsePoolingRequest(Wire wire, std::string_view body,
                                                           const ServedModel& served);

// The answer of a pooling request: {"object":"list","data":[{"object":"embedding","index",
// "embedding":[...]}],"model","usage":{"prompt_tokens","total_tokens"}} or {"id","model",
// "results":[{"index","relevance_score"}],"usage":{"prompt_tokens","total_tokens"}}.
std::string RenderPoolingBody(const GenerationSpec& spec, const std::string& model_json);

}  // namespace bakeoff::emulate
