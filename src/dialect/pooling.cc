// dialect/pooling.cc: embedding and rerank routes (contract in pooling.h).
#include "dialect/pooling.h"

#include <simdjson.h>

#include "core/check.h"
#include "core/json_text.h"
#include "dialect/json_payload.h"
#include "dialect/openai.h"

namespace bakeoff::dialect {
namespace {

namespace dom = simdjson::dom;
using internal::ParseObject;
using internal::PayloadError;
using internal::ReadCount;
using internal::Reason;

void AppendTexts(std::string& out, const std::vector<std::string>& texts) {
  out.push_back('[');
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendJsonString(out, texts[i]);
  }
  out.push_back(']');
}

// Counts the entries of `list`, checking each has the field the route promises.
Reason CountEntries(Api api, dom::element list, std::uint64_t& items) {
  dom::array entries;
  if (list.get_array().get(entries) != simdjson::SUCCESS) {
    return api == Api::kRerank ? "`results` is not an array" : "`data` is not an array";
  }
  for (const dom::element entry : entries) {
    dom::object object;
    if (entry.get_object().get(object) != simdjson::SUCCESS) return "an entry is not an object";
    if (api == Api::kEmbeddings) {
      dom::element vector;
      if (object["embedding"].get(vector) != simdjson::SUCCESS) return "an entry has no `embedding`";
      dom::array numbers;
      std::string_view base64;
      if (vector.get_array().get(numbers) == simdjson::SUCCESS) {
        for (const dom::element x : numbers) {
          if (!x.is_number()) return "an embedding holds something other than numbers";
        }
      } else if (vector.get_string().get(base64) != simdjson::SUCCESS) {  // encoding_format base64
        return "`embedding` is neither a list of numbers nor a base64 string";
      }
    } else {
      dom::element score;
      const bool has = object["relevance_score"].get(score) == simdjson::SUCCESS ||
                       object["score"].get(score) == simdjson::SUCCESS;  // TEI's /rerank
      if (!has || !score.is_number()) return "a result has no numeric `relevance_score`";
    }
    ++items;
  }
  return nullptr;
}

}  // namespace

std::string EncodePoolingRequestBody(const GenerationRequest& request) {
  BAKEOFF_CHECK(!ApiGenerates(request.api)) << ApiName(request.api) << " is a generation route";
  std::string out = "{\"model\":";
  AppendJsonString(out, request.model);
  if (request.api == Api::kRerank) {
    out.append(",\"query\":");
    AppendJsonString(out, request.prompt);
    out.append(",\"documents\":");
  } else {
    out.append(",\"input\":");
  }
  AppendTexts(out, request.inputs);
  out.push_back('}');
  return out;
}

Result<CompletionResponse> DecodePoolingResponse(Api api, std::string_view body) {
  const char* label = api == Api::kRerank ? "rerank answer" : "embeddings answer";
  dom::parser parser;
  const auto padded = std::make_unique<char[]>(body.size() + simdjson::SIMDJSON_PADDING);
  dom::object root;
  CompletionResponse response;
  if (Reason reason = ParseObject(parser, body, padded.get(), root, &response.invalid_utf8)) {
    return PayloadError(label, reason, body);
  }
  if (std::optional<std::string> message = DecodeErrorMessage(body)) {
    return MakeError(ErrorCode::kProtocol, std::string(label) + " is an error: " + *message);
  }
  bool listed = false;
  for (const dom::key_value_pair field : root) {
    if (field.key == (api == Api::kRerank ? "results" : "data")) {
      listed = true;
      if (Reason reason = CountEntries(api, field.value, response.items)) return PayloadError(label, reason, body);
    } else if (field.key == "usage" && !field.value.is_null()) {
      dom::object usage;
      if (field.value.get_object().get(usage) != simdjson::SUCCESS) return PayloadError(label, "`usage` is not an object", body);
      std::uint64_t tokens = 0;
      dom::element value;
      if ((usage["prompt_tokens"].get(value) == simdjson::SUCCESS || usage["total_tokens"].get(value) == simdjson::SUCCESS)) {
        if (!ReadCount(value, tokens)) return PayloadError(label, "a token count is not a count", body);
        response.usage = Usage{.prompt_tokens = tokens, .completion_tokens = 0, .cached_tokens = std::nullopt, .prompt_known = true};
      }
    }
  }
  if (!listed) return PayloadError(label, api == Api::kRerank ? "no `results`" : "no `data`", body);
  return response;
}

}  // namespace bakeoff::dialect
