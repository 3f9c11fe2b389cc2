#include "analyze/step_analysis.h"

#include <gtest/gtest.h>

namespace bakeoff::analyze {
namespace {

using measure::Outcome;
using measure::Phase;
using measure::RequestRecord;
using measure::TokenEvent;
using std::chrono::milliseconds;

const MonoTime kT0{std::chrono::seconds(1000)};

// A request sent at `send_ms` (intended `intended_ms`) whose token events arrive at the given
// offsets from send start, each carrying `tokens_per_event` tokens.
RequestRecord Request(std::uint64_t id, double intended_ms, double send_ms,
                      std::vector<double> token_ms, std::uint32_t tokens_per_event = 1,
                      std::optional<std::uint64_t> usage = std::nullopt) {
  RequestRecord r;
  r.id = id;
  r.intended_send = kT0 + FromMillis(intended_ms);
  r.send_start = kT0 + FromMillis(send_ms);
  r.first_chunk = *r.send_start + FromMillis(token_ms.front() - 1);
  for (double t : token_ms) {
    TokenEvent e;
    e.at = *r.send_start + FromMillis(t);
    e.tokens = tokens_per_event;
    e.counted = tokens_per_event != 1;
    r.token_events.push_back(e);
    r.counted_tokens += tokens_per_event;
  }
  r.first_token = r.first_answer_token = r.token_events.front().at;
  r.last_token = r.token_events.back().at;
  r.finished = *r.last_token + milliseconds(1);
  r.usage_completion_tokens = usage;
  r.outcome = Outcome::kOk;
  r.http_status = 200;
  return r;
}

// A step whose recorder was fed `records` (as the runner's workers feed theirs), checking each
// request against `slo`'s thresholds.
load::StepResult Step(const std::vector<RequestRecord>& records, const Slo& slo = {}) {
  load::StepResult step;
  step.spec.label = "test";
  step.recorder = measure::StepRecorder(slo.RequestThresholds());
  for (const RequestRecord& r : records) step.recorder.Add(r);
  step.planned = records.size();
  return step;
}

TEST(StepAnalysisTest, SingleRequestFigures) {
  // Tokens at 100, 110, 120, 130 ms after send: TTFT 100, TPOT 10, E2E 131.
  const StepAnalysis a = AnalyzeStep(Step({Request(0, 0, 2, {100, 110, 120, 130})}), {});
  EXPECT_EQ(a.measured_requests, 1u);
  EXPECT_NEAR(a.ttft_ms.p50.value, 100, 1e-6);
  EXPECT_NEAR(a.tpot_ms.p50.value, 10, 1e-6);
  EXPECT_NEAR(a.e2e_ms.p50.value, 131, 1e-6);
  EXPECT_NEAR(a.response_ms.p50.value, 133, 1e-6);  // from the intended send, 2 ms earlier
  EXPECT_NEAR(a.send_lag_ms.p50.value, 2, 1e-6);
  EXPECT_EQ(a.itl_event_ms.count, 3u);
  EXPECT_TRUE(a.output_tokens_estimated);
  // vLLM's TTFT ends at the first chunk (1 ms earlier here); GuideLLM's TPOT includes TTFT.
  EXPECT_NEAR(a.vllm.ttft_ms.p50.value, 99, 1e-6);
  EXPECT_NEAR(a.guidellm.tpot_ms.p50.value, 130.0 / 4, 1e-6);
}

TEST(StepAnalysisTest, MultiTokenEventsSplitIntoPerTokenGaps) {
  // Events of 3 tokens every 30 ms: per-event gap 30 ms, per-token gap 10 ms.
  const StepAnalysis a =
      AnalyzeStep(Step({Request(0, 0, 0, {50, 80, 110}, 3, /*usage=*/9)}), {});
  EXPECT_EQ(a.itl_event_ms.count, 2u);
  EXPECT_NEAR(a.itl_event_ms.p50.value, 30, 1e-6);
  EXPECT_EQ(a.itl_token_ms.count, 6u);
  EXPECT_NEAR(a.itl_token_ms.p50.value, 10, 1e-6);
  EXPECT_NEAR(a.tpot_ms.p50.value, 60.0 / 8, 1e-6);
  EXPECT_FALSE(a.output_tokens_estimated);
}

TEST(StepAnalysisTest, WarmupExcludedAndFailuresCounted) {
  RequestRecord warm = Request(0, 0, 0, {500, 510});
  warm.phase = Phase::kWarmup;
  RequestRecord failed;
  failed.id = 2;
  failed.intended_send = kT0;
  failed.send_start = kT0;
  failed.finished = kT0 + milliseconds(5);
  failed.outcome = Outcome::kConnectFailed;
  failed.error = "request #2: connect_failed: refused";
  const StepAnalysis a = AnalyzeStep(Step({warm, Request(1, 0, 0, {100, 110}), failed}), {});
  EXPECT_EQ(a.warmup_requests, 1u);
  EXPECT_EQ(a.measured_requests, 2u);
  EXPECT_EQ(a.outcomes.at("ok"), 1u);
  EXPECT_EQ(a.outcomes.at("connect_failed"), 1u);
  ASSERT_EQ(a.error_examples.size(), 1u);
  EXPECT_EQ(a.ttft_ms.count, 1u);
  EXPECT_NEAR(a.ttft_ms.p50.value, 100, 1e-6);
}

TEST(StepAnalysisTest, GoodputCountsOnlyRequestsMeetingEveryTerm) {
  std::vector<RequestRecord> records;
  // TTFTs 100..1000 ms, 10 requests, all TPOT 10 ms, sent 100 ms apart.
  for (int i = 0; i < 10; ++i) {
    const double ttft = 100.0 * (i + 1);
    records.push_back(Request(i, 100 * i, 100 * i, {ttft, ttft + 10}));
  }
  const auto slo = ParseSlo("ttft_p90=500ms,tpot_p99=20ms");
  ASSERT_TRUE(slo.ok());
  const StepAnalysis a = AnalyzeStep(Step(records, slo.value()), slo.value());
  EXPECT_NEAR(a.slo_attainment, 0.5, 1e-9);  // TTFT 100..500 meet it
  EXPECT_NEAR(a.goodput_per_s, 5 / a.duration_s, 1e-9);
  ASSERT_EQ(a.slo.size(), 2u);
  EXPECT_FALSE(a.slo[0].met);  // p90 TTFT is 900 ms
  EXPECT_NEAR(a.slo[0].observed_ms, 900, 1e-6);
  EXPECT_TRUE(a.slo[1].met);
}

TEST(StepAnalysisTest, LargeSendLagMarksGeneratorLimited) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 100; ++i) records.push_back(Request(i, 10 * i, 10 * i + (i % 10 == 0 ? 50 : 0), {20, 30}));
  const StepAnalysis a = AnalyzeStep(Step(records), {});
  EXPECT_TRUE(a.generator_limited);
  ASSERT_FALSE(a.generator_limited_reasons.empty());
  EXPECT_NE(a.generator_limited_reasons[0].find("send lag"), std::string::npos);
  const StepAnalysis calm = AnalyzeStep(Step({Request(0, 0, 0.1, {20, 30})}), {});
  EXPECT_FALSE(calm.generator_limited);
}

TEST(StepAnalysisTest, JsonHasConventionsAndBounds) {
  const nlohmann::json j = ToJson(AnalyzeStep(Step({Request(0, 0, 0, {100, 110, 120})}), {}));
  EXPECT_TRUE(j["conventions"].contains("vllm"));
  EXPECT_TRUE(j["conventions"].contains("aiperf"));
  EXPECT_TRUE(j["conventions"].contains("guidellm"));
  EXPECT_EQ(j["latency"]["ttft_ms"]["count"], 1);
  EXPECT_FALSE(j["latency"]["ttft_ms"]["p99"]["bounded"].get<bool>());
}

TEST(StepAnalysisTest, WorkersRecordersMergedGiveTheSameSummary) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 300; ++i) {
    records.push_back(Request(i, 5 * i, 5 * i + 0.01 * (i % 7), {20.0 + i % 13, 31.0 + i % 5, 40.0 + i % 11}));
  }
  RequestRecord failed;
  failed.id = 300;
  failed.intended_send = failed.send_start.emplace(kT0);
  failed.outcome = Outcome::kReset;
  failed.error = "request #300: reset";
  records.push_back(failed);
  const auto slo = ParseSlo("ttft_p99=30ms");
  ASSERT_TRUE(slo.ok());
  load::StepResult merged = Step({}, slo.value());
  merged.planned = records.size();
  for (int w = 0; w < 3; ++w) {
    measure::StepRecorder worker(slo->RequestThresholds());
    for (std::size_t i = w; i < records.size(); i += 3) worker.Add(records[i]);
    merged.recorder.Merge(worker);
  }
  EXPECT_EQ(ToJson(AnalyzeStep(merged, slo.value())), ToJson(AnalyzeStep(Step(records, slo.value()), slo.value())));
}

TEST(StepAnalysisTest, JsonSaysWhetherPercentilesAreExact) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 500; ++i) records.push_back(Request(i, 2 * i, 2 * i, {10.0 + i % 17, 20.0 + i % 3}));
  const nlohmann::json exact = ToJson(AnalyzeStep(Step(records), {}));
  EXPECT_TRUE(exact["latency"]["ttft_ms"]["percentiles_exact"].get<bool>());
  EXPECT_EQ(exact["latency"]["ttft_ms"]["percentile_max_relative_error"], 0.0);

  // The same requests through sketches capped at 100 samples: approximate, within the bound.
  load::StepResult capped;
  capped.spec.label = "test";
  capped.planned = records.size();
  capped.recorder = measure::StepRecorder({}, 100);
  for (const RequestRecord& r : records) capped.recorder.Add(r);
  const nlohmann::json approx = ToJson(AnalyzeStep(capped, {}));
  const nlohmann::json& ttft = approx["latency"]["ttft_ms"];
  EXPECT_FALSE(ttft["percentiles_exact"].get<bool>());
  EXPECT_EQ(ttft["percentile_max_relative_error"], stats::QuantileSketch::kMaxRelativeError);
  EXPECT_EQ(ttft["count"], 500);
  EXPECT_EQ(ttft["min"], exact["latency"]["ttft_ms"]["min"]);
  EXPECT_EQ(ttft["max"], exact["latency"]["ttft_ms"]["max"]);
  for (const char* p : {"p50", "p90", "p99"}) {
    const double want = exact["latency"]["ttft_ms"][p]["value"];
    EXPECT_NEAR(ttft[p]["value"].get<double>(), want, want * stats::QuantileSketch::kMaxRelativeError) << p;
  }
  EXPECT_EQ(approx["requests"], exact["requests"]);
  EXPECT_EQ(approx["throughput"], exact["throughput"]);
}

}  // namespace
}  // namespace bakeoff::analyze

namespace bakeoff::analyze {
namespace {

TEST(StepAnalysisTest, SaturatedClientThreadMarksGeneratorLimited) {
  load::StepResult step;
  step.busiest_worker_cpu = 0.97;
  const StepAnalysis a = AnalyzeStep(step, {});
  EXPECT_TRUE(a.generator_limited);
  ASSERT_EQ(a.generator_limited_reasons.size(), 1u);
  EXPECT_NE(a.generator_limited_reasons[0].find("97%"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::analyze
