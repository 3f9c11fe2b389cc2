// emulate/openai_api.h
//
// Owns: the emulated engine's OpenAI-compatible surface, independent of transport: parsing and
// validating /v1/completions, /v1/chat/completions and /tokenize request bodies, and rendering
// every response body and SSE event in vLLM's shapes (../shared/reference/engine-interfaces.md
// 1.1-1.7). Streaming events are rendered from per-request prerendered templates: only the token
// text and the finish reason vary, so rendering an event is three appends and no JSON library.
// Does not own: sockets, HTTP framing or timing (emulate/server.h), tokenization rules
// (emulate/tokenizer.h).
//
// Prompt tokens: completions tokenize the prompt text with the emulator's tokenizer (a token-id
// array is used as is, each id taken modulo kVocabSize); chat tokenizes all message contents
// (string contents and the `text` of content parts) joined with "\n", so the count is the sum
// over messages (no chat template is applied and the role adds nothing). The ids feed the engine
// model's prefix cache (emulate/kv_cache.h).
//
// Thread-safety: pure functions; a ResponseRenderer is immutable after construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "emulate/scheduler.h"

namespace bakeoff::emulate {

enum class Endpoint : std::uint8_t { kCompletions, kChat };

// An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string type = "BadRequestError";
  std::string message;
  std::string param;  // empty renders as null
};

ApiError BadRequest(std::string message, std::string param = {});
ApiError NotFound(std::string message, std::string param = {});

// {"error":{"message":...,"type":...,"param":...|null,"code":status}}
std::string RenderError(const ApiError& error);

// What the server is serving; requests are validated against it.
struct ServedModel {
  std::string name;                   // the only model name accepted
  std::int64_t max_model_len = 32768;
};

// A validated generation request.
struct GenerationSpec {
  Endpoint endpoint = Endpoint::kChat;
  std::vector<TokenId> prompt;     // the prompt's token ids (see above); may be empty in tests
  std::int64_t prompt_tokens = 0;  // prompt.size() once parsed
  std::int64_t max_tokens = 16;
  std::int64_t min_tokens = 0;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::uint64_t seed = 0;      // selects the output words (tokenizer.h OutputPiece)
};

// Parses and validates a request body. Errors: invalid JSON, wrong field types, missing
// prompt/messages, an empty prompt (no tokens), a negative token id, n != 1, stream_options
// without stream, max_tokens < 1, min_tokens > max_tokens, prompt or prompt + max_tokens over
// max_model_len -> 400; a `model` other than served.name -> 404 ("The model `X` does not
// exist."). An absent `model` means the served one.
// Default max_tokens: 16 for completions, max_model_len - prompt_tokens for chat (as vLLM).
std::variant<GenerationSpec, ApiError> ParseGenerationRequest(Endpoint endpoint,
                                                              std::string_view body,
                                                              const ServedModel& served);

// POST /tokenize: request {"model"?, "prompt"} or {"model"?, "messages"}; on success the
// response body {"count": N, "max_model_len": M, "tokens": [ids...]}.
std::variant<std::string, ApiError> RenderTokenizeResponse(std::string_view body,
                                                           const ServedModel& served);

// GET /v1/models: one card with owned_by "bakeoff-emulated" and max_model_len.
std::string RenderModelsResponse(const ServedModel& served, std::int64_t created_unix_s);

// Renders one request's responses. The id is "chatcmpl-<hex>" or "cmpl-<hex>" from
// request_number.
class ResponseRenderer {
 public:
  ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                   std::uint64_t request_number, std::int64_t created_unix_s);

  // Chat only: `data: {... "delta":{"role":"assistant","content":""} ...}\n\n`; no-op for
  // completions.
  void AppendRoleEvent(std::string& out) const;
  // One SSE event carrying output token `index`; `finish` set on the last token.
  void AppendTokenEvent(std::string& out, std::int64_t index,
                        std::optional<FinishReason> finish) const;
  // One SSE event carrying output tokens [first, first + count) as one text; `finish` set when
  // the last of them is the sequence's last token. REQUIRES: count >= 1.
  void AppendTokensEvent(std::string& out, std::int64_t first, std::int64_t count,
                         std::optional<FinishReason> finish) const;
  // `data: {... "choices":[],"usage":{...}}\n\n`, for stream_options.include_usage. With
  // `cached_tokens`, usage also carries "prompt_tokens_details":{"cached_tokens":N} (vLLM with
  // prefix caching and prompt-token details on).
  void AppendUsageEvent(std::string& out, std::int64_t completion_tokens,
                        std::optional<std::int64_t> cached_tokens = std::nullopt) const;
  // `data: [DONE]\n\n`.
  static void AppendDone(std::string& out);
  // `data: {"error":{...}}\n\n`: an error after the 200 header (vLLM's shape, RenderError).
  static void AppendErrorEvent(std::string& out, const ApiError& error);
  // The non-streaming body: the whole text, finish_reason and usage (with
  // prompt_tokens_details as in AppendUsageEvent).
  std::string RenderFullBody(std::int64_t completion_tokens, FinishReason finish,
                             std::optional<std::int64_t> cached_tokens = std::nullopt) const;

  const GenerationSpec& spec() const { return spec_; }

 private:
  GenerationSpec spec_;
  std::string id_;          // "chatcmpl-..." / "cmpl-..."
  std::string model_json_;  // quoted, escaped
  std::int64_t created_ = 0;
  std::string head_;        // `data: {"id":...,"model":...,"choices":` shared by all events
  std::string token_prefix_;  // head_ + `[{"index":0,"delta":{"content":"` (or "text")
};

const char* FinishReasonName(FinishReason reason);

}  // namespace bakeoff::emulate
