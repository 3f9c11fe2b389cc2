// dialect/native.cc: the engines' native generation routes (contract and sources in native.h).
#include "dialect/native.h"

#include <simdjson.h>

#include "core/check.h"
#include "core/json_text.h"
#include "dialect/json_payload.h"

namespace bakeoff::dialect {
namespace {

namespace dom = simdjson::dom;
using internal::AppendDouble;
using internal::AppendUnsigned;
using internal::CapMessage;
using internal::ParseObject;
using internal::ReadCount;
using internal::ReadOptionalString;
using internal::Reason;
using internal::ThreadParseScratch;

const char* Label(Api api) {
  switch (api) {
    case Api::kOllamaGenerate:
    case Api::kOllamaChat: return "Ollama payload";
    case Api::kTgiGenerate: return "TGI payload";
    case Api::kTritonGenerate: return "Triton payload";
    case Api::kKserveInfer: return "V2 inference payload";
    case Api::kCompletions:
    case Api::kChat:
    case Api::kEmbeddings:
    case Api::kRerank: break;
  }
  return "payload";
}

// ---------------------------------------------------------------------------------------------
// Encoding

void AppendMessage(std::string& out, std::string_view role, std::string_view content) {
  out.append("{\"role\":");
  AppendJsonString(out, role);
  out.append(",\"content\":");
  AppendJsonString(out, content);
  out.push_back('}');
}

void EncodeOllama(const GenerationRequest& r, std::string& out) {
  out.append("{\"model\":");
  AppendJsonString(out, r.model);
  if (r.api == Api::kOllamaChat) {
    out.append(",\"messages\":[");
    if (!r.system.empty()) {
      AppendMessage(out, "system", r.system);
      out.push_back(',');
    }
    for (const auto& [role, content] : r.history) {
      AppendMessage(out, role, content);
      out.push_back(',');
    }
    AppendMessage(out, "user", r.prompt);
    out.push_back(']');
  } else {
    out.append(",\"prompt\":");
    AppendJsonString(out, r.prompt);
  }
  // Ollama streams unless told not to [6.2].
  out.append(r.stream ? ",\"stream\":true" : ",\"stream\":false");
  out.append(",\"options\":{\"num_predict\":");
  AppendUnsigned(out, r.max_tokens);
  if (r.temperature) {
    out.append(",\"temperature\":");
    AppendDouble(out, *r.temperature);
  }
  if (r.seed) {
    out.append(",\"seed\":");
    AppendUnsigned(out, *r.seed);
  }
  out.append("}}");
}

void EncodeTgi(const GenerationRequest& r, std::string& out) {
  out.append("{\"inputs\":");
  AppendJsonString(out, r.prompt);
  out.append(",\"parameters\":{\"max_new_tokens\":");
  AppendUnsigned(out, r.max_tokens);
  out.append(",\"details\":true");
  // TGI rejects a temperature that is not strictly positive; greedy is do_sample false, its default.
  if (r.temperature && *r.temperature > 0) {
    out.append(",\"do_sample\":true,\"temperature\":");
    AppendDouble(out, *r.temperature);
  }
  if (r.seed) {
    out.append(",\"seed\":");
    AppendUnsigned(out, *r.seed);
  }
  out.append("}}");
}

void EncodeTriton(const GenerationRequest& r, std::string& out) {
  out.append("{\"text_input\":");
  AppendJsonString(out, r.prompt);
  out.append(",\"max_tokens\":");
  AppendUnsigned(out, r.max_tokens);
  out.append(r.stream ? ",\"stream\":true}" : ",\"stream\":false}");
}

void EncodeKserve(const GenerationRequest& r, std::string& out) {
  out.append("{\"inputs\":[{\"name\":\"text_input\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[");
  AppendJsonString(out, r.prompt);
  out.append("]},{\"name\":\"max_tokens\",\"shape\":[1],\"datatype\":\"INT32\",\"data\":[");
  AppendUnsigned(out, r.max_tokens);
  out.append("]}]}");
}

// ---------------------------------------------------------------------------------------------
// Decoding: one walk over a payload's fields, views into the parser's string buffer.

struct NativeView {
  bool step = false;  // it carried generated text (possibly empty)
  std::string_view content;
  std::string_view reasoning;
  std::string_view finish_reason;
  bool done = false;
  std::uint32_t token_count = 0;
  std::optional<std::uint64_t> prompt_tokens;
  std::optional<std::uint64_t> output_tokens;
  std::optional<std::string> error;
};

// {"error": "..."} (Ollama, TGI, Triton, KServe), or an object with a message.
std::optional<std::string> ErrorText(dom::element value) {
  if (value.is_null()) return std::nullopt;
  std::string_view text;
  if (value.get_string().get(text) == simdjson::SUCCESS) return CapMessage(text);
  dom::object object;
  if (value.get_object().get(object) == simdjson::SUCCESS &&
      object["message"].get_string().get(text) == simdjson::SUCCESS) {
    return CapMessage(text);
  }
  return CapMessage(simdjson::minify(value));
}

// TGI's words for an end, in OpenAI's.
std::string_view OpenAiFinish(std::string_view tgi) {
  if (tgi == "eos_token" || tgi == "stop_sequence") return "stop";
  return tgi;
}

Reason ReadOptionalCount(dom::element value, std::optional<std::uint64_t>& out) {
  if (value.is_null()) return nullptr;
  std::uint64_t count = 0;
  if (!ReadCount(value, count)) return "a token count is not a non-negative integer";
  out = count;
  return nullptr;
}

Reason ReadOllama(dom::object root, NativeView& v) {
  for (const dom::key_value_pair field : root) {
    if (field.key == "error") {
      v.error = ErrorText(field.value);
    } else if (field.key == "response") {
      if (!ReadOptionalString(field.value, v.content)) return "`response` is not a string";
      v.step = true;
    } else if (field.key == "thinking") {
      if (!ReadOptionalString(field.value, v.reasoning)) return "`thinking` is not a string";
    } else if (field.key == "message") {
      if (field.value.is_null()) continue;
      dom::object message;
      if (field.value.get_object().get(message) != simdjson::SUCCESS) return "`message` is not an object";
      v.step = true;
      for (const dom::key_value_pair m : message) {
        if (m.key == "content") {
          if (!ReadOptionalString(m.value, v.content)) return "`message.content` is not a string";
        } else if (m.key == "thinking") {
          if (!ReadOptionalString(m.value, v.reasoning)) return "`message.thinking` is not a string";
        }
      }
    } else if (field.key == "done") {
      if (field.value.get_bool().get(v.done) != simdjson::SUCCESS) return "`done` is not a boolean";
    } else if (field.key == "done_reason") {
      if (!ReadOptionalString(field.value, v.finish_reason)) return "`done_reason` is not a string";
    } else if (field.key == "prompt_eval_count") {
      if (Reason r = ReadOptionalCount(field.value, v.prompt_tokens)) return r;
    } else if (field.key == "eval_count") {
      if (Reason r = ReadOptionalCount(field.value, v.output_tokens)) return r;
    }
  }
  // A final object without a reason still ended the answer; Ollama omits empty fields.
  if (v.done && v.finish_reason.empty()) v.finish_reason = "stop";
  return nullptr;
}

Reason ReadTgiDetails(dom::element value, NativeView& v) {
  if (value.is_null()) return nullptr;
  dom::object details;
  if (value.get_object().get(details) != simdjson::SUCCESS) return "`details` is not an object";
  v.done = true;
  for (const dom::key_value_pair field : details) {
    if (field.key == "finish_reason") {
      std::string_view reason;
      if (!ReadOptionalString(field.value, reason)) return "`details.finish_reason` is not a string";
      v.finish_reason = OpenAiFinish(reason);
    } else if (field.key == "generated_tokens") {
      if (Reason r = ReadOptionalCount(field.value, v.output_tokens)) return r;
    } else if (field.key == "prefill") {  // only with decoder_input_details (whole answers)
      dom::array prefill;
      if (field.value.get_array().get(prefill) == simdjson::SUCCESS && prefill.size() > 0) {
        v.prompt_tokens = prefill.size();
      }
    }
  }
  return nullptr;
}

Reason ReadTgi(dom::object root, NativeView& v) {
  for (const dom::key_value_pair field : root) {
    if (field.key == "error") {
      v.error = ErrorText(field.value);
    } else if (field.key == "token") {
      if (field.value.is_null()) continue;
      dom::object token;
      if (field.value.get_object().get(token) != simdjson::SUCCESS) return "`token` is not an object";
      v.step = true;
      v.token_count = 1;
      std::string_view text;
      bool special = false;
      for (const dom::key_value_pair t : token) {
        if (t.key == "text") {
          if (!ReadOptionalString(t.value, text)) return "`token.text` is not a string";
        } else if (t.key == "special") {
          if (t.value.get_bool().get(special) != simdjson::SUCCESS) return "`token.special` is not a boolean";
        }
      }
      if (!special) v.content = text;
    } else if (field.key == "generated_text") {
      if (field.value.is_null()) continue;
      std::string_view text;
      if (!ReadOptionalString(field.value, text)) return "`generated_text` is not a string";
      v.done = true;
      if (!v.step) v.content = text;  // a whole answer (/generate) has no token
    } else if (field.key == "details") {
      if (Reason r = ReadTgiDetails(field.value, v)) return r;
    }
  }
  if (v.done && v.finish_reason.empty()) v.finish_reason = "stop";
  return nullptr;
}

Reason ReadTriton(dom::object root, NativeView& v) {
  for (const dom::key_value_pair field : root) {
    if (field.key == "error") {
      v.error = ErrorText(field.value);
    } else if (field.key == "text_output") {
      if (!ReadOptionalString(field.value, v.content)) return "`text_output` is not a string";
      v.step = true;
    } else if (field.key == "finish_reason") {  // where the model emits one
      if (!ReadOptionalString(field.value, v.finish_reason)) return "`finish_reason` is not a string";
    } else if (field.key == "num_input_tokens") {
      if (Reason r = ReadOptionalCount(field.value, v.prompt_tokens)) return r;
    } else if (field.key == "num_output_tokens") {
      if (Reason r = ReadOptionalCount(field.value, v.output_tokens)) return r;
    }
  }
  return nullptr;
}

// The first element of a tensor's `data`, as a string (BYTES) or a count (INT).
Reason TensorData(dom::object tensor, std::string_view& text, std::optional<std::uint64_t>& count) {
  dom::array data;
  if (tensor["data"].get_array().get(data) != simdjson::SUCCESS) return "an output's `data` is not an array";
  for (dom::element first : data) {
    // A [1, 1] shape may nest the value once more.
    dom::array nested;
    if (first.get_array().get(nested) == simdjson::SUCCESS) {
      for (dom::element inner : nested) {
        first = inner;
        break;
      }
    }
    std::uint64_t n = 0;
    if (first.get_string().get(text) == simdjson::SUCCESS) return nullptr;
    if (first.get_uint64().get(n) == simdjson::SUCCESS) {
      count = n;
      return nullptr;
    }
    return "an output's data is neither text nor a count";
  }
  return nullptr;
}

Reason ReadKserve(dom::object root, NativeView& v) {
  for (const dom::key_value_pair field : root) {
    if (field.key == "error") {
      v.error = ErrorText(field.value);
    } else if (field.key == "outputs") {
      dom::array outputs;
      if (field.value.get_array().get(outputs) != simdjson::SUCCESS) return "`outputs` is not an array";
      for (const dom::element element : outputs) {
        dom::object tensor;
        if (element.get_object().get(tensor) != simdjson::SUCCESS) return "an output is not an object";
        std::string_view name;
        if (tensor["name"].get_string().get(name) != simdjson::SUCCESS) return "an output has no name";
        std::string_view text;
        std::optional<std::uint64_t> count;
        if (Reason r = TensorData(tensor, text, count)) return r;
        if (name == "text_output") {
          v.content = text;
          v.step = true;
        } else if (name == "num_input_tokens") {
          v.prompt_tokens = count;
        } else if (name == "num_output_tokens") {
          v.output_tokens = count;
        }
      }
    }
  }
  return nullptr;
}

Reason ReadNative(Api api, dom::object root, NativeView& v) {
  switch (api) {
    case Api::kOllamaGenerate:
    case Api::kOllamaChat: return ReadOllama(root, v);
    case Api::kTgiGenerate: return ReadTgi(root, v);
    case Api::kTritonGenerate: return ReadTriton(root, v);
    case Api::kKserveInfer: return ReadKserve(root, v);
    case Api::kCompletions:
    case Api::kChat:
    case Api::kEmbeddings:
    case Api::kRerank: break;
  }
  BAKEOFF_CHECK(false) << "not a native route: " << ApiName(api);
  return nullptr;
}

std::optional<Usage> UsageOf(const NativeView& v) {
  if (!v.output_tokens) return std::nullopt;  // a prompt count alone says nothing of the output
  Usage usage;
  usage.completion_tokens = *v.output_tokens;
  usage.prompt_known = v.prompt_tokens.has_value();
  usage.prompt_tokens = v.prompt_tokens.value_or(0);
  return usage;
}

}  // namespace

std::string EncodeNativeRequestBody(const GenerationRequest& request) {
  std::string out;
  const std::size_t text_bytes = request.prompt.size() + request.system.size() + request.model.size();
  out.reserve(text_bytes + text_bytes / 8 + 256);
  switch (request.api) {
    case Api::kOllamaGenerate:
    case Api::kOllamaChat: EncodeOllama(request, out); break;
    case Api::kTgiGenerate: EncodeTgi(request, out); break;
    case Api::kTritonGenerate: EncodeTriton(request, out); break;
    case Api::kKserveInfer: EncodeKserve(request, out); break;
    case Api::kCompletions:
    case Api::kChat:
    case Api::kEmbeddings:
    case Api::kRerank: BAKEOFF_CHECK(false) << ApiName(request.api) << " has its own encoder"; break;
  }
  return out;
}

NativeStreamDecoder::NativeStreamDecoder(Api api) : api_(api) {
  BAKEOFF_CHECK(ApiStreams(api) && !IsOpenAiApi(api)) << ApiName(api) << " has no native stream";
}

Result<StreamChunk> NativeStreamDecoder::Decode(std::string_view data) {
  StreamChunk chunk;
  dom::object root;
  internal::ParseScratch& scratch = ThreadParseScratch();
  if (Reason reason = ParseObject(scratch.parser, data, scratch.PaddedBuffer(data.size()), root,
                                  &chunk.invalid_utf8)) {
    return internal::PayloadError(Label(api_), reason, data);
  }
  NativeView v;
  if (Reason reason = ReadNative(api_, root, v)) return internal::PayloadError(Label(api_), reason, data);
  chunk.done = v.done;
  chunk.has_choices = v.step;
  chunk.content = v.content;
  chunk.reasoning = v.reasoning;
  chunk.finish_reason = v.finish_reason;
  chunk.token_count = v.token_count;
  chunk.usage = UsageOf(v);
  chunk.error = std::move(v.error);
  return chunk;
}

Result<CompletionResponse> DecodeNativeResponse(Api api, std::string_view body) {
  BAKEOFF_CHECK(!IsOpenAiApi(api)) << "an OpenAI route has its own decoder";
  dom::parser parser;
  const auto padded = std::make_unique<char[]>(body.size() + simdjson::SIMDJSON_PADDING);
  dom::object root;
  CompletionResponse response;
  if (Reason reason = ParseObject(parser, body, padded.get(), root, &response.invalid_utf8)) {
    return internal::PayloadError(Label(api), reason, body);
  }
  NativeView v;
  if (Reason reason = ReadNative(api, root, v)) return internal::PayloadError(Label(api), reason, body);
  if (v.error) return MakeError(ErrorCode::kProtocol, std::string(Label(api)) + " is an error: " + *v.error);
  if (!v.step && !v.done) return internal::PayloadError(Label(api), "no generated text", body);
  response.content = std::string(v.content);
  response.reasoning = std::string(v.reasoning);
  response.finish_reason = std::string(v.finish_reason);
  response.usage = UsageOf(v);
  return response;
}

}  // namespace bakeoff::dialect
