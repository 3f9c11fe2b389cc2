// emulate/pooling_api.cc: embedding and rerank requests (contract in pooling_api.h).
#include "emulate/pooling_api.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "emulate/tokenizer.h"

namespace bakeoff::emulate {
namespace {

using json = nlohmann::json;

constexpr int kEmbeddingDims = 64;

ApiError Invalid(std::string message, std::string param) { return BadRequest(std::move(message), std::move(param)); }

// The token ids of one `input` element: a string, or a list of token ids.
std::variant<std::vector<TokenId>, ApiError> InputIds(const json& item) {
  if (item.is_string()) return TokenIds(item.get<std::string>());
  if (!item.is_array()) return Invalid("each input must be a string or a list of token ids", "input");
  std::vector<TokenId> ids;
  for (const json& id : item) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0) {
      return Invalid("token ids must be non-negative integers", "input");
    }
    ids.push_back(static_cast<TokenId>(id.get<std::int64_t>() % kVocabSize));
  }
  return ids;
}

// FNV-1a over token ids, from `h`.
std::uint64_t HashIds(const std::vector<TokenId>& ids, std::uint64_t h = 1469598103934665603ULL) {
  for (TokenId id : ids) h = (h ^ id) * 1099511628211ULL;
  return h;
}

std::optional<ApiError> Append(std::vector<TokenId>& prompt, const std::vector<TokenId>& ids, const char* param) {
  if (ids.empty()) return Invalid("an input has no tokens", param);
  prompt.insert(prompt.end(), ids.begin(), ids.end());
  return std::nullopt;
}

std::optional<ApiError> ReadEmbeddings(const json& doc, GenerationSpec& spec) {
  auto input = doc.find("input");
  if (input == doc.end() || input->is_null()) return Invalid("field required: input", "input");
  // A string, a list of ids, a list of strings or a list of lists of ids.
  const bool single = input->is_string() || (input->is_array() && !input->empty() && (*input)[0].is_number());
  const json items = single ? json::array({*input}) : *input;
  if (!items.is_array() || items.empty()) return Invalid("input must be a non-empty string or list", "input");
  for (const json& item : items) {
    auto ids = InputIds(item);
    if (auto* error = std::get_if<ApiError>(&ids)) return std::move(*error);
    if (auto error = Append(spec.prompt, std::get<std::vector<TokenId>>(ids), "input")) return error;
    spec.input_seeds.push_back(HashIds(std::get<std::vector<TokenId>>(ids)));
  }
  spec.inputs = static_cast<std::int64_t>(items.size());
  return std::nullopt;
}

std::optional<ApiError> ReadRerank(const json& doc, GenerationSpec& spec) {
  auto query = doc.find("query");
  if (query == doc.end() || !query->is_string() || query->get<std::string>().empty()) {
    return Invalid("query must be a non-empty string", "query");
  }
  auto documents = doc.find("documents");
  if (documents == doc.end() || !documents->is_array() || documents->empty()) {
    return Invalid("documents must be a non-empty list", "documents");
  }
  const std::vector<TokenId> query_ids = TokenIds(query->get<std::string>());
  for (const json& document : *documents) {
    // A string, or {"text": ...} (Jina's and Cohere's documents).
    const json* text = document.is_object() && document.contains("text") ? &document["text"] : &document;
    if (!text->is_string()) return Invalid("each document must be a string or {\"text\": ...}", "documents");
    const std::vector<TokenId> document_ids = TokenIds(text->get<std::string>());
    if (auto error = Append(spec.prompt, query_ids, "query")) return error;
    if (auto error = Append(spec.prompt, document_ids, "documents")) return error;
    spec.input_seeds.push_back(HashIds(document_ids, HashIds(query_ids)));
  }
  spec.inputs = static_cast<std::int64_t>(documents->size());
  return std::nullopt;
}

// A deterministic value in [0, 1) for (seed, index).
double Unit(std::uint64_t seed, std::uint64_t index) {
  Rng rng(seed * 0x9e3779b97f4a7c15ULL + index + 1);
  return static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
}

// Input i's seed; a spec built without them (tests) falls back to the request's seed and index.
std::uint64_t InputSeed(const GenerationSpec& spec, std::int64_t i) {
  const auto k = static_cast<std::size_t>(i);
  return k < spec.input_seeds.size() ? spec.input_seeds[k] : spec.seed + k * 7919;
}

}  // namespace

std::optional<Wire> MatchPoolingRoute(std::string_view path) {
  if (path == "/v1/embeddings") return Wire::kEmbeddings;
  if (path == "/v1/rerank" || path == "/rerank") return Wire::kRerank;
  return std::nullopt;
}

std::variant<GenerationSpec, ApiError> ParsePoolingRequest(Wire wire, std::string_view body,
                                                           const ServedModel& served) {
  const json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return BadRequest("request body is not valid JSON");
  if (!doc.is_object()) return BadRequest("request body must be a JSON object");
  if (auto model = doc.find("model"); model != doc.end() && !model->is_null()) {
    if (!model->is_string() || model->get<std::string>() != served.name) {
      return NotFound(fmt::format("The model `{}` does not exist.", model->is_string() ? model->get<std::string>() : model->dump()),
                      "model");
    }
  }
  GenerationSpec spec;
  spec.endpoint = Endpoint::kCompletions;
  spec.wire = wire;
  try {
    if (auto error = wire == Wire::kRerank ? ReadRerank(doc, spec) : ReadEmbeddings(doc, spec)) return *error;
  } catch (const json::exception& e) {  // a type we did not check; never let it escape
    return BadRequest(fmt::format("invalid request: {}", e.what()));
  }
  spec.prompt_tokens = static_cast<std::int64_t>(spec.prompt.size());
  if (spec.prompt_tokens >= served.max_model_len) {
    return BadRequest(fmt::format("the request's {} tokens do not fit the emulated engine's context of {} tokens (its "
                                  "inputs are prefilled as one sequence)",
                                  spec.prompt_tokens, served.max_model_len),
                      wire == Wire::kRerank ? "documents" : "input");
  }
  spec.max_tokens = 1;
  spec.ignore_eos = true;
  spec.stream = false;
  spec.seed = HashIds(spec.prompt);
  return spec;
}

std::string RenderPoolingBody(const GenerationSpec& spec, const std::string& model_json) {
  std::string body;
  const auto usage = fmt::format(R"("usage":{{"prompt_tokens":{},"total_tokens":{}}})", spec.prompt_tokens,
                                 spec.prompt_tokens);
  if (spec.wire == Wire::kRerank) {
    std::vector<std::pair<double, std::int64_t>> scored;
    for (std::int64_t i = 0; i < spec.inputs; ++i) {
      scored.emplace_back(0.001 + 0.998 * Unit(InputSeed(spec, i), 0), i);
    }
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    body = fmt::format(R"({{"id":"rerank-{:016x}","model":{},"results":[)", spec.seed, model_json);
    for (std::size_t k = 0; k < scored.size(); ++k) {
      fmt::format_to(std::back_inserter(body), R"({}{{"index":{},"relevance_score":{:.6f}}})", k > 0 ? "," : "",
                     scored[k].second, scored[k].first);
    }
    return body + "]," + usage + "}";
  }
  body = R"({"object":"list","data":[)";
  for (std::int64_t i = 0; i < spec.inputs; ++i) {
    double values[kEmbeddingDims];
    double norm = 0;
    for (int d = 0; d < kEmbeddingDims; ++d) {
      values[d] = Unit(InputSeed(spec, i), static_cast<std::uint64_t>(d)) - 0.5;
      norm += values[d] * values[d];
    }
    norm = std::sqrt(norm);
    fmt::format_to(std::back_inserter(body), R"({}{{"object":"embedding","index":{},"embedding":[)", i > 0 ? "," : "", i);
    for (int d = 0; d < kEmbeddingDims; ++d) {
      fmt::format_to(std::back_inserter(body), "{}{:.6f}", d > 0 ? "," : "", values[d] / norm);
    }
    body += "]}";
  }
  return body + fmt::format(R"(],"model":{},)", model_json) + usage + "}";
}

}  // namespace bakeoff::emulate
