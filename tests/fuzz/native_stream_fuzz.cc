// tests/fuzz/native_stream_fuzz.cc
//
// Owns: the libFuzzer harness for the engines' native routes (dialect/native.h). The input is
// decoded as one stream payload by each streaming native route's decoder (twice: decoding is
// deterministic), as a whole answer of every native route, and used as the prompt of a request
// encoded for each. Invariants: failures are kProtocol with a short, valid-UTF-8 message naming
// the engine; every view a chunk returns is readable (ASan); an error message is at most 1024
// bytes (+ "..."); each encoded request is valid JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "core/check.h"
#include "dialect/codec.h"

namespace {

using bakeoff::ErrorCode;
using bakeoff::Result;
using bakeoff::dialect::Api;
using bakeoff::dialect::StreamChunk;

constexpr Api kNativeApis[] = {Api::kOllamaGenerate, Api::kOllamaChat, Api::kTgiGenerate, Api::kTritonGenerate,
                               Api::kKserveInfer};
constexpr std::size_t kMaxProtocolMessageBytes = 200 + 100;  // excerpt + fixed wording
constexpr std::size_t kMaxErrorBytes = 1024 + 3;

bool ValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

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
  }
  return digest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  static simdjson::dom::parser parser;
  for (const Api api : kNativeApis) {
    if (bakeoff::dialect::ApiStreams(api)) {
      bakeoff::dialect::StreamDecoder decoder(api);
      const std::uint64_t first = Digest(decoder.Decode(input));
      BAKEOFF_CHECK(Digest(decoder.Decode(input)) == first) << "Decode is not deterministic";
    }
    if (auto response = bakeoff::dialect::DecodeResponse(api, input); response.ok()) {
      BAKEOFF_CHECK(ValidUtf8(response->content) && ValidUtf8(response->reasoning));
    } else {
      BAKEOFF_CHECK(response.error().code == ErrorCode::kProtocol);
      BAKEOFF_CHECK(ValidUtf8(response.error().message));
    }
    bakeoff::dialect::GenerationRequest request;
    request.api = api;
    request.model = std::string(input.substr(0, 16));
    request.prompt = std::string(input);
    request.history = {{"user", std::string(input.substr(0, 8))}};
    const std::string body = bakeoff::dialect::EncodeRequestBody(request);
    simdjson::dom::element root;
    BAKEOFF_CHECK(parser.parse(body).get(root) == simdjson::SUCCESS) << "encoded body is not JSON";
    BAKEOFF_CHECK(bakeoff::dialect::RequestPath(api, request.model, true).find_first_of(" ?#\n") ==
                  std::string::npos)
        << "a model name escaped the path segment";
  }
  return 0;
}
