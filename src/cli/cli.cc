#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/json_text.h"

namespace bakeoff::cli {

std::filesystem::path EnginePresetsDir() {
  if (const char* dir = std::getenv("BAKEOFF_PRESETS_DIR"); dir != nullptr && *dir != '\0') return dir;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const char* relative : {"examples/engines", "../examples/engines", "../../examples/engines",
                                 "../share/bakeoff/engines"}) {
      const std::filesystem::path dir = (exe.parent_path() / relative).lexically_normal();
      if (std::filesystem::is_directory(dir, ec)) return dir;
    }
  }
  if (std::filesystem::is_directory(BAKEOFF_DEFAULT_PRESETS_DIR, ec)) return BAKEOFF_DEFAULT_PRESETS_DIR;
  return "examples/engines";
}

int Main(int argc, char** argv) {
  CLI::App app{"bakeoff: choose an LLM inference engine with evidence"};
  app.set_version_flag("--version", std::string("bakeoff ") + BAKEOFF_VERSION);
  app.require_subcommand(1);
  int exit_code = kExitOk;
  AddBenchCommand(app, &exit_code);
  AddEmulateCommand(app, &exit_code);
  AddFingerprintCommand(app, &exit_code);
  AddSynthCommand(app, &exit_code);
  AddSimulateCommand(app, &exit_code);
  AddPlanCommand(app, &exit_code);
  AddProbeCommand(app, &exit_code);
  AddDetectCommand(app, &exit_code);
  AddCatalogCommand(app, &exit_code);
  AddRunCommand(app, &exit_code);
  AddCompareCommand(app, &exit_code);
  AddReportCommand(app, &exit_code);
  AddK8sCommand(app, &exit_code);
  AddMergeCommand(app, &exit_code);
  AddCalibrateCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "bakeoff: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    // The last resort: a command's own handlers name the phase; this keeps an escaped exception
    // a one-line error and exit 1 instead of std::terminate.
    std::fprintf(stderr, "bakeoff: internal error: %s\n", ValidUtf8(e.what()).c_str());
    return kExitFailure;
  }
  return exit_code;
}

}  // namespace bakeoff::cli
