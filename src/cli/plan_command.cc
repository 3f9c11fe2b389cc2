// cli/plan_command.cc
//
// Owns: the `bakeoff plan` flags: the load (cli/load_flags.h; or --fingerprint, synthesized into
// the output folder first) and engine preset (cli/simulate_setup.h), the routers, what-ifs,
// growth and search bounds; their validation (one line naming the flag, exit 2), plan.json and the
// printed table. The planning itself is run::PlanFleet.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/cli.h"
#include "cli/simulate_setup.h"
#include "cli/stop_signals.h"
#include "core/file.h"
#include "core/json_dump.h"
#include "run/fleet_plan.h"
#include "workload/fingerprint.h"
#include "workload/synthesis.h"
#include "workload/trace_jsonl.h"

namespace bakeoff::cli {
namespace {

struct PlanFlags {
  LoadFlags load;
  EngineModelFlags engine;
  std::string fingerprint;
  std::vector<std::string> routers = {"all"};  // comma lists, split by CLI11
  std::vector<std::string> what_ifs = {"all"};
  double growth = 1;
  std::int64_t max_replicas = 1024;
  double target_attainment = 0.99;
  double min_availability = 0.99;
};

Result<std::vector<emulate::Router>> ParseRouters(const std::vector<std::string>& names) {
  if (names == std::vector<std::string>{"all"}) return std::vector<emulate::Router>(std::begin(emulate::kAllRouters), std::end(emulate::kAllRouters));
  std::vector<emulate::Router> routers;
  for (const std::string& name : names) {
    std::optional<emulate::Router> router = emulate::ParseRouter(name);
    if (!router) {
      return MakeError(ErrorCode::kInvalidInput,
                       "--routers: '" + name + "' (expected all, or a list of round-robin, least-outstanding, "
                       "prefix-affinity, kv-aware)");
    }
    routers.push_back(*router);
  }
  return routers;
}

Result<std::vector<run::WhatIf>> ParseWhatIfs(const std::vector<std::string>& names) {
  if (names == std::vector<std::string>{"all"}) {
    return std::vector<run::WhatIf>(std::begin(run::kAllWhatIfs), std::end(run::kAllWhatIfs));
  }
  if (names == std::vector<std::string>{"none"}) return std::vector<run::WhatIf>{};
  std::vector<run::WhatIf> what_ifs;
  for (const std::string& name : names) {
    std::optional<run::WhatIf> what_if = run::ParseWhatIf(name);
    if (!what_if) {
      return MakeError(ErrorCode::kInvalidInput,
                       "--what-if: '" + name + "' (expected all, none, or a list of double-traffic, "
                       "half-prefix-reuse, double-output)");
    }
    what_ifs.push_back(*what_if);
  }
  return what_ifs;
}

// --fingerprint: a trace synthesized from it (seed --seed), written beside plan.json so the plan
// can be reproduced and the workload inspected; the load flags then replay it.
Status SynthesizeWorkload(PlanFlags& f) {
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  if (!f.load.trace.empty()) return usage("--fingerprint and --trace: choose one");
  if (f.load.out.empty()) return usage("--fingerprint needs --out (the synthesized trace is written there)");
  Result<std::string> text = ReadFile(f.fingerprint);
  if (!text.ok()) return usage("--fingerprint: " + text.error().message);
  Result<workload::Fingerprint> fingerprint = workload::ParseFingerprintJson(*text);
  if (!fingerprint.ok()) return usage(fmt::format("--fingerprint: {}: {}", f.fingerprint, fingerprint.error().message));
  workload::SynthesisOptions options;
  options.seed = f.load.seed;
  Result<workload::Trace> trace = workload::SynthesizeFromFingerprint(*fingerprint, options);
  if (!trace.ok()) return usage(fmt::format("--fingerprint: {}: {}", f.fingerprint, trace.error().message));
  std::error_code ec;
  std::filesystem::create_directories(f.load.out, ec);
  const std::filesystem::path path = std::filesystem::path(f.load.out) / "workload.jsonl";
  if (Status written = workload::WriteTraceJsonl(*trace, path); !written.ok()) return written.error();
  fmt::print(stderr, "bakeoff plan: synthesized {} requests from {} into {}\n", trace->requests.size(), f.fingerprint,
             path.string());
  f.load.trace = path.string();
  return Ok{};
}

int RunPlanCommand(PlanFlags flags) {
  auto fail = [](const std::string& message, int code) {
    fmt::print(stderr, "bakeoff plan: {}\n", message);
    return code;
  };
  if (!flags.fingerprint.empty()) {
    if (Status synthesized = SynthesizeWorkload(flags); !synthesized.ok()) {
      return fail(synthesized.error().message, kExitUsage);
    }
  }
  Result<run::SimulateConfig> load = BuildSimulateConfig(flags.load, flags.engine, "bakeoff plan");
  if (!load.ok()) return fail(load.error().message, kExitUsage);
  Result<std::vector<emulate::Router>> routers = ParseRouters(flags.routers);
  if (!routers.ok()) return fail(routers.error().message, kExitUsage);
  Result<std::vector<run::WhatIf>> what_ifs = ParseWhatIfs(flags.what_ifs);
  if (!what_ifs.ok()) return fail(what_ifs.error().message, kExitUsage);
  run::FleetPlanConfig config;
  config.load = std::move(load.value());
  config.load.keep.mode = run::RecordsKept::Mode::kNone;
  config.routers = std::move(routers.value());
  config.what_ifs = std::move(what_ifs.value());
  config.growth = flags.growth;
  config.max_replicas = flags.max_replicas;
  config.target_attainment = flags.target_attainment;
  config.min_availability = flags.min_availability;
  if (Status valid = run::ValidateFleetPlanConfig(config); !valid.ok()) return fail(valid.error().message, kExitUsage);

  const StopSignals stop;
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff plan: {}\n", line); };
  log("engine " + config.load.preset + " (emulated, virtual clock)");
  Result<run::FleetPlan> plan = run::PlanFleet(config, stop.flag(), log);
  if (!plan.ok()) {
    return fail(plan.error().message, plan.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure);
  }
  nlohmann::json json = run::ToJson(plan.value(), config);
  json["flags"] = config.load.flags;
  std::error_code ec;
  std::filesystem::create_directories(config.load.out_dir, ec);
  const std::filesystem::path out = config.load.out_dir / "plan.json";
  if (Status written = WriteFileAtomically(out, DumpJson(json, 2)); !written.ok()) {
    return fail("cannot write " + out.string() + ": " + written.error().message, kExitFailure);
  }
  fmt::print("{}", run::FormatFleetPlan(plan.value()));
  fmt::print("emulated: every figure is a simulation of bakeoff's engine model ({}), not a measurement\n",
             config.load.preset);
  log(fmt::format("{} simulations; wrote {}", plan->simulations, out.string()));
  if (plan->interrupted) return stop.ExitCode();
  return kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* c = app.add_subcommand(
      "plan", "Size a fleet: the fewest replicas of an engine preset that meet an SLO, per router, with what-ifs "
              "(simulated)");
  AddLoadOptions(*c, flags->load);
  AddEngineModelOptions(*c, flags->engine);
  c->add_option("--fingerprint", flags->fingerprint,
                "Plan for a trace synthesized from this fingerprint.json (written to --out as workload.jsonl)");
  c->add_option("--routers", flags->routers, "all, or a comma list of round-robin, least-outstanding, prefix-affinity, "
                                             "kv-aware")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--what-if", flags->what_ifs,
                "all, none, or a comma list of double-traffic, half-prefix-reuse, double-output")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--growth", flags->growth, "Multiply the load's arrival rate by this first (e.g. 1.5 for next year)")
      ->capture_default_str();
  c->add_option("--max-replicas", flags->max_replicas, "The largest fleet tried")->capture_default_str();
  c->add_option("--target-attainment", flags->target_attainment,
                "Share of requests that must meet every SLO term (0-1)")
      ->capture_default_str();
  c->add_option("--min-availability", flags->min_availability, "Share of requests that must complete (0-1)")
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunPlanCommand(*flags); });
}

}  // namespace bakeoff::cli
