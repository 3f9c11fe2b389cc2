// load/prompt_text.h
//
// Owns: prompt text with a requested length, made from a built-in English corpus (written for
// bakeoff). A prompt of N words starts at a seed-chosen place in the corpus, so prompts differ
// from one another and server prefix caches do not turn a benchmark into a cache benchmark.
// The emulated engine's tokenizer counts one token per word, so there N words are N tokens; for
// a real server the words-per-token ratio is measured through its tokenize endpoint (see
// load/runner.h) and the word count scaled.
//
// Thread-safety: PromptText is immutable after construction; Build() is const.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::load {

// Words of corpus text expected to make `tokens` tokens for a server whose tokenizer gives
// `words_per_token` words per token (1 for the emulated engine). At least 1.
std::uint32_t WordsForTokens(std::uint32_t tokens, double words_per_token);

// How a server counts prompt text, as measured by target/prompt_calibration.h: its tokenizer's
// words per token, and the tokens it adds to every prompt of its own (chat template, BOS).
struct PromptSizing {
  double words_per_token = 1.0;
  double overhead_tokens = 0;
};

// Words of corpus text for a prompt the server should count as `tokens` in all: the overhead
// is taken off first. At least 1.
std::uint32_t PromptWords(std::uint32_t tokens, const PromptSizing& sizing);

class PromptText {
 public:
  PromptText();

  // `words` words of corpus text separated by single spaces, starting at a place chosen by
  // `seed`. REQUIRES: words > 0.
  std::string Build(std::uint32_t words, std::uint64_t seed) const;

  std::size_t corpus_words() const { return words_.size(); }

 private:
  std::vector<std::string_view> words_;
};

}  // namespace bakeoff::load
