// target/discovery.cc: what a target serves (contract in discovery.h).
#include "target/discovery.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"
#include "dialect/openai_control.h"

namespace bakeoff::target {
namespace {

// What llama.cpp's GET /props says: the context size per slot (default_generation_settings.n_ctx)
// and the number of slots (total_slots); other servers answer 404 or something without them.
struct LlamaCppProps {
  std::optional<std::uint64_t> n_ctx;
  std::optional<std::uint64_t> total_slots;
};

LlamaCppProps ReadLlamaCppProps(const net::Endpoint& endpoint, const net::ClientOptions& client) {
  LlamaCppProps out;
  Result<net::FetchedResponse> props = net::Fetch(endpoint, GetRequest("/props"), client);
  if (!props.ok() || props->head.status != 200) return out;
  const nlohmann::json j = ParsePeerJson(props->body);
  if (!j.is_object()) return out;
  const auto positive = [](const nlohmann::json& object, const char* key) -> std::optional<std::uint64_t> {
    auto it = object.find(key);
    if (it == object.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() == 0) return std::nullopt;
    return it->get<std::uint64_t>();
  };
  out.total_slots = positive(j, "total_slots");
  auto settings = j.find("default_generation_settings");
  if (settings != j.end() && settings->is_object()) out.n_ctx = positive(*settings, "n_ctx");
  return out;
}

}  // namespace

net::HttpRequest GetRequest(std::string path) {
  net::HttpRequest request;
  request.method = "GET";
  request.path = std::move(path);
  request.content_type.clear();
  return request;
}

std::optional<std::string> StripApiVersionSuffix(net::Endpoint& endpoint) {
  std::string& path = endpoint.base_path;
  const std::string before = endpoint.ToString();
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path != "/v1" && !path.ends_with("/v1")) return std::nullopt;
  path.resize(path.size() - 3);
  return fmt::format(
      "the URL {} ends in /v1; bakeoff adds /v1/... to the base URL itself, so it "
      "uses {}",
      before, endpoint.ToString());
}

Result<TargetFacts> Discover(const net::Endpoint& endpoint, const net::ClientOptions& client,
                             const std::string& model) {
  TargetFacts facts;
  facts.model = model;
  const std::string where = endpoint.ToString();
  Result<net::FetchedResponse> response = net::Fetch(endpoint, GetRequest("/v1/models"), client);
  if (!response.ok()) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot reach " + where + ": " + response.error().message);
  }
  if (response->head.Header("X-Bakeoff-Emulated") == "true") facts.emulated = true;
  std::vector<dialect::ModelCard> models;
  if (response->head.status == 200) {
    Result<std::vector<dialect::ModelCard>> listed = dialect::DecodeModelList(response->body);
    if (listed.ok()) {
      models = std::move(listed.value());
    } else if (model.empty()) {
      return MakeError(ErrorCode::kUnavailable, fmt::format("GET {}/v1/models: {}; pass --model",
                                                            where, listed.error().message));
    }
  } else if (model.empty()) {
    return MakeError(ErrorCode::kUnavailable,
                     fmt::format("GET {}/v1/models answered HTTP {}; is {} the server's base URL "
                                 "(without /v1)? If it is, pass --model",
                                 where, response->head.status, where));
  }
  for (const dialect::ModelCard& card : models) {
    if (card.owned_by == dialect::kEmulatedOwner) facts.emulated = true;
  }
  if (facts.model.empty()) {
    if (models.empty()) {
      return MakeError(ErrorCode::kUnavailable,
                       "GET " + where + "/v1/models lists no models; pass --model");
    }
    facts.model = models.front().id;
    facts.model_from_listing = true;
  }
  for (const dialect::ModelCard& card : models) facts.listed_models.push_back(card.id);
  for (const dialect::ModelCard& card : models) {
    if (card.id == facts.model && card.max_model_len) {
      facts.max_context_tokens = card.max_model_len;
      facts.max_context_source = "max_model_len of the model in GET /v1/models";
    }
  }
  const LlamaCppProps props = ReadLlamaCppProps(endpoint, client);
  if (!facts.max_context_tokens && props.n_ctx) {
    facts.max_context_tokens = props.n_ctx;
    facts.max_context_source = "default_generation_settings.n_ctx in GET /props";
  }
  facts.slots = props.total_slots;
  return facts;
}

}  // namespace bakeoff::target
