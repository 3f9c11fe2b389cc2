// cli/cli.h
//
// Owns: the command line: subcommand registration, flag parsing and exit codes. Subcommands are
// thin; each lives in its own <name>_command.cc and calls into the library.
// Exit codes: 0 success, 1 the run failed (server unreachable, nothing measured, I/O error),
// 2 invalid usage (a flag or value is wrong; the message names the flag), 130 interrupted by
// SIGINT after writing what was measured.
#pragma once

#include <filesystem>

namespace CLI {
class App;
}

namespace bakeoff::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInterrupted = 130;

int Main(int argc, char** argv);

// Each subcommand registers itself on `app` and sets `*exit_code` when it runs.
void AddBenchCommand(CLI::App& app, int* exit_code);
void AddEmulateCommand(CLI::App& app, int* exit_code);
void AddFingerprintCommand(CLI::App& app, int* exit_code);
void AddSynthCommand(CLI::App& app, int* exit_code);
void AddSimulateCommand(CLI::App& app, int* exit_code);

// Where engine presets named on the command line are looked up: $BAKEOFF_PRESETS_DIR when set,
// else the first examples/engines found beside the binary or up to two levels above it
// (build/<preset>/bakeoff in a checkout), else ../share/bakeoff/engines beside it, else the
// source tree's examples/engines, else ./examples/engines (docs/engine-presets.md).
std::filesystem::path EnginePresetsDir();

}  // namespace bakeoff::cli
