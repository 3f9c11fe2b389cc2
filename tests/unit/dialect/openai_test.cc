// tests/unit/dialect/openai_test.cc
//
// Owns: tests of the OpenAI-compatible dialect (dialect/openai.h): request bodies (read back with
// nlohmann), stream chunks as vLLM, SGLang, llama.cpp, TGI and LMDeploy shape them (hand-written
// from the formats in shared/reference/engine-interfaces.md), whole responses and error bodies.
#include "dialect/openai.h"

#include "dialect/codec.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bakeoff::dialect {
namespace {

using nlohmann::json;

// ------------------------------------------------------------------------------------------------
// Request encoding

json Encode(const GenerationRequest& request) {
  const std::string body = EncodeRequestBody(request);
  return json::parse(body);  // throws (and fails the test) on malformed JSON
}

TEST(OpenAiRequestTest, ApiPaths) {
  EXPECT_STREQ(ApiPath(Api::kCompletions), "/v1/completions");
  EXPECT_STREQ(ApiPath(Api::kChat), "/v1/chat/completions");
}

TEST(OpenAiRequestTest, CompletionsBodyHasPromptAndNoMessages) {
  GenerationRequest request;
  request.api = Api::kCompletions;
  request.model = "meta-llama/Llama-3.1-8B";
  request.prompt = "Once upon a time";
  request.max_tokens = 64;
  const json body = Encode(request);
  EXPECT_EQ(body["model"], "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(body["prompt"], "Once upon a time");
  EXPECT_FALSE(body.contains("messages"));
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"], json({{"include_usage", true}}));
  EXPECT_FALSE(body.contains("ignore_eos"));
  EXPECT_FALSE(body.contains("min_tokens"));
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("seed"));
}

TEST(OpenAiRequestTest, ChatBodyWithSystemAndUser) {
  GenerationRequest request;
  request.model = "Qwen/Qwen3-8B";
  request.system = "You are terse.";
  request.prompt = "Say hi.";
  const json body = Encode(request);
  EXPECT_FALSE(body.contains("prompt"));
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0], json({{"role", "system"}, {"content", "You are terse."}}));
  EXPECT_EQ(body["messages"][1], json({{"role", "user"}, {"content", "Say hi."}}));
}

TEST(OpenAiRequestTest, ChatBodyWithoutSystemHasOnlyUser) {
  GenerationRequest request;
  request.prompt = "";
  const json body = Encode(request);
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "");
}

TEST(OpenAiRequestTest, StreamOptionsOnlyWhenStreaming) {
  GenerationRequest request;
  request.stream = false;
  request.continuous_usage = true;
  const json body = Encode(request);
  EXPECT_EQ(body["stream"], false);
  EXPECT_FALSE(body.contains("stream_options"));  // vLLM rejects stream_options without stream
}

TEST(OpenAiRequestTest, ContinuousUsageAddsFlag) {
  GenerationRequest request;
  request.continuous_usage = true;
  const json body = Encode(request);
  EXPECT_EQ(body["stream_options"],
            json({{"include_usage", true}, {"continuous_usage_stats", true}}));
}

TEST(OpenAiRequestTest, NoStreamOptionsWhenUsageNotWanted) {
  GenerationRequest request;
  request.include_usage = false;
  EXPECT_FALSE(Encode(request).contains("stream_options"));
}

TEST(OpenAiRequestTest, OptionalFieldsOnlyWhenSet) {
  GenerationRequest request;
  request.ignore_eos = true;
  request.min_tokens = 128;
  request.temperature = 0.7;
  request.seed = 18446744073709551615ull;
  request.max_tokens = 4294967295u;
  const json body = Encode(request);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["min_tokens"], 128);
  EXPECT_EQ(body["temperature"].get<double>(), 0.7);  // shortest round-trip text
  EXPECT_EQ(body["seed"].get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(body["max_tokens"].get<std::uint64_t>(), 4294967295u);
  EXPECT_NE(EncodeRequestBody(request).find("\"temperature\":0.7,"), std::string::npos);
}

TEST(OpenAiRequestTest, MinTokensUnderTheEnginesName) {
  GenerationRequest request;
  request.ignore_eos = true;
  request.min_tokens = 64;
  request.min_tokens_field = "min_new_tokens";  // LMDeploy
  const json body = Encode(request);
  EXPECT_EQ(body["min_new_tokens"], 64);
  EXPECT_FALSE(body.contains("min_tokens"));
}

TEST(OpenAiRequestTest, TemperatureZeroIsSent) {
  GenerationRequest request;
  request.temperature = 0.0;
  EXPECT_EQ(Encode(request)["temperature"].get<double>(), 0.0);
}

TEST(OpenAiRequestTest, EscapesQuotesBackslashesAndEveryControlChar) {
  std::string text = "say \"hi\" \\ back\\slash /slash\n\r\t\b\f end";
  for (int c = 0; c < 0x20; ++c) text.push_back(static_cast<char>(c));  // includes NUL
  text.push_back('\x7f');
  GenerationRequest request;
  request.prompt = text;
  request.system = text;
  request.model = "we\"ird\\model";
  const std::string raw = EncodeRequestBody(request);
  for (char c : raw) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "raw control char in body";
  const json body = json::parse(raw);
  EXPECT_EQ(body["messages"][0]["content"].get<std::string>(), text);
  EXPECT_EQ(body["messages"][1]["content"].get<std::string>(), text);
  EXPECT_EQ(body["model"], "we\"ird\\model");
  EXPECT_NE(raw.find("\\u0001"), std::string::npos);
  EXPECT_NE(raw.find("\\n"), std::string::npos);
}

TEST(OpenAiRequestTest, Utf8PassesThroughUnescaped) {
  const std::string text = "Grüße, 你好, emoji \xF0\x9F\x98\x80, RTL \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D, \xE2\x80\xA8";
  GenerationRequest request;
  request.api = Api::kCompletions;
  request.prompt = text;
  const std::string raw = EncodeRequestBody(request);
  EXPECT_NE(raw.find(text), std::string::npos);  // copied as bytes, not \u-escaped
  EXPECT_EQ(json::parse(raw)["prompt"].get<std::string>(), text);
}

TEST(OpenAiRequestTest, InvalidUtf8BecomesReplacementCharacter) {
  // Lone continuation byte, truncated 3-byte sequence, overlong '/', surrogate, > U+10FFFF.
  const std::string text = "a\x80" "b\xE4\xBD" "c\xC0\xAF" "d\xED\xA0\x80" "e\xF4\x90\x80\x80" "f";
  GenerationRequest request;
  request.api = Api::kCompletions;
  request.prompt = text;
  const json body = json::parse(EncodeRequestBody(request));  // nlohmann rejects invalid UTF-8
  const std::string decoded = body["prompt"].get<std::string>();
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD, one per byte that starts no valid sequence
  EXPECT_EQ(decoded, "a" + r + "b" + r + r + "c" + r + r + "d" + r + r + r + "e" + r + r + r + r + "f");
}

// The encoder scans 8 bytes at a time; put each special byte at every offset around a word edge,
// next to multi-byte UTF-8, and check the text survives.
TEST(OpenAiRequestTest, EscapeAtEveryOffset) {
  const std::string specials[] = {"\"", "\\", "\n", std::string(1, '\0'), "\x1f", "\xC3\xA4"};
  for (const std::string& special : specials) {
    for (std::size_t length = 0; length < 20; ++length) {
      for (std::size_t at = 0; at <= length; ++at) {
        std::string text(length, 'a');
        text.insert(at, special);
        text.insert(0, "\xE2\x82\xAC");
        GenerationRequest request;
        request.api = Api::kCompletions;
        request.prompt = text;
        ASSERT_EQ(json::parse(EncodeRequestBody(request))["prompt"].get<std::string>(), text)
            << "length " << length << " at " << at;
      }
    }
  }
}

TEST(OpenAiRequestTest, LargeMixedPromptRoundTrips) {
  std::string text;
  const std::string pieces[] = {"plain words ", "\"quoted\" ", "tab\there ", "line\n",
                                "\xE6\x97\xA5\xE6\x9C\xAC ", "back\\slash ", "\x01\x1f "};
  for (std::size_t i = 0; text.size() < 300 * 1024; ++i) text += pieces[i % std::size(pieces)];
  GenerationRequest request;
  request.prompt = text;
  const json body = json::parse(EncodeRequestBody(request));
  EXPECT_EQ(body["messages"][0]["content"].get<std::string>(), text);
}

// ------------------------------------------------------------------------------------------------
// Stream decoding

StreamChunk MustDecode(OpenAiStreamDecoder& decoder, std::string_view data) {
  Result<StreamChunk> chunk = decoder.Decode(data);
  EXPECT_TRUE(chunk.ok()) << (chunk.ok() ? "" : chunk.error().message) << "\npayload: " << data;
  return chunk.ok() ? chunk.value() : StreamChunk{};
}

Error MustFail(std::string_view data) {
  OpenAiStreamDecoder decoder;
  Result<StreamChunk> chunk = decoder.Decode(data);
  EXPECT_FALSE(chunk.ok()) << "accepted: " << data;
  return chunk.ok() ? Error{} : chunk.error();
}

TEST(OpenAiStreamTest, DoneLiteral) {
  OpenAiStreamDecoder decoder;
  EXPECT_TRUE(MustDecode(decoder, "[DONE]").done);
  EXPECT_TRUE(MustDecode(decoder, " [DONE]\r\n").done);  // TGI's `data:[DONE]`, stray CR
  EXPECT_FALSE(MustDecode(decoder, R"({"choices":[]})").done);
  MustFail("[DONE");
  MustFail("[done]");
}

// vLLM /v1/chat/completions with include_usage: role chunk, content chunks, a finish chunk, then
// a usage chunk with empty choices, then [DONE] (engine-interfaces.md 1.2).
TEST(OpenAiStreamTest, VllmChatStream) {
  const std::vector<std::string> wire = {
      R"({"id":"chatcmpl-b1f2","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})",
      R"({"id":"chatcmpl-b1f2","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]})",
      R"({"id":"chatcmpl-b1f2","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]})",
      R"({"id":"chatcmpl-b1f2","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"length","stop_reason":null}]})",
      R"({"id":"chatcmpl-b1f2","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}})",
      "[DONE]"};
  OpenAiStreamDecoder decoder;
  const StreamChunk role = MustDecode(decoder, wire[0]);
  EXPECT_TRUE(role.has_choices);
  EXPECT_TRUE(role.content.empty());  // must not count for TTFT
  EXPECT_TRUE(role.reasoning.empty());
  EXPECT_TRUE(role.finish_reason.empty());
  EXPECT_FALSE(role.usage);
  EXPECT_FALSE(role.error);
  EXPECT_EQ(role.token_count, 0u);

  std::string text;
  for (int i = 1; i <= 3; ++i) {
    const StreamChunk chunk = MustDecode(decoder, wire[i]);
    EXPECT_TRUE(chunk.has_choices);
    EXPECT_EQ(chunk.token_count, 0u);
    text += chunk.content;
    if (i < 3) {
      EXPECT_EQ(chunk.finish_reason, "");
    }
  }
  EXPECT_EQ(text, "Hello world!");
  EXPECT_EQ(MustDecode(decoder, wire[3]).finish_reason, "length");

  const StreamChunk usage = MustDecode(decoder, wire[4]);
  EXPECT_FALSE(usage.has_choices);
  EXPECT_TRUE(usage.content.empty());
  ASSERT_TRUE(usage.usage);
  EXPECT_EQ(*usage.usage, (Usage{12, 3, 8}));
  EXPECT_EQ(usage.token_count, 0u);  // a final total, not this chunk's tokens

  const StreamChunk done = MustDecode(decoder, wire[5]);
  EXPECT_TRUE(done.done);
  EXPECT_FALSE(done.has_choices);
}

TEST(OpenAiStreamTest, VllmCompletionsStream) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(
      decoder,
      R"({"id":"cmpl-7c1d","object":"text_completion","created":1718000001,"model":"facebook/opt-125m","choices":[{"index":0,"text":" there","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null})");
  EXPECT_TRUE(chunk.has_choices);
  EXPECT_EQ(chunk.content, " there");
  EXPECT_FALSE(chunk.usage);
  const StreamChunk last = MustDecode(
      decoder,
      R"({"id":"cmpl-7c1d","object":"text_completion","created":1718000001,"model":"facebook/opt-125m","choices":[{"index":0,"text":".","logprobs":null,"finish_reason":"stop","stop_reason":null}]})");
  EXPECT_EQ(last.finish_reason, "stop");
}

// SGLang: usage may arrive on the chunk that carries finish_reason (engine-interfaces.md 10.3),
// with extra fields such as matched_stop; finish_reason may be the non-OpenAI "abort".
TEST(OpenAiStreamTest, SglangUsageOnFinishChunk) {
  OpenAiStreamDecoder decoder;
  MustDecode(
      decoder,
      R"({"id":"5d1e0c","object":"chat.completion.chunk","created":1718000002,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":"Sure","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null})");
  const StreamChunk last = MustDecode(
      decoder,
      R"({"id":"5d1e0c","object":"chat.completion.chunk","created":1718000002,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":".","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":128009}],"usage":{"prompt_tokens":20,"total_tokens":62,"completion_tokens":42,"prompt_tokens_details":null}})");
  EXPECT_EQ(last.content, ".");
  EXPECT_EQ(last.finish_reason, "stop");
  ASSERT_TRUE(last.usage);
  EXPECT_EQ(*last.usage, (Usage{20, 42, std::nullopt}));
  EXPECT_EQ(last.token_count, 0u);  // 42 is the total, this chunk carried one token

  const StreamChunk aborted = MustDecode(
      decoder, R"({"choices":[{"index":0,"delta":{"content":""},"finish_reason":"abort"}]})");
  EXPECT_EQ(aborted.finish_reason, "abort");
}

// llama.cpp: extra `timings` object, usage on the final chunk (older builds) or on a choices: []
// chunk (newer builds), `id`/`system_fingerprint` in odd orders (engine-interfaces.md 5.2).
TEST(OpenAiStreamTest, LlamaCppWithTimings) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(
      decoder,
      R"({"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Paris"}}],"created":1718000003,"id":"chatcmpl-Xy12","model":"gpt-3.5-turbo","system_fingerprint":"b5127-e59ea539","object":"chat.completion.chunk"})");
  EXPECT_EQ(chunk.content, "Paris");
  const StreamChunk last = MustDecode(
      decoder,
      R"({"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1718000003,"id":"chatcmpl-Xy12","model":"gpt-3.5-turbo","system_fingerprint":"b5127-e59ea539","object":"chat.completion.chunk","usage":{"completion_tokens":9,"prompt_tokens":31,"total_tokens":40},"timings":{"prompt_n":31,"prompt_ms":22.4,"prompt_per_token_ms":0.72,"prompt_per_second":1383.9,"predicted_n":9,"predicted_ms":101.2,"predicted_per_token_ms":11.2,"predicted_per_second":88.9,"cache_n":0}})");
  EXPECT_TRUE(last.content.empty());
  EXPECT_EQ(last.finish_reason, "stop");
  ASSERT_TRUE(last.usage);
  EXPECT_EQ(last.usage->completion_tokens, 9u);
  EXPECT_EQ(last.usage->cached_tokens, 0u);  // all 31 evaluated
  EXPECT_EQ(last.token_count, 0u);
}

// Older llama.cpp builds count no cached tokens in usage: timings.cache_n says, or those of the
// prompt it did not evaluate (timings.prompt_n) it reused from the slot's cache. A count usage
// gives wins; an odd timings object, or one evaluating more than the prompt, says nothing.
TEST(OpenAiStreamTest, LlamaCppCachedTokensFromTimings) {
  OpenAiStreamDecoder decoder;
  const auto cached = [&](std::string_view payload) {
    const StreamChunk chunk = MustDecode(decoder, payload);
    EXPECT_TRUE(chunk.usage) << payload;
    return chunk.usage ? chunk.usage->cached_tokens : std::nullopt;
  };
  EXPECT_EQ(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":1004},"timings":{"prompt_n":1,"prompt_ms":0.4}})"),
            1003u);
  EXPECT_EQ(cached(R"({"timings":{"prompt_n":304},"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":1004}})"), 700u);
  EXPECT_EQ(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":4}},"timings":{"prompt_n":10}})"),
            4u);
  EXPECT_EQ(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":10},"timings":{"prompt_n":3,"cache_n":6}})"),
            6u);  // a newer build's own count
  EXPECT_FALSE(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":10},"timings":{"prompt_n":11}})"));
  EXPECT_FALSE(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":10},"timings":{"prompt_n":-1}})"));
  EXPECT_FALSE(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":10},"timings":[1,2]})"));
  EXPECT_FALSE(cached(R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":10},"timings":{"prompt_n":"3"}})"));
}

// TGI's OpenAI route: role repeated in every delta, `usage: null`, a system_fingerprint.
TEST(OpenAiStreamTest, TgiChatChunk) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(
      decoder,
      R"({"object":"chat.completion.chunk","id":"","created":1718000004,"model":"HuggingFaceH4/zephyr-7b-beta","system_fingerprint":"3.0.1-native","choices":[{"index":0,"delta":{"role":"assistant","content":" blue"},"logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(chunk.content, " blue");
  EXPECT_FALSE(chunk.usage);
  const StreamChunk last = MustDecode(
      decoder,
      R"({"object":"chat.completion.chunk","id":"","created":1718000004,"model":"HuggingFaceH4/zephyr-7b-beta","system_fingerprint":"3.0.1-native","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"eos_token"}],"usage":null})");
  EXPECT_EQ(last.finish_reason, "eos_token");
}

// Reasoning models: DeepSeek-R1 style `reasoning_content` with `content: null`, newer vLLM's
// `reasoning`, and both names carrying the same text.
TEST(OpenAiStreamTest, ReasoningChannels) {
  OpenAiStreamDecoder decoder;
  const StreamChunk r1 = MustDecode(
      decoder,
      R"({"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Let me think"},"finish_reason":null}]})");
  EXPECT_TRUE(r1.content.empty());
  EXPECT_EQ(r1.reasoning, "Let me think");
  const StreamChunk newer = MustDecode(
      decoder, R"({"choices":[{"index":0,"delta":{"reasoning":" step by step"},"finish_reason":null}]})");
  EXPECT_EQ(newer.reasoning, " step by step");
  const StreamChunk both = MustDecode(
      decoder,
      R"({"choices":[{"index":0,"delta":{"reasoning":"x","reasoning_content":"x"},"finish_reason":null}]})");
  EXPECT_EQ(both.reasoning, "x");  // one copy, not "xx"
  const StreamChunk answer = MustDecode(
      decoder,
      R"({"choices":[{"index":0,"delta":{"content":"42","reasoning_content":null},"finish_reason":null}]})");
  EXPECT_EQ(answer.content, "42");
  EXPECT_TRUE(answer.reasoning.empty());
}

TEST(OpenAiStreamTest, NullContentAndNullDelta) {
  OpenAiStreamDecoder decoder;
  EXPECT_TRUE(MustDecode(decoder, R"({"choices":[{"index":0,"delta":{"content":null}}]})").content.empty());
  EXPECT_TRUE(MustDecode(decoder, R"({"choices":[{"index":0,"delta":null}]})").has_choices);
  EXPECT_TRUE(MustDecode(decoder, R"({"choices":[{"index":0,"text":null}]})").content.empty());
  EXPECT_FALSE(MustDecode(decoder, R"({"choices":null})").has_choices);
}

TEST(OpenAiStreamTest, UnicodeEscapesInContentAreDecoded) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk =
      MustDecode(decoder, R"({"choices":[{"index":0,"delta":{"content":"caf\u00e9 \"q\"\n\ud83d\ude00"}}]})");
  EXPECT_EQ(chunk.content, "caf\xC3\xA9 \"q\"\n\xF0\x9F\x98\x80");
}

TEST(OpenAiStreamTest, ChatLogprobsGiveTokenCount) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(
      decoder,
      R"({"choices":[{"index":0,"delta":{"content":" big cat"},"logprobs":{"content":[{"token":" big","logprob":-0.31,"bytes":[32,98,105,103],"top_logprobs":[]},{"token":" cat","logprob":-1.2,"bytes":[32,99,97,116],"top_logprobs":[]}]},"finish_reason":null}]})");
  EXPECT_EQ(chunk.token_count, 2u);
  EXPECT_EQ(chunk.content, " big cat");
}

TEST(OpenAiStreamTest, CompletionsLogprobsGiveTokenCount) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(
      decoder,
      R"({"choices":[{"index":0,"text":"a b c","logprobs":{"text_offset":[0,1,3],"token_logprobs":[-0.1,-0.2,-0.3],"tokens":["a"," b"," c"],"top_logprobs":null},"finish_reason":null}]})");
  EXPECT_EQ(chunk.token_count, 3u);
}

TEST(OpenAiStreamTest, OddLogprobsShapesAreIgnored) {
  OpenAiStreamDecoder decoder;
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"a","logprobs":null}]})").token_count, 0u);
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"a","logprobs":{"content":null}}]})").token_count, 0u);
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"a","logprobs":[1,2]}]})").token_count, 0u);
}

// vLLM continuous_usage_stats: cumulative usage on every chunk; the role chunk reports 0.
TEST(OpenAiStreamTest, ContinuousUsageGivesPerChunkDeltas) {
  OpenAiStreamDecoder decoder;
  const char* wire[] = {
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0}})",
      R"({"choices":[{"index":0,"delta":{"content":"One"},"finish_reason":null}],"usage":{"prompt_tokens":7,"total_tokens":8,"completion_tokens":1}})",
      R"({"choices":[{"index":0,"delta":{"content":" two three"},"finish_reason":null}],"usage":{"prompt_tokens":7,"total_tokens":10,"completion_tokens":3}})",
      R"({"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"total_tokens":11,"completion_tokens":4}})",
      R"({"choices":[],"usage":{"prompt_tokens":7,"total_tokens":11,"completion_tokens":4}})",
  };
  const std::uint32_t expected[] = {0, 1, 2, 1, 0};
  for (std::size_t i = 0; i < std::size(wire); ++i) {
    EXPECT_EQ(MustDecode(decoder, wire[i]).token_count, expected[i]) << "chunk " << i;
  }
  // A new stream on the same decoder: without Reset the old baseline would swallow tokens.
  decoder.Reset();
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"Hi"}],"usage":{"prompt_tokens":3,"completion_tokens":1}})").token_count, 1u);
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"!"}],"usage":{"prompt_tokens":3,"completion_tokens":2}})").token_count, 1u);
}

TEST(OpenAiStreamTest, ResetForgetsContinuousUsage) {
  OpenAiStreamDecoder decoder;
  MustDecode(decoder, R"({"choices":[{"index":0,"text":"x"}],"usage":{"completion_tokens":50}})");
  decoder.Reset();
  // Fresh stream whose only usage rides the finishing chunk: a total, not a delta.
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"y","finish_reason":"stop"}],"usage":{"completion_tokens":60}})").token_count, 0u);
}

TEST(OpenAiStreamTest, LogprobsWinOverContinuousUsage) {
  OpenAiStreamDecoder decoder;
  MustDecode(decoder, R"({"choices":[{"index":0,"text":""}],"usage":{"completion_tokens":0}})");
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"ab","logprobs":{"tokens":["a","b"]}}],"usage":{"completion_tokens":2}})").token_count, 2u);
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"c"}],"usage":{"completion_tokens":3}})").token_count, 1u);
}

TEST(OpenAiStreamTest, UsageShapes) {
  OpenAiStreamDecoder decoder;
  const StreamChunk lmdeploy = MustDecode(decoder, R"({"choices":[{"index":0,"delta":{"content":"a"}}],"usage":null})");
  EXPECT_FALSE(lmdeploy.usage);
  const StreamChunk partial = MustDecode(decoder, R"({"choices":[],"usage":{"prompt_tokens":5}})");
  ASSERT_TRUE(partial.usage);
  EXPECT_EQ(*partial.usage, (Usage{5, 0, std::nullopt}));
  const StreamChunk cached = MustDecode(
      decoder,
      R"({"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":null},"prompt_tokens":100,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":2}}})");
  ASSERT_TRUE(cached.usage);
  EXPECT_EQ(*cached.usage, (Usage{100, 3, 64}));
  const StreamChunk null_cached = MustDecode(
      decoder, R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":null}}})");
  ASSERT_TRUE(null_cached.usage);
  EXPECT_FALSE(null_cached.usage->cached_tokens);
}

TEST(OpenAiStreamTest, IndexZeroChoiceOnly) {
  OpenAiStreamDecoder decoder;
  const StreamChunk two = MustDecode(
      decoder,
      R"({"choices":[{"delta":{"content":"second"},"index":1},{"delta":{"content":"first"},"index":0,"finish_reason":"stop"}]})");
  EXPECT_EQ(two.content, "first");
  EXPECT_EQ(two.finish_reason, "stop");
  const StreamChunk other = MustDecode(decoder, R"({"choices":[{"index":2,"delta":{"content":"not ours"}}]})");
  EXPECT_TRUE(other.has_choices);
  EXPECT_TRUE(other.content.empty());
  const StreamChunk no_index = MustDecode(decoder, R"({"choices":[{"text":"a"},{"text":"b"}]})");
  EXPECT_EQ(no_index.content, "a");
}

TEST(OpenAiStreamTest, UnknownFieldsAreIgnored) {
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(
      decoder,
      R"({"sglext":{"routed_experts":[[1,2],[3]],"x":{"y":[true,false,null,1e300]}},"metrics":{"time_to_first_token_ms":12.5},"choices":[{"index":0,"delta":{"content":"ok","tool_calls":[{"id":"t","function":{"name":"f","arguments":"{}"}}],"audio":null},"extra":[{}],"finish_reason":null}],"message":{"role":"x"},"object":"chat.completion.chunk"})");
  EXPECT_EQ(chunk.content, "ok");
  EXPECT_FALSE(chunk.error);
}

// Errors after the 200 header (engine-interfaces.md 1.2, 1.7, 10.4, 10.7).
TEST(OpenAiStreamTest, MidStreamErrorShapes) {
  OpenAiStreamDecoder decoder;
  const StreamChunk nested = MustDecode(
      decoder,
      R"({"error":{"message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}})");
  ASSERT_TRUE(nested.error);
  EXPECT_EQ(*nested.error, "This model's maximum context length is 4096 tokens.");
  EXPECT_FALSE(nested.has_choices);

  const StreamChunk tgi = MustDecode(decoder, R"({"error":"Request failed during generation: Server error: CUDA out of memory","error_type":"generation"})");
  ASSERT_TRUE(tgi.error);
  EXPECT_EQ(*tgi.error, "Request failed during generation: Server error: CUDA out of memory");

  const StreamChunk flat = MustDecode(
      decoder, R"({"object":"error","message":"The request queue is full.","type":"ServiceUnavailableError","param":null,"code":503})");
  ASSERT_TRUE(flat.error);
  EXPECT_EQ(*flat.error, "The request queue is full.");

  const StreamChunk flat_reordered = MustDecode(decoder, R"({"message":"boom","code":500,"object":"error"})");
  ASSERT_TRUE(flat_reordered.error);
  EXPECT_EQ(*flat_reordered.error, "boom");

  const StreamChunk llamacpp = MustDecode(
      decoder, R"({"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}})");
  ASSERT_TRUE(llamacpp.error);
  EXPECT_EQ(*llamacpp.error, "the request exceeds the available context size");

  const StreamChunk no_message = MustDecode(decoder, R"({"error":{"code":500,"type":"internal"}})");
  ASSERT_TRUE(no_message.error);
  EXPECT_EQ(*no_message.error, R"({"code":500,"type":"internal"})");

  const StreamChunk flat_no_message = MustDecode(decoder, R"({"object":"error"})");
  ASSERT_TRUE(flat_no_message.error);
}

TEST(OpenAiStreamTest, NullErrorAndNonErrorObjectAreNotErrors) {
  OpenAiStreamDecoder decoder;
  EXPECT_FALSE(MustDecode(decoder, R"({"error":null,"choices":[{"index":0,"text":"a"}]})").error);
  EXPECT_FALSE(MustDecode(decoder, R"({"object":"chat.completion.chunk","message":"hello","choices":[]})").error);
}

TEST(OpenAiStreamTest, LongErrorMessageIsCapped) {
  const std::string long_text(5000, 'x');
  OpenAiStreamDecoder decoder;
  const StreamChunk chunk = MustDecode(decoder, R"({"error":{"message":")" + long_text + R"("}})");
  ASSERT_TRUE(chunk.error);
  EXPECT_LE(chunk.error->size(), 1024u + 3u);
  EXPECT_EQ(chunk.error->substr(0, 10), "xxxxxxxxxx");
}

TEST(OpenAiStreamTest, MalformedPayloadsAreProtocolErrors) {
  const char* bad[] = {
      "",
      "   ",
      "not json at all",
      R"({"choices":[{"index":0,"delta":{"content":"trunc)",
      R"({"choices":[{"index":0,"delta":{"content":"x"}}]} trailing)",
      R"({"choices":{"index":0}})",
      R"({"choices":"oops"})",
      R"({"choices":[1,2]})",
      R"({"choices":[{"index":0,"delta":{"content":5}}]})",
      R"({"choices":[{"index":0,"delta":"text"}]})",
      R"({"choices":[{"index":0,"text":["a"]}]})",
      R"({"choices":[{"index":-1,"text":"a"}]})",
      R"({"choices":[{"index":0,"text":"a","finish_reason":7}]})",
      R"({"choices":[{"index":0,"delta":{"reasoning_content":{}}}]})",
      R"({"choices":[],"usage":"12"})",
      R"({"choices":[],"usage":{"completion_tokens":-3}})",
      R"({"choices":[],"usage":{"completion_tokens":2.5}})",
      R"({"choices":[],"usage":{"prompt_tokens_details":[]}})",
      R"(["choices"])",
      R"("[DONE]")",
      "42",
  };
  for (const char* payload : bad) {
    const Error error = MustFail(payload);
    EXPECT_EQ(error.code, ErrorCode::kProtocol) << payload;
    EXPECT_NE(error.message.find("OpenAI payload"), std::string::npos) << error.message;
  }
  EXPECT_NE(MustFail(R"({"choices":"oops"})").message.find("`choices` is not an array"), std::string::npos);
  const std::string nul_payload("{\"a\":1}\0", 8);
  EXPECT_EQ(MustFail(nul_payload).code, ErrorCode::kProtocol);
}

TEST(OpenAiStreamTest, ProtocolErrorQuotesAShortCleanExcerpt) {
  std::string payload = "garbage\n\x01\xFF ";
  payload += std::string(1000, 'z');
  const Error error = MustFail(payload);
  EXPECT_LT(error.message.size(), 200u + 80u);
  EXPECT_NE(error.message.find("garbage  ? zzz"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("..."), std::string::npos);
  EXPECT_NE(error.message.find("1011 bytes"), std::string::npos) << error.message;
  // The message must itself be writable as JSON (valid UTF-8).
  EXPECT_NO_THROW((void)json(error.message).dump());

  // A cut never splits a UTF-8 character.
  std::string utf8;
  while (utf8.size() < 400) utf8 += "\xE2\x82\xAC";  // euro sign, 3 bytes
  const Error cut = MustFail(utf8);
  EXPECT_NO_THROW((void)json(cut.message).dump());
}

// Every proper prefix of a chunk is rejected (never crashes, never half-decodes), and a decoder
// that has seen garbage still decodes the next good chunk.
TEST(OpenAiStreamTest, EveryTruncationIsRejectedAndDecoderRecovers) {
  const std::string good =
      R"({"id":"x","choices":[{"index":0,"delta":{"content":"h\u00e9llo","reasoning_content":null},"logprobs":{"content":[{"token":"h"}]},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}})";
  OpenAiStreamDecoder decoder;
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(decoder.Decode(std::string_view(good).substr(0, cut)).ok()) << "prefix " << cut;
    decoder.Reset();
  }
  const StreamChunk chunk = MustDecode(decoder, good);
  EXPECT_EQ(chunk.content, "h\xC3\xA9llo");
  EXPECT_EQ(chunk.token_count, 1u);
}

TEST(OpenAiStreamTest, LargePayloadThenSmallOne) {
  OpenAiStreamDecoder decoder;
  const std::string big(256 * 1024, 'q');
  const StreamChunk large = MustDecode(decoder, R"({"choices":[{"index":0,"text":")" + big + R"("}]})");
  EXPECT_EQ(large.content.size(), big.size());
  EXPECT_EQ(MustDecode(decoder, R"({"choices":[{"index":0,"text":"s"}]})").content, "s");
}

// ------------------------------------------------------------------------------------------------
// Whole responses and error bodies

TEST(OpenAiResponseTest, CompletionsResponse) {
  const Result<CompletionResponse> response = DecodeCompletionResponse(
      R"({"id":"cmpl-1","object":"text_completion","created":1718000005,"model":"m","choices":[{"index":0,"text":" a story","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2,"prompt_tokens_details":null}})");
  ASSERT_TRUE(response.ok()) << response.error().message;
  EXPECT_EQ(response->content, " a story");
  EXPECT_EQ(response->finish_reason, "length");
  ASSERT_TRUE(response->usage);
  EXPECT_EQ(*response->usage, (Usage{4, 2, std::nullopt}));
}

TEST(OpenAiResponseTest, ChatResponseWithReasoning) {
  const Result<CompletionResponse> response = DecodeCompletionResponse(
      R"({"id":"chatcmpl-2","object":"chat.completion","created":1718000006,"model":"deepseek-ai/DeepSeek-R1","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"2+2 is 4","content":"4","tool_calls":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}})");
  ASSERT_TRUE(response.ok()) << response.error().message;
  EXPECT_EQ(response->content, "4");
  EXPECT_EQ(response->reasoning, "2+2 is 4");
  EXPECT_EQ(response->finish_reason, "stop");
  ASSERT_TRUE(response->usage);
  EXPECT_EQ(*response->usage, (Usage{9, 12, 0}));
}

TEST(OpenAiResponseTest, ChatResponseNullContent) {
  const Result<CompletionResponse> response = DecodeCompletionResponse(
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning":"hmm"},"finish_reason":"length"}]})");
  ASSERT_TRUE(response.ok()) << response.error().message;
  EXPECT_EQ(response->content, "");
  EXPECT_EQ(response->reasoning, "hmm");
  EXPECT_FALSE(response->usage);
}

TEST(OpenAiResponseTest, FailuresAreProtocolErrors) {
  const char* bad[] = {
      "<html>502 Bad Gateway</html>",
      R"({"choices":[]})",
      R"({"id":"x"})",
      R"({"choices":[{"index":0,"message":[]}]})",
      R"({"error":{"message":"The model `foo` does not exist.","type":"NotFoundError","code":404}})",
  };
  for (const char* body : bad) {
    const Result<CompletionResponse> response = DecodeCompletionResponse(body);
    ASSERT_FALSE(response.ok()) << body;
    EXPECT_EQ(response.error().code, ErrorCode::kProtocol);
  }
  const Result<CompletionResponse> error = DecodeCompletionResponse(
      R"({"object":"error","message":"boom","type":"x","code":500})");
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.error().message.find("boom"), std::string::npos);
}

TEST(OpenAiErrorBodyTest, KnownShapes) {
  EXPECT_EQ(DecodeErrorMessage(R"({"error":{"message":"The model `X` does not exist.","type":"NotFoundError","param":null,"code":404}})"),
            "The model `X` does not exist.");
  EXPECT_EQ(DecodeErrorMessage(R"({"object":"error","message":"Requested token count exceeds the model's maximum context length.","type":"BadRequestError","param":null,"code":400})"),
            "Requested token count exceeds the model's maximum context length.");
  EXPECT_EQ(DecodeErrorMessage(R"({"error":"Model is overloaded","error_type":"overloaded"})"), "Model is overloaded");
  EXPECT_EQ(DecodeErrorMessage(R"({"error":"Unknown model: foo"})"), "Unknown model: foo");  // Triton core
  EXPECT_EQ(DecodeErrorMessage(R"({"error":{"code":500,"message":"Internal","type":"server_error"}})"), "Internal");
  EXPECT_EQ(DecodeErrorMessage(R"({"detail":"Unknown model: foo"})"), "Unknown model: foo");  // FastAPI
  const std::optional<std::string> validation = DecodeErrorMessage(
      R"({"detail":[{"loc":["body","max_tokens"],"msg":"value is not a valid integer","type":"type_error.integer"}]})");
  ASSERT_TRUE(validation);
  EXPECT_NE(validation->find("value is not a valid integer"), std::string::npos);
}

TEST(OpenAiErrorBodyTest, NotAnErrorShape) {
  EXPECT_FALSE(DecodeErrorMessage(""));
  EXPECT_FALSE(DecodeErrorMessage("Service Unavailable"));
  EXPECT_FALSE(DecodeErrorMessage("<html><body>502</body></html>"));
  EXPECT_FALSE(DecodeErrorMessage(R"({"choices":[]})"));
  EXPECT_FALSE(DecodeErrorMessage(R"({"error":null})"));
  EXPECT_FALSE(DecodeErrorMessage(R"(["error"])"));
  EXPECT_FALSE(DecodeErrorMessage(R"({"message":"not flagged as error"})"));
}

}  // namespace
}  // namespace bakeoff::dialect

namespace bakeoff::dialect {
namespace {

TEST(OpenAiEncodeHistoryTest, EarlierTurnsComeBetweenSystemAndTheNewUserTurn) {
  GenerationRequest request;
  request.model = "m";
  request.system = "be brief";
  request.history = {{"user", "hi"}, {"assistant", "hello \"there\""}};
  request.prompt = "and now?";
  const auto j = nlohmann::json::parse(EncodeRequestBody(request));
  ASSERT_EQ(j["messages"].size(), 4u);
  EXPECT_EQ(j["messages"][0]["role"], "system");
  EXPECT_EQ(j["messages"][1]["content"], "hi");
  EXPECT_EQ(j["messages"][2]["role"], "assistant");
  EXPECT_EQ(j["messages"][2]["content"], "hello \"there\"");
  EXPECT_EQ(j["messages"][3]["role"], "user");
  EXPECT_EQ(j["messages"][3]["content"], "and now?");
}

// An engine may cut a multi-byte character between two tokens: the token still counts, its bad
// bytes read as '?', and the chunk says so.
TEST(OpenAiStreamDecoderTest, InvalidUtf8InTokenTextIsCountedAndFlagged) {
  OpenAiStreamDecoder decoder;
  const std::string payload = "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ab\xE2\x82\"}}]}";
  const Result<StreamChunk> chunk = decoder.Decode(payload);
  ASSERT_TRUE(chunk.ok()) << chunk.error().message;
  EXPECT_TRUE(chunk->invalid_utf8);
  EXPECT_EQ(chunk->content, "ab??");
  const Result<StreamChunk> clean = decoder.Decode(R"({"choices":[{"index":0,"delta":{"content":"é"}}]})");
  ASSERT_TRUE(clean.ok());
  EXPECT_FALSE(clean->invalid_utf8);
  const Result<CompletionResponse> whole = DecodeCompletionResponse(
      "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"\xFF ok\"}}]}");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_TRUE(whole->invalid_utf8);
  EXPECT_EQ(whole->content, "? ok");
}

TEST(OpenAiStreamDecoderTest, TooDeepJsonIsNamedAsSuch) {
  OpenAiStreamDecoder decoder;
  std::string deep = "{\"x\":";
  for (int i = 0; i < 2000; ++i) deep += "[";
  for (int i = 0; i < 2000; ++i) deep += "]";
  deep += "}";
  const Result<StreamChunk> chunk = decoder.Decode(deep);
  ASSERT_FALSE(chunk.ok());
  EXPECT_NE(chunk.error().message.find("nested deeper"), std::string::npos) << chunk.error().message;
}

}  // namespace
}  // namespace bakeoff::dialect
