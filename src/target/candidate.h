// target/candidate.h
//
// Owns: the candidate engine as a probe sees it: where it answers (endpoint, health and metrics
// paths, model) and, in launch mode, its process: launch, readiness wait, SIGTERM with a grace
// period, SIGKILL, relaunch. In attach mode (a URL someone else started) the process calls are
// unavailable and say so, so a probe that needs them reports itself as not run.
// Also the small blocking calls every probe makes: GET health, one short generation.
// Does not own: what the answers mean for a verdict (qualify/), engine-specific adapters.
//
// Thread-safety: one thread at a time; the blocking calls run private event loops.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/result.h"
#include "dialect/openai.h"
#include "net/http_client.h"
#include "target/discovery.h"
#include "target/launcher.h"

namespace bakeoff::target {

struct CandidateSpec {
  std::string url;                   // base URL, "http://127.0.0.1:8123"
  std::optional<LaunchSpec> launch;  // set: launch mode; its port is the URL's
  std::string health_path = "/health";
  std::string metrics_path = "/metrics";
  std::string model;  // "" = the first /v1/models lists
  dialect::Api api = dialect::Api::kChat;
  net::ClientOptions client;
  Nanos grace = std::chrono::seconds(30);           // SIGTERM -> SIGKILL
  Nanos ready_timeout = std::chrono::seconds(600);  // launch -> ready
};

// A health answer: status 0 when the transport failed (`error` says how).
struct HealthAnswer {
  int status = 0;
  std::string body;  // the start of it
  std::string error;
  Nanos took{0};
  bool Ready() const { return status == 200; }
};

// One short generation's result (non-streaming). ok: 2xx with at least one generated token or a
// finish reason; on a pooling route, with at least one vector or score.
struct GenerationAnswer {
  bool ok = false;
  int status = 0;
  // The server does not serve the candidate's route: 501, or 404/405 while GET /v1/models lists
  // the model (so the route, not the model, is missing). `error` then says so.
  bool route_missing = false;
  std::string text;
  std::uint64_t items = 0;  // a pooling route's vectors or scores
  std::string finish_reason;
  std::optional<std::uint64_t> prompt_tokens;
  std::optional<std::uint64_t> completion_tokens;
  std::string error;  // transport error or the server's error message
  std::string body;   // the start of the response body
  Nanos took{0};
};

class Candidate {
 public:
  // Validates the URL and, in launch mode, the command; starts nothing.
  static Result<Candidate> Create(CandidateSpec spec);

  const CandidateSpec& spec() const { return spec_; }
  const net::Endpoint& endpoint() const { return endpoint_; }
  bool launch_mode() const { return spec_.launch.has_value(); }
  // What the running candidate serves (target/discovery.h), asked once and kept: the model
  // requests name, whether it is the emulated engine, its context limit.
  Result<TargetFacts> Facts();
  // The model requests name: the one given, else the discovered one ("" while unknown).
  std::string model() const { return facts_ ? facts_->model : spec_.model; }
  // The context limit Facts() found, if it was asked and the server says.
  std::optional<std::uint64_t> known_context_tokens() const {
    return facts_ ? facts_->max_context_tokens : std::nullopt;
  }

  // Launch mode: starts a new process (any previous one must have ended). kUnavailable naming the
  // port when it is taken; kInvalidInput when the command cannot run; kInvalidInput in attach mode.
  Status Launch();
  // The running (or last) process; null in attach mode or before Launch.
  LaunchedProcess* process() { return process_.get(); }
  bool Running() { return process_ != nullptr && process_->Running(); }

  // Polls health (every `poll`) and then sends a one-token generation (a pooling route: one text)
  // until both succeed, up to `timeout`. Stops early when the launched process ends (kUnavailable,
  // its exit status and the log path) and when the healthy server does not serve the route
  // (kUnavailable, GenerationAnswer::route_missing's message). Returns the instant both were
  // first seen succeeding.
  Result<MonoTime> WaitReady(Nanos timeout, Nanos poll = std::chrono::milliseconds(100));
  // Launches when nothing runs (launch mode) and waits until ready; in attach mode checks health
  // and one generation.
  Status EnsureUp(Nanos timeout);

  LaunchedProcess::StopReport Stop();  // SIGTERM, grace, SIGKILL; REQUIRES a process
  void Kill();                         // SIGKILL now, and reap

  HealthAnswer Health(Nanos timeout = std::chrono::seconds(2)) const;
  // A short non-streaming generation of `max_tokens` for `prompt` with greedy sampling; on a
  // pooling route, `prompt` as the one text (a rerank's query and its one document).
  // Learns the model first when no model is known.
  GenerationAnswer Generate(const std::string& prompt, std::uint32_t max_tokens,
                            Nanos timeout = std::chrono::seconds(30));
  // Any request, with every deadline capped at `timeout`.
  Result<net::FetchedResponse> Call(net::HttpRequest request, Nanos timeout) const;
  net::ClientOptions OptionsWithin(Nanos timeout) const;

 private:
  explicit Candidate(CandidateSpec spec, net::Endpoint endpoint)
      : spec_(std::move(spec)), endpoint_(std::move(endpoint)) {}

  CandidateSpec spec_;
  net::Endpoint endpoint_;
  std::optional<TargetFacts> facts_;
  std::unique_ptr<LaunchedProcess> process_;
};

}  // namespace bakeoff::target
