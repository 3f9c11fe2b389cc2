// emulate/openai_render_native.cc: ResponseRenderer's answers on the native wires
// (emulate/native_api.h): Ollama's NDJSON lines, TGI's and Triton's SSE events, and their whole
// bodies, pooling's included (contract in openai_api.h; shapes in
// ../shared/reference/engine-interfaces.md 4, 6, 7, 9).
#include "emulate/openai_render_internal.h"

#include <algorithm>
#include <ctime>
#include <iterator>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "emulate/pooling_api.h"

namespace bakeoff::emulate {

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

}  // namespace

namespace render_internal {

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

}  // namespace render_internal

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

}  // namespace bakeoff::emulate
