#include "load/plan.h"
#include "load/request_builder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace bakeoff::load {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<double> Gaps(const std::vector<PlannedSend>& plan) {
  std::vector<double> gaps;
  for (std::size_t i = 1; i < plan.size(); ++i) gaps.push_back(ToSeconds(plan[i].offset - plan[i - 1].offset));
  return gaps;
}

double CoefficientOfVariation(const std::vector<double>& values) {
  double mean = 0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double variance = 0;
  for (double v : values) variance += (v - mean) * (v - mean);
  variance /= static_cast<double>(values.size() - 1);
  return std::sqrt(variance) / mean;
}

TEST(PlanTest, ConstantRateOffsetsAreExactMultiples) {
  StepLimits limits;
  limits.requests = 1000;
  const auto plan = BuildOpenLoopSchedule({7.0, ArrivalProcess::kConstant, 1}, limits, 1);
  ASSERT_EQ(plan.size(), 1000u);
  for (std::size_t k = 0; k < plan.size(); ++k) {
    // Computed from t0, not accumulated: the k-th offset is k/rate to the nanosecond.
    EXPECT_EQ(plan[k].offset, FromSeconds(static_cast<double>(k) / 7.0)) << k;
  }
}

TEST(PlanTest, DurationLimitsTheMeasuredWindowAfterWarmup) {
  StepLimits limits;
  limits.duration = seconds(10);
  limits.warmup = seconds(2);
  const auto plan = BuildOpenLoopSchedule({10.0, ArrivalProcess::kConstant, 1}, limits, 1);
  std::size_t warmup = 0;
  for (const PlannedSend& p : plan) {
    if (p.warmup) {
      ++warmup;
      EXPECT_LT(p.offset, seconds(2));
    } else {
      EXPECT_GE(p.offset, seconds(2));
      EXPECT_LT(p.offset, seconds(12));
    }
  }
  EXPECT_EQ(warmup, 20u);
  EXPECT_EQ(plan.size() - warmup, 100u);
}

TEST(PlanTest, SameSeedSameScheduleOtherSeedOtherSchedule) {
  StepLimits limits;
  limits.requests = 500;
  const auto a = BuildOpenLoopSchedule({50.0, ArrivalProcess::kPoisson, 1}, limits, 9);
  const auto b = BuildOpenLoopSchedule({50.0, ArrivalProcess::kPoisson, 1}, limits, 9);
  const auto c = BuildOpenLoopSchedule({50.0, ArrivalProcess::kPoisson, 1}, limits, 10);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].offset, b[i].offset);
  EXPECT_NE(a.back().offset, c.back().offset);
}

TEST(PlanTest, PoissonHasRateAndUnitCoefficientOfVariation) {
  StepLimits limits;
  limits.requests = 50000;
  const auto plan = BuildOpenLoopSchedule({200.0, ArrivalProcess::kPoisson, 1}, limits, 3);
  const double achieved = static_cast<double>(plan.size() - 1) / ToSeconds(plan.back().offset);
  EXPECT_NEAR(achieved, 200.0, 200.0 * 0.02);
  EXPECT_NEAR(CoefficientOfVariation(Gaps(plan)), 1.0, 0.03);
}

TEST(PlanTest, GammaBurstinessSetsCoefficientOfVariation) {
  StepLimits limits;
  limits.requests = 50000;
  for (double shape : {0.25, 4.0}) {
    const auto plan = BuildOpenLoopSchedule({100.0, ArrivalProcess::kGamma, shape}, limits, 5);
    const double achieved = static_cast<double>(plan.size() - 1) / ToSeconds(plan.back().offset);
    EXPECT_NEAR(achieved, 100.0, 100.0 * 0.03) << shape;
    EXPECT_NEAR(CoefficientOfVariation(Gaps(plan)), 1 / std::sqrt(shape), 0.06) << shape;
  }
}

TEST(PlanTest, WarmupByCount) {
  StepLimits limits;
  limits.requests = 10;
  limits.warmup_requests = 3;
  const auto plan = BuildOpenLoopSchedule({1.0, ArrivalProcess::kConstant, 1}, limits, 1);
  ASSERT_EQ(plan.size(), 13u);
  EXPECT_TRUE(plan[2].warmup);
  EXPECT_FALSE(plan[3].warmup);
}

TEST(PlanTest, ParseArrivalProcessNamesTheBadValue) {
  EXPECT_TRUE(ParseArrivalProcess("gamma").ok());
  const auto bad = ParseArrivalProcess("bursty");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bursty"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::load

namespace bakeoff::load {
namespace {

TEST(ScheduleCursorTest, ReleasesEachWorkersShareOnTimeAgainstAManualClock) {
  // 10 requests/s constant, two workers: worker 1 owns entries 1, 3, 5, ...
  StepLimits limits;
  limits.requests = 10;
  const auto plan = BuildOpenLoopSchedule({10.0, ArrivalProcess::kConstant, 1}, limits, 1);
  const MonoTime t0{std::chrono::seconds(100)};
  ManualClock clock(t0);
  ScheduleCursor cursor(plan, 1, 2);
  std::vector<std::size_t> sent;
  std::vector<Nanos> intended;
  for (int tick = 0; tick < 120 && !cursor.done(); ++tick) {
    while (cursor.NextIsDue(clock.Now() - t0)) {
      sent.push_back(cursor.next_index());
      intended.push_back(cursor.next().offset);
      cursor.Advance();
    }
    clock.Advance(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(sent, (std::vector<std::size_t>{1, 3, 5, 7, 9}));
  for (std::size_t i = 0; i < intended.size(); ++i) {
    EXPECT_EQ(intended[i], FromSeconds(0.1 * static_cast<double>(sent[i])));
  }
}

TEST(ScheduleCursorTest, ALateWakeUpReleasesTheBacklogWithTheirOwnInstants) {
  StepLimits limits;
  limits.requests = 5;
  const auto plan = BuildOpenLoopSchedule({100.0, ArrivalProcess::kConstant, 1}, limits, 1);
  ManualClock clock;
  ScheduleCursor cursor(plan, 0, 1);
  clock.Advance(std::chrono::milliseconds(35));  // woke up 35 ms late: 4 sends are due
  int due = 0;
  while (cursor.NextIsDue(clock.Now() - MonoTime{})) {
    EXPECT_EQ(cursor.next().offset, std::chrono::milliseconds(10 * due));
    cursor.Advance();
    ++due;
  }
  EXPECT_EQ(due, 4);
  EXPECT_FALSE(cursor.done());
}

}  // namespace
}  // namespace bakeoff::load

namespace bakeoff::load {
namespace {

TEST(TracePlanTest, OpenersScheduledByScaledArrivalAndTurnsChained) {
  workload::Trace trace;
  auto add = [&](double at, std::optional<std::string> session, std::optional<std::uint32_t> turn) {
    workload::TraceRequest r;
    r.arrival_s = at;
    r.input_tokens = 10;
    r.output_tokens = 5;
    r.session_id = session;
    r.turn = turn;
    trace.requests.push_back(r);
  };
  add(0.0, "s1", 0);       // 0
  add(1.0, std::nullopt, std::nullopt);  // 1
  add(2.0, "s1", 2);       // 2: third turn of s1
  add(3.0, "s1", 1);       // 3: second turn of s1 (listed later)
  add(4.0, "s2", 0);       // 4
  StepLimits limits;
  const TracePlan plan = BuildTracePlan(trace, 0.5, limits);
  ASSERT_EQ(plan.schedule.size(), 3u);  // 0, 1, 4 open; 2 and 3 follow answers
  EXPECT_EQ(plan.schedule[0].item, 0u);
  EXPECT_EQ(plan.schedule[1].item, 1u);
  EXPECT_EQ(plan.schedule[1].offset, std::chrono::milliseconds(500));
  EXPECT_EQ(plan.schedule[2].item, 4u);
  EXPECT_EQ(plan.schedule[2].offset, std::chrono::seconds(2));
  EXPECT_EQ(plan.next_turn[0], 3);  // by turn number, not file order
  EXPECT_EQ(plan.next_turn[3], 2);
  EXPECT_EQ(plan.next_turn[2], -1);
  EXPECT_EQ(plan.next_turn[1], -1);
}

TEST(TracePlanTest, DurationWindowAppliesToScaledArrivals) {
  workload::Trace trace;
  for (int i = 0; i < 100; ++i) {
    workload::TraceRequest r;
    r.arrival_s = i;
    trace.requests.push_back(r);
  }
  StepLimits limits;
  limits.duration = std::chrono::seconds(10);
  EXPECT_EQ(BuildTracePlan(trace, 0.1, limits).schedule.size(), 100u);  // 100 s of trace in 10 s
  EXPECT_EQ(BuildTracePlan(trace, 1.0, limits).schedule.size(), 10u);
}

}  // namespace
}  // namespace bakeoff::load

namespace bakeoff::load {
namespace {

// The runner walks an open-loop schedule without holding it: each worker's generated share is
// exactly its share of the held schedule, and the length is counted at the end.
TEST(OpenLoopGeneratorTest, GeneratedSharesAreTheHeldSchedulesShares) {
  StepLimits limits;
  limits.duration = std::chrono::seconds(20);
  limits.warmup = std::chrono::seconds(2);
  limits.warmup_requests = 3;
  for (ArrivalProcess process : {ArrivalProcess::kConstant, ArrivalProcess::kPoisson, ArrivalProcess::kGamma}) {
    const OpenLoopShape shape{37.0, process, 0.5};
    const std::vector<PlannedSend> held = BuildOpenLoopSchedule(shape, limits, 11);
    ASSERT_GT(held.size(), 500u);
    for (std::size_t workers : {1u, 3u}) {
      for (std::size_t w = 0; w < workers; ++w) {
        ScheduleCursor from_vector(held, w, workers);
        ScheduleCursor generated(OpenLoopGenerator(shape, limits, 11), w, workers);
        while (!from_vector.done()) {
          ASSERT_FALSE(generated.done());
          EXPECT_EQ(generated.next_index(), from_vector.next_index());
          EXPECT_EQ(generated.next().offset, from_vector.next().offset);
          EXPECT_EQ(generated.next().warmup, from_vector.next().warmup);
          from_vector.Advance();
          generated.Advance();
        }
        EXPECT_TRUE(generated.done());
        EXPECT_EQ(generated.CountToEnd(), held.size());
      }
    }
    ScheduleCursor partway(OpenLoopGenerator(shape, limits, 11), 0, 2);
    for (int i = 0; i < 10; ++i) partway.Advance();
    EXPECT_EQ(partway.CountToEnd(), held.size()) << "counted from the middle of a walk";
  }
}

}  // namespace
}  // namespace bakeoff::load

namespace bakeoff::load {
namespace {

// The arrival process and the requests' prompts draw from different streams of the run's seed:
// a step's arrival seed is none of its requests' seeds (request 0's included), and not the next
// step's arrival seed.
TEST(ArrivalSeedTest, ArrivalsAndPromptsDrawFromStreamsOfTheirOwn) {
  for (std::uint64_t seed : {0ULL, 1ULL, 42ULL, 0xffffffffffffffffULL}) {
    for (std::uint32_t step = 0; step < 3; ++step) {
      const std::uint64_t arrivals = ArrivalSeed(seed, step);
      for (std::uint64_t id = 0; id < 64; ++id) EXPECT_NE(arrivals, RequestSeed(seed, step, id)) << seed << " " << id;
      EXPECT_NE(arrivals, ArrivalSeed(seed, step + 1));
      EXPECT_EQ(arrivals, ArrivalSeed(seed, step));  // deterministic
    }
  }
}

}  // namespace
}  // namespace bakeoff::load
