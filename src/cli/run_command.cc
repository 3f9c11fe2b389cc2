// cli/run_command.cc
//
// Owns: `bakeoff run STUDY`: the study file read and checked (every mistake at once, exit 2), the
// study run into its bundle (study/runner.h), report.md written beside verdict.json, the summary
// printed, and the exit code: 0 a candidate was chosen, 3 none meets the SLO (or none survived the
// gate), 2 a wrong study, catalog, preset or workload, or candidates that cannot be compared, 1 the
// bundle could not be written, 130/143 interrupted (what was measured is kept; rerunning the same
// command resumes).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "cli/load_flags.h"
#include "cli/stop_signals.h"
#include "core/file.h"
#include "core/json_text.h"
#include "report/report_folder.h"
#include "report/study_report.h"
#include "study/runner.h"
#include "target/launcher.h"

namespace bakeoff::cli {
namespace {

struct RunFlags {
  std::string study;
  std::string out;
  std::string budget;
  bool fresh = false;
};

int RunStudyCommand(const RunFlags& flags) {
  auto fail = [](int code, const std::string& message) {
    fmt::print(stderr, "bakeoff run: {}\n", message);
    return code;
  };
  Result<study::Study> loaded = study::LoadStudy(flags.study);
  if (!loaded.ok()) return fail(kExitUsage, loaded.error().message);
  study::Study s = std::move(loaded.value());
  if (!flags.budget.empty()) {
    Result<Nanos> budget = ParseDuration("--budget", flags.budget);
    if (!budget.ok()) return fail(kExitUsage, budget.error().message);
    if (budget.value() <= Nanos(0)) return fail(kExitUsage, "--budget: must be positive");
    s.budget = budget.value();
  }
  study::StudyRunOptions options;
  options.out_dir = flags.out.empty() ? std::filesystem::path("out") / std::filesystem::path(flags.study).stem()
                                      : std::filesystem::path(flags.out);
  options.fresh = flags.fresh;
  options.presets_dir = EnginePresetsDir();
  std::error_code ec;
  options.self_exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return fail(kExitFailure, "cannot find the bakeoff binary (/proc/self/exe): " + ec.message());

  bool emulated = false;
  for (const study::CandidateSpec& c : s.candidates) emulated = emulated || c.kind == study::CandidateKind::kEmulated;
  if (emulated) {
    fmt::print("EMULATED: this study's candidates include bakeoff's emulated engine; its figures exercise the method "
               "and are no conclusion about any real engine.\n");
  }
  fmt::print("study {}: {} candidates, budget {:.0f} s, bundle {}\n", s.name, s.candidates.size(), ToSeconds(s.budget),
             options.out_dir.string());
  std::fflush(stdout);  // before the progress lines on stderr
  StopSignals stop;
  stop.OnImmediateExit(target::KillEveryLaunchedGroup);
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff run: {}\n", ValidUtf8(line)); };
  Result<study::StudyResults> results = study::RunStudy(s, options, stop.flag(), log);
  if (!results.ok()) {
    return fail(results.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure, results.error().message);
  }
  const std::filesystem::path report = options.out_dir / "report.md";
  Status written = WriteFileAtomically(report, ValidUtf8(report::StudyMarkdown(results.value())));
  fmt::print("\n{}\n", report::StudySummaryText(results.value()));
  fmt::print("bundle: {} (verdict.json, report.md, gate.json, manifest.json)\n", options.out_dir.string());
  if (!written.ok()) return fail(kExitFailure, written.error().message);
  Result<std::filesystem::path> page = report::WriteStudyReport(options.out_dir);
  if (!page.ok()) return fail(kExitFailure, "report.html: " + page.error().message);
  fmt::print("report: {}\n", page->string());
  if (results->interrupted) return stop.ExitCode();
  if (results->budget_spent) fmt::print(stderr, "bakeoff run: the budget was spent; see \"skipped\" in report.md\n");
  return results->verdict.choice.empty() ? kExitDisqualified : kExitOk;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* c = app.add_subcommand(
      "run", "Run a selection study end to end: gate, probes, the same load on every candidate, capacity under SLO, "
             "a verdict with rollback, written as a results bundle");
  c->add_option("study", flags->study, "The study file (YAML; docs/formats/study.md)")->required();
  c->add_option("--out", flags->out, "The bundle folder (default out/<study file name>); an earlier bundle of the "
                                     "same study, catalog and bakeoff version is resumed, another refused");
  c->add_option("--budget", flags->budget, "Wall-time budget, overriding the study's (e.g. 10min)");
  c->add_flag("--fresh", flags->fresh,
              "Replace an earlier bundle in --out instead of resuming it (a folder that is not a bundle is "
              "never emptied)");
  c->callback([flags, exit_code] { *exit_code = RunStudyCommand(*flags); });
}

}  // namespace bakeoff::cli
