// emulate/openai_request.cc: reading and validating the OpenAI routes' request bodies
// (/v1/completions, /v1/chat/completions, /tokenize) into GenerationSpecs, with nlohmann/json, off
// the per-token path (contract in openai_api.h).
#include "emulate/openai_api.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"

namespace bakeoff::emulate {

namespace {

using nlohmann::json;

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

}  // namespace bakeoff::emulate
