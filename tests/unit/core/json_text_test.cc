#include "core/json_text.h"

#include <gtest/gtest.h>

namespace bakeoff {
namespace {

std::string Quoted(std::string_view text) {
  std::string out;
  AppendJsonString(out, text);
  return out;
}

TEST(JsonTextTest, EscapesWhatJsonRequiresAndNothingElse) {
  EXPECT_EQ(Quoted(""), "\"\"");
  EXPECT_EQ(Quoted("plain text, long enough for a word scan"), "\"plain text, long enough for a word scan\"");
  EXPECT_EQ(Quoted("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  EXPECT_EQ(Quoted("caf\xC3\xA9 \xE2\x82\xAC"), "\"caf\xC3\xA9 \xE2\x82\xAC\"");  // UTF-8 kept
}

TEST(JsonTextTest, EveryEscapeAtEveryPositionOfAWord) {
  for (std::size_t at = 0; at < 20; ++at) {
    std::string text(20, 'x');
    text[at] = '"';
    std::string expected = "\"" + std::string(at, 'x') + "\\\"" + std::string(19 - at, 'x') + "\"";
    EXPECT_EQ(Quoted(text), expected) << at;
  }
}

TEST(JsonTextTest, InvalidUtf8BecomesReplacementCharacters) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(Quoted("a\xFF" "b"), "\"a" + replacement + "b\"");
  EXPECT_EQ(Quoted("\xC3"), "\"" + replacement + "\"");                  // cut sequence
  EXPECT_EQ(Quoted("\xED\xA0\x80"), "\"" + replacement + replacement + replacement + "\"");  // surrogate
  EXPECT_EQ(Quoted("\xC0\xAF"), "\"" + replacement + replacement + "\"");  // overlong
}

TEST(JsonTextTest, ValidUtf8ReplacesAndCountsOnlyTheBadBytes) {
  const std::string replacement = "\xEF\xBF\xBD";
  std::size_t replaced = 0;
  EXPECT_EQ(ValidUtf8("caf\xC3\xA9 \xE2\x82\xAC", &replaced), "caf\xC3\xA9 \xE2\x82\xAC");
  EXPECT_EQ(replaced, 0u);
  EXPECT_EQ(ValidUtf8("ab\xC2", &replaced), "ab" + replacement);  // cut after the lead byte
  EXPECT_EQ(ValidUtf8("\xF0\x9F\x98x", &replaced), replacement + replacement + replacement + "x");
  EXPECT_EQ(replaced, 4u);
}

TEST(JsonTextTest, Utf8PrefixNeverEndsInsideACharacter) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a, e-acute (2), euro (3), emoji (4)
  EXPECT_EQ(Utf8Prefix(text, 100), text);
  EXPECT_EQ(Utf8Prefix(text, 1), "a");
  EXPECT_EQ(Utf8Prefix(text, 2), "a");
  EXPECT_EQ(Utf8Prefix(text, 3), "a\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(text, 5), "a\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(text, 9), "a\xC3\xA9\xE2\x82\xAC");
  for (std::size_t n = 0; n <= text.size(); ++n) {
    std::size_t replaced = 0;
    (void)ValidUtf8(Utf8Prefix(text, n), &replaced);
    EXPECT_EQ(replaced, 0u) << n;
  }
  // Bytes that are not UTF-8 at all are cut where asked.
  EXPECT_EQ(Utf8Prefix(std::string(8, '\x80'), 5).size(), 5u);
}

}  // namespace
}  // namespace bakeoff
