// dialect/openai.h
//
// Owns: the OpenAI-compatible dialect: encoding /v1/completions and /v1/chat/completions request
// bodies, and decoding their responses, streamed (one SSE `data:` payload at a time) or whole.
// Decoding tolerates every engine's extra fields (timings, metrics, sglext, stop_reason, ...),
// accepts usage on any chunk (including one with finish_reason), and recognises mid-stream
// `{"error": ...}` objects (nested or flat vLLM/SGLang shapes). See
// ../shared/reference/engine-interfaces.md section 10.3-10.4 for the engines' differences.
// Does not own: SSE framing (net/sse.h) or timing (measure/).
//
// Thread-safety: an OpenAiStreamDecoder is used by one thread; decoders on one thread share one
// parser (see StreamChunk); encoding functions are pure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace bakeoff::dialect {

enum class Api { kCompletions, kChat };
const char* ApiPath(Api api);  // "/v1/completions" or "/v1/chat/completions"

struct GenerationRequest {
  Api api = Api::kChat;
  std::string model;
  std::string prompt;  // completions: the prompt; chat: one user message
  std::string system;  // chat only: optional system message ("" = none)
  // Chat only: earlier turns of a conversation, (role, content) in order, sent between the system
  // message and `prompt` (the new user turn).
  std::vector<std::pair<std::string, std::string>> history;
  std::uint32_t max_tokens = 128;
  bool stream = true;
  bool include_usage = true;       // stream_options.include_usage (only sent when stream)
  bool continuous_usage = false;   // stream_options.continuous_usage_stats (vLLM): usage per chunk
  bool ignore_eos = false;         // vLLM/SGLang extension; sent only when true
  std::optional<std::uint32_t> min_tokens;
  // The name min_tokens is sent under: "min_tokens" (vLLM, SGLang, TensorRT-LLM, Triton) or
  // "min_new_tokens" (LMDeploy); the engine adapter (target/adapters.h) says which.
  const char* min_tokens_field = "min_tokens";
  std::optional<double> temperature;
  std::optional<std::uint64_t> seed;
};

// The JSON body for `request`. Never fails: every field is already typed.
std::string EncodeRequestBody(const GenerationRequest& request);

struct Usage {
  std::uint64_t prompt_tokens = 0;
  std::uint64_t completion_tokens = 0;
  std::optional<std::uint64_t> cached_tokens;  // prompt_tokens_details.cached_tokens
  bool operator==(const Usage&) const = default;
};

// What one SSE data payload said. Views point into a parse buffer shared by every decoder on the
// calling thread and are valid until the next Decode call on that thread. Only the choice with `index` 0 (or the first choice without an `index`) is read;
// bakeoff never asks for n > 1, and other choices' text is ignored.
struct StreamChunk {
  bool done = false;               // the payload was the literal [DONE]
  bool has_choices = false;        // a non-empty choices array was present
  std::string_view content;        // generated text in this chunk (text or delta.content)
  std::string_view reasoning;      // delta.reasoning_content or delta.reasoning
  std::uint32_t token_count = 0;   // tokens this chunk carries when the server says so; 0 = unknown.
                                   // From logprobs entries (chat `logprobs.content`, completions
                                   // `logprobs.tokens`) when present, else from continuous usage:
                                   // the rise of usage.completion_tokens over the previous chunk
                                   // with usage. A first usage seen on a chunk that also finishes
                                   // (SGLang/llama.cpp final usage) or has no choices is a total,
                                   // not a per-chunk count, and gives 0.
  std::optional<Usage> usage;
  std::string_view finish_reason;  // "" when absent or null
  std::optional<std::string> error;  // message of an {"error": ...} object in the stream
                                     // (at most 1024 bytes, longer messages are cut)
  bool invalid_utf8 = false;  // the payload had bytes that are not UTF-8; they read as '?'
};

class OpenAiStreamDecoder {
 public:
  OpenAiStreamDecoder();
  ~OpenAiStreamDecoder();
  OpenAiStreamDecoder(const OpenAiStreamDecoder&) = delete;
  OpenAiStreamDecoder& operator=(const OpenAiStreamDecoder&) = delete;

  // Decodes one `data:` payload (surrounding ASCII whitespace allowed). Bytes that are not valid
  // UTF-8 are read as '?' and flagged (StreamChunk::invalid_utf8), not refused: an engine may cut
  // a character between two tokens. Returns a kProtocol error for bytes that are not JSON (JSON
  // nested past the parser's depth limit is named as such), JSON that is not an object, or a field bakeoff reads that has the
  // wrong type (`choices` not an array, a choice not an object, text/content/reasoning/
  // finish_reason not a string or null, `usage` not an object or null, a token count not a
  // non-negative integer). The message quotes at most 200 bytes of the payload. Unknown fields and
  // `logprobs` of an unexpected shape are ignored.
  Result<StreamChunk> Decode(std::string_view data);

  // Resets per-stream state (the continuous-usage counter) before reusing the decoder.
  void Reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A non-streaming response body, decoded.
struct CompletionResponse {
  std::string content;
  std::string reasoning;
  std::string finish_reason;
  std::optional<Usage> usage;
  bool invalid_utf8 = false;  // the body had bytes that are not UTF-8; they read as '?'
};
// Completions `choices[0].text` or chat `choices[0].message.content` (+ `reasoning_content` or
// `reasoning`), index-0 choice only as for streams. Errors (kProtocol): not JSON, wrong field types
// (as Decode), no choices, or the body is an error object (the message says so and quotes it).
Result<CompletionResponse> DecodeCompletionResponse(std::string_view body);

// The message of an OpenAI-shaped error body ({"error":{"message":..}}, {"error":"..."}, the
// flat {"object":"error","message":..}, or FastAPI's {"detail": ...} as sent by Triton's OpenAI
// frontend); nullopt if the body is not JSON or has none of these shapes. At most 1024 bytes.
std::optional<std::string> DecodeErrorMessage(std::string_view body);

}  // namespace bakeoff::dialect
