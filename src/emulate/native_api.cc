// emulate/native_api.cc: native routes read into GenerationSpecs (contract in native_api.h).
#include "emulate/native_api.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace bakeoff::emulate {
namespace {

using json = nlohmann::json;

// A path segment's percent-escapes decoded (a model name may hold '/' as %2F).
std::string DecodeSegment(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const std::string hex(text.substr(i + 1, 2));
      char* end = nullptr;
      const long value = std::strtol(hex.c_str(), &end, 16);
      if (hex.size() == 2 && end == hex.c_str() + 2) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

ApiError Invalid(std::string message) { return BadRequest(std::move(message)); }

// The text a native body carries under `field`: a non-empty string.
std::variant<std::string, ApiError> RequiredText(const json& doc, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return Invalid(fmt::format("field required: {}", field));
  if (!it->is_string()) return Invalid(fmt::format("{} must be a string", field));
  std::string text = it->get<std::string>();
  if (text.empty()) return Invalid(fmt::format("{} cannot be empty", field));
  return text;
}

// Ollama: {model, prompt | messages, system?, stream (default true), options {num_predict, seed,
// temperature}}.
std::variant<json, ApiError> FromOllama(Wire wire, const json& doc) {
  json out = json::object();
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_string() || model->get<std::string>().empty()) {
    return Invalid("model is required");
  }
  out["model"] = *model;
  if (wire == Wire::kOllamaChat) {
    auto messages = doc.find("messages");
    if (messages == doc.end()) return Invalid("field required: messages");
    out["messages"] = *messages;
  } else {
    auto prompt = RequiredText(doc, "prompt");
    if (auto* error = std::get_if<ApiError>(&prompt)) return std::move(*error);
    json messages = json::array();
    if (auto system = doc.find("system"); system != doc.end() && system->is_string()) {
      messages.push_back({{"role", "system"}, {"content", *system}});
    }
    messages.push_back({{"role", "user"}, {"content", std::get<std::string>(prompt)}});
    out["messages"] = std::move(messages);
  }
  auto stream = doc.find("stream");
  if (stream != doc.end() && !stream->is_boolean()) return Invalid("stream must be a boolean");
  out["stream"] = stream == doc.end() ? true : stream->get<bool>();
  if (auto options = doc.find("options"); options != doc.end() && !options->is_null()) {
    if (!options->is_object()) return Invalid("options must be an object");
    // num_predict -1 (the default) means "until the end": the chat default of the engine model.
    if (auto n = options->find("num_predict"); n != options->end() && n->is_number_integer() && n->get<std::int64_t>() > 0) {
      out["max_tokens"] = *n;
    }
    if (auto seed = options->find("seed"); seed != options->end()) out["seed"] = *seed;
  }
  return out;
}

// TGI: {inputs, parameters {max_new_tokens, seed, temperature, do_sample, details, stop}}.
std::variant<json, ApiError> FromTgi(const json& doc) {
  auto inputs = RequiredText(doc, "inputs");
  if (auto* error = std::get_if<ApiError>(&inputs)) return std::move(*error);
  json out = {{"messages", json::array({{{"role", "user"}, {"content", std::get<std::string>(inputs)}}})}};
  if (auto parameters = doc.find("parameters"); parameters != doc.end() && !parameters->is_null()) {
    if (!parameters->is_object()) return Invalid("parameters must be an object");
    if (auto t = parameters->find("temperature"); t != parameters->end() && !t->is_null()) {
      if (!t->is_number() || t->get<double>() <= 0) return Invalid("`temperature` must be strictly positive");
    }
    if (auto n = parameters->find("max_new_tokens"); n != parameters->end() && !n->is_null()) out["max_tokens"] = *n;
    if (auto seed = parameters->find("seed"); seed != parameters->end() && !seed->is_null()) out["seed"] = *seed;
    if (auto stop = parameters->find("stop"); stop != parameters->end() && !stop->is_null()) out["stop"] = *stop;
  }
  return out;
}

// Triton's generate extension: {text_input, max_tokens?, stream?, parameters?}.
std::variant<json, ApiError> FromTriton(const json& doc) {
  auto text = RequiredText(doc, "text_input");
  if (auto* error = std::get_if<ApiError>(&text)) return std::move(*error);
  json out = {{"messages", json::array({{{"role", "user"}, {"content", std::get<std::string>(text)}}})}};
  if (auto n = doc.find("max_tokens"); n != doc.end() && !n->is_null()) out["max_tokens"] = *n;
  return out;
}

// The first value of an input tensor named `name` (its data, possibly nested once).
const json* TensorValue(const json& inputs, std::string_view name) {
  for (const json& tensor : inputs) {
    if (!tensor.is_object() || tensor.value("name", "") != name) continue;
    auto data = tensor.find("data");
    if (data == tensor.end() || !data->is_array() || data->empty()) return nullptr;
    const json* first = &(*data)[0];
    if (first->is_array() && !first->empty()) first = &(*first)[0];
    return first;
  }
  return nullptr;
}

// The V2 infer route: {inputs: [{name: "text_input", datatype: "BYTES", data: [...]}, {name:
// "max_tokens", ...}]}.
std::variant<json, ApiError> FromKserve(const json& doc) {
  auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !inputs->is_array()) return Invalid("field required: inputs (an array of tensors)");
  const json* text = TensorValue(*inputs, "text_input");
  if (text == nullptr || !text->is_string() || text->get<std::string>().empty()) {
    return Invalid("input tensor 'text_input' (BYTES, one text) is required");
  }
  json out = {{"messages", json::array({{{"role", "user"}, {"content", *text}}})}};
  if (const json* n = TensorValue(*inputs, "max_tokens"); n != nullptr) out["max_tokens"] = *n;
  return out;
}

}  // namespace

std::optional<NativeRoute> MatchNativeRoute(std::string_view path) {
  if (path == "/api/generate") return NativeRoute{Wire::kOllamaGenerate, std::nullopt, ""};
  if (path == "/api/chat") return NativeRoute{Wire::kOllamaChat, std::nullopt, ""};
  if (path == "/generate") return NativeRoute{Wire::kTgi, false, ""};
  if (path == "/generate_stream") return NativeRoute{Wire::kTgi, true, ""};
  constexpr std::string_view kModels = "/v2/models/";
  if (!path.starts_with(kModels)) return std::nullopt;
  const std::string_view rest = path.substr(kModels.size());
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  std::string model = DecodeSegment(rest.substr(0, slash));
  const std::string_view action = rest.substr(slash + 1);
  if (action == "generate") return NativeRoute{Wire::kTriton, false, std::move(model)};
  if (action == "generate_stream") return NativeRoute{Wire::kTriton, true, std::move(model)};
  if (action == "infer") return NativeRoute{Wire::kKserve, false, std::move(model)};
  return std::nullopt;
}

std::variant<GenerationSpec, ApiError> ParseNativeRequest(const NativeRoute& route, std::string_view body,
                                                          const ServedModel& served) {
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception&) {
    return Invalid("the body is not valid JSON");
  }
  if (!doc.is_object()) return Invalid("the body is not a JSON object");
  std::variant<json, ApiError> translated;
  try {
    switch (route.wire) {
      case Wire::kOllamaGenerate:
      case Wire::kOllamaChat: translated = FromOllama(route.wire, doc); break;
      case Wire::kTgi: translated = FromTgi(doc); break;
      case Wire::kTriton: translated = FromTriton(doc); break;
      case Wire::kKserve: translated = FromKserve(doc); break;
      case Wire::kOpenAi:
      case Wire::kEmbeddings:
      case Wire::kRerank: return Invalid("not a native route");
    }
  } catch (const json::exception& e) {  // a type we did not check; never let it escape
    return Invalid(fmt::format("invalid request: {}", e.what()));
  }
  if (auto* error = std::get_if<ApiError>(&translated)) {
    if (route.wire == Wire::kTgi) error->status = 422;
    return std::move(*error);
  }
  json& openai = std::get<json>(translated);
  if (!route.model.empty()) openai["model"] = route.model;
  if (route.stream) openai["stream"] = *route.stream;
  auto parsed = ParseGenerationRequest(Endpoint::kChat, openai.dump(-1, ' ', false, json::error_handler_t::replace), served);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    if (route.wire == Wire::kTgi && error->status == 400) error->status = 422;
    return parsed;
  }
  GenerationSpec& spec = std::get<GenerationSpec>(parsed);
  spec.wire = route.wire;
  // Ollama's last line always carries the counts; the others have no usage to ask for.
  spec.include_usage = route.wire == Wire::kOllamaGenerate || route.wire == Wire::kOllamaChat;
  return parsed;
}

std::string RenderErrorFor(Wire wire, const ApiError& error) {
  if (wire == Wire::kOpenAi || wire == Wire::kEmbeddings || wire == Wire::kRerank) return RenderError(error);
  json body = {{"error", error.message}};
  if (wire == Wire::kTgi) body["error_type"] = error.status == 422 ? "validation" : "generation";
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* StreamContentType(Wire wire) {
  return wire == Wire::kOllamaGenerate || wire == Wire::kOllamaChat ? "application/x-ndjson"
                                                                       : "text/event-stream; charset=utf-8";
}

}  // namespace bakeoff::emulate
