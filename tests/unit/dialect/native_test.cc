// tests/unit/dialect/native_test.cc
//
// Owns: tests of the engines' native routes (dialect/native.h) and of the route table
// (dialect/request.h): request bodies per route (read back with nlohmann), Ollama's NDJSON lines,
// TGI's and Triton's SSE payloads and the V2 infer answer, as the engines document them
// (../shared/reference/engine-interfaces.md 4.1-4.2, 6.2-6.5, 7.2-7.6, 9.1), with their errors.
#include "dialect/native.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dialect/codec.h"

namespace bakeoff::dialect {
namespace {

using nlohmann::json;

GenerationRequest Request(Api api) {
  GenerationRequest r;
  r.api = api;
  r.model = "m";
  r.prompt = "Where is \"Paris\"?";
  r.max_tokens = 7;
  r.ignore_eos = true;
  r.min_tokens = 7;
  r.seed = 42;
  r.temperature = 0.0;
  return r;
}

TEST(ApiTableTest, NamesParseBackAndEveryRouteHasAPath) {
  for (const char* name : {"chat", "completions", "ollama-generate", "ollama-chat", "tgi-generate",
                           "triton-generate", "kserve-infer"}) {
    const std::optional<Api> api = ParseApiName(name);
    ASSERT_TRUE(api) << name;
    EXPECT_STREQ(ApiName(*api), name);
    EXPECT_EQ(RequestPath(*api, "m", true).front(), '/');
  }
  EXPECT_FALSE(ParseApiName("openai"));
  EXPECT_EQ(RequestPath(Api::kOllamaGenerate, "m", true), "/api/generate");
  EXPECT_EQ(RequestPath(Api::kTgiGenerate, "m", true), "/generate_stream");
  EXPECT_EQ(RequestPath(Api::kTgiGenerate, "m", false), "/generate");
  // A model name is one path segment: '/' and ':' are escaped.
  EXPECT_EQ(RequestPath(Api::kTritonGenerate, "org/llama:8b", true), "/v2/models/org%2Fllama%3A8b/generate_stream");
  EXPECT_EQ(RequestPath(Api::kKserveInfer, "llama3", false), "/v2/models/llama3/infer");
  EXPECT_FALSE(ApiStreams(Api::kKserveInfer));
  EXPECT_EQ(StreamFraming(Api::kOllamaChat), Framing::kNdjson);
  EXPECT_FALSE(StreamHasEndMarker(Api::kTritonGenerate));
  for (const Api api : {Api::kOllamaGenerate, Api::kTgiGenerate, Api::kTritonGenerate, Api::kKserveInfer}) {
    EXPECT_FALSE(ApiCanForceLength(api)) << ApiName(api);
  }
}

TEST(NativeRequestTest, OllamaGenerateAndChat) {
  const json g = json::parse(EncodeRequestBody(Request(Api::kOllamaGenerate)));
  EXPECT_EQ(g["model"], "m");
  EXPECT_EQ(g["prompt"], "Where is \"Paris\"?");
  EXPECT_EQ(g["stream"], true);
  EXPECT_EQ(g["options"]["num_predict"], 7);
  EXPECT_EQ(g["options"]["seed"], 42);
  EXPECT_EQ(g["options"]["temperature"], 0.0);
  EXPECT_FALSE(g.contains("ignore_eos"));  // Ollama has neither field [6.4]
  EXPECT_FALSE(g.dump().find("min_tokens") != std::string::npos);

  GenerationRequest chat = Request(Api::kOllamaChat);
  chat.system = "be brief";
  chat.history = {{"user", "hi"}, {"assistant", "hello"}};
  chat.stream = false;
  const json c = json::parse(EncodeRequestBody(chat));
  ASSERT_EQ(c["messages"].size(), 4u);
  EXPECT_EQ(c["messages"][0]["role"], "system");
  EXPECT_EQ(c["messages"][3]["content"], "Where is \"Paris\"?");
  EXPECT_EQ(c["stream"], false);  // Ollama streams unless told not to
}

TEST(NativeRequestTest, TgiSendsTemperatureOnlyAboveZeroAndAsksForDetails) {
  const json greedy = json::parse(EncodeRequestBody(Request(Api::kTgiGenerate)));
  EXPECT_EQ(greedy["inputs"], "Where is \"Paris\"?");
  EXPECT_EQ(greedy["parameters"]["max_new_tokens"], 7);
  EXPECT_EQ(greedy["parameters"]["details"], true);
  EXPECT_EQ(greedy["parameters"]["seed"], 42);
  EXPECT_FALSE(greedy["parameters"].contains("temperature"));  // TGI refuses 0
  EXPECT_FALSE(greedy["parameters"].contains("do_sample"));
  GenerationRequest sampled = Request(Api::kTgiGenerate);
  sampled.temperature = 0.7;
  const json s = json::parse(EncodeRequestBody(sampled));
  EXPECT_EQ(s["parameters"]["temperature"], 0.7);
  EXPECT_EQ(s["parameters"]["do_sample"], true);
}

TEST(NativeRequestTest, TritonAndV2InferShapes) {
  const json t = json::parse(EncodeRequestBody(Request(Api::kTritonGenerate)));
  EXPECT_EQ(t["text_input"], "Where is \"Paris\"?");
  EXPECT_EQ(t["max_tokens"], 7);
  EXPECT_EQ(t["stream"], true);
  EXPECT_EQ(t.size(), 3u);  // the model's own inputs only: no sampling fields
  const json k = json::parse(EncodeRequestBody(Request(Api::kKserveInfer)));
  ASSERT_EQ(k["inputs"].size(), 2u);
  EXPECT_EQ(k["inputs"][0]["name"], "text_input");
  EXPECT_EQ(k["inputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(k["inputs"][0]["data"][0], "Where is \"Paris\"?");
  EXPECT_EQ(k["inputs"][1]["datatype"], "INT32");
  EXPECT_EQ(k["inputs"][1]["data"][0], 7);
}

StreamChunk MustDecode(StreamDecoder& decoder, std::string_view data) {
  Result<StreamChunk> chunk = decoder.Decode(data);
  EXPECT_TRUE(chunk.ok()) << chunk.error().message;
  return chunk.ok() ? chunk.value() : StreamChunk{};
}

TEST(NativeStreamTest, OllamaLinesAndTheFinalCounts) {
  StreamDecoder decoder(Api::kOllamaGenerate);
  StreamChunk first = MustDecode(decoder, R"({"model":"m","created_at":"t","response":"Paris","done":false})");
  EXPECT_TRUE(first.has_choices);
  EXPECT_EQ(first.content, "Paris");
  EXPECT_FALSE(first.done);
  EXPECT_FALSE(first.usage);
  StreamChunk last = MustDecode(
      decoder, R"({"model":"m","response":"","done":true,"done_reason":"length","total_duration":5,"prompt_eval_count":12,"eval_count":3})");
  EXPECT_TRUE(last.done);
  EXPECT_EQ(last.finish_reason, "length");
  ASSERT_TRUE(last.usage);
  EXPECT_EQ(last.usage->prompt_tokens, 12u);
  EXPECT_EQ(last.usage->completion_tokens, 3u);
  EXPECT_TRUE(last.usage->prompt_known);
  // A final object without done_reason (omitempty) still ends the answer.
  EXPECT_EQ(MustDecode(decoder, R"({"response":"","done":true})").finish_reason, "stop");

  StreamDecoder chat(Api::kOllamaChat);
  StreamChunk thinking = MustDecode(chat, R"({"message":{"role":"assistant","content":"","thinking":"hmm"},"done":false})");
  EXPECT_EQ(thinking.reasoning, "hmm");
  EXPECT_EQ(MustDecode(chat, R"({"message":{"role":"assistant","content":" is"},"done":false})").content, " is");
  const StreamChunk error = MustDecode(chat, R"({"error":"model \"x\" not found, try pulling it first"})");
  ASSERT_TRUE(error.error);
  EXPECT_NE(error.error->find("not found"), std::string::npos);
}

TEST(NativeStreamTest, TgiTokensSpecialTokensAndDetails) {
  StreamDecoder decoder(Api::kTgiGenerate);
  StreamChunk token = MustDecode(
      decoder, R"({"index":1,"token":{"id":5,"text":"Paris","logprob":-0.3,"special":false},"generated_text":null,"details":null})");
  EXPECT_EQ(token.content, "Paris");
  EXPECT_EQ(token.token_count, 1u);
  EXPECT_FALSE(token.done);
  // EOS comes as a special token: a generated token, but no answer text.
  StreamChunk eos = MustDecode(
      decoder,
      R"({"index":4,"token":{"id":2,"text":"</s>","logprob":-0.1,"special":true},"generated_text":"Paris is lovely","details":{"finish_reason":"eos_token","generated_tokens":4,"seed":null}})");
  EXPECT_EQ(eos.content, "");
  EXPECT_EQ(eos.token_count, 1u);
  EXPECT_TRUE(eos.done);
  EXPECT_EQ(eos.finish_reason, "stop");  // in OpenAI's words
  ASSERT_TRUE(eos.usage);
  EXPECT_EQ(eos.usage->completion_tokens, 4u);
  EXPECT_FALSE(eos.usage->prompt_known);  // TGI's stream does not count the prompt
  const StreamChunk error = MustDecode(decoder, R"({"error":"Request failed during generation","error_type":"generation"})");
  ASSERT_TRUE(error.error);
  EXPECT_EQ(*error.error, "Request failed during generation");
}

TEST(NativeStreamTest, TritonTextAndTheModelsOwnCounts) {
  StreamDecoder decoder(Api::kTritonGenerate);
  StreamChunk text = MustDecode(decoder, R"({"model_name":"ensemble","model_version":"1","text_output":" is"})");
  EXPECT_EQ(text.content, " is");
  EXPECT_FALSE(text.done);  // Triton's stream has no end marker
  EXPECT_EQ(text.token_count, 0u);
  StreamChunk counted = MustDecode(decoder, R"({"text_output":"","num_input_tokens":12,"num_output_tokens":3})");
  ASSERT_TRUE(counted.usage);
  EXPECT_EQ(counted.usage->prompt_tokens, 12u);
  EXPECT_TRUE(counted.usage->prompt_known);
  EXPECT_TRUE(MustDecode(decoder, R"({"error":"in ensemble 'ensemble', unexpected inference input 'seed'"})").error);
}

TEST(NativeStreamTest, WrongTypesAndNonJsonAreProtocolErrorsNamingTheEngine) {
  struct Case { Api api; const char* payload; const char* says; };
  for (const Case& c : {Case{Api::kOllamaGenerate, R"({"response":5})", "`response` is not a string"},
                        Case{Api::kOllamaGenerate, R"({"done":"yes"})", "`done` is not a boolean"},
                        Case{Api::kOllamaChat, R"({"eval_count":-1,"done":true})", "token count"},
                        Case{Api::kTgiGenerate, R"({"token":{"text":1}})", "`token.text`"},
                        Case{Api::kTgiGenerate, R"({"details":[]})", "`details` is not an object"},
                        Case{Api::kTritonGenerate, R"({"text_output":[]})", "`text_output`"},
                        Case{Api::kTritonGenerate, "data: {", "not valid JSON"},
                        Case{Api::kOllamaGenerate, "[1,2]", "not a JSON object"}}) {
    StreamDecoder decoder(c.api);
    Result<StreamChunk> chunk = decoder.Decode(c.payload);
    ASSERT_FALSE(chunk.ok()) << c.payload;
    EXPECT_NE(chunk.error().message.find(c.says), std::string::npos) << chunk.error().message;
    EXPECT_EQ(chunk.error().message.find("OpenAI"), std::string::npos) << chunk.error().message;
  }
}

TEST(NativeResponseTest, WholeAnswersOfEveryRoute) {
  Result<CompletionResponse> ollama =
      DecodeResponse(Api::kOllamaChat, R"({"message":{"role":"assistant","content":"Paris"},"done":true,"done_reason":"stop","prompt_eval_count":9,"eval_count":1})");
  ASSERT_TRUE(ollama.ok()) << ollama.error().message;
  EXPECT_EQ(ollama->content, "Paris");
  EXPECT_EQ(ollama->usage->completion_tokens, 1u);
  Result<CompletionResponse> tgi = DecodeResponse(
      Api::kTgiGenerate, R"({"generated_text":"Paris is lovely","details":{"finish_reason":"length","generated_tokens":3,"seed":null,"prefill":[]}})");
  ASSERT_TRUE(tgi.ok()) << tgi.error().message;
  EXPECT_EQ(tgi->content, "Paris is lovely");
  EXPECT_EQ(tgi->finish_reason, "length");
  EXPECT_FALSE(tgi->usage->prompt_known);  // an empty prefill says nothing
  Result<CompletionResponse> triton = DecodeResponse(Api::kTritonGenerate, R"({"model_name":"e","text_output":"Paris"})");
  ASSERT_TRUE(triton.ok());
  EXPECT_EQ(triton->content, "Paris");
  EXPECT_FALSE(triton->usage);
  Result<CompletionResponse> v2 = DecodeResponse(
      Api::kKserveInfer,
      R"({"model_name":"m","outputs":[{"name":"text_output","datatype":"BYTES","shape":[1,1],"data":[["Paris"]]},{"name":"num_output_tokens","datatype":"INT32","shape":[1],"data":[1]}]})");
  ASSERT_TRUE(v2.ok()) << v2.error().message;
  EXPECT_EQ(v2->content, "Paris");
  EXPECT_EQ(v2->usage->completion_tokens, 1u);
  // An error body, and a body with no generated text at all.
  Result<CompletionResponse> error = DecodeResponse(Api::kKserveInfer, R"({"error":"Model with name m does not exist."})");
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.error().message.find("does not exist"), std::string::npos);
  EXPECT_FALSE(DecodeResponse(Api::kTritonGenerate, R"({"model_name":"e"})").ok());
  EXPECT_FALSE(DecodeResponse(Api::kKserveInfer, R"({"outputs":[{"name":"text_output","data":[{}]}]})").ok());
}

TEST(ConstraintRequestTest, EachKindIsSentAsTheEnginesTakeIt) {
  GenerationRequest r = Request(Api::kChat);
  r.constraint = OutputConstraint{OutputConstraint::Kind::kJsonSchema, R"({"type":"object"})"};
  json body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["response_format"]["type"], "json_schema");
  EXPECT_EQ(body["response_format"]["json_schema"]["schema"]["type"], "object");
  r.constraint = OutputConstraint{OutputConstraint::Kind::kChoice, R"(["yes","no"])"};
  body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["response_format"]["json_schema"]["schema"]["enum"][1], "no");
  r.constraint = OutputConstraint{OutputConstraint::Kind::kRegex, R"([A-Z]{3}"\d)"};
  body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["structured_outputs"]["regex"], R"([A-Z]{3}"\d)");  // vLLM
  r.constraint->regex_field = RegexField::kTopLevel;  // SGLang
  body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["regex"], R"([A-Z]{3}"\d)");
  EXPECT_FALSE(body.contains("structured_outputs"));
  r.constraint->regex_field = RegexField::kResponseFormatValue;  // TGI
  body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["response_format"]["type"], "regex");
  EXPECT_EQ(body["response_format"]["value"], R"([A-Z]{3}"\d)");
  r.constraint = OutputConstraint{OutputConstraint::Kind::kTool, R"({"type":"object","properties":{}})"};
  body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["tool_choice"], "required");
  EXPECT_EQ(body["tools"][0]["function"]["name"], "record_answer");
}

TEST(ConstraintStreamTest, AToolCallsArgumentsAreItsText) {
  StreamDecoder decoder(Api::kChat);
  const StreamChunk chunk = MustDecode(
      decoder, R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]})");
  EXPECT_EQ(chunk.tool_arguments, R"({"a":)");
  EXPECT_EQ(chunk.content, "");
  // Another shape is only a missing hint, never an error.
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"delta":{"tool_calls":{"x":1}}}]})").tool_arguments, "");
}

TEST(PoolingTest, EmbeddingsAndRerankBodiesAndAnswers) {
  GenerationRequest r;
  r.api = Api::kEmbeddings;
  r.model = "e5";
  r.inputs = {"one", "two \"quoted\""};
  json body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["input"][1], "two \"quoted\"");
  EXPECT_EQ(RequestPath(Api::kEmbeddings, "e5", false), "/v1/embeddings");
  r.api = Api::kRerank;
  r.prompt = "query";
  body = json::parse(EncodeRequestBody(r));
  EXPECT_EQ(body["query"], "query");
  EXPECT_EQ(body["documents"].size(), 2u);
  EXPECT_FALSE(ApiStreams(Api::kRerank));

  Result<CompletionResponse> embeddings = DecodeResponse(
      Api::kEmbeddings, R"({"data":[{"index":0,"embedding":[0.1,-2e-3]},{"index":1,"embedding":"AAAA"}],"usage":{"prompt_tokens":7,"total_tokens":7}})");
  ASSERT_TRUE(embeddings.ok()) << embeddings.error().message;
  EXPECT_EQ(embeddings->items, 2u);
  EXPECT_EQ(embeddings->usage->prompt_tokens, 7u);
  EXPECT_EQ(embeddings->usage->completion_tokens, 0u);
  Result<CompletionResponse> rerank =
      DecodeResponse(Api::kRerank, R"({"results":[{"index":1,"relevance_score":0.9},{"index":0,"score":0.1}],"usage":{"total_tokens":30}})");
  ASSERT_TRUE(rerank.ok()) << rerank.error().message;
  EXPECT_EQ(rerank->items, 2u);
  EXPECT_EQ(rerank->usage->prompt_tokens, 30u);
  for (const auto& [api, bad] : std::vector<std::pair<Api, std::string>>{
           {Api::kEmbeddings, R"({"data":[{"embedding":["x"]}]})"},
           {Api::kEmbeddings, R"({"object":"list"})"},
           {Api::kRerank, R"({"results":[{"index":0,"relevance_score":"high"}]})"},
           {Api::kRerank, R"({"error":{"message":"model does not support rerank"}})"},
           {Api::kEmbeddings, "not json"}}) {
    EXPECT_FALSE(DecodeResponse(api, bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace bakeoff::dialect
