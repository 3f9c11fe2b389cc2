// qualify/load_probes.cc
//
// Owns: the probes that put work on the candidate and watch what it does with it: cancellation
// (streams abandoned in prefill and in decode: does the work stop and the capacity come back,
// and how soon) and overload (far more streams than it can serve: does it shed with 429/503 and
// Retry-After, queue without bound, time out or die; how soon it recovers; one request far past
// its limits).
#include <algorithm>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "core/json_dump.h"
#include "dialect/openai.h"
#include "qualify/metrics_scrape.h"
#include "qualify/probes.h"
#include "qualify/stream_batch.h"

namespace bakeoff::qualify {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint32_t kYardstickTokens = 32;
// A yardstick request this much slower than on the idle engine means the engine is still busy.
constexpr double kBusyRatio = 1.5;
// Slower than idle by less than this is noise, not a busy engine.
constexpr double kNoiseSeconds = 0.020;
// The bounded_queue contract: a request is served within this long after an overload ends.
constexpr Nanos kOverloadRecovery = seconds(30);

// Seconds one forced-length streamed request of kYardstickTokens takes end to end; nullopt when it
// fails (`error`, when given, says why).
std::optional<double> Yardstick(ProbeContext& context, std::string* error = nullptr) {
  StreamBatch batch(context.candidate, context.candidate.OptionsWithin(2 * context.options.answer_within),
                    StreamingBodies(context.candidate, 1, kYardstickTokens, 8));
  const std::vector<measure::RequestRecord> records =
      batch.Finish(2 * context.options.answer_within);
  const measure::RequestRecord& r = records.front();
  if (r.outcome != measure::Outcome::kOk || !r.finished) {
    if (error != nullptr) *error = fmt::format("{}: {}", measure::OutcomeName(r.outcome), r.error);
    return std::nullopt;
  }
  return Seconds(*r.finished - r.intended_send);
}

struct Recovery {
  bool recovered = false;
  double after_s = 0;      // from the cancel to the first yardstick back within kBusyRatio
  double first_ratio = 0;  // the first yardstick after the cancel, against the idle one
};

// Repeats the yardstick from `since` until it is back within kBusyRatio of `idle`, for up to
// `limit`.
Recovery AwaitRecovery(ProbeContext& context, double idle, MonoTime since, Nanos limit) {
  Recovery recovery;
  const MonoTime until = std::min(since + limit, context.deadline);
  while (!context.stop && std::chrono::steady_clock::now() < until) {
    const std::optional<double> took = Yardstick(context);
    const double ratio =
        took ? *took / idle : std::numeric_limits<double>::quiet_NaN();  // failed: null
    if (recovery.first_ratio == 0) recovery.first_ratio = ratio;
    // Within the ratio, or within the timing noise of a short request on a busy host.
    if (ratio <= kBusyRatio || (took && *took - idle <= kNoiseSeconds)) {
      recovery.recovered = true;
      recovery.after_s = Seconds(std::chrono::steady_clock::now() - since);
      return recovery;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return recovery;
}

// The engine's own view after a cancel: polls its running gauge every 100 ms until it reads 0 (up
// to `limit`) and how many tokens it generated meanwhile. Unavailable without a running gauge.
struct EngineStop {
  bool available = false;
  bool stopped = false;
  double after_s = 0;                  // cancel -> running gauge at 0
  std::optional<double> tokens_after;  // generation counter rise from 0.5 s after the cancel on
};

EngineStop AwaitEngineStop(ProbeContext& context, MonoTime cancelled, Nanos limit) {
  EngineStop stop;
  const MetricsScrape first = ScrapeMetrics(context.candidate);
  if (!first.page) return stop;
  const target::MetricFamilyName* running = FindSignal(*first.page, target::Signal::kRunning);
  const target::MetricFamilyName* generated =
      FindSignal(*first.page, target::Signal::kGenerationTokens);
  if (running == nullptr) return stop;
  stop.available = true;
  std::optional<double> generated_start;
  const MonoTime until = std::min(cancelled + limit, context.deadline);
  while (!context.stop && std::chrono::steady_clock::now() < until) {
    const MetricsScrape scrape = ScrapeMetrics(context.candidate);
    if (scrape.page) {
      const std::optional<double> count =
          generated ? FamilyValue(*scrape.page, *generated) : std::nullopt;
      if (count && !generated_start &&
          std::chrono::steady_clock::now() - cancelled >= milliseconds(500)) {
        generated_start = count;
      }
      if (count && generated_start) stop.tokens_after = *count - *generated_start;
      if (FamilyValue(*scrape.page, *running).value_or(1) < 1) {
        stop.stopped = true;
        stop.after_s = Seconds(std::chrono::steady_clock::now() - cancelled);
        return stop;
      }
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return stop;
}

}  // namespace

void ProbeCancellation(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  std::string error;
  std::optional<double> idle = Yardstick(context, &error);
  for (int i = 0; i < 2 && idle; ++i) {
    if (const std::optional<double> again = Yardstick(context)) idle = std::min(*idle, *again);
  }
  if (!idle) {
    result.Find(Severity::kDisqualifying, "not_serving",
                "a plain streamed request failed on the idle candidate: " + error);
    return;
  }
  result.Measure("yardstick_idle", *idle * 1000, "ms");
  nlohmann::ordered_json j;
  j["yardstick_idle_ms"] = *idle * 1000;
  const std::size_t n = context.options.cancel_streams;
  const std::uint32_t long_output = context.options.long_output_tokens * 4;
  struct Phase {
    const char* name;
    std::size_t prompt_words;
    bool wait_first_token;
  };
  for (const Phase phase : {Phase{"decode", 32, true}, Phase{"prefill", 3000, false}}) {
    if (context.Expired()) break;
    StreamBatch batch(candidate, candidate.OptionsWithin(context.Remaining()),
                      StreamingBodies(candidate, n, long_output, phase.prompt_words));
    if (phase.wait_first_token) {
      batch.WaitStarted(n, context.options.answer_within);
    } else {
      std::this_thread::sleep_for(milliseconds(30));  // written, not yet answered
    }
    const std::size_t answering = batch.Started();
    batch.CancelAll();
    const MonoTime cancelled = std::chrono::steady_clock::now();
    batch.Finish(Nanos{0});
    const EngineStop engine = AwaitEngineStop(context, cancelled, context.options.answer_within);
    const Recovery recovery =
        AwaitRecovery(context, *idle, cancelled, context.options.answer_within);
    j[phase.name] = {{"streams", n},
                     {"answering_when_cancelled", answering},
                     {"first_yardstick_ratio", recovery.first_ratio},
                     {"recovered", recovery.recovered},
                     {"recovered_after_s", recovery.after_s}};
    if (engine.available) {
      j[phase.name]["engine_running_zero_after_s"] =
          engine.stopped ? nlohmann::json(engine.after_s) : nlohmann::json(nullptr);
      j[phase.name]["tokens_generated_after_cancel"] =
          engine.tokens_after ? nlohmann::json(*engine.tokens_after) : nlohmann::json(nullptr);
      if (engine.stopped)
        result.Measure(std::string(phase.name) + "_engine_stop", engine.after_s, "s");
    }
    result.Measure(std::string(phase.name) + "_recovery", recovery.after_s, "s");
    result.Measure(std::string(phase.name) + "_first_ratio", recovery.first_ratio, "x");
    const std::string code = std::string("keeps_generating_after_") + phase.name + "_cancel";
    if (engine.available && (!engine.stopped || engine.after_s > 2.0) &&
        engine.tokens_after.value_or(0) > 0) {
      result.Find(
          Severity::kDisqualifying, code,
          fmt::format("after {} streams were cancelled in {}, the engine's running gauge stayed "
                      "above 0 for "
                      "{} and it generated {:.0f} more tokens for clients that had left",
                      n, phase.name,
                      engine.stopped
                          ? fmt::format("{:.1f} s", engine.after_s)
                          : fmt::format("over {:.0f} s", Seconds(context.options.answer_within)),
                      *engine.tokens_after));
    } else if (!recovery.recovered && engine.available && engine.stopped) {
      result.Find(Severity::kWarning,
                  std::string("capacity_not_back_after_") + phase.name + "_cancel",
                  fmt::format("the engine's running gauge read 0 {:.1f} s after {} streams were "
                              "cancelled in {}, yet a {}-token request stayed over {:.1f}x its "
                              "idle time for {:.0f} s",
                              engine.after_s, n, phase.name, kYardstickTokens, kBusyRatio,
                              Seconds(context.options.answer_within)));
    } else if (!recovery.recovered) {
      result.Find(
          Severity::kDisqualifying, code,
          fmt::format("after {} streams were cancelled in {}, a {}-token request stayed "
                      "over {:.1f}x its idle "
                      "time for {:.0f} s: the engine kept working for clients that had left",
                      n, phase.name, kYardstickTokens, kBusyRatio,
                      Seconds(context.options.answer_within)));
    } else if (recovery.after_s > 2.0) {
      result.Find(Severity::kWarning, std::string("slow_to_stop_after_") + phase.name + "_cancel",
                  fmt::format("capacity came back {:.1f} s after {} streams were cancelled in {}",
                              recovery.after_s, n, phase.name));
    }
  }
  const std::string evidence = context.evidence.Write("cancellation.json", DumpJson(j, 2));
  for (Finding& finding : result.findings) finding.evidence.push_back(evidence);
}

void ProbeOverload(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  const std::size_t n = context.options.saturation_concurrency * 4;
  const MonoTime window_end = std::chrono::steady_clock::now() + context.options.overload_duration;
  StreamBatch batch(candidate,
                    candidate.OptionsWithin(context.options.overload_duration + context.options.answer_within),
                    WorkBodies(candidate, n, context.options.long_output_tokens));
  // While overloaded: one more request, to read the headers of a refusal (or see it wait).
  std::this_thread::sleep_for(std::min<Nanos>(seconds(1), context.options.overload_duration / 4));
  std::string retry_after;
  int probe_status = 0;
  {
    net::HttpRequest request;
    request.path = dialect::RequestPath(candidate.spec().api, candidate.model(), batch.streaming());
    request.body = WorkBodies(candidate, 1, 8).front();
    const Nanos wait =
        std::max<Nanos>(milliseconds(100),
                        std::min<Nanos>(seconds(2), window_end - std::chrono::steady_clock::now()));
    Result<net::FetchedResponse> response = candidate.Call(std::move(request), wait);
    if (response.ok()) {
      probe_status = response->head.status;
      retry_after = std::string(response->head.Header("Retry-After"));
    }
  }
  while (!context.stop && batch.Ended() < n && std::chrono::steady_clock::now() < window_end) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  // Answering: a stream with a first token; a whole (pooling) answer only once it ended.
  const std::size_t answering = batch.streaming() ? batch.Started() : batch.Ended();
  const std::size_t waiting_at_end = n - answering;
  const std::size_t batch_started_unfinished = answering - std::min(answering, batch.Ended());
  const std::vector<measure::RequestRecord> records = batch.Finish(Nanos{0});
  const MonoTime load_stopped = std::chrono::steady_clock::now();
  std::size_t served = 0, shed = 0, other_errors = 0, cut = 0, shed_with_retry_after = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const measure::RequestRecord& r = records[i];
    if (r.outcome == measure::Outcome::kOk ||
        (r.outcome == measure::Outcome::kCancelled && r.first_token)) {
      ++served;
    } else if (r.outcome == measure::Outcome::kHttpError &&
               (r.http_status == 429 || r.http_status == 503)) {
      ++shed;
      if (!batch.retry_after()[i].empty()) ++shed_with_retry_after;
    } else if (r.outcome == measure::Outcome::kCancelled) {
      // still waiting when the window closed: counted in waiting_at_end
    } else if (r.outcome == measure::Outcome::kReset ||
               r.outcome == measure::Outcome::kConnectFailed) {
      ++cut;
    } else {
      ++other_errors;
    }
  }
  result.Measure("streams", static_cast<double>(n), "streams");
  result.Measure("served", static_cast<double>(served), "streams");
  result.Measure("shed", static_cast<double>(shed), "streams");
  result.Measure("waiting_at_end", static_cast<double>(waiting_at_end), "streams");
  nlohmann::ordered_json j = {{"streams", n},
                              {"served", served},
                              {"shed", shed},
                              {"other_errors", other_errors},
                              {"reset_or_refused", cut},
                              {"waiting_at_end", waiting_at_end},
                              {"shed_with_retry_after", shed_with_retry_after},
                              {"extra_request_status", probe_status},
                              {"retry_after", retry_after}};
  const bool died = candidate.launch_mode() && !candidate.Running();
  if (died) {
    result.Find(Severity::kDisqualifying, "died",
                "the candidate died under overload (" +
                    candidate.process()->exit_status()->Describe() + ")",
                {context.evidence.Relative(candidate.process()->stderr_path())});
  }
  if (shed == 0 && waiting_at_end > 0) {
    result.Find(Severity::kWarning, "queues_without_bound",
                fmt::format("{} streams against a saturation of {}: none refused, {} still without "
                            "a first token after "
                            "{:.0f} s; clients wait instead of being told to retry",
                            n, context.options.saturation_concurrency, waiting_at_end,
                            Seconds(context.options.overload_duration)));
  }
  const bool extra_refused = probe_status == 429 || probe_status == 503;
  const std::size_t refusals = shed + (extra_refused ? 1 : 0);
  const std::size_t without_retry_after =
      shed - shed_with_retry_after + (extra_refused && retry_after.empty() ? 1 : 0);
  if (without_retry_after > 0) {
    result.Find(Severity::kInfo, "shed_without_retry_after",
                fmt::format("{} of {} refusals under overload carried no Retry-After header",
                            without_retry_after, refusals));
  }
  if (other_errors + cut > 0) {
    result.Find(Severity::kWarning, "errors_under_overload",
                fmt::format("{} streams ended with errors other than a 429/503 refusal",
                            other_errors + cut));
  }
  // Recovery after the load stops.
  std::optional<double> recovered_after;
  while (!died && !context.stop &&
         std::chrono::steady_clock::now() - load_stopped < kOverloadRecovery) {
    if (candidate.Generate("Hello", 1, seconds(5)).ok) {
      recovered_after = Seconds(std::chrono::steady_clock::now() - load_stopped);
      break;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  j["recovered_after_s"] =
      recovered_after ? nlohmann::json(*recovered_after) : nlohmann::json(nullptr);
  if (recovered_after) {
    result.Measure("recovery", *recovered_after, "s");
  } else if (!died) {
    result.Find(
        Severity::kDisqualifying, "no_recovery",
        fmt::format("no request succeeded in the {:.0f} s after the overload stopped; "
                    "its {} streams were closed then, {} of them still unanswered and "
                    "{} mid-answer: an engine that keeps generating for closed streams "
                    "(see the cancellation probe) is still working through that backlog",
                    Seconds(kOverloadRecovery), n, waiting_at_end, batch_started_unfinished));
  }
  // One prompt far past the context (and so past any KV capacity): a clear 4xx, not a hang or a
  // crash. Streamed, so an engine that accepts it is seen answering, not taken for a hang.
  if (!died && recovered_after) {
    Result<target::TargetFacts> facts = candidate.Facts();
    const std::uint64_t context_tokens =
        facts.ok() ? facts->max_context_tokens.value_or(32768) : 32768;
    const std::size_t words =
        static_cast<std::size_t>(std::min<std::uint64_t>(context_tokens * 2, 1'000'000));
    // One text past the context on a pooling route.
    const auto oversized_bodies = [&](std::size_t w) {
      return dialect::ApiGenerates(candidate.spec().api) ? StreamingBodies(candidate, 1, 16, w)
                                                         : PoolingBodies(candidate, 1, 1, w);
    };
    StreamBatch oversized(candidate, candidate.OptionsWithin(2 * context.options.answer_within),
                          oversized_bodies(words));
    const MonoTime sent = std::chrono::steady_clock::now();
    // A first token or the end; a whole (pooling) answer is only there at its end.
    if (oversized.streaming()) oversized.WaitStarted(1, context.options.answer_within);
    const measure::RequestRecord r =
        oversized.Finish(oversized.streaming() ? Nanos{0} : context.options.answer_within).front();
    const std::string exchange = context.evidence.Write(
        "oversized_prompt.json",
        nlohmann::ordered_json{{"prompt_words", words},
                               {"context_tokens", context_tokens},
                               {"outcome", measure::OutcomeName(r.outcome)},
                               {"http_status", r.http_status},
                               {"error", r.error},
                               {"took_s", Seconds(std::chrono::steady_clock::now() - sent)}}
                .dump(2) +
            "\n");
    j["oversized_prompt_status"] = r.http_status;
    const std::string what =
        fmt::format("one prompt of {} words against a context of {} tokens", words, context_tokens);
    if (candidate.launch_mode() && !candidate.Running()) {
      result.Find(Severity::kDisqualifying, "crash_on_oversized_prompt",
                  what + " killed the candidate", {exchange});
    } else if (!r.headers_received) {
      result.Find(Severity::kDisqualifying, "hang_on_oversized_prompt",
                  fmt::format("{} got no answer within {:.0f} s", what,
                              Seconds(context.options.answer_within)),
                  {exchange});
    } else if (r.http_status >= 500) {
      result.Find(Severity::kWarning, "server_error_on_oversized_prompt",
                  fmt::format("{} got HTTP {} instead of a 4xx", what, r.http_status), {exchange});
    } else if (r.http_status >= 200 && r.http_status < 300) {
      result.Find(
          Severity::kWarning, "oversized_prompt_accepted",
          what + " was answered (2xx): the prompt was cut or the limit is not checked up front",
          {exchange});
    }
  }
  const std::string evidence = context.evidence.Write("overload.json", DumpJson(j, 2));
  for (Finding& finding : result.findings) finding.evidence.push_back(evidence);
}

}  // namespace bakeoff::qualify
