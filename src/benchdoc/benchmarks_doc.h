// benchdoc/benchmarks_doc.h
//
// Owns: docs/BENCHMARKS.md as data. Three pieces:
// - the spec (bench/benchmarks.yaml): each section's scenarios (the parameters scripts/bench.sh
//   runs with), its tables (one row per figure: cells, a status against a target) and notes, all
//   text with template holes (doc_template.h);
// - the results (docs/benchmarks.json): per section, what its last run measured (facts, one value
//   per run of a figure), when and where it ran, the checks that failed and the figures that moved
//   from the run before (MovedFigures). The scripts write
//   fact lines as they measure ({"section", "key", "value"} or {"section", "failure"}); merging
//   them replaces the sections they name, so a section run alone updates its own results;
// - the rendering: the document from the spec and the results through the Markdown pieces report.md
//   uses (markdown.h), with every hole that could not be filled listed as a problem.
// Does not own: running anything (scripts/bench*.sh), or the template language (doc_template.h).
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "benchdoc/doc_template.h"
#include "core/result.h"

namespace bakeoff::benchdoc {

// A row's status: "met" when `value` is within the bound, "**short**" when not, "**FAILED**" when
// a cell could not be filled; "-" without a bound (a reference row).
struct StatusRule {
  enum class Bound { kNone, kAtLeast, kAtMost, kBelow };
  Bound bound = Bound::kNone;
  std::string value;  // expression
  double target = 0;
};

struct SpecRow {
  std::string when;  // expression; empty: always
  std::vector<std::string> cells;
  StatusRule status;  // its word fills the cells' {status}
};

struct SpecTable {
  std::vector<std::string> columns;  // templates
  std::vector<SpecRow> rows;
};

struct SpecNote {
  std::string when;
  std::string text;
};

struct SpecSection {
  std::string id;  // the results' section name and BENCH_ONLY's word
  std::string title;
  std::string intro;  // template, before the tables
  std::vector<SpecTable> tables;
  std::string notes_title;
  std::vector<SpecNote> notes;
  std::string outro;                                           // template, after the notes
  std::vector<std::pair<std::string, std::string>> scenarios;  // name -> value, as written
};

struct BenchmarksSpec {
  std::string title;
  std::string preamble;  // template over the newest section's run facts
  std::vector<std::pair<std::string, std::string>> machine;  // label -> template, same facts
  std::string machine_after;                                 // template
  std::string section_ran;        // template over each section's run facts, under its title
  std::string section_not_run;    // template; {section} is the section's id
  double moved_tolerance = 0.15;  // a figure that moves by more than this share is reported
  std::vector<SpecSection> sections;
};

struct SectionResults {
  Facts run;    // run.* facts: started, finished, commit, load...
  Facts facts;  // what was measured
  std::vector<std::string> failures;
  // The figures of this run that moved more than the spec's tolerance from the run before it
  // (MovedFigures), as "FIGURE: BEFORE -> AFTER (+N%, better)"; shown under the section.
  std::vector<std::string> moved;
};
using BenchmarkResults = std::map<std::string, SectionResults, std::less<>>;

// Errors (kInvalidInput): every mistake at once, "SOURCE:LINE: FIELD: what is wrong".
Result<BenchmarksSpec> ParseBenchmarksSpec(std::string_view yaml_text, std::string_view source);

// docs/benchmarks.json; an empty text is no results. Errors name the field.
Result<BenchmarkResults> ReadBenchmarkResults(std::string_view json_text, std::string_view source);
// Sections in name order, one fact per line (diffs stay readable).
std::string BenchmarkResultsJson(const BenchmarkResults& results);

// Adds the fact lines of one bench run: each section they name replaces the one in `results`.
// Errors name the line ("facts.jsonl:12: ...").
Status MergeFactLines(std::string_view jsonl, std::string_view source, BenchmarkResults* results);

// A figure (a table row's status value) whose value after a run differs from its value before by
// more than the spec's moved_tolerance of the value before. `worse` follows the row's bound: lower
// is worse for at_least, higher for at_most and below.
struct MovedFigure {
  std::string section;
  std::string figure;  // the row's first cell, rendered; the status expression when that fails
  double before = 0;
  double after = 0;
  bool worse = false;
};
// The figures of every section in both `before` and `after` whose value moved beyond the
// tolerance; a figure missing or not one number on either side is not compared.
std::vector<MovedFigure> MovedFigures(const BenchmarksSpec& spec, const BenchmarkResults& before,
                                      const BenchmarkResults& after);
// "FIGURE: BEFORE -> AFTER (+N%, better)".
std::string MovedFigureText(const MovedFigure& moved);

struct RenderedBenchmarks {
  std::string markdown;
  std::vector<std::string> problems;  // "macro: row 3: {median(a.x)}: no fact 'a.x'"
};
RenderedBenchmarks RenderBenchmarks(const BenchmarksSpec& spec, const BenchmarkResults& results);

// A section's scenarios as shell assignments (NAME='VALUE', one a line) for the scripts to eval.
// Errors when the section is unknown.
Result<std::string> ScenarioShellAssignments(const BenchmarksSpec& spec, std::string_view section);

}  // namespace bakeoff::benchdoc
