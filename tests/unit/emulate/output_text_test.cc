// Tests for emulate/output_text.h: pieces of fixed texts, stop strings, minimal JSON instances,
// logprob figures and the --answers file.
#include "emulate/output_text.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"
#include "support/scratch.h"

namespace bakeoff::emulate {
namespace {

using nlohmann::json;

std::string Joined(const ChoiceText& text, std::int64_t tokens) {
  std::string out;
  for (std::int64_t i = 0; i < tokens; ++i) out += text.Piece(i);
  return out;
}

TEST(OutputTextTest, FixedTextHasOnePiecePerToken) {
  const std::string text = "  Paris is\tthe capital of France, undoubtedly.\n";
  ChoiceText fixed = ChoiceText::Fixed(text, FinishReason::kStop);
  ASSERT_TRUE(fixed.natural_tokens());
  EXPECT_EQ(*fixed.natural_tokens(), static_cast<std::int64_t>(CountTokens(text)));
  EXPECT_EQ(Joined(fixed, *fixed.natural_tokens()), text);
  EXPECT_EQ(fixed.Piece(0), "  Paris ");
  EXPECT_EQ(fixed.natural_finish(), FinishReason::kStop);
  EXPECT_EQ(fixed.JsonPiece(2), "the ");  // "\t" went with "is"
  EXPECT_EQ(fixed.JsonPiece(1), "is\\t");
}

TEST(OutputTextTest, PiecesNeverSplitAUtf8Character) {
  // 7 a's and a 3-byte euro sign: the tokenizer cuts the run after 8 bytes, inside the euro sign,
  // so the piece boundary moves past it.
  const std::string text = "aaaaaaa\xe2\x82\xac tail";
  ChoiceText fixed = ChoiceText::Fixed(text, FinishReason::kStop);
  EXPECT_EQ(fixed.natural_tokens(), 3);
  EXPECT_EQ(Joined(fixed, 3), text);
  EXPECT_EQ(fixed.Piece(0), "aaaaaaa\xe2\x82\xac");
  EXPECT_EQ(fixed.Piece(1), " ");
  EXPECT_EQ(fixed.Piece(2), "tail");
}

TEST(OutputTextTest, EmptyTextIsOnePiece) {
  ChoiceText empty = ChoiceText::Fixed("", FinishReason::kStop);
  EXPECT_EQ(empty.natural_tokens(), 1);
  EXPECT_EQ(empty.Piece(0), "");
}

TEST(OutputTextTest, StopStringTakenFromTheWordStreamStopsIt) {
  ChoiceText words = ChoiceText::Words(3);
  // A stop string made of words 5 and 6 of this very stream.
  const std::string stop = std::string(words.Piece(5)) + std::string(words.Piece(6)).substr(0, 2);
  const std::string full = Joined(words, 40);
  const std::size_t at = full.find(stop);
  ASSERT_NE(at, std::string::npos);
  words.ApplyStop({"never-there", stop}, 40);
  ASSERT_TRUE(words.natural_tokens());
  EXPECT_EQ(words.natural_finish(), FinishReason::kStop);
  const std::string out = Joined(words, *words.natural_tokens());
  EXPECT_EQ(out, full.substr(0, at));
  EXPECT_EQ(out.find(stop), std::string::npos);
  EXPECT_LE(*words.natural_tokens(), 7);
}

TEST(OutputTextTest, StopBeyondMaxTokensOrAbsentChangesNothing) {
  ChoiceText words = ChoiceText::Words(0);
  words.ApplyStop({"zzzz"}, 200);
  EXPECT_TRUE(words.endless());
  ChoiceText short_text = ChoiceText::Fixed("one two three", FinishReason::kStop);
  short_text.ApplyStop({"three"}, 2);  // the match would end in token 2, past max_tokens
  EXPECT_EQ(short_text.natural_tokens(), 3);
  ChoiceText fixed = ChoiceText::Fixed("one two three", FinishReason::kStop);
  fixed.ApplyStop({"two"}, 10);
  EXPECT_EQ(fixed.natural_tokens(), 2);
  EXPECT_EQ(Joined(fixed, 2), "one ");
}

TEST(OutputTextTest, MinimalJsonInstances) {
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":"integer","exclusiveMinimum":3})")), 4);
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":"number","minimum":2.5})")), 2.5);
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":"boolean"})")), true);
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":["null","string"]})")), nullptr);
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"const":{"a":1}})")), json::parse(R"({"a":1})"));
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"anyOf":[{"type":"integer"},{"type":"string"}]})")),
            0);
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":"string","maxLength":2})")), "te");
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":"array","items":{"type":"string"}})")),
            json::array());
  json nested = MinimalJsonInstance(json::parse(R"({"properties":{"a":{"type":"object",
      "properties":{"b":{"enum":[3,4]}}}}})"));
  EXPECT_EQ(nested, json::parse(R"({"a":{"b":3}})"));
  EXPECT_EQ(MinimalJsonInstance(json::parse(R"({"type":"object","required":["x"]})")),
            json::parse(R"({"x":""})"));
}

TEST(OutputTextTest, LogprobsAreStableAndOrdered) {
  EXPECT_EQ(TokenLogprob(1, 5), TokenLogprob(1, 5));
  EXPECT_LT(TokenLogprob(1, 5), 0.0);
  EXPECT_GT(TokenLogprob(1, 5), -2.5001);
  EXPECT_LT(AlternativeLogprob(1, 5, 2), AlternativeLogprob(1, 5, 1));
  EXPECT_NE(AlternativePiece("the ", 1, 5, 1), "the ");
}

class AnswersFileTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove(path_); }
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_.string();
  }
  std::filesystem::path path_ = bakeoff::testing::ScratchRoot() /
                                ("bakeoff-answers-" + std::to_string(::getpid()) + ".jsonl");
};

TEST_F(AnswersFileTest, ReadsPromptsAndAnswers) {
  auto answers =
      LoadAnswers(Write("{\"prompt\":\"2+2?\",\"answer\":\"4\"}\n\n"
                        "{\"prompt\":\"capital?\",\"answer\":\"Paris\"}\n"));
  ASSERT_TRUE(answers.ok()) << answers.error().message;
  EXPECT_EQ(answers->size(), 2u);
  EXPECT_EQ(answers->at("capital?"), "Paris");
}

TEST_F(AnswersFileTest, BadLinesNameFileAndLine) {
  const std::string file = Write("{\"prompt\":\"a\",\"answer\":\"b\"}\n{\"prompt\":\"a\"}\n");
  auto answers = LoadAnswers(file);
  ASSERT_FALSE(answers.ok());
  EXPECT_EQ(answers.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(answers.error().message.find(file + ":2:"), std::string::npos)
      << answers.error().message;
  auto not_json = LoadAnswers(Write("nope\n"));
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.error().message.find(":1: not valid JSON"), std::string::npos);
  auto missing = LoadAnswers("/nonexistent/answers.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
}

}  // namespace
}  // namespace bakeoff::emulate
