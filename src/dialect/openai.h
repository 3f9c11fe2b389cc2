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
#include "dialect/request.h"

namespace bakeoff::dialect {

// The JSON body for `request` on an OpenAI route (REQUIRES: IsOpenAiApi(request.api)). Never
// fails: every field is already typed.
std::string EncodeOpenAiRequestBody(const GenerationRequest& request);

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

// Completions `choices[0].text` or chat `choices[0].message.content` (+ `reasoning_content` or
// `reasoning`), index-0 choice only as for streams. Errors (kProtocol): not JSON, wrong field types
// (as Decode), no choices, or the body is an error object (the message says so and quotes it).
Result<CompletionResponse> DecodeCompletionResponse(std::string_view body);

// The message of an OpenAI-shaped error body ({"error":{"message":..}}, {"error":"..."}, the
// flat {"object":"error","message":..}, or FastAPI's {"detail": ...} as sent by Triton's OpenAI
// frontend); nullopt if the body is not JSON or has none of these shapes. At most 1024 bytes.
std::optional<std::string> DecodeErrorMessage(std::string_view body);

}  // namespace bakeoff::dialect
