// cli/report_command.cc
//
// Owns: `bakeoff report DIR`: the pages of a results folder rendered again from what it holds
// (report/report_folder.h): report.html of a bench or simulate run, or of a study bundle. Exit
// codes: 0 written; 2 DIR is not a bakeoff results folder, or one of a schema this build does not
// read; 1 a page could not be written.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "report/report_folder.h"

namespace bakeoff::cli {

void AddReportCommand(CLI::App& app, int* exit_code) {
  auto dir = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand(
      "report",
      "Render the report pages (report.html) of a results folder again: a bench or simulate run, or a study bundle.\n"
      "Exit: 0 written, 2 not a bakeoff results folder, 1 a page could not be written.");
  c->add_option("dir", *dir, "The results folder (bench or simulate --out, or run's bundle)")->required();
  c->callback([dir, exit_code] {
    Result<std::vector<std::filesystem::path>> pages = report::RenderResultsFolder(*dir);
    if (!pages.ok()) {
      fmt::print(stderr, "bakeoff report: {}\n", pages.error().message);
      *exit_code = pages.error().code == ErrorCode::kIo ? kExitFailure : kExitUsage;
      return;
    }
    for (const std::filesystem::path& page : pages.value()) fmt::print("report: {}\n", page.string());
    *exit_code = kExitOk;
  });
}

}  // namespace bakeoff::cli
