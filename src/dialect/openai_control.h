// dialect/openai_control.h
//
// Owns: the small control calls around an OpenAI-compatible server that are not measured:
// listing models (GET /v1/models). Token counting is dialect/tokenize.h.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace bakeoff::dialect {

struct ModelCard {
  std::string id;
  std::string owned_by;
  std::optional<std::uint64_t> max_model_len;
};

// The `data` array of a /v1/models body. Errors describe what is wrong with the body.
Result<std::vector<ModelCard>> DecodeModelList(std::string_view body);

// The owned_by value the emulated engine reports; any model carrying it is emulated.
inline constexpr std::string_view kEmulatedOwner = "bakeoff-emulated";

}  // namespace bakeoff::dialect
