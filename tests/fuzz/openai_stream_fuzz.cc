// tests/fuzz/openai_stream_fuzz.cc
//
// Owns: the libFuzzer harness for the OpenAI-compatible dialect (dialect/openai.h). The input is
// fed as one stream payload, then split at its first byte's position into two payloads on the same
// decoder (exercising continuous-usage state), then to DecodeCompletionResponse and
// DecodeErrorMessage and every tokenize dialect's DecodeTokenizeCount (dialect/tokenize.h), and
// finally used as the prompt of an encoded request. Invariants checked:
// decoding is deterministic; failures are kProtocol with a short, valid-UTF-8 message; every view
// a chunk returns is readable (ASan); an error message is at most 1024 bytes (+ "..."); the encoded
// request is valid JSON and, for valid UTF-8 input, gives the prompt back unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "core/check.h"
#include "dialect/codec.h"
#include "chunk_digest.h"
#include "dialect/tokenize.h"

namespace {

using bakeoff::ErrorCode;
using bakeoff::Result;
using bakeoff::dialect::OpenAiStreamDecoder;
using bakeoff::dialect::StreamChunk;
using bakeoff::fuzz::Digest;
using bakeoff::fuzz::kMaxErrorBytes;
using bakeoff::fuzz::ValidUtf8;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  static OpenAiStreamDecoder decoder;
  decoder.Reset();
  const std::uint64_t first = Digest(decoder.Decode(input));
  decoder.Reset();
  BAKEOFF_CHECK(Digest(decoder.Decode(input)) == first) << "Decode is not deterministic";

  // Two payloads on one stream: the first byte picks the split.
  decoder.Reset();
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  (void)Digest(decoder.Decode(input.substr(0, cut)));
  (void)Digest(decoder.Decode(input.substr(cut)));

  if (auto response = bakeoff::dialect::DecodeCompletionResponse(input); response.ok()) {
    BAKEOFF_CHECK(ValidUtf8(response->content) && ValidUtf8(response->reasoning));
  } else {
    BAKEOFF_CHECK(response.error().code == ErrorCode::kProtocol);
  }
  if (const auto message = bakeoff::dialect::DecodeErrorMessage(input)) {
    BAKEOFF_CHECK(message->size() <= kMaxErrorBytes && ValidUtf8(*message));
  }

  for (const bakeoff::dialect::TokenizeDialect dialect : bakeoff::dialect::kTokenizeDialects) {
    const Result<std::uint64_t> count = bakeoff::dialect::DecodeTokenizeCount(dialect, input);
    BAKEOFF_CHECK(count.ok() || count.error().code == ErrorCode::kProtocol) << count.error().message;
  }

  bakeoff::dialect::GenerationRequest request;
  request.api = bakeoff::dialect::Api::kCompletions;
  request.prompt = std::string(input);
  const std::string body = bakeoff::dialect::EncodeRequestBody(request);
  static simdjson::dom::parser parser;
  simdjson::dom::element root;
  BAKEOFF_CHECK(parser.parse(body).get(root) == simdjson::SUCCESS) << "encoded body is not JSON";
  std::string_view prompt;
  BAKEOFF_CHECK(root["prompt"].get_string().get(prompt) == simdjson::SUCCESS);
  if (ValidUtf8(input)) BAKEOFF_CHECK(prompt == input) << "prompt changed in encoding";
  return 0;
}
