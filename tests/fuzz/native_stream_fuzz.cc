// tests/fuzz/native_stream_fuzz.cc
//
// Owns: the libFuzzer harness for the engines' native routes (dialect/native.h) and the pooling
// routes (dialect/pooling.h, whole answers only). The input is
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
#include "chunk_digest.h"

namespace {

using bakeoff::ErrorCode;
using bakeoff::Result;
using bakeoff::dialect::Api;
using bakeoff::dialect::StreamChunk;
using bakeoff::fuzz::Digest;
using bakeoff::fuzz::ValidUtf8;

constexpr Api kNativeApis[] = {Api::kOllamaGenerate, Api::kOllamaChat, Api::kTgiGenerate, Api::kTritonGenerate,
                               Api::kKserveInfer,    Api::kEmbeddings, Api::kRerank};
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
    request.inputs = {std::string(input), std::string(input.substr(0, 3))};
    const std::string body = bakeoff::dialect::EncodeRequestBody(request);
    simdjson::dom::element root;
    BAKEOFF_CHECK(parser.parse(body).get(root) == simdjson::SUCCESS) << "encoded body is not JSON";
    BAKEOFF_CHECK(bakeoff::dialect::RequestPath(api, request.model, true).find_first_of(" ?#\n") ==
                  std::string::npos)
        << "a model name escaped the path segment";
  }
  return 0;
}
