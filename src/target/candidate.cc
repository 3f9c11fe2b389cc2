// target/candidate.cc: attach or launch, readiness wait, health and one short generation.
#include "target/candidate.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <signal.h>

#include "core/json_text.h"
#include "dialect/codec.h"

namespace bakeoff::target {
namespace {

constexpr std::size_t kKeptBodyBytes = 4096;

std::string Start(std::string_view body) { return std::string(body.substr(0, kKeptBodyBytes)); }

}  // namespace

Result<Candidate> Candidate::Create(CandidateSpec spec) {
  Result<net::Endpoint> endpoint = net::ParseEndpoint(spec.url);
  if (!endpoint.ok()) return endpoint.error();
  if (spec.launch) {
    if (spec.launch->argv.empty())
      return MakeError(ErrorCode::kInvalidInput, "--launch: empty command");
    spec.launch->host = endpoint->host;
    const int port = std::atoi(endpoint->port.c_str());
    if (port <= 0 || port > 65535) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("{}: no usable port to launch on", spec.url));
    }
    spec.launch->port = static_cast<std::uint16_t>(port);
  }
  return Candidate(std::move(spec), std::move(endpoint.value()));
}

Status Candidate::Launch() {
  if (!spec_.launch)
    return MakeError(ErrorCode::kInvalidInput, "attach mode: bakeoff did not start this candidate");
  if (Running()) return MakeError(ErrorCode::kInternal, "the candidate is already running");
  process_.reset();  // reaped; the next Start may reuse the port
  Result<std::unique_ptr<LaunchedProcess>> started = LaunchedProcess::Start(*spec_.launch);
  if (!started.ok()) return started.error();
  process_ = std::move(started.value());
  return Ok{};
}

net::ClientOptions Candidate::OptionsWithin(Nanos timeout) const {
  net::ClientOptions options = spec_.client;
  net::Deadlines& d = options.deadlines;
  d.connect = std::min(d.connect, timeout);
  d.first_byte = std::min(d.first_byte, timeout);
  d.idle = std::min(d.idle, timeout);
  d.total = std::min(d.total, timeout);
  return options;
}

Result<net::FetchedResponse> Candidate::Call(net::HttpRequest request, Nanos timeout) const {
  return net::Fetch(endpoint_, std::move(request), OptionsWithin(timeout));
}

HealthAnswer Candidate::Health(Nanos timeout) const {
  const MonoTime start = std::chrono::steady_clock::now();
  Result<net::FetchedResponse> response = Call(GetRequest(spec_.health_path), timeout);
  HealthAnswer answer;
  answer.took = std::chrono::steady_clock::now() - start;
  if (!response.ok()) {
    answer.error = response.error().message;
    return answer;
  }
  answer.status = response->head.status;
  answer.body = Start(response->body);
  return answer;
}

Result<TargetFacts> Candidate::Facts() {
  if (facts_) return *facts_;
  Result<TargetFacts> facts =
      Discover(endpoint_, OptionsWithin(std::chrono::seconds(10)), spec_.model);
  if (facts.ok()) facts_ = facts.value();
  return facts;
}

GenerationAnswer Candidate::Generate(const std::string& prompt, std::uint32_t max_tokens,
                                     Nanos timeout) {
  GenerationAnswer answer;
  if (model().empty()) {
    Result<TargetFacts> facts = Facts();
    if (!facts.ok()) {
      answer.error = facts.error().message;
      return answer;
    }
  }
  dialect::GenerationRequest generation;
  generation.api = spec_.api;
  generation.model = model();
  generation.prompt = prompt;
  if (!dialect::ApiGenerates(generation.api)) generation.inputs = {prompt};
  generation.max_tokens = max_tokens;
  generation.stream = false;
  generation.include_usage = false;
  generation.temperature = 0.0;
  net::HttpRequest request;
  request.path = dialect::RequestPath(generation.api, generation.model, false);
  const std::string request_path = request.path;
  request.body = dialect::EncodeRequestBody(generation);
  const MonoTime start = std::chrono::steady_clock::now();
  Result<net::FetchedResponse> response = Call(std::move(request), timeout);
  answer.took = std::chrono::steady_clock::now() - start;
  if (!response.ok()) {
    answer.error = response.error().message;
    return answer;
  }
  answer.status = response->head.status;
  answer.body = Start(response->body);
  if (answer.status < 200 || answer.status > 299) {
    const std::string message = dialect::DecodeErrorMessage(response->body)
                                    .value_or(std::string(Utf8Prefix(answer.body, 200)));
    answer.error = fmt::format("HTTP {}: {}", answer.status, message);
    if (answer.status == 404 || answer.status == 405 || answer.status == 501) {
      // 404 means no such route only when the model is there; 501 says "not supported" itself.
      Result<TargetFacts> facts = Facts();
      const bool listed =
          facts.ok() && std::find(facts->listed_models.begin(), facts->listed_models.end(),
                                  generation.model) != facts->listed_models.end();
      if (answer.status == 501 || listed) {
        answer.route_missing = true;
        answer.error = fmt::format(
            "POST {} answered HTTP {} ({}){}: it does not serve the {} route", request_path,
            answer.status, message,
            listed ? fmt::format(" while GET /v1/models lists '{}'", generation.model) : "",
            dialect::ApiName(generation.api));
      }
    }
    return answer;
  }
  Result<dialect::CompletionResponse> decoded = dialect::DecodeResponse(generation.api, response->body);
  if (!decoded.ok()) {
    answer.error = decoded.error().message;
    return answer;
  }
  answer.text = decoded->content;
  answer.items = decoded->items;
  answer.finish_reason = decoded->finish_reason;
  if (decoded->usage) {
    if (decoded->usage->prompt_known) answer.prompt_tokens = decoded->usage->prompt_tokens;
    answer.completion_tokens = decoded->usage->completion_tokens;
  }
  if (!dialect::ApiGenerates(generation.api)) {
    answer.ok = answer.items > 0;
    if (!answer.ok) answer.error = "the answer had no vector or score";
    return answer;
  }
  answer.ok = !answer.text.empty() || !answer.finish_reason.empty();
  if (!answer.ok) answer.error = "the answer had neither text nor a finish reason";
  return answer;
}

Result<MonoTime> Candidate::WaitReady(Nanos timeout, Nanos poll) {
  const MonoTime deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (process_ != nullptr && !process_->Running()) {
      return MakeError(
          ErrorCode::kUnavailable,
          fmt::format("the candidate ended before it was ready ({}); see {}",
                      process_->exit_status()->Describe(), process_->stderr_path().string()));
    }
    const HealthAnswer health = Health();
    if (health.Ready()) {
      const GenerationAnswer generated = Generate("Hello", 1);
      if (generated.ok) return std::chrono::steady_clock::now();
      // Healthy and listing the model: the route will not appear by waiting.
      if (generated.route_missing) return MakeError(ErrorCode::kUnavailable, generated.error);
      last = "health 200 but a one-token request failed: " + generated.error;
    } else {
      last = health.status != 0 ? fmt::format("health answered {}", health.status) : health.error;
    }
    std::this_thread::sleep_for(poll);
  }
  return MakeError(ErrorCode::kTimeout,
                   fmt::format("not ready after {:.0f} s (last: {})",
                               std::chrono::duration<double>(timeout).count(), last));
}

Status Candidate::EnsureUp(Nanos timeout) {
  if (launch_mode() && !Running()) {
    Status launched = Launch();
    if (!launched.ok()) return launched;
  }
  Result<MonoTime> ready = WaitReady(timeout);
  if (!ready.ok()) return ready.error();
  return Ok{};
}

LaunchedProcess::StopReport Candidate::Stop() { return process_->Stop(spec_.grace); }

void Candidate::Kill() {
  if (process_ == nullptr) return;
  process_->Signal(SIGKILL);
  process_->WaitFor(std::chrono::seconds(10));
}

}  // namespace bakeoff::target
