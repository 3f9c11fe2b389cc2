#include "load/prompt_text.h"

#include <gtest/gtest.h>

#include <sstream>

#include "count_words.h"

namespace bakeoff::load {
namespace {

TEST(PromptTextTest, ExactWordCount) {
  const PromptText prompts;
  for (std::uint32_t words : {1u, 2u, 13u, 256u, 50000u}) {
    const std::string text = prompts.Build(words, 42);
    EXPECT_EQ(CountWords(text), words);
    EXPECT_EQ(text.find("  "), std::string::npos);
    EXPECT_EQ(text.find('\n'), std::string::npos);
  }
}

TEST(PromptTextTest, DeterministicPerSeedAndDistinctAcrossSeeds) {
  const PromptText prompts;
  EXPECT_EQ(prompts.Build(300, 7), prompts.Build(300, 7));
  // Different seeds differ within the first few words, so no long shared prefix.
  for (std::uint64_t seed = 1; seed < 50; ++seed) {
    const std::string a = prompts.Build(64, seed);
    const std::string b = prompts.Build(64, seed + 1000);
    EXPECT_NE(a.substr(0, 60), b.substr(0, 60)) << seed;
  }
}

}  // namespace
}  // namespace bakeoff::load

namespace bakeoff::load {
namespace {

TEST(PromptTextTest, WordsForTokensScalesByTheServersRatio) {
  EXPECT_EQ(WordsForTokens(2000, 1.0), 2000u);
  EXPECT_EQ(WordsForTokens(2000, 0.75), 1500u);  // 4 tokens per 3 words: fewer words
  EXPECT_EQ(WordsForTokens(1, 0.1), 1u);         // never zero words
}

}  // namespace
}  // namespace bakeoff::load
