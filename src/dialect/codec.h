// dialect/codec.h
//
// Owns: picking the codec of a request's route: its body, its stream decoder and its whole-answer
// decoder, OpenAI (dialect/openai.h) or native (dialect/native.h). The load runner, the probes
// and the calibration call these, so a route is chosen in one place.
//
// Thread-safety: as the codecs (a StreamDecoder on one thread; encoding pure).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "dialect/native.h"
#include "dialect/openai.h"
#include "dialect/pooling.h"
#include "dialect/request.h"

namespace bakeoff::dialect {

// The JSON body of `request` on its route.
std::string EncodeRequestBody(const GenerationRequest& request);

// Decodes one stream payload of the route it was made for.
class StreamDecoder {
 public:
  // REQUIRES: ApiStreams(api).
  explicit StreamDecoder(Api api);
  Result<StreamChunk> Decode(std::string_view data);
  // Resets per-stream state before reusing the decoder.
  void Reset();

 private:
  OpenAiStreamDecoder openai_;
  std::optional<NativeStreamDecoder> native_;
};

// A whole answer on `api`'s route.
Result<CompletionResponse> DecodeResponse(Api api, std::string_view body);

}  // namespace bakeoff::dialect
