// cli/detect_command.cc
//
// Owns: `bakeoff detect URL` (which engine serves the URL, its version, how sure, and why: the
// evidence lines; a warning when it falls back to generic-openai; --json for the same as JSON)
// and `bakeoff detect --list` (every adapter, its paths and whether it was verified live or
// against fixtures only). Also `--engine NAME` resolution shared by bench and probe
// (ResolveEngine): a named adapter, or detection when none is named.
// Exit codes: 0 answered (an unidentified engine too: the warning says so); 1 the URL could not
// be reached; 2 usage.
#include <cstdlib>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/load_flags.h"
#include "target/adapters.h"
#include "target/detection.h"
#include "target/discovery.h"

namespace bakeoff::cli {
namespace {

struct DetectFlags {
  std::string url;
  bool list = false;
  bool json = false;
  std::string timeout = "2s";
  std::string api_key_env = "OPENAI_API_KEY";
};

std::string ForcedLength(const target::EngineAdapter& adapter) {
  const target::RequestFields& r = adapter.request;
  if (r.ignore_eos.empty() && r.min_tokens.empty()) return "cannot force";
  std::string fields = std::string(r.ignore_eos);
  if (!r.min_tokens.empty()) fields += (fields.empty() ? "" : "+") + std::string(r.min_tokens);
  return r.forced_length ? fields : fields + " (as the backend)";
}

// "chat, completions, ollama-generate": what --api takes for this engine.
std::string Routes(const target::EngineAdapter& a) {
  std::string out;
  for (const dialect::Api api : a.apis) out += (out.empty() ? "" : ", ") + std::string(dialect::ApiName(api));
  return out;
}

std::string FormatList() {
  std::string out = fmt::format("{:<15} {:<26} {:<14} {:<17} {:<24} {}\n", "adapter", "engine",
                                "verified", "health", "metrics", "forced length");
  for (const target::EngineAdapter& a : target::AllAdapters()) {
    std::string metrics = a.metrics_path.empty() ? "-" : std::string(a.metrics_path);
    if (!a.metrics_port.empty()) metrics = ":" + std::string(a.metrics_port) + metrics;
    out += fmt::format("{:<15} {:<26} {:<14} {:<17} {:<24} {}\n", a.name, a.display_name,
                       target::VerifiedName(a.verified), a.ReadinessRoute().path, metrics,
                       ForcedLength(a));
  }
  for (const target::EngineAdapter& a : target::AllAdapters()) {
    if (a.verified == target::Verified::kLive) {
      out += fmt::format("{} verified live: {}\n", a.name, a.verified_note);
    }
  }
  out += "every other adapter is verified against hand-written fixtures only\n";
  out += "\nroutes (bakeoff bench --api):\n";
  for (const target::EngineAdapter& a : target::AllAdapters()) out += fmt::format("{:<15} {}\n", a.name, Routes(a));
  return out;
}

std::string FormatDetection(const target::Detection& d) {
  const target::EngineAdapter& a = *d.adapter;
  std::string out;
  out += fmt::format("engine      {}{}\n", d.engine,
                     d.emulated ? fmt::format(" (the {} adapter: its shapes)", a.name) : "");
  out += fmt::format("adapter     {} (verified {})\n", a.name, target::VerifiedName(a.verified));
  out += fmt::format("version     {}\n", d.version.empty()
                                             ? "unknown"
                                             : fmt::format("{} ({})", d.version, d.version_source));
  out += fmt::format("confidence  {} (score {})\n", d.confidence, d.score);
  out += fmt::format("health      {}\n", a.ReadinessRoute().path);
  out += fmt::format("metrics     {}{}\n", a.metrics_path.empty() ? "none" : a.metrics_path,
                     a.metrics_port.empty() ? "" : fmt::format(" on port {}", a.metrics_port));
  out += fmt::format("length      {}\n", ForcedLength(a));
  out += fmt::format("routes      {} (bakeoff bench --api)\n", Routes(a));
  out += "evidence\n";
  for (const std::string& line : d.evidence) out += "  " + line + "\n";
  if (d.scores.size() > 1) {
    out += "also scored\n";
    for (std::size_t i = 1; i < d.scores.size(); ++i) {
      out += fmt::format("  {} {}\n", d.scores[i].adapter->name, d.scores[i].score);
    }
  }
  return out;
}

int RunDetectCommand(const DetectFlags& f) {
  if (f.list) {
    fmt::print("{}", FormatList());
    return kExitOk;
  }
  if (f.url.empty()) {
    fmt::print(stderr, "bakeoff detect: give a URL, or --list\n");
    return kExitUsage;
  }
  Result<net::Endpoint> endpoint = net::ParseEndpoint(f.url);
  if (!endpoint.ok()) {
    fmt::print(stderr, "bakeoff detect: URL: {}\n", endpoint.error().message);
    return kExitUsage;
  }
  if (std::optional<std::string> note = target::StripApiVersionSuffix(endpoint.value())) {
    fmt::print(stderr, "bakeoff detect: {}\n", *note);
  }
  Result<Nanos> timeout = ParseDuration("--timeout", f.timeout);
  if (!timeout.ok() || timeout.value() <= Nanos(0) || timeout.value() > std::chrono::minutes(1)) {
    fmt::print(stderr, "bakeoff detect: --timeout: between 0 and 1min (e.g. 2s)\n");
    return kExitUsage;
  }
  target::DetectOptions options;
  options.per_request = timeout.value();
  if (const char* key = std::getenv(f.api_key_env.c_str()); key != nullptr)
    options.client.bearer_token = key;
  Result<target::Detection> d = target::DetectEngine(endpoint.value(), options);
  if (!d.ok()) {
    fmt::print(stderr, "bakeoff detect: {}\n", d.error().message);
    return kExitFailure;
  }
  for (const std::string& warning : d->warnings) {
    fmt::print(stderr, "bakeoff detect: warning: {}\n", warning);
  }
  fmt::print("{}", f.json ? target::DetectionJson(d.value()) : FormatDetection(d.value()));
  return kExitOk;
}

}  // namespace

Result<const target::EngineAdapter*> ResolveEngine(const std::string& engine,
                                                   const net::Endpoint& endpoint,
                                                   const net::ClientOptions& client,
                                                   const std::function<void(std::string)>& log) {
  if (!engine.empty() && engine != "auto") {
    const target::EngineAdapter* adapter = target::FindAdapter(engine);
    if (adapter == nullptr) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("--engine: unknown engine '{}' (one of: {}, auto)", engine,
                                   target::AdapterNames()));
    }
    return adapter;
  }
  target::DetectOptions options;
  options.client = client;
  Result<target::Detection> d = target::DetectEngine(endpoint, options);
  if (!d.ok()) return &target::GenericOpenAiAdapter();  // the run itself will say it is unreachable
  for (const std::string& warning : d->warnings) log("engine detection: " + warning);
  log(fmt::format("engine: {}{} ({} confidence; --engine NAME to choose)", d->engine,
                  d->version.empty() ? "" : " " + d->version, d->confidence));
  return d->adapter;
}

void AddDetectCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<DetectFlags>();
  CLI::App* c = app.add_subcommand(
      "detect",
      "Name the engine behind a URL and its version, from its headers, version routes, model "
      "listing and metric names (with the evidence); --list shows every adapter.\n"
      "Exit: 0 answered (an unidentified engine is generic-openai, with a warning), 1 "
      "unreachable, 2 usage.");
  c->add_option("url", flags->url, "Server base URL, e.g. http://127.0.0.1:8000");
  c->add_flag("--list", flags->list, "List the engine adapters and whether each was verified live");
  c->add_flag("--json", flags->json, "Print the detection as JSON");
  c->add_option("--timeout", flags->timeout, "Deadline of each request")->capture_default_str();
  c->add_option("--api-key-env", flags->api_key_env, "Environment variable holding a bearer token")
      ->capture_default_str();
  c->callback([flags, exit_code] { *exit_code = RunDetectCommand(*flags); });
}

}  // namespace bakeoff::cli
