// emulate/openai_api.cc: request validation (nlohmann/json, off the per-token path) and
// prerendered response templates in vLLM's shapes (contract in openai_api.h).
#include "emulate/openai_api.h"

#include <algorithm>
#include <ctime>
#include <iterator>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulate/native_api.h"
#include "emulate/pooling_api.h"
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

std::optional<ApiError> CheckModel(const json& doc, const ServedModel& served, GenerationSpec& spec) {
  auto model = doc.find("model");
  if (model == doc.end() || model->is_null()) return std::nullopt;
  if (!model->is_string()) return BadRequest("model must be a string", "model");
  const std::string& name = model->get_ref<const std::string&>();
  if (name == served.name) return std::nullopt;
  const auto adapter = std::find(served.lora_adapters.begin(), served.lora_adapters.end(), name);
  if (adapter == served.lora_adapters.end()) {
    return NotFound(fmt::format("The model `{}` does not exist.", name), "model");
  }
  spec.lora = static_cast<std::uint32_t>(adapter - served.lora_adapters.begin()) + 1;
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

// The text of the last message with role "user": its string content, or its text parts joined
// with "\n"; nullopt when there is none. REQUIRES: MessagesText(messages) succeeded.
std::optional<std::string> LastUserText(const json& messages) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if ((*it)["role"] != "user") continue;
    auto content = it->find("content");
    if (content == it->end() || content->is_null()) return std::string();
    if (content->is_string()) return content->get<std::string>();
    std::string text;
    bool first = true;
    for (const json& part : *content) {
      auto part_text = part.find("text");
      if (part_text == part.end() || !part_text->is_string()) continue;
      if (!first) text += '\n';
      first = false;
      text += part_text->get_ref<const std::string&>();
    }
    return text;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const json& doc, GenerationSpec& spec) {
  auto stop = doc.find("stop");
  if (stop == doc.end() || stop->is_null()) return std::nullopt;
  auto add = [&](const json& value) {
    if (!value.is_string()) return false;
    if (!value.get_ref<const std::string&>().empty()) spec.stop.push_back(value.get<std::string>());
    return true;
  };
  if (add(*stop)) return std::nullopt;
  if (stop->is_array()) {
    for (const json& value : *stop) {
      if (!add(value)) return BadRequest("stop must be a string or a list of strings", "stop");
    }
    return std::nullopt;
  }
  return BadRequest("stop must be a string or a list of strings", "stop");
}

std::optional<ApiError> ParseLogprobs(Endpoint endpoint, const json& doc, GenerationSpec& spec) {
  auto check = [](std::int64_t k, const char* name) -> std::optional<ApiError> {
    if (k < 0 || k > kMaxLogprobs) {
      return BadRequest(fmt::format("{} must be in [0, {}], got {}", name, kMaxLogprobs, k), name);
    }
    return std::nullopt;
  };
  if (endpoint == Endpoint::kCompletions) {
    auto k = OptionalInt(doc, "logprobs");
    if (auto* error = std::get_if<ApiError>(&k)) return std::move(*error);
    spec.logprobs = std::get<std::optional<std::int64_t>>(k);
    return spec.logprobs ? check(*spec.logprobs, "logprobs") : std::nullopt;
  }
  auto wanted = OptionalBool(doc, "logprobs", false);
  if (auto* error = std::get_if<ApiError>(&wanted)) return std::move(*error);
  auto top = OptionalInt(doc, "top_logprobs");
  if (auto* error = std::get_if<ApiError>(&top)) return std::move(*error);
  const std::optional<std::int64_t> k = std::get<std::optional<std::int64_t>>(top);
  if (k && !std::get<bool>(wanted) && *k > 0) {
    return BadRequest("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  if (!std::get<bool>(wanted)) return std::nullopt;
  spec.logprobs = k.value_or(0);
  return check(*spec.logprobs, "top_logprobs");
}

std::optional<ApiError> ParseResponseFormat(const json& doc, GenerationSpec& spec) {
  auto format = doc.find("response_format");
  if (format == doc.end() || format->is_null()) return std::nullopt;
  auto bad = [](std::string message) { return BadRequest(std::move(message), "response_format"); };
  if (!format->is_object()) return bad("response_format must be an object");
  auto type = format->find("type");
  if (type == format->end() || !type->is_string())
    return bad("response_format.type must be a string");
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "text") return std::nullopt;
  if (name == "json_object") {
    // Any JSON object is valid; the words of the seed make it read like an answer.
    std::string words;
    for (std::uint64_t i = 0; i < 4; ++i) words += OutputPiece(spec.seed, i);
    words.pop_back();
    spec.json_text = json{{"text", words}}.dump();
    return std::nullopt;
  }
  if (name != "json_schema") {
    return bad(fmt::format(
        "response_format.type must be text, json_object or json_schema, got '{}'", name));
  }
  auto schema_spec = format->find("json_schema");
  if (schema_spec == format->end() || !schema_spec->is_object()) {
    return bad("response_format.json_schema must be an object");
  }
  auto schema = schema_spec->find("schema");
  if (schema == schema_spec->end() || !schema->is_object()) {
    return bad("response_format.json_schema.schema must be an object");
  }
  spec.json_text = MinimalJsonInstance(*schema).dump();
  return std::nullopt;
}

// vLLM's structured_outputs (from v0.12): {"json": schema} or {"choice": [...]}; a regex or a
// grammar the emulator cannot generate from is refused rather than answered unconstrained.
std::optional<ApiError> ParseStructuredOutputs(const json& doc, GenerationSpec& spec) {
  auto outputs = doc.find("structured_outputs");
  if (outputs == doc.end() || outputs->is_null()) return std::nullopt;
  auto bad = [](std::string message) { return BadRequest(std::move(message), "structured_outputs"); };
  if (!outputs->is_object()) return bad("structured_outputs must be an object");
  if (auto schema = outputs->find("json"); schema != outputs->end()) {
    const json parsed = schema->is_string() ? json::parse(schema->get<std::string>(), nullptr, false) : *schema;
    if (!parsed.is_object()) return bad("structured_outputs.json must be a JSON schema");
    spec.json_text = MinimalJsonInstance(parsed).dump();
  } else if (auto choice = outputs->find("choice"); choice != outputs->end()) {
    if (!choice->is_array() || choice->empty() || !(*choice)[0].is_string()) {
      return bad("structured_outputs.choice must be a non-empty list of strings");
    }
    spec.choice_text = (*choice)[0].get<std::string>();
  } else {
    return bad("the emulated engine generates only from structured_outputs.json or .choice (not from a regex or "
               "a grammar)");
  }
  return std::nullopt;
}

// tools + tool_choice (chat): decides spec.tool_call (see ParseGenerationRequest).
std::optional<ApiError> ParseTools(const json& doc, const json& messages, GenerationSpec& spec) {
  auto tools = doc.find("tools");
  auto choice = doc.find("tool_choice");
  const bool have_tools = tools != doc.end() && !tools->is_null();
  const bool have_choice = choice != doc.end() && !choice->is_null();
  if (!have_tools) {
    if (have_choice && !(choice->is_string() && *choice == "none")) {
      return BadRequest("When using `tool_choice`, `tools` must be set.", "tool_choice");
    }
    return std::nullopt;
  }
  if (!tools->is_array()) return BadRequest("tools must be an array", "tools");
  std::vector<const json*> functions;
  for (const json& tool : *tools) {
    if (!tool.is_object() || tool.value("type", "") != "function") {
      return BadRequest("each tool must be an object with type \"function\"", "tools");
    }
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      return BadRequest("each tool must have a function with a string name", "tools");
    }
    auto parameters = function->find("parameters");
    if (parameters != function->end() && !parameters->is_null() && !parameters->is_object()) {
      return BadRequest("a tool's function.parameters must be an object", "tools");
    }
    functions.push_back(&*function);
  }
  const json* chosen = nullptr;
  std::string mode = "auto";
  if (have_choice) {
    if (choice->is_string()) {
      mode = choice->get<std::string>();
      if (mode != "none" && mode != "auto" && mode != "required") {
        return BadRequest("tool_choice must be none, auto, required or a named function",
                          "tool_choice");
      }
    } else if (choice->is_object() && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].contains("name") &&
               (*choice)["function"]["name"].is_string()) {
      mode = "named";
      const std::string& name = (*choice)["function"]["name"].get_ref<const std::string&>();
      for (const json* function : functions) {
        if ((*function)["name"] == name) chosen = function;
      }
      if (chosen == nullptr) {
        return BadRequest(
            fmt::format("tool_choice names the function '{}', which is not in tools", name),
            "tool_choice");
      }
    } else {
      return BadRequest("tool_choice must be none, auto, required or a named function",
                        "tool_choice");
    }
  }
  if (functions.empty() || mode == "none") return std::nullopt;
  if (mode == "required") chosen = functions.front();
  if (mode == "auto") {
    const std::string last_user = LastUserText(messages).value_or("");
    for (const json* function : functions) {
      if (last_user.find((*function)["name"].get_ref<const std::string&>()) != std::string::npos) {
        chosen = function;
        break;
      }
    }
  }
  if (chosen == nullptr) return std::nullopt;
  auto parameters = chosen->find("parameters");
  json arguments = parameters == chosen->end() || parameters->is_null()
                       ? json::object()
                       : MinimalJsonInstance(*parameters);
  spec.tool_call = ToolCallSpec{(*chosen)["name"].get<std::string>(), arguments.dump()};
  return std::nullopt;
}

std::variant<GenerationSpec, ApiError> ParseGenerationDoc(Endpoint endpoint, const json& doc,
                                                          const ServedModel& served) {
  GenerationSpec spec;
  if (auto error = CheckModel(doc, served, spec)) return *error;
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
    spec.answer_key = LastUserText(*messages);
  } else {
    auto prompt = doc.find("prompt");
    if (prompt == doc.end()) return BadRequest("field required: prompt", "prompt");
    auto ids = PromptIds(*prompt);
    if (auto* error = std::get_if<ApiError>(&ids)) return std::move(*error);
    spec.prompt = std::move(std::get<std::vector<TokenId>>(ids));
    if (spec.prompt.empty()) return BadRequest("prompt cannot be empty", "prompt");
    if (prompt->is_string()) {
      spec.answer_key = prompt->get<std::string>();
    } else if (prompt->size() == 1 && (*prompt)[0].is_string()) {
      spec.answer_key = (*prompt)[0].get<std::string>();
    }
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
  spec.n = std::get<std::optional<std::int64_t>>(n).value_or(1);
  if (spec.n < 1 || spec.n > kMaxChoices) {
    return BadRequest(fmt::format("n must be in [1, {}], got {}", kMaxChoices, spec.n), "n");
  }
  auto seed = OptionalInt(doc, "seed");
  if (auto* error = std::get_if<ApiError>(&seed)) return std::move(*error);
  spec.seed = static_cast<std::uint64_t>(std::get<std::optional<std::int64_t>>(seed).value_or(0));
  if (auto error = ParseStop(doc, spec)) return *error;
  if (auto error = ParseLogprobs(endpoint, doc, spec)) return *error;
  if (auto error = ParseResponseFormat(doc, spec)) return *error;
  if (auto error = ParseStructuredOutputs(doc, spec)) return *error;
  if (endpoint == Endpoint::kChat) {
    if (auto error = ParseTools(doc, doc["messages"], spec)) return *error;
  }
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
  if (served.truncate_prompts) {
    // Keep the prompt's last tokens so that max_tokens (16 when absent) still fits.
    const std::int64_t room = max_tokens.value_or(16);
    const bool fits = max_tokens || endpoint == Endpoint::kCompletions
                          ? spec.prompt_tokens + room <= limit
                          : spec.prompt_tokens < limit;  // chat's default max_tokens adapts
    const std::int64_t keep = std::max<std::int64_t>(1, limit - room);
    if (!fits && spec.prompt_tokens > keep) {
      spec.prompt.erase(spec.prompt.begin(), spec.prompt.end() - keep);
      spec.prompt_tokens = keep;
    }
  }
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
    GenerationSpec named;  // the adapter a tokenize request names does not change its count
    if (auto error = CheckModel(doc, served, named)) return *error;
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
  for (const std::string& adapter : served.lora_adapters) {
    json lora = card;
    lora["id"] = adapter;
    lora["parent"] = served.name;
    body["data"].push_back(std::move(lora));
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kLength:
      break;
  }
  return "length";
}

namespace {

// Ollama's created_at: the request's second in RFC 3339, UTC.
std::string CreatedAt(std::int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// What every line (Ollama) or event (Triton) of a native stream starts with; "" for TGI, whose
// events differ from the first byte on.
std::string NativeHead(Wire wire, const std::string& model_json, std::int64_t created) {
  switch (wire) {
    case Wire::kOllamaGenerate:
    case Wire::kOllamaChat: return fmt::format(R"({{"model":{},"created_at":"{}",)", model_json, CreatedAt(created));
    case Wire::kTriton:
    case Wire::kKserve: return fmt::format(R"(data: {{"model_name":{},"model_version":"1",)", model_json);
    case Wire::kTgi:
    case Wire::kEmbeddings:
    case Wire::kRerank:
    case Wire::kOpenAi: break;
  }
  return {};
}

std::vector<ChoiceText> WordChoices(const GenerationSpec& spec) {
  std::vector<ChoiceText> choices;
  for (std::int64_t c = 0; c < spec.n; ++c) {
    choices.push_back(ChoiceText::Words(spec.seed + static_cast<std::uint64_t>(c)));
  }
  return choices;
}

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

// `[b1,b2,...]`: a token's UTF-8 bytes (OpenAI's `bytes`).
void AppendBytes(std::string& out, std::string_view piece) {
  out += '[';
  for (std::size_t i = 0; i < piece.size(); ++i) {
    if (i > 0) out += ',';
    fmt::format_to(std::back_inserter(out), "{}", static_cast<unsigned char>(piece[i]));
  }
  out += ']';
}

// `{"token":"..","logprob":x,"bytes":[..]` (left open for top_logprobs).
void AppendChatLogprobHead(std::string& out, std::string_view piece, double logprob) {
  out += R"({"token":")";
  out += JsonEscape(piece);
  fmt::format_to(std::back_inserter(out), R"(","logprob":{},"bytes":)", logprob);
  AppendBytes(out, piece);
}

}  // namespace

// Event layout (vLLM, engine-interfaces.md 1.2):
//   chat:        data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,
//                 "choices":[{"index":0,"delta":{"content":"<word> "},"logprobs":null,
//                 "finish_reason":null}]}
//   completions: data: {"id":..,"object":"text_completion","created":..,"model":..,
//                 "choices":[{"index":0,"text":"<word> ","logprobs":null,"finish_reason":null,
//                 "stop_reason":null}]}
//   tool calls:  "delta":{"tool_calls":[{"index":0,"function":{"arguments":"<piece>"}}]}, the
//                first one preceded by an event with id, type and function name.
ResponseRenderer::ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                                   std::uint64_t request_number, std::int64_t created_unix_s)
    : ResponseRenderer(spec, served, request_number, created_unix_s, WordChoices(spec)) {}

ResponseRenderer::ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                                   std::uint64_t request_number, std::int64_t created_unix_s,
                                   std::vector<ChoiceText> choices)
    : spec_(spec),
      choices_(std::move(choices)),
      model_json_(Quote(served.name)),
      created_(created_unix_s) {
  const bool chat = spec.endpoint == Endpoint::kChat;
  id_ = fmt::format("{}{:016x}", chat ? "chatcmpl-" : "cmpl-", request_number);
  for (const ChoiceText& text : choices_) {
    const auto natural = text.natural_tokens();
    const bool natural_end = natural && *natural <= spec_.max_tokens;
    end_tokens_.push_back(natural_end ? *natural : spec_.max_tokens);
    end_reasons_.push_back(natural_end ? text.natural_finish() : FinishReason::kLength);
  }
  if (spec_.wire != Wire::kOpenAi) {
    head_ = NativeHead(spec_.wire, model_json_, created_);
    return;
  }
  head_ = fmt::format(R"(data: {{"id":"{}","object":"{}","created":{},"model":{},"choices":)", id_,
                      chat ? "chat.completion.chunk" : "text_completion", created_, model_json_);
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    if (!chat) {
      token_prefix_.push_back(head_ + fmt::format(R"([{{"index":{},"text":")", c));
    } else if (spec_.tool_call) {
      token_prefix_.push_back(
          head_ +
          fmt::format(
              R"([{{"index":{},"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":")",
              c));
    } else {
      token_prefix_.push_back(head_ + fmt::format(R"([{{"index":{},"delta":{{"content":")", c));
    }
  }
}

std::int64_t ResponseRenderer::end_tokens(std::int64_t choice) const {
  return end_tokens_[static_cast<std::size_t>(choice)];
}

FinishReason ResponseRenderer::end_reason(std::int64_t choice) const {
  return end_reasons_[static_cast<std::size_t>(choice)];
}

std::int64_t ResponseRenderer::engine_tokens() const {
  std::int64_t longest = 1;
  for (std::int64_t c = 0; c < num_choices(); ++c) longest = std::max(longest, end_tokens(c));
  return longest;
}

std::int64_t ResponseRenderer::CompletionTokens(std::int64_t emitted) const {
  std::int64_t total = 0;
  for (std::int64_t c = 0; c < num_choices(); ++c) total += std::min(emitted, end_tokens(c));
  return total;
}

std::optional<FinishReason> ResponseRenderer::ChoiceFinish(
    std::int64_t choice, std::int64_t emitted, std::optional<FinishReason> engine_finish) const {
  if (emitted >= end_tokens(choice)) return end_reason(choice);
  return engine_finish;
}

std::string ResponseRenderer::ToolCallId(std::int64_t choice) const {
  return fmt::format("chatcmpl-tool-{}-{}", id_.substr(id_.find('-') + 1), choice);
}

void ResponseRenderer::AppendRoleEvent(std::string& out) const {
  if (spec_.endpoint != Endpoint::kChat || spec_.wire != Wire::kOpenAi) return;
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    out += head_;
    fmt::format_to(
        std::back_inserter(out),
        R"([{{"index":{},"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}})",
        c);
    out += "\n\n";
  }
}

void ResponseRenderer::AppendTokenEvent(std::string& out, std::int64_t index,
                                        std::optional<FinishReason> finish) const {
  AppendTokensEvent(out, index, 1, finish);
}

void ResponseRenderer::AppendTokensEvent(std::string& out, std::int64_t first, std::int64_t count,
                                         std::optional<FinishReason> finish) const {
  std::int64_t offset = 0;
  if (spec_.logprobs && spec_.endpoint == Endpoint::kCompletions) {
    for (std::int64_t i = 0; i < first; ++i) {
      offset += static_cast<std::int64_t>(choices_[0].Piece(i).size());
    }
  }
  AppendChoiceEvent(out, 0, first, count, finish, offset);
}

// Chat: {"content":[{"token","logprob","bytes","top_logprobs":[...]}...]}; completions:
// {"text_offset":[..],"token_logprobs":[..],"tokens":[..],"top_logprobs":[{token: logprob}..]}.
// The sampled token is the most likely one; its alternatives are other words.
void ResponseRenderer::AppendLogprobs(std::string& out, std::int64_t choice, std::int64_t first,
                                      std::int64_t count, std::int64_t text_offset) const {
  const ChoiceText& text = choices_[static_cast<std::size_t>(choice)];
  const std::uint64_t seed = spec_.seed + static_cast<std::uint64_t>(choice);
  const std::int64_t k = *spec_.logprobs;
  if (spec_.endpoint == Endpoint::kChat) {
    out += R"({"content":[)";
    for (std::int64_t i = first; i < first + count; ++i) {
      if (i > first) out += ',';
      const std::string_view piece = text.Piece(i);
      AppendChatLogprobHead(out, piece, TokenLogprob(seed, i));
      out += R"(,"top_logprobs":[)";
      for (std::int64_t j = 0; j < k; ++j) {
        if (j > 0) out += ',';
        if (j == 0) {
          AppendChatLogprobHead(out, piece, TokenLogprob(seed, i));
        } else {
          AppendChatLogprobHead(out, AlternativePiece(piece, seed, i, j),
                                AlternativeLogprob(seed, i, j));
        }
        out += '}';
      }
      out += "]}";
    }
    out += "]}";
    return;
  }
  std::string offsets, values, tokens, tops;
  std::int64_t offset = text_offset;
  for (std::int64_t i = first; i < first + count; ++i) {
    const char* sep = i > first ? "," : "";
    const std::string_view piece = text.Piece(i);
    fmt::format_to(std::back_inserter(offsets), "{}{}", sep, offset);
    fmt::format_to(std::back_inserter(values), "{}{}", sep, TokenLogprob(seed, i));
    fmt::format_to(std::back_inserter(tokens), "{}\"{}\"", sep, text.JsonPiece(i));
    fmt::format_to(std::back_inserter(tops), "{}{{\"{}\":{}", sep, text.JsonPiece(i),
                   TokenLogprob(seed, i));
    for (std::int64_t j = 1; j < k; ++j) {
      fmt::format_to(std::back_inserter(tops), ",\"{}\":{}",
                     JsonEscape(AlternativePiece(piece, seed, i, j)),
                     AlternativeLogprob(seed, i, j));
    }
    tops += '}';
    offset += static_cast<std::int64_t>(piece.size());
  }
  fmt::format_to(
      std::back_inserter(out),
      R"({{"text_offset":[{}],"token_logprobs":[{}],"tokens":[{}],"top_logprobs":[{}]}})", offsets,
      values, tokens, tops);
}

void ResponseRenderer::AppendChoiceEvent(std::string& out, std::int64_t choice, std::int64_t first,
                                         std::int64_t count, std::optional<FinishReason> finish,
                                         std::int64_t text_offset) const {
  static constexpr std::string_view kChatSuffix[3] = {
      "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
      "\"},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
      "\"},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n"};
  static constexpr std::string_view kTextSuffix[3] = {
      "\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}\n\n",
      "\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n",
      "\",\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n"};
  if (spec_.wire != Wire::kOpenAi) return AppendNativeEvent(out, first, count, finish);
  const bool chat = spec_.endpoint == Endpoint::kChat;
  const ChoiceText& text = choices_[static_cast<std::size_t>(choice)];
  if (spec_.tool_call && chat && first == 0) {
    out += head_;
    fmt::format_to(
        std::back_inserter(out),
        R"([{{"index":{},"delta":{{"tool_calls":[{{"index":0,"id":"{}","type":"function","function":{{"name":"{}","arguments":""}}}}]}},"logprobs":null,"finish_reason":null}}]}})",
        choice, ToolCallId(choice), JsonEscape(spec_.tool_call->name));
    out += "\n\n";
  }
  out += token_prefix_[static_cast<std::size_t>(choice)];
  for (std::int64_t i = first; i < first + count; ++i) out += text.JsonPiece(i);
  if (!spec_.logprobs && !spec_.tool_call && (!finish || *finish != FinishReason::kToolCalls)) {
    const int which = !finish ? 0 : (*finish == FinishReason::kLength ? 1 : 2);
    out += chat ? kChatSuffix[which] : kTextSuffix[which];
    return;
  }
  out += chat ? (spec_.tool_call ? "\"}}]}," : "\"},") : "\",";
  out += "\"logprobs\":";
  if (spec_.logprobs && count > 0) {
    AppendLogprobs(out, choice, first, count, text_offset);
  } else {
    out += "null";
  }
  out += ",\"finish_reason\":";
  if (finish) {
    fmt::format_to(std::back_inserter(out), "\"{}\"", FinishReasonName(*finish));
  } else {
    out += "null";
  }
  out += chat ? "}]}\n\n" : ",\"stop_reason\":null}]}\n\n";
}

bool ResponseRenderer::AppendProgress(std::string& out, std::vector<ChoiceProgress>& progress,
                                      std::int64_t emitted,
                                      std::optional<FinishReason> engine_finish,
                                      std::int64_t per_event, bool flush) const {
  bool all_done = true;
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    ChoiceProgress& p = progress[static_cast<std::size_t>(c)];
    if (p.done) continue;
    const std::int64_t available = std::min(emitted, end_tokens(c));
    const std::optional<FinishReason> finish = ChoiceFinish(c, emitted, engine_finish);
    const std::int64_t fresh = available - p.sent;
    if (finish || (fresh > 0 && (flush || fresh >= per_event))) {
      AppendChoiceEvent(out, c, p.sent, fresh, finish, p.sent_bytes);
      if (spec_.logprobs && spec_.endpoint == Endpoint::kCompletions) {
        const ChoiceText& text = choices_[static_cast<std::size_t>(c)];
        for (std::int64_t i = p.sent; i < available; ++i) {
          p.sent_bytes += static_cast<std::int64_t>(text.Piece(i).size());
        }
      }
      p.sent = available;
      p.done = finish.has_value();
    }
    all_done = all_done && p.done;
  }
  return all_done;
}

void ResponseRenderer::AppendUsageEvent(std::string& out, std::int64_t completion_tokens,
                                        std::optional<std::int64_t> cached_tokens) const {
  if (spec_.wire == Wire::kOllamaGenerate || spec_.wire == Wire::kOllamaChat) {
    // The counts close the stream; an answer shorter than its end came from an EOS draw.
    const FinishReason finish = completion_tokens >= end_tokens(0) ? end_reason(0) : FinishReason::kStop;
    out += head_;
    out += spec_.wire == Wire::kOllamaChat ? R"("message":{"role":"assistant","content":""},)" : R"("response":"",)";
    fmt::format_to(std::back_inserter(out),
                   R"("done":true,"done_reason":"{}","prompt_eval_count":{},"eval_count":{}}})" "\n",
                   FinishReasonName(finish), spec_.prompt_tokens, completion_tokens);
    return;
  }
  if (spec_.wire != Wire::kOpenAi) return;
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

void ResponseRenderer::AppendStreamEnd(std::string& out) const {
  if (spec_.wire == Wire::kOpenAi) AppendDone(out);
}

void ResponseRenderer::AppendStreamError(std::string& out, const ApiError& error) const {
  switch (spec_.wire) {
    case Wire::kOpenAi:
    case Wire::kEmbeddings:  // never streamed
    case Wire::kRerank: return AppendErrorEvent(out, error);
    case Wire::kOllamaGenerate:
    case Wire::kOllamaChat:
      out += RenderErrorFor(spec_.wire, error);
      out += '\n';
      return;
    case Wire::kTgi:  // TGI writes `data:` without a space [7.2]
      out += "data:";
      out += RenderErrorFor(spec_.wire, error);
      out += "\n\n";
      return;
    case Wire::kTriton:
    case Wire::kKserve:
      out += "data: ";
      out += RenderErrorFor(spec_.wire, error);
      out += "\n\n";
      return;
  }
}

std::string ResponseRenderer::JsonText(std::int64_t tokens) const {
  std::string text;
  for (std::int64_t i = 0; i < tokens; ++i) text += choices_[0].JsonPiece(i);
  return text;
}

// Ollama: one line per event with the new text and "done": false (the counts follow in
// AppendUsageEvent). TGI: one event per token, the last with generated_text and details. Triton:
// one event with the new text.
void ResponseRenderer::AppendNativeEvent(std::string& out, std::int64_t first, std::int64_t count,
                                         std::optional<FinishReason> finish) const {
  const ChoiceText& text = choices_[0];
  switch (spec_.wire) {
    case Wire::kOllamaGenerate:
    case Wire::kOllamaChat:
      if (count == 0) return;
      out += head_;
      out += spec_.wire == Wire::kOllamaChat ? R"("message":{"role":"assistant","content":")" : R"("response":")";
      for (std::int64_t i = first; i < first + count; ++i) out += text.JsonPiece(i);
      out += spec_.wire == Wire::kOllamaChat ? "\"},\"done\":false}\n" : "\",\"done\":false}\n";
      return;
    case Wire::kTgi: {
      const std::uint64_t seed = spec_.seed;
      // An end with no new token is the EOS token itself, which TGI sends as a special token
      // (not counted in generated_tokens here, so the counts agree with the emulator's /metrics).
      const bool eos_event = count == 0 && finish.has_value();
      const std::int64_t last = eos_event ? first : first + count - 1;
      for (std::int64_t i = first; i <= last; ++i) {
        const bool special = eos_event;
        fmt::format_to(std::back_inserter(out), R"(data:{{"index":{},"token":{{"id":{},"text":"{}","logprob":{},"special":{}}},)",
                       i + 1, special ? 2 : 1000 + (i % 30000), special ? "</s>" : text.JsonPiece(i),
                       TokenLogprob(seed, i), special ? "true" : "false");
        if (i == last && finish) {
          // The emulator's ends are max_tokens or an EOS draw (a stop string, too, is read as EOS).
          const char* reason = *finish == FinishReason::kLength ? "length" : "eos_token";
          fmt::format_to(std::back_inserter(out),
                         R"("generated_text":"{}","details":{{"finish_reason":"{}","generated_tokens":{},"seed":{}}}}})",
                         JsonText(eos_event ? first : first + count), reason, eos_event ? first : first + count, seed);
        } else {
          out += R"("generated_text":null,"details":null})";
        }
        out += "\n\n";
      }
      return;
    }
    case Wire::kTriton:
    case Wire::kKserve:
      if (count == 0) return;
      out += head_;
      out += R"("text_output":")";
      for (std::int64_t i = first; i < first + count; ++i) out += text.JsonPiece(i);
      out += "\"}\n\n";
      return;
    case Wire::kEmbeddings:  // never streamed
    case Wire::kRerank:
    case Wire::kOpenAi: return;
  }
}

std::string ResponseRenderer::RenderNativeBody(std::int64_t emitted, FinishReason engine_finish) const {
  const std::int64_t tokens = std::min(emitted, end_tokens(0));
  const FinishReason finish = ChoiceFinish(0, emitted, engine_finish).value_or(engine_finish);
  const std::string text = JsonText(tokens);
  switch (spec_.wire) {
    case Wire::kOllamaGenerate:
    case Wire::kOllamaChat: {
      std::string body = fmt::format(R"({{"model":{},"created_at":"{}",)", model_json_, CreatedAt(created_));
      body += spec_.wire == Wire::kOllamaChat ? R"("message":{"role":"assistant","content":")" : R"("response":")";
      body += text;
      body += spec_.wire == Wire::kOllamaChat ? "\"}," : "\",";
      fmt::format_to(std::back_inserter(body), R"("done":true,"done_reason":"{}","prompt_eval_count":{},"eval_count":{}}})",
                     FinishReasonName(finish), spec_.prompt_tokens, tokens);
      return body;
    }
    case Wire::kTgi:
      return fmt::format(R"({{"generated_text":"{}","details":{{"finish_reason":"{}","generated_tokens":{},"seed":{}}}}})",
                         text, finish == FinishReason::kLength ? "length" : "eos_token", tokens, spec_.seed);
    case Wire::kTriton:
      return fmt::format(R"({{"model_name":{},"model_version":"1","text_output":"{}"}})", model_json_, text);
    case Wire::kKserve:
      return fmt::format(
          R"({{"model_name":{},"model_version":"1","outputs":[{{"name":"text_output","datatype":"BYTES","shape":[1],"data":["{}"]}}]}})",
          model_json_, text);
    case Wire::kEmbeddings:
    case Wire::kRerank: return RenderPoolingBody(spec_, model_json_);
    case Wire::kOpenAi: break;
  }
  return {};
}

std::string ResponseRenderer::RenderFullBody(std::int64_t emitted, FinishReason engine_finish,
                                             std::optional<std::int64_t> cached_tokens) const {
  if (spec_.wire != Wire::kOpenAi) return RenderNativeBody(emitted, engine_finish);
  const bool chat = spec_.endpoint == Endpoint::kChat;
  std::string body = fmt::format(R"({{"id":"{}","object":"{}","created":{},"model":{},"choices":[)",
                                 id_, chat ? "chat.completion" : "text_completion", created_,
                                 model_json_);
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    const ChoiceText& choice = choices_[static_cast<std::size_t>(c)];
    const std::int64_t tokens = std::min(emitted, end_tokens(c));
    const FinishReason finish = ChoiceFinish(c, emitted, engine_finish).value_or(engine_finish);
    std::string text;
    for (std::int64_t i = 0; i < tokens; ++i) text += choice.JsonPiece(i);
    if (c > 0) body += ',';
    if (chat && spec_.tool_call) {
      fmt::format_to(
          std::back_inserter(body),
          R"({{"index":{},"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"{}","type":"function","function":{{"name":"{}","arguments":"{}"}}}}]}})",
          c, ToolCallId(c), JsonEscape(spec_.tool_call->name), text);
    } else if (chat) {
      fmt::format_to(std::back_inserter(body),
                     R"({{"index":{},"message":{{"role":"assistant","content":"{}"}})", c, text);
    } else {
      fmt::format_to(std::back_inserter(body), R"({{"index":{},"text":"{}")", c, text);
    }
    body += ",\"logprobs\":";
    if (spec_.logprobs && tokens > 0) {
      AppendLogprobs(body, c, 0, tokens, 0);
    } else {
      body += "null";
    }
    fmt::format_to(std::back_inserter(body), R"(,"finish_reason":"{}")", FinishReasonName(finish));
    body += chat ? "}" : ",\"stop_reason\":null}";
  }
  body += "],";
  AppendUsage(body, spec_.prompt_tokens, CompletionTokens(emitted), cached_tokens);
  body += '}';
  return body;
}

}  // namespace bakeoff::emulate
