// qualify/quality_set.h: JSONL set parsing and its file:line errors, the built-in set, and the
// five scorers.
#include "qualify/quality_set.h"
#include "support/scratch.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

namespace bakeoff::qualify {
namespace {

QualityItem One(std::string_view line) {
  Result<std::vector<QualityItem>> set = ParseQualitySet(line, "t.jsonl");
  EXPECT_TRUE(set.ok()) << set.error().message;
  return set.ok() ? set->front() : QualityItem{};
}

std::string ErrorOf(std::string_view text) {
  Result<std::vector<QualityItem>> set = ParseQualitySet(text, "set.jsonl");
  return set.ok() ? "" : set.error().message;
}

TEST(QualitySetTest, ParsesEveryField) {
  const QualityItem item =
      One(R"({"id": "pi", "prompt": "Pi?", "reference": "3.14", "scorer": "numeric", )"
          R"("tolerance": 0.01, "max_tokens": 12})");
  EXPECT_EQ(item.id, "pi");
  EXPECT_EQ(item.prompt, "Pi?");
  EXPECT_EQ(item.reference, "3.14");
  EXPECT_EQ(item.scorer, Scorer::kNumeric);
  EXPECT_DOUBLE_EQ(item.tolerance, 0.01);
  EXPECT_EQ(item.max_tokens, 12u);
}

TEST(QualitySetTest, MessagesItemAndItsPromptText) {
  const QualityItem item = One(
      R"({"id": "m", "messages": [{"role": "system", "content": "Be brief."}, )"
      R"({"role": "user", "content": "Capital of Peru?"}], "reference": "Lima", "scorer": "contains"})");
  ASSERT_EQ(item.messages.size(), 2u);
  EXPECT_EQ(PromptText(item), "Be brief.\nCapital of Peru?");
  EXPECT_EQ(item.max_tokens, 64u);  // the default
}

TEST(QualitySetTest, SkipsBlankAndCommentLines) {
  Result<std::vector<QualityItem>> set = ParseQualitySet(
      "# a comment\n\n"
      R"({"id": "a", "prompt": "x", "reference": "y", "scorer": "exact"})"
      "\n   \n"
      R"({"id": "b", "prompt": "x", "reference": "y", "scorer": "contains"})",
      "s");
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->size(), 2u);
}

TEST(QualitySetTest, ErrorsNameFileLineAndField) {
  const std::string good = R"({"id": "a", "prompt": "x", "reference": "y", "scorer": "exact"})";
  EXPECT_EQ(ErrorOf(good + "\n{not json"), "set.jsonl:2: not JSON");
  EXPECT_EQ(ErrorOf("[1]"), "set.jsonl:1: not a JSON object");
  EXPECT_EQ(ErrorOf(R"({"prompt": "x", "reference": "y", "scorer": "exact"})"),
            "set.jsonl:1: field \"id\" is missing");
  EXPECT_EQ(ErrorOf(R"({"id": 3, "prompt": "x", "reference": "y", "scorer": "exact"})"),
            "set.jsonl:1: field \"id\" must be a string");
  EXPECT_NE(ErrorOf(R"({"id": "a", "prompt": "x", "reference": "y", "scorer": "fuzzy"})")
                .find("scorer \"fuzzy\" is not one of"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"id": "a", "reference": "y", "scorer": "exact"})"),
            "set.jsonl:1: give exactly one of \"prompt\" and \"messages\"");
  EXPECT_EQ(
      ErrorOf(R"({"id": "a", "prompt": "x", "messages": [], "reference": "y", "scorer": "exact"})"),
      "set.jsonl:1: give exactly one of \"prompt\" and \"messages\"");
  EXPECT_NE(
      ErrorOf(R"({"id": "a", "messages": [{"role": "user"}], "reference": "y", "scorer": "exact"})")
          .find("\"messages\""),
      std::string::npos);
  EXPECT_NE(ErrorOf(R"({"id": "a", "prompt": "x", "reference": "(", "scorer": "regex"})")
                .find("set.jsonl:1: reference is not a regular expression"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"id": "a", "prompt": "x", "reference": "four", "scorer": "numeric"})"),
            "set.jsonl:1: reference is not a number (scorer numeric)");
  EXPECT_EQ(ErrorOf(R"({"id": "a", "prompt": "x", "scorer": "json_schema"})"),
            "set.jsonl:1: field \"schema\" is missing (scorer json_schema)");
  EXPECT_NE(ErrorOf(R"({"id": "a", "prompt": "x", "scorer": "json_schema", "schema": {"type": 1}})")
                .find("set.jsonl:1: schema.type"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"id": "a", "prompt": "x", "scorer": "exact"})"),
            "set.jsonl:1: field \"reference\" is missing");
  EXPECT_EQ(
      ErrorOf(
          R"({"id": "a", "prompt": "x", "reference": "1", "scorer": "numeric", "tolerance": -1})"),
      "set.jsonl:1: field \"tolerance\" must be a non-negative number");
  EXPECT_NE(
      ErrorOf(R"({"id": "a", "prompt": "x", "reference": "y", "scorer": "exact", "max_tokens": 0})")
          .find("max_tokens"),
      std::string::npos);
  EXPECT_EQ(ErrorOf(good + "\n" + good), "set.jsonl:2: id \"a\" is used twice");
  EXPECT_EQ(ErrorOf("# only a comment\n"), "set.jsonl: no items");
}

TEST(QualitySetTest, BuiltInSetParsesAndHasAboutTenItems) {
  Result<std::vector<QualityItem>> set = LoadQualitySet("");
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_GE(set->size(), 8u);
  EXPECT_LE(set->size(), 15u);
}

TEST(QualitySetTest, LoadsAFileAndNamesItInErrors) {
  const auto path = bakeoff::testing::ScratchRoot() / "bakeoff_quality_set_test.jsonl";
  std::ofstream(path) << R"({"id": "a", "prompt": "x", "reference": "y", "scorer": "exact"})"
                      << "\n{\"id\": \"b\"}\n";
  Result<std::vector<QualityItem>> set = LoadQualitySet(path);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.error().message, path.string() + ":2: field \"scorer\" is missing");
  std::filesystem::remove(path);
  EXPECT_FALSE(LoadQualitySet(path).ok());
}

TEST(QualityScorerTest, ExactIgnoresSurroundingWhitespaceOnly) {
  const QualityItem item =
      One(R"({"id": "a", "prompt": "x", "reference": "Paris", "scorer": "exact"})");
  EXPECT_TRUE(ScoreOutput(item, "  Paris\n").passed);
  EXPECT_FALSE(ScoreOutput(item, "paris").passed);
  EXPECT_FALSE(ScoreOutput(item, "Paris.").passed);
}

TEST(QualityScorerTest, ContainsIgnoresCase) {
  const QualityItem item =
      One(R"({"id": "a", "prompt": "x", "reference": "Paris", "scorer": "contains"})");
  EXPECT_TRUE(ScoreOutput(item, "The capital is PARIS.").passed);
  EXPECT_FALSE(ScoreOutput(item, "Lyon").passed);
}

TEST(QualityScorerTest, RegexSearchesAnywhere) {
  const QualityItem item =
      One(R"({"id": "a", "prompt": "x", "reference": "\\b1945\\b", "scorer": "regex"})");
  EXPECT_TRUE(ScoreOutput(item, "It ended in 1945.").passed);
  EXPECT_FALSE(ScoreOutput(item, "19450").passed);
}

TEST(QualityScorerTest, NumericTakesTheLastNumberWithinTolerance) {
  const QualityItem exact =
      One(R"({"id": "a", "prompt": "x", "reference": "42", "scorer": "numeric"})");
  EXPECT_TRUE(ScoreOutput(exact, "42").passed);
  EXPECT_TRUE(ScoreOutput(exact, "17 + 25 = 42.").passed);
  EXPECT_FALSE(ScoreOutput(exact, "42 or maybe 43").passed);
  EXPECT_FALSE(ScoreOutput(exact, "forty-two").passed);
  EXPECT_EQ(ScoreOutput(exact, "forty-two").why, "no number in the output");
  const QualityItem loose = One(
      R"({"id": "a", "prompt": "x", "reference": "3.14159", "scorer": "numeric", "tolerance": 0.01})");
  EXPECT_TRUE(ScoreOutput(loose, "about 3.14").passed);
  EXPECT_FALSE(ScoreOutput(loose, "about 3.2").passed);
  const QualityItem big =
      One(R"({"id": "a", "prompt": "x", "reference": "1000000", "scorer": "numeric"})");
  EXPECT_TRUE(ScoreOutput(big, "1,000,000").passed);
  const QualityItem negative =
      One(R"({"id": "a", "prompt": "x", "reference": "-3", "scorer": "numeric"})");
  EXPECT_TRUE(ScoreOutput(negative, "It is -3").passed);
}

TEST(QualityScorerTest, JsonSchemaFindsTheDocumentInTheOutput) {
  const QualityItem item =
      One(R"({"id": "a", "prompt": "x", "scorer": "json_schema", "schema": {"type": "object", )"
          R"("properties": {"age": {"type": "integer"}}, "required": ["age"]}})");
  EXPECT_TRUE(ScoreOutput(item, R"({"age": 36})").passed);
  EXPECT_TRUE(ScoreOutput(item, "```json\n{\"age\": 36}\n```").passed);
  EXPECT_TRUE(ScoreOutput(item, "Here it is: {\"age\": 36} Hope that helps.").passed);
  EXPECT_FALSE(ScoreOutput(item, R"({"age": "36"})").passed);
  EXPECT_EQ(ScoreOutput(item, "no json").why, "no JSON document in the output");
  EXPECT_EQ(ScoreOutput(item, R"({"name": 1})").why,
            "JSON breaks the schema: $: required property \"age\" is missing");
}

TEST(QualityScorerTest, RightAnswersPassTheBuiltInSet) {
  // What a model that knows the answers would say; each item of the built-in set passes.
  const std::map<std::string, std::string> answers = {
      {"add", "42"},
      {"multiply", "144"},
      {"subtract", "999"},
      {"week", "7"},
      {"capital_france", "Paris"},
      {"capital_japan", "Tokyo"},
      {"capital_italy", "Rome."},
      {"war_end", "1945"},
      {"json_person", R"({"name": "Ada", "age": 36})"},
      {"json_colors", R"(["red", "yellow", "blue"])"}};
  Result<std::vector<QualityItem>> set = LoadQualitySet("");
  ASSERT_TRUE(set.ok());
  for (const QualityItem& item : *set) {
    ASSERT_TRUE(answers.count(item.id)) << item.id;
    const ItemScore score = ScoreOutput(item, answers.at(item.id));
    EXPECT_TRUE(score.passed) << item.id << ": " << score.why;
    EXPECT_FALSE(ScoreOutput(item, "him him only all or you can").passed) << item.id;
  }
}

}  // namespace
}  // namespace bakeoff::qualify
