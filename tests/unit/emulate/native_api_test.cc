// tests/unit/emulate/native_api_test.cc
//
// Owns: tests of the emulated engine's native routes (emulate/native_api.h): which paths they
// are, how their bodies are read and refused, and that what the renderer writes in each wire is
// what bakeoff's own native decoders (dialect/native.h) read back.
#include "emulate/native_api.h"

#include "emulate/pooling_api.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dialect/codec.h"
#include "net/ndjson.h"
#include "net/sse.h"

namespace bakeoff::emulate {
namespace {

using nlohmann::json;

ServedModel Served() {
  ServedModel served;
  served.name = "m";
  served.max_model_len = 256;
  return served;
}

GenerationSpec MustParse(const NativeRoute& route, const std::string& body) {
  auto parsed = ParseNativeRequest(route, body, Served());
  if (auto* error = std::get_if<ApiError>(&parsed)) ADD_FAILURE() << error->status << " " << error->message;
  return std::holds_alternative<GenerationSpec>(parsed) ? std::get<GenerationSpec>(parsed) : GenerationSpec{};
}

ApiError MustRefuse(const NativeRoute& route, const std::string& body) {
  auto parsed = ParseNativeRequest(route, body, Served());
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(NativeRouteTest, PathsNameTheWireTheModelAndWhetherItStreams) {
  EXPECT_EQ(MatchNativeRoute("/api/generate")->wire, Wire::kOllamaGenerate);
  EXPECT_FALSE(MatchNativeRoute("/api/chat")->stream);
  EXPECT_EQ(MatchNativeRoute("/generate_stream")->stream, true);
  const std::optional<NativeRoute> triton = MatchNativeRoute("/v2/models/org%2Fm/generate_stream");
  ASSERT_TRUE(triton);
  EXPECT_EQ(triton->wire, Wire::kTriton);
  EXPECT_EQ(triton->model, "org/m");
  EXPECT_EQ(MatchNativeRoute("/v2/models/m/infer")->wire, Wire::kKserve);
  EXPECT_FALSE(MatchNativeRoute("/v2/models/m/ready"));
  EXPECT_FALSE(MatchNativeRoute("/v2/models//infer"));
  EXPECT_FALSE(MatchNativeRoute("/v1/chat/completions"));
}

TEST(NativeRouteTest, BodiesAreReadLikeTheEnginesAndRefusedInTheirWords) {
  const NativeRoute ollama{Wire::kOllamaGenerate, std::nullopt, ""};
  const GenerationSpec g = MustParse(ollama, R"({"model":"m","prompt":"hello there","options":{"num_predict":5,"seed":3}})");
  EXPECT_TRUE(g.stream);  // Ollama streams unless told not to
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(g.seed, 3u);
  EXPECT_TRUE(g.include_usage);
  EXPECT_EQ(g.wire, Wire::kOllamaGenerate);
  EXPECT_FALSE(g.ignore_eos);
  EXPECT_EQ(MustRefuse(ollama, R"({"prompt":"x"})").message, "model is required");
  EXPECT_EQ(MustRefuse(ollama, R"({"model":"other","prompt":"x"})").status, 404);

  const NativeRoute tgi{Wire::kTgi, true, ""};
  EXPECT_EQ(MustParse(tgi, R"({"inputs":"hello","parameters":{"max_new_tokens":4}})").max_tokens, 4);
  const ApiError cold = MustRefuse(tgi, R"({"inputs":"hello","parameters":{"temperature":0}})");
  EXPECT_EQ(cold.status, 422);
  EXPECT_EQ(RenderErrorFor(Wire::kTgi, cold), R"({"error":"`temperature` must be strictly positive","error_type":"validation"})");
  EXPECT_EQ(MustRefuse(tgi, R"({"parameters":{}})").status, 422);

  const NativeRoute triton{Wire::kTriton, false, "m"};
  EXPECT_EQ(MustParse(triton, R"({"text_input":"hello","max_tokens":6})").max_tokens, 6);
  EXPECT_EQ(MustRefuse(NativeRoute{Wire::kTriton, false, "x"}, R"({"text_input":"hello"})").status, 404);
  const NativeRoute v2{Wire::kKserve, false, "m"};
  EXPECT_EQ(MustParse(v2, R"({"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1,1],"data":[["hello"]]},
                                         {"name":"max_tokens","datatype":"INT32","shape":[1],"data":[2]}]})")
                .max_tokens,
            2);
  EXPECT_NE(MustRefuse(v2, R"({"inputs":[]})").message.find("text_input"), std::string::npos);
  EXPECT_EQ(RenderErrorFor(Wire::kKserve, BadRequest("no")), R"({"error":"no"})");
  EXPECT_EQ(MustRefuse(v2, "{").message, "the body is not valid JSON");
}

// Renders a whole stream of `spec` and decodes it as bakeoff's load does.
struct Decoded {
  std::string text;
  std::string finish;
  std::optional<dialect::Usage> usage;
  bool done = false;
};

Decoded RenderAndDecode(const GenerationSpec& spec, dialect::Api api, std::int64_t tokens) {
  ResponseRenderer renderer(spec, Served(), 1, 1764583200);
  std::vector<ChoiceProgress> progress(1);
  std::string out;
  for (std::int64_t emitted = 1; emitted <= tokens; ++emitted) {
    renderer.AppendProgress(out, progress, emitted, std::nullopt, 1, true);
  }
  renderer.AppendUsageEvent(out, renderer.CompletionTokens(tokens));
  renderer.AppendStreamEnd(out);
  std::vector<std::string> payloads;
  if (dialect::StreamFraming(api) == dialect::Framing::kNdjson) {
    net::NdjsonDecoder ndjson;
    EXPECT_TRUE(ndjson.Feed(out, &payloads).ok());
    ndjson.Finish(&payloads);
  } else {
    net::SseDecoder sse;
    std::vector<net::SseEvent> events;
    EXPECT_TRUE(sse.Feed(out, &events).ok());
    for (const net::SseEvent& e : events) payloads.push_back(e.data);
  }
  dialect::StreamDecoder decoder(api);
  Decoded d;
  for (const std::string& payload : payloads) {
    Result<dialect::StreamChunk> chunk = decoder.Decode(payload);
    EXPECT_TRUE(chunk.ok()) << chunk.error().message << " in " << payload;
    if (!chunk.ok()) continue;
    d.text += chunk->content;
    if (!chunk->finish_reason.empty()) d.finish = chunk->finish_reason;
    if (chunk->usage) d.usage = chunk->usage;
    d.done = d.done || chunk->done;
  }
  return d;
}

TEST(NativeRenderTest, WhatTheEmulatorStreamsIsWhatTheClientReads) {
  const GenerationSpec ollama = MustParse({Wire::kOllamaChat, std::nullopt, ""},
                                          R"({"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":4}})");
  const Decoded o = RenderAndDecode(ollama, dialect::Api::kOllamaChat, 4);
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.finish, "length");
  ASSERT_TRUE(o.usage);
  EXPECT_EQ(o.usage->completion_tokens, 4u);
  EXPECT_EQ(o.usage->prompt_tokens, static_cast<std::uint64_t>(ollama.prompt_tokens));

  const GenerationSpec tgi = MustParse({Wire::kTgi, true, ""}, R"({"inputs":"hello","parameters":{"max_new_tokens":3}})");
  const Decoded t = RenderAndDecode(tgi, dialect::Api::kTgiGenerate, 3);
  EXPECT_TRUE(t.done);
  EXPECT_EQ(t.finish, "length");
  ASSERT_TRUE(t.usage);
  EXPECT_EQ(t.usage->completion_tokens, 3u);
  EXPECT_FALSE(t.usage->prompt_known);

  const GenerationSpec triton = MustParse({Wire::kTriton, true, "m"}, R"({"text_input":"hello","max_tokens":3})");
  const Decoded r = RenderAndDecode(triton, dialect::Api::kTritonGenerate, 3);
  EXPECT_FALSE(r.done);  // no end marker: the body's end is the end
  EXPECT_FALSE(r.usage);
  EXPECT_EQ(r.text, t.text);
  EXPECT_FALSE(r.text.empty());
}

TEST(NativeRenderTest, WholeAnswersAndErrorsInEachWire) {
  for (const auto& [wire, api, route] :
       std::vector<std::tuple<Wire, dialect::Api, NativeRoute>>{
           {Wire::kOllamaGenerate, dialect::Api::kOllamaGenerate, {Wire::kOllamaGenerate, false, ""}},
           {Wire::kTgi, dialect::Api::kTgiGenerate, {Wire::kTgi, false, ""}},
           {Wire::kTriton, dialect::Api::kTritonGenerate, {Wire::kTriton, false, "m"}},
           {Wire::kKserve, dialect::Api::kKserveInfer, {Wire::kKserve, false, "m"}}}) {
    SCOPED_TRACE(dialect::ApiName(api));
    const std::string body = wire == Wire::kOllamaGenerate ? R"({"model":"m","prompt":"hi","stream":false,"options":{"num_predict":2}})"
                             : wire == Wire::kTgi          ? R"({"inputs":"hi","parameters":{"max_new_tokens":2}})"
                             : wire == Wire::kTriton       ? R"({"text_input":"hi","max_tokens":2})"
                                                           : R"({"inputs":[{"name":"text_input","data":["hi"]},{"name":"max_tokens","data":[2]}]})";
    const GenerationSpec spec = MustParse(route, body);
    EXPECT_FALSE(spec.stream);
    ResponseRenderer renderer(spec, Served(), 1, 1764583200);
    Result<dialect::CompletionResponse> decoded = dialect::DecodeResponse(api, renderer.RenderFullBody(2, FinishReason::kLength));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_FALSE(decoded->content.empty());
    std::string error;
    renderer.AppendStreamError(error, ApiError{500, "InternalServerError", "boom", ""});
    EXPECT_NE(error.find(R"("error":"boom")"), std::string::npos) << error;
  }
}

TEST(PoolingRouteTest, EmbeddingsAndRerankArePrefillsWithTheirOwnAnswers) {
  EXPECT_EQ(MatchPoolingRoute("/v1/embeddings"), Wire::kEmbeddings);
  EXPECT_EQ(MatchPoolingRoute("/rerank"), Wire::kRerank);
  auto parsed = ParsePoolingRequest(Wire::kEmbeddings, R"({"input":["hello world","again"]})", Served());
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(parsed));
  const GenerationSpec embeddings = std::get<GenerationSpec>(parsed);
  EXPECT_EQ(embeddings.inputs, 2);
  EXPECT_EQ(embeddings.max_tokens, 1);  // one prefill, its token not an output
  EXPECT_FALSE(embeddings.stream);
  const json body = json::parse(RenderPoolingBody(embeddings, "\"m\""));
  ASSERT_EQ(body["data"].size(), 2u);
  double norm = 0;
  for (const json& x : body["data"][0]["embedding"]) norm += x.get<double>() * x.get<double>();
  EXPECT_NEAR(norm, 1.0, 1e-4);
  EXPECT_EQ(body["usage"]["prompt_tokens"], embeddings.prompt_tokens);
  // The same texts give the same vectors.
  EXPECT_EQ(json::parse(RenderPoolingBody(embeddings, "\"m\"")), body);

  auto rerank = ParsePoolingRequest(Wire::kRerank, R"({"query":"q","documents":["a b",{"text":"c"}]})", Served());
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(rerank));
  const GenerationSpec r = std::get<GenerationSpec>(rerank);
  EXPECT_EQ(r.inputs, 2);
  EXPECT_EQ(r.prompt_tokens, 2 * 1 + 2 + 1);  // the query before each document
  const json results = json::parse(RenderPoolingBody(r, "\"m\""))["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_GE(results[0]["relevance_score"].get<double>(), results[1]["relevance_score"].get<double>());
  for (const char* bad : {R"({"input":[]})", R"({"input":[5,-1]})", R"({"model":"x","input":"a"})", "[1]"}) {
    EXPECT_TRUE(std::holds_alternative<ApiError>(ParsePoolingRequest(Wire::kEmbeddings, bad, Served()))) << bad;
  }
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParsePoolingRequest(Wire::kRerank, R"({"query":"q","documents":[1]})", Served())));
  // One request's inputs share one sequence's context.
  ServedModel small = Served();
  small.max_model_len = 3;
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParsePoolingRequest(Wire::kEmbeddings, R"({"input":["a b","c d"]})", small)));
}

TEST(StructuredAndLoraTest, ChoicesAdaptersAndRefusedRegexes) {
  ServedModel served = Served();
  served.lora_adapters = {"sql", "fr"};
  auto parsed = ParseGenerationRequest(Endpoint::kChat,
                                       R"({"model":"fr","messages":[{"role":"user","content":"hi"}],"structured_outputs":{"choice":["oui","non"]}})",
                                       served);
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(parsed));
  EXPECT_EQ(std::get<GenerationSpec>(parsed).lora, 2u);
  EXPECT_EQ(std::get<GenerationSpec>(parsed).choice_text, "oui");
  auto regex = ParseGenerationRequest(Endpoint::kChat,
                                      R"({"messages":[{"role":"user","content":"hi"}],"structured_outputs":{"regex":"[a-z]+"}})", served);
  ASSERT_TRUE(std::holds_alternative<ApiError>(regex));
  EXPECT_NE(std::get<ApiError>(regex).message.find("regex"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      ParseGenerationRequest(Endpoint::kChat, R"({"model":"de","messages":[{"role":"user","content":"hi"}]})", served)));
  const json listing = json::parse(RenderModelsResponse(served, 0));
  ASSERT_EQ(listing["data"].size(), 3u);
  EXPECT_EQ(listing["data"][1]["id"], "sql");
  EXPECT_EQ(listing["data"][1]["parent"], "m");
}

}  // namespace
}  // namespace bakeoff::emulate
