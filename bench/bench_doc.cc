// bench/bench_doc.cc: bakeoff_bench_doc, the tool scripts/bench.sh writes docs/BENCHMARKS.md with
// (report/benchmarks_doc.h).
//   bakeoff_bench_doc scenarios SPEC SECTION      the section's scenarios as shell assignments
//   bakeoff_bench_doc render SPEC RESULTS OUT [--add FACTS.jsonl]
//       with --add, the sections FACTS.jsonl names replace those in RESULTS (rewritten); then the
//       document is rendered from SPEC and RESULTS into OUT. Holes that could not be filled are
//       listed on stderr and make the exit status 3 (the document is still written).
// Exit status: 0 done, 2 a wrong argument or file, 3 rendered with problems.
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"
#include "report/benchmarks_doc.h"

namespace {

using bakeoff::report::BenchmarkResults;
using bakeoff::report::BenchmarksSpec;

int Fail(const std::string& message) {
  std::fprintf(stderr, "bakeoff_bench_doc: %s\n", message.c_str());
  return 2;
}

bakeoff::Result<BenchmarksSpec> LoadSpec(const std::string& path) {
  bakeoff::Result<std::string> text = bakeoff::ReadFile(path);
  if (!text) return text.error();
  return bakeoff::report::ParseBenchmarksSpec(*text, path);
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
  bakeoff::Result<BenchmarkResults> results = bakeoff::report::ReadBenchmarkResults(results_text, args[1]);
  if (!results) return Fail(results.error().message);
  if (args.size() == 5) {
    bakeoff::Result<std::string> facts = bakeoff::ReadFile(args[4]);
    if (!facts) return Fail(facts.error().message);
    if (bakeoff::Status s = bakeoff::report::MergeFactLines(*facts, args[4], &*results); !s) return Fail(s.error().message);
    if (bakeoff::Status s = bakeoff::WriteFileAtomically(args[1], bakeoff::report::BenchmarkResultsJson(*results)); !s) {
      return Fail(s.error().message);
    }
  }
  bakeoff::report::RenderedBenchmarks doc = bakeoff::report::RenderBenchmarks(*spec, *results);
  if (bakeoff::Status s = bakeoff::WriteFileAtomically(args[2], doc.markdown); !s) return Fail(s.error().message);
  for (const std::string& problem : doc.problems) std::fprintf(stderr, "bakeoff_bench_doc: %s\n", problem.c_str());
  return doc.problems.empty() ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "render") return Render({args.begin() + 1, args.end()});
  if (args.size() == 3 && args[0] == "scenarios") {
    bakeoff::Result<BenchmarksSpec> spec = LoadSpec(args[1]);
    if (!spec) return Fail(spec.error().message);
    bakeoff::Result<std::string> shell = bakeoff::report::ScenarioShellAssignments(*spec, args[2]);
    if (!shell) return Fail(shell.error().message);
    std::fputs(shell->c_str(), stdout);
    return 0;
  }
  return Fail("usage: bakeoff_bench_doc scenarios SPEC SECTION | render SPEC RESULTS OUT [--add FACTS.jsonl]");
}
