// Tests for emulate/tokenizer.h: the documented token rule and the output word stream.
#include "emulate/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::emulate {
namespace {

TEST(TokenizerTest, OneTokenPerWhitespaceSeparatedRun) {
  EXPECT_EQ(CountTokens(""), 0u);
  EXPECT_EQ(CountTokens("   \t\n"), 0u);
  EXPECT_EQ(CountTokens("hello"), 1u);
  EXPECT_EQ(CountTokens("hello world"), 2u);
  EXPECT_EQ(CountTokens("  hello \n\t world  "), 2u);
  EXPECT_EQ(CountTokens("a,b.c!"), 1u);
}

TEST(TokenizerTest, LongRunsSplitEveryEightBytes) {
  EXPECT_EQ(CountTokens("12345678"), 1u);
  EXPECT_EQ(CountTokens("123456789"), 2u);
  EXPECT_EQ(CountTokens(std::string(17, 'x')), 3u);
  auto pieces = TokenPieces("abcdefghij kl");
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], "abcdefgh");
  EXPECT_EQ(pieces[1], "ij");
  EXPECT_EQ(pieces[2], "kl");
}

TEST(TokenizerTest, CountMatchesPiecesAndIds) {
  const std::string text = "The quick brown fox\njumps over the extraordinarily lazy dog.";
  EXPECT_EQ(CountTokens(text), TokenPieces(text).size());
  EXPECT_EQ(CountTokens(text), TokenIds(text).size());
}

// TokenIds and TokenPieces split alike: on texts of random runs of every length and
// every whitespace byte, its ids are those of the pieces, one by one.
TEST(TokenizerTest, IdsAreThePiecesIdsOnRandomTexts) {
  const std::string letters = "ab,Z9\xc3\xa9";
  const std::string spaces = " \t\n\v\f\r";
  std::uint64_t state = 7;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state >> 33);
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const std::size_t runs = next() % 12;
    for (std::size_t r = 0; r < runs; ++r) {
      const std::string& from = r % 2 == 0 ? letters : spaces;
      for (std::size_t n = next() % 20; n > 0; --n) text.push_back(from[next() % from.size()]);
    }
    std::vector<std::uint32_t> expected;
    for (std::string_view piece : TokenPieces(text)) expected.push_back(PieceId(piece));
    ASSERT_EQ(TokenIds(text), expected) << '"' << text << '"';
  }
}

TEST(TokenizerTest, NWordsJoinedBySpacesAreNTokens) {
  std::string prompt;
  for (int i = 0; i < 500; ++i) {
    if (i) prompt += ' ';
    prompt += "word" + std::to_string(i % 1000);
  }
  EXPECT_EQ(CountTokens(prompt), 500u);
}

TEST(TokenizerTest, CommonTextPrefixGivesCommonTokenPrefix) {
  const auto a = TokenIds("shared system prompt here then user one");
  const auto b = TokenIds("shared system prompt here then another question entirely");
  ASSERT_GE(a.size(), 5u);
  ASSERT_GE(b.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(a[i], b[i]) << i;
}

TEST(TokenizerTest, IdsAreDeterministicAndInVocabulary) {
  EXPECT_EQ(PieceId("hello"), PieceId("hello"));
  EXPECT_NE(PieceId("hello"), PieceId("world"));
  for (auto id : TokenIds("a b c d e f g h i j k")) EXPECT_LT(id, kVocabSize);
}

TEST(TokenizerTest, OutputPiecesAreWordsThatRetokenizeOneEach) {
  std::string text;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    std::string_view piece = OutputPiece(7, i);
    ASSERT_GE(piece.size(), 2u);
    ASSERT_LE(piece.size(), kMaxTokenBytes + 1);
    EXPECT_EQ(piece.back(), ' ');
    for (char c : piece.substr(0, piece.size() - 1)) EXPECT_TRUE(c >= 'a' && c <= 'z') << piece;
    text += piece;
  }
  EXPECT_EQ(CountTokens(text), 1000u);
  EXPECT_EQ(OutputPiece(7, 3), OutputPiece(7, 3));
}

TEST(TokenizerTest, OutputDependsOnSeed) {
  std::string a, b;
  for (std::uint64_t i = 0; i < 20; ++i) {
    a += OutputPiece(1, i);
    b += OutputPiece(2, i);
  }
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace bakeoff::emulate
