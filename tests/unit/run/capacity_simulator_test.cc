// The capacity search against the simulator, on an engine whose capacity can be computed: one
// sequence at a time, no noise, so a request takes the same service time S alone, and constant
// arrivals queue without bound exactly when they come faster than 1/S. With an end-to-end SLO of
// 1.5 S the boundary is 1/S; the search must bracket it within its stated precision.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include <fmt/format.h>

#include "analyze/capacity_search.h"
#include "support/one_at_a_time_engine.h"
#include "run/load_target.h"
#include "support/scratch.h"

namespace bakeoff::run {
namespace {

LoadJob Job(double rate, std::uint64_t requests, const analyze::Slo& slo, const std::filesystem::path& out) {
  LoadJob job;
  job.run.target.request.model = "emulated-model";
  job.run.target.request.ignore_eos = true;
  job.run.shape = {.prompt_tokens = 200, .output_tokens = 16};
  load::StepSpec step;
  step.mode = load::LoopMode::kOpen;
  step.open.rate_per_s = rate;
  step.open.process = load::ArrivalProcess::kConstant;
  step.limits.requests = requests;
  step.label = "rate";
  job.run.steps = {step};
  job.slo = slo;
  job.run.slo = slo.RequestThresholds();
  job.out_dir = out;
  return job;
}

class CapacitySimulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = bakeoff::testing::ScratchRoot() /
           ("bakeoff_capacity_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    target_.simulated = true;
    target_.sim.engine = testing::OneAtATimeEngine();
    target_.preset = "one-at-a-time";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  LoadTarget target_;
  const std::atomic<bool> stop_{false};
};

TEST_F(CapacitySimulatorTest, FindsOneOverTheServiceTimeWithinThePrecision) {
  // S: one request alone, well below any queueing.
  Result<BenchOutcome> alone = RunLoadJob(target_, Job(0.2, 5, {}, dir_ / "alone"), stop_, [](const std::string&) {});
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  const double service_ms = alone->steps.at(0).e2e_ms.max;
  ASSERT_GT(service_ms, 0);
  EXPECT_NEAR(alone->steps.at(0).e2e_ms.min, service_ms, 1e-6) << "no noise: every request alone takes S";
  const double truth = 1000 / service_ms;

  Result<analyze::Slo> slo = analyze::ParseSlo(fmt::format("e2e_p99={}ms", 1.5 * service_ms));
  ASSERT_TRUE(slo.ok()) << slo.error().message;
  analyze::CapacitySearchOptions o;
  o.start_rate_per_s = 0.5;
  o.precision = 0.05;
  o.repeats = 1;
  o.target_attainment = 0.9;
  o.max_points = 30;
  int n = 0;
  auto measure = [&](double rate, std::uint32_t repeat) -> Result<analyze::RateTrial> {
    Result<BenchOutcome> r = RunLoadJob(target_, Job(rate, 400, slo.value(), dir_ / std::to_string(n++)), stop_,
                                        [](const std::string&) {});
    if (!r.ok()) return r.error();
    return analyze::TrialFromStep(r->steps.at(0), rate, repeat);
  };
  const analyze::CapacityResult found = analyze::SearchCapacity(o, measure, stop_);
  ASSERT_EQ(found.bracket, analyze::Bracket::kBracketed) << found.stopped_reason;
  // The bracket holds the truth (to the simulator's microsecond arithmetic) and is as narrow as asked.
  EXPECT_LE(*found.capacity_per_s, truth * 1.002) << "truth " << truth;
  EXPECT_GE(*found.first_failing_per_s, truth * 0.998) << "truth " << truth;
  EXPECT_LE(*found.first_failing_per_s / *found.capacity_per_s, 1.05 + 1e-9);
}

// As bench's client, simulate gives up on the requests still running --drain-timeout after the
// last send. Twenty requests 1 ms apart on the one-at-a-time engine: request k (from 0) starts at
// 100k ms, produces a token every 10 ms and ends at 100(k + 1) ms. The last is sent at 19 ms; with
// a 1 s drain, the ten that end by 1.019 s complete, request 10 has its first token (1.010 s) and
// is cut with it, and the nine behind it are cut without one.
TEST_F(CapacitySimulatorTest, GivesUpAtTheDrainTimeoutAsBench) {
  LoadJob job = Job(1000, 20, {}, dir_ / "drain");
  job.run.shape.output_tokens = 10;
  job.run.drain_timeout = std::chrono::seconds(1);
  Result<BenchOutcome> r = RunLoadJob(target_, job, stop_, [](const std::string&) {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const analyze::StepAnalysis& step = r->steps.at(0);
  EXPECT_EQ(step.ok_requests, 10u);
  EXPECT_EQ(step.outcomes.at("cancelled"), 10u);
  ASSERT_FALSE(step.error_examples.empty());
  EXPECT_NE(step.error_examples[0].find("request 10: cancelled: still running 1 s after the last send"),
            std::string::npos)
      << step.error_examples[0];
  EXPECT_EQ(step.ttft_ms.count, 10u) << "TTFT is over ok requests only";
}

TEST_F(CapacitySimulatorTest, GivesUpAtTheClientsIdleDeadlineAsBench) {
  // 20 requests of 10 tokens arrive 1 ms apart; each holds the replica 100 ms. Request k's first
  // token would come at k x 100 + 10 ms, 99 k + 10 ms after it was sent: with a 250 ms idle deadline
  // (bench's client gives up on a stream silent that long) requests 0-2 are served and 3-19 give
  // up at their send + 250 ms, the engine dropping them as a server drops a client that left.
  LoadJob job = Job(1000, 20, {}, dir_ / "idle");
  job.run.shape.output_tokens = 10;
  job.run.target.client.deadlines.idle = std::chrono::milliseconds(250);
  Result<BenchOutcome> r = RunLoadJob(target_, job, stop_, [](const std::string&) {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const analyze::StepAnalysis& step = r->steps.at(0);
  EXPECT_EQ(step.ok_requests, 3u);
  EXPECT_EQ(step.outcomes.at("timeout"), 17u);
  EXPECT_EQ(step.outcomes.count("cancelled"), 0u);
  ASSERT_FALSE(step.error_examples.empty());
  EXPECT_NE(step.error_examples[0].find("request 3: timed out: no response bytes for the idle deadline of 250 ms"),
            std::string::npos)
      << step.error_examples[0];
}

}  // namespace
}  // namespace bakeoff::run
