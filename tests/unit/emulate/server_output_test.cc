// Tests for what emulate/server.h says over HTTP: stop strings, determinism, n choices,
// structured output, tool calls, logprobs and --answers, streaming and not, in modelled and
// instant mode (loopback only, every wait bounded).
#include "emulate/server.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"
#include "test_http_client.h"

namespace bakeoff::emulate {
namespace {

using nlohmann::json;
using testing::Fetch;
using testing::HttpResponse;
using testing::SseData;
using testing::StartOrDie;
using testing::FastConfig;

json Post(std::uint16_t port, const std::string& path, const json& body) {
  HttpResponse response = Fetch(port, "POST", path, body.dump());
  EXPECT_EQ(response.status, 200) << response.body;
  json doc = json::parse(response.body, nullptr, false);
  return doc.is_discarded() ? json() : doc;
}

// A streamed chat or completions request, its events folded per choice index.
struct Streamed {
  std::map<int, std::string> text;       // content / text deltas
  std::map<int, std::string> arguments;  // tool-call argument deltas
  std::map<int, std::string> finish;     // finish_reason
  std::map<int, json> logprobs;          // chat logprobs.content entries, concatenated
  std::map<int, json> tool_header;       // the first tool_calls delta
  json usage;
  bool done = false;
};

Streamed Stream(std::uint16_t port, const std::string& path, json body) {
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  HttpResponse response = Fetch(port, "POST", path, body.dump());
  EXPECT_EQ(response.status, 200) << response.body;
  Streamed out;
  for (const std::string& data : SseData(response.body)) {
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    json event = json::parse(data);
    if (event.contains("usage") && !event["usage"].is_null()) out.usage = event["usage"];
    for (const json& choice : event["choices"]) {
      const int index = choice["index"];
      if (choice.contains("text")) out.text[index] += choice["text"].get<std::string>();
      if (choice.contains("delta")) {
        const json& delta = choice["delta"];
        if (delta.contains("content")) out.text[index] += delta["content"].get<std::string>();
        if (delta.contains("tool_calls")) {
          const json& call = delta["tool_calls"][0];
          if (call.contains("id")) out.tool_header[index] = call;
          out.arguments[index] += call["function"]["arguments"].get<std::string>();
        }
      }
      if (!choice["finish_reason"].is_null()) out.finish[index] = choice["finish_reason"];
      if (choice["logprobs"].is_object() && choice["logprobs"].contains("content")) {
        if (!out.logprobs.count(index)) out.logprobs[index] = json::array();
        for (const json& entry : choice["logprobs"]["content"])
          out.logprobs[index].push_back(entry);
      }
    }
  }
  return out;
}

json Chat(const std::string& content, int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens}};
}

TEST(EmulatorOutputTest, StopStringFromAPreviousAnswerStopsIt) {
  for (bool instant : {false, true}) {
    auto server = StartOrDie(FastConfig(instant));
    ASSERT_TRUE(server);
    json request = Chat("tell me a story", 40);
    request["seed"] = 11;
    const std::string first =
        Post(server->port(), "/v1/chat/completions", request)["choices"][0]["message"]["content"];
    std::vector<std::string_view> words = TokenPieces(first);
    ASSERT_EQ(words.size(), 40u);
    const std::string stop = std::string(words[20]) + " " + std::string(words[21]);
    const std::size_t at = first.find(stop);
    request["stop"] = json::array({"no such words", stop});
    json whole = Post(server->port(), "/v1/chat/completions", request);
    EXPECT_EQ(whole["choices"][0]["message"]["content"], first.substr(0, at)) << instant;
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
    EXPECT_LE(whole["usage"]["completion_tokens"].get<int>(), 22);
    Streamed streamed = Stream(server->port(), "/v1/chat/completions", request);
    EXPECT_EQ(streamed.text[0], first.substr(0, at));
    EXPECT_EQ(streamed.finish[0], "stop");
    EXPECT_EQ(streamed.usage["completion_tokens"], whole["usage"]["completion_tokens"]);
    EXPECT_TRUE(streamed.done);
  }
}

TEST(EmulatorOutputTest, SameSeedOrGreedyGivesTheSameText) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  auto text = [&](json request) {
    return Post(server->port(), "/v1/completions", request)["choices"][0]["text"]
        .get<std::string>();
  };
  json seeded = {
      {"prompt", "the same prompt"}, {"max_tokens", 16}, {"seed", 5}, {"temperature", 0.8}};
  EXPECT_EQ(text(seeded), text(seeded));
  json greedy = {{"prompt", "the same prompt"}, {"max_tokens", 16}, {"temperature", 0}};
  EXPECT_EQ(text(greedy), text(greedy));
  json other = seeded;
  other["seed"] = 6;
  EXPECT_NE(text(seeded), text(other));
  // Streaming gives the same text as the whole body.
  EXPECT_EQ(Stream(server->port(), "/v1/completions", seeded).text[0], text(seeded));
}

TEST(EmulatorOutputTest, SeveralChoicesStreamedAndWhole) {
  for (bool instant : {false, true}) {
    auto server = StartOrDie(FastConfig(instant));
    ASSERT_TRUE(server);
    json request = Chat("hi", 6);
    request["n"] = 3;
    json whole = Post(server->port(), "/v1/chat/completions", request);
    ASSERT_EQ(whole["choices"].size(), 3u);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(whole["choices"][c]["index"], c);
      EXPECT_EQ(CountTokens(whole["choices"][c]["message"]["content"].get<std::string>()), 6u);
      EXPECT_EQ(whole["choices"][c]["finish_reason"], "length");
    }
    EXPECT_NE(whole["choices"][0]["message"]["content"], whole["choices"][1]["message"]["content"]);
    EXPECT_EQ(whole["usage"]["completion_tokens"], 18);
    Streamed streamed = Stream(server->port(), "/v1/chat/completions", request);
    ASSERT_EQ(streamed.text.size(), 3u);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(streamed.text[c], whole["choices"][c]["message"]["content"]) << instant;
      EXPECT_EQ(streamed.finish[c], "length");
    }
    EXPECT_EQ(streamed.usage["completion_tokens"], 18);
  }
}

TEST(EmulatorOutputTest, JsonSchemaOutputIsValidStreamedAndWhole) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  json request = Chat("give me a person", 200);
  request["response_format"] = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "person"},
        {"schema",
         {{"type", "object"},
          {"properties",
           {{"name", {{"type", "string"}}},
            {"age", {{"type", "integer"}, {"minimum", 1}}},
            {"pets", {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}}}}},
          {"required", {"name", "age", "pets"}}}}}}};
  json whole = Post(server->port(), "/v1/chat/completions", request);
  json value = json::parse(whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_TRUE(value["name"].is_string());
  EXPECT_GE(value["age"].get<int>(), 1);
  EXPECT_EQ(value["pets"].size(), 1u);
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  Streamed streamed = Stream(server->port(), "/v1/chat/completions", request);
  EXPECT_EQ(json::parse(streamed.text[0]), value);
  EXPECT_EQ(streamed.finish[0], "stop");
  // json_object: some JSON object.
  request["response_format"] = {{"type", "json_object"}};
  json object = Post(server->port(), "/v1/chat/completions", request);
  EXPECT_TRUE(
      json::parse(object["choices"][0]["message"]["content"].get<std::string>()).is_object());
}

TEST(EmulatorOutputTest, ToolCallsStreamedAndWhole) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  json request = Chat("what is the weather? use get_weather", 100);
  request["tools"] = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"parameters",
           {{"type", "object"},
            {"properties", {{"city", {{"type", "string"}}}, {"unit", {{"enum", {"c", "f"}}}}}},
            {"required", {"city", "unit"}}}}}}}});
  json whole = Post(server->port(), "/v1/chat/completions", request);
  const json& message = whole["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  json arguments =
      json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(arguments["city"].is_string());
  EXPECT_EQ(arguments["unit"], "c");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
  Streamed streamed = Stream(server->port(), "/v1/chat/completions", request);
  EXPECT_EQ(streamed.tool_header[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(streamed.arguments[0]), arguments);
  EXPECT_EQ(streamed.finish[0], "tool_calls");
  // auto without a mention: text.
  request["messages"][0]["content"] = "just chat";
  json text = Post(server->port(), "/v1/chat/completions", request);
  EXPECT_TRUE(text["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(text["choices"][0]["finish_reason"], "length");
}

TEST(EmulatorOutputTest, ChatLogprobsStreamedMatchTheWholeBody) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  json request = Chat("hi", 5);
  request["logprobs"] = true;
  request["top_logprobs"] = 3;
  json whole = Post(server->port(), "/v1/chat/completions", request);
  const json& content = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  Streamed streamed = Stream(server->port(), "/v1/chat/completions", request);
  EXPECT_EQ(streamed.logprobs[0], content);
  json plain = Post(server->port(), "/v1/chat/completions", Chat("hi", 2));
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST(EmulatorOutputTest, AnswersFileGivesTheAnswer) {
  for (bool instant : {false, true}) {
    EmulatorConfig config = FastConfig(instant);
    config.answers = {{"What is the capital of France?", "The capital of France is Paris."},
                      {"2+2=", " 4"}};
    auto server = StartOrDie(config);
    ASSERT_TRUE(server);
    json chat = Chat("What is the capital of France?", 100);
    json whole = Post(server->port(), "/v1/chat/completions", chat);
    EXPECT_EQ(whole["choices"][0]["message"]["content"], "The capital of France is Paris.");
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(whole["usage"]["completion_tokens"], 6);
    Streamed streamed = Stream(server->port(), "/v1/chat/completions", chat);
    EXPECT_EQ(streamed.text[0], "The capital of France is Paris.");
    EXPECT_EQ(streamed.finish[0], "stop");
    EXPECT_EQ(streamed.usage["completion_tokens"], 6);
    json completion =
        Post(server->port(), "/v1/completions", {{"prompt", "2+2="}, {"max_tokens", 9}});
    EXPECT_EQ(completion["choices"][0]["text"], " 4");
    // Not in the table: the usual words.
    json other = Post(server->port(), "/v1/completions", {{"prompt", "2+3="}, {"max_tokens", 3}});
    EXPECT_EQ(CountTokens(other["choices"][0]["text"].get<std::string>()), 3u);
    EXPECT_EQ(other["choices"][0]["finish_reason"], "length");
  }
}

}  // namespace
}  // namespace bakeoff::emulate
