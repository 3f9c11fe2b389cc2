// core/yaml_doc.h
//
// Owns: reading the small YAML files people write by hand (runtime catalogs, studies, engine
// presets) strictly and with every mistake reported at once, each as
// "FILE:LINE: FIELD: what is wrong" (FIELD dotted from the document root, list elements indexed:
// `runtimes[2].image`). The pieces:
// - Diagnostic / Diagnostics: the mistakes found so far, rendered one line each in line order;
// - LoadDocument: exactly one YAML document, refused (never hanging) when yaml-cpp 0.7 would not
//   finish it (CheckYamlTerminates);
// - MapReader: one mapping at a field path, with typed getters that record a diagnostic instead
//   of failing (so a reader goes on and finds the next mistake), and Finish(), which reports the
//   keys nobody asked for (with the nearest known key as a suggestion) and keys given twice;
// - the suggestion helpers (EditDistance, NearestName) and the scalar rules shared with
//   emulate/engine_preset.cc.
// Does not own: what any file means (its reader: study/catalog.h, emulate/engine_preset.h), or
// cross-field rules (the reader checks them and adds diagnostics itself).
//
// Scalar rules (the same for every file): a quoted scalar ('256', "true") or one tagged !!str is
// text, never a number or a boolean; whole numbers are plain decimal literals; real numbers are
// decimal or exponent literals and must be finite; booleans are true/false (True, TRUE, False,
// FALSE); durations are "250ms", "30s", "5min", "1h" or a plain number of seconds; dates are
// YYYY-MM-DD calendar dates. A key whose value is empty (`key:`) reads as "nothing".
//
// Thread-safety: pure functions; a MapReader and its Diagnostics belong to one thread.
// Units: lines are 1-based; durations are Nanos (core/clock.h); dates as days since 1970-01-01.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/clock.h"
#include "core/result.h"

namespace bakeoff::yaml {

// --- Diagnostics ---

struct Diagnostic {
  std::string source;   // the file name as given ("examples/catalog.yaml")
  int line = 0;         // 1-based; 0 when the mistake has no line
  std::string field;    // dotted path ("runtimes[2].image"); empty for the document itself
  std::string message;  // what is wrong, without the where

  // "SOURCE:LINE: FIELD: MESSAGE"; without ":LINE" when line is 0, without "FIELD: " when the
  // field is empty. Always one line: line breaks in the field or message (a quoted value can
  // hold them) are written as \n and \r (OneLine).
  std::string Text() const;
};

class Diagnostics {
 public:
  // Keeps at most kMaxKept diagnostics; later ones are only counted (a fuzzed file can hold
  // millions of mistakes, and nobody reads past the first screens).
  static constexpr std::size_t kMaxKept = 1000;

  void Add(Diagnostic diagnostic);
  void Add(std::string_view source, int line, std::string field, std::string message);

  bool empty() const { return count_ == 0; }
  // Every diagnostic added, kept or not.
  std::size_t size() const { return count_; }
  // The kept diagnostics, in the order they were added.
  const std::vector<Diagnostic>& items() const { return items_; }
  // The kept diagnostics ordered by line (stable: equal lines keep the order they were added).
  std::vector<Diagnostic> Sorted() const;

  // One line per diagnostic (Diagnostic::Text), in line order, joined by '\n' (no trailing
  // newline); when some were not kept, a last line "SOURCE: N more mistakes not shown".
  std::string Text() const;
  // ErrorCode::kInvalidInput with Text() as the message. REQUIRES: !empty().
  Error ToError() const;

 private:
  std::vector<Diagnostic> items_;
  std::size_t count_ = 0;
};

// --- Suggestions ---

// Levenshtein distance (insertions, deletions and substitutions of bytes).
std::size_t EditDistance(std::string_view a, std::string_view b);
// Close enough to be a typo of a name: a quarter of the typed name's letters (at least 2) may
// differ.
bool CloseEnoughToSuggest(std::string_view typed, std::size_t distance);
// The candidate nearest to `typed` by EditDistance (the first of equals), when it is close enough
// to suggest; nullopt otherwise.
std::optional<std::string> NearestName(std::string_view typed,
                                       const std::vector<std::string>& candidates);
std::optional<std::string> NearestName(std::string_view typed,
                                       std::span<const std::string_view> candidates);
// `text` with '\n' and '\r' written as the two characters \n and \r, so a value quoted in a
// message keeps the message on one line.
std::string OneLine(std::string_view text);

// "a, b, c".
std::string JoinNames(std::span<const std::string> names);
std::string JoinNames(std::span<const std::string_view> names);

// --- Documents ---

// How LoadDocument speaks of the document in its messages.
struct DocumentKind {
  std::string_view noun = "YAML document";             // "empty NOUN", "a NOUN is one YAML document"
  std::string_view with_article = "a YAML document";   // "too many YAML nodes for WITH_ARTICLE"
  std::string_view empty_hint;  // appended to "empty NOUN", e.g. ": expected a list of runtimes"
  // Non-empty: the root must be a mapping, else "expected EXPECT_MAPPING, got ...".
  std::string_view expect_mapping;
};

// OK when yaml-cpp reaches the end of `text` within a bound of a million parse events and
// `max_documents` documents (a file of several documents, such as Kubernetes manifests, passes
// its own bound). yaml-cpp 0.7 never finishes some malformed inputs (a document that is only
// ","); the event stream is consumed here first, so such a file is refused instead of hanging
// the command. Errors (kInvalidInput): "SOURCE:LINE: not valid YAML: ...", "SOURCE:1: more than
// one YAML document", "SOURCE:LINE: not valid YAML: too many YAML nodes for WITH_ARTICLE".
inline constexpr int kMaxDocumentsOfOneFile = 16;
Status CheckYamlTerminates(std::string_view text, std::string_view source,
                           const DocumentKind& kind = {}, int max_documents = kMaxDocumentsOfOneFile);

// Exactly one YAML document, after CheckYamlTerminates. Errors (kInvalidInput, one line each:
// a value quoted in them has its line breaks written as \n), in this order:
// "SOURCE:LINE: not valid YAML: ..."; "SOURCE:1: empty NOUN[EMPTY_HINT]" (no document, or only
// a null); "SOURCE:LINE: expected EXPECT_MAPPING, got ..." (when asked); "SOURCE:LINE: a NOUN
// is one YAML document; a second one starts here".
Result<YAML::Node> LoadDocument(std::string_view text, std::string_view source,
                                const DocumentKind& kind = {});

// --- Scalars ---

// A quoted scalar ('256' or "256") or one tagged !!str: text, never a number or boolean.
bool IsQuotedOrString(const YAML::Node& node);
// How a node reads in a message: "nothing", "a list", "a mapping", or the scalar in quotes.
std::string Describe(const YAML::Node& node);
// A YAML real as a double: a decimal or exponent literal (optional sign), or YAML's .inf/.nan
// spellings (callers refuse those as not finite). nullopt when the text is not a number.
std::optional<double> ReadReal(std::string_view text);
// Plain decimal digits with an optional sign.
bool LooksWhole(std::string_view text);
// The 1-based line of a mark (yaml-cpp's are 0-based, -1 when unknown: line 1).
int LineOf(const YAML::Mark& mark);
// Days since 1970-01-01 of a YYYY-MM-DD calendar date (years 0001-9999); nullopt otherwise.
std::optional<std::int64_t> ParseIsoDate(std::string_view text);
// YYYY-MM-DD of a day count since 1970-01-01.
std::string FormatIsoDate(std::int64_t days);

// --- Mappings ---

enum class Need { kOptional, kRequired };

// One element of a list: its node, its field path ("runtimes[2]") and its line.
struct ListItem {
  YAML::Node node;
  std::string path;
  int line = 0;
};

// Reads one mapping. Every getter names its key as known (whether the key is present or not),
// returns the value when it is present and right, and otherwise records a diagnostic and returns
// nullopt: an absent optional key is nullopt without a diagnostic; an absent required key is
// "missing (required)" at the mapping's line. Finish() then reports every key present that no
// getter named, and every key given twice (the getters read the first).
// The Diagnostics passed in must outlive the reader; readers are cheap to copy.
class MapReader {
 public:
  // `node` is expected to be a mapping found at `path` ("" for the document root) on `line` (0:
  // the node's own mark). A node that is not a mapping is recorded as "expected a mapping, got
  // ..." and reads as empty; a null node (an empty value) reads as an empty mapping.
  MapReader(const YAML::Node& node, std::string path, std::string_view source,
            Diagnostics* diagnostics, int line = 0);
  // The mapping of a list element.
  MapReader(const ListItem& item, std::string_view source, Diagnostics* diagnostics);

  // A scalar, as written (numbers and booleans too: `version: 0.10` is "0.10"). Empty text is
  // refused ("must not be empty").
  std::optional<std::string> Text(std::string_view key, Need need = Need::kOptional);
  // A whole number in [min, max].
  std::optional<std::int64_t> Integer(std::string_view key, std::int64_t min, std::int64_t max,
                                      Need need = Need::kOptional);
  // A finite real number in [min, max].
  std::optional<double> Number(std::string_view key, double min, double max,
                               Need need = Need::kOptional);
  std::optional<bool> Bool(std::string_view key, Need need = Need::kOptional);
  // One scalar, or a list of scalars (each non-empty); `[]` is an empty list. An element's
  // mistake names it: "key[3]".
  std::optional<std::vector<std::string>> TextList(std::string_view key,
                                                   Need need = Need::kOptional);
  // "250ms", "30s", "5min", "1h", or a plain number of seconds; not negative, at most
  // kMaxDurationSeconds.
  std::optional<Nanos> Duration(std::string_view key, Need need = Need::kOptional);
  // A YYYY-MM-DD calendar date, returned as written.
  std::optional<std::string> Date(std::string_view key, Need need = Need::kOptional);
  // One of `allowed` (exact spelling); returns its index. A near miss is suggested.
  std::optional<std::size_t> Enum(std::string_view key, std::span<const std::string_view> allowed,
                                  Need need = Need::kOptional);
  // The mapping under `key`, to read with its own getters and Finish().
  std::optional<MapReader> Map(std::string_view key, Need need = Need::kOptional);
  // The elements of the list under `key`, with their paths "key[i]" and lines.
  std::optional<std::vector<ListItem>> List(std::string_view key, Need need = Need::kOptional);
  // A free-form mapping (its keys are data, not names): every key present, first occurrences in
  // file order, all named as known.
  std::vector<std::string> Keys();
  // Names `key` as known without reading it.
  void Allow(std::string_view key);

  bool Has(std::string_view key) const;
  // The line of `key` (its first occurrence), else the mapping's line.
  int LineOf(std::string_view key) const;
  // The dotted path of `key` under this mapping ("runtimes[2].image").
  std::string Field(std::string_view key) const;
  // Records `message` about `key` (at its line, or the mapping's when absent).
  void Error(std::string_view key, std::string message);
  // Records `message` at `line` about `field` (a full path).
  void ErrorAt(int line, std::string field, std::string message);

  // Reports unknown keys ("unknown key; did you mean X?" or "unknown key (known keys: ...)") and
  // keys given twice ("given twice (first on line N)"). Call once, after every getter.
  void Finish();

  const std::string& path() const { return path_; }
  int line() const { return line_; }
  std::string_view source() const { return source_; }
  Diagnostics& diagnostics() const { return *diagnostics_; }

 private:
  struct Entry {
    std::string key;
    YAML::Node value;
    int line = 0;        // the key's line
    int value_line = 0;  // the value's line (the key's when the value is empty)
  };

  const Entry* Find(std::string_view key) const;
  // The entry for `key` if present (naming the key as known); records "missing (required)" when
  // it is absent and required.
  const Entry* Lookup(std::string_view key, Need need);
  void Fail(const Entry& entry, std::string_view field, std::string message);
  std::optional<std::string> ScalarText(const YAML::Node& value, int line, const std::string& field);

  std::string path_;
  std::string source_;
  Diagnostics* diagnostics_;
  int line_ = 0;
  std::vector<Entry> entries_;
  std::vector<std::string> known_;  // in the order named, for messages
  std::set<std::string, std::less<>> known_set_;
};

}  // namespace bakeoff::yaml
