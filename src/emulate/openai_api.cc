// emulate/openai_api.cc: request validation (nlohmann/json, off the per-token path) and
// prerendered response templates in vLLM's shapes (contract in openai_api.h).
#include "emulate/openai_api.h"

#include <iterator>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"

namespace bakeoff::emulate {

namespace {

using nlohmann::json;

std::string Quote(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The token ids of a completions `prompt`: a string, a one-element array of strings, an array of
// token ids, or a one-element array of token-id arrays. Token ids are used as given, modulo
// kVocabSize (the emulator's vocabulary), so any non-negative integer is accepted.
std::variant<std::vector<TokenId>, ApiError> PromptIds(const json& prompt) {
  if (prompt.is_string()) return TokenIds(prompt.get_ref<const std::string&>());
  if (prompt.is_array() && !prompt.empty()) {
    if (prompt.size() == 1 && prompt[0].is_string()) {
      return TokenIds(prompt[0].get_ref<const std::string&>());
    }
    const json* ids = &prompt;
    if (prompt.size() == 1 && prompt[0].is_array()) ids = &prompt[0];
    std::vector<TokenId> out;
    out.reserve(ids->size());
    for (const json& id : *ids) {
      if (id.is_number_unsigned()) {
        out.push_back(static_cast<TokenId>(id.get<std::uint64_t>() % kVocabSize));
      } else if (id.is_number_integer() && id.get<std::int64_t>() >= 0) {
        out.push_back(static_cast<TokenId>(static_cast<std::uint64_t>(id.get<std::int64_t>()) %
                                           kVocabSize));
      } else {
        return BadRequest(
            "prompt must be a string, an array of non-negative token ids, or one of either",
            "prompt");
      }
    }
    return out;
  }
  return BadRequest("prompt must be a non-empty string or array (batched prompts are not supported)",
                    "prompt");
}

// The text of chat `messages`: every message's content (a string, null, or an array of
// {"type":"text","text":...} parts; other part types add nothing) joined with "\n". Validates the
// shape.
std::variant<std::string, ApiError> MessagesText(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return BadRequest("messages must be a non-empty array", "messages");
  }
  std::string text;
  bool first = true;
  auto append = [&](const std::string& piece) {
    if (!first) text += '\n';
    first = false;
    text += piece;
  };
  for (const json& message : messages) {
    if (!message.is_object()) return BadRequest("each message must be an object", "messages");
    auto role = message.find("role");
    if (role == message.end() || !role->is_string()) {
      return BadRequest("each message must have a string role", "messages");
    }
    auto content = message.find("content");
    if (content == message.end() || content->is_null()) continue;
    if (content->is_string()) {
      append(content->get_ref<const std::string&>());
    } else if (content->is_array()) {
      for (const json& part : *content) {
        if (!part.is_object()) return BadRequest("content parts must be objects", "messages");
        auto part_text = part.find("text");
        if (part_text != part.end() && part_text->is_string()) {
          append(part_text->get_ref<const std::string&>());
        }
      }
    } else {
      return BadRequest("message content must be a string, an array or null", "messages");
    }
  }
  return text;
}

std::variant<json, ApiError> ParseObject(std::string_view body) {
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return BadRequest("request body is not valid JSON");
  if (!doc.is_object()) return BadRequest("request body must be a JSON object");
  return doc;
}

std::optional<ApiError> CheckModel(const json& doc, const ServedModel& served) {
  auto model = doc.find("model");
  if (model == doc.end() || model->is_null()) return std::nullopt;
  if (!model->is_string()) return BadRequest("model must be a string", "model");
  const std::string& name = model->get_ref<const std::string&>();
  if (name != served.name) {
    return NotFound(fmt::format("The model `{}` does not exist.", name), "model");
  }
  return std::nullopt;
}

// Reads an optional integer field; nullopt when absent or null.
std::variant<std::optional<std::int64_t>, ApiError> OptionalInt(const json& doc,
                                                                const char* name) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return std::optional<std::int64_t>{};
  if (it->is_number_unsigned()) {
    auto value = it->get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return BadRequest(fmt::format("{} is too large", name), name);
    }
    return std::optional<std::int64_t>(static_cast<std::int64_t>(value));
  }
  if (it->is_number_integer()) return std::optional<std::int64_t>(it->get<std::int64_t>());
  return BadRequest(fmt::format("{} must be an integer", name), name);
}

std::variant<bool, ApiError> OptionalBool(const json& doc, const char* name, bool fallback) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return BadRequest(fmt::format("{} must be a boolean", name), name);
  return it->get<bool>();
}

std::variant<GenerationSpec, ApiError> ParseGenerationDoc(Endpoint endpoint, const json& doc,
                                                          const ServedModel& served) {
  if (auto error = CheckModel(doc, served)) return *error;
  GenerationSpec spec;
  spec.endpoint = endpoint;

  // Prompt.
  if (endpoint == Endpoint::kChat) {
    auto messages = doc.find("messages");
    if (messages == doc.end()) return BadRequest("field required: messages", "messages");
    auto text = MessagesText(*messages);
    if (auto* error = std::get_if<ApiError>(&text)) return std::move(*error);
    spec.prompt = TokenIds(std::get<std::string>(text));
    if (spec.prompt.empty()) {
      return BadRequest("the messages contain no text, so the prompt would have no tokens",
                        "messages");
    }
  } else {
    auto prompt = doc.find("prompt");
    if (prompt == doc.end()) return BadRequest("field required: prompt", "prompt");
    auto ids = PromptIds(*prompt);
    if (auto* error = std::get_if<ApiError>(&ids)) return std::move(*error);
    spec.prompt = std::move(std::get<std::vector<TokenId>>(ids));
    if (spec.prompt.empty()) return BadRequest("prompt cannot be empty", "prompt");
  }
  spec.prompt_tokens = static_cast<std::int64_t>(spec.prompt.size());

  // Flags.
  auto stream = OptionalBool(doc, "stream", false);
  if (auto* error = std::get_if<ApiError>(&stream)) return std::move(*error);
  spec.stream = std::get<bool>(stream);
  auto ignore_eos = OptionalBool(doc, "ignore_eos", false);
  if (auto* error = std::get_if<ApiError>(&ignore_eos)) return std::move(*error);
  spec.ignore_eos = std::get<bool>(ignore_eos);
  auto options = doc.find("stream_options");
  if (options != doc.end() && !options->is_null()) {
    if (!spec.stream) {
      return BadRequest("Stream options can only be defined when `stream=True`.", "stream_options");
    }
    if (!options->is_object()) return BadRequest("stream_options must be an object", "stream_options");
    auto usage = OptionalBool(*options, "include_usage", false);
    if (auto* error = std::get_if<ApiError>(&usage)) return std::move(*error);
    spec.include_usage = std::get<bool>(usage);
  }

  // Integers.
  auto n = OptionalInt(doc, "n");
  if (auto* error = std::get_if<ApiError>(&n)) return std::move(*error);
  if (auto value = std::get<std::optional<std::int64_t>>(n); value && *value != 1) {
    return BadRequest("the emulated engine supports only n = 1", "n");
  }
  auto seed = OptionalInt(doc, "seed");
  if (auto* error = std::get_if<ApiError>(&seed)) return std::move(*error);
  spec.seed = static_cast<std::uint64_t>(std::get<std::optional<std::int64_t>>(seed).value_or(0));
  auto min_tokens = OptionalInt(doc, "min_tokens");
  if (auto* error = std::get_if<ApiError>(&min_tokens)) return std::move(*error);
  spec.min_tokens = std::get<std::optional<std::int64_t>>(min_tokens).value_or(0);
  if (spec.min_tokens < 0) return BadRequest("min_tokens must be >= 0", "min_tokens");

  std::optional<std::int64_t> max_tokens;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    auto value = OptionalInt(doc, name);
    if (auto* error = std::get_if<ApiError>(&value)) return std::move(*error);
    if (auto v = std::get<std::optional<std::int64_t>>(value)) {
      max_tokens = v;
      break;
    }
  }

  // Limits (vLLM's messages, engine-interfaces.md 1.7).
  const std::int64_t limit = served.max_model_len;
  if (spec.prompt_tokens >= limit) {
    return BadRequest(fmt::format("This model's maximum context length is {} tokens. However, your "
                                  "request has {} input tokens. Please reduce the length of the "
                                  "input messages.",
                                  limit, spec.prompt_tokens),
                      endpoint == Endpoint::kChat ? "messages" : "prompt");
  }
  if (!max_tokens) {
    max_tokens = endpoint == Endpoint::kChat ? limit - spec.prompt_tokens : 16;
  }
  if (*max_tokens < 1) {
    return BadRequest(fmt::format("max_tokens must be at least 1, got {}.", *max_tokens),
                      "max_tokens");
  }
  if (*max_tokens > limit - spec.prompt_tokens) {
    return BadRequest(
        fmt::format("'max_tokens' or 'max_completion_tokens' is too large: {}. This model's maximum "
                    "context length is {} tokens and your request has {} input tokens ({} > {} - {}).",
                    *max_tokens, limit, spec.prompt_tokens, *max_tokens, limit, spec.prompt_tokens),
        "max_tokens");
  }
  spec.max_tokens = *max_tokens;
  if (spec.min_tokens > spec.max_tokens) {
    return BadRequest(fmt::format("min_tokens ({}) must be less than or equal to max_tokens ({})",
                                  spec.min_tokens, spec.max_tokens),
                      "min_tokens");
  }
  return spec;
}

}  // namespace

ApiError BadRequest(std::string message, std::string param) {
  return ApiError{400, "BadRequestError", std::move(message), std::move(param)};
}

ApiError NotFound(std::string message, std::string param) {
  return ApiError{404, "NotFoundError", std::move(message), std::move(param)};
}

std::string RenderError(const ApiError& error) {
  json body = {{"error",
                {{"message", error.message},
                 {"type", error.type},
                 {"param", error.param.empty() ? json(nullptr) : json(error.param)},
                 {"code", error.status}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<GenerationSpec, ApiError> ParseGenerationRequest(Endpoint endpoint,
                                                              std::string_view body,
                                                              const ServedModel& served) {
  try {
    auto doc = ParseObject(body);
    if (auto* error = std::get_if<ApiError>(&doc)) return std::move(*error);
    return ParseGenerationDoc(endpoint, std::get<json>(doc), served);
  } catch (const json::exception& e) {  // a type we did not check; never let it escape
    return BadRequest(fmt::format("invalid request: {}", e.what()));
  }
}

std::variant<std::string, ApiError> RenderTokenizeResponse(std::string_view body,
                                                           const ServedModel& served) {
  try {
    auto parsed = ParseObject(body);
    if (auto* error = std::get_if<ApiError>(&parsed)) return std::move(*error);
    const json& doc = std::get<json>(parsed);
    if (auto error = CheckModel(doc, served)) return *error;
    std::string text;
    if (auto prompt = doc.find("prompt"); prompt != doc.end()) {
      if (!prompt->is_string()) return BadRequest("prompt must be a string", "prompt");
      text = prompt->get<std::string>();
    } else if (auto messages = doc.find("messages"); messages != doc.end()) {
      auto joined = MessagesText(*messages);
      if (auto* error = std::get_if<ApiError>(&joined)) return std::move(*error);
      text = std::move(std::get<std::string>(joined));
    } else {
      return BadRequest("field required: prompt or messages", "prompt");
    }
    std::vector<std::uint32_t> ids = TokenIds(text);
    json response = {{"count", ids.size()}, {"max_model_len", served.max_model_len}, {"tokens", ids}};
    return response.dump();
  } catch (const json::exception& e) {
    return BadRequest(fmt::format("invalid request: {}", e.what()));
  }
}

std::string RenderModelsResponse(const ServedModel& served, std::int64_t created_unix_s) {
  json card = {{"id", served.name},
               {"object", "model"},
               {"created", created_unix_s},
               {"owned_by", "bakeoff-emulated"},
               {"root", served.name},
               {"parent", nullptr},
               {"max_model_len", served.max_model_len},
               {"permission", json::array()}};
  json body = {{"object", "list"}, {"data", json::array({card})}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* FinishReasonName(FinishReason reason) {
  return reason == FinishReason::kStop ? "stop" : "length";
}

// Event layout (vLLM, engine-interfaces.md 1.2):
//   chat:        data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,
//                 "choices":[{"index":0,"delta":{"content":"<word> "},"logprobs":null,
//                 "finish_reason":null}]}
//   completions: data: {"id":..,"object":"text_completion","created":..,"model":..,
//                 "choices":[{"index":0,"text":"<word> ","logprobs":null,"finish_reason":null,
//                 "stop_reason":null}]}
ResponseRenderer::ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                                   std::uint64_t request_number, std::int64_t created_unix_s)
    : spec_(spec), model_json_(Quote(served.name)), created_(created_unix_s) {
  const bool chat = spec.endpoint == Endpoint::kChat;
  id_ = fmt::format("{}{:016x}", chat ? "chatcmpl-" : "cmpl-", request_number);
  head_ = fmt::format(R"(data: {{"id":"{}","object":"{}","created":{},"model":{},"choices":)", id_,
                      chat ? "chat.completion.chunk" : "text_completion", created_, model_json_);
  token_prefix_ = head_ + (chat ? R"([{"index":0,"delta":{"content":")" : R"([{"index":0,"text":")");
}

void ResponseRenderer::AppendRoleEvent(std::string& out) const {
  if (spec_.endpoint != Endpoint::kChat) return;
  out += head_;
  out += R"([{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})";
  out += "\n\n";
}

void ResponseRenderer::AppendTokenEvent(std::string& out, std::int64_t index,
                                        std::optional<FinishReason> finish) const {
  AppendTokensEvent(out, index, 1, finish);
}

void ResponseRenderer::AppendTokensEvent(std::string& out, std::int64_t first, std::int64_t count,
                                         std::optional<FinishReason> finish) const {
  static constexpr std::string_view kChatSuffix[3] = {
      "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
      "\"},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
      "\"},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n"};
  static constexpr std::string_view kTextSuffix[3] = {
      "\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}\n\n",
      "\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n",
      "\",\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n"};
  const int which = !finish ? 0 : (*finish == FinishReason::kLength ? 1 : 2);
  out += token_prefix_;
  for (std::int64_t i = first; i < first + count; ++i) {
    out += OutputPiece(spec_.seed, static_cast<std::uint64_t>(i));
  }
  out += spec_.endpoint == Endpoint::kChat ? kChatSuffix[which] : kTextSuffix[which];
}

namespace {

// `"usage":{...}` in vLLM's field order.
void AppendUsage(std::string& out, std::int64_t prompt_tokens, std::int64_t completion_tokens,
                 std::optional<std::int64_t> cached_tokens) {
  fmt::format_to(std::back_inserter(out),
                 R"("usage":{{"prompt_tokens":{},"total_tokens":{},"completion_tokens":{})",
                 prompt_tokens, prompt_tokens + completion_tokens, completion_tokens);
  if (cached_tokens) {
    fmt::format_to(std::back_inserter(out), R"(,"prompt_tokens_details":{{"cached_tokens":{}}})",
                   *cached_tokens);
  }
  out += '}';
}

}  // namespace

void ResponseRenderer::AppendUsageEvent(std::string& out, std::int64_t completion_tokens,
                                        std::optional<std::int64_t> cached_tokens) const {
  out += head_;
  out += "[],";
  AppendUsage(out, spec_.prompt_tokens, completion_tokens, cached_tokens);
  out += "}\n\n";
}

void ResponseRenderer::AppendDone(std::string& out) { out += "data: [DONE]\n\n"; }

void ResponseRenderer::AppendErrorEvent(std::string& out, const ApiError& error) {
  out += "data: ";
  out += RenderError(error);
  out += "\n\n";
}

std::string ResponseRenderer::RenderFullBody(std::int64_t completion_tokens, FinishReason finish,
                                             std::optional<std::int64_t> cached_tokens) const {
  const bool chat = spec_.endpoint == Endpoint::kChat;
  std::string text;
  for (std::int64_t i = 0; i < completion_tokens; ++i) {
    text += OutputPiece(spec_.seed, static_cast<std::uint64_t>(i));
  }
  std::string body = fmt::format(R"({{"id":"{}","object":"{}","created":{},"model":{},"choices":[)",
                                 id_, chat ? "chat.completion" : "text_completion", created_,
                                 model_json_);
  if (chat) {
    fmt::format_to(std::back_inserter(body),
                   R"({{"index":0,"message":{{"role":"assistant","content":"{}"}},"logprobs":null,"finish_reason":"{}"}}])",
                   text, FinishReasonName(finish));
  } else {
    fmt::format_to(std::back_inserter(body),
                   R"({{"index":0,"text":"{}","logprobs":null,"finish_reason":"{}","stop_reason":null}}])",
                   text, FinishReasonName(finish));
  }
  body += ',';
  AppendUsage(body, spec_.prompt_tokens, completion_tokens, cached_tokens);
  body += '}';
  return body;
}

}  // namespace bakeoff::emulate
