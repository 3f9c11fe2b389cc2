// qualify/quality_set.cc: the quality probe's JSONL prompt sets, the built-in set and the
// scorers.
#include "qualify/quality_set.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/ascii.h"
#include "core/file.h"
#include "core/json_dump.h"
#include "core/json_text.h"
#include "qualify/json_schema.h"

namespace bakeoff::qualify {
namespace {

using nlohmann::json;

constexpr std::uint32_t kMaxItemTokens = 32768;

// The built-in set. Short questions with one right answer, asked so that the answer is easy to
// score; the json items check that a model can still produce a structured answer.
constexpr std::string_view kBuiltIn =
    R"jsonl(# bakeoff built-in quality set: one item a line (docs/formats/probes.md, "quality")
{"id": "add", "prompt": "What is 17 + 25? Answer with only the number.", "reference": "42", "scorer": "numeric"}
{"id": "multiply", "prompt": "What is 12 times 12? Answer with only the number.", "reference": "144", "scorer": "numeric"}
{"id": "subtract", "prompt": "What is 1000 minus 1? Answer with only the number.", "reference": "999", "scorer": "numeric"}
{"id": "week", "prompt": "How many days are there in a week? Answer with only the number.", "reference": "7", "scorer": "numeric"}
{"id": "capital_france", "prompt": "What is the capital of France? Answer with one word.", "reference": "Paris", "scorer": "contains"}
{"id": "capital_japan", "prompt": "What is the capital of Japan? Answer with one word.", "reference": "Tokyo", "scorer": "contains"}
{"id": "capital_italy", "messages": [{"role": "system", "content": "You answer with one word."}, {"role": "user", "content": "What is the capital of Italy?"}], "reference": "Rome", "scorer": "contains"}
{"id": "war_end", "prompt": "In which year did the Second World War end? Answer with the four-digit year only.", "reference": "\\b1945\\b", "scorer": "regex"}
{"id": "json_person", "prompt": "Return only a JSON object, with no other text, with the keys \"name\" (a string) and \"age\" (an integer) for a person named Ada who is 36 years old.", "scorer": "json_schema", "schema": {"type": "object", "properties": {"name": {"type": "string", "enum": ["Ada"]}, "age": {"type": "integer", "enum": [36]}}, "required": ["name", "age"]}, "max_tokens": 64}
{"id": "json_colors", "prompt": "Return only a JSON array, with no other text, of the three primary colors of paint (red, yellow, blue) as lowercase strings.", "scorer": "json_schema", "schema": {"type": "array", "items": {"type": "string", "enum": ["red", "yellow", "blue"]}}, "max_tokens": 64}
)jsonl";

std::string_view Trim(std::string_view text) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}


std::string Quote(std::string_view text) {
  std::string cut(Utf8Prefix(text, 80));
  if (text.size() > 80) cut += "...";
  return DumpJson(json(cut), -1);
}

std::optional<Scorer> ScorerFromName(std::string_view name) {
  if (name == "exact") return Scorer::kExact;
  if (name == "contains") return Scorer::kContains;
  if (name == "regex") return Scorer::kRegex;
  if (name == "json_schema") return Scorer::kJsonSchema;
  if (name == "numeric") return Scorer::kNumeric;
  return std::nullopt;
}

std::optional<double> ParseNumber(std::string_view text) {
  std::string digits;
  for (char c : Trim(text))
    if (c != ',') digits += c;
  if (digits.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    const double value = std::stod(digits, &used);
    if (used != digits.size() || !std::isfinite(value)) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The item on one line, or the reason it is not one (without the file:line prefix).
Result<QualityItem> ParseItem(std::string_view line) {
  auto bad = [](std::string message) {
    return MakeError(ErrorCode::kInvalidInput, std::move(message));
  };
  const json doc = json::parse(line, nullptr, false);
  if (doc.is_discarded()) return bad("not JSON");
  if (!doc.is_object()) return bad("not a JSON object");
  QualityItem item;
  auto text = [&](const char* name, std::string& out, bool required) -> Status {
    auto field = doc.find(name);
    if (field == doc.end()) {
      if (required) return bad(fmt::format("field \"{}\" is missing", name));
      return Ok{};
    }
    if (!field->is_string()) return bad(fmt::format("field \"{}\" must be a string", name));
    out = field->get<std::string>();
    return Ok{};
  };
  if (Status s = text("id", item.id, true); !s.ok()) return s.error();
  if (item.id.empty()) return bad("field \"id\" is empty");
  std::string scorer;
  if (Status s = text("scorer", scorer, true); !s.ok()) return s.error();
  const std::optional<Scorer> which = ScorerFromName(scorer);
  if (!which)
    return bad(fmt::format(
        "scorer \"{}\" is not one of exact, contains, regex, json_schema, numeric", scorer));
  item.scorer = *which;
  const bool has_prompt = doc.contains("prompt"), has_messages = doc.contains("messages");
  if (has_prompt == has_messages) return bad("give exactly one of \"prompt\" and \"messages\"");
  if (has_prompt) {
    if (Status s = text("prompt", item.prompt, true); !s.ok()) return s.error();
    if (Trim(item.prompt).empty()) return bad("field \"prompt\" is empty");
  } else {
    const json& messages = doc["messages"];
    if (!messages.is_array() || messages.empty())
      return bad("field \"messages\" must be a non-empty list of {\"role\", \"content\"}");
    for (const json& message : messages) {
      if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
          !message.contains("content") || !message["content"].is_string()) {
        return bad("each of \"messages\" must be {\"role\": string, \"content\": string}");
      }
    }
    item.messages = messages;
  }
  if (Status s = text("reference", item.reference, item.scorer != Scorer::kJsonSchema); !s.ok())
    return s.error();
  if (auto tolerance = doc.find("tolerance"); tolerance != doc.end()) {
    if (!tolerance->is_number() || tolerance->get<double>() < 0)
      return bad("field \"tolerance\" must be a non-negative number");
    item.tolerance = tolerance->get<double>();
  }
  if (auto max_tokens = doc.find("max_tokens"); max_tokens != doc.end()) {
    if (!max_tokens->is_number_integer() || max_tokens->get<std::int64_t>() < 1 ||
        max_tokens->get<std::int64_t>() > kMaxItemTokens)
      return bad(fmt::format("field \"max_tokens\" must be an integer in 1..{}", kMaxItemTokens));
    item.max_tokens = max_tokens->get<std::uint32_t>();
  }
  switch (item.scorer) {
    case Scorer::kRegex:
      try {
        std::regex check(item.reference);
      } catch (const std::regex_error& e) {
        return bad(fmt::format("reference is not a regular expression: {}", e.what()));
      }
      break;
    case Scorer::kNumeric:
      if (!ParseNumber(item.reference)) return bad("reference is not a number (scorer numeric)");
      break;
    case Scorer::kJsonSchema: {
      auto schema = doc.find("schema");
      if (schema == doc.end()) return bad("field \"schema\" is missing (scorer json_schema)");
      if (std::optional<std::string> problem = SchemaProblem(*schema)) return bad(*problem);
      item.schema = *schema;
      break;
    }
    case Scorer::kExact:
    case Scorer::kContains:
      if (item.reference.empty()) return bad("field \"reference\" is empty");
      break;
  }
  return item;
}

// The JSON document in a model's answer: the whole output, else the output inside a ``` fence,
// else the span from the first '{' or '[' to the last '}' or ']'.
std::optional<json> ExtractJson(std::string_view output) {
  std::vector<std::string_view> candidates = {Trim(output)};
  if (const std::size_t fence = output.find("```"); fence != std::string_view::npos) {
    std::string_view inside = output.substr(fence + 3);
    if (const std::size_t newline = inside.find('\n'); newline != std::string_view::npos)
      inside = inside.substr(newline + 1);  // the language tag line
    candidates.push_back(Trim(inside.substr(0, inside.find("```"))));
  }
  const std::size_t open = output.find_first_of("{[");
  const std::size_t close = output.find_last_of("}]");
  if (open != std::string_view::npos && close != std::string_view::npos && close > open)
    candidates.push_back(output.substr(open, close - open + 1));
  for (std::string_view candidate : candidates) {
    json doc = json::parse(candidate, nullptr, false);
    if (!doc.is_discarded()) return doc;
  }
  return std::nullopt;
}

}  // namespace

const char* ScorerName(Scorer scorer) {
  switch (scorer) {
    case Scorer::kExact:
      return "exact";
    case Scorer::kContains:
      return "contains";
    case Scorer::kRegex:
      return "regex";
    case Scorer::kJsonSchema:
      return "json_schema";
    case Scorer::kNumeric:
      return "numeric";
  }
  return "?";
}

std::string_view BuiltInQualitySet() { return kBuiltIn; }

Result<std::vector<QualityItem>> ParseQualitySet(std::string_view text, std::string_view source) {
  std::vector<QualityItem> items;
  std::set<std::string> ids;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = Trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    Result<QualityItem> item = ParseItem(line);
    if (!item.ok()) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("{}:{}: {}", source, line_number, item.error().message));
    }
    if (!ids.insert(item->id).second) {
      return MakeError(ErrorCode::kInvalidInput, fmt::format("{}:{}: id \"{}\" is used twice",
                                                             source, line_number, item->id));
    }
    items.push_back(std::move(item.value()));
  }
  if (items.empty())
    return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: no items", source));
  return items;
}

Result<std::vector<QualityItem>> LoadQualitySet(const std::filesystem::path& path) {
  if (path.empty()) return ParseQualitySet(kBuiltIn, "built-in quality set");
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.error();
  return ParseQualitySet(text.value(), path.string());
}

std::string PromptText(const QualityItem& item) {
  if (item.messages.empty()) return item.prompt;
  std::string text;
  for (const json& message : item.messages) {
    if (!text.empty()) text += "\n";
    text += message["content"].get<std::string>();
  }
  return text;
}

ItemScore ScoreOutput(const QualityItem& item, std::string_view output) {
  switch (item.scorer) {
    case Scorer::kExact: {
      const bool same = Trim(output) == Trim(item.reference);
      return {same, fmt::format("{} {} {}", Quote(Trim(output)),
                                same ? "==" : "!=", Quote(Trim(item.reference)))};
    }
    case Scorer::kContains: {
      const bool found = AsciiLower(output).find(AsciiLower(item.reference)) != std::string::npos;
      return {found, fmt::format("{} {} in the output", Quote(item.reference),
                                 found ? "found" : "not found")};
    }
    case Scorer::kRegex: {
      const std::string text(output);
      bool found = false;
      try {
        found = std::regex_search(text, std::regex(item.reference));
      } catch (const std::regex_error& e) {
        return {false, fmt::format("the regex failed: {}", e.what())};
      }
      return {found, fmt::format("/{}/ {}", item.reference, found ? "matched" : "did not match")};
    }
    case Scorer::kJsonSchema: {
      const std::optional<json> doc = ExtractJson(output);
      if (!doc) return {false, "no JSON document in the output"};
      if (std::optional<std::string> violation = SchemaViolation(*doc, item.schema))
        return {false, "JSON breaks the schema: " + *violation};
      return {true, "JSON conforms to the schema"};
    }
    case Scorer::kNumeric: {
      static const std::regex kNumber(R"(-?\d[\d,]*(\.\d+)?)");
      const std::string text(output);
      std::optional<double> last;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), kNumber);
           it != std::sregex_iterator(); ++it) {
        if (std::optional<double> value = ParseNumber(it->str())) last = value;
      }
      const double reference = ParseNumber(item.reference).value_or(0);
      if (!last) return {false, "no number in the output"};
      const bool close = std::fabs(*last - reference) <= item.tolerance;
      return {close, fmt::format("last number {} {} {} (tolerance {})", *last,
                                 close ? "matches" : "differs from", reference, item.tolerance)};
    }
  }
  return {false, "unknown scorer"};
}

}  // namespace bakeoff::qualify
