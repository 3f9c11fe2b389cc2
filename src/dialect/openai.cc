// dialect/openai.cc
//
// Owns: the OpenAI-compatible request encoder (a hand-written JSON writer; the request has a fixed,
// flat shape and prompts can be hundreds of KB) and the response decoders (simdjson DOM). One walk
// over a body's fields serves streamed chunks, whole responses and error bodies, so the three agree
// on shapes and on what counts as malformed.
//
// Why the DOM parser rather than On Demand: with Debian's generic x86-64 build flags On Demand is
// compiled for simdjson's scalar "fallback" kernel, while the DOM parser in libsimdjson dispatches
// at run time to the best SIMD kernel; on 200-byte chunks both take a few hundred nanoseconds, and
// the DOM validates the whole payload, so "not JSON" is answered exactly.
// Wire formats: OpenAI API reference (completions / chat completions, streaming), and the engine
// differences in ../shared/reference/engine-interfaces.md sections 1.2, 1.7, 2.2, 5.2, 10.3-10.7.
#include "dialect/openai.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

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
using internal::TrimSpace;

Error ProtocolError(std::string_view what, std::string_view payload) {
  return internal::PayloadError("OpenAI payload", what, payload);
}

// ---------------------------------------------------------------------------------------------
// Response decoding: one walk over a body's fields, views into the parser's string buffer.

struct ChoiceView {
  std::string_view content;
  std::string_view reasoning;
  std::string_view tool_arguments;
  std::string_view finish_reason;
  std::uint32_t logprob_tokens = 0;
};

struct ErrorFields {
  dom::element error;            // the non-null "error" member; valid only when has_error
  bool has_error = false;
  bool object_is_error = false;  // "object": "error" (older vLLM, SGLang, TRT-LLM, LMDeploy)
  std::string_view message;      // top-level "message", used with object_is_error
  bool has_message = false;
};

struct BodyView {
  bool has_choices = false;
  bool has_choice0 = false;
  ChoiceView choice;
  std::optional<Usage> usage;
  std::optional<std::uint64_t> timings_cached;  // llama.cpp: the prompt tokens it reused
  ErrorFields error;
};

Reason ReadUsage(dom::element value, std::optional<Usage>& out) {
  if (value.is_null()) return nullptr;  // LMDeploy sends usage: null on every content chunk
  dom::object object;
  if (value.get_object().get(object) != simdjson::SUCCESS) return "`usage` is not an object";
  Usage usage;
  for (const dom::key_value_pair field : object) {
    if (field.key == "prompt_tokens") {
      if (!ReadCount(field.value, usage.prompt_tokens)) return "`usage.prompt_tokens` is not a count";
    } else if (field.key == "completion_tokens") {
      if (!ReadCount(field.value, usage.completion_tokens)) {
        return "`usage.completion_tokens` is not a count";
      }
    } else if (field.key == "prompt_tokens_details") {
      if (field.value.is_null()) continue;
      dom::object details;
      if (field.value.get_object().get(details) != simdjson::SUCCESS) {
        return "`usage.prompt_tokens_details` is not an object";
      }
      for (const dom::key_value_pair detail : details) {
        if (detail.key != "cached_tokens" || detail.value.is_null()) continue;
        std::uint64_t cached = 0;
        if (!ReadCount(detail.value, cached)) return "`cached_tokens` is not a count";
        usage.cached_tokens = cached;
      }
    }
  }
  out = usage;
  return nullptr;
}

// Chat `delta` (stream) or `message` (whole response).
Reason ReadMessage(dom::element value, ChoiceView& choice) {
  if (value.is_null()) return nullptr;
  dom::object object;
  if (value.get_object().get(object) != simdjson::SUCCESS) return "`delta`/`message` is not an object";
  std::string_view reasoning_content;
  std::string_view reasoning;
  for (const dom::key_value_pair field : object) {
    if (field.key == "content") {
      if (!ReadOptionalString(field.value, choice.content)) return "`content` is not a string";
    } else if (field.key == "reasoning_content") {
      if (!ReadOptionalString(field.value, reasoning_content)) {
        return "`reasoning_content` is not a string";
      }
    } else if (field.key == "reasoning") {
      if (!ReadOptionalString(field.value, reasoning)) return "`reasoning` is not a string";
    } else if (field.key == "tool_calls") {
      // Only a timing hint (the call's arguments arrive as its text): other shapes are ignored.
      dom::array calls;
      std::string_view arguments;
      if (field.value.get_array().get(calls) == simdjson::SUCCESS && calls.size() > 0 &&
          calls.at(0)["function"]["arguments"].get_string().get(arguments) == simdjson::SUCCESS) {
        choice.tool_arguments = arguments;
      }
    }
  }
  // Some vLLM versions send both names with the same text; take one, never both.
  choice.reasoning = reasoning_content.empty() ? reasoning : reasoning_content;
  return nullptr;
}

// Counts tokens listed in logprobs. Only a hint, so an unexpected shape is ignored, not an error.
std::uint32_t LogprobTokens(dom::element value) {
  dom::object object;
  if (value.get_object().get(object) != simdjson::SUCCESS) return 0;
  for (const char* key : {"content", "tokens"}) {  // chat, then completions
    dom::array entries;
    if (object[key].get_array().get(entries) == simdjson::SUCCESS) {
      return static_cast<std::uint32_t>(std::min<std::size_t>(entries.size(), UINT32_MAX));
    }
  }
  return 0;
}

// Reads one choice; sets `is_index0` when it is the one bakeoff reports.
Reason ReadChoice(dom::element value, ChoiceView& choice, bool& is_index0) {
  dom::object object;
  if (value.get_object().get(object) != simdjson::SUCCESS) return "a choice is not an object";
  is_index0 = true;  // a choice without `index` counts as the first
  for (const dom::key_value_pair field : object) {
    if (field.key == "index") {
      std::uint64_t index = 0;
      if (field.value.get_uint64().get(index) != simdjson::SUCCESS) return "`index` is not a count";
      is_index0 = index == 0;
    } else if (field.key == "text") {  // /v1/completions
      if (!ReadOptionalString(field.value, choice.content)) return "`text` is not a string";
    } else if (field.key == "delta" || field.key == "message") {  // chat stream / whole
      if (Reason reason = ReadMessage(field.value, choice)) return reason;
    } else if (field.key == "finish_reason") {
      if (!ReadOptionalString(field.value, choice.finish_reason)) {
        return "`finish_reason` is not a string";
      }
    } else if (field.key == "logprobs") {
      choice.logprob_tokens = LogprobTokens(field.value);
    }
  }
  return nullptr;
}

Reason ReadChoices(dom::element value, BodyView& body) {
  if (value.is_null()) return nullptr;
  dom::array choices;
  if (value.get_array().get(choices) != simdjson::SUCCESS) return "`choices` is not an array";
  for (const dom::element element : choices) {
    body.has_choices = true;
    ChoiceView choice;
    bool is_index0 = false;
    if (Reason reason = ReadChoice(element, choice, is_index0)) return reason;
    if (is_index0 && !body.has_choice0) {
      body.choice = choice;
      body.has_choice0 = true;
    }
  }
  return nullptr;
}

// Collects the members that can make a body an error; false when `field` is not one of them.
bool CollectErrorField(const dom::key_value_pair& field, ErrorFields& error) {
  if (field.key == "error") {
    if (!field.value.is_null()) {
      error.error = field.value;
      error.has_error = true;
    }
    return true;
  }
  if (field.key == "object") {
    std::string_view object;
    error.object_is_error = field.value.get_string().get(object) == simdjson::SUCCESS && object == "error";
    return true;
  }
  if (field.key == "message") {
    error.has_message = field.value.get_string().get(error.message) == simdjson::SUCCESS;
    return true;
  }
  return false;
}

// The message an error body carries, if it is one.
std::optional<std::string> ErrorMessageOf(const ErrorFields& error) {
  if (error.has_error) {
    std::string_view text;
    if (error.error.get_string().get(text) == simdjson::SUCCESS) return CapMessage(text);  // TGI, Triton
    dom::object object;
    if (error.error.get_object().get(object) == simdjson::SUCCESS &&
        object["message"].get_string().get(text) == simdjson::SUCCESS) {
      return CapMessage(text);  // current vLLM, llama.cpp, Ollama's OpenAI routes
    }
    return CapMessage(simdjson::minify(error.error));  // an error without a readable message
  }
  if (error.object_is_error) {
    return error.has_message ? CapMessage(error.message) : std::string("error object without a message");
  }
  return std::nullopt;
}

// llama.cpp's `timings`: the prompt tokens it reused from the slot's cache, `cache_n` where the
// build sends it, else the prompt (usage's) less `prompt_n`, the tokens it evaluated. Only a hint,
// so another shape is ignored, not an error.
std::optional<std::uint64_t> TimingsCached(dom::element value, const std::optional<Usage>& usage) {
  std::int64_t n = -1;
  if (value["cache_n"].get_int64().get(n) == simdjson::SUCCESS && n >= 0) return static_cast<std::uint64_t>(n);
  if (!usage || value["prompt_n"].get_int64().get(n) != simdjson::SUCCESS || n < 0 ||
      static_cast<std::uint64_t>(n) > usage->prompt_tokens) {
    return std::nullopt;
  }
  return usage->prompt_tokens - static_cast<std::uint64_t>(n);
}

Reason ReadBody(dom::object root, BodyView& body) {
  std::optional<dom::element> timings;
  for (const dom::key_value_pair field : root) {
    if (field.key == "choices") {
      if (Reason reason = ReadChoices(field.value, body)) return reason;
    } else if (field.key == "usage") {
      if (Reason reason = ReadUsage(field.value, body.usage)) return reason;
    } else if (field.key == "timings") {
      timings = field.value;
    } else {
      CollectErrorField(field, body.error);
    }
  }
  // Older llama.cpp builds count no cached tokens in usage, only in timings.
  if (body.usage && !body.usage->cached_tokens && timings) body.usage->cached_tokens = TimingsCached(*timings, body.usage);
  return nullptr;
}

}  // namespace

namespace {

// The constraint's fields. REQUIRES: its spec is valid JSON where a schema or a list is meant
// (checked where it was read, cli/load_flags.cc).
void AppendConstraint(std::string& out, const OutputConstraint& c) {
  switch (c.kind) {
    case OutputConstraint::Kind::kJsonSchema:
      out.append(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"bakeoff\",\"schema\":");
      out.append(c.spec);
      out.append("}}");
      return;
    case OutputConstraint::Kind::kChoice:  // a JSON schema enum: what every engine's json_schema takes
      out.append(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"bakeoff_choice\",\"schema\":{\"type\":\"string\",\"enum\":");
      out.append(c.spec);
      out.append("}}}");
      return;
    case OutputConstraint::Kind::kRegex:
      switch (c.regex_field) {
        case RegexField::kStructuredOutputs:
          out.append(",\"structured_outputs\":{\"regex\":");
          AppendJsonString(out, c.spec);
          out.push_back('}');
          return;
        case RegexField::kTopLevel:
          out.append(",\"regex\":");
          AppendJsonString(out, c.spec);
          return;
        case RegexField::kResponseFormatValue:
          out.append(",\"response_format\":{\"type\":\"regex\",\"value\":");
          AppendJsonString(out, c.spec);
          out.push_back('}');
          return;
      }
      return;
    case OutputConstraint::Kind::kTool:
      out.append(",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"record_answer\",\"description\":\"Record the answer.\",\"parameters\":");
      out.append(c.spec);
      out.append("}}],\"tool_choice\":\"required\"");
      return;
  }
}

}  // namespace

std::string EncodeOpenAiRequestBody(const GenerationRequest& request) {
  BAKEOFF_CHECK(IsOpenAiApi(request.api)) << ApiName(request.api) << " has its own encoder";
  std::string out;
  // Room for typical escaping (newlines, quotes) so a large prompt is not copied on growth.
  const std::size_t text_bytes = request.prompt.size() + request.system.size() + request.model.size();
  out.reserve(text_bytes + text_bytes / 8 + 256);
  out.append("{\"model\":");
  AppendJsonString(out, request.model);
  if (request.api == Api::kCompletions) {
    out.append(",\"prompt\":");
    AppendJsonString(out, request.prompt);
  } else {
    out.append(",\"messages\":[");
    if (!request.system.empty()) {
      out.append("{\"role\":\"system\",\"content\":");
      AppendJsonString(out, request.system);
      out.append("},");
    }
    for (const auto& [role, content] : request.history) {
      out.append("{\"role\":");
      AppendJsonString(out, role);
      out.append(",\"content\":");
      AppendJsonString(out, content);
      out.append("},");
    }
    out.append("{\"role\":\"user\",\"content\":");
    AppendJsonString(out, request.prompt);
    out.append("}]");
  }
  out.append(",\"max_tokens\":");
  AppendUnsigned(out, request.max_tokens);
  out.append(request.stream ? ",\"stream\":true" : ",\"stream\":false");
  // vLLM rejects stream_options without stream (protocol.py validate_stream_options).
  if (request.stream && (request.include_usage || request.continuous_usage)) {
    out.append(request.include_usage ? ",\"stream_options\":{\"include_usage\":true"
                                     : ",\"stream_options\":{\"include_usage\":false");
    if (request.continuous_usage) out.append(",\"continuous_usage_stats\":true");
    out.push_back('}');
  }
  if (request.ignore_eos) out.append(",\"ignore_eos\":true");
  if (request.min_tokens) {
    out.append(",\"");
    out.append(request.min_tokens_field);
    out.append("\":");
    AppendUnsigned(out, *request.min_tokens);
  }
  if (request.temperature) {
    out.append(",\"temperature\":");
    AppendDouble(out, *request.temperature);
  }
  if (request.seed) {
    out.append(",\"seed\":");
    AppendUnsigned(out, *request.seed);
  }
  if (request.constraint) AppendConstraint(out, *request.constraint);
  out.push_back('}');
  return out;
}

struct OpenAiStreamDecoder::Impl {
  std::optional<std::uint64_t> last_completion_tokens;  // continuous usage, per stream
};

OpenAiStreamDecoder::OpenAiStreamDecoder() : impl_(std::make_unique<Impl>()) {}
OpenAiStreamDecoder::~OpenAiStreamDecoder() = default;

void OpenAiStreamDecoder::Reset() { impl_->last_completion_tokens.reset(); }

Result<StreamChunk> OpenAiStreamDecoder::Decode(std::string_view data) {
  StreamChunk chunk;
  if (TrimSpace(data) == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  dom::object root;
  internal::ParseScratch& scratch = ThreadParseScratch();
  if (Reason reason = ParseObject(scratch.parser, data, scratch.PaddedBuffer(data.size()), root,
                                  &chunk.invalid_utf8)) {
    return ProtocolError(reason, data);
  }
  BodyView body;
  if (Reason reason = ReadBody(root, body)) return ProtocolError(reason, data);

  chunk.has_choices = body.has_choices;
  chunk.content = body.choice.content;
  chunk.reasoning = body.choice.reasoning;
  chunk.tool_arguments = body.choice.tool_arguments;
  chunk.finish_reason = body.choice.finish_reason;
  chunk.token_count = body.choice.logprob_tokens;
  chunk.usage = body.usage;
  chunk.error = ErrorMessageOf(body.error);

  if (body.usage) {
    // Continuous usage (vLLM/SGLang continuous_usage_stats): completion_tokens is cumulative, so
    // the rise since the previous usage is what this chunk carried. Without an earlier usage, a
    // mid-stream chunk's count starts from 0, but a finishing or choice-less chunk's usage is the
    // final total (include_usage only) and says nothing about this chunk.
    const std::uint64_t total = body.usage->completion_tokens;
    const bool has_baseline = impl_->last_completion_tokens.has_value();
    if (chunk.token_count == 0 && chunk.has_choices &&
        (has_baseline || chunk.finish_reason.empty())) {
      const std::uint64_t previous = has_baseline ? *impl_->last_completion_tokens : 0;
      const std::uint64_t rise = total > previous ? total - previous : 0;
      chunk.token_count = static_cast<std::uint32_t>(std::min<std::uint64_t>(rise, UINT32_MAX));
    }
    impl_->last_completion_tokens = total;
  }
  return chunk;
}

Result<CompletionResponse> DecodeCompletionResponse(std::string_view body) {
  dom::parser parser;
  const auto padded = std::make_unique<char[]>(body.size() + simdjson::SIMDJSON_PADDING);
  dom::object root;
  bool invalid_utf8 = false;
  if (Reason reason = ParseObject(parser, body, padded.get(), root, &invalid_utf8)) {
    return ProtocolError(reason, body);
  }
  BodyView view;
  if (Reason reason = ReadBody(root, view)) return ProtocolError(reason, body);
  if (std::optional<std::string> message = ErrorMessageOf(view.error)) {
    return MakeError(ErrorCode::kProtocol, "OpenAI response is an error: " + *message);
  }
  if (!view.has_choice0) return ProtocolError("no choice with index 0", body);
  CompletionResponse response;
  response.content = std::string(view.choice.content);
  response.reasoning = std::string(view.choice.reasoning);
  response.tool_arguments = std::string(view.choice.tool_arguments);
  response.finish_reason = std::string(view.choice.finish_reason);
  response.usage = view.usage;
  response.invalid_utf8 = invalid_utf8;
  return response;
}

std::optional<std::string> DecodeErrorMessage(std::string_view body) {
  dom::parser parser;
  const auto padded = std::make_unique<char[]>(body.size() + simdjson::SIMDJSON_PADDING);
  dom::object root;
  if (ParseObject(parser, body, padded.get(), root) != nullptr) return std::nullopt;
  ErrorFields error;
  std::optional<dom::element> detail;
  for (const dom::key_value_pair field : root) {
    if (!CollectErrorField(field, error) && field.key == "detail" && !field.value.is_null()) {
      detail = field.value;
    }
  }
  if (std::optional<std::string> message = ErrorMessageOf(error)) return message;
  if (detail) {  // FastAPI: a string, or a list of validation problems
    std::string_view text;
    if (detail->get_string().get(text) == simdjson::SUCCESS) return CapMessage(text);
    return CapMessage(simdjson::minify(*detail));
  }
  return std::nullopt;
}

}  // namespace bakeoff::dialect
