#include "analyze/step_analysis.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/check.h"

namespace bakeoff::analyze {
namespace {

using measure::Outcome;
using measure::Phase;
using measure::RequestRecord;

constexpr std::size_t kMaxErrorExamples = 5;

double Ms(Nanos d) { return ToMillis(d); }

// Per-request figures, in ms; NaN when the request did not have them.
struct RequestFigures {
  double ttft = std::numeric_limits<double>::quiet_NaN();
  double tpot = std::numeric_limits<double>::quiet_NaN();
  double e2e = std::numeric_limits<double>::quiet_NaN();
  double itl_max = 0;  // worst per-token gap: the per-request ITL figure an SLO is checked against
};

// The summary's estimate for an SLO term's percentile (ParseSlo admits exactly these).
const stats::QuantileEstimate& SummaryQuantile(const stats::Summary& s, double q) {
  if (q == 0.50) return s.p50;
  if (q == 0.90) return s.p90;
  if (q == 0.95) return s.p95;
  if (q == 0.99) return s.p99;
  BAKEOFF_CHECK(q == 0.999) << "no summary percentile for q=" << q;
  return s.p999;
}

bool MeetsTerm(const SloTerm& term, const RequestFigures& f) {
  double value = 0;
  switch (term.metric) {
    case SloMetric::kTtft: value = f.ttft; break;
    case SloMetric::kTpot: value = f.tpot; break;
    case SloMetric::kItl: value = f.itl_max; break;
    case SloMetric::kE2e: value = f.e2e; break;
  }
  // A request without the figure (one output token has no TPOT) does not fail that term.
  return std::isnan(value) || value <= term.threshold_ms;
}

}  // namespace

StepAnalysis AnalyzeStep(const load::StepResult& step, const Slo& slo) {
  StepAnalysis a;
  a.label = step.spec.label;
  a.planned = step.planned;
  a.interrupted = step.interrupted;
  a.session_turns_skipped = step.session_turns_skipped;
  a.stopped_reason = step.stopped_reason;
  a.backoff_waits = step.backoff_waits;
  a.backoff_total_s = ToSeconds(step.backoff_total);

  std::vector<double> ttft, ttft_answer, itl_event, itl_token, tpot, e2e, response, send_lag;
  std::vector<double> output_tokens, prompt_tokens;
  std::vector<double> vllm_ttft, vllm_tpot, vllm_e2e;
  std::vector<double> guidellm_tpot;
  std::set<std::string> error_kinds;
  std::optional<MonoTime> window_start;
  std::optional<MonoTime> window_end;
  std::uint64_t ok_count = 0;
  std::uint64_t good_count = 0;
  double input_tokens_total = 0;
  double output_tokens_total = 0;

  for (const RequestRecord& r : step.records) {
    if (r.phase == Phase::kWarmup) {
      ++a.warmup_requests;
      continue;
    }
    ++a.measured_requests;
    ++a.outcomes[measure::OutcomeName(r.outcome)];
    if (r.send_start) {
      send_lag.push_back(Ms(*r.send_start - r.intended_send));
      window_start = std::min(window_start.value_or(*r.send_start), *r.send_start);
    }
    if (r.finished) window_end = std::max(window_end.value_or(*r.finished), *r.finished);
    if (r.outcome != Outcome::kOk) {
      // Keep one example per kind of failure (the text before the request number varies).
      const std::string kind = measure::OutcomeName(r.outcome);
      if (error_kinds.insert(kind).second && a.error_examples.size() < kMaxErrorExamples) {
        a.error_examples.push_back(r.error);
      }
      continue;
    }
    ++ok_count;
    RequestFigures f;
    const MonoTime start = *r.send_start;
    const std::uint64_t n = r.OutputTokens();
    if (r.OutputTokensEstimated()) a.output_tokens_estimated = true;
    output_tokens.push_back(static_cast<double>(n));
    output_tokens_total += static_cast<double>(n);
    if (r.usage_prompt_tokens) {
      a.prompt_tokens_from_server = true;
      prompt_tokens.push_back(static_cast<double>(*r.usage_prompt_tokens));
      input_tokens_total += static_cast<double>(*r.usage_prompt_tokens);
    } else {
      input_tokens_total += r.prompt_tokens_planned;
    }
    if (r.finished) {
      f.e2e = Ms(*r.finished - start);
      e2e.push_back(f.e2e);
      response.push_back(Ms(*r.finished - r.intended_send));
    }
    if (r.first_token) {
      f.ttft = Ms(*r.first_token - start);
      ttft.push_back(f.ttft);
    }
    if (r.first_answer_token) ttft_answer.push_back(Ms(*r.first_answer_token - start));
    if (r.first_token && r.last_token && n > 1) {
      f.tpot = Ms(*r.last_token - *r.first_token) / static_cast<double>(n - 1);
      tpot.push_back(f.tpot);
    }
    for (std::size_t i = 1; i < r.token_events.size(); ++i) {
      const double gap = Ms(r.token_events[i].at - r.token_events[i - 1].at);
      itl_event.push_back(gap);
      const std::uint32_t tokens = std::max<std::uint32_t>(1, r.token_events[i].tokens);
      for (std::uint32_t t = 0; t < tokens; ++t) itl_token.push_back(gap / tokens);
      f.itl_max = std::max(f.itl_max, gap / tokens);
    }
    // vLLM: TTFT at the first chunk with choices (even an empty role chunk), E2E at the last
    // token-bearing chunk, TPOT = (E2E - TTFT) / (N - 1).
    const MonoTime vllm_first = r.first_chunk.value_or(r.first_token.value_or(start));
    if (r.first_chunk || r.first_token) vllm_ttft.push_back(Ms(vllm_first - start));
    if (r.last_token) {
      vllm_e2e.push_back(Ms(*r.last_token - start));
      if (n > 1) vllm_tpot.push_back(Ms(*r.last_token - vllm_first) / static_cast<double>(n - 1));
      // GuideLLM: TPOT = (t_last - t_start) / N, which includes TTFT.
      if (n > 0) guidellm_tpot.push_back(Ms(*r.last_token - start) / static_cast<double>(n));
    }
    bool good = true;
    for (const SloTerm& term : slo.terms) good = good && MeetsTerm(term, f);
    if (good) ++good_count;
  }

  a.duration_s = window_start && window_end ? ToSeconds(*window_end - *window_start) : 0;
  if (a.duration_s > 0) {
    a.request_rate_per_s = static_cast<double>(ok_count) / a.duration_s;
    a.offered_rate_per_s = static_cast<double>(send_lag.size()) / a.duration_s;
    a.input_tokens_per_s = input_tokens_total / a.duration_s;
    a.output_tokens_per_s = output_tokens_total / a.duration_s;
    a.goodput_per_s = static_cast<double>(good_count) / a.duration_s;
  }
  if (a.measured_requests > 0) {
    a.slo_attainment = static_cast<double>(good_count) / static_cast<double>(a.measured_requests);
  }
  // The pooled samples are not needed after this; moving them spares a copy of each.
  a.ttft_ms = stats::Summarize(std::move(ttft));
  a.ttft_answer_ms = stats::Summarize(std::move(ttft_answer));
  a.itl_event_ms = stats::Summarize(std::move(itl_event));
  a.itl_token_ms = stats::Summarize(std::move(itl_token));
  a.tpot_ms = stats::Summarize(std::move(tpot));
  a.e2e_ms = stats::Summarize(std::move(e2e));
  a.response_ms = stats::Summarize(std::move(response));
  a.send_lag_ms = stats::Summarize(std::move(send_lag));
  a.loop_lag_ms = stats::Summarize(step.loop_lag_ms);
  a.output_tokens = stats::Summarize(output_tokens);
  // Each term's pooled percentile, read from the summary computed once above.
  for (const SloTerm& term : slo.terms) {
    const stats::Summary* summary = nullptr;
    switch (term.metric) {
      case SloMetric::kTtft: summary = &a.ttft_ms; break;
      case SloMetric::kTpot: summary = &a.tpot_ms; break;
      case SloMetric::kItl: summary = &a.itl_token_ms; break;
      case SloMetric::kE2e: summary = &a.e2e_ms; break;
    }
    SloResult result{term, std::numeric_limits<double>::quiet_NaN(), false};
    if (summary->count > 0) {
      result.observed_ms = SummaryQuantile(*summary, term.quantile).value;
      result.met = result.observed_ms <= term.threshold_ms;
    }
    a.slo.push_back(result);
  }
  a.prompt_tokens = stats::Summarize(prompt_tokens);

  // vLLM's ITL pools chunk gaps; AIPerf's ITL is vLLM's TPOT and its chunk gaps are "ICL";
  // GuideLLM's ITL is (t_last - t_first)/(N - 1) and its TPOT includes TTFT.
  a.vllm = ConventionFigures{stats::Summarize(vllm_ttft), a.itl_event_ms, stats::Summarize(vllm_tpot),
                             stats::Summarize(vllm_e2e)};
  a.aiperf = ConventionFigures{a.ttft_ms, a.tpot_ms, a.tpot_ms, stats::Summarize(vllm_e2e)};
  a.guidellm = ConventionFigures{a.ttft_ms, a.tpot_ms, stats::Summarize(guidellm_tpot), a.e2e_ms};

  if (a.send_lag_ms.count > 0 && a.send_lag_ms.p99.value > kGeneratorLimitedSendLagP99Ms) {
    a.generator_limited = true;
    a.generator_limited_reasons.push_back(
        "send lag p99 " + std::to_string(a.send_lag_ms.p99.value) + " ms > " +
        std::to_string(kGeneratorLimitedSendLagP99Ms) + " ms");
  }
  if (a.loop_lag_ms.count > 0 && a.loop_lag_ms.p99.value > kGeneratorLimitedLoopLagP99Ms) {
    a.generator_limited = true;
    a.generator_limited_reasons.push_back(
        "event-loop lag p99 " + std::to_string(a.loop_lag_ms.p99.value) + " ms > " +
        std::to_string(kGeneratorLimitedLoopLagP99Ms) + " ms");
  }
  a.busiest_worker_cpu = step.busiest_worker_cpu;
  if (a.busiest_worker_cpu > kGeneratorLimitedWorkerCpu) {
    a.generator_limited = true;
    a.generator_limited_reasons.push_back(
        "busiest client thread used " + std::to_string(static_cast<int>(100 * a.busiest_worker_cpu)) +
        "% of a core > " + std::to_string(static_cast<int>(100 * kGeneratorLimitedWorkerCpu)) + "%");
  }
  return a;
}

nlohmann::json ToJson(const stats::Summary& s) {
  nlohmann::json j;
  j["count"] = s.count;
  if (s.count == 0) return j;
  j["mean"] = s.mean;
  j["stddev"] = s.stddev;
  j["min"] = s.min;
  j["max"] = s.max;
  const auto quantile = [](const stats::QuantileEstimate& q) {
    nlohmann::json e = {{"value", q.value}, {"bounded", q.bounded}};
    if (q.bounded) e["ci95"] = {q.lower, q.upper};
    return e;
  };
  j["p50"] = quantile(s.p50);
  j["p90"] = quantile(s.p90);
  j["p95"] = quantile(s.p95);
  j["p99"] = quantile(s.p99);
  j["p99_9"] = quantile(s.p999);
  return j;
}

namespace {

nlohmann::json ConventionToJson(const ConventionFigures& c, const char* itl_note, const char* tpot_note) {
  return {{"ttft_ms", ToJson(c.ttft_ms)},
          {"itl_ms", ToJson(c.itl_ms)},
          {"itl_definition", itl_note},
          {"tpot_ms", ToJson(c.tpot_ms)},
          {"tpot_definition", tpot_note},
          {"e2e_ms", ToJson(c.e2e_ms)}};
}

}  // namespace

nlohmann::json ToJson(const StepAnalysis& a) {
  nlohmann::json j;
  j["label"] = a.label;
  j["interrupted"] = a.interrupted;
  if (!a.stopped_reason.empty()) j["stopped_reason"] = a.stopped_reason;
  j["connection_backoff"] = {{"waits", a.backoff_waits}, {"total_s", a.backoff_total_s}};
  j["requests"] = {{"planned", a.planned},
                   {"warmup", a.warmup_requests},
                   {"measured", a.measured_requests},
                   {"outcomes", a.outcomes},
                   {"error_examples", a.error_examples},
                   {"session_turns_skipped", a.session_turns_skipped}};
  j["duration_s"] = a.duration_s;
  j["throughput"] = {{"requests_per_s", a.request_rate_per_s},
                     {"offered_requests_per_s", a.offered_rate_per_s},
                     {"input_tokens_per_s", a.input_tokens_per_s},
                     {"output_tokens_per_s", a.output_tokens_per_s},
                     {"output_tokens_estimated", a.output_tokens_estimated},
                     {"input_tokens_from_server", a.prompt_tokens_from_server}};
  j["latency"] = {{"ttft_ms", ToJson(a.ttft_ms)},
                  {"ttft_answer_ms", ToJson(a.ttft_answer_ms)},
                  {"itl_event_ms", ToJson(a.itl_event_ms)},
                  {"itl_token_ms", ToJson(a.itl_token_ms)},
                  {"tpot_ms", ToJson(a.tpot_ms)},
                  {"e2e_ms", ToJson(a.e2e_ms)},
                  {"response_time_ms", ToJson(a.response_ms)},
                  {"send_lag_ms", ToJson(a.send_lag_ms)},
                  {"event_loop_lag_ms", ToJson(a.loop_lag_ms)}};
  j["tokens"] = {{"output", ToJson(a.output_tokens)}, {"prompt", ToJson(a.prompt_tokens)}};
  nlohmann::json slo = nlohmann::json::array();
  for (const SloResult& r : a.slo) {
    slo.push_back({{"term", r.term.text},
                   {"metric", SloMetricName(r.term.metric)},
                   {"quantile", r.term.quantile},
                   {"threshold_ms", r.term.threshold_ms},
                   {"observed_ms", r.observed_ms},
                   {"met", r.met}});
  }
  j["slo"] = {{"terms", slo}, {"attainment", a.slo_attainment}, {"goodput_per_s", a.goodput_per_s}};
  j["generator_limited"] = {{"limited", a.generator_limited},
                            {"reasons", a.generator_limited_reasons},
                            {"busiest_worker_cpu", a.busiest_worker_cpu},
                            {"worker_cpu_threshold", kGeneratorLimitedWorkerCpu},
                            {"send_lag_p99_threshold_ms", kGeneratorLimitedSendLagP99Ms},
                            {"event_loop_lag_p99_threshold_ms", kGeneratorLimitedLoopLagP99Ms}};
  j["conventions"] = {
      {"vllm", ConventionToJson(a.vllm, "gaps between token-bearing chunks, pooled",
                      "(last token - first chunk) / (output tokens - 1), per request")},
      {"aiperf", ConventionToJson(a.aiperf, "(last token - first token) / (output tokens - 1), per request",
                        "not a separate metric in AIPerf; same as its ITL")},
      {"guidellm",
       ConventionToJson(a.guidellm, "(last token - first token) / (output tokens - 1), per request",
              "(last token - request start) / output tokens, includes TTFT")}};
  return j;
}

}  // namespace bakeoff::analyze
