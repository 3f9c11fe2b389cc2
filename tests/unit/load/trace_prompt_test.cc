#include "load/trace_prompt.h"

#include <gtest/gtest.h>

#include <sstream>

#include "count_words.h"

namespace bakeoff::load {
namespace {

workload::TraceRequest WithHashes(std::vector<std::uint64_t> hashes, std::uint32_t input_tokens) {
  workload::TraceRequest r;
  r.input_tokens = input_tokens;
  r.prefix_hashes = std::move(hashes);
  return r;
}

TEST(TracePromptTest, SharedHashChainsBecomeSharedText) {
  const PromptText text;
  // Blocks of 8 tokens (words, for the emulated engine's tokenizer).
  const auto a = BuildTracePrompt(text, WithHashes({1, 2, 3}, 30), 8, PromptSizing{}, 100).prompt;
  const auto b = BuildTracePrompt(text, WithHashes({1, 2, 4}, 30), 8, PromptSizing{}, 200).prompt;
  const auto c = BuildTracePrompt(text, WithHashes({9, 2, 3}, 30), 8, PromptSizing{}, 100).prompt;
  EXPECT_EQ(CountWords(a), 30u);
  EXPECT_EQ(CountWords(b), 30u);
  // a and b share exactly their first two blocks (16 words).
  std::istringstream wa(a), wb(b);
  std::vector<std::string> words_a, words_b;
  for (std::string w; wa >> w;) words_a.push_back(w);
  for (std::string w; wb >> w;) words_b.push_back(w);
  EXPECT_TRUE(std::equal(words_a.begin(), words_a.begin() + 16, words_b.begin()));
  EXPECT_NE(std::vector<std::string>(words_a.begin() + 16, words_a.begin() + 24),
            std::vector<std::string>(words_b.begin() + 16, words_b.begin() + 24));
  // Block 2 after another first block is different text: chains, not ids, decide.
  EXPECT_NE(a.substr(0, 40), c.substr(0, 40));
  EXPECT_EQ(a, BuildTracePrompt(text, WithHashes({1, 2, 3}, 30), 8, PromptSizing{}, 100).prompt);
}

TEST(TracePromptTest, OwnTextAndMessagesAreSentAsTheyAre) {
  const PromptText text;
  workload::TraceRequest r;
  r.input_tokens = 999;
  r.messages = {{"system", "sys"}, {"user", "q1"}, {"assistant", "a1"}, {"user", "q2"}};
  const TracePrompt chat = BuildTracePrompt(text, r, 0, PromptSizing{}, 1);
  EXPECT_EQ(chat.system, "sys");
  EXPECT_EQ(chat.prompt, "q2");
  ASSERT_EQ(chat.history.size(), 2u);
  EXPECT_EQ(chat.history[1].second, "a1");
  workload::TraceRequest p;
  p.prompt = "exact text";
  EXPECT_EQ(BuildTracePrompt(text, p, 0, PromptSizing{}, 1).prompt, "exact text");
}

TEST(TracePromptTest, NoHashesGivesUniqueTextOfTheInputLength) {
  const PromptText text;
  workload::TraceRequest r;
  r.input_tokens = 50;
  const auto one = BuildTracePrompt(text, r, 512, PromptSizing{}, 1).prompt;
  EXPECT_EQ(CountWords(one), 50u);
  EXPECT_NE(one, BuildTracePrompt(text, r, 512, PromptSizing{}, 2).prompt);
}

}  // namespace
}  // namespace bakeoff::load
