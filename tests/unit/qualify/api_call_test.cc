// qualify/api_call.h: streamed answers read back from SSE bodies, and the greedy bodies.
#include "qualify/api_call.h"

#include <gtest/gtest.h>

namespace bakeoff::qualify {
namespace {

TEST(ReadStreamTest, TextFinishUsageAndDone) {
  const StreamedAnswer answer = ReadStream(
      "data: "
      "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"
      "data: "
      "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n"
      "data: [DONE]\n\n");
  EXPECT_EQ(answer.text, "Hello");
  EXPECT_EQ(answer.finish_reason, "stop");
  ASSERT_TRUE(answer.usage.has_value());
  EXPECT_EQ(answer.usage->prompt_tokens, 3u);
  EXPECT_EQ(answer.usage->completion_tokens, 2u);
  EXPECT_EQ(answer.chunks, 3u);
  EXPECT_TRUE(answer.done);
  EXPECT_EQ(answer.error, "");
}

TEST(ReadStreamTest, CompletionsTextWithoutDone) {
  const StreamedAnswer answer = ReadStream(
      "data: {\"choices\":[{\"index\":0,\"text\":\"a b \",\"finish_reason\":\"length\"}]}\n\n");
  EXPECT_EQ(answer.text, "a b ");
  EXPECT_EQ(answer.finish_reason, "length");
  EXPECT_FALSE(answer.done);
  EXPECT_FALSE(answer.usage.has_value());
}

TEST(ReadStreamTest, ErrorsAreReported) {
  EXPECT_NE(ReadStream("data: {\"error\":{\"message\":\"boom\"}}\n\n").error.find("boom"),
            std::string::npos);
  EXPECT_NE(ReadStream("data: not json\n\n").error, "");
  EXPECT_EQ(ReadStream("data: {\"choices\":[]}").error, "the stream ended mid-event");
  // llama.cpp's error line after a 200.
  EXPECT_NE(ReadStream("error: {\"message\":\"context\"}\n\n").error.find("error event"),
            std::string::npos);
}

TEST(ReadStreamTest, NotAStreamHasNoChunks) {
  const StreamedAnswer answer = ReadStream("{\"choices\":[{\"text\":\"x\"}]}");
  EXPECT_EQ(answer.chunks, 0u);
}

TEST(GreedyBodyTest, ChatAndCompletions) {
  const nlohmann::json chat = GreedyBody("m", dialect::Api::kChat, "Hi", 8);
  EXPECT_EQ(chat["messages"][0]["content"], "Hi");
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["max_tokens"], 8);
  EXPECT_EQ(chat["temperature"], 0);
  EXPECT_EQ(chat["seed"], kProbeSeed);
  EXPECT_EQ(chat["model"], "m");
  EXPECT_FALSE(chat.contains("prompt"));
  const nlohmann::json completions = GreedyBody("m", dialect::Api::kCompletions, "Hi", 8);
  EXPECT_EQ(completions["prompt"], "Hi");
  EXPECT_FALSE(completions.contains("messages"));
}

}  // namespace
}  // namespace bakeoff::qualify
