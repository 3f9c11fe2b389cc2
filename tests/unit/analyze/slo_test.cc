#include "analyze/slo.h"

#include <gtest/gtest.h>

namespace bakeoff::analyze {
namespace {

TEST(SloTest, ParsesTermsWithUnits) {
  const auto slo = ParseSlo("ttft_p99=200ms,tpot_p50=0.05s,e2e_p999=20,itl_p90=30ms");
  ASSERT_TRUE(slo.ok()) << slo.error().message;
  ASSERT_EQ(slo->terms.size(), 4u);
  EXPECT_EQ(slo->terms[0].metric, SloMetric::kTtft);
  EXPECT_DOUBLE_EQ(slo->terms[0].quantile, 0.99);
  EXPECT_DOUBLE_EQ(slo->terms[0].threshold_ms, 200);
  EXPECT_DOUBLE_EQ(slo->terms[1].threshold_ms, 50);
  EXPECT_DOUBLE_EQ(slo->terms[2].quantile, 0.999);
  EXPECT_DOUBLE_EQ(slo->terms[2].threshold_ms, 20);
  EXPECT_EQ(slo->terms[3].metric, SloMetric::kItl);
}

TEST(SloTest, ErrorsNameTheTerm) {
  for (const char* bad : {"ttft=200ms", "latency_p99=1s", "ttft_p98=1s", "ttft_p99=-1ms",
                          "ttft_p99=abc", "ttft_p99", ""}) {
    const auto slo = ParseSlo(bad);
    ASSERT_FALSE(slo.ok()) << bad;
    EXPECT_NE(slo.error().message.find("--slo"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace bakeoff::analyze
