// emulate/output_text.h
//
// Owns: what the emulated engine says, as output tokens: the endless word stream of a seed
// (tokenizer.h OutputPiece), fixed texts (an --answers answer, a JSON instance for
// response_format, tool-call arguments) cut into the emulator's tokens, stop strings applied to
// either, the minimal JSON instance of a JSON schema, logprob figures, and the --answers file.
// docs/emulator.md ("Output text", "Structured output and tools") is the user-facing description.
// Does not own: request parsing or rendering (emulate/openai_api.h), timing (emulate/scheduler.h).
//
// A ChoiceText is the output of one choice: piece i is the text of output token i. Concatenated,
// the pieces are the choice's text. A fixed text of T tokens (CountTokens) has T pieces: piece i
// is token i with the whitespace that follows it (the first piece also holds leading
// whitespace); a piece boundary never splits a UTF-8 character. A text without tokens is one
// piece. A choice has a natural end (a fixed text, or a stop string matched) with its finish
// reason, or none (the word stream runs until max_tokens or EOS).
//
// Thread-safety: immutable after construction; pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/result.h"
#include "emulate/scheduler.h"

namespace bakeoff::emulate {

class ChoiceText {
 public:
  // The endless word stream of `seed`: piece i is OutputPiece(seed, i).
  static ChoiceText Words(std::uint64_t seed);
  // The endless stream of a server that sends bytes, not characters: every piece starts or ends
  // inside a multibyte UTF-8 character (the concatenation is valid UTF-8; no piece alone is).
  // For the --fault-cut-utf8 misbehaving server.
  static ChoiceText CutUtf8();
  // `text` cut into tokens (see above); it ends naturally after its last token with `finish`.
  static ChoiceText Fixed(std::string_view text, FinishReason finish);

  // The text of output token `index`, raw and escaped for a JSON string.
  // REQUIRES: !natural_tokens() || index < *natural_tokens().
  std::string_view Piece(std::int64_t index) const;
  std::string_view JsonPiece(std::int64_t index) const;
  // Tokens until the natural end; nullopt for the endless word stream.
  std::optional<std::int64_t> natural_tokens() const;
  FinishReason natural_finish() const { return finish_; }
  bool endless() const { return pieces_.empty(); }

  // Ends the text before the first occurrence of any of `stop` (non-empty strings) within its
  // first `max_tokens` tokens: the token in which that occurrence ends becomes the last one
  // (finish reason kStop), and the text of every piece is clipped where the occurrence begins
  // (so the stop string and what follows are never output; the last pieces may be empty). No
  // occurrence: unchanged.
  void ApplyStop(const std::vector<std::string>& stop, std::int64_t max_tokens);

 private:
  ChoiceText() = default;
  void SetPieces(std::vector<std::string> pieces, FinishReason finish);
  std::uint64_t seed_ = 0;
  bool cut_utf8_ = false;  // endless: the cut pieces instead of seed_'s words
  std::vector<std::string> pieces_;       // empty: the word stream of seed_
  std::vector<std::string> json_pieces_;  // pieces_, escaped
  FinishReason finish_ = FinishReason::kLength;
};

// `text` escaped for the inside of a JSON string (quotes, backslashes, control characters); other
// bytes pass unchanged.
std::string JsonEscape(std::string_view text);

// A minimal JSON value valid against `schema` (a JSON Schema subset: type (or a list of types,
// the first is used), object properties/required (the required ones; all of them when `required`
// is absent), array items/minItems, string minLength, number and integer minimum /
// exclusiveMinimum, boolean, null, enum and const (the first value), anyOf/oneOf/allOf (the first
// branch)). An unsupported or absent schema gives {}.
nlohmann::json MinimalJsonInstance(const nlohmann::json& schema);

// The log-probability of output token `index` of a choice with `seed` (in (-2.5, 0), a pure
// function), and of its k-th alternative (k >= 1: lower than the token's, decreasing with k).
double TokenLogprob(std::uint64_t seed, std::int64_t index);
double AlternativeLogprob(std::uint64_t seed, std::int64_t index, std::int64_t k);
// The text of the k-th alternative to output token `index` (k >= 1): a word that differs from
// `piece`.
std::string_view AlternativePiece(std::string_view piece, std::uint64_t seed, std::int64_t index,
                                  std::int64_t k);

// --answers: prompt text -> answer text.
using AnswerTable = std::map<std::string, std::string, std::less<>>;

// Reads a JSONL file of {"prompt": "...", "answer": "..."} lines (blank lines skipped; a later
// line for the same prompt wins). kIo when it cannot be read; kInvalidInput naming "file:line"
// for a line that is not such an object.
Result<AnswerTable> LoadAnswers(const std::string& path);

}  // namespace bakeoff::emulate
