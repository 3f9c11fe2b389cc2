// Tests for emulate/metrics.h: Prometheus histograms and the /metrics text.
#include "emulate/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace bakeoff::emulate {
namespace {

// Every sample line of a text-format body, keyed by "name{labels}".
std::map<std::string, std::string> Samples(const std::string& text) {
  std::map<std::string, std::string> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = line.substr(space + 1);
  }
  return samples;
}

TEST(PrometheusHistogramTest, BucketsAreCumulativeAndInclusive) {
  const double bounds[] = {0.1, 1.0, 10.0};
  PrometheusHistogram h(bounds);
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 20.0}) h.Observe(v);
  EXPECT_EQ(h.CumulativeCount(0), 2u);  // 0.05 and 0.1 (le is inclusive)
  EXPECT_EQ(h.CumulativeCount(1), 4u);
  EXPECT_EQ(h.CumulativeCount(2), 5u);
  EXPECT_EQ(h.count(), 6u);  // 20 only in +Inf
  EXPECT_DOUBLE_EQ(h.sum(), 0.05 + 0.1 + 0.5 + 1.0 + 5.0 + 20.0);
}

TEST(PrometheusHistogramTest, IgnoresNan) {
  const double bounds[] = {1.0};
  PrometheusHistogram h(bounds);
  h.Observe(std::nan(""));
  EXPECT_EQ(h.count(), 0u);
}

TEST(PrometheusHistogramTest, VllmBucketBoundaries) {
  EXPECT_EQ(TtftBucketsSeconds().size(), 22u);
  EXPECT_DOUBLE_EQ(TtftBucketsSeconds().front(), 0.001);
  EXPECT_DOUBLE_EQ(TtftBucketsSeconds().back(), 2560.0);
  EXPECT_EQ(InterTokenBucketsSeconds().size(), 19u);
  EXPECT_DOUBLE_EQ(InterTokenBucketsSeconds().front(), 0.01);
  EXPECT_DOUBLE_EQ(InterTokenBucketsSeconds().back(), 80.0);
  EXPECT_EQ(RequestLatencyBucketsSeconds().size(), 21u);
  EXPECT_DOUBLE_EQ(RequestLatencyBucketsSeconds().front(), 0.3);
  EXPECT_DOUBLE_EQ(RequestLatencyBucketsSeconds().back(), 7680.0);
}

TEST(PrometheusMetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST(PrometheusMetricsTest, RendersVllmNamesWithHelpAndType) {
  EngineCounters engine;
  engine.running = 3;
  engine.waiting = 2;
  engine.preemptions = 1;
  engine.prompt_tokens = 1000;
  engine.generation_tokens = 250;
  engine.kv.capacity_tokens = 1000;
  engine.kv.used_tokens = 250;
  engine.prefix_queries_tokens = 800;
  engine.prefix_hit_tokens = 512;
  RequestMetrics requests;
  requests.finished_stop = 4;
  requests.finished_length = 5;
  requests.finished_abort = 6;
  requests.rejected_queue_full = 7;
  requests.ttft.Observe(0.003);
  requests.ttft.Observe(0.2);
  requests.inter_token.Observe(0.012);
  requests.e2e.Observe(1.2);
  requests.queue_time.Observe(0.0);
  const std::string text = RenderPrometheusMetrics("my \"model\"", engine, requests);
  const std::string m = R"(model_name="my \"model\"")";
  auto samples = Samples(text);
  EXPECT_EQ(samples["vllm:num_requests_running{" + m + "}"], "3.0");
  EXPECT_EQ(samples["vllm:num_requests_waiting{" + m + "}"], "2.0");
  EXPECT_EQ(samples["vllm:kv_cache_usage_perc{" + m + "}"], "0.25");
  EXPECT_EQ(samples["vllm:gpu_cache_usage_perc{" + m + "}"], "0.25");
  EXPECT_EQ(samples["vllm:prefix_cache_queries_total{" + m + "}"], "800.0");
  EXPECT_EQ(samples["vllm:prefix_cache_hits_total{" + m + "}"], "512.0");
  EXPECT_EQ(samples["vllm:num_preemptions_total{" + m + "}"], "1.0");
  EXPECT_EQ(samples["vllm:prompt_tokens_total{" + m + "}"], "1000.0");
  EXPECT_EQ(samples["vllm:generation_tokens_total{" + m + "}"], "250.0");
  EXPECT_EQ(samples["vllm:request_success_total{" + m + ",finished_reason=\"stop\"}"], "4.0");
  EXPECT_EQ(samples["vllm:request_success_total{" + m + ",finished_reason=\"length\"}"], "5.0");
  EXPECT_EQ(samples["vllm:request_success_total{" + m + ",finished_reason=\"abort\"}"], "6.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_bucket{" + m + ",le=\"0.001\"}"], "0.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_bucket{" + m + ",le=\"0.005\"}"], "1.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_bucket{" + m + ",le=\"0.25\"}"], "2.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_bucket{" + m + ",le=\"2560.0\"}"], "2.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_bucket{" + m + ",le=\"+Inf\"}"], "2.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_count{" + m + "}"], "2.0");
  EXPECT_EQ(samples["vllm:time_to_first_token_seconds_sum{" + m + "}"], "0.203");
  EXPECT_EQ(samples["vllm:inter_token_latency_seconds_bucket{" + m + ",le=\"0.025\"}"], "1.0");
  EXPECT_EQ(samples["vllm:e2e_request_latency_seconds_bucket{" + m + ",le=\"1.5\"}"], "1.0");
  EXPECT_EQ(samples["vllm:request_queue_time_seconds_bucket{" + m + ",le=\"0.3\"}"], "1.0");
  EXPECT_EQ(samples["bakeoff_emulated"], "1");
  EXPECT_EQ(samples["bakeoff_emulate_rejected_requests_total{" + m + ",reason=\"queue_full\"}"],
            "7.0");
  for (const char* family :
       {"vllm:num_requests_running gauge", "vllm:num_requests_waiting gauge",
        "vllm:kv_cache_usage_perc gauge", "vllm:gpu_cache_usage_perc gauge",
        "vllm:prefix_cache_queries_total counter", "vllm:prefix_cache_hits_total counter",
        "vllm:num_preemptions_total counter", "vllm:prompt_tokens_total counter",
        "vllm:generation_tokens_total counter", "vllm:request_success_total counter",
        "vllm:time_to_first_token_seconds histogram", "vllm:inter_token_latency_seconds histogram",
        "vllm:e2e_request_latency_seconds histogram", "vllm:request_queue_time_seconds histogram",
        "bakeoff_emulated gauge"}) {
    const std::string name = std::string(family).substr(0, std::string(family).find(' '));
    EXPECT_NE(text.find("# TYPE " + std::string(family) + "\n"), std::string::npos) << family;
    EXPECT_NE(text.find("# HELP " + name + " "), std::string::npos) << family;
  }
}

// Every line is a comment or `name{labels} value` in the text format's grammar, and every
// histogram's buckets never decrease.
TEST(PrometheusMetricsTest, EveryLineIsWellFormed) {
  RequestMetrics requests;
  for (double v : {0.0005, 0.02, 0.7, 3.0, 9000.0}) {
    requests.ttft.Observe(v);
    requests.inter_token.Observe(v);
    requests.e2e.Observe(v);
    requests.queue_time.Observe(v);
    requests.step_lag.Observe(v);
    requests.step_wake_lag.Observe(v);
  }
  const std::string text = RenderPrometheusMetrics("m", EngineCounters{}, requests);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::regex comment(R"(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+)");
  const std::regex sample(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*\})? (\+Inf|-Inf|NaN|-?[0-9.e+-]+))");
  std::istringstream lines(text);
  std::string line;
  std::map<std::string, double> last_bucket;
  while (std::getline(lines, line)) {
    if (line[0] == '#') {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, sample)) << line;
    const std::size_t bucket = line.find("_bucket{");
    if (bucket != std::string::npos) {
      const std::string family = line.substr(0, bucket);
      const double value = std::stod(line.substr(line.rfind(' ') + 1));
      EXPECT_GE(value, last_bucket[family]) << line;
      last_bucket[family] = value;
    }
  }
  EXPECT_EQ(last_bucket.size(), 6u);
  for (const auto& [family, count] : last_bucket) EXPECT_EQ(count, 5.0) << family;
}

}  // namespace
}  // namespace bakeoff::emulate
