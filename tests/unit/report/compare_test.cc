// tests/unit/report/compare_test.cc
//
// Owns: tests of comparing two runs (report/compare.h) on constructed summaries: a real 10% TTFT
// regression is found; two runs of the same figures show no change; a noisy small sample gives
// "no detectable change", not a false alarm; throughput gates only when asked; runs of different
// loads are refused (or listed with --allow-different); unequal work and emulated figures are said.
#include "report/compare.h"

#include <gtest/gtest.h>

namespace bakeoff::report {
namespace {

using nlohmann::json;

json Quantile(double value, double low, double high, bool bounded = true) {
  json q = {{"value", value}, {"bounded", bounded}};
  if (bounded) q["ci95"] = {low, high};
  return q;
}

// One step whose TTFT p50 is `ttft` with bounds +-`spread`; every other latency steady.
json Step(const std::string& label, double ttft, double spread, double tokens_per_s = 1000) {
  json latency;
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_token_ms", "e2e_ms"}) {
    json m;
    for (const char* q : {"p50", "p90", "p99"}) m[q] = Quantile(50, 48, 52);
    latency[metric] = m;
  }
  latency["ttft_ms"]["p50"] = Quantile(ttft, ttft - spread, ttft + spread);
  return {{"label", label},
          {"latency", latency},
          {"throughput", {{"output_tokens_per_s", tokens_per_s}, {"requests_per_s", tokens_per_s / 100}}},
          {"slo", {{"goodput_per_s", tokens_per_s / 100}}}};
}

json Summary(std::vector<json> steps, json config = {{"output_tokens", 128}, {"seed", 1}}) {
  return {{"schema_version", 1}, {"tool", {{"name", "bakeoff"}}}, {"config", config}, {"steps", steps},
          {"target", {{"emulated", false}}}};
}

const MetricChange& Find(const Comparison& c, const std::string& metric) {
  for (const MetricChange& m : c.changes) {
    if (m.metric == metric) return m;
  }
  ADD_FAILURE() << "no " << metric;
  return c.changes.front();
}

TEST(CompareTest, ATenPercentTtftRegressionIsFound) {
  const Result<Comparison> c =
      CompareRuns(Summary({Step("rate=4/s", 100, 3)}), Summary({Step("rate=4/s", 110, 3)}), CompareOptions{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  const MetricChange& ttft = Find(c.value(), "TTFT p50 ms");
  EXPECT_EQ(ttft.verdict, Verdict::kWorse);
  EXPECT_NEAR(ttft.relative, 0.10, 1e-9);
  EXPECT_EQ(ttft.basis, "95% bounds separate");
  EXPECT_EQ(Find(c.value(), "E2E p99 ms").verdict, Verdict::kNoDetectableChange);
  EXPECT_TRUE(c->Regressed());
  EXPECT_NE(CompareTable(c.value()).find("REGRESSED"), std::string::npos);
  EXPECT_TRUE(ToJson(c.value())["regressed"].get<bool>());
  // The same change the other way is better, not a regression.
  const Result<Comparison> back =
      CompareRuns(Summary({Step("rate=4/s", 110, 3)}), Summary({Step("rate=4/s", 100, 3)}), CompareOptions{});
  EXPECT_EQ(Find(back.value(), "TTFT p50 ms").verdict, Verdict::kBetter);
  EXPECT_FALSE(back->Regressed());
}

TEST(CompareTest, TheSameFiguresAreNoChange) {
  const json run = Summary({Step("concurrency=1", 100, 3), Step("concurrency=8", 180, 5)});
  const Result<Comparison> c = CompareRuns(run, run, CompareOptions{});
  ASSERT_TRUE(c.ok());
  for (const MetricChange& m : c->changes) EXPECT_EQ(m.verdict, Verdict::kNoDetectableChange) << m.metric;
  EXPECT_FALSE(c->Regressed());
}

TEST(CompareTest, ANoisySmallSampleIsNoDetectableChangeNotAFalseAlarm) {
  // +20%, but the bounds overlap widely; and a sample too small for bounds says so.
  const Result<Comparison> noisy =
      CompareRuns(Summary({Step("s", 100, 40)}), Summary({Step("s", 120, 40)}), CompareOptions{});
  EXPECT_EQ(Find(noisy.value(), "TTFT p50 ms").verdict, Verdict::kNoDetectableChange);
  EXPECT_EQ(Find(noisy.value(), "TTFT p50 ms").basis, "95% bounds overlap");
  json few = Step("s", 130, 0);
  few["latency"]["ttft_ms"]["p50"] = Quantile(130, 0, 0, /*bounded=*/false);
  const Result<Comparison> small = CompareRuns(Summary({Step("s", 100, 3)}), Summary({few}), CompareOptions{});
  EXPECT_EQ(Find(small.value(), "TTFT p50 ms").verdict, Verdict::kNoDetectableChange);
  EXPECT_EQ(Find(small.value(), "TTFT p50 ms").basis, "too few requests for a 95% bound");
  EXPECT_FALSE(small->Regressed());
}

TEST(CompareTest, ThroughputGatesOnlyWhenAsked) {
  const json old_run = Summary({Step("s", 100, 3, 1000)});
  const json new_run = Summary({Step("s", 100, 3, 800)});
  const Result<Comparison> c = CompareRuns(old_run, new_run, CompareOptions{});
  EXPECT_EQ(Find(c.value(), "output tok/s").verdict, Verdict::kWorse);
  EXPECT_FALSE(Find(c.value(), "output tok/s").gates);
  EXPECT_FALSE(c->Regressed());
  CompareOptions gate;
  gate.gate_throughput = true;
  EXPECT_TRUE(CompareRuns(old_run, new_run, gate)->Regressed());
  // Within the tolerance nothing is called worse.
  CompareOptions loose;
  loose.tolerance = 0.25;
  loose.gate_throughput = true;
  EXPECT_FALSE(CompareRuns(old_run, new_run, loose)->Regressed());
}

TEST(CompareTest, DifferentLoadsAreRefusedOrListedFirst) {
  const json old_run = Summary({Step("s", 100, 3)});
  const json new_run = Summary({Step("s", 100, 3)}, {{"output_tokens", 256}, {"seed", 1}});
  const Result<Comparison> refused = CompareRuns(old_run, new_run, CompareOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("output_tokens: 128 -> 256"), std::string::npos) << refused.error().message;
  CompareOptions allow;
  allow.allow_different = true;
  const Result<Comparison> listed = CompareRuns(old_run, new_run, allow);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(CompareTable(listed.value()).rfind("settings differ: output_tokens: 128 -> 256", 0), 0u);
  // No step in common: nothing to compare.
  EXPECT_FALSE(CompareRuns(old_run, Summary({Step("other", 100, 3)}), CompareOptions{}).ok());
}

TEST(CompareTest, UnequalWorkEmulatedFiguresAndUnmatchedStepsAreSaid) {
  json old_run = Summary({Step("a", 100, 3), Step("b", 100, 3)});
  json new_run = Summary({Step("a", 100, 3)});
  new_run["fairness"] = {{"unequal_work", {"forced output length asked (--ignore-eos) but not sent"}}};
  new_run["target"]["emulated"] = true;
  const Result<Comparison> c = CompareRuns(old_run, new_run, CompareOptions{});
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->unequal_work.size(), 1u);
  EXPECT_EQ(c->unequal_work[0], "new run: forced output length asked (--ignore-eos) but not sent");
  ASSERT_EQ(c->unmatched_steps.size(), 1u);
  EXPECT_EQ(c->unmatched_steps[0], "b (old run only)");
  EXPECT_EQ(CompareTable(c.value()).rfind("EMULATED", 0), 0u);
}

TEST(CompareTest, FoldersThatAreNotResultsAreRefusedWithOneLine) {
  const Result<json> missing = LoadRunSummary("/nonexistent/bakeoff-run");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("not a bakeoff result folder"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::report
