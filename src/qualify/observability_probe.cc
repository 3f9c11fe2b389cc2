// qualify/observability_probe.cc
//
// Owns: the observability probe: scrapes the candidate's Prometheus page, reports which canonical
// signals an operator needs are present and under which metric (target/metric_names.h), and when
// the counters move: scraped before a stream, in the middle of it and after it ended, a counter
// that rose mid-stream moves "during the request", one that rose only afterwards "at request
// end", one that never rose "never"; the running gauge must show the stream while it runs.
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"
#include "dialect/openai.h"
#include "qualify/metrics_scrape.h"
#include "qualify/probes.h"
#include "qualify/stream_batch.h"

namespace bakeoff::qualify {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

}  // namespace

void ProbeObservability(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  const MetricsScrape before = ScrapeMetrics(candidate);
  const std::string page_evidence = context.evidence.Write("metrics_before.txt", before.body);
  if (!before.page) {
    result.Find(
        Severity::kDisqualifying, "no_metrics",
        fmt::format("GET {} gave no Prometheus page ({}): operators would run this engine blind",
                    candidate.spec().metrics_path, before.error),
        {page_evidence});
    return;
  }
  if (!before.page->warnings.empty()) {
    result.Find(Severity::kInfo, "unparsable_lines",
                fmt::format("{} lines of the metrics page could not be read (first: {})",
                            before.page->warnings.size(), before.page->warnings.front()),
                {page_evidence});
  }
  // One stream (a pooling route: one request of long texts), scraped in the middle and after.
  const bool generates = dialect::ApiGenerates(candidate.spec().api);
  StreamBatch batch(candidate, candidate.OptionsWithin(4 * context.options.answer_within),
                    WorkBodies(candidate, 1, context.options.long_output_tokens * 2, 512));
  // A few tokens in, so per-token counters have had something to count; a fast engine may finish
  // the stream before the scrape, and then what moves "during" it is not known (said so).
  batch.WaitStarted(1, context.options.answer_within);
  std::this_thread::sleep_for(milliseconds(20));
  const MetricsScrape during = ScrapeMetrics(candidate);
  const bool still_running = batch.Ended() == 0;
  const std::vector<measure::RequestRecord> records =
      batch.Finish(std::min<Nanos>(context.Remaining(), 4 * context.options.answer_within));
  std::this_thread::sleep_for(milliseconds(300));  // engines may update counters just after the end
  const MetricsScrape after = ScrapeMetrics(candidate);
  context.evidence.Write("metrics_during.txt", during.body);
  context.evidence.Write("metrics_after.txt", after.body);

  nlohmann::ordered_json j;
  std::vector<std::string> missing_essential;
  for (const target::SignalInfo& signal : target::CanonicalSignals()) {
    const target::MetricFamilyName* family = FindSignal(*before.page, signal);
    if (family == nullptr && after.page) family = FindSignal(*after.page, signal);
    // A pooling answer has no token stream: nothing to time to a first token or between tokens.
    const bool of_generation = signal.signal == target::Signal::kTtft ||
                               signal.signal == target::Signal::kInterTokenLatency ||
                               signal.signal == target::Signal::kGenerationTokens;
    if (family == nullptr) {
      result.AddCheck(std::string(signal.name), CheckStatus::kFail,
                      fmt::format("no metric for {}", signal.meaning));
      if (signal.essential && (generates || !of_generation)) missing_essential.emplace_back(signal.name);
      j[std::string(signal.name)] = {{"present", false}};
      continue;
    }
    // NaN when a scrape could not read it.
    constexpr double kUnread = std::numeric_limits<double>::quiet_NaN();
    const double v0 = FamilyValue(*before.page, *family).value_or(kUnread);
    const double v1 = during.page ? FamilyValue(*during.page, *family).value_or(kUnread) : kUnread;
    const double v2 = after.page ? FamilyValue(*after.page, *family).value_or(kUnread) : kUnread;
    std::string movement;
    if (family->kind == target::SignalKind::kGauge) {
      movement = still_running
                     ? fmt::format("{} during the stream, {} after", v1, v2)
                     : fmt::format("{} after (the stream ended before the mid-stream scrape)", v2);
    } else if (still_running && v1 > v0) {
      movement = "during the request (moved before it ended)";
    } else if (v2 > v0) {
      movement = still_running
                     ? "at request end"
                     : "by the request's end (the stream ended before the mid-stream scrape)";
    } else {
      movement = "never (did not move for a whole request)";
    }
    result.AddCheck(std::string(signal.name), CheckStatus::kPass,
                    fmt::format("{} ({} name); {}", family->family, family->engine, movement));
    j[std::string(signal.name)] = {{"present", true},
                                   {"metric", family->family},
                                   {"engine", family->engine},
                                   {"movement", movement}};
    if (signal.signal == target::Signal::kRunning && still_running && !(v1 >= 1)) {
      result.Find(Severity::kWarning, "running_gauge_blind",
                  fmt::format("{} read {} while a request was running", family->family, v1));
    }
    // Every completed request must move these; prefix hits and preemptions need more than one.
    const bool moves_per_request = signal.signal == target::Signal::kTtft ||
                                   signal.signal == target::Signal::kE2eLatency ||
                                   signal.signal == target::Signal::kPromptTokens ||
                                   signal.signal == target::Signal::kGenerationTokens;
    if (moves_per_request && (generates || !of_generation) && movement.starts_with("never") &&
        records.front().outcome == measure::Outcome::kOk) {
      result.Find(Severity::kWarning, std::string(signal.name) + "_never_moves",
                  fmt::format("{} did not move for a completed request", family->family));
    }
  }
  const std::string evidence = context.evidence.Write("signals.json", DumpJson(j, 2));
  if (!missing_essential.empty()) {
    result.Find(Severity::kWarning, "missing_signals",
                fmt::format("no metric for: {} (an operator needs these to run it)",
                            fmt::join(missing_essential, ", ")),
                {evidence, page_evidence});
  }
}

}  // namespace bakeoff::qualify
