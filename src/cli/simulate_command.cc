// cli/simulate_command.cc
//
// Owns: the `bakeoff simulate` flags: the load flags bench has and an engine preset
// (cli/simulate_setup.h), replicas, a router and what records.jsonl keeps; their validation (one
// line naming the flag or the preset file:line, exit 2) and the final table. The run itself is run::RunSimulate.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <memory>

#include "run/simulate.h"
#include "cli/cli.h"
#include "cli/load_flags.h"
#include "cli/simulate_setup.h"
#include "cli/stop_signals.h"
#include "cli/table.h"

namespace bakeoff::cli {
namespace {

struct SimulateFlags {
  LoadFlags load;
  EngineModelFlags engine;
  std::int64_t replicas = 1;
  std::string router = "round-robin";
  std::string keep = "auto";
};

// --keep auto|all|records|sample[:N]|summary (run/simulate.h RecordsKept).
Result<run::RecordsKept> ParseKeep(const std::string& text) {
  run::RecordsKept keep;
  using Mode = run::RecordsKept::Mode;
  const std::size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  if (name == "auto") keep.mode = Mode::kAuto;
  else if (name == "all") keep.mode = Mode::kAll;
  else if (name == "records") keep.mode = Mode::kNoTokens;
  else if (name == "sample") keep.mode = Mode::kSample;
  else if (name == "summary") keep.mode = Mode::kNone;
  else return MakeError(ErrorCode::kInvalidInput, "--keep: '" + text + "' (expected auto, all, records, sample[:N] or summary)");
  if (colon != std::string::npos) {
    const std::string count = text.substr(colon + 1);
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (keep.mode != Mode::kSample || ec != std::errc() || end != count.data() + count.size() || n == 0) {
      return MakeError(ErrorCode::kInvalidInput, "--keep: '" + text + "' (sample:N takes a positive count of requests per step)");
    }
    keep.sample_size = n;
  }
  return keep;
}

Result<run::SimulateConfig> BuildConfig(const SimulateFlags& f) {
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  Result<run::SimulateConfig> config = BuildSimulateConfig(f.load, f.engine, "bakeoff simulate");
  if (!config.ok()) return config;
  if (f.replicas < 1 || f.replicas > 4096) return usage(fmt::format("--replicas: {} is not in [1, 4096]", f.replicas));
  config->sim.replicas = f.replicas;
  std::optional<emulate::Router> router = emulate::ParseRouter(f.router);
  if (!router) {
    return usage("--router: '" + f.router + "' (expected round-robin, least-outstanding, prefix-affinity or kv-aware)");
  }
  config->sim.router = *router;
  Result<run::RecordsKept> keep = ParseKeep(f.keep);
  if (!keep.ok()) return keep.error();
  config->keep = keep.value();
  config->flags.update({{"replicas", f.replicas}, {"router", f.router}, {"keep", f.keep}});
  return config;
}

int RunSimulateCommand(const SimulateFlags& flags) {
  Result<run::SimulateConfig> config = BuildConfig(flags);
  if (!config.ok()) {
    fmt::print(stderr, "bakeoff simulate: {}\n", config.error().message);
    return kExitUsage;
  }
  const StopSignals stop;
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff simulate: {}\n", line); };
  log("engine " + config->preset + " (emulated, virtual clock)");
  Result<run::BenchOutcome> outcome = run::RunSimulate(config.value(), stop.flag(), log);
  if (!outcome.ok()) {
    fmt::print(stderr, "bakeoff simulate: {}\n", outcome.error().message);
    return outcome.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
  }
  for (const std::string& note : outcome->notes) log(note);
  return ReportRun(outcome.value(), stop.ExitCode());
}

}  // namespace

void AddSimulateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* c = app.add_subcommand(
      "simulate", "Predict a load on replicas of the emulated engine, on a virtual clock (seconds, no server)");
  AddLoadOptions(*c, flags->load);
  AddEngineModelOptions(*c, flags->engine);
  c->add_option("--replicas", flags->replicas, "Engine replicas behind the router")->capture_default_str();
  c->add_option("--router", flags->router, "round-robin, least-outstanding, prefix-affinity or kv-aware")
      ->capture_default_str();
  c->add_option("--keep", flags->keep,
                "What records.jsonl keeps: all (with token instants), records (without them), sample[:N] (about N "
                "requests per step, default 20000), summary (no records.jsonl), or auto (all up to 100,000 requests "
                "per step, else sample). summary.json's figures always come from every request")
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunSimulateCommand(*flags); });
}

}  // namespace bakeoff::cli
