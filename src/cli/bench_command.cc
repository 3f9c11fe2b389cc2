// cli/bench_command.cc
//
// Owns: the `bakeoff bench` flags, their validation (one-line errors naming the flag, exit 2),
// the SIGINT watcher, the live progress line (terminals only) and the final table. The run
// itself is analyze::RunBench.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <memory>

#include "analyze/bench.h"
#include "workload/importers.h"
#include "cli/cli.h"
#include "cli/table.h"

namespace bakeoff::cli {
namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void OnInterrupt(int) {
  // The first SIGINT asks for a clean stop; a second one falls back to the default (kill).
  g_stop_requested.store(true);
  std::signal(SIGINT, SIG_DFL);
}

struct BenchFlags {
  std::string url;
  std::string model;
  std::string api = "chat";
  bool no_stream = false;
  std::uint32_t prompt_tokens = 256;
  std::uint32_t output_tokens = 128;
  bool ignore_eos = false;
  std::vector<double> rates;
  std::vector<std::uint32_t> concurrencies;
  std::string arrival = "poisson";
  double burstiness = 1;
  std::string duration = "";
  std::uint64_t requests = 0;
  std::string warmup = "0s";
  std::uint64_t warmup_requests = 0;
  std::uint32_t workers = 1;
  std::uint64_t seed = 1;
  std::string out;
  std::string slo;
  std::string api_key_env = "OPENAI_API_KEY";
  std::string connect_timeout = "10s";
  std::string first_byte_timeout = "120s";
  std::string idle_timeout = "60s";
  std::string request_timeout = "30min";
  std::string drain_timeout = "60s";
  bool insecure = false;
  std::string ca_file;
  bool no_calibrate = false;
  std::string trace;
  std::string trace_format = "auto";
  double time_scale = 1;
  bool skip_invalid = false;
};

// Parses "250ms", "30s", "5min", "1h" or a bare number of seconds.
Result<Nanos> ParseDuration(const std::string& flag, std::string text) {
  double scale = 1;
  for (const auto& [suffix, factor] :
       std::initializer_list<std::pair<const char*, double>>{
           {"ms", 1e-3}, {"min", 60}, {"h", 3600}, {"s", 1}}) {
    const std::string_view s = suffix;
    if (text.size() > s.size() && text.ends_with(s)) {
      text.resize(text.size() - s.size());
      scale = factor;
      break;
    }
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(value >= 0) || value > 1e9) {
    return MakeError(ErrorCode::kInvalidInput,
                     flag + ": '" + text + "' is not a duration (e.g. 250ms, 30s, 5min)");
  }
  return FromSeconds(value * scale);
}

Result<analyze::BenchConfig> BuildConfig(const BenchFlags& f) {
  analyze::BenchConfig config;
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  Result<net::Endpoint> endpoint = net::ParseEndpoint(f.url);
  if (!endpoint.ok()) return usage("--url: " + endpoint.error().message);
  config.url = f.url;
  load::TargetSpec& target = config.run.target;
  target.endpoint = endpoint.value();
  if (f.api == "chat") target.request.api = dialect::Api::kChat;
  else if (f.api == "completions") target.request.api = dialect::Api::kCompletions;
  else return usage("--api: '" + f.api + "' (expected chat or completions)");
  target.request.model = f.model;
  target.request.stream = !f.no_stream;
  target.request.ignore_eos = f.ignore_eos;
  if (f.ignore_eos) target.request.min_tokens = f.output_tokens;
  if (f.prompt_tokens == 0) return usage("--prompt-tokens: must be at least 1");
  if (f.output_tokens == 0) return usage("--output-tokens: must be at least 1");
  config.run.shape = {f.prompt_tokens, f.output_tokens};
  if (const char* key = std::getenv(f.api_key_env.c_str()); key != nullptr) {
    target.client.bearer_token = key;
  }
  target.client.verify_tls = !f.insecure;
  target.client.ca_file = f.ca_file;
  struct DurationFlag { const char* name; const std::string* text; Nanos* into; };
  Nanos warmup{0};
  for (const DurationFlag& d : {DurationFlag{"--connect-timeout", &f.connect_timeout, &target.client.deadlines.connect},
                                DurationFlag{"--first-byte-timeout", &f.first_byte_timeout, &target.client.deadlines.first_byte},
                                DurationFlag{"--idle-timeout", &f.idle_timeout, &target.client.deadlines.idle},
                                DurationFlag{"--request-timeout", &f.request_timeout, &target.client.deadlines.total},
                                DurationFlag{"--drain-timeout", &f.drain_timeout, &config.run.drain_timeout},
                                DurationFlag{"--warmup", &f.warmup, &warmup}}) {
    Result<Nanos> parsed = ParseDuration(d.name, *d.text);
    if (!parsed.ok()) return usage(parsed.error().message);
    *d.into = parsed.value();
  }
  std::optional<Nanos> duration;
  if (!f.duration.empty()) {
    Result<Nanos> parsed = ParseDuration("--duration", f.duration);
    if (!parsed.ok()) return usage(parsed.error().message);
    if (parsed.value() <= Nanos(0)) return usage("--duration: must be positive");
    duration = parsed.value();
  }
  if (!duration && f.requests == 0 && f.trace.empty()) {
    return usage("--duration or --requests: give at least one limit");
  }
  if (!f.rates.empty() + !f.concurrencies.empty() + !f.trace.empty() > 1) {
    return usage("--rate, --concurrency and --trace: choose one (open loop, closed loop or replay)");
  }
  if (!(f.time_scale > 0) || f.time_scale > 1e6) return usage("--time-scale: must be positive");
  Result<load::ArrivalProcess> arrival = load::ParseArrivalProcess(f.arrival);
  if (!arrival.ok()) return usage("--arrival: " + arrival.error().message);
  if (!(f.burstiness > 0)) return usage("--burstiness: must be positive");
  if (f.workers == 0 || f.workers > 256) return usage("--workers: must be between 1 and 256");
  load::StepLimits limits;
  limits.duration = duration;
  if (f.requests > 0) limits.requests = f.requests;
  limits.warmup = warmup;
  limits.warmup_requests = f.warmup_requests;
  for (double rate : f.rates) {
    if (!(rate > 0) || rate > 1e6) return usage(fmt::format("--rate: {} is not in (0, 1e6]", rate));
    load::StepSpec step;
    step.mode = load::LoopMode::kOpen;
    step.open = {rate, arrival.value(), f.burstiness};
    step.limits = limits;
    step.label = fmt::format("rate={}/s", rate);
    config.run.steps.push_back(step);
  }
  if (!f.trace.empty()) {
    workload::ImportOptions import;
    Result<workload::TraceFormat> format = workload::ParseTraceFormat(f.trace_format);
    if (!format.ok()) return usage("--trace-format: " + format.error().message);
    import.format = format.value();
    import.skip_invalid = f.skip_invalid;
    workload::ImportReport report;
    Result<workload::Trace> trace = workload::LoadTrace(f.trace, import, &report);
    if (!trace.ok()) return usage("--trace: " + trace.error().message);
    if (!report.SkippedSummary().empty()) {
      fmt::print(stderr, "bakeoff bench: --trace: {}\n", report.SkippedSummary());
    }
    if (!trace->arrivals_known) {
      fmt::print(stderr, "bakeoff bench: --trace: the source has no arrival times; every request "
                         "arrives at once (use --rate with its lengths via bakeoff synth)\n");
    }
    config.trace = std::make_shared<workload::Trace>(std::move(trace.value()));
    load::StepSpec step;
    step.mode = load::LoopMode::kTrace;
    step.trace = config.trace.get();
    step.time_scale = f.time_scale;
    step.limits = limits;
    step.label = fmt::format("trace x{}", f.time_scale);
    config.run.steps.push_back(step);
  }
  std::vector<std::uint32_t> concurrencies = f.concurrencies;
  if (f.rates.empty() && concurrencies.empty() && f.trace.empty()) concurrencies.push_back(1);
  for (std::uint32_t c : concurrencies) {
    if (c == 0 || c > 100000) return usage(fmt::format("--concurrency: {} is not in [1, 100000]", c));
    load::StepSpec step;
    step.mode = load::LoopMode::kClosed;
    step.concurrency = c;
    step.limits = limits;
    step.label = fmt::format("concurrency={}", c);
    config.run.steps.push_back(step);
  }
  config.run.workers = f.workers;
  config.run.seed = f.seed;
  if (!f.slo.empty()) {
    Result<analyze::Slo> slo = analyze::ParseSlo(f.slo);
    if (!slo.ok()) return usage(slo.error().message);
    config.slo = slo.value();
  }
  config.out_dir = f.out.empty() ? std::filesystem::path("out") / fmt::format("bench-{}", ::time(nullptr))
                                 : std::filesystem::path(f.out);
  config.calibrate_prompt = !f.no_calibrate;
  config.flags = {{"url", f.url}, {"model", f.model}, {"api", f.api}, {"stream", !f.no_stream},
                  {"prompt_tokens", f.prompt_tokens}, {"output_tokens", f.output_tokens},
                  {"ignore_eos", f.ignore_eos}, {"rates", f.rates}, {"concurrencies", concurrencies},
                  {"arrival", f.arrival}, {"burstiness", f.burstiness}, {"duration", f.duration},
                  {"requests", f.requests}, {"warmup", f.warmup}, {"warmup_requests", f.warmup_requests},
                  {"workers", f.workers}, {"seed", f.seed}, {"slo", f.slo},
                  {"connect_timeout", f.connect_timeout}, {"first_byte_timeout", f.first_byte_timeout},
                  {"idle_timeout", f.idle_timeout}, {"request_timeout", f.request_timeout},
                  {"drain_timeout", f.drain_timeout}, {"insecure", f.insecure},
                  {"api_key_env", f.api_key_env}, {"calibrate_prompt", !f.no_calibrate},
                  {"trace", f.trace}, {"trace_format", f.trace_format}, {"time_scale", f.time_scale},
                  {"skip_invalid", f.skip_invalid}};
  return config;
}

int RunBenchCommand(const BenchFlags& flags) {
  Result<analyze::BenchConfig> config = BuildConfig(flags);
  if (!config.ok()) {
    fmt::print(stderr, "bakeoff bench: {}\n", config.error().message);
    return kExitUsage;
  }
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  std::vector<std::string> labels;
  for (const auto& step : config->run.steps) labels.push_back(step.label);
  g_stop_requested.store(false);
  std::signal(SIGINT, OnInterrupt);
  auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff bench: {}\n", line); };
  auto on_tick = [&](std::size_t step, const load::Progress& p) {
    if (!terminal) return;
    fmt::print(stderr, "\r\033[K[{}/{}] {}  sent {}  done {}  failed {}  tokens {}", step + 1,
               labels.size(), labels[step], p.sent.load(), p.finished.load(), p.failed.load(),
               p.tokens.load());
  };
  Result<analyze::BenchOutcome> outcome =
      analyze::RunBench(std::move(config.value()), g_stop_requested, log, on_tick);
  std::signal(SIGINT, SIG_DFL);
  if (terminal) fmt::print(stderr, "\r\033[K");
  if (!outcome.ok()) {
    fmt::print(stderr, "bakeoff bench: {}\n", outcome.error().message);
    return kExitFailure;
  }
  for (const std::string& note : outcome->notes) log(note);
  fmt::print("{}", FormatBenchTable(outcome.value()));
  fmt::print("records: {}\nsummary: {}\n", outcome->records_path.string(),
             outcome->summary_path.string());
  if (outcome->interrupted) return kExitInterrupted;
  std::uint64_t ok = 0;
  for (const auto& step : outcome->steps) {
    auto it = step.outcomes.find("ok");
    ok += it == step.outcomes.end() ? 0 : it->second;
  }
  return ok > 0 ? kExitOk : kExitFailure;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* c = app.add_subcommand("bench", "Measure an OpenAI-compatible endpoint under load");
  c->add_option("--url", flags->url, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  c->add_option("--model", flags->model, "Model name (default: the first listed by /v1/models)");
  c->add_option("--api", flags->api, "chat or completions")->capture_default_str();
  c->add_flag("--no-stream", flags->no_stream, "Ask for whole responses instead of SSE streams");
  c->add_option("--prompt-tokens", flags->prompt_tokens, "Prompt length in tokens")->capture_default_str();
  c->add_option("--output-tokens", flags->output_tokens, "max_tokens per request")->capture_default_str();
  c->add_flag("--ignore-eos", flags->ignore_eos, "Send ignore_eos and min_tokens so every answer has --output-tokens tokens");
  c->add_option("--rate", flags->rates, "Open loop: requests per second; a list sweeps")->delimiter(',');
  c->add_option("--concurrency", flags->concurrencies, "Closed loop: requests in flight; a list sweeps")->delimiter(',');
  c->add_option("--arrival", flags->arrival, "Open-loop arrivals: constant, poisson or gamma")->capture_default_str();
  c->add_option("--burstiness", flags->burstiness, "Gamma shape: 1 = Poisson, below 1 = burstier")->capture_default_str();
  c->add_option("--duration", flags->duration, "Measurement window per step, e.g. 30s");
  c->add_option("--requests", flags->requests, "Measured requests per step");
  c->add_option("--warmup", flags->warmup, "Warm-up before each step's measurement, by intended send time")->capture_default_str();
  c->add_option("--warmup-requests", flags->warmup_requests, "Warm-up requests per step");
  c->add_option("--workers", flags->workers, "Client threads, one event loop each")->capture_default_str();
  c->add_option("--seed", flags->seed, "Seed for arrivals and prompt text")->capture_default_str();
  c->add_option("--out", flags->out, "Output folder (default out/bench-<time>)");
  c->add_option("--slo", flags->slo, "SLO terms, e.g. ttft_p99=500ms,tpot_p99=50ms,e2e_p99=20s");
  c->add_option("--api-key-env", flags->api_key_env, "Environment variable holding a bearer token")->capture_default_str();
  c->add_option("--connect-timeout", flags->connect_timeout)->capture_default_str();
  c->add_option("--first-byte-timeout", flags->first_byte_timeout)->capture_default_str();
  c->add_option("--idle-timeout", flags->idle_timeout, "Longest silence within a response")->capture_default_str();
  c->add_option("--request-timeout", flags->request_timeout, "Longest whole request")->capture_default_str();
  c->add_option("--drain-timeout", flags->drain_timeout, "Wait for in-flight requests after the last send")->capture_default_str();
  c->add_flag("--insecure", flags->insecure, "Do not verify TLS certificates");
  c->add_option("--ca-file", flags->ca_file, "CA bundle for TLS verification");
  c->add_flag("--no-calibrate", flags->no_calibrate, "Do not check prompt lengths with the server's /tokenize");
  c->add_option("--trace", flags->trace, "Replay a request trace: its arrivals, lengths, prefixes and sessions");
  c->add_option("--trace-format", flags->trace_format, "Trace format (see bakeoff fingerprint --help)")->capture_default_str();
  c->add_option("--time-scale", flags->time_scale, "Replay: multiply arrival and think times (0.1 = ten times faster)")->capture_default_str();
  c->add_flag("--skip-invalid", flags->skip_invalid, "Replay: skip malformed trace rows (counted and reported)");
  c->callback([flags, exit_code] { *exit_code = RunBenchCommand(*flags); });
}

}  // namespace bakeoff::cli
