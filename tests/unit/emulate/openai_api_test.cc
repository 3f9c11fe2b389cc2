// Tests for emulate/openai_api.h: request validation and vLLM-shaped renderings.
#include "emulate/openai_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"

namespace bakeoff::emulate {
namespace {

using nlohmann::json;

const ServedModel kServed{"emulated-model", 1000};

GenerationSpec ParseOk(Endpoint endpoint, const std::string& body) {
  auto parsed = ParseGenerationRequest(endpoint, body, kServed);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << body << " -> " << error->message;
    return {};
  }
  return std::get<GenerationSpec>(parsed);
}

ApiError ParseError(Endpoint endpoint, const std::string& body) {
  auto parsed = ParseGenerationRequest(endpoint, body, kServed);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

TEST(OpenAiApiTest, ChatCountsAllMessageContents) {
  GenerationSpec spec = ParseOk(Endpoint::kChat, R"({"model":"emulated-model","messages":[
      {"role":"system","content":"you are terse"},
      {"role":"user","content":[{"type":"text","text":"one two"},{"type":"image_url"}]},
      {"role":"assistant","content":null}],"max_tokens":7,"stream":true,
      "stream_options":{"include_usage":true},"ignore_eos":true,"min_tokens":2,"seed":5})");
  EXPECT_EQ(spec.prompt_tokens, 5);
  EXPECT_EQ(spec.max_tokens, 7);
  EXPECT_EQ(spec.min_tokens, 2);
  EXPECT_TRUE(spec.stream);
  EXPECT_TRUE(spec.include_usage);
  EXPECT_TRUE(spec.ignore_eos);
  EXPECT_EQ(spec.seed, 5u);
}

TEST(OpenAiApiTest, DefaultsFollowVllm) {
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":"a b c"})").max_tokens, 16);
  EXPECT_EQ(ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a b c"}]})").max_tokens,
            1000 - 3);
  EXPECT_EQ(ParseOk(Endpoint::kChat,
                    R"({"messages":[{"role":"user","content":"a"}],"max_completion_tokens":9})")
                .max_tokens,
            9);
}

TEST(OpenAiApiTest, CompletionPromptForms) {
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":["x y"]})").prompt_tokens, 2);
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":[1,2,3,4]})").prompt_tokens, 4);
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":[[1,2]]})").prompt_tokens, 2);
}

TEST(OpenAiApiTest, PromptTokenIdsComeFromTheTokenizer) {
  GenerationSpec text = ParseOk(Endpoint::kCompletions, R"({"prompt":"alpha beta gamma"})");
  EXPECT_EQ(text.prompt, TokenIds("alpha beta gamma"));
  EXPECT_EQ(text.prompt_tokens, 3);
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":["alpha beta"]})").prompt,
            TokenIds("alpha beta"));
  // Chat: the contents joined with "\n" (text parts included), roles and other parts ignored.
  GenerationSpec chat = ParseOk(Endpoint::kChat, R"({"messages":[
      {"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"one two"},{"type":"image_url"},
                                {"type":"text","text":"three"}]},
      {"role":"assistant","content":null},
      {"role":"user","content":"four"}]})");
  EXPECT_EQ(chat.prompt, TokenIds("be brief\none two\nthree\nfour"));
  EXPECT_EQ(chat.prompt_tokens, 6);
}

TEST(OpenAiApiTest, TokenIdArraysAreUsedModuloTheVocabulary) {
  GenerationSpec spec = ParseOk(Endpoint::kCompletions, R"({"prompt":[5, 32000, 32005, 4294967296]})");
  EXPECT_EQ(spec.prompt, (std::vector<TokenId>{5, 0, 5, static_cast<TokenId>(4294967296ULL % kVocabSize)}));
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":[[7, 8]]})").prompt,
            (std::vector<TokenId>{7, 8}));
  EXPECT_EQ(ParseError(Endpoint::kCompletions, R"({"prompt":[1, -2]})").status, 400);
  EXPECT_EQ(ParseError(Endpoint::kCompletions, R"({"prompt":[1, 2.5]})").status, 400);
}

TEST(OpenAiApiTest, ChatWithoutAnyTextIsRejected) {
  ApiError error = ParseError(Endpoint::kChat, R"({"messages":[{"role":"user","content":null}]})");
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "messages");
}

TEST(OpenAiApiTest, RejectsBadRequestsWith400) {
  const char* bad[] = {
      "not json",
      "[1,2]",
      R"({"model":"emulated-model"})",
      R"({"messages":"hi"})",
      R"({"messages":[]})",
      R"({"messages":[{"content":"no role"}]})",
      R"({"messages":[{"role":"user","content":"a"}],"max_tokens":0})",
      R"({"messages":[{"role":"user","content":"a"}],"max_tokens":"ten"})",
      R"({"messages":[{"role":"user","content":"a"}],"max_tokens":1000})",
      R"({"messages":[{"role":"user","content":"a"}],"stream_options":{"include_usage":true}})",
      R"({"messages":[{"role":"user","content":"a"}],"n":2})",
      R"({"messages":[{"role":"user","content":"a"}],"stream":"yes"})",
      R"({"messages":[{"role":"user","content":"a"}],"max_tokens":5,"min_tokens":6})",
      R"({"messages":[{"role":"user","content":"a"}],"model":7})",
      R"({"messages":[{"role":"user","content":"a"}],"max_tokens":99999999999999999999})",
  };
  for (const char* body : bad) {
    ApiError error = ParseError(Endpoint::kChat, body);
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_FALSE(error.message.empty()) << body;
  }
  EXPECT_EQ(ParseError(Endpoint::kCompletions, R"({"prompt":""})").status, 400);
  EXPECT_EQ(ParseError(Endpoint::kCompletions, R"({"prompt":["a","b"]})").status, 400);
}

TEST(OpenAiApiTest, ContextLimitMessagesNameTheNumbers) {
  std::string long_prompt;
  for (int i = 0; i < 1000; ++i) long_prompt += "w ";
  ApiError too_long = ParseError(Endpoint::kCompletions, R"({"prompt":")" + long_prompt + R"("})");
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.message.find("maximum context length is 1000 tokens"), std::string::npos);
  ApiError too_many =
      ParseError(Endpoint::kCompletions, R"({"prompt":"a b","max_tokens":999})");
  EXPECT_NE(too_many.message.find("(999 > 1000 - 2)"), std::string::npos) << too_many.message;
  EXPECT_EQ(too_many.param, "max_tokens");
}

TEST(OpenAiApiTest, UnknownModelIs404) {
  ApiError error = ParseError(Endpoint::kChat, R"({"model":"gpt-x","messages":[]})");
  EXPECT_EQ(error.status, 404);
  EXPECT_EQ(error.message, "The model `gpt-x` does not exist.");
  json rendered = json::parse(RenderError(error));
  EXPECT_EQ(rendered["error"]["message"], "The model `gpt-x` does not exist.");
  EXPECT_EQ(rendered["error"]["type"], "NotFoundError");
  EXPECT_EQ(rendered["error"]["param"], "model");
  EXPECT_EQ(rendered["error"]["code"], 404);
  json no_param = json::parse(RenderError(BadRequest("x")));
  EXPECT_TRUE(no_param["error"]["param"].is_null());
}

TEST(OpenAiApiTest, TokenizeCountsWithTheTokenizer) {
  auto response = RenderTokenizeResponse(R"({"model":"emulated-model","prompt":"hello big world"})",
                                         kServed);
  ASSERT_TRUE(std::holds_alternative<std::string>(response));
  json body = json::parse(std::get<std::string>(response));
  EXPECT_EQ(body["count"], 3);
  EXPECT_EQ(body["max_model_len"], 1000);
  EXPECT_EQ(body["tokens"].get<std::vector<std::uint32_t>>(), TokenIds("hello big world"));
  auto chat = RenderTokenizeResponse(
      R"({"messages":[{"role":"user","content":"a b"},{"role":"user","content":"c"}]})", kServed);
  ASSERT_TRUE(std::holds_alternative<std::string>(chat));
  EXPECT_EQ(json::parse(std::get<std::string>(chat))["count"], 3);
  auto error = RenderTokenizeResponse(R"({"model":"nope","prompt":"a"})", kServed);
  ASSERT_TRUE(std::holds_alternative<ApiError>(error));
  EXPECT_EQ(std::get<ApiError>(error).status, 404);
}

TEST(OpenAiApiTest, ModelsCard) {
  json body = json::parse(RenderModelsResponse(kServed, 1700000000));
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "emulated-model");
  EXPECT_EQ(body["data"][0]["owned_by"], "bakeoff-emulated");
  EXPECT_EQ(body["data"][0]["max_model_len"], 1000);
}

std::vector<json> Events(const std::string& sse) {
  std::vector<json> events;
  std::size_t at = 0;
  while (at < sse.size()) {
    std::size_t end = sse.find("\n\n", at);
    std::string payload = sse.substr(at + 6, end - at - 6);
    events.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload));
    at = end + 2;
  }
  return events;
}

TEST(OpenAiApiTest, ChatEventsHaveVllmShapes) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kChat;
  spec.prompt_tokens = 4;
  spec.max_tokens = 2;
  ResponseRenderer renderer(spec, ServedModel{"m\"q", 100}, 42, 1700000000);
  std::string out;
  renderer.AppendRoleEvent(out);
  renderer.AppendTokenEvent(out, 0, std::nullopt);
  renderer.AppendTokenEvent(out, 1, FinishReason::kLength);
  renderer.AppendUsageEvent(out, 2);
  ResponseRenderer::AppendDone(out);
  auto events = Events(out);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["model"], "m\"q");
  EXPECT_EQ(events[0]["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], std::string(OutputPiece(0, 0)));
  EXPECT_TRUE(events[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(events[3]["choices"].empty());
  EXPECT_EQ(events[3]["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(events[3]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[3]["usage"]["total_tokens"], 6);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(OpenAiApiTest, CompletionEventsAndFullBodies) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kCompletions;
  spec.prompt_tokens = 3;
  ResponseRenderer renderer(spec, kServed, 1, 1);
  std::string out;
  renderer.AppendRoleEvent(out);
  EXPECT_TRUE(out.empty());
  renderer.AppendTokenEvent(out, 0, FinishReason::kStop);
  auto events = Events(out);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["object"], "text_completion");
  EXPECT_EQ(events[0]["choices"][0]["text"], std::string(OutputPiece(0, 0)));
  EXPECT_EQ(events[0]["choices"][0]["finish_reason"], "stop");

  json body = json::parse(renderer.RenderFullBody(3, FinishReason::kLength));
  EXPECT_EQ(CountTokens(body["choices"][0]["text"].get<std::string>()), 3u);
  EXPECT_EQ(body["usage"]["total_tokens"], 6);
  spec.endpoint = Endpoint::kChat;
  json chat = json::parse(ResponseRenderer(spec, kServed, 2, 1).RenderFullBody(4, FinishReason::kLength));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(CountTokens(chat["choices"][0]["message"]["content"].get<std::string>()), 4u);
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(chat["usage"].contains("prompt_tokens_details"));
}

TEST(OpenAiApiTest, UsageCarriesCachedTokensWhenGiven) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kChat;
  spec.prompt_tokens = 40;
  ResponseRenderer renderer(spec, kServed, 3, 1);
  std::string out;
  renderer.AppendUsageEvent(out, 5, 32);
  auto events = Events(out);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["usage"]["prompt_tokens"], 40);
  EXPECT_EQ(events[0]["usage"]["completion_tokens"], 5);
  EXPECT_EQ(events[0]["usage"]["total_tokens"], 45);
  EXPECT_EQ(events[0]["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
  json body = json::parse(renderer.RenderFullBody(5, FinishReason::kStop, 0));
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiApiTest, SeveralTokensPerEventAndErrorEvents) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kCompletions;
  spec.seed = 9;
  ResponseRenderer renderer(spec, kServed, 4, 1);
  std::string out;
  renderer.AppendTokensEvent(out, 0, 3, std::nullopt);
  renderer.AppendTokensEvent(out, 3, 1, FinishReason::kLength);
  ResponseRenderer::AppendErrorEvent(out, ApiError{500, "InternalServerError", "boom", ""});
  auto events = Events(out);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["text"],
            std::string(OutputPiece(9, 0)) + std::string(OutputPiece(9, 1)) +
                std::string(OutputPiece(9, 2)));
  EXPECT_TRUE(events[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(events[1]["choices"][0]["text"], std::string(OutputPiece(9, 3)));
  EXPECT_EQ(events[1]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[2]["error"]["message"], "boom");
  EXPECT_EQ(events[2]["error"]["code"], 500);
  EXPECT_EQ(events[2]["error"]["type"], "InternalServerError");
}

}  // namespace
}  // namespace bakeoff::emulate
