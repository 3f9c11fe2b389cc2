// Tests for emulate/cost_model.h and emulate/scheduler.h on explicit time (no sleeping).
#include "emulate/scheduler.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace bakeoff::emulate {
namespace {

using std::chrono::milliseconds;

MonoTime T0() { return MonoTime{} + std::chrono::seconds(100); }

SequenceRequest Req(std::int64_t prompt, std::int64_t max_tokens) {
  SequenceRequest request;
  request.prompt_tokens = prompt;
  request.max_tokens = max_tokens;
  return request;
}

// Runs steps back to back until the engine is idle; returns every event with its time.
struct Timed {
  TokenEvent event;
  MonoTime at;
};
std::vector<Timed> RunToIdle(Scheduler& scheduler, MonoTime start) {
  std::vector<Timed> out;
  MonoTime now = start;
  while (auto plan = scheduler.BeginStep(now)) {
    now = plan->end;
    for (const TokenEvent& event : scheduler.FinishStep()) out.push_back({event, now});
  }
  return out;
}

TEST(CostModelTest, FormulaAsDocumented) {
  CostModel model;  // 6 + 0.06/prefill token + 0.08/decode seq + 0.04 per 1k KV tokens
  EXPECT_DOUBLE_EQ(StepMillis(model, {1000, 0, 1000}), 6.0 + 60.0 + 0.04);
  EXPECT_DOUBLE_EQ(StepMillis(model, {0, 256, 512000}), 6.0 + 0.08 * 256 + 0.04 * 512);
  EXPECT_EQ(StepTime(model, {0, 0, 0}), milliseconds(6));
}

TEST(CostModelTest, RejectsNegativeAndNonFiniteCoefficients) {
  CostModel model;
  model.decode_ms_per_seq = -1;
  Status status = ValidateCostModel(model);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("decode_ms_per_seq"), std::string::npos);
  model = CostModel{};
  model.base_ms = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(ValidateCostModel(model).ok());
  EXPECT_TRUE(ValidateCostModel(CostModel{}).ok());
}

TEST(SchedulerTest, ValidatesConfig) {
  EngineConfig config;
  EXPECT_TRUE(ValidateEngineConfig(config).ok());
  config.max_num_seqs = 0;
  EXPECT_FALSE(ValidateEngineConfig(config).ok());
  config = EngineConfig{};
  config.max_batched_tokens = 100;  // < max_num_seqs
  EXPECT_FALSE(ValidateEngineConfig(config).ok());
  config = EngineConfig{};
  config.eos_probability = 1.5;
  EXPECT_FALSE(ValidateEngineConfig(config).ok());
}

TEST(SchedulerTest, SingleRequestTtftAndTpotEqualTheFormula) {
  EngineConfig config;
  for (std::int64_t prompt : {1, 100, 512, 8192, 20000}) {
    Scheduler scheduler(config);
    const std::int64_t n = 50;
    ASSERT_TRUE(scheduler.Add(Req(prompt, n)).ok());
    auto events = RunToIdle(scheduler, T0());
    ASSERT_EQ(events.size(), static_cast<std::size_t>(n));
    SingleRequestTiming expected = ExpectedSingleRequest(config, prompt, n);
    EXPECT_EQ(events.front().at - T0(), expected.ttft) << prompt;
    EXPECT_EQ((events.back().at - events.front().at) / (n - 1), expected.tpot) << prompt;
    EXPECT_EQ(events.back().at - T0(), expected.e2e) << prompt;
    EXPECT_EQ(events.back().event.finish, FinishReason::kLength);
    for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(events[i].event.index, i);
  }
  // The closed form of the header comment: tpot = base + decode + kv * (P + N/2) / 1000.
  SingleRequestTiming t = ExpectedSingleRequest(config, 1000, 101);
  EXPECT_NEAR(ToMillis(t.ttft), 6.0 + 0.06 * 1000 + 0.04, 1e-6);
  EXPECT_NEAR(ToMillis(t.tpot), 6.0 + 0.08 + 0.04 * (1000 + 50.5) / 1000, 1e-5);
}

TEST(SchedulerTest, OneTokenRequestFinishesAtItsPrefillStep) {
  Scheduler scheduler(EngineConfig{});
  ASSERT_TRUE(scheduler.Add(Req(10, 1)).ok());
  auto events = RunToIdle(scheduler, T0());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event.finish, FinishReason::kLength);
  EXPECT_EQ(ExpectedSingleRequest(EngineConfig{}, 10, 1).tpot, Nanos{0});
  EXPECT_FALSE(scheduler.HasWork());
}

TEST(SchedulerTest, FcfsOrderWithOneSlot) {
  EngineConfig config;
  config.max_num_seqs = 1;
  Scheduler scheduler(config);
  std::vector<SequenceId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*scheduler.Add(Req(10 + i, 3)));
  std::vector<SequenceId> finished;
  for (const Timed& t : RunToIdle(scheduler, T0())) {
    if (t.event.finish) finished.push_back(t.event.id);
  }
  EXPECT_EQ(finished, ids);
}

TEST(SchedulerTest, MaxNumSeqsCapQueuesTheRest) {
  EngineConfig config;
  config.max_num_seqs = 2;
  config.max_batched_tokens = 1000;
  Scheduler scheduler(config);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(scheduler.Add(Req(10, 4)).ok());
  auto plan = scheduler.BeginStep(T0());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->prefill_seqs, 2);
  EXPECT_EQ(scheduler.num_running(), 2u);
  EXPECT_EQ(scheduler.num_waiting(), 3u);
  scheduler.FinishStep();
  // Running stays capped on every later step.
  MonoTime now = plan->end;
  while (auto next = scheduler.BeginStep(now)) {
    EXPECT_LE(scheduler.num_running(), 2u);
    EXPECT_LE(next->work.decode_seqs + next->prefill_seqs, 2);
    now = next->end;
    scheduler.FinishStep();
  }
  EXPECT_FALSE(scheduler.HasWork());
}

TEST(SchedulerTest, TokenBudgetIsRespectedAndAdmissionIsStrictFcfs) {
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_batched_tokens = 1000;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(400, 10)).ok());
  ASSERT_TRUE(scheduler.Add(Req(400, 10)).ok());
  ASSERT_TRUE(scheduler.Add(Req(400, 10)).ok());  // does not fit with the first two
  ASSERT_TRUE(scheduler.Add(Req(5, 10)).ok());    // would fit, but must not overtake
  auto plan = scheduler.BeginStep(T0());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->work.prefill_tokens, 800);
  EXPECT_EQ(plan->prefill_seqs, 2);
  EXPECT_EQ(scheduler.num_waiting(), 2u);
  scheduler.FinishStep();
  // Next step: 2 decodes (2 tokens) + 400 + 5 = 407 <= 1000.
  auto second = scheduler.BeginStep(plan->end);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->work.decode_seqs, 2);
  EXPECT_EQ(second->work.prefill_tokens, 405);
  EXPECT_EQ(second->work.kv_tokens, 401 + 401 + 405);
  EXPECT_LE(second->work.decode_seqs + second->work.prefill_tokens, config.max_batched_tokens);
  scheduler.FinishStep();
}

TEST(SchedulerTest, DecodesShrinkTheAdmissionBudget) {
  EngineConfig config;
  config.max_num_seqs = 4;
  config.max_batched_tokens = 100;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(50, 10)).ok());
  ASSERT_TRUE(scheduler.BeginStep(T0()));
  scheduler.FinishStep();
  ASSERT_TRUE(scheduler.Add(Req(100, 10)).ok());  // 1 decode leaves 99: must wait
  auto plan = scheduler.BeginStep(T0() + std::chrono::seconds(1));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->work.prefill_tokens, 0);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  scheduler.FinishStep();
}

TEST(SchedulerTest, OversizedPromptIsAdmittedAloneAndTakesTheStep) {
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_batched_tokens = 1000;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(10, 5)).ok());
  ASSERT_TRUE(scheduler.BeginStep(T0()));
  scheduler.FinishStep();  // one sequence now decoding
  ASSERT_TRUE(scheduler.Add(Req(1500, 5)).ok());
  ASSERT_TRUE(scheduler.Add(Req(10, 5)).ok());
  auto plan = scheduler.BeginStep(T0() + std::chrono::seconds(1));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->prefill_seqs, 1);
  EXPECT_EQ(plan->work.prefill_tokens, 1500);
  EXPECT_EQ(plan->work.decode_seqs, 1);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  scheduler.FinishStep();
  auto next = scheduler.BeginStep(plan->end);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->work.prefill_tokens, 10);
  scheduler.FinishStep();
}

TEST(SchedulerTest, OversizedPromptWaitsBehindAnotherPrefillInTheSameStep) {
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_batched_tokens = 1000;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(10, 5)).ok());
  ASSERT_TRUE(scheduler.Add(Req(1500, 5)).ok());
  auto plan = scheduler.BeginStep(T0());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->work.prefill_tokens, 10);
  scheduler.FinishStep();
  auto next = scheduler.BeginStep(plan->end);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->work.prefill_tokens, 1500);
  scheduler.FinishStep();
}

TEST(SchedulerTest, AbortFreesTheSlot) {
  EngineConfig config;
  config.max_num_seqs = 1;
  Scheduler scheduler(config);
  SequenceId a = *scheduler.Add(Req(10, 100));
  SequenceId b = *scheduler.Add(Req(10, 2));
  auto plan = scheduler.BeginStep(T0());
  ASSERT_TRUE(plan);
  scheduler.FinishStep();
  EXPECT_EQ(scheduler.num_running(), 1u);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  scheduler.Abort(a);
  EXPECT_EQ(scheduler.num_running(), 0u);
  auto events = RunToIdle(scheduler, plan->end);
  ASSERT_EQ(events.size(), 2u);
  for (const Timed& t : events) EXPECT_EQ(t.event.id, b);
  scheduler.Abort(a);  // unknown now: no-op
  scheduler.Abort(12345);
}

TEST(SchedulerTest, AbortDuringAStepSuppressesItsToken) {
  Scheduler scheduler(EngineConfig{});
  SequenceId a = *scheduler.Add(Req(10, 5));
  SequenceId b = *scheduler.Add(Req(10, 5));
  ASSERT_TRUE(scheduler.BeginStep(T0()));
  scheduler.Abort(a);
  auto events = scheduler.FinishStep();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, b);
}

TEST(SchedulerTest, AbortWhileWaitingIsNeverAdmitted) {
  EngineConfig config;
  config.max_num_seqs = 1;
  Scheduler scheduler(config);
  SequenceId a = *scheduler.Add(Req(10, 3));
  SequenceId b = *scheduler.Add(Req(10, 3));
  SequenceId c = *scheduler.Add(Req(10, 3));
  scheduler.Abort(b);
  EXPECT_EQ(scheduler.num_waiting(), 2u);
  for (const Timed& t : RunToIdle(scheduler, T0())) {
    EXPECT_NE(t.event.id, b);
    EXPECT_TRUE(t.event.id == a || t.event.id == c);
  }
  // Only aborted work left: no step.
  SequenceId d = *scheduler.Add(Req(10, 3));
  scheduler.Abort(d);
  EXPECT_FALSE(scheduler.HasWork());
  EXPECT_FALSE(scheduler.BeginStep(T0()));
}

TEST(SchedulerTest, RejectsRequestsOverTheContextLimit) {
  EngineConfig config;
  config.max_model_len = 100;
  Scheduler scheduler(config);
  EXPECT_FALSE(scheduler.Add(Req(90, 11)).ok());
  EXPECT_TRUE(scheduler.Add(Req(90, 10)).ok());
  EXPECT_FALSE(scheduler.Add(Req(10, 0)).ok());
  EXPECT_FALSE(scheduler.Add(Req(-1, 5)).ok());
}

TEST(SchedulerTest, EosHonoursMinTokensAndIgnoreEos) {
  EngineConfig config;
  config.eos_probability = 1.0;
  Scheduler scheduler(config);
  SequenceRequest stops = Req(10, 50);
  stops.min_tokens = 3;
  SequenceRequest ignores = Req(10, 6);
  ignores.ignore_eos = true;
  SequenceId a = *scheduler.Add(stops);
  SequenceId b = *scheduler.Add(ignores);
  std::int64_t a_tokens = 0, b_tokens = 0;
  for (const Timed& t : RunToIdle(scheduler, T0())) {
    const FinishReason expected = t.event.id == a ? FinishReason::kStop : FinishReason::kLength;
    if (t.event.id == a) ++a_tokens;
    if (t.event.id == b) ++b_tokens;
    if (t.event.finish) {
      EXPECT_EQ(*t.event.finish, expected);
    }
  }
  EXPECT_EQ(a_tokens, 3);
  EXPECT_EQ(b_tokens, 6);
}

TEST(SchedulerTest, DefaultConfigNeverStopsEarly) {
  Scheduler scheduler(EngineConfig{});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(scheduler.Add(Req(100, 40)).ok());
  std::int64_t tokens = 0;
  for (const Timed& t : RunToIdle(scheduler, T0())) {
    ++tokens;
    if (t.event.finish) {
      EXPECT_EQ(*t.event.finish, FinishReason::kLength);
    }
  }
  EXPECT_EQ(tokens, 20 * 40);
}

}  // namespace
}  // namespace bakeoff::emulate
