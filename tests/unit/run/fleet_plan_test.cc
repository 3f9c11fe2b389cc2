// bakeoff plan's search against cases computed by hand. The engine serves one sequence at a time
// and every step takes 10 ms (no per-token cost), so a request of 10 output tokens holds its
// replica for S = 100 ms (one prefill step that gives the first token, nine decodes) and its TTFT
// is 10 ms when it finds the replica free. Constant arrivals every g ms, spread round-robin over N
// replicas, reach each replica every N*g ms: it is free for every arrival exactly when N*g >= S,
// and otherwise its queue grows without bound. With a TTFT SLO of 15 ms the answer is ceil(S / g).
#include <gtest/gtest.h>

#include <atomic>

#include "support/one_at_a_time_engine.h"
#include "run/fleet_plan.h"
#include "workload/trace_transform.h"

namespace bakeoff::run {
namespace {

FleetPlanConfig Config(double rate, const std::string& slo_text) {
  FleetPlanConfig config;
  SimulateConfig& load = config.load;
  load.run.target.request.model = "emulated-model";
  load.run.target.request.ignore_eos = true;
  load.run.shape = {.prompt_tokens = 100, .output_tokens = 10};
  load::StepSpec step;
  step.mode = load::LoopMode::kOpen;
  step.open.rate_per_s = rate;
  step.open.process = load::ArrivalProcess::kConstant;
  step.limits.requests = 400;
  step.label = "rate";
  load.run.steps = {step};
  Result<analyze::Slo> slo = analyze::ParseSlo(slo_text);
  EXPECT_TRUE(slo.ok()) << slo.error().message;
  load.slo = slo.value();
  load.sim.engine = testing::OneAtATimeEngine();
  load.preset = "one-at-a-time";
  load.keep.mode = RecordsKept::Mode::kNone;
  config.routers = {emulate::Router::kRoundRobin, emulate::Router::kLeastOutstanding};
  config.max_replicas = 64;
  return config;
}

const std::atomic<bool> kNoStop{false};
void Quiet(const std::string&) {}

std::int64_t Answer(const FleetPlan& plan, std::size_t scenario, emulate::Router router) {
  for (const RouterPlan& r : plan.scenarios.at(scenario).routers) {
    if (r.router == router) return r.replicas.value_or(-1);
  }
  return -2;
}

TEST(FleetPlanTest, OneReplicaIsEnoughWhenArrivalsAreFurtherApartThanTheServiceTime) {
  // g = 200 ms >= S = 100 ms.
  Result<FleetPlan> plan = PlanFleet(Config(5, "ttft_p99=15ms"), kNoStop, Quiet);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(Answer(*plan, 0, emulate::Router::kRoundRobin), 1);
  EXPECT_EQ(Answer(*plan, 0, emulate::Router::kLeastOutstanding), 1);
  EXPECT_NEAR(plan->idle.ttft_p99_ms, 10, 1e-6) << "alone: one 10 ms step to the first token";
  EXPECT_NEAR(plan->scenarios[0].one_replica_capacity_per_s, 10, 0.1) << "saturated: one request per 100 ms";
}

TEST(FleetPlanTest, TheRateNeedsExactlyTheServiceTimeOverTheGap) {
  // g = 1000 / 35 = 28.6 ms: ceil(100 / 28.6) = 4 replicas; 3 (85.7 ms apart) queue.
  FleetPlanConfig config = Config(35, "ttft_p99=15ms");
  config.what_ifs = {WhatIf::kDoubleTraffic, WhatIf::kDoubleOutput, WhatIf::kHalfPrefixReuse};
  Result<FleetPlan> plan = PlanFleet(config, kNoStop, Quiet);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->scenarios.size(), 4u);
  EXPECT_EQ(Answer(*plan, 0, emulate::Router::kRoundRobin), 4);
  EXPECT_EQ(Answer(*plan, 0, emulate::Router::kLeastOutstanding), 4);
  // The answer is bracketed: N passed and N - 1 was simulated and failed.
  bool three_failed = false;
  for (const FleetTrial& t : plan->scenarios[0].routers[0].trials) {
    if (t.replicas == 3) three_failed = !t.passed;
    if (t.replicas >= 4) {
      EXPECT_TRUE(t.passed) << t.replicas << ": " << t.why_not;
    }
  }
  EXPECT_TRUE(three_failed);
  // Twice the traffic: g = 14.3 ms, ceil(7) = 7 replicas. Answers twice as long: S = 200 ms, 7.
  EXPECT_EQ(plan->scenarios[1].name, "double-traffic");
  EXPECT_EQ(Answer(*plan, 1, emulate::Router::kRoundRobin), 7);
  EXPECT_EQ(plan->scenarios[2].name, "double-output");
  EXPECT_EQ(Answer(*plan, 2, emulate::Router::kRoundRobin), 7);
  // A synthetic load shares no prefixes: the what-if says so instead of inventing an answer.
  EXPECT_EQ(plan->scenarios[3].name, "half-prefix-reuse");
  EXPECT_FALSE(plan->scenarios[3].not_applicable.empty());
  EXPECT_TRUE(plan->scenarios[3].routers.empty());

  const nlohmann::json json = ToJson(*plan, config);
  EXPECT_TRUE(json["emulated"].get<bool>());
  EXPECT_EQ(json["scenarios"][0]["routers"][0]["replicas"], 4);
  EXPECT_EQ(json["scenarios"][0]["routers"][1]["saving_vs_round_robin"], 0.0);
  EXPECT_NE(FormatFleetPlan(*plan).find("round-robin"), std::string::npos);
}

TEST(FleetPlanTest, GrowthScalesTheRateFirst) {
  FleetPlanConfig config = Config(35, "ttft_p99=15ms");
  config.growth = 2;
  config.routers = {emulate::Router::kRoundRobin};
  Result<FleetPlan> plan = PlanFleet(config, kNoStop, Quiet);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(Answer(*plan, 0, emulate::Router::kRoundRobin), 7);
  EXPECT_NEAR(plan->scenarios[0].offered_rate_per_s, 70, 1e-9);
}

TEST(FleetPlanTest, RefusesAnSloThatOneIdleReplicaMisses) {
  // Alone, TTFT is 10 ms: a 5 ms SLO is out of reach for any fleet.
  Result<FleetPlan> plan = PlanFleet(Config(5, "ttft_p99=5ms"), kNoStop, Quiet);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(plan.error().message.find("one idle replica"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("ttft_p99=5ms observed 10.0 ms"), std::string::npos) << plan.error().message;
}

TEST(FleetPlanTest, SaysWhenNoFleetUpToTheLimitMeetsTheSlo) {
  FleetPlanConfig config = Config(35, "ttft_p99=15ms");
  config.max_replicas = 3;
  config.routers = {emulate::Router::kRoundRobin};
  Result<FleetPlan> plan = PlanFleet(config, kNoStop, Quiet);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(Answer(*plan, 0, emulate::Router::kRoundRobin), -1);
  EXPECT_NE(ToJson(*plan, config)["scenarios"][0]["routers"][0]["why_none"].get<std::string>().find("3"),
            std::string::npos);
}

TEST(FleetPlanTest, RefusesWhatItCannotPlan) {
  FleetPlanConfig no_slo = Config(5, "ttft_p99=15ms");
  no_slo.load.slo = {};
  EXPECT_NE(ValidateFleetPlanConfig(no_slo).error().message.find("--slo"), std::string::npos);
  FleetPlanConfig closed = Config(5, "ttft_p99=15ms");
  closed.load.run.steps[0].mode = load::LoopMode::kClosed;
  EXPECT_NE(ValidateFleetPlanConfig(closed).error().message.find("--concurrency"), std::string::npos);
  FleetPlanConfig two = Config(5, "ttft_p99=15ms");
  two.load.run.steps.push_back(two.load.run.steps[0]);
  EXPECT_FALSE(ValidateFleetPlanConfig(two).ok());
  FleetPlanConfig no_router = Config(5, "ttft_p99=15ms");
  no_router.routers.clear();
  EXPECT_FALSE(ValidateFleetPlanConfig(no_router).ok());
  FleetPlanConfig growth = Config(5, "ttft_p99=15ms");
  growth.growth = 0;
  EXPECT_FALSE(ValidateFleetPlanConfig(growth).ok());
  EXPECT_EQ(ParseWhatIf("double-output"), WhatIf::kDoubleOutput);
  EXPECT_FALSE(ParseWhatIf("triple").has_value());
}

}  // namespace
}  // namespace bakeoff::run
