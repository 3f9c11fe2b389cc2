// dialect/native.h
//
// Owns: the engines' native generation routes, encoded and decoded from their documented shapes
// (../shared/reference/engine-interfaces.md sections 4.1-4.2, 6.1-6.5, 7.1-7.6, 9.1):
//   - Ollama /api/generate and /api/chat: `options.num_predict`, `seed`, `temperature`; answers as
//     NDJSON lines (`response` or `message.content`, `thinking` as reasoning), the last with
//     "done": true, `done_reason`, `prompt_eval_count` and `eval_count`.
//   - TGI /generate and /generate_stream: `inputs` and `parameters` (`max_new_tokens`,
//     `details`: true, `seed`, and `temperature` with `do_sample` only when above 0, since TGI
//     refuses a temperature of 0); one SSE event per token (`token.text`, special tokens' text not
//     counted as output text), the last with `generated_text` and `details` (`finish_reason`,
//     `generated_tokens`). No prompt count.
//   - Triton's generate extension: `text_input`, `max_tokens`, `stream`; events and the answer
//     carry `text_output` (and `num_input_tokens` / `num_output_tokens` where the model emits
//     them). No end marker: the stream ends when the body does. Sampling fields are the model's
//     own inputs, so none are sent.
//   - The Open Inference Protocol (KServe V2) infer route: a BYTES `text_input` tensor and an
//     INT32 `max_tokens` tensor; the answer's `text_output` tensor. Whole answers only.
// Finish reasons are given in OpenAI's words: TGI's eos_token and stop_sequence are "stop".
// Error objects (`{"error": "..."}`, TGI's with `error_type`) inside a stream are reported as
// StreamChunk::error. Unknown fields are ignored; a field bakeoff reads with the wrong type is a
// kProtocol error quoting at most 200 bytes of the payload.
// Does not own: SSE or NDJSON framing (net/), the OpenAI routes (dialect/openai.h).
//
// Thread-safety: a NativeStreamDecoder is used by one thread; decoders on one thread share one
// parser (see StreamChunk); encoding is pure.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "dialect/request.h"

namespace bakeoff::dialect {

// The JSON body of `request` on its native route. A session's earlier turns and the system
// prompt are already in `prompt` for routes without messages (load/request_builder.h); for
// Ollama's chat they are messages. ignore_eos and min_tokens are not sent (no native route has
// them: ApiCanForceLength). REQUIRES: !IsOpenAiApi(request.api).
std::string EncodeNativeRequestBody(const GenerationRequest& request);

class NativeStreamDecoder {
 public:
  // REQUIRES: ApiStreams(api) && !IsOpenAiApi(api).
  explicit NativeStreamDecoder(Api api);
  // One NDJSON line (Ollama) or SSE data payload (TGI, Triton).
  Result<StreamChunk> Decode(std::string_view data);

 private:
  Api api_;
};

// A native route's whole answer. Errors (kProtocol): not JSON, wrong field types, no generated
// text at all, or the body is an error object.
Result<CompletionResponse> DecodeNativeResponse(Api api, std::string_view body);

}  // namespace bakeoff::dialect
