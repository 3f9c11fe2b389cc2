// bench/bench_doc.cc: bakeoff_bench_doc, the tool scripts/bench.sh writes docs/BENCHMARKS.md with
// (benchdoc/benchmarks_doc.h).
//   bakeoff_bench_doc scenarios SPEC SECTION      the section's scenarios as shell assignments
//   bakeoff_bench_doc render SPEC RESULTS OUT [--add FACTS.jsonl]
//       with --add, the sections FACTS.jsonl names replace those in RESULTS (rewritten); then the
//       document is rendered from SPEC and RESULTS into OUT. Holes that could not be filled are
//       listed on stderr and make the exit status 3 (the document is still written). A figure of
//       the new facts that moved more than the spec's moved_tolerance from the one RESULTS held
//       is listed on stderr and under its section, and makes the exit status 4.
// Exit status: 0 done, 2 a wrong argument or file, 3 rendered with problems, 4 figures moved.
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "benchdoc/benchmarks_doc.h"
#include "core/file.h"

namespace {

using bakeoff::benchdoc::BenchmarkResults;
using bakeoff::benchdoc::BenchmarksSpec;

int Fail(const std::string& message) {
  std::fprintf(stderr, "bakeoff_bench_doc: %s\n", message.c_str());
  return 2;
}

bakeoff::Result<BenchmarksSpec> LoadSpec(const std::string& path) {
  bakeoff::Result<std::string> text = bakeoff::ReadFile(path);
  if (!text) return text.error();
  return bakeoff::benchdoc::ParseBenchmarksSpec(*text, path);
}

int Render(const std::vector<std::string>& args) {
  if (args.size() != 3 && !(args.size() == 5 && args[3] == "--add")) {
    return Fail("usage: render SPEC RESULTS OUT [--add FACTS.jsonl]");
  }
  bakeoff::Result<BenchmarksSpec> spec = LoadSpec(args[0]);
  if (!spec) return Fail(spec.error().message);
  // With --add, results that do not exist yet start empty; any other read error stops.
  std::string results_text;
  if (args.size() == 3 || std::filesystem::exists(args[1])) {
    bakeoff::Result<std::string> text = bakeoff::ReadFile(args[1]);
    if (!text) return Fail(text.error().message);
    results_text = *text;
  }
  bakeoff::Result<BenchmarkResults> results =
      bakeoff::benchdoc::ReadBenchmarkResults(results_text, args[1]);
  if (!results) return Fail(results.error().message);
  std::vector<bakeoff::benchdoc::MovedFigure> moved;
  if (args.size() == 5) {
    bakeoff::Result<std::string> facts = bakeoff::ReadFile(args[4]);
    if (!facts) return Fail(facts.error().message);
    const BenchmarkResults before = *results;
    if (bakeoff::Status s = bakeoff::benchdoc::MergeFactLines(*facts, args[4], &*results); !s)
      return Fail(s.error().message);
    // Only the sections the facts replaced can move, and those start with no moves of their own.
    moved = bakeoff::benchdoc::MovedFigures(*spec, before, *results);
    for (const auto& m : moved)
      (*results)[m.section].moved.push_back(bakeoff::benchdoc::MovedFigureText(m));
    if (bakeoff::Status s = bakeoff::WriteFileAtomically(
            args[1], bakeoff::benchdoc::BenchmarkResultsJson(*results));
        !s) {
      return Fail(s.error().message);
    }
  }
  bakeoff::benchdoc::RenderedBenchmarks doc = bakeoff::benchdoc::RenderBenchmarks(*spec, *results);
  if (bakeoff::Status s = bakeoff::WriteFileAtomically(args[2], doc.markdown); !s)
    return Fail(s.error().message);
  for (const std::string& problem : doc.problems)
    std::fprintf(stderr, "bakeoff_bench_doc: %s\n", problem.c_str());
  for (const auto& m : moved) {
    std::fprintf(stderr, "bakeoff_bench_doc: moved: %s: %s\n", m.section.c_str(),
                 bakeoff::benchdoc::MovedFigureText(m).c_str());
  }
  if (!doc.problems.empty()) return 3;
  return moved.empty() ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "render") return Render({args.begin() + 1, args.end()});
  if (args.size() == 3 && args[0] == "scenarios") {
    bakeoff::Result<BenchmarksSpec> spec = LoadSpec(args[1]);
    if (!spec) return Fail(spec.error().message);
    bakeoff::Result<std::string> shell =
        bakeoff::benchdoc::ScenarioShellAssignments(*spec, args[2]);
    if (!shell) return Fail(shell.error().message);
    std::fputs(shell->c_str(), stdout);
    return 0;
  }
  return Fail(
      "usage: bakeoff_bench_doc scenarios SPEC SECTION | render SPEC RESULTS OUT [--add "
      "FACTS.jsonl]");
}
