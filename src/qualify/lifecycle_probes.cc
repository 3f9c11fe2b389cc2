// qualify/lifecycle_probes.cc
//
// Owns: the probes about the candidate's life cycle: cold start (spawn -> port -> ready -> first
// answer, split into phases by log patterns), readiness truthfulness (health against real
// requests from spawn on, and health under a saturating load), SIGTERM drain (every in-flight
// stream classified, health and new connections during the drain, time to exit, exit status) and
// kill-and-restart (time back to the first good answer).
#include <algorithm>
#include <atomic>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "core/json_dump.h"
#include "core/json_text.h"
#include "dialect/codec.h"
#include "qualify/probes.h"
#include "qualify/stream_batch.h"

namespace bakeoff::qualify {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Nanos kStartupPoll = milliseconds(50);
// A readiness answer later than this is a liveness failure waiting to happen (Kubernetes'
// default probe timeout is 1 s).
constexpr Nanos kHealthSlow = seconds(1);

// What a launch looked like from the outside, polled from the spawn on.
struct StartupTimeline {
  MonoTime spawned;
  std::optional<MonoTime> port_open;
  std::optional<MonoTime> health_ready;  // first 200
  std::optional<MonoTime> first_answer;  // first one-token request that succeeded
  std::vector<int> not_ready_statuses;   // distinct statuses health gave before ready
  // Failed generations after health said ready: (instant, error).
  std::vector<std::pair<MonoTime, std::string>> failures_after_ready;
  std::string ended;  // the process ended during start-up: its exit status
  bool timed_out = false;
};

double Since(MonoTime from, MonoTime to) { return Seconds(to - from); }

nlohmann::ordered_json TimelineJson(const StartupTimeline& t) {
  nlohmann::ordered_json j;
  auto at = [&](const std::optional<MonoTime>& instant) -> nlohmann::json {
    return instant ? nlohmann::json(Since(t.spawned, *instant)) : nlohmann::json(nullptr);
  };
  j["port_open_s"] = at(t.port_open);
  j["health_ready_s"] = at(t.health_ready);
  j["first_answer_s"] = at(t.first_answer);
  j["not_ready_statuses"] = t.not_ready_statuses;
  for (const auto& [instant, error] : t.failures_after_ready) {
    j["failures_after_ready"].push_back({{"at_s", Since(t.spawned, instant)}, {"error", error}});
  }
  if (!t.ended.empty()) j["process_ended"] = t.ended;
  j["timed_out"] = t.timed_out;
  return j;
}

// Launches the candidate and watches it until health says ready and a real request succeeded
// (and a little longer when only one of them did, to see whether the other follows), or until
// `budget` runs out.
StartupTimeline ObserveStartup(ProbeContext& context, Nanos budget, Status& launched) {
  target::Candidate& candidate = context.candidate;
  StartupTimeline t;
  launched = candidate.Launch();
  if (!launched.ok()) return t;
  t.spawned = candidate.process()->started_at();
  const MonoTime give_up = std::min(t.spawned + budget, context.deadline);
  while (!context.stop) {
    const MonoTime now = std::chrono::steady_clock::now();
    if (now >= give_up) {
      t.timed_out = true;
      break;
    }
    if (!candidate.Running()) {
      t.ended = candidate.process()->exit_status()->Describe();
      break;
    }
    if (!t.port_open) {
      if (!target::PortAcceptsConnections(candidate.spec().launch->host,
                                          candidate.spec().launch->port)) {
        std::this_thread::sleep_for(kStartupPoll);
        continue;
      }
      t.port_open = std::chrono::steady_clock::now();
    }
    const target::HealthAnswer health = candidate.Health();
    if (health.Ready() && !t.health_ready) t.health_ready = std::chrono::steady_clock::now();
    if (!health.Ready() && !t.health_ready && health.status != 0 &&
        std::find(t.not_ready_statuses.begin(), t.not_ready_statuses.end(), health.status) ==
            t.not_ready_statuses.end()) {
      t.not_ready_statuses.push_back(health.status);
    }
    if (!t.first_answer) {
      const target::GenerationAnswer answer = candidate.Generate("Hello", 1, seconds(5));
      if (answer.ok) {
        t.first_answer = std::chrono::steady_clock::now();
      } else if (t.health_ready) {
        t.failures_after_ready.emplace_back(std::chrono::steady_clock::now(), answer.error);
      }
    }
    // Both seen: done. Only one seen: keep watching for up to 30 s for the other.
    if (t.health_ready && t.first_answer) break;
    const std::optional<MonoTime> one = t.health_ready ? t.health_ready : t.first_answer;
    if (one && std::chrono::steady_clock::now() - *one > seconds(30)) break;
    std::this_thread::sleep_for(kStartupPoll);
  }
  return t;
}

std::string LogTail(const target::LaunchedProcess& process, std::size_t lines) {
  const std::vector<target::LogLine> all = process.Lines();
  std::string tail;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    tail += all[i].text + "\n";
  }
  return tail;
}

// Health latency while `batch`'s streams run: polled every 100 ms until they end or `window`
// passes.
struct HealthUnderLoad {
  std::vector<double> latencies_ms;
  std::size_t not_ok = 0;  // non-200 or no answer
  double worst_ms = 0;
  std::string worst_error;
};

HealthUnderLoad PollHealthWhileBusy(ProbeContext& context, StreamBatch& batch, Nanos window) {
  HealthUnderLoad seen;
  const MonoTime until = std::min(std::chrono::steady_clock::now() + window, context.deadline);
  while (!context.stop && batch.Ended() < batch.size() &&
         std::chrono::steady_clock::now() < until) {
    const target::HealthAnswer health = context.candidate.Health(seconds(5));
    const double ms = std::chrono::duration<double, std::milli>(health.took).count();
    seen.latencies_ms.push_back(ms);
    if (!health.Ready()) {
      ++seen.not_ok;
      if (seen.worst_error.empty())
        seen.worst_error =
            health.status != 0 ? fmt::format("HTTP {}", health.status) : health.error;
    }
    seen.worst_ms = std::max(seen.worst_ms, ms);
    std::this_thread::sleep_for(milliseconds(100));
  }
  return seen;
}

}  // namespace

double Seconds(Nanos duration) { return std::chrono::duration<double>(duration).count(); }

namespace {

// A text of about `words` words unique in the process, from the first word on, so no prompt hits a
// prefix cache that an earlier one filled (a cached prompt would make one request look faster
// than another).
std::string UniqueText(std::size_t words) {
  static constexpr std::string_view kWords[] = {"river",  "stone",  "lantern", "harbor", "meadow", "copper",
                                                "window", "signal", "garden",  "pocket", "thunder", "maple"};
  static std::atomic<std::uint64_t> next_prompt{0};
  const std::uint64_t k = next_prompt++;
  std::string text = fmt::format("{} {} request {}:", kWords[k % 12], kWords[(k / 12) % 12], k);
  for (std::size_t w = 0; w < words; ++w) text += " " + std::string(kWords[(k * 7 + w * 5) % 12]);
  return text;
}

}  // namespace

std::vector<std::string> PoolingBodies(const target::Candidate& candidate, std::size_t count, std::size_t inputs,
                                       std::size_t words_per_input) {
  std::vector<std::string> bodies;
  for (std::size_t i = 0; i < count; ++i) {
    dialect::GenerationRequest request;
    request.api = candidate.spec().api;
    request.model = candidate.model();
    request.stream = false;
    if (request.api == dialect::Api::kRerank) request.prompt = UniqueText(8);
    for (std::size_t t = 0; t < inputs; ++t) request.inputs.push_back(UniqueText(words_per_input));
    bodies.push_back(dialect::EncodeRequestBody(request));
  }
  return bodies;
}

std::vector<std::string> WorkBodies(const target::Candidate& candidate, std::size_t count, std::uint32_t output_tokens,
                                    std::size_t prompt_words) {
  if (dialect::ApiGenerates(candidate.spec().api)) {
    return StreamingBodies(candidate, count, output_tokens, prompt_words);
  }
  std::size_t words = std::max(prompt_words, kWorkWordsPerInput);
  // Within a quarter of the context in all, at up to two tokens a word (some servers, as the
  // emulated one, prefill a request's inputs as one sequence).
  if (std::optional<std::uint64_t> context = candidate.known_context_tokens()) {
    words = std::clamp<std::size_t>(*context / (kWorkInputs * 2 * 4), 1, words);
  }
  return PoolingBodies(candidate, count, kWorkInputs, words);
}

std::vector<std::string> StreamingBodies(const target::Candidate& candidate, std::size_t count,
                                         std::uint32_t output_tokens, std::size_t prompt_words) {
  std::vector<std::string> bodies;
  for (std::size_t i = 0; i < count; ++i) {
    dialect::GenerationRequest request;
    request.api = candidate.spec().api;
    request.model = candidate.model();
    request.prompt = UniqueText(prompt_words);
    request.max_tokens = output_tokens;
    request.min_tokens = output_tokens;
    request.ignore_eos = true;
    request.stream = true;
    request.include_usage = true;
    bodies.push_back(dialect::EncodeRequestBody(request));
  }
  return bodies;
}

void ProbeColdStart(ProbeContext& context, ProbeResult& result) {
  const Nanos budget = context.options.cold_start_budget;
  Status launched = Ok{};
  const StartupTimeline t = ObserveStartup(context, budget, launched);
  if (!launched.ok()) {
    result.Find(Severity::kDisqualifying, "launch_failed",
                "the candidate could not be launched: " + launched.error().message);
    return;
  }
  const target::LaunchedProcess& process = *context.candidate.process();
  std::vector<std::string> evidence = {
      context.evidence.Write("timeline.json", DumpJson(TimelineJson(t), 2)),
      context.evidence.Relative(process.stdout_path()),
      context.evidence.Relative(process.stderr_path())};
  if (t.port_open) result.Measure("port_open", Since(t.spawned, *t.port_open), "s");
  if (t.health_ready) result.Measure("health_ready", Since(t.spawned, *t.health_ready), "s");
  if (t.first_answer) result.Measure("first_answer", Since(t.spawned, *t.first_answer), "s");
  // Phases from the engine's own log lines, in the order given.
  MonoTime phase_start = t.spawned;
  for (const auto& [phase, pattern] : context.options.phase_patterns) {
    std::optional<target::LogLine> line;
    try {
      line = process.FirstLineMatching(std::regex(pattern), phase_start);  // phases in order
    } catch (const std::regex_error&) {
      // Validated by the command line; a bad pattern here just finds nothing.
    }
    if (!line) {
      result.AddCheck("phase " + phase, CheckStatus::kUnsupported,
                      "no log line matched /" + pattern + "/");
      continue;
    }
    result.Measure("phase_" + phase, Since(phase_start, line->at), "s");
    result.AddCheck("phase " + phase, CheckStatus::kPass,
                    fmt::format("ended at {:.2f} s: {}", Since(t.spawned, line->at),
                                Utf8Prefix(line->text, 200)));
    phase_start = line->at;
  }
  if (!t.ended.empty()) {
    result.Find(
        Severity::kDisqualifying, "died_during_start",
        fmt::format("the candidate ended during start-up ({}); last log lines in the evidence",
                    t.ended),
        {context.evidence.Write("log_tail.txt", LogTail(process, 40)), evidence[0]});
    return;
  }
  if (!t.first_answer || !t.health_ready) {
    result.Find(
        Severity::kDisqualifying, "not_ready",
        fmt::format("no {} within {:.0f} s of the spawn",
                    !t.first_answer ? "successful answer" : "ready health", Seconds(budget)),
        evidence);
    return;
  }
  const MonoTime ready = std::max(*t.first_answer, *t.health_ready);
  if (ready - t.spawned > budget) {
    result.Find(Severity::kDisqualifying, "slower_than_budget",
                fmt::format("ready and answering after {:.1f} s, over the {:.0f} s budget",
                            Since(t.spawned, ready), Seconds(budget)),
                evidence);
  }
}

void ProbeReadiness(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  if (candidate.launch_mode()) {
    Status launched = Ok{};
    const StartupTimeline t = ObserveStartup(context, context.options.cold_start_budget, launched);
    if (!launched.ok()) {
      result.Find(Severity::kDisqualifying, "launch_failed",
                  "the candidate could not be launched: " + launched.error().message);
      return;
    }
    const std::string timeline =
        context.evidence.Write("timeline.json", DumpJson(TimelineJson(t), 2));
    if (!t.health_ready || !t.first_answer) {
      result.Find(Severity::kDisqualifying, "never_ready",
                  fmt::format("start-up never completed (health {}, answers {}){}",
                              t.health_ready ? "ready" : "never ready",
                              t.first_answer ? "served" : "never served",
                              t.ended.empty() ? "" : "; ended: " + t.ended),
                  {timeline});
      return;
    }
    const double lead =
        Seconds(*t.first_answer - *t.health_ready);  // > 0: ready before able to serve
    result.Measure("health_ready_to_first_answer", lead, "s");
    if (!t.failures_after_ready.empty() && lead > 1.0) {
      result.Find(
          Severity::kDisqualifying, "ready_before_serving",
          fmt::format("health said ready {:.2f} s before the first request succeeded; {} requests "
                      "failed in "
                      "between (first: {})",
                      lead, t.failures_after_ready.size(), t.failures_after_ready.front().second),
          {timeline});
    } else if (lead < -5.0) {
      result.Find(Severity::kWarning, "serves_long_before_ready",
                  fmt::format("requests succeeded {:.1f} s before health said ready: a rollout "
                              "waits that long for nothing",
                              -lead),
                  {timeline});
    }
    std::vector<int> odd;
    for (int status : t.not_ready_statuses) {
      if (status != 503) odd.push_back(status);
    }
    if (!odd.empty()) {
      result.Find(
          Severity::kWarning, "nonstandard_not_ready_status",
          fmt::format("while starting, health answered {} instead of 503", fmt::join(odd, ", ")),
          {timeline});
    }
    result.AddCheck("observed from spawn", CheckStatus::kPass,
                    fmt::format("not-ready statuses: [{}]", fmt::join(t.not_ready_statuses, ", ")));
  } else {
    result.AddCheck("observed from spawn", CheckStatus::kUnsupported,
                    "attach mode: the start-up was not observed");
    Status up = candidate.EnsureUp(seconds(30));
    if (!up.ok()) {
      result.Find(Severity::kDisqualifying, "not_ready", up.error().message);
      return;
    }
  }
  // Health while the engine is saturated.
  const target::HealthAnswer idle = candidate.Health();
  StreamBatch batch(candidate, candidate.OptionsWithin(context.Remaining()),
                    WorkBodies(candidate, context.options.saturation_concurrency, context.options.long_output_tokens));
  batch.WaitStarted(1, context.options.answer_within);
  const HealthUnderLoad busy = PollHealthWhileBusy(context, batch, seconds(10));
  const std::vector<measure::RequestRecord> records = batch.Finish(Nanos{0});
  result.Measure("health_idle", std::chrono::duration<double, std::milli>(idle.took).count(), "ms");
  result.Measure("health_busy_worst", busy.worst_ms, "ms");
  result.Measure("health_busy_polls", static_cast<double>(busy.latencies_ms.size()), "polls");
  nlohmann::ordered_json j;
  j["streams"] = records.size();
  j["health_latencies_ms"] = busy.latencies_ms;
  j["not_ok"] = busy.not_ok;
  const std::string evidence = context.evidence.Write("health_under_load.json", DumpJson(j, 2));
  if (busy.not_ok > 0 ||
      std::chrono::duration<double, std::milli>(kHealthSlow).count() < busy.worst_ms) {
    result.Find(
        Severity::kDisqualifying, "health_blocks_when_busy",
        fmt::format(
            "under {} streams, health answered in up to {:.0f} ms and failed {} of {} polls{}: a "
            "liveness probe would restart a busy engine",
            records.size(), busy.worst_ms, busy.not_ok, busy.latencies_ms.size(),
            busy.worst_error.empty() ? "" : " (" + busy.worst_error + ")"),
        {evidence});
  }
}

void ProbeSigtermDrain(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  const std::size_t streams = context.options.drain_streams;
  StreamBatch batch(candidate, candidate.OptionsWithin(context.Remaining()),
                    WorkBodies(candidate, streams, context.options.long_output_tokens));
  if (!batch.WaitStarted(streams, context.options.answer_within)) {
    result.AddCheck("streams in flight", CheckStatus::kFail,
                    fmt::format("only {} of {} streams had a first token after {:.0f} s",
                                batch.Started(), streams, Seconds(context.options.answer_within)));
  }
  const MonoTime sigterm = std::chrono::steady_clock::now();
  candidate.process()->Signal(SIGTERM);
  // During the drain: when does health stop saying ready, and is a new request refused?
  std::optional<MonoTime> health_not_ready;
  std::string new_request;
  const Nanos grace = candidate.spec().grace;
  while (candidate.Running() && std::chrono::steady_clock::now() - sigterm < grace &&
         !context.stop) {
    if (!health_not_ready && !candidate.Health(milliseconds(500)).Ready())
      health_not_ready = std::chrono::steady_clock::now();
    if (new_request.empty() && std::chrono::steady_clock::now() - sigterm > milliseconds(200)) {
      const target::GenerationAnswer answer = candidate.Generate("Hello", 1, seconds(2));
      new_request = answer.ok ? "served" : "refused: " + std::string(Utf8Prefix(answer.error, 160));
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  bool killed = false;
  if (candidate.Running()) {
    candidate.Kill();
    killed = true;
  }
  const Nanos drain = std::chrono::steady_clock::now() - sigterm;
  const std::vector<measure::RequestRecord> records = batch.Finish(seconds(5));
  std::size_t completed = 0, errored = 0, cut = 0, hung = 0, reset_unanswered = 0;
  nlohmann::ordered_json j;
  for (const measure::RequestRecord& r : records) {
    std::string kind;
    // A whole (pooling) request shows nothing before its end: one reset before any answer byte may
    // never have been read (a connection still in the listen queue when the server stopped
    // accepting) as well as dropped, and the probe cannot tell which.
    const bool reset_before_answer =
        !batch.streaming() && !r.headers_received &&
        (r.outcome == measure::Outcome::kReset || r.outcome == measure::Outcome::kConnectFailed);
    if (reset_before_answer) {
      ++reset_unanswered;
      j["streams"].push_back({{"id", r.id},
                              {"class", "reset before any answer"},
                              {"outcome", measure::OutcomeName(r.outcome)},
                              {"tokens", r.counted_tokens},
                              {"error", r.error}});
      continue;
    }
    switch (r.outcome) {
      case measure::Outcome::kOk:
        kind = "completed";
        ++completed;
        break;
      case measure::Outcome::kHttpError:
      case measure::Outcome::kStreamError:
        kind = "ended with an error";
        ++errored;
        break;
      case measure::Outcome::kCancelled:
      case measure::Outcome::kTimeout:
        kind = "hung";
        ++hung;
        break;
      default:
        kind = "cut silently";
        ++cut;
        break;
    }
    j["streams"].push_back({{"id", r.id},
                            {"class", kind},
                            {"outcome", measure::OutcomeName(r.outcome)},
                            {"tokens", r.counted_tokens},
                            {"error", r.error}});
  }
  const target::ExitStatus exit = candidate.process()->exit_status().value_or(target::ExitStatus{});
  j["exit"] = killed ? "did not exit within the grace period; killed" : exit.Describe();
  j["drain_s"] = Seconds(drain);
  j["health_not_ready_after_s"] = health_not_ready
                                      ? nlohmann::json(Seconds(*health_not_ready - sigterm))
                                      : nlohmann::json(nullptr);
  j["new_request"] = new_request;
  const std::string evidence = context.evidence.Write("drain.json", DumpJson(j, 2));
  result.Measure("drain_time", Seconds(drain), "s");
  result.Measure("streams_completed", static_cast<double>(completed), "streams");
  result.Measure("streams_errored", static_cast<double>(errored), "streams");
  result.Measure("streams_cut", static_cast<double>(cut + hung), "streams");
  if (!batch.streaming())
    result.Measure("requests_reset_unanswered", static_cast<double>(reset_unanswered), "requests");
  const std::vector<std::string> with_logs = {
      evidence, context.evidence.Relative(candidate.process()->stderr_path())};
  if (cut + hung > 0) {
    result.Find(
        Severity::kDisqualifying, "streams_cut_silently",
        fmt::format(
            "{} of {} streams in flight at SIGTERM were cut without an error the client could "
            "see{}",
            cut + hung, records.size(), hung > 0 ? fmt::format(" ({} left hanging)", hung) : ""),
        with_logs);
  }
  if (reset_unanswered > 0) {
    result.Find(
        Severity::kWarning, "requests_reset_unanswered",
        fmt::format(
            "{} of {} whole requests written before SIGTERM were reset before any answer: the "
            "server either had not read them or dropped them (a pooling request shows nothing "
            "before its end, so the probe cannot tell which)",
            reset_unanswered, records.size()),
        with_logs);
  }
  if (errored > 0) {
    result.Find(
        Severity::kWarning, "streams_ended_with_error",
        fmt::format(
            "{} of {} streams in flight at SIGTERM ended with an error instead of finishing",
            errored, records.size()),
        with_logs);
  }
  if (killed) {
    result.Find(
        Severity::kDisqualifying, "ignores_sigterm",
        fmt::format("still running {:.0f} s after SIGTERM; it had to be killed", Seconds(grace)),
        with_logs);
  } else if (!exit.exited && exit.signal != SIGTERM) {
    result.Find(Severity::kDisqualifying, "crashed_on_sigterm",
                "it ended at SIGTERM " + exit.Describe(), with_logs);
  } else if (exit.exited && exit.code != 0) {
    result.Find(Severity::kWarning, "nonzero_exit",
                "it exited after SIGTERM with " + exit.Describe(), with_logs);
  }
  if (!health_not_ready && !killed && drain > milliseconds(500)) {
    result.Find(Severity::kWarning, "health_ready_during_drain",
                fmt::format("health kept answering ready for the {:.1f} s drain: a load balancer "
                            "keeps sending work",
                            Seconds(drain)),
                {evidence});
  }
  result.AddCheck("new request during drain", CheckStatus::kPass,
                  new_request.empty() ? "not tried (exited at once)" : new_request);
}

void ProbeRestart(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  const target::GenerationAnswer before = candidate.Generate("Hello", 1);
  if (!before.ok) {
    result.Find(Severity::kDisqualifying, "not_serving",
                "the candidate did not answer before the kill: " + before.error);
    return;
  }
  candidate.Kill();
  const MonoTime killed = std::chrono::steady_clock::now();
  Status launched = candidate.Launch();
  if (!launched.ok()) {
    result.Find(Severity::kDisqualifying, "relaunch_failed",
                "after SIGKILL it could not be launched again: " + launched.error().message);
    return;
  }
  Result<MonoTime> ready =
      candidate.WaitReady(std::min(context.options.cold_start_budget, context.Remaining()));
  if (!ready.ok()) {
    result.Find(Severity::kDisqualifying, "not_back",
                "after SIGKILL and a relaunch it did not answer again: " + ready.error().message,
                {context.evidence.Relative(candidate.process()->stderr_path())});
    return;
  }
  result.Measure("kill_to_first_answer", Seconds(*ready - killed), "s");
  if (*ready - killed > context.options.cold_start_budget) {
    result.Find(Severity::kDisqualifying, "slower_than_budget",
                fmt::format("back after {:.1f} s, over the {:.0f} s budget",
                            Seconds(*ready - killed), Seconds(context.options.cold_start_budget)));
  }
}

}  // namespace bakeoff::qualify
