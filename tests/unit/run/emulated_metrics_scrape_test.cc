// The emulated engine's /metrics page read by the scraper's parser (target/prometheus.h): what
// emulate/metrics.cc renders, target/prometheus.cc reads back to the same figures. Lives in the
// run tests because run is the first layer that links both emulate and target.
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "emulate/metrics.h"
#include "target/prometheus.h"

namespace bakeoff {
namespace {

using target::HistogramQuantile;
using target::MetricLabel;
using target::MetricsPage;
using target::MetricType;

TEST(PrometheusEmulatorPageTest, ScrapeReadsBackWhatTheEmulatorCounted) {
  emulate::EngineCounters engine;
  engine.running = 3;
  engine.waiting = 2;
  engine.prompt_tokens = 1000;
  engine.generation_tokens = 250;
  engine.kv.capacity_tokens = 1000;
  engine.kv.used_tokens = 250;
  emulate::RequestMetrics requests;
  requests.finished_stop = 4;
  requests.finished_length = 5;
  requests.finished_abort = 6;
  // TTFT: 10 requests in (0.08, 0.1], 30 in (0.1, 0.25], 10 in (0.25, 0.5].
  for (int i = 0; i < 10; ++i) requests.ttft.Observe(0.09);
  for (int i = 0; i < 30; ++i) requests.ttft.Observe(0.2);
  for (int i = 0; i < 10; ++i) requests.ttft.Observe(0.3);
  // A model name that needs every escape of the format.
  const std::string model = "org/m \"q\" \\ v1\nb";
  const std::string text = emulate::RenderPrometheusMetrics(model, engine, requests);

  const Result<MetricsPage> parsed = target::ParsePrometheusText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const MetricsPage& page = *parsed;
  EXPECT_TRUE(page.warnings.empty()) << page.warnings.front();
  EXPECT_FALSE(page.openmetrics);

  const std::vector<MetricLabel> by_model = {{"model_name", model}};
  EXPECT_EQ(page.Sum("vllm:num_requests_running", by_model), 3.0);
  EXPECT_EQ(page.Sum("vllm:num_requests_waiting"), 2.0);
  EXPECT_EQ(page.Sum("vllm:kv_cache_usage_perc", by_model), 0.25);
  EXPECT_EQ(page.Sum("vllm:prompt_tokens_total", by_model), 1000.0);
  EXPECT_EQ(page.Sum("vllm:request_success_total", by_model), 15.0);
  EXPECT_EQ(page.Sum("vllm:request_success_total", {{"finished_reason", "length"}}), 5.0);
  EXPECT_EQ(page.Sum("vllm:num_requests_running", {{"model_name", "other"}}), std::nullopt);
  EXPECT_EQ(page.Sum("bakeoff_emulated"), 1.0);

  ASSERT_NE(page.Family("vllm:request_success"), nullptr);
  EXPECT_EQ(page.Family("vllm:request_success")->type, MetricType::kCounter);
  EXPECT_EQ(page.Family("vllm:time_to_first_token_seconds_bucket")->type, MetricType::kHistogram);
  EXPECT_EQ(page.Family("vllm:kv_cache_usage_perc")->help,
            "KV-cache usage. 1 means 100 percent usage.");

  const std::optional<MetricsPage::Histogram> ttft =
      page.HistogramOf("vllm:time_to_first_token_seconds", by_model);
  ASSERT_TRUE(ttft);
  const std::span<const double> bounds = emulate::TtftBucketsSeconds();
  ASSERT_EQ(ttft->buckets.size(), bounds.size() + 1);
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    EXPECT_EQ(ttft->buckets[i].first, bounds[i]);
    EXPECT_EQ(ttft->buckets[i].second, static_cast<double>(requests.ttft.CumulativeCount(i)));
  }
  EXPECT_EQ(ttft->buckets.back().first, std::numeric_limits<double>::infinity());
  EXPECT_EQ(ttft->buckets.back().second, 50.0);
  EXPECT_EQ(ttft->count, 50.0);
  EXPECT_NEAR(ttft->sum, 10 * 0.09 + 30 * 0.2 + 10 * 0.3, 1e-9);
  // Rank 25 of 50 lies 15 deep into the 30 of (0.1, 0.25]: 0.1 + 0.15 * 15/30.
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*ttft, 0.5), 0.175);
  // Rank 45 lies 5 deep into the 10 of (0.25, 0.5].
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*ttft, 0.9), 0.375);

  // Histograms nobody observed are present and empty: no quantile.
  const std::optional<MetricsPage::Histogram> e2e =
      page.HistogramOf("vllm:e2e_request_latency_seconds");
  ASSERT_TRUE(e2e);
  EXPECT_EQ(e2e->count, 0.0);
  EXPECT_FALSE(HistogramQuantile(*e2e, 0.5));
}

}  // namespace
}  // namespace bakeoff
