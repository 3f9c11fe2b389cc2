// cli/emulate_command.cc: `bakeoff emulate` (placeholder until emulate/ lands in this change).
#include <CLI/CLI.hpp>

#include "cli/cli.h"

namespace bakeoff::cli {

void AddEmulateCommand(CLI::App& app, int* exit_code) {
  auto* command = app.add_subcommand("emulate", "Serve the emulated engine over HTTP");
  command->callback([exit_code] { *exit_code = kExitFailure; });
}

}  // namespace bakeoff::cli
