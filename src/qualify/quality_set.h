// qualify/quality_set.h
//
// Owns: the quality probe's prompt sets: the JSONL format (one item a line: {"id", "prompt" or
// "messages", "reference", "scorer", optional "tolerance", "schema", "max_tokens"}; blank lines
// and lines starting with '#' are skipped), its validation with file:line messages, the small
// built-in set embedded in the binary, and the five scorers (exact, contains, regex,
// json_schema, numeric) that judge one output against its item.
// Does not own: sending the prompts or the verdict (qualify/quality_probe.cc).
//
// Thread-safety: pure functions; a QualityItem is a value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace bakeoff::qualify {

enum class Scorer {
  kExact,       // the output, without surrounding whitespace, equals the reference
  kContains,    // the reference appears in the output, ignoring ASCII case
  kRegex,       // the reference (ECMAScript regex) matches somewhere in the output
  kJsonSchema,  // the output (or its first {...}/[...] block) is JSON conforming to `schema`
  kNumeric,     // the last number in the output is within `tolerance` of the reference number
};
const char* ScorerName(Scorer scorer);

struct QualityItem {
  std::string id;
  std::string prompt;       // set when the line has "prompt"
  nlohmann::json messages;  // set (an array of {role, content}) when the line has "messages"
  std::string reference;
  Scorer scorer = Scorer::kExact;
  double tolerance = 0;   // numeric: absolute
  nlohmann::json schema;  // json_schema: the schema (qualify/json_schema.h subset)
  std::uint32_t max_tokens = 64;
};

// Parses a whole set. Errors (kInvalidInput) name `source:line` and the field: not JSON, not an
// object, a missing or mistyped field, both or neither of prompt and messages, an unknown
// scorer, a regex that does not compile, a reference that is not a number (numeric), a missing
// or malformed schema (json_schema), max_tokens outside 1..32768, a duplicate id, no items.
Result<std::vector<QualityItem>> ParseQualitySet(std::string_view text, std::string_view source);

// Reads and parses `path`; the built-in set when `path` is empty.
Result<std::vector<QualityItem>> LoadQualitySet(const std::filesystem::path& path);

// The built-in set's JSONL text (quality_set.cc): about ten short items (arithmetic, capitals,
// JSON output) that any instruction-tuned model answers; a random-weight model fails them.
std::string_view BuiltInQualitySet();

struct ItemScore {
  bool passed = false;
  std::string why;  // what was compared, in a few words, pass or fail
};

ItemScore ScoreOutput(const QualityItem& item, std::string_view output);

// The prompt as one text: the prompt, or the messages' contents joined with "\n" (how the
// completions API is asked an item written as messages).
std::string PromptText(const QualityItem& item);

}  // namespace bakeoff::qualify
