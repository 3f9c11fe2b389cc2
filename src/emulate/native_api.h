// emulate/native_api.h
//
// Owns: the emulated engine's native routes, so that bakeoff's native codecs (dialect/native.h)
// meet a server: Ollama's /api/generate and /api/chat (NDJSON, streaming unless "stream": false),
// TGI's /generate and /generate_stream, Triton's generate extension
// (/v2/models/{m}/generate[_stream]) and the Open Inference Protocol's /v2/models/{m}/infer, in
// the shapes ../shared/reference/engine-interfaces.md (4.1-4.2, 6.1-6.5, 7.1-7.6, 9.1) documents.
// A native request is read into the same GenerationSpec as an OpenAI one (the same tokenizer,
// limits, model check and engine model); its answer is rendered in its wire's shapes by
// ResponseRenderer (emulate/openai_api.h). Like the engines, no native route has ignore_eos or
// min_tokens, so answers end where the engine model's EOS draws end them.
// Does not own: sockets (emulate/server.h) or the OpenAI routes (emulate/openai_api.h).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "emulate/openai_api.h"

namespace bakeoff::emulate {

struct NativeRoute {
  Wire wire = Wire::kOllamaGenerate;
  std::optional<bool> stream;  // when the path decides it (TGI, Triton, V2 infer)
  std::string model;           // the model named in the path (Triton, V2), "" otherwise
};

// The native route `path` names; nullopt for any other path.
std::optional<NativeRoute> MatchNativeRoute(std::string_view path);

// Reads a native request. Errors as ParseGenerationRequest, plus: a missing or empty text
// (`prompt`, `inputs`, `text_input`, the `text_input` tensor) -> 400; TGI's temperature not above 0
// -> 422; TGI's validation errors are 422 (its status for them).
std::variant<GenerationSpec, ApiError> ParseNativeRequest(const NativeRoute& route, std::string_view body,
                                                          const ServedModel& served);

// The body of an error answer on `wire`: {"error": "..."} (TGI adds "error_type"); OpenAI's
// shape for Wire::kOpenAi.
std::string RenderErrorFor(Wire wire, const ApiError& error);

// The Content-Type of a stream on `wire`.
const char* StreamContentType(Wire wire);

}  // namespace bakeoff::emulate
