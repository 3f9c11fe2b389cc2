// emulate/tokenizer.cc: the whitespace/8-byte tokenizer and the output word stream.
#include "emulate/tokenizer.h"

#include <algorithm>
#include <array>

namespace bakeoff::emulate {

namespace {

// Words for output text, each stored with its trailing space. Short common English words make a
// stream that reads like text in logs and reports; none is longer than kMaxTokenBytes.
constexpr std::array<std::string_view, 64> kWords = {
    "the ",    "of ",     "and ",    "to ",     "in ",     "is ",     "that ",   "it ",
    "for ",    "as ",     "with ",   "was ",    "on ",     "be ",     "at ",     "by ",
    "this ",   "had ",    "not ",    "are ",    "but ",    "from ",   "or ",     "have ",
    "an ",     "they ",   "which ",  "one ",    "you ",    "were ",   "her ",    "all ",
    "she ",    "there ",  "would ",  "their ",  "we ",     "him ",    "been ",   "has ",
    "when ",   "who ",    "will ",   "more ",   "no ",     "if ",     "out ",    "so ",
    "said ",   "what ",   "up ",     "its ",    "about ",  "into ",   "than ",   "them ",
    "can ",    "only ",   "other ",  "new ",    "some ",   "could ",  "time ",   "these ",
};

// SplitMix64 finaliser: a well-mixed index into kWords from (seed, index).
std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Calls `emit(piece)` for each token of `text`.
template <typename Emit>
void ForEachToken(std::string_view text, Emit&& emit) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && IsTokenSpace(text[i])) ++i;
    std::size_t start = i;
    while (i < n && !IsTokenSpace(text[i])) ++i;
    // [start, i) is one maximal run; cut it every kMaxTokenBytes bytes.
    for (std::size_t p = start; p < i; p += kMaxTokenBytes) {
      emit(text.substr(p, std::min(kMaxTokenBytes, i - p)));
    }
  }
}

}  // namespace

std::size_t CountTokens(std::string_view text) {
  std::size_t count = 0;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && IsTokenSpace(text[i])) ++i;
    std::size_t start = i;
    while (i < n && !IsTokenSpace(text[i])) ++i;
    count += (i - start + kMaxTokenBytes - 1) / kMaxTokenBytes;
  }
  return count;
}

std::vector<std::string_view> TokenPieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  ForEachToken(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

std::uint32_t PieceId(std::string_view piece) {
  std::uint32_t hash = 2166136261u;  // FNV-1a, 32-bit
  for (char c : piece) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return hash % kVocabSize;
}

std::vector<std::uint32_t> TokenIds(std::string_view text) {
  std::vector<std::uint32_t> ids;
  ForEachToken(text, [&](std::string_view piece) { ids.push_back(PieceId(piece)); });
  return ids;
}

std::string_view OutputPiece(std::uint64_t seed, std::uint64_t index) {
  return kWords[Mix(seed * 0x100000001b3ULL + index) % kWords.size()];
}

}  // namespace bakeoff::emulate
