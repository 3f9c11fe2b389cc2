// cli/calibrate_command.cc
//
// Owns: `bakeoff calibrate --url URL --out PRESET.yaml`: the flags of run::Calibrate (the budget,
// the base preset the unmeasured settings come from, the largest number of streams), the engine
// adapter's forced-length fields (--engine, else detected), and the printout of each fit.
// Exit codes: 0 written (a poor fit is written flagged, and said); 2 a wrong flag or base preset;
// 1 the endpoint served nothing or the preset could not be written; 128 + the signal when stopped
// (what was measured is written).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/load_flags.h"
#include "cli/stop_signals.h"
#include "run/bench.h"
#include "run/calibrate.h"
#include "target/discovery.h"

namespace bakeoff::cli {
namespace {

struct CalibrateFlags {
  std::string url;
  std::string out;
  std::string budget = "2min";
  std::string model;
  std::string engine = "auto";
  std::string base_preset = "continuous-paged";
  std::uint64_t seed = 0;  // 0: from the clock, so no prompt is one the server has cached
  std::uint32_t max_concurrency = 32;
};

int RunCalibrateCommand(const CalibrateFlags& f) {
  auto usage = [](const std::string& message) {
    fmt::print(stderr, "bakeoff calibrate: {}\n", message);
    return kExitUsage;
  };
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff calibrate: {}\n", line); };
  run::CalibrateConfig config;
  Result<net::Endpoint> endpoint = net::ParseEndpoint(f.url);
  if (!endpoint.ok()) return usage("--url: " + endpoint.error().message);
  if (std::optional<std::string> note = target::StripApiVersionSuffix(endpoint.value())) log("--url: " + *note);
  config.target.endpoint = endpoint.value();
  config.target.request.model = f.model;
  config.url = f.url;
  config.out = f.out;
  config.seed = f.seed != 0 ? f.seed
                            : static_cast<std::uint64_t>(RealClock().WallNow().time_since_epoch().count());
  Result<Nanos> budget = ParseDuration("--budget", f.budget);
  if (!budget.ok()) return usage(budget.error().message);
  if (budget.value() < std::chrono::seconds(5)) return usage("--budget: at least 5s");
  config.budget = budget.value();
  if (f.max_concurrency < 4 || f.max_concurrency > 32) return usage("--max-concurrency: between 4 and 32");
  // Checked before the experiment, so a wrong folder does not cost the run.
  const std::filesystem::path out_dir = std::filesystem::absolute(config.out).parent_path();
  if (std::error_code ec; !std::filesystem::is_directory(out_dir, ec)) {
    return usage("--out: the folder " + out_dir.string() + " does not exist");
  }
  config.max_concurrency = f.max_concurrency;
  Result<std::filesystem::path> file = emulate::ResolveEnginePreset(f.base_preset, EnginePresetsDir());
  if (!file.ok()) return usage("--base-preset: " + file.error().message);
  Result<emulate::EnginePreset> base = emulate::LoadEnginePreset(file.value());
  if (!base.ok()) return usage("--base-preset: " + base.error().message);
  config.base = base.value();
  // Every answer must be as long as asked: the engine's own fields for it.
  Result<const target::EngineAdapter*> adapter =
      ResolveEngine(f.engine, config.target.endpoint, config.target.client, log);
  if (!adapter.ok()) return usage(adapter.error().message);
  config.target.request.ignore_eos = true;
  config.target.request.min_tokens = 1;
  const run::RequestIntent intent = run::FitRequestToEngine(config.target.request, adapter.value());
  if (!intent.forced_length_not_sent.empty()) {
    log("answers may end early (" + intent.forced_length_not_sent + "): the decode fit counts the gaps it gets");
  }

  const StopSignals stop;
  Result<run::CalibrationOutcome> outcome = run::Calibrate(config, stop.flag(), log);
  if (!outcome.ok()) {
    fmt::print(stderr, "bakeoff calibrate: {}\n", outcome.error().message);
    return outcome.error().code == ErrorCode::kCancelled ? stop.ExitCode() : kExitFailure;
  }
  for (const run::CalibrationFit& fit : outcome->fits) {
    fmt::print("{:<8} {:<5} {} point(s){}\n", fit.name, fit.good ? "good" : "POOR", fit.points.size(),
               fit.coefficients.empty()
                   ? ""
                   : fmt::format("  coefficients [{:.4g}]  R² {:.3f}  RMS residual {:.3g} ms",
                                 fmt::join(fit.coefficients, ", "), fit.r_squared, fit.rms_residual_ms));
  }
  const emulate::CostModel& cost = outcome->preset.config.cost;
  fmt::print("cost: base_ms {:.4g}, prefill_ms_per_token {:.4g}, decode_ms_per_seq {:.4g}, kv_ms_per_1k_tokens {:.4g}\n",
             cost.base_ms, cost.prefill_ms_per_token, cost.decode_ms_per_seq, cost.kv_ms_per_1k_tokens);
  for (const std::string& note : outcome->notes) log(note);
  for (const std::string& what : outcome->not_determined) log("not determined: " + what);
  fmt::print("preset: {}\n", f.out);
  return outcome->interrupted ? stop.ExitCode() : kExitOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<CalibrateFlags>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Fit the emulated engine's step costs to a live endpoint (TTFT against prompt length, the decode step against "
      "streams and context) and write them as an engine preset, with each fit's quality and points.\n"
      "Exit: 0 written, 2 a wrong flag, 1 nothing served or not written.");
  c->add_option("--url", flags->url, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  c->add_option("--out", flags->out, "The preset file to write (YAML)")->required();
  c->add_option("--budget", flags->budget, "No new measurement starts past this time")->capture_default_str();
  c->add_option("--model", flags->model, "Model name (default: the first listed by /v1/models)");
  c->add_option("--engine", flags->engine, "Engine adapter for the forced-length fields (bakeoff detect --list)")
      ->capture_default_str();
  c->add_option("--base-preset", flags->base_preset, "Preset whose other settings the calibrated one keeps")
      ->capture_default_str();
  c->add_option("--seed", flags->seed,
                "Seed of the prompts (default: from the clock, so the server has none of them cached; written in the preset)");
  c->add_option("--max-concurrency", flags->max_concurrency, "The decode experiment's most streams at once (4 to 32)")
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunCalibrateCommand(*flags); });
}

}  // namespace bakeoff::cli
