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

}  // namespace
}  // namespace bakeoff
