// dialect/codec.cc: the codec of a request's route (codec.h).
#include "dialect/codec.h"

#include "core/check.h"

namespace bakeoff::dialect {

std::string EncodeRequestBody(const GenerationRequest& request) {
  if (!ApiGenerates(request.api)) return EncodePoolingRequestBody(request);
  return IsOpenAiApi(request.api) ? EncodeOpenAiRequestBody(request) : EncodeNativeRequestBody(request);
}

StreamDecoder::StreamDecoder(Api api) {
  BAKEOFF_CHECK(ApiStreams(api)) << ApiName(api) << " does not stream";
  if (!IsOpenAiApi(api)) native_.emplace(api);
}

Result<StreamChunk> StreamDecoder::Decode(std::string_view data) {
  return native_ ? native_->Decode(data) : openai_.Decode(data);
}

void StreamDecoder::Reset() { openai_.Reset(); }

Result<CompletionResponse> DecodeResponse(Api api, std::string_view body) {
  if (!ApiGenerates(api)) return DecodePoolingResponse(api, body);
  return IsOpenAiApi(api) ? DecodeCompletionResponse(body) : DecodeNativeResponse(api, body);
}

}  // namespace bakeoff::dialect
