#include "dialect/openai_control.h"

#include <nlohmann/json.hpp>

#include "core/json_dump.h"

namespace bakeoff::dialect {
namespace {

Error BadBody(std::string_view what, std::string_view why) {
  return MakeError(ErrorCode::kProtocol, std::string(what) + ": " + std::string(why));
}

}  // namespace

Result<std::vector<ModelCard>> DecodeModelList(std::string_view body) {
  const nlohmann::json j = ParsePeerJson(body);
  if (j.is_discarded()) return BadBody("/v1/models", "body is not JSON");
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
    return BadBody("/v1/models", "no \"data\" array");
  }
  std::vector<ModelCard> models;
  for (const auto& card : j["data"]) {
    if (!card.is_object() || !card.contains("id") || !card["id"].is_string()) {
      return BadBody("/v1/models", "a model card has no string \"id\"");
    }
    ModelCard model;
    model.id = card["id"].get<std::string>();
    if (card.contains("owned_by") && card["owned_by"].is_string()) {
      model.owned_by = card["owned_by"].get<std::string>();
    }
    if (card.contains("max_model_len") && card["max_model_len"].is_number_unsigned()) {
      model.max_model_len = card["max_model_len"].get<std::uint64_t>();
    }
    models.push_back(std::move(model));
  }
  return models;
}

}  // namespace bakeoff::dialect
