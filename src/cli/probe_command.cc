// cli/probe_command.cc
//
// Owns: the `bakeoff probe` flags (attach with --url, or --launch "CMD" with --port), their
// validation (one line naming the flag, exit 2), the engine adapter whose health and metrics
// paths it uses (--engine NAME, else detected in attach mode; --health/--metrics win over both),
// the stop signals, probes.json and the table.
// Exit codes: 0 nothing disqualifying found; 3 a probe found something disqualifying; 1 the
// results could not be written, or no probe could run because the candidate could not be brought
// up; 2 usage; 128 + signal when interrupted (what ran is written).
#include <memory>
#include <regex>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/load_flags.h"
#include "cli/stop_signals.h"
#include "core/file.h"
#include "qualify/probe.h"
#include "qualify/probe_report.h"
#include "qualify/quality_set.h"
#include "target/adapters.h"
#include "target/candidate.h"
#include "target/discovery.h"

namespace bakeoff::cli {
namespace {


struct ProbeFlags {
  std::string url;
  std::string launch;
  std::uint16_t port = 0;
  std::string health;   // "" = the engine adapter's readiness route
  std::string metrics;  // "" = the engine adapter's metrics path
  std::string engine = "auto";
  std::string grace = "30s";
  std::string ready_timeout = "10min";
  std::string model;
  std::string api = "chat";
  std::vector<std::string> only;
  std::vector<std::string> skip;
  std::vector<std::string> phases;  // NAME=REGEX
  std::string out = "bakeoff-probe";
  std::uint32_t saturation = 32;
  std::string overload_duration = "10s";
  std::string answer_within = "auto";
  std::uint32_t output_tokens = 256;
  std::string quality_set;
  double quality_min_score = 0.8;
  std::string api_key_env = "OPENAI_API_KEY";
};

Result<std::vector<std::string>> SplitNames(const std::vector<std::string>& values) {
  std::vector<std::string> names;
  for (const std::string& value : values) {
    std::size_t start = 0;
    while (start <= value.size()) {
      const std::size_t comma = std::min(value.find(',', start), value.size());
      if (comma > start) names.push_back(value.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return names;
}

struct ProbeSetup {
  target::CandidateSpec candidate;
  qualify::ProbeRunOptions run;
  qualify::ProbedTarget described;
};

Result<ProbeSetup> BuildSetup(const ProbeFlags& f) {
  auto usage = [](std::string message) {
    return MakeError(ErrorCode::kInvalidInput, std::move(message));
  };
  ProbeSetup setup;
  target::CandidateSpec& spec = setup.candidate;
  if (f.url.empty() && f.launch.empty())
    return usage("give --url (attach to a running server) or --launch \"CMD\" --port N");
  if (!f.launch.empty()) {
    if (f.port == 0 && f.url.empty())
      return usage("--launch needs --port (the port the command listens on)");
    Result<std::vector<std::string>> argv = target::SplitCommandLine(f.launch);
    if (!argv.ok()) return usage("--launch: " + argv.error().message);
    target::LaunchSpec launch;
    launch.argv = std::move(argv.value());
    launch.log_dir = std::filesystem::path(f.out) / "logs";
    spec.launch = std::move(launch);
    setup.described = {"", "launch", f.launch};
  } else {
    setup.described = {"", "attach", ""};
  }
  spec.url = !f.url.empty() ? f.url : fmt::format("http://127.0.0.1:{}", f.port);
  Result<net::Endpoint> endpoint = net::ParseEndpoint(spec.url);
  if (!endpoint.ok()) return usage("--url: " + endpoint.error().message);
  if (f.port != 0 && endpoint->port != std::to_string(f.port)) {
    return usage(fmt::format("--port {} and --url {} disagree", f.port, f.url));
  }
  if (std::optional<std::string> note = target::StripApiVersionSuffix(endpoint.value())) {
    fmt::print(stderr, "bakeoff probe: --url: {}\n", *note);
  }
  spec.url = endpoint->ToString();
  setup.described.url = spec.url;
  if (!f.health.empty() && !f.health.starts_with('/'))
    return usage("--health: a path starting with /");
  if (!f.metrics.empty() && !f.metrics.starts_with('/'))
    return usage("--metrics: a path starting with /");
  if (f.engine != "auto" && target::FindAdapter(f.engine) == nullptr) {
    return usage(fmt::format("--engine: unknown engine '{}' (one of: {}, auto)", f.engine,
                             target::AdapterNames()));
  }
  spec.health_path = f.health;
  spec.metrics_path = f.metrics;
  spec.model = f.model;
  const std::optional<dialect::Api> api = dialect::ParseApiName(f.api);
  if (!api || !(dialect::IsOpenAiApi(*api) || !dialect::ApiGenerates(*api))) {
    return usage("--api: chat, completions, embeddings or rerank");
  }
  spec.api = *api;
  if (const char* key = std::getenv(f.api_key_env.c_str()); key != nullptr)
    spec.client.bearer_token = key;
  Result<Nanos> grace = ParseDuration("--grace", f.grace);
  if (!grace.ok()) return usage(grace.error().message);
  spec.grace = grace.value();
  Result<Nanos> ready = ParseDuration("--ready-timeout", f.ready_timeout);
  if (!ready.ok()) return usage(ready.error().message);
  if (ready.value() <= Nanos(0)) return usage("--ready-timeout: must be positive");
  spec.ready_timeout = ready.value();
  Result<Nanos> overload = ParseDuration("--overload-duration", f.overload_duration);
  if (!overload.ok()) return usage(overload.error().message);
  if (overload.value() <= Nanos(0) || overload.value() > std::chrono::minutes(10)) {
    return usage("--overload-duration: between 0 and 10 minutes");
  }

  qualify::ProbeRunOptions& run = setup.run;
  run.only = SplitNames(f.only).value();
  run.skip = SplitNames(f.skip).value();
  run.out_dir = f.out;
  run.probe.cold_start_budget = ready.value();
  run.probe.overload_duration = overload.value();
  if (f.saturation == 0 || f.saturation > 4096) return usage("--saturation: between 1 and 4096");
  run.probe.saturation_concurrency = f.saturation;
  if (f.output_tokens < 8 || f.output_tokens > 100000)
    return usage("--output-tokens: between 8 and 100000");
  run.probe.long_output_tokens = f.output_tokens;
  run.probe.quality_set = f.quality_set;
  if (!f.quality_set.empty()) {
    Result<std::vector<qualify::QualityItem>> set = qualify::LoadQualitySet(f.quality_set);
    if (!set.ok()) return usage("--quality-set: " + set.error().message);
  }
  if (!(f.quality_min_score >= 0 && f.quality_min_score <= 1))
    return usage("--quality-min-score: between 0 and 1");
  run.probe.quality_min_score = f.quality_min_score;
  for (const std::string& phase : f.phases) {
    const std::size_t equals = phase.find('=');
    if (equals == std::string::npos || equals == 0)
      return usage("--phase: NAME=REGEX, got '" + phase + "'");
    const std::string pattern = phase.substr(equals + 1);
    try {
      std::regex check(pattern);
    } catch (const std::regex_error& e) {
      return usage(fmt::format("--phase {}: not a regular expression: {}", phase.substr(0, equals),
                               e.what()));
    }
    run.probe.phase_patterns.emplace_back(phase.substr(0, equals), pattern);
  }
  if (f.answer_within != "auto") {
    Result<Nanos> answer_within = ParseDuration("--answer-within", f.answer_within);
    if (!answer_within.ok()) return usage(answer_within.error().message);
    if (answer_within.value() <= Nanos(0)) return usage("--answer-within: must be positive");
    run.probe.answer_within = answer_within.value();
  }
  Status selection = qualify::ValidateProbeSelection(run);
  if (!selection.ok()) return usage(selection.error().message);
  return setup;
}

// Fills the health and metrics paths the flags left to the engine adapter: the named one, else
// (attach mode) the detected one; a launched candidate is not running yet, so "auto" there keeps
// the generic defaults (/health, /metrics).
// A named adapter's cold-start log patterns stand in for --phase when none was given.
void ApplyEngine(const ProbeFlags& flags, target::CandidateSpec& spec,
                 qualify::ProbeRunOptions& run) {
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff probe: {}\n", line); };
  const target::EngineAdapter* adapter = &target::GenericOpenAiAdapter();
  if (flags.engine != "auto") {
    adapter = target::FindAdapter(flags.engine);
  } else if (!spec.launch) {
    Result<net::Endpoint> endpoint = net::ParseEndpoint(spec.url);
    if (endpoint.ok()) adapter = ResolveEngine("auto", endpoint.value(), spec.client, log).value();
  }
  if (spec.health_path.empty()) spec.health_path = adapter->ReadinessRoute().path;
  if (spec.metrics_path.empty()) {
    spec.metrics_path = adapter->metrics_path.empty() ? "/metrics" : adapter->metrics_path;
  }
  log(fmt::format("engine adapter {}: health {}, metrics {}", adapter->name, spec.health_path,
                  spec.metrics_path));
  if (run.probe.phase_patterns.empty() && !adapter->cold_start.empty()) {
    std::vector<std::string> names;
    for (const target::LogPhase& phase : adapter->cold_start) {
      run.probe.phase_patterns.emplace_back(phase.name, phase.pattern);
      names.emplace_back(phase.name);
    }
    log(fmt::format("cold-start phases from the {} adapter: {} (--phase replaces them)",
                    adapter->name, fmt::join(names, ", ")));
  }
}

int RunProbeCommand(const ProbeFlags& flags) {
  Result<ProbeSetup> setup = BuildSetup(flags);
  if (!setup.ok()) {
    fmt::print(stderr, "bakeoff probe: {}\n", setup.error().message);
    return kExitUsage;
  }
  ApplyEngine(flags, setup->candidate, setup->run);
  Result<target::Candidate> candidate = target::Candidate::Create(setup->candidate);
  if (!candidate.ok()) {
    fmt::print(stderr, "bakeoff probe: {}\n", candidate.error().message);
    return kExitUsage;
  }
  std::error_code ec;
  std::filesystem::create_directories(setup->run.out_dir, ec);
  if (ec) {
    fmt::print(stderr, "bakeoff probe: --out {}: {}\n", setup->run.out_dir.string(), ec.message());
    return kExitFailure;
  }
  StopSignals stop;
  stop.OnImmediateExit(target::KillEveryLaunchedGroup);
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff probe: {}\n", line); };
  const qualify::ProbeRun run = qualify::RunProbes(candidate.value(), setup->run, stop.flag(), log);
  const std::filesystem::path json_path = setup->run.out_dir / "probes.json";
  Status written = WriteFileAtomically(json_path, qualify::ProbesJson(run, setup->described));
  fmt::print("{}", qualify::FormatProbeTable(run, setup->described));
  if (!written.ok()) {
    fmt::print(stderr, "bakeoff probe: {}\n", written.error().message);
    return kExitFailure;
  }
  fmt::print("probes: {}\n", json_path.string());
  if (run.interrupted) return stop.ExitCode();
  if (run.NothingRan() && !run.unavailable.empty()) {
    fmt::print(stderr, "bakeoff probe: no probe could run: {}\n", run.unavailable);
    return kExitFailure;
  }
  return run.Disqualified() ? kExitDisqualified : kExitOk;
}

}  // namespace

void AddProbeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ProbeFlags>();
  std::string names;
  for (const qualify::ProbeInfo& probe : qualify::AllProbes()) {
    names += fmt::format("\n  {:<14} {}", probe.name, probe.summary);
  }
  CLI::App* c = app.add_subcommand(
      "probe",
      "Qualify a candidate before any benchmark: find what disqualifies it, with evidence. "
      "Probes:" +
          names +
          "\nExit: 0 nothing disqualifying, 3 disqualified, 1 results not written, 2 usage.");
  c->add_option("--url", flags->url, "Attach to a server someone else started (base URL)");
  c->add_option("--launch", flags->launch,
                "Start the candidate with this command line (quoted), on --port");
  c->add_option("--port", flags->port, "Port the launched command listens on (127.0.0.1)");
  c->add_option("--engine", flags->engine,
                "Engine adapter (bakeoff detect --list); auto: detected in attach mode, "
                "generic-openai in launch mode")
      ->capture_default_str();
  c->add_option("--health", flags->health,
                "Health/readiness path (default: the engine adapter's; /health when generic)");
  c->add_option("--metrics", flags->metrics,
                "Prometheus metrics path (default: the engine adapter's; /metrics when generic)");
  c->add_option("--grace", flags->grace, "SIGTERM to SIGKILL grace period")->capture_default_str();
  c->add_option("--ready-timeout", flags->ready_timeout,
                "Longest start-up (also the cold-start budget)")
      ->capture_default_str();
  c->add_option("--model", flags->model, "Model to request (default: the first /v1/models lists)");
  c->add_option("--api", flags->api,
                "chat, completions, embeddings or rerank (a pooling route: the probes that watch generated text "
                "do not run)")
      ->capture_default_str();
  c->add_option("--only", flags->only, "Run only these probes (comma-separated)");
  c->add_option("--skip", flags->skip, "Skip these probes (comma-separated)");
  c->add_option(
      "--phase", flags->phases,
      "Cold-start phase NAME=REGEX: the first log line matching ends it (repeatable, in order)");
  c->add_option("--saturation", flags->saturation,
                "Streams that saturate the candidate (overload drives 4x)")
      ->capture_default_str();
  c->add_option("--answer-within", flags->answer_within,
                "Longest wait for one probe request's answer before it counts as a hang; auto: "
                "4x one long answer at idle, within [10s, 120s]")
      ->capture_default_str();
  c->add_option("--overload-duration", flags->overload_duration, "How long the overload lasts")
      ->capture_default_str();
  c->add_option("--output-tokens", flags->output_tokens,
                "Output tokens of the long streams probes act on")
      ->capture_default_str();
  c->add_option("--quality-set", flags->quality_set,
                "JSONL prompt set for the quality probe (default: built-in)");
  c->add_option("--quality-min-score", flags->quality_min_score,
                "Quality score (fraction of the set passed) below which the candidate is out")
      ->capture_default_str();
  c->add_option("--api-key-env", flags->api_key_env, "Environment variable holding a bearer token")
      ->capture_default_str();
  c->add_option("--out", flags->out, "Output folder: probes.json, evidence/, logs/")
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunProbeCommand(*flags); });
}

}  // namespace bakeoff::cli
