// qualify/json_schema.h
//
// Owns: checking a JSON value against the small subset of JSON Schema (draft 2020-12 keywords)
// that bakeoff's own schemas use: `type` (a name or a list of names: object, array, string,
// integer, number, boolean, null), `properties`, `required`, `items` (one schema for every
// element), `enum`. Other keywords are ignored, so a schema using more than the subset is
// checked only as far as the subset goes. Used by the compatibility probe (structured output,
// tool-call arguments) and the quality probe's json_schema scorer.
// Does not own: extracting JSON from generated text (qualify/quality_set.h).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace bakeoff::qualify {

// The first way `value` breaks `schema`, as "<path>: <why>" with a JSONPath-like path ("$",
// "$.tags[2]"); nullopt when it conforms. A `schema` that is not an object accepts everything
// (JSON Schema's `true`), except the literal `false`, which accepts nothing.
std::optional<std::string> SchemaViolation(const nlohmann::json& value,
                                           const nlohmann::json& schema);

// Whether `schema` uses the subset correctly (each keyword of the subset has the right shape):
// kInvalidInput-style message naming the keyword, or nullopt. Lets set files fail at load time.
std::optional<std::string> SchemaProblem(const nlohmann::json& schema);

}  // namespace bakeoff::qualify
