// cli/bench_command.cc
//
// Owns: the `bakeoff bench` flags, their validation (one-line errors naming the flag, exit 2),
// the stop signals (cli/stop_signals.h), the live progress line (terminals only) and the final
// table; and, for --ignore-eos, the engine adapter's forced-length fields (--engine NAME, else
// detected: min_new_tokens on LMDeploy, no min_tokens on llama.cpp, neither on TGI and Ollama,
// which cannot force a length: said once, and the run measures the lengths it gets).
// The run itself is run::RunBench.
#include <algorithm>

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "run/bench.h"
#include "cli/cli.h"
#include "cli/load_flags.h"
#include "cli/stop_signals.h"
#include "cli/table.h"
#include "target/adapters.h"
#include "target/discovery.h"
#include "target/metrics_timeline.h"

namespace bakeoff::cli {
namespace {

struct BenchFlags {
  LoadFlags load;
  std::string url;
  std::uint32_t workers = 1;
  std::string api_key_env = "OPENAI_API_KEY";
  std::string connect_timeout = "10s";
  std::string first_byte_timeout = "120s";
  std::string idle_timeout = "60s";
  std::string request_timeout = "30min";
  std::string drain_timeout = "60s";
  std::string give_up_after = "10s";
  bool insecure = false;
  std::string ca_file;
  bool no_calibrate = false;
  std::string prompt_tolerance = "5%";
  std::string engine = "auto";
  std::string metrics_interval = "1s";
  std::string metrics_path;  // empty: the adapter's
  long long engine_pid = 0;  // 0: not known
  bool no_gpu_telemetry = false;
  double price_per_hour = 0;
  std::string shard;     // "I/N": this process is shard I (from 0) of N running one load
  std::string start_at;  // an instant every shard starts at: RFC 3339 UTC or Unix seconds
};

// --shard and --start-at onto the run: which share of the load this process sends, and when the
// load starts (mapped from the wall clock onto this process's monotonic clock).
Status ApplyShard(const BenchFlags& f, load::RunSpec& run) {
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  if (!f.shard.empty()) {
    const std::optional<load::ShardId> shard = load::ParseShard(f.shard);
    if (!shard) {
      return usage(fmt::format("--shard: '{}' is not I/N with 0 <= I < N <= {} (shard 0/4 is the first of four)", f.shard,
                               load::kMaxShards));
    }
    const auto [index, count] = *shard;
    if (count > 1 && run.steps.size() != 1) {
      return usage(fmt::format("--shard: {} steps; a sharded load is one step (the shards of a sweep's later steps would "
                               "start apart): run one load per step", run.steps.size()));
    }
    if (count > 1 && f.start_at.empty()) return usage("--shard: needs --start-at, the instant every shard starts the load at");
    run.shard_index = index;
    run.shard_count = count;
  }
  if (!f.start_at.empty()) {
    const std::optional<std::int64_t> at_ns = ParseInstant(f.start_at);
    if (!at_ns) return usage(fmt::format("--start-at: '{}' is not 2026-12-01T22:00:00Z (UTC) or Unix seconds", f.start_at));
    const std::int64_t now_ns =
        std::chrono::duration_cast<Nanos>(RealClock().WallNow().time_since_epoch()).count();
    const double ahead_s = static_cast<double>(*at_ns - now_ns) / 1e9;
    if (ahead_s < 0) return usage(fmt::format("--start-at: {} passed {:.1f} s ago; every shard must start together", f.start_at, -ahead_s));
    if (ahead_s > 86400) return usage(fmt::format("--start-at: {} is more than a day away", f.start_at));
    run.start_at = RealClock().Now() + Nanos(*at_ns - now_ns);
    fmt::print(stderr, "bakeoff bench: the load starts at {} (in {:.1f} s){}\n", f.start_at, ahead_s,
               run.shard_count > 1 ? fmt::format(", as shard {} of {}", run.shard_index, run.shard_count) : "");
  }
  return Ok{};
}


Result<run::BenchConfig> BuildConfig(const BenchFlags& f) {
  run::BenchConfig config;
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  Result<net::Endpoint> endpoint = net::ParseEndpoint(f.url);
  if (!endpoint.ok()) return usage("--url: " + endpoint.error().message);
  if (std::optional<std::string> note = target::StripApiVersionSuffix(endpoint.value())) {
    fmt::print(stderr, "bakeoff bench: --url: {}\n", *note);
  }
  Result<LoadSetup> setup = BuildLoad(f.load, "bakeoff bench");
  if (!setup.ok()) return setup.error();
  config.url = f.url;
  load::TargetSpec& target = config.run.target;
  target.endpoint = endpoint.value();
  target.request = setup->request;
  ApplyVariantTo(setup.value(), target);
  config.run.shape = setup->shape;
  config.run.steps = setup->steps;
  config.trace = setup->trace;
  config.slo = setup->slo;
  config.out_dir = setup->out_dir;
  if (const char* key = std::getenv(f.api_key_env.c_str()); key != nullptr) {
    target.client.bearer_token = key;
  }
  target.client.verify_tls = !f.insecure;
  target.client.ca_file = f.ca_file;
  Status durations = ParsePositiveDurations(
      {DurationFlag{"--connect-timeout", &f.connect_timeout, &target.client.deadlines.connect},
       DurationFlag{"--first-byte-timeout", &f.first_byte_timeout, &target.client.deadlines.first_byte},
       DurationFlag{"--idle-timeout", &f.idle_timeout, &target.client.deadlines.idle},
       DurationFlag{"--request-timeout", &f.request_timeout, &target.client.deadlines.total},
       DurationFlag{"--drain-timeout", &f.drain_timeout, &config.run.drain_timeout},
       DurationFlag{"--give-up-after", &f.give_up_after, &config.run.give_up_after}});
  if (!durations.ok()) return durations.error();
  if (f.workers == 0 || f.workers > 256) return usage("--workers: must be between 1 and 256");
  config.run.workers = f.workers;
  config.run.seed = f.load.seed;
  if (Status shard = ApplyShard(f, config.run); !shard.ok()) return shard.error();
  config.calibrate_prompt = !f.no_calibrate;
  Result<double> tolerance = ParsePercent("--prompt-tolerance", f.prompt_tolerance);
  if (!tolerance.ok()) return usage(tolerance.error().message);
  config.prompt_tolerance = tolerance.value();
  if (f.engine != "auto" && target::FindAdapter(f.engine) == nullptr) {
    return usage(fmt::format("--engine: unknown engine '{}' (one of: {}, auto)", f.engine,
                             target::AdapterNames()));
  }
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff bench: {}\n", line); };
  // The engine's adapter: the named one, else (when --ignore-eos needs its fields) the detected
  // one. Without one, /metrics is scraped and read with any engine's metric names.
  const bool regex = target.constraint && target.constraint->kind == dialect::OutputConstraint::Kind::kRegex;
  const target::EngineAdapter* adapter =
      f.engine != "auto" || regex || (target.request.ignore_eos && dialect::ApiCanForceLength(target.request.api))
          ? ResolveEngine(f.engine, target.endpoint, target.client, log).value()
          : nullptr;
  const std::string engine_used = adapter != nullptr ? std::string(adapter->name) : f.engine;
  config.adapter = adapter;
  Result<Nanos> metrics_interval = ParseDuration("--metrics-interval", f.metrics_interval);
  if (!metrics_interval.ok()) return usage(metrics_interval.error().message);
  config.metrics_interval = metrics_interval.value();
  if (config.metrics_interval > Nanos(0) && config.metrics_interval < target::kMinScrapeInterval) {
    return usage("--metrics-interval: at least 100ms (or 0 to turn scraping off)");
  }
  config.metrics_path = !f.metrics_path.empty() ? f.metrics_path
                        : adapter != nullptr    ? std::string(adapter->metrics_path)
                                                : "/metrics";
  if (f.engine_pid < 0 || f.engine_pid > 4'194'304) return usage("--engine-pid: not a process id");
  if (f.engine_pid > 0) config.engine_pid = static_cast<pid_t>(f.engine_pid);
  config.gpu_telemetry = !f.no_gpu_telemetry;
  if (!(f.price_per_hour >= 0) || f.price_per_hour > 1e7) return usage("--price-per-hour: a price, 0 or more");
  config.price_per_hour = f.price_per_hour;
  if (config.metrics_interval > Nanos(0) && config.metrics_path.empty()) {
    log(fmt::format("{} has no Prometheus page: no engine metrics are scraped (--metrics-path names one)",
                    adapter->display_name));
  }
  if (adapter != nullptr && std::find(adapter->apis.begin(), adapter->apis.end(), target.request.api) == adapter->apis.end()) {
    log(fmt::format("--api {}: {} is not known to serve this route (its routes: bakeoff detect --list)",
                    dialect::ApiName(target.request.api), adapter->display_name));
  }
  if (regex && adapter != nullptr) {
    // Each engine takes a regex in its own field; one that documents none is not sent one silently.
    if (!adapter->request.regex) {
      return usage(fmt::format("--structured regex: {} documents no regex constraint (json_schema and choice go "
                               "everywhere; docs/engines/README.md)",
                               adapter->display_name));
    }
    target.constraint->regex_field = *adapter->request.regex;
  }
  config.intent = run::FitRequestToEngine(target.request, adapter);
  if (!config.intent.forced_length_not_sent.empty()) {
    log("--ignore-eos: " + config.intent.forced_length_not_sent +
        "; sending neither field, so answers may be shorter than --output-tokens");
  }
  config.flags = LoadFlagsJson(f.load, setup.value());
  config.flags.update({{"url", f.url}, {"workers", f.workers},
                       {"connect_timeout", f.connect_timeout}, {"first_byte_timeout", f.first_byte_timeout},
                       {"idle_timeout", f.idle_timeout}, {"request_timeout", f.request_timeout},
                       {"drain_timeout", f.drain_timeout}, {"give_up_after", f.give_up_after},
                       {"insecure", f.insecure},
                       {"api_key_env", f.api_key_env}, {"calibrate_prompt", !f.no_calibrate},
                       {"prompt_tolerance", f.prompt_tolerance}, {"engine", engine_used},
                       {"metrics_interval", f.metrics_interval}, {"metrics_path", config.metrics_path},
                       {"engine_pid", f.engine_pid}, {"gpu_telemetry", !f.no_gpu_telemetry},
                       {"price_per_hour", f.price_per_hour},
                       {"shard", fmt::format("{}/{}", config.run.shard_index, config.run.shard_count)},
                       {"start_at", f.start_at.empty() ? nlohmann::json() : nlohmann::json(f.start_at)}});
  return config;
}

int RunBenchCommand(const BenchFlags& flags) {
  Result<run::BenchConfig> config = BuildConfig(flags);
  if (!config.ok()) {
    fmt::print(stderr, "bakeoff bench: {}\n", config.error().message);
    return kExitUsage;
  }
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  std::vector<std::string> labels;
  for (const auto& step : config->run.steps) labels.push_back(step.label);
  const StopSignals stop;
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff bench: {}\n", line); };
  auto on_tick = [&](std::size_t step, const load::Progress& p) {
    if (!terminal) return;
    fmt::print(stderr, "\r\033[K[{}/{}] {}  sent {}  done {}  failed {}  tokens {}", step + 1,
               labels.size(), labels[step], p.sent.load(), p.finished.load(), p.failed.load(),
               p.tokens.load());
  };
  Result<run::BenchOutcome> outcome =
      run::RunBench(std::move(config.value()), stop.flag(), log, on_tick);
  if (terminal) fmt::print(stderr, "\r\033[K");
  if (!outcome.ok()) {
    fmt::print(stderr, "bakeoff bench: {}\n", outcome.error().message);
    return outcome.error().code == ErrorCode::kCancelled ? stop.ExitCode() : kExitFailure;
  }
  for (const std::string& note : outcome->notes) log(note);
  return ReportRun(outcome.value(), stop.ExitCode());
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* c = app.add_subcommand("bench", "Measure an OpenAI-compatible endpoint under load");
  c->add_option("--url", flags->url, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  AddLoadOptions(*c, flags->load);
  c->add_option("--workers", flags->workers, "Client threads, one event loop each")->capture_default_str();
  c->add_option("--shard", flags->shard,
                "I/N: send shard I (from 0) of N processes running this same load (same flags and seed, one step): "
                "open-loop sends with index I modulo N, 1/N of a closed loop (docs/kubernetes.md)");
  c->add_option("--start-at", flags->start_at,
                "Start the load at this instant (2026-12-01T22:00:00Z, UTC, or Unix seconds), the same in every shard");
  c->add_option("--api-key-env", flags->api_key_env, "Environment variable holding a bearer token")->capture_default_str();
  c->add_option("--connect-timeout", flags->connect_timeout)->capture_default_str();
  c->add_option("--first-byte-timeout", flags->first_byte_timeout)->capture_default_str();
  c->add_option("--idle-timeout", flags->idle_timeout, "Longest silence within a response")->capture_default_str();
  c->add_option("--request-timeout", flags->request_timeout, "Longest whole request")->capture_default_str();
  c->add_option("--drain-timeout", flags->drain_timeout, "Wait for in-flight requests after the last send")->capture_default_str();
  c->add_option("--give-up-after", flags->give_up_after,
                "Stop the run when no request has succeeded for this long")
      ->capture_default_str();
  c->add_flag("--insecure", flags->insecure, "Do not verify TLS certificates");
  c->add_option("--ca-file", flags->ca_file, "CA bundle for TLS verification");
  c->add_flag("--no-calibrate", flags->no_calibrate,
              "Do not measure how the server counts prompts (tokenize route, usage of probe requests)");
  c->add_option("--engine", flags->engine,
                "Engine adapter for engine-specific request fields and metric names (bakeoff detect --list); "
                "auto: detected when --ignore-eos needs it, else the metrics page is read with every engine's names")
      ->capture_default_str();
  c->add_option("--metrics-interval", flags->metrics_interval,
                "Scrape the engine's metrics page this often beside the load into metrics.jsonl (0: never)")
      ->capture_default_str();
  c->add_option("--metrics-path", flags->metrics_path, "The engine's Prometheus page (default: the adapter's)");
  c->add_option("--engine-pid", flags->engine_pid,
                "The engine's process: its process tree's CPU and memory go to telemetry.jsonl");
  c->add_flag("--no-gpu-telemetry", flags->no_gpu_telemetry, "Do not sample GPUs with nvidia-smi");
  c->add_option("--price-per-hour", flags->price_per_hour,
                "Price of the engine's hardware per hour: cost per million output tokens per step");
  c->add_option("--prompt-tolerance", flags->prompt_tolerance,
                "Refuse to run when calibrated prompts are off the planned length by more (percent)")
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunBenchCommand(*flags); });
}

}  // namespace bakeoff::cli
