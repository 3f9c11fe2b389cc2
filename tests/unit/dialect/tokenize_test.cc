// The engines' token-counting dialects: each request names the text in the engine's own field,
// and each answer's count is read only from the engine's own shape.
#include "dialect/tokenize.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bakeoff::dialect {
namespace {

using nlohmann::json;

TEST(TokenizeTest, RequestsNameTheTextInEachEnginesField) {
  EXPECT_EQ(json::parse(EncodeTokenizeRequest(TokenizeDialect::kVllm, "m", "hi")),
            json({{"model", "m"}, {"prompt", "hi"}}));
  EXPECT_EQ(json::parse(EncodeTokenizeRequest(TokenizeDialect::kLlamaCpp, "m", "hi"))["content"],
            "hi");
  EXPECT_EQ(json::parse(EncodeTokenizeRequest(TokenizeDialect::kTgi, "m", "hi"))["inputs"], "hi");
  EXPECT_EQ(json::parse(EncodeTokenizeRequest(TokenizeDialect::kTrtLlm, "m", "hi"))["prompt"],
            "hi");
  EXPECT_EQ(json::parse(EncodeTokenizeRequest(TokenizeDialect::kLmdeploy, "m", "hi"))["input"],
            "hi");
  EXPECT_STREQ(TokenizePath(TokenizeDialect::kTrtLlm), "/_internal/tokenize");
  EXPECT_STREQ(TokenizePath(TokenizeDialect::kLmdeploy), "/v1/encode");
  EXPECT_STREQ(TokenizePath(TokenizeDialect::kLlamaCpp), "/tokenize");
}

TEST(TokenizeTest, AnswersAreReadInTheirOwnShapeOnly) {
  EXPECT_EQ(DecodeTokenizeCount(TokenizeDialect::kVllm, R"({"count":3,"tokens":[1,2,3]})").value(),
            3u);
  EXPECT_EQ(DecodeTokenizeCount(TokenizeDialect::kVllm, R"({"tokens":[1,2]})").value(), 2u);
  EXPECT_EQ(DecodeTokenizeCount(TokenizeDialect::kLlamaCpp, R"({"tokens":[5,6,7,8]})").value(), 4u);
  EXPECT_EQ(
      DecodeTokenizeCount(
          TokenizeDialect::kTgi,
          R"([{"id":1,"text":"a","start":0,"stop":1},{"id":2,"text":"b","start":1,"stop":2}])")
          .value(),
      2u);
  EXPECT_EQ(DecodeTokenizeCount(TokenizeDialect::kTrtLlm, R"({"count":9})").value(), 9u);
  EXPECT_EQ(
      DecodeTokenizeCount(TokenizeDialect::kLmdeploy, R"({"input_ids":[1,2],"length":2})").value(),
      2u);
  // Another engine's answer, an error or garbage is not a count.
  EXPECT_FALSE(DecodeTokenizeCount(TokenizeDialect::kTgi, R"({"tokens":[1]})").ok());
  EXPECT_FALSE(DecodeTokenizeCount(TokenizeDialect::kLlamaCpp, R"({"count":3})").ok());
  EXPECT_FALSE(DecodeTokenizeCount(TokenizeDialect::kVllm, R"({"detail":"Not Found"})").ok());
  EXPECT_FALSE(DecodeTokenizeCount(TokenizeDialect::kVllm, R"({"count":-1})").ok());
  const Result<std::uint64_t> garbage = DecodeTokenizeCount(TokenizeDialect::kLmdeploy, "<html>");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message.find("/v1/encode"), std::string::npos)
      << garbage.error().message;
}

}  // namespace
}  // namespace bakeoff::dialect
