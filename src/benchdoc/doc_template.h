// benchdoc/doc_template.h
//
// Owns: the small template language of documents rendered from measured facts (docs/BENCHMARKS.md
// from bench/benchmarks.yaml and docs/benchmarks.json: benchmarks_doc.h). A text holds holes
// `{EXPRESSION}` or `{EXPRESSION:FORMAT}`; `{{` and `}}` are literal braces.
//
// A fact is a list of values (numbers or strings), one per run of a figure; a single value is a
// list of one. Expressions:
//   numbers (1e9), strings ('text' or "text"), fact names (a.events_per_s: letters, digits, _ and
//   .),
//   + - * / on numbers element by element (a list of one broadcasts; otherwise lengths must match;
//   x / 0 is not a number and formats as "n/a"), + with a string operand concatenates,
//   < <= > >= == != (1 or 0), && || ! and COND ? A : B (only the branch taken is evaluated),
//   functions: median min max sum mean count first last (of a list), floor ceil round abs,
//   has(NAME) (1 when the fact exists), join(LIST, SEP), fmt(X, 'FORMAT') (each value as text).
// Formats: `int` (rounded, thousands separators), `.N` (N decimals), `g` (six significant digits);
// without one a whole number prints as digits and any other as its shortest exact form. A list
// prints its values separated by spaces.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"

namespace bakeoff::benchdoc {

using FactItem = std::variant<double, std::string>;
using FactValue = std::vector<FactItem>;
using Facts = std::map<std::string, FactValue, std::less<>>;

// The value of one expression. Errors (kInvalidInput) name what is wrong: "no fact 'a.x'",
// "median of a list of strings", "lists of 3 and 2 values", "unknown function 'foo'", a syntax
// error with its column.
Result<FactValue> EvaluateExpression(std::string_view expression, const Facts& facts);

// One value or list as text in `format` (see above); an unknown format is an error.
Result<std::string> FormatFact(const FactValue& value, std::string_view format);

// `text` with every hole replaced. An error names the hole: "{a.x / 2}: no fact 'a.x'".
Result<std::string> RenderTemplate(std::string_view text, const Facts& facts);

// One value as text without a format: a whole number as digits, any other number in its shortest
// exact form, a string as it is.
std::string FactText(const FactItem& item);

// True when every value is a non-zero number or a non-empty string (an empty list is false).
bool IsTrue(const FactValue& value);

}  // namespace bakeoff::benchdoc
