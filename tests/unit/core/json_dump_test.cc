#include "core/json_dump.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bakeoff {
namespace {

TEST(JsonDumpTest, ValidDocumentsDumpAsNlohmannDoes) {
  const nlohmann::json doc = {{"a", 1}, {"text", "caf\xC3\xA9"}};
  EXPECT_EQ(DumpJson(doc, -1), doc.dump());
  EXPECT_EQ(DumpJson(doc, 2), doc.dump(2) + "\n");
}

TEST(JsonDumpTest, TextCutInsideACharacterIsReplacedAndCounted) {
  // What a probe quoting a random-weight model's output produced: a quote ending after 0xC2.
  nlohmann::json doc = {{"message", "the output: ab\xC2"},
                        {"list", {"ok", "\xFF\xFE"}},
                        {"nested", {{"key\xE2\x82", "\xF0\x9F"}}}};
  ASSERT_THROW((void)doc.dump(), nlohmann::json::type_error);
  std::size_t replaced = 0;
  const std::string text = DumpJson(doc, 2, "test.json", &replaced);
  EXPECT_EQ(replaced, 1u + 2u + 2u + 2u);
  const nlohmann::json back = nlohmann::json::parse(text);  // valid UTF-8 JSON, or this throws
  EXPECT_EQ(back["message"], "the output: ab\xEF\xBF\xBD");
  EXPECT_EQ(back["list"][0], "ok");
  EXPECT_TRUE(back["nested"].contains("key\xEF\xBF\xBD\xEF\xBF\xBD"));
}

}  // namespace
}  // namespace bakeoff
