// tests/unit/benchdoc/benchmarks_doc_test.cc
//
// Owns: tests of docs/BENCHMARKS.md as data (benchdoc/benchmarks_doc.h): the spec's mistakes are
// named with their lines; fact lines merge section by section; a row's status follows its bound
// and a row whose facts are missing says so; figures that moved beyond the tolerance are named;
// and the committed document is exactly what the committed spec renders from the committed
// results, with every hole filled.
#include "benchdoc/benchmarks_doc.h"

#include <gtest/gtest.h>

#include "core/file.h"

namespace bakeoff::benchdoc {
namespace {

constexpr std::string_view kSpec = R"yaml(title: Benchmarks
preamble: Ran on {run.cpus} CPUs.
machine:
  - [CPUs, "{run.cpus}"]
section_ran: "Ran at {run.finished}."
section_not_run: "Not run ({section})."
sections:
  - id: macro
    title: Loopback
    scenarios:
      a_client: --concurrency 64 --prompt-tokens 8
      quoted: it's
    intro: "Median of {count(a.rate)} runs."
    tables:
      - columns: [figure, measured, status]
        rows:
          - cells: ["(a)", "{median(a.rate):int}/s", "{status}"]
            status: {value: median(a.rate), at_least: 1000000}
          - cells: ["(d)", "{d.lag:.3} ms", "{status}"]
            status: {value: d.lag, below: 1}
          - cells: ["(x)", "{x.missing}", "{status}"]
            status: {value: x.missing, below: 1}
          - when: has(e.baseline)
            cells: ["(e) baseline", "{e.baseline}", "{status}"]
    notes_title: Notes and limits
    notes:
      - "**(a)** {a.rate:int}."
      - when: has(e.baseline)
        text: never shown
  - id: soak
    title: Soak
)yaml";

BenchmarksSpec Spec() {
  Result<BenchmarksSpec> spec = ParseBenchmarksSpec(kSpec, "spec.yaml");
  EXPECT_TRUE(spec) << (spec ? "" : spec.error().message);
  return spec ? *spec : BenchmarksSpec{};
}

constexpr std::string_view kFacts =
    R"({"section": "macro", "key": "run.cpus", "value": 2}
{"section": "macro", "key": "run.finished", "value": "2026-12-01T20:00:00Z"}
{"section": "macro", "key": "a.rate", "value": 1884100}
{"section": "macro", "key": "a.rate", "value": 900000}
{"section": "macro", "key": "a.rate", "value": 1900000}
{"section": "macro", "key": "d.lag", "value": 1.388}
{"section": "macro", "failure": "(x) run 1: 3 of 4 requests ok"}
)";

TEST(BenchmarksDocTest, RendersTablesNotesAndFailuresFromFacts) {
  BenchmarkResults results;
  ASSERT_TRUE(MergeFactLines(kFacts, "facts.jsonl", &results));
  RenderedBenchmarks doc = RenderBenchmarks(Spec(), results);
  EXPECT_EQ(doc.markdown,
            "# Benchmarks\n\nRan on 2 CPUs.\n\n## Machine\n\n|  |  |\n|---|---|\n| CPUs | 2 |\n\n"
            "## Loopback\n\nRan at 2026-12-01T20:00:00Z.\n\nMedian of 3 runs.\n\n"
            "| figure | measured | status |\n|---|---|---|\n"
            "| (a) | 1,884,100/s | met |\n| (d) | 1.388 ms | **short** |\n| (x) | not measured | "
            "**FAILED** |\n\n"
            "### Notes and limits\n\n- **(a)** 1,884,100 900,000 1,900,000.\n\n"
            "## Soak\n\nNot run (soak).\n\n"
            "## FAILED\n\n- macro: (x) run 1: 3 of 4 requests ok\n");
  ASSERT_EQ(doc.problems.size(), 2u);
  EXPECT_EQ(doc.problems[0], "macro: table 1 row 3: status: no fact 'x.missing'");
  EXPECT_EQ(doc.problems[1], "macro: table 1 row 3: {x.missing}: no fact 'x.missing'");
}

TEST(BenchmarksDocTest, FactLinesReplaceOnlyTheSectionsTheyName) {
  BenchmarkResults results;
  ASSERT_TRUE(MergeFactLines(kFacts, "facts.jsonl", &results));
  ASSERT_TRUE(MergeFactLines(R"({"section": "soak", "key": "s.rss", "value": [1, 2.5, "x"]})",
                             "soak.jsonl", &results));
  ASSERT_TRUE(MergeFactLines(R"({"section": "macro", "key": "a.rate", "value": 5})", "again.jsonl",
                             &results));
  EXPECT_EQ(results["macro"].facts.size(), 1u);
  EXPECT_TRUE(results["macro"].failures.empty());
  EXPECT_EQ(results["soak"].facts["s.rss"].size(), 3u);

  // And the results read back as they were written.
  std::string json = BenchmarkResultsJson(results);
  Result<BenchmarkResults> read = ReadBenchmarkResults(json, "benchmarks.json");
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(BenchmarkResultsJson(*read), json);
}

TEST(BenchmarksDocTest, AFactTwoSectionsRecordIsAProblem) {
  BenchmarkResults results;
  ASSERT_TRUE(
      MergeFactLines("{\"section\": \"macro\", \"key\": \"a.rate\", \"value\": 1}\n"
                     "{\"section\": \"soak\", \"key\": \"a.rate\", \"value\": 2}\n",
                     "facts.jsonl", &results));
  RenderedBenchmarks doc = RenderBenchmarks(Spec(), results);
  ASSERT_FALSE(doc.problems.empty());
  EXPECT_EQ(doc.problems[0], "fact 'a.rate' is recorded by both macro and soak");
}

TEST(BenchmarksDocTest, BadFactLinesAndResultsAreNamed) {
  BenchmarkResults results;
  Status bad =
      MergeFactLines("{\"section\": \"macro\", \"key\": \"a\", \"value\": 1}\n{\"key\": \"a\"}\n",
                     "f.jsonl", &results);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "f.jsonl:2: needs \"section\" (a name)");
  bad = MergeFactLines(R"({"section": "m", "key": "a", "value": {"x": 1}})", "f.jsonl", &results);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "f.jsonl:1: a fact is a number or a string, got {\"x\":1}");
  bad = MergeFactLines("not json", "f.jsonl", &results);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "f.jsonl:1: not a JSON object");

  Result<BenchmarkResults> wrong = ReadBenchmarkResults(R"({"schema": "other/2"})", "b.json");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message, "b.json: schema is not bakeoff.benchmarks/1");
  wrong = ReadBenchmarkResults(
      R"({"schema": "bakeoff.benchmarks/1", "sections": {"m": {"extra": 1}}})", "b.json");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message, "b.json: sections.m: unexpected field 'extra'");
}

TEST(BenchmarksDocTest, SpecMistakesAreNamedWithTheirLines) {
  Result<BenchmarksSpec> spec = ParseBenchmarksSpec(R"(title: B
sections:
  - id: macro
    title: M
    tables:
      - columns: [a, b]
        rows:
          - cells: [x]
            status: {value: y}
  - id: macro
    titel: M
)",
                                                    "spec.yaml");
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().message,
            "spec.yaml:8: sections[0].tables[0].rows[0].cells: 1 cells for 2 columns\n"
            "spec.yaml:9: sections[0].tables[0].rows[0].status.value: needs a bound: at_least, "
            "at_most or below\n"
            "spec.yaml:10: sections[1].title: missing (required)\n"
            "spec.yaml:10: sections[1].id: 'macro' given twice\n"
            "spec.yaml:11: sections[1].titel: unknown key; did you mean title?");
}

// A run's figure that moved beyond the tolerance from the recorded one is named with both values
// and whether that is better or worse by its bound; one within it, or missing, is not.
TEST(BenchmarksDocTest, FiguresThatMovedBeyondTheToleranceAreListedUnderTheirSection) {
  BenchmarkResults before;
  ASSERT_TRUE(MergeFactLines(kFacts, "before.jsonl", &before));
  BenchmarkResults after = before;
  ASSERT_TRUE(
      MergeFactLines("{\"section\": \"macro\", \"key\": \"a.rate\", \"value\": 1600000}\n"
                     "{\"section\": \"macro\", \"key\": \"d.lag\", \"value\": 1.0}\n",
                     "after.jsonl", &after));
  BenchmarksSpec spec = Spec();
  std::vector<MovedFigure> moved = MovedFigures(spec, before, after);
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(moved[0].section, "macro");
  EXPECT_EQ(MovedFigureText(moved[0]), "(a): 1,884,100 -> 1,600,000 (-15%, worse)");
  EXPECT_TRUE(moved[0].worse);
  EXPECT_EQ(MovedFigureText(moved[1]), "(d): 1.388 -> 1 (-28%, better)");
  EXPECT_FALSE(moved[1].worse);

  spec.moved_tolerance = 0.2;  // (a) moved 15.08%: within it now
  moved = MovedFigures(spec, before, after);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].figure, "(d)");

  // Kept in the results with the section and shown under it.
  after["macro"].moved.push_back(MovedFigureText(moved[0]));
  Result<BenchmarkResults> read =
      ReadBenchmarkResults(BenchmarkResultsJson(after), "benchmarks.json");
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->at("macro").moved, after["macro"].moved);
  RenderedBenchmarks doc = RenderBenchmarks(spec, *read);
  EXPECT_NE(
      doc.markdown.find(
          "### Moved more than 20% from the run before\n\n- (d): 1.388 -> 1 (-28%, better)\n"),
      std::string::npos)
      << doc.markdown;
}

TEST(BenchmarksDocTest, ScenariosAreShellAssignments) {
  Result<std::string> shell = ScenarioShellAssignments(Spec(), "macro");
  ASSERT_TRUE(shell);
  EXPECT_EQ(*shell, "a_client='--concurrency 64 --prompt-tokens 8'\nquoted='it'\\''s'\n");
  EXPECT_FALSE(ScenarioShellAssignments(Spec(), "nothing"));
}

// docs/BENCHMARKS.md is rendered from bench/benchmarks.yaml and docs/benchmarks.json: `make bench`
// writes both, and a hand edit of the document (or a spec change without a re-render) fails here.
TEST(BenchmarksDocTest, TheCommittedDocumentIsRenderedFromTheCommittedResults) {
  const std::string root = BAKEOFF_SOURCE_DIR;
  Result<std::string> spec_text = ReadFile(root + "/bench/benchmarks.yaml");
  Result<std::string> results_text = ReadFile(root + "/docs/benchmarks.json");
  Result<std::string> committed = ReadFile(root + "/docs/BENCHMARKS.md");
  ASSERT_TRUE(spec_text && results_text && committed);
  Result<BenchmarksSpec> spec = ParseBenchmarksSpec(*spec_text, "bench/benchmarks.yaml");
  ASSERT_TRUE(spec) << spec.error().message;
  Result<BenchmarkResults> results = ReadBenchmarkResults(*results_text, "docs/benchmarks.json");
  ASSERT_TRUE(results) << results.error().message;
  RenderedBenchmarks doc = RenderBenchmarks(*spec, *results);
  for (const std::string& problem : doc.problems) ADD_FAILURE() << problem;
  EXPECT_EQ(doc.markdown, *committed)
      << "re-render: build/release/bench/bakeoff_bench_doc render bench/benchmarks.yaml "
         "docs/benchmarks.json docs/BENCHMARKS.md";
  for (const SpecSection& section : spec->sections)
    EXPECT_TRUE(results->contains(section.id)) << section.id;
}

}  // namespace
}  // namespace bakeoff::benchdoc
