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
#include "dialect/tokenize.h"

namespace {

using bakeoff::ErrorCode;
using bakeoff::Result;
using bakeoff::dialect::OpenAiStreamDecoder;
using bakeoff::dialect::StreamChunk;

constexpr std::size_t kMaxProtocolMessageBytes = 200 + 100;  // excerpt + fixed wording
constexpr std::size_t kMaxErrorBytes = 1024 + 3;

bool ValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

// Reads every byte a chunk points at and returns a digest, so dangling views fault under ASan.
std::uint64_t Digest(const Result<StreamChunk>& result) {
  if (!result.ok()) {
    BAKEOFF_CHECK(result.error().code == ErrorCode::kProtocol) << result.error().message;
    BAKEOFF_CHECK(result.error().message.size() <= kMaxProtocolMessageBytes) << result.error().message;
    BAKEOFF_CHECK(ValidUtf8(result.error().message)) << "protocol message is not UTF-8";
    return 1;
  }
  const StreamChunk& chunk = *result;
  std::uint64_t digest = 0x9E3779B97F4A7C15ull;
  for (const std::string_view view : {chunk.content, chunk.reasoning, chunk.finish_reason}) {
    for (const char c : view) digest = digest * 31 + static_cast<unsigned char>(c);
    digest = digest * 31 + view.size();
  }
  digest = digest * 31 + chunk.token_count + (chunk.done ? 7 : 0) + (chunk.has_choices ? 11 : 0);
  if (chunk.usage) digest = digest * 31 + chunk.usage->prompt_tokens * 3 + chunk.usage->completion_tokens;
  if (chunk.error) {
    BAKEOFF_CHECK(chunk.error->size() <= kMaxErrorBytes) << chunk.error->size();
    BAKEOFF_CHECK(ValidUtf8(*chunk.error)) << "error message is not UTF-8";
    digest = digest * 31 + chunk.error->size();
  }
  return digest;
}

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
