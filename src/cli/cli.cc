#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>

namespace bakeoff::cli {

int Main(int argc, char** argv) {
  CLI::App app{"bakeoff: choose an LLM inference engine with evidence"};
  app.set_version_flag("--version", std::string("bakeoff ") + BAKEOFF_VERSION);
  app.require_subcommand(1);
  int exit_code = kExitOk;
  AddBenchCommand(app, &exit_code);
  AddEmulateCommand(app, &exit_code);
  AddFingerprintCommand(app, &exit_code);
  AddSynthCommand(app, &exit_code);
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
  }
  return exit_code;
}

}  // namespace bakeoff::cli
