// cli/cli.h
//
// Owns: the command line: subcommand registration, flag parsing and exit codes. Subcommands are
// thin; each lives in its own <name>_command.cc and calls into the library.
// Exit codes: 0 success; 1 the run failed (server unreachable, most requests failed, results
// could not be written; cli/table.h has the exact rule); 2 invalid usage or input (a flag or
// value is wrong, an input file is missing or malformed; the message names the flag or the
// file:line); 128 + the signal (130 for SIGINT, 143 for SIGTERM) when a stop signal ended a run
// after writing what was measured.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "core/result.h"
#include "net/http_client.h"
#include "target/adapters.h"

namespace CLI {
class App;
}

namespace bakeoff::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// probe: a candidate was disqualified; run: no candidate meets the SLO.
inline constexpr int kExitDisqualified = 3;
// compare: some gated metric is worse in the new run.
inline constexpr int kExitRegressed = 4;

int Main(int argc, char** argv);

// Each subcommand registers itself on `app` and sets `*exit_code` when it runs.
void AddBenchCommand(CLI::App& app, int* exit_code);
void AddEmulateCommand(CLI::App& app, int* exit_code);
void AddFingerprintCommand(CLI::App& app, int* exit_code);
void AddSynthCommand(CLI::App& app, int* exit_code);
void AddSimulateCommand(CLI::App& app, int* exit_code);
void AddProbeCommand(CLI::App& app, int* exit_code);
void AddDetectCommand(CLI::App& app, int* exit_code);
void AddCatalogCommand(CLI::App& app, int* exit_code);
void AddRunCommand(CLI::App& app, int* exit_code);
void AddCompareCommand(CLI::App& app, int* exit_code);
void AddReportCommand(CLI::App& app, int* exit_code);
void AddK8sCommand(CLI::App& app, int* exit_code);
void AddMergeCommand(CLI::App& app, int* exit_code);
void AddCalibrateCommand(CLI::App& app, int* exit_code);
void AddPlanCommand(CLI::App& app, int* exit_code);

// The adapter bench and probe use: the one `engine` names (--engine; kInvalidInput naming the
// flag and the known names when unknown), else what target::DetectEngine finds at `endpoint`
// ("" or "auto"; its warnings and the engine found go to `log`). An unreachable server gives
// generic-openai (the run itself then reports it).
Result<const target::EngineAdapter*> ResolveEngine(const std::string& engine,
                                                   const net::Endpoint& endpoint,
                                                   const net::ClientOptions& client,
                                                   const std::function<void(std::string)>& log);

// Where engine presets named on the command line are looked up: $BAKEOFF_PRESETS_DIR when set,
// else the first examples/engines found beside the binary or up to two levels above it
// (build/<preset>/bakeoff in a checkout), else ../share/bakeoff/engines beside it, else the
// source tree's examples/engines, else ./examples/engines (docs/engine-presets.md).
std::filesystem::path EnginePresetsDir();

}  // namespace bakeoff::cli
