// cli/bench_command.cc: `bakeoff bench` (placeholder until load/ lands in this change).
#include <CLI/CLI.hpp>

#include "cli/cli.h"

namespace bakeoff::cli {

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto* command = app.add_subcommand("bench", "Measure an OpenAI-compatible endpoint under load");
  command->callback([exit_code] { *exit_code = kExitFailure; });
}

}  // namespace bakeoff::cli
