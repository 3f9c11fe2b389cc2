// cli/compare_command.cc
//
// Owns: `bakeoff compare OLD NEW [--tolerance 5%] [--allow-different] [--gate-throughput]
// [--out DIR] [--json]`: two bench or simulate result folders, or two study bundles, compared
// (report/compare.h); the table on stdout (or compare.json's content with --json), compare.json and
// compare.html (both runs' latency curves overlaid) written into --out (default: NEW). Exit codes:
// 0 no regression; 4 regressed (some gated metric is worse), so a CI pipeline can gate an upgrade
// on it; 2 usage, or runs that measured different loads (without --allow-different) or share no
// step; 1 a folder that cannot be read.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/load_flags.h"
#include "core/file.h"
#include "core/json_dump.h"
#include "report/compare.h"
#include "report/report_folder.h"

namespace bakeoff::cli {
namespace {

struct CompareFlags {
  std::string old_dir;
  std::string new_dir;
  std::string tolerance = "5%";
  bool allow_different = false;
  bool gate_throughput = false;
  std::string out;
  bool json = false;
};

int RunCompareCommand(const CompareFlags& f) {
  auto fail = [](const std::string& message, int code) {
    fmt::print(stderr, "bakeoff compare: {}\n", message);
    return code;
  };
  Result<double> tolerance = ParsePercent("--tolerance", f.tolerance);
  if (!tolerance.ok()) return fail(tolerance.error().message, kExitUsage);
  Result<nlohmann::json> old_summary = report::LoadRunSummary(f.old_dir);
  if (!old_summary.ok()) return fail(old_summary.error().message, kExitFailure);
  Result<nlohmann::json> new_summary = report::LoadRunSummary(f.new_dir);
  if (!new_summary.ok()) return fail(new_summary.error().message, kExitFailure);
  report::CompareOptions options;
  options.tolerance = tolerance.value();
  options.allow_different = f.allow_different;
  options.gate_throughput = f.gate_throughput;
  Result<report::Comparison> comparison = report::CompareRuns(old_summary.value(), new_summary.value(), options);
  if (!comparison.ok()) return fail(comparison.error().message, kExitUsage);
  comparison->old_dir = f.old_dir;
  comparison->new_dir = f.new_dir;
  const nlohmann::json document = report::ToJson(comparison.value());
  const std::filesystem::path out = std::filesystem::path(f.out.empty() ? f.new_dir : f.out) / "compare.json";
  std::error_code ec;
  std::filesystem::create_directories(out.parent_path(), ec);
  if (Status written = WriteFileAtomically(out, DumpJson(document, 2)); !written.ok()) {
    return fail(written.error().message, kExitFailure);
  }
  Result<std::filesystem::path> page = report::WriteComparePage(comparison.value(), out.parent_path() / "compare.html");
  if (!page.ok()) return fail(page.error().message, kExitFailure);
  fmt::print("{}", f.json ? DumpJson(document, 2) : report::CompareTable(comparison.value()));
  fmt::print(stderr, "bakeoff compare: {}\nbakeoff compare: {}\n", out.string(), page->string());
  return comparison->Regressed() ? kExitRegressed : kExitOk;
}

}  // namespace

void AddCompareCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* c = app.add_subcommand(
      "compare",
      "Compare two bench or simulate results, or two study bundles (an upgrade, a regression): per step (per "
      "candidate and phase for bundles) and metric the change, its 95% bounds and a verdict (better, worse, no "
      "detectable change).\n"
      "Exit: 0 no regression, 4 regressed, 2 different loads or usage, 1 unreadable.");
  c->add_option("old", flags->old_dir, "The earlier result folder or bundle")->required();
  c->add_option("new", flags->new_dir, "The later result folder or bundle")->required();
  c->add_option("--tolerance", flags->tolerance, "Changes smaller than this are no change (e.g. 5%)")->capture_default_str();
  c->add_flag("--allow-different", flags->allow_different, "Compare runs whose load settings differ (listed first)");
  c->add_flag("--gate-throughput", flags->gate_throughput,
              "Let throughput (which has no bounds) decide 'regressed' too");
  c->add_option("--out", flags->out, "Folder for compare.json (default: the new result folder)");
  c->add_flag("--json", flags->json, "Print compare.json instead of the table");
  c->callback([flags, exit_code] { *exit_code = RunCompareCommand(*flags); });
}

}  // namespace bakeoff::cli
