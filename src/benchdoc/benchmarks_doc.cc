// benchdoc/benchmarks_doc.cc: docs/BENCHMARKS.md from bench/benchmarks.yaml and
// docs/benchmarks.json (benchmarks_doc.h).
#include "benchdoc/benchmarks_doc.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/yaml_doc.h"
#include "report/markdown.h"

namespace bakeoff::benchdoc {

using report::MarkdownTable;
using report::WithThousands;
namespace {

using nlohmann::json;
using yaml::Diagnostics;
using yaml::ListItem;
using yaml::MapReader;
using yaml::Need;

constexpr std::string_view kSchema = "bakeoff.benchmarks/1";

bool IsShellName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// --- The spec ------------------------------------------------------------------------------------

// A list of [label, template] pairs.
std::vector<std::pair<std::string, std::string>> Pairs(MapReader& map, std::string_view key,
                                                       std::string_view source,
                                                       Diagnostics* diagnostics) {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::optional<std::vector<ListItem>> items = map.List(key);
  for (const ListItem& item : items.value_or(std::vector<ListItem>{})) {
    if (!item.node.IsSequence() || item.node.size() != 2 || !item.node[0].IsScalar() ||
        !item.node[1].IsScalar()) {
      diagnostics->Add(source, item.line, item.path, "expected [label, text]");
      continue;
    }
    pairs.emplace_back(item.node[0].Scalar(), item.node[1].Scalar());
  }
  return pairs;
}

StatusRule ReadStatus(MapReader& row) {
  StatusRule rule;
  std::optional<MapReader> status = row.Map("status");
  if (!status) return rule;
  rule.value = status->Text("value", Need::kRequired).value_or("");
  constexpr std::array<std::pair<std::string_view, StatusRule::Bound>, 3> kBounds = {
      {{"at_least", StatusRule::Bound::kAtLeast},
       {"at_most", StatusRule::Bound::kAtMost},
       {"below", StatusRule::Bound::kBelow}}};
  for (const auto& [key, bound] : kBounds) {
    if (std::optional<double> target = status->Number(key, -1e300, 1e300)) {
      if (rule.bound != StatusRule::Bound::kNone) status->Error(key, "one bound per status");
      rule.bound = bound;
      rule.target = *target;
    }
  }
  if (rule.bound == StatusRule::Bound::kNone)
    status->Error("value", "needs a bound: at_least, at_most or below");
  status->Finish();
  return rule;
}

SpecSection ReadSection(const ListItem& item, std::string_view source, Diagnostics* diagnostics) {
  MapReader map(item, source, diagnostics);
  SpecSection section;
  section.id = map.Text("id", Need::kRequired).value_or("");
  if (!section.id.empty() && !IsShellName(section.id))
    map.Error("id", "letters, digits and _ only");
  section.title = map.Text("title", Need::kRequired).value_or("");
  section.intro = map.Text("intro").value_or("");
  section.notes_title = map.Text("notes_title").value_or("Notes");
  section.outro = map.Text("outro").value_or("");
  if (std::optional<MapReader> scenarios = map.Map("scenarios")) {
    for (const std::string& name : scenarios->Keys()) {
      if (!IsShellName(name))
        scenarios->Error(name, "a scenario name is letters, digits and _ (a shell variable)");
      section.scenarios.emplace_back(name, scenarios->Text(name, Need::kRequired).value_or(""));
    }
    scenarios->Finish();
  }
  for (const ListItem& table_item : map.List("tables").value_or(std::vector<ListItem>{})) {
    MapReader table_map(table_item, source, diagnostics);
    SpecTable table;
    table.columns =
        table_map.TextList("columns", Need::kRequired).value_or(std::vector<std::string>{});
    for (const ListItem& row_item :
         table_map.List("rows", Need::kRequired).value_or(std::vector<ListItem>{})) {
      MapReader row_map(row_item, source, diagnostics);
      SpecRow row;
      row.when = row_map.Text("when").value_or("");
      row.cells = row_map.TextList("cells", Need::kRequired).value_or(std::vector<std::string>{});
      if (!table.columns.empty() && row.cells.size() != table.columns.size()) {
        row_map.Error("cells", fmt::format("{} cells for {} columns", row.cells.size(),
                                           table.columns.size()));
      }
      row.status = ReadStatus(row_map);
      row_map.Finish();
      table.rows.push_back(std::move(row));
    }
    table_map.Finish();
    section.tables.push_back(std::move(table));
  }
  for (const ListItem& note_item : map.List("notes").value_or(std::vector<ListItem>{})) {
    SpecNote note;
    if (note_item.node.IsScalar()) {
      note.text = note_item.node.Scalar();
    } else {
      MapReader note_map(note_item, source, diagnostics);
      note.when = note_map.Text("when").value_or("");
      note.text = note_map.Text("text", Need::kRequired).value_or("");
      note_map.Finish();
    }
    section.notes.push_back(std::move(note));
  }
  map.Finish();
  return section;
}

// --- Results -------------------------------------------------------------------------------------

Result<FactItem> ItemOf(const json& value, const std::string& where) {
  if (value.is_number()) return FactItem(value.get<double>());
  if (value.is_string()) return FactItem(value.get<std::string>());
  return Error{ErrorCode::kInvalidInput,
               fmt::format("{}: a fact is a number or a string, got {}", where, value.dump())};
}

Status AppendFact(const json& value, const std::string& where, FactValue* fact) {
  if (!value.is_array()) {
    Result<FactItem> item = ItemOf(value, where);
    if (!item) return item.error();
    fact->push_back(std::move(*item));
    return Ok{};
  }
  for (const json& element : value) {
    Result<FactItem> item = ItemOf(element, where);
    if (!item) return item.error();
    fact->push_back(std::move(*item));
  }
  return Ok{};
}

Status ReadFacts(const json& object, const std::string& where, Facts* facts) {
  if (!object.is_object()) return Error{ErrorCode::kInvalidInput, where + ": expected an object"};
  for (const auto& [key, value] : object.items()) {
    if (Status s = AppendFact(value, where + "." + key, &(*facts)[key]); !s) return s;
  }
  return Ok{};
}

json FactJson(const FactValue& value) {
  auto item_json = [](const FactItem& item) -> json {
    if (const auto* number = std::get_if<double>(&item)) {
      if (!std::isfinite(*number)) return nullptr;
      if (*number == std::floor(*number) && std::fabs(*number) < 9e15)
        return static_cast<std::int64_t>(*number);
      return *number;
    }
    return std::get<std::string>(item);
  };
  if (value.size() == 1) return item_json(value.front());
  json list = json::array();
  for (const FactItem& item : value) list.push_back(item_json(item));
  return list;
}

std::string FactsJson(const Facts& facts, std::string_view indent) {
  if (facts.empty()) return "{}";
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : facts) {
    out += fmt::format("{}\n{}  {}: {}", first ? "" : ",", indent, json(key).dump(),
                       FactJson(value).dump());
    first = false;
  }
  return out + fmt::format("\n{}}}", indent);
}

// --- Rendering -----------------------------------------------------------------------------------

std::string TrimEnd(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Every section's facts as one namespace (a note may quote another section's figure), with
// `section`'s run facts added.
Facts WithRun(Facts facts, const SectionResults* section) {
  if (section) {
    for (const auto& [key, value] : section->run) facts[key] = value;
  }
  return facts;
}

Facts AllFacts(const BenchmarkResults& results) {
  Facts facts;
  for (const auto& [name, section] : results) {
    for (const auto& [key, value] : section.facts) facts[key] = value;
  }
  return facts;
}

// The value of a figure that is one number; nothing otherwise (with the reason in *why).
std::optional<double> OneNumber(const std::string& expression, const Facts& facts,
                                std::string* why = nullptr) {
  Result<FactValue> value = EvaluateExpression(expression, facts);
  const double* number =
      value && value->size() == 1 ? std::get_if<double>(&value->front()) : nullptr;
  if (number && !std::isnan(*number)) return *number;
  if (why) *why = value ? std::string("not one number") : value.error().message;
  return std::nullopt;
}

class Renderer {
 public:
  Renderer(const BenchmarksSpec& spec, const BenchmarkResults& results)
      : spec_(spec), results_(results) {
    // Facts are one namespace, so a note may quote another section's figure; a name two sections
    // both record would be ambiguous.
    std::map<std::string, std::string, std::less<>> recorded_by;
    for (const auto& [name, section] : results) {
      for (const auto& [key, value] : section.facts) {
        auto [where, fresh] = recorded_by.emplace(key, name);
        if (!fresh)
          problems_.push_back(
              fmt::format("fact '{}' is recorded by both {} and {}", key, where->second, name));
        all_facts_[key] = value;
      }
    }
  }

  RenderedBenchmarks Render() {
    std::string md = "# " + spec_.title + "\n\n";
    Facts newest = WithRun(NewestRun());
    Block(&md, spec_.preamble, newest, "preamble");
    std::vector<std::vector<std::string>> machine_rows;
    for (const auto& [label, text] : spec_.machine) {
      machine_rows.push_back({label, Fill(text, newest, "machine: " + label).value_or("-")});
    }
    md += "## Machine\n\n" + MarkdownTable({"", ""}, machine_rows) + "\n";
    Block(&md, spec_.machine_after, newest, "machine_after");
    for (const SpecSection& section : spec_.sections) Section(&md, section);
    std::vector<std::string> failures;
    for (const SpecSection& section : spec_.sections) {
      auto found = results_.find(section.id);
      if (found == results_.end()) continue;
      for (const std::string& failure : found->second.failures)
        failures.push_back(section.id + ": " + failure);
    }
    if (!failures.empty()) {
      md += "## FAILED\n\n";
      for (const std::string& failure : failures) md += "- " + failure + "\n";
      md += "\n";
    }
    return RenderedBenchmarks{TrimEnd(std::move(md)) + "\n", std::move(problems_)};
  }

 private:
  const SectionResults* NewestRun() const {
    const SectionResults* newest = nullptr;
    std::string newest_finish;
    for (const auto& [name, section] : results_) {
      std::string when;
      if (auto finished = section.run.find("run.finished");
          finished != section.run.end() && !finished->second.empty()) {
        when = FactText(finished->second.back());
      }
      if (!newest || when > newest_finish) {
        newest = &section;
        newest_finish = when;
      }
    }
    return newest;
  }

  Facts WithRun(const SectionResults* section) const {
    return benchdoc::WithRun(all_facts_, section);
  }

  std::optional<std::string> Fill(const std::string& text, const Facts& facts,
                                  const std::string& where) {
    Result<std::string> filled = RenderTemplate(text, facts);
    if (filled) return TrimEnd(std::move(*filled));
    problems_.push_back(where + ": " + filled.error().message);
    return std::nullopt;
  }

  // A paragraph of text followed by a blank line; nothing when it is empty or could not be filled.
  void Block(std::string* md, const std::string& text, const Facts& facts,
             const std::string& where) {
    if (text.empty()) return;
    std::optional<std::string> filled = Fill(text, facts, where);
    if (filled && !filled->empty()) *md += *filled + "\n\n";
  }

  bool When(const std::string& expression, const Facts& facts, const std::string& where) {
    if (expression.empty()) return true;
    Result<FactValue> value = EvaluateExpression(expression, facts);
    if (value) return IsTrue(*value);
    problems_.push_back(where + ": when: " + value.error().message);
    return false;
  }

  std::string StatusWord(const StatusRule& rule, const Facts& facts, const std::string& where,
                         bool* failed) {
    if (rule.bound == StatusRule::Bound::kNone) return "-";
    std::string why;
    std::optional<double> number = OneNumber(rule.value, facts, &why);
    if (!number) {
      problems_.push_back(where + ": status: " + why);
      *failed = true;
      return "**FAILED**";
    }
    bool met = rule.bound == StatusRule::Bound::kAtLeast  ? *number >= rule.target
               : rule.bound == StatusRule::Bound::kAtMost ? *number <= rule.target
                                                          : *number < rule.target;
    return met ? "met" : "**short**";
  }

  void Section(std::string* md, const SpecSection& section) {
    *md += "## " + section.title + "\n\n";
    auto found = results_.find(section.id);
    if (found == results_.end()) {
      Facts named{{"section", FactValue{section.id}}};
      Block(md, spec_.section_not_run, named, section.id);
      return;
    }
    Facts facts = WithRun(&found->second);
    Block(md, spec_.section_ran, facts, section.id + ": ran");
    Block(md, section.intro, facts, section.id + ": intro");
    for (size_t t = 0; t < section.tables.size(); ++t) {
      const SpecTable& table = section.tables[t];
      std::string where = fmt::format("{}: table {}", section.id, t + 1);
      std::vector<std::string> header;
      for (const std::string& column : table.columns)
        header.push_back(Fill(column, facts, where + " header").value_or(column));
      std::vector<std::vector<std::string>> rows;
      for (size_t r = 0; r < table.rows.size(); ++r) {
        const SpecRow& row = table.rows[r];
        std::string row_where = fmt::format("{} row {}", where, r + 1);
        if (!When(row.when, facts, row_where)) continue;
        bool failed = false;
        Facts row_facts = facts;
        row_facts["status"] = FactValue{StatusWord(row.status, facts, row_where, &failed)};
        std::vector<std::string> cells;
        for (const std::string& cell : row.cells) {
          std::optional<std::string> filled = Fill(cell, row_facts, row_where);
          failed = failed || !filled;
          cells.push_back(filled.value_or("not measured"));
        }
        if (failed) {
          for (size_t c = 0; c < row.cells.size(); ++c) {
            if (row.cells[c].find("{status}") != std::string::npos) cells[c] = "**FAILED**";
          }
        }
        rows.push_back(std::move(cells));
      }
      *md += MarkdownTable(header, rows) + "\n";
    }
    if (!found->second.moved.empty()) {
      *md += fmt::format("### Moved more than {}% from the run before\n\n",
                         std::round(spec_.moved_tolerance * 100));
      for (const std::string& moved : found->second.moved) *md += "- " + moved + "\n";
      *md += "\n";
    }
    std::string notes;
    for (size_t n = 0; n < section.notes.size(); ++n) {
      std::string where = fmt::format("{}: note {}", section.id, n + 1);
      if (!When(section.notes[n].when, facts, where)) continue;
      std::optional<std::string> filled = Fill(section.notes[n].text, facts, where);
      if (filled) notes += "- " + *filled + "\n\n";
    }
    if (!notes.empty()) *md += "### " + section.notes_title + "\n\n" + notes;
    Block(md, section.outro, facts, section.id + ": outro");
  }

  const BenchmarksSpec& spec_;
  const BenchmarkResults& results_;
  Facts all_facts_;
  std::vector<std::string> problems_;
};

}  // namespace

Result<BenchmarksSpec> ParseBenchmarksSpec(std::string_view yaml_text, std::string_view source) {
  yaml::DocumentKind kind{.noun = "benchmarks spec",
                          .with_article = "a benchmarks spec",
                          .empty_hint = "",
                          .expect_mapping = "a mapping (title, sections, ...)"};
  Result<YAML::Node> document = yaml::LoadDocument(yaml_text, source, kind);
  if (!document) return document.error();
  Diagnostics diagnostics;
  MapReader root(*document, "", source, &diagnostics);
  BenchmarksSpec spec;
  spec.title = root.Text("title", Need::kRequired).value_or("");
  spec.preamble = root.Text("preamble").value_or("");
  spec.machine = Pairs(root, "machine", source, &diagnostics);
  spec.machine_after = root.Text("machine_after").value_or("");
  spec.section_ran = root.Text("section_ran").value_or("");
  spec.section_not_run = root.Text("section_not_run").value_or("");
  spec.moved_tolerance = root.Number("moved_tolerance", 0, 10).value_or(spec.moved_tolerance);
  for (const ListItem& item :
       root.List("sections", Need::kRequired).value_or(std::vector<ListItem>{})) {
    SpecSection section = ReadSection(item, source, &diagnostics);
    bool repeated = std::any_of(spec.sections.begin(), spec.sections.end(),
                                [&](const SpecSection& s) { return s.id == section.id; });
    if (repeated)
      diagnostics.Add(source, item.line, item.path + ".id", "'" + section.id + "' given twice");
    spec.sections.push_back(std::move(section));
  }
  root.Finish();
  if (!diagnostics.empty()) return diagnostics.ToError();
  return spec;
}

Result<BenchmarkResults> ReadBenchmarkResults(std::string_view json_text, std::string_view source) {
  BenchmarkResults results;
  if (json_text.find_first_not_of(" \t\r\n") == std::string_view::npos) return results;
  json doc = json::parse(json_text, nullptr, false);
  std::string where(source);
  if (doc.is_discarded() || !doc.is_object())
    return Error{ErrorCode::kInvalidInput, where + ": not a JSON object"};
  const json& schema = doc.contains("schema") ? doc["schema"] : json();
  if (!schema.is_string() || schema.get<std::string>() != kSchema) {
    return Error{ErrorCode::kInvalidInput, fmt::format("{}: schema is not {}", where, kSchema)};
  }
  const json& sections = doc.value("sections", json::object());
  if (!sections.is_object())
    return Error{ErrorCode::kInvalidInput, where + ": sections: expected an object"};
  for (const auto& [name, section] : sections.items()) {
    std::string at = where + ": sections." + name;
    if (!section.is_object()) return Error{ErrorCode::kInvalidInput, at + ": expected an object"};
    SectionResults& out = results[name];
    for (const auto& [key, value] : section.items()) {
      if (key == "run" || key == "facts") {
        if (Status s = ReadFacts(value, at + "." + key, key == "run" ? &out.run : &out.facts); !s)
          return s.error();
      } else if ((key == "failures" || key == "moved") && value.is_array()) {
        for (const json& line : value) {
          if (!line.is_string())
            return Error{ErrorCode::kInvalidInput, at + "." + key + ": expected strings"};
          (key == "failures" ? out.failures : out.moved).push_back(line.get<std::string>());
        }
      } else {
        return Error{ErrorCode::kInvalidInput, fmt::format("{}: unexpected field '{}'", at, key)};
      }
    }
  }
  return results;
}

std::string BenchmarkResultsJson(const BenchmarkResults& results) {
  std::string out = fmt::format("{{\n  \"schema\": \"{}\",\n  \"sections\": {{", kSchema);
  bool first = true;
  for (const auto& [name, section] : results) {
    json failures = section.failures;
    std::string moved =
        section.moved.empty() ? "" : ",\n      \"moved\": " + json(section.moved).dump();
    out += fmt::format(
        "{}\n    {}: {{\n      \"run\": {},\n      \"facts\": {},\n      \"failures\": {}{}\n    "
        "}}",
        first ? "" : ",", json(name).dump(), FactsJson(section.run, "      "),
        FactsJson(section.facts, "      "), failures.dump(), moved);
    first = false;
  }
  return out + "\n  }\n}\n";
}

Status MergeFactLines(std::string_view jsonl, std::string_view source, BenchmarkResults* results) {
  std::set<std::string, std::less<>> replaced;
  size_t line_number = 0;
  while (!jsonl.empty()) {
    size_t end = jsonl.find('\n');
    std::string_view line = jsonl.substr(0, end);
    jsonl = end == std::string_view::npos ? std::string_view() : jsonl.substr(end + 1);
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string where = fmt::format("{}:{}", source, line_number);
    json fact = json::parse(line, nullptr, false);
    if (fact.is_discarded() || !fact.is_object())
      return Error{ErrorCode::kInvalidInput, where + ": not a JSON object"};
    const json& section = fact.value("section", json());
    if (!section.is_string() || section.get<std::string>().empty()) {
      return Error{ErrorCode::kInvalidInput, where + ": needs \"section\" (a name)"};
    }
    const std::string name = section.get<std::string>();
    if (!replaced.contains(name)) {
      (*results)[name] = SectionResults{};
      replaced.insert(name);
    }
    SectionResults& out = (*results)[name];
    const bool has_failure = fact.contains("failure");
    if (has_failure == fact.contains("key") || fact.size() != (has_failure ? 2u : 3u)) {
      return Error{ErrorCode::kInvalidInput,
                   where + ": expected {section, key, value} or {section, failure}"};
    }
    if (has_failure) {
      if (!fact["failure"].is_string())
        return Error{ErrorCode::kInvalidInput, where + ": failure is a string"};
      out.failures.push_back(fact["failure"].get<std::string>());
      continue;
    }
    if (!fact["key"].is_string() || fact["key"].get<std::string>().empty() ||
        !fact.contains("value")) {
      return Error{ErrorCode::kInvalidInput, where + ": expected {section, key, value}"};
    }
    std::string key = fact["key"].get<std::string>();
    Facts& facts = key.starts_with("run.") ? out.run : out.facts;
    if (Status s = AppendFact(fact["value"], where, &facts[key]); !s) return s;
  }
  return Ok{};
}

std::vector<MovedFigure> MovedFigures(const BenchmarksSpec& spec, const BenchmarkResults& before,
                                      const BenchmarkResults& after) {
  std::vector<MovedFigure> moved;
  const Facts before_all = AllFacts(before), after_all = AllFacts(after);
  for (const SpecSection& section : spec.sections) {
    auto was = before.find(section.id), is = after.find(section.id);
    if (was == before.end() || is == after.end()) continue;
    const Facts before_facts = WithRun(before_all, &was->second),
                after_facts = WithRun(after_all, &is->second);
    for (const SpecTable& table : section.tables) {
      for (const SpecRow& row : table.rows) {
        if (row.status.bound == StatusRule::Bound::kNone) continue;
        std::optional<double> old_value = OneNumber(row.status.value, before_facts);
        std::optional<double> new_value = OneNumber(row.status.value, after_facts);
        if (!old_value || !new_value || *old_value == 0) continue;
        if (std::fabs(*new_value - *old_value) <= spec.moved_tolerance * std::fabs(*old_value))
          continue;
        Facts row_facts = after_facts;
        row_facts["status"] = FactValue{std::string("-")};
        Result<std::string> label = row.cells.empty()
                                        ? Result<std::string>(row.status.value)
                                        : RenderTemplate(row.cells.front(), row_facts);
        bool higher_is_better = row.status.bound == StatusRule::Bound::kAtLeast;
        moved.push_back(MovedFigure{.section = section.id,
                                    .figure = label ? TrimEnd(*label) : row.status.value,
                                    .before = *old_value,
                                    .after = *new_value,
                                    .worse = (*new_value < *old_value) == higher_is_better});
      }
    }
  }
  return moved;
}

std::string MovedFigureText(const MovedFigure& m) {
  auto number = [](double x) {
    return std::fabs(x) >= 1000 ? WithThousands(x) : fmt::format("{:.4g}", x);
  };
  double change = (m.after - m.before) / std::fabs(m.before) * 100;
  return fmt::format("{}: {} -> {} ({:+.0f}%, {})", m.figure, number(m.before), number(m.after),
                     change, m.worse ? "worse" : "better");
}

RenderedBenchmarks RenderBenchmarks(const BenchmarksSpec& spec, const BenchmarkResults& results) {
  return Renderer(spec, results).Render();
}

Result<std::string> ScenarioShellAssignments(const BenchmarksSpec& spec, std::string_view section) {
  for (const SpecSection& s : spec.sections) {
    if (s.id != section) continue;
    std::string out;
    for (const auto& [name, value] : s.scenarios) {
      std::string quoted;
      for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += fmt::format("{}='{}'\n", name, quoted);
    }
    return out;
  }
  return Error{ErrorCode::kInvalidInput,
               fmt::format("no section '{}' in the benchmarks spec", section)};
}

}  // namespace bakeoff::benchdoc
