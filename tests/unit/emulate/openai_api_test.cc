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
      R"({"messages":[{"role":"user","content":"a"}],"n":0})",
      R"({"messages":[{"role":"user","content":"a"}],"n":129})",
      R"({"messages":[{"role":"user","content":"a"}],"stop":7})",
      R"({"messages":[{"role":"user","content":"a"}],"stop":["x",1]})",
      R"({"messages":[{"role":"user","content":"a"}],"logprobs":"yes"})",
      R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21})",
      R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":2})",
      R"({"messages":[{"role":"user","content":"a"}],"response_format":{"type":"xml"}})",
      R"({"messages":[{"role":"user","content":"a"}],"response_format":{"type":"json_schema"}})",
      R"({"messages":[{"role":"user","content":"a"}],"tools":{}})",
      R"({"messages":[{"role":"user","content":"a"}],"tool_choice":"required"})",
      R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})",
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

TEST(OpenAiApiTest, ParsesNStopAndLogprobs) {
  GenerationSpec chat = ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}],
      "n":3,"stop":["x y","",  "z"],"logprobs":true,"top_logprobs":2,"max_tokens":4})");
  EXPECT_EQ(chat.n, 3);
  EXPECT_EQ(chat.stop, (std::vector<std::string>{"x y", "z"}));  // empty strings dropped
  EXPECT_EQ(chat.logprobs, 2);
  EXPECT_EQ(
      ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}],"stop":"q"})").stop,
      std::vector<std::string>{"q"});
  EXPECT_EQ(
      ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}],"logprobs":true})")
          .logprobs,
      0);
  EXPECT_FALSE(
      ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}]})").logprobs);
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":"a","logprobs":3})").logprobs, 3);
}

TEST(OpenAiApiTest, AnswerKeyIsThePromptOrTheLastUserMessage) {
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":"two words"})").answer_key, "two words");
  EXPECT_EQ(ParseOk(Endpoint::kCompletions, R"({"prompt":["two words"]})").answer_key, "two words");
  EXPECT_FALSE(ParseOk(Endpoint::kCompletions, R"({"prompt":[1,2]})").answer_key);
  EXPECT_EQ(ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"first"},
      {"role":"assistant","content":"reply"},{"role":"user","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b"}]}]})")
                .answer_key,
            "a\nb");
}

TEST(OpenAiApiTest, ResponseFormatGivesJsonValidAgainstTheSchema) {
  GenerationSpec spec = ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"person","schema":{
        "type":"object","required":["name","age","tags","kind"],"properties":{
          "name":{"type":"string","minLength":6},"age":{"type":"integer","minimum":18},
          "tags":{"type":"array","items":{"type":"boolean"},"minItems":2},
          "kind":{"enum":["cat","dog"]},"note":{"type":"string"}}}}}})");
  ASSERT_TRUE(spec.json_text);
  json doc = json::parse(*spec.json_text);
  EXPECT_GE(doc["name"].get<std::string>().size(), 6u);
  EXPECT_GE(doc["age"].get<int>(), 18);
  EXPECT_EQ(doc["tags"], json::parse("[true,true]"));
  EXPECT_EQ(doc["kind"], "cat");
  EXPECT_FALSE(doc.contains("note"));  // not required
  GenerationSpec object = ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}],
      "response_format":{"type":"json_object"}})");
  ASSERT_TRUE(object.json_text);
  EXPECT_TRUE(json::parse(*object.json_text).is_object());
  EXPECT_FALSE(ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":"a"}],
      "response_format":{"type":"text"}})")
                   .json_text);
}

TEST(OpenAiApiTest, ToolChoiceDecidesTheCall) {
  const std::string tools = R"("tools":[
      {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
        "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},
        "required":["city","days"]}}},
      {"type":"function","function":{"name":"get_time"}}])";
  auto parse = [&](const std::string& user, const std::string& choice) {
    return ParseOk(Endpoint::kChat, R"({"messages":[{"role":"user","content":")" + user + "\"}]," +
                                        tools +
                                        (choice.empty() ? "" : ",\"tool_choice\":" + choice) + "}");
  };
  GenerationSpec weather = parse("call get_weather please", "");  // auto, name mentioned
  ASSERT_TRUE(weather.tool_call);
  EXPECT_EQ(weather.tool_call->name, "get_weather");
  json arguments = json::parse(weather.tool_call->arguments);
  EXPECT_TRUE(arguments["city"].is_string());
  EXPECT_GE(arguments["days"].get<int>(), 1);
  EXPECT_FALSE(parse("hello there", "\"auto\"").tool_call);  // auto, nothing mentioned
  EXPECT_FALSE(parse("get_weather", "\"none\"").tool_call);
  ASSERT_TRUE(parse("hello", "\"required\"").tool_call);
  EXPECT_EQ(parse("hello", "\"required\"").tool_call->name, "get_weather");
  GenerationSpec named = parse("hello", R"({"type":"function","function":{"name":"get_time"}})");
  ASSERT_TRUE(named.tool_call);
  EXPECT_EQ(named.tool_call->name, "get_time");
  EXPECT_EQ(named.tool_call->arguments, "{}");
}

TEST(OpenAiApiTest, TruncatePromptsKeepsTheLastTokens) {
  ServedModel served = kServed;
  served.truncate_prompts = true;
  std::string long_prompt;
  for (int i = 0; i < 1500; ++i) long_prompt += "w" + std::to_string(i) + " ";
  auto parsed = ParseGenerationRequest(
      Endpoint::kCompletions, R"({"prompt":")" + long_prompt + R"(","max_tokens":10})", served);
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(parsed));
  const GenerationSpec& spec = std::get<GenerationSpec>(parsed);
  EXPECT_EQ(spec.prompt_tokens, 990);
  EXPECT_EQ(spec.prompt.back(), PieceId("w1499"));  // left-truncated: the end survives
  EXPECT_EQ(spec.prompt.front(), PieceId("w510"));
  // Chat without max_tokens: only a prompt at the limit is truncated (to leave 16).
  auto chat = ParseGenerationRequest(
      Endpoint::kChat, R"({"messages":[{"role":"user","content":")" + long_prompt + R"("}]})",
      served);
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(chat));
  EXPECT_EQ(std::get<GenerationSpec>(chat).prompt_tokens, 1000 - 16);
  EXPECT_EQ(std::get<GenerationSpec>(chat).max_tokens, 16);
  // Without the knob, the same request is a 400.
  EXPECT_EQ(
      ParseError(Endpoint::kCompletions, R"({"prompt":")" + long_prompt + R"(","max_tokens":10})")
          .status,
      400);
}

// A renderer whose choice 0 is a fixed text.
ResponseRenderer FixedRenderer(GenerationSpec spec, std::string_view text, FinishReason finish) {
  std::vector<ChoiceText> choices;
  for (std::int64_t c = 0; c < spec.n; ++c) choices.push_back(ChoiceText::Fixed(text, finish));
  return ResponseRenderer(spec, kServed, 5, 1, std::move(choices));
}

TEST(OpenAiApiTest, SeveralChoicesHaveTheirIndexAndUsageCountsThemAll) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kChat;
  spec.prompt_tokens = 2;
  spec.max_tokens = 3;
  spec.n = 2;
  ResponseRenderer renderer(spec, kServed, 6, 1);
  EXPECT_EQ(renderer.engine_tokens(), 3);
  std::string out;
  renderer.AppendRoleEvent(out);
  std::vector<ChoiceProgress> progress(2);
  for (std::int64_t emitted = 1; emitted <= 3; ++emitted) {
    renderer.AppendProgress(out, progress, emitted,
                            emitted == 3 ? std::optional(FinishReason::kLength) : std::nullopt, 1,
                            false);
  }
  auto events = Events(out);
  ASSERT_EQ(events.size(), 8u);  // 2 role events, 3 tokens x 2 choices
  std::string text[2];
  for (const json& event : events) {
    const json& choice = event["choices"][0];
    if (choice["delta"].contains("content"))
      text[choice["index"].get<int>()] += choice["delta"]["content"];
  }
  EXPECT_EQ(CountTokens(text[0]), 3u);
  EXPECT_EQ(CountTokens(text[1]), 3u);
  EXPECT_NE(text[0], text[1]);  // choices differ
  EXPECT_EQ(events[7]["choices"][0]["finish_reason"], "length");
  json body = json::parse(renderer.RenderFullBody(3, FinishReason::kLength));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][0]["message"]["content"], text[0]);
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
}

TEST(OpenAiApiTest, FixedTextEndsWithItsOwnFinishReason) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kCompletions;
  spec.prompt_tokens = 1;
  spec.max_tokens = 10;
  ResponseRenderer renderer = FixedRenderer(spec, "Paris is \"big\"", FinishReason::kStop);
  EXPECT_EQ(renderer.engine_tokens(), 3);
  json body = json::parse(renderer.RenderFullBody(3, FinishReason::kLength));
  EXPECT_EQ(body["choices"][0]["text"], "Paris is \"big\"");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  spec.max_tokens = 2;  // too short for the whole text
  ResponseRenderer short_renderer = FixedRenderer(spec, "Paris is \"big\"", FinishReason::kStop);
  json cut = json::parse(short_renderer.RenderFullBody(2, FinishReason::kLength));
  EXPECT_EQ(cut["choices"][0]["text"], "Paris is ");
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiApiTest, ToolCallsRenderInVllmShapes) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kChat;
  spec.prompt_tokens = 1;
  spec.max_tokens = 100;
  spec.stream = true;
  spec.tool_call = ToolCallSpec{"get_weather", R"({"city":"text","days":1})"};
  ResponseRenderer renderer =
      FixedRenderer(spec, spec.tool_call->arguments, FinishReason::kToolCalls);
  std::string out;
  renderer.AppendRoleEvent(out);
  std::vector<ChoiceProgress> progress(1);
  for (std::int64_t emitted = 1; emitted <= renderer.engine_tokens(); ++emitted) {
    renderer.AppendProgress(out, progress, emitted, std::nullopt, 1, false);
  }
  auto events = Events(out);
  ASSERT_GE(events.size(), 3u);
  const json& header = events[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(header["type"], "function");
  EXPECT_EQ(header["function"]["name"], "get_weather");
  EXPECT_EQ(header["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
  std::string arguments;
  for (std::size_t i = 2; i < events.size(); ++i) {
    arguments += events[i]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"];
  }
  EXPECT_EQ(json::parse(arguments), json::parse(spec.tool_call->arguments));
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");
  json body = json::parse(renderer.RenderFullBody(renderer.engine_tokens(), FinishReason::kLength));
  const json& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], spec.tool_call->arguments);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
}

TEST(OpenAiApiTest, LogprobsRenderInVllmShapes) {
  GenerationSpec spec;
  spec.endpoint = Endpoint::kChat;
  spec.prompt_tokens = 1;
  spec.max_tokens = 3;
  spec.logprobs = 2;
  ResponseRenderer chat(spec, kServed, 7, 1);
  std::string out;
  chat.AppendTokensEvent(out, 0, 2, std::nullopt);
  auto events = Events(out);
  ASSERT_EQ(events.size(), 1u);
  const json& content = events[0]["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[1]["token"], std::string(OutputPiece(0, 1)));
  EXPECT_LT(content[1]["logprob"].get<double>(), 0.0);
  ASSERT_EQ(content[1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[1]["top_logprobs"][0]["token"], content[1]["token"]);
  EXPECT_LT(content[1]["top_logprobs"][1]["logprob"].get<double>(),
            content[1]["logprob"].get<double>());
  EXPECT_EQ(content[1]["bytes"].size(), OutputPiece(0, 1).size());
  json body = json::parse(chat.RenderFullBody(3, FinishReason::kLength));
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"].size(), 3u);
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][1], content[1]);  // same figures

  spec.endpoint = Endpoint::kCompletions;
  ResponseRenderer completions(spec, kServed, 8, 1);
  out.clear();
  completions.AppendTokensEvent(out, 1, 2, FinishReason::kLength);
  events = Events(out);
  const json& lp = events[0]["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({OutputPiece(0, 1), OutputPiece(0, 2)}));
  EXPECT_EQ(lp["text_offset"][0], OutputPiece(0, 0).size());
  EXPECT_EQ(lp["token_logprobs"].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace bakeoff::emulate
