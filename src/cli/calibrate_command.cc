// cli/calibrate_command.cc
//
// Owns: `bakeoff calibrate --url URL --out PRESET.yaml`: the flags of run::Calibrate (the budget,
// the base preset the unmeasured settings come from, the largest number of streams and burst,
// which experiments), the engine
// adapter's forced-length fields (--engine, else detected), and the printout of each fit; and
// `bakeoff calibrate --url URL --validate PRESET --out DIR` (run::ValidatePreset: held-out loads on
// the endpoint and the simulator, the prediction error per metric).
// Exit codes: 0 written (a poor fit is written flagged, and said; validation: whether or not the
// model holds); 2 a wrong flag or preset; 1 the endpoint served nothing or the files could not be
// written; 128 + the signal when stopped (what was measured is written).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/load_flags.h"
#include "cli/stop_signals.h"
#include "run/bench.h"
#include "run/calibrate.h"
#include "run/validate.h"
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
  std::uint32_t max_burst = 256;
  std::vector<std::string> experiments = {"costs", "limits"};
  // --validate PRESET: check it instead of fitting one (--out is then a folder).
  std::string validate;
  std::vector<double> fractions = {0.3, 0.5, 0.8};
  double bursty_fraction = 0.5;
  std::string slo;
  std::uint32_t prompt_tokens = 256;
  std::uint32_t output_tokens = 64;
};

int RunValidateCommand(const CalibrateFlags& f, run::LoadTarget server, dialect::GenerationRequest request,
                       std::uint64_t seed, Nanos budget) {
  auto usage = [](const std::string& message) {
    fmt::print(stderr, "bakeoff calibrate --validate: {}\n", message);
    return kExitUsage;
  };
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff calibrate --validate: {}\n", line); };
  run::ValidateConfig config;
  Result<std::filesystem::path> file = emulate::ResolveEnginePreset(f.validate, EnginePresetsDir());
  if (!file.ok()) return usage("--validate: " + file.error().message);
  Result<emulate::EnginePreset> preset = emulate::LoadEnginePreset(file.value());
  if (!preset.ok()) return usage("--validate: " + preset.error().message);
  config.preset = preset.value();
  config.preset_name = f.validate;
  config.server = std::move(server);
  config.request = std::move(request);
  config.out_dir = f.out;
  config.seed = seed;
  config.budget = budget;
  config.fractions = f.fractions;
  config.bursty_fraction = f.bursty_fraction;
  config.prompt_tokens = f.prompt_tokens;
  config.output_tokens = f.output_tokens;
  if (!f.slo.empty()) {
    Result<analyze::Slo> slo = analyze::ParseSlo(f.slo);
    if (!slo.ok()) return usage("--slo: " + slo.error().message);
    config.slo = slo.value();
  }
  if (Status valid = run::ValidateValidateConfig(config); !valid.ok()) return usage(valid.error().message);
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) return usage("--out: cannot create " + config.out_dir.string() + ": " + ec.message());

  const StopSignals stop;
  Result<run::ValidationOutcome> outcome = run::ValidatePreset(config, stop.flag(), log);
  if (!outcome.ok()) {
    fmt::print(stderr, "bakeoff calibrate --validate: {}\n", outcome.error().message);
    return outcome.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
  }
  fmt::print("measured capacity: {:.2f} requests/s ({} streams)\n{}", outcome->capacity_per_s,
             outcome->capacity_concurrency, run::FormatValidation(outcome.value()));
  fmt::print("validation: {}\n", (config.out_dir / "validation.json").string());
  return outcome->interrupted ? stop.ExitCode() : kExitOk;
}

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
  if (f.validate.empty() && (f.max_concurrency < 4 || f.max_concurrency > 32)) {
    return usage("--max-concurrency: between 4 and 32");
  }
  // Checked before the experiment, so a wrong folder does not cost the run.
  const std::filesystem::path out_dir = std::filesystem::absolute(config.out).parent_path();
  if (std::error_code ec; f.validate.empty() && !std::filesystem::is_directory(out_dir, ec)) {
    return usage("--out: the folder " + out_dir.string() + " does not exist");
  }
  config.max_concurrency = f.max_concurrency;
  if (f.max_burst < 8 || f.max_burst > 1024) return usage("--max-burst: between 8 and 1024");
  config.max_burst = f.max_burst;
  config.costs = config.limits = false;
  for (const std::string& e : f.experiments) {
    if (e == "costs") config.costs = true;
    else if (e == "limits") config.limits = true;
    else return usage("--experiments: \"" + e + "\" is not one of costs, limits");
  }
  if (!f.validate.empty()) {
    run::LoadTarget server;
    server.url = f.url;
    Result<const target::EngineAdapter*> adapter =
        ResolveEngine(f.engine, config.target.endpoint, config.target.client, log);
    if (!adapter.ok()) return usage(adapter.error().message);
    server.adapter = adapter.value();
    dialect::GenerationRequest request;
    request.model = f.model;
    request.ignore_eos = true;
    return RunValidateCommand(f, std::move(server), std::move(request), config.seed, config.budget);
  }
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
    log("answers may end early (" + intent.forced_length_not_sent +
        "): the decode fit counts the gaps it gets, and a limit read off an answer that ended early is not determined");
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
                   : fmt::format("  coefficients [{:.4g}]  R² {:.3f}  RMS residual {:.3g} ms ({:.1f}%){}",
                                 fmt::join(fit.coefficients, ", "), fit.r_squared, fit.rms_residual_ms,
                                 100 * fit.rms_relative_residual,
                                 fit.held_at_zero.empty()
                                     ? ""
                                     : fmt::format("  (held at 0: {})", fmt::join(fit.held_at_zero, ", "))));
  }
  for (const run::LimitFinding& found : outcome->limits) {
    fmt::print("{:<15} {}\n", found.setting, found.finding);
  }
  const emulate::CostModel& cost = outcome->preset.config.cost;
  fmt::print("cost: base_ms {:.4g}, multi_token_ms {:.4g}, prefill_ms_per_token {:.4g}, prefill_ms_per_1m_pairs {:.4g}{}, "
             "decode_ms_per_seq {:.4g}, kv_ms_per_1k_tokens {:.4g}\n",
             cost.base_ms, cost.multi_token_ms, cost.prefill_ms_per_token, cost.prefill_ms_per_1m_pairs,
             cost.whole_batch_attention ? " (whole-batch attention)" : "", cost.decode_ms_per_seq, cost.kv_ms_per_1k_tokens);
  if (outcome->slots > 0) {
    fmt::print("idle slots: {} probed, slots_keep_kv {}\n", outcome->slots, outcome->preset.config.slots_keep_kv);
  }
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
      "streams and context), find its limits (max_num_seqs, prefix caching, chunked prefill, KV capacity) and write "
      "them as an engine preset, with each fit's quality and points.\n"
      "Exit: 0 written, 2 a wrong flag, 1 nothing served or not written.");
  c->add_option("--url", flags->url, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  c->add_option("--out", flags->out, "The preset file to write (YAML); with --validate, the folder for the runs and "
                                     "validation.json")
      ->required();
  c->add_option("--validate", flags->validate,
                "Check this preset instead: held-out loads (Poisson at --fractions of the measured capacity, one "
                "bursty load) on the endpoint and on the simulator, and the prediction error per metric");
  c->add_option("--fractions", flags->fractions, "--validate: shares of the measured capacity, one Poisson load each")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--bursty-fraction", flags->bursty_fraction,
                "--validate: share of capacity of the bursty load (Gamma arrivals, CV 2); 0 = none")
      ->capture_default_str();
  c->add_option("--slo", flags->slo, "--validate: compare goodput under this SLO too (e.g. ttft_p99=1s)");
  c->add_option("--prompt-tokens", flags->prompt_tokens, "--validate: prompt length of the loads")->capture_default_str();
  c->add_option("--output-tokens", flags->output_tokens, "--validate: answer length of the loads")->capture_default_str();
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
  c->add_option("--max-burst", flags->max_burst,
                "The max_num_seqs experiment's largest burst of requests sent at once (8 to 1024)")
      ->capture_default_str();
  c->add_option("--experiments", flags->experiments,
                "Which to run: costs (prefill and decode step costs), limits (max_num_seqs, prefix caching, chunked "
                "prefill, KV capacity); the rest stays the base preset's")
      ->delimiter(',')
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunCalibrateCommand(*flags); });
}

}  // namespace bakeoff::cli
