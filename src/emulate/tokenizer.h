// emulate/tokenizer.h
//
// Owns: the emulated engine's tokenizer and its output text. Both are deterministic and
// documented, so that a client can build a prompt of exactly N tokens and check the server's
// usage figures without a real vocabulary (docs/emulator.md, "Tokens").
//
// Tokenizer rule: a token is a maximal run of non-whitespace bytes (whitespace = ASCII space,
// \t, \n, \v, \f, \r); a run longer than kMaxTokenBytes bytes is split every kMaxTokenBytes
// bytes. Whitespace itself produces no token. Consequences: N words of at most 8 bytes joined by
// spaces are exactly N tokens, and two texts with a common prefix ending at whitespace have a
// common token prefix.
//
// Output text: output token i of a request is a short word followed by one space
// (OutputPiece(seed, i)); every word has at most 8 bytes, so the output text re-tokenizes to
// exactly as many tokens as were generated.
//
// Does not own: counting chat messages (emulate/openai_api.h) or timing (emulate/scheduler.h).
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace bakeoff::emulate {

inline constexpr std::size_t kMaxTokenBytes = 8;
// Token ids lie in [0, kVocabSize).
inline constexpr std::uint32_t kVocabSize = 32000;

// True for the six ASCII whitespace bytes that separate tokens.
constexpr bool IsTokenSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Number of tokens in `text` by the rule above; never allocates.
std::size_t CountTokens(std::string_view text);

// The tokens of `text` as views into it, in order.
std::vector<std::string_view> TokenPieces(std::string_view text);

// The id of one token: a 32-bit FNV-1a hash of its bytes modulo kVocabSize (equal pieces, equal
// ids; different pieces usually differ).
std::uint32_t PieceId(std::string_view piece);

// PieceId of every token of `text`.
std::vector<std::uint32_t> TokenIds(std::string_view text);

// The text of output token `index` for a request generated with `seed`: one word of 2-8 ASCII
// letters followed by a single space. Needs no JSON escaping. The sequence looks like (meaningless)
// English and is a pure function of (seed, index).
std::string_view OutputPiece(std::uint64_t seed, std::uint64_t index);

}  // namespace bakeoff::emulate
