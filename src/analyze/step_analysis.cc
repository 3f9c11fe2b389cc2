#include "analyze/step_analysis.h"

#include <cmath>
#include <limits>

#include "core/check.h"

namespace bakeoff::analyze {
namespace {

// The summary's estimate for an SLO term's percentile (ParseSlo admits exactly these).
const stats::QuantileEstimate& SummaryQuantile(const stats::Summary& s, double q) {
  if (q == 0.50) return s.p50;
  if (q == 0.90) return s.p90;
  if (q == 0.95) return s.p95;
  if (q == 0.99) return s.p99;
  BAKEOFF_CHECK(q == 0.999) << "no summary percentile for q=" << q;
  return s.p999;
}

}  // namespace

std::vector<double> LatencyCurveNines() {
  constexpr int kPoints = 161;
  std::vector<double> nines;
  for (int i = 0; i < kPoints; ++i) nines.push_back(4.0 * i / (kPoints - 1));
  return nines;
}

std::vector<double> LatencyCurveQuantiles() {
  std::vector<double> qs;
  for (double x : LatencyCurveNines()) qs.push_back(1 - std::pow(10.0, -x));
  return qs;
}

StepAnalysis AnalyzeStep(const load::StepResult& step, const Slo& slo) {
  const measure::StepRecorder& recorder = step.recorder;
  BAKEOFF_CHECK(recorder.slo() == slo.RequestThresholds())
      << "the step was recorded against other SLO thresholds than it is analysed with";
  const measure::StepCounts& c = recorder.counts();
  const measure::StepSketches& k = recorder.sketches();
  StepAnalysis a;
  a.label = step.spec.label;
  a.planned = step.planned;
  a.interrupted = step.interrupted;
  a.session_turns_skipped = step.session_turns_skipped;
  a.stopped_reason = step.stopped_reason;
  a.backoff_waits = step.backoff_waits;
  a.backoff_total_s = ToSeconds(step.backoff_total);
  a.warmup_requests = c.warmup;
  a.stale_retries = c.stale_retries;
  a.measured_requests = c.measured;
  a.ok_requests = c.ok;
  a.good_requests = c.good;
  for (int i = 0; i < measure::kOutcomeCount; ++i) {
    if (c.outcomes[i] > 0) {
      a.outcomes[measure::OutcomeName(static_cast<measure::Outcome>(i))] = c.outcomes[i];
    }
  }
  a.error_examples = recorder.ErrorExamples();
  a.output_tokens_estimated = c.output_tokens_estimated;
  a.output_counted_by_server = c.output_counted_by_server;
  a.ended_before_max_tokens = c.ended_before_max_tokens;
  a.prompt_tokens_from_server = c.prompt_tokens_from_server;
  if (c.prompts_counted > 0) {
    a.prompt_planned_mean = static_cast<double>(c.prompt_tokens_planned) / static_cast<double>(c.prompts_counted);
    a.prompt_counted_mean = static_cast<double>(c.prompt_tokens_counted) / static_cast<double>(c.prompts_counted);
  }
  a.duration_s = c.first_send && c.last_finish ? ToSeconds(*c.last_finish - *c.first_send) : 0;
  if (a.duration_s > 0) {
    a.request_rate_per_s = static_cast<double>(c.ok) / a.duration_s;
    a.offered_rate_per_s = static_cast<double>(c.sent) / a.duration_s;
    a.input_tokens_per_s = static_cast<double>(c.input_tokens) / a.duration_s;
    a.output_tokens_per_s = static_cast<double>(c.output_tokens) / a.duration_s;
    a.goodput_per_s = static_cast<double>(c.good) / a.duration_s;
  }
  if (a.measured_requests > 0) {
    a.slo_attainment = static_cast<double>(c.good) / static_cast<double>(a.measured_requests);
  }
  a.ttft_ms = k.ttft_ms.Summarize();
  const std::vector<double> quantiles = LatencyCurveQuantiles();
  for (const auto& [name, sketch] : {std::pair<const char*, const stats::QuantileSketch*>{"ttft_ms", &k.ttft_ms},
                                     {"tpot_ms", &k.tpot_ms}, {"itl_token_ms", &k.itl_token_ms}, {"e2e_ms", &k.e2e_ms}}) {
    a.latency_curves[name] = sketch->Quantiles(quantiles);
  }
  a.ttft_answer_ms = k.ttft_answer_ms.Summarize();
  a.itl_event_ms = k.itl_event_ms.Summarize();
  a.itl_token_ms = k.itl_token_ms.Summarize();
  a.tpot_ms = k.tpot_ms.Summarize();
  a.e2e_ms = k.e2e_ms.Summarize();
  a.response_ms = k.response_ms.Summarize();
  a.send_lag_ms = k.send_lag_ms.Summarize();
  a.loop_lag_ms = k.loop_lag_ms.Summarize();
  a.output_tokens = k.output_tokens.Summarize();
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
  a.prompt_tokens = k.prompt_tokens.Summarize();

  // vLLM's ITL pools chunk gaps; AIPerf's ITL is vLLM's TPOT and its chunk gaps are "ICL";
  // GuideLLM's ITL is (t_last - t_first)/(N - 1) and its TPOT includes TTFT.
  const stats::Summary vllm_e2e = k.vllm_e2e_ms.Summarize();
  a.vllm = ConventionFigures{k.vllm_ttft_ms.Summarize(), a.itl_event_ms, k.vllm_tpot_ms.Summarize(),
                             vllm_e2e};
  a.aiperf = ConventionFigures{a.ttft_ms, a.tpot_ms, a.tpot_ms, vllm_e2e};
  a.guidellm = ConventionFigures{a.ttft_ms, a.tpot_ms, k.guidellm_tpot_ms.Summarize(), a.e2e_ms};

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
  j["percentiles_exact"] = s.percentiles_exact;
  j["percentile_max_relative_error"] = s.percentile_max_relative_error;
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
                   {"session_turns_skipped", a.session_turns_skipped},
                   {"stale_connection_retries", a.stale_retries}};
  j["duration_s"] = a.duration_s;
  j["throughput"] = {{"requests_per_s", a.request_rate_per_s},
                     {"offered_requests_per_s", a.offered_rate_per_s},
                     {"input_tokens_per_s", a.input_tokens_per_s},
                     {"output_tokens_per_s", a.output_tokens_per_s},
                     {"output_tokens_estimated", a.output_tokens_estimated},
                     {"output_counted_by_server", a.output_counted_by_server},
                     {"ended_before_max_tokens", a.ended_before_max_tokens},
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
  j["latency_curves"] = a.latency_curves;
  j["latency_curves"]["nines"] = LatencyCurveNines();
  j["tokens"] = {{"output", ToJson(a.output_tokens)}, {"prompt", ToJson(a.prompt_tokens)}};
  if (std::optional<double> deviation = a.PromptDeviation()) {
    j["tokens"]["prompt_length"] = {{"planned_mean", *a.prompt_planned_mean},
                                    {"counted_mean", *a.prompt_counted_mean},
                                    {"deviation", *deviation}};
  }
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
