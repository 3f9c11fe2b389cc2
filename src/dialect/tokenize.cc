// dialect/tokenize.cc: the engines' token-counting routes (contract in tokenize.h).
#include "dialect/tokenize.h"

#include <nlohmann/json.hpp>

#include "core/json_dump.h"

namespace bakeoff::dialect {
namespace {

using nlohmann::json;

Error NotThisDialect(TokenizeDialect dialect, std::string_view why) {
  return MakeError(ErrorCode::kProtocol, std::string(TokenizePath(dialect)) + " (" +
                                             TokenizeDialectName(dialect) +
                                             " dialect): " + std::string(why));
}

// A non-negative integer field, or nullopt.
std::optional<std::uint64_t> Count(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

std::optional<std::uint64_t> ArraySize(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_array()) return std::nullopt;
  return it->size();
}

}  // namespace

const char* TokenizeDialectName(TokenizeDialect dialect) {
  switch (dialect) {
    case TokenizeDialect::kVllm:
      return "vllm";
    case TokenizeDialect::kLlamaCpp:
      return "llama.cpp";
    case TokenizeDialect::kTgi:
      return "tgi";
    case TokenizeDialect::kTrtLlm:
      return "trtllm";
    case TokenizeDialect::kLmdeploy:
      return "lmdeploy";
  }
  return "unknown";
}

const char* TokenizePath(TokenizeDialect dialect) {
  switch (dialect) {
    case TokenizeDialect::kTrtLlm:
      return "/_internal/tokenize";
    case TokenizeDialect::kLmdeploy:
      return "/v1/encode";
    case TokenizeDialect::kVllm:
    case TokenizeDialect::kLlamaCpp:
    case TokenizeDialect::kTgi:
      break;
  }
  return "/tokenize";
}

std::string EncodeTokenizeRequest(TokenizeDialect dialect, std::string_view model,
                                  std::string_view text) {
  switch (dialect) {
    case TokenizeDialect::kVllm:
      return json{{"model", model}, {"prompt", text}}.dump();
    case TokenizeDialect::kLlamaCpp:
      return json{{"content", text}, {"add_special", false}}.dump();
    case TokenizeDialect::kTgi:
      return json{{"inputs", text}}.dump();
    case TokenizeDialect::kTrtLlm:
      return json{{"prompt", text}}.dump();
    case TokenizeDialect::kLmdeploy:
      return json{{"input", text}, {"do_preprocess", false}, {"add_bos", false}}.dump();
  }
  return "{}";
}

Result<std::uint64_t> DecodeTokenizeCount(TokenizeDialect dialect, std::string_view body) {
  const json j = ParsePeerJson(body);
  if (j.is_discarded()) return NotThisDialect(dialect, "the answer is not JSON");
  std::optional<std::uint64_t> count;
  switch (dialect) {
    case TokenizeDialect::kVllm:
    case TokenizeDialect::kTrtLlm:
      if (j.is_object()) {
        count = Count(j, "count");
        if (!count) count = ArraySize(j, "tokens");
      }
      break;
    case TokenizeDialect::kLlamaCpp:
      if (j.is_object()) count = ArraySize(j, "tokens");
      break;
    case TokenizeDialect::kTgi:
      if (j.is_array()) count = j.size();
      break;
    case TokenizeDialect::kLmdeploy:
      if (j.is_object()) {
        count = Count(j, "length");
        if (!count) count = ArraySize(j, "input_ids");
      }
      break;
  }
  if (!count)
    return NotThisDialect(dialect, "the answer has no token count of this dialect's shape");
  return *count;
}

}  // namespace bakeoff::dialect
