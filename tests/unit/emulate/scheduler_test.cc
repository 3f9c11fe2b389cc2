// Tests for emulate/cost_model.h and emulate/scheduler.h on explicit time (no sleeping).
#include "emulate/scheduler.h"

#include "emulate/tokenizer.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

namespace bakeoff::emulate {
namespace {

using std::chrono::milliseconds;

MonoTime T0() { return MonoTime{} + std::chrono::seconds(100); }

// A prompt of `prompt` tokens no other prompt shares (ids from a running counter).
SequenceRequest Req(std::int64_t prompt, std::int64_t max_tokens) {
  static TokenId next = 1;
  SequenceRequest request;
  for (std::int64_t i = 0; i < prompt; ++i) request.prompt.push_back(next++ % kVocabSize);
  request.max_tokens = max_tokens;
  return request;
}

// A prompt of `shared` tokens common to every call, then `own` tokens of its own.
SequenceRequest SharedPrefixReq(std::int64_t shared, std::int64_t own, std::int64_t max_tokens) {
  SequenceRequest request = Req(own, max_tokens);
  std::vector<TokenId> prompt;
  for (std::int64_t i = 0; i < shared; ++i) prompt.push_back(static_cast<TokenId>(31000 + i % 500));
  prompt.insert(prompt.end(), request.prompt.begin(), request.prompt.end());
  request.prompt = std::move(prompt);
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

TEST(CostModelTest, PairTermCountsTheCausalAttentionOfEachChunk) {
  EXPECT_EQ(PrefillPairs(0, 1), 1);
  EXPECT_EQ(PrefillPairs(0, 1000), 500500);           // P (P + 1) / 2
  EXPECT_EQ(PrefillPairs(256, 100), 25600 + 5050);     // after 256 tokens: 100 x 256 more
  EXPECT_EQ(PrefillPairs(0, 256) + PrefillPairs(256, 344), PrefillPairs(0, 600));  // chunks add up
  CostModel model;
  model.prefill_ms_per_1m_pairs = 2;
  StepWork work{1000, 0, 1000};
  work.prefill_pairs = PrefillPairs(0, 1000);
  EXPECT_DOUBLE_EQ(StepMillis(model, work), 6.0 + 60.0 + 0.04 + 2 * 0.5005);
  model.prefill_ms_per_1m_pairs = -1;
  ASSERT_FALSE(ValidateCostModel(model).ok());
  EXPECT_NE(ValidateCostModel(model).error().message.find("prefill_ms_per_1m_pairs"), std::string::npos);
}

// With whole-batch attention the pairs are the step's prompt tokens times every KV token of the
// step, the decoding sequences' included: a prompt beside two decoding streams of 1,000 tokens
// costs more than alone, where the causal count does not see them.
TEST(CostModelTest, WholeBatchAttentionCountsThePromptAgainstTheStepsWholeKv) {
  CostModel model;
  model.prefill_ms_per_1m_pairs = 2;
  model.whole_batch_attention = true;
  StepWork alone{500, 0, 500};
  alone.prefill_pairs = PrefillPairs(0, 500);  // not read: the whole-batch count is 500 x 500
  EXPECT_DOUBLE_EQ(StepMillis(model, alone), 6.0 + 30.0 + 0.02 + 2 * 0.25);
  StepWork among{500, 2, 2500};
  among.prefill_pairs = PrefillPairs(0, 500);
  EXPECT_DOUBLE_EQ(StepMillis(model, among), 6.0 + 30.0 + 0.16 + 0.1 + 2 * 1.25);
  model.whole_batch_attention = false;
  EXPECT_DOUBLE_EQ(StepMillis(model, among), 6.0 + 30.0 + 0.16 + 0.1 + 2 * 0.12525);
  // No prompt in the step, no pairs.
  model.whole_batch_attention = true;
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{0, 2, 2000}), 6.0 + 0.16 + 0.08);
}

// The cells idle slots keep are attended like the step's own under whole-batch attention (pairs
// and KV term), and cost nothing without it.
TEST(CostModelTest, IdleSlotsKvIsAttendedOnlyUnderWholeBatchAttention) {
  CostModel model;
  model.prefill_ms_per_1m_pairs = 2;
  StepWork work{500, 0, 500};
  work.prefill_pairs = PrefillPairs(0, 500);
  work.idle_kv_tokens = 1500;
  EXPECT_DOUBLE_EQ(StepMillis(model, work), 6.0 + 30.0 + 0.02 + 2 * 0.12525);
  model.whole_batch_attention = true;
  EXPECT_DOUBLE_EQ(StepMillis(model, work), 6.0 + 30.0 + 0.08 + 2 * 1.0);
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{.decode_seqs = 1, .kv_tokens = 100, .idle_kv_tokens = 900}),
                   6.0 + 0.08 + 0.04);
}

// The decode pair term: each decoding token against every KV token of the step (the idle slots'
// too under whole-batch attention), so four streams of 1,000 tokens pay 16 times one stream's
// pairs of the same context.
TEST(CostModelTest, DecodePairsGrowWithTheStreamsSquare) {
  CostModel model;
  model.decode_ms_per_1m_pairs = 500;
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{0, 1, 1000}), 6.0 + 0.08 + 0.04 + 0.5);
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{0, 4, 4000}), 6.0 + 0.32 + 0.16 + 8.0);
  StepWork with_idle{.decode_seqs = 1, .kv_tokens = 1000, .idle_kv_tokens = 1000};
  EXPECT_DOUBLE_EQ(StepMillis(model, with_idle), 6.0 + 0.08 + 0.04 + 0.5);
  model.whole_batch_attention = true;
  EXPECT_DOUBLE_EQ(StepMillis(model, with_idle), 6.0 + 0.08 + 0.08 + 1.0);
  model.decode_ms_per_1m_pairs = -1;
  ASSERT_FALSE(ValidateCostModel(model).ok());
  EXPECT_NE(ValidateCostModel(model).error().message.find("decode_ms_per_1m_pairs"), std::string::npos);
}

// The multi-token cost is paid by a step computing two tokens or more, in any mix, and not by a
// lone decode token (nor a one-token prompt).
TEST(CostModelTest, MultiTokenCostIsPaidByEveryStepOfMoreThanOneToken) {
  CostModel model;
  model.multi_token_ms = 5;
  const double lone = StepMillis(model, StepWork{0, 1, 100});
  EXPECT_DOUBLE_EQ(lone, 6.0 + 0.08 + 0.004);
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{1, 0, 1}), 6.0 + 0.06 + 0.00004);
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{0, 2, 200}), 6.0 + 5 + 0.16 + 0.008);
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{1, 1, 101}), 6.0 + 5 + 0.06 + 0.08 + 0.00404);
  EXPECT_DOUBLE_EQ(StepMillis(model, StepWork{32, 0, 32}), 6.0 + 5 + 32 * 0.06 + 0.00128);
  model.multi_token_ms = -1;
  ASSERT_FALSE(ValidateCostModel(model).ok());
  EXPECT_NE(ValidateCostModel(model).error().message.find("multi_token_ms"), std::string::npos);
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
  config.max_model_len = 1000;
  config.chunked_prefill = false;
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

TEST(SchedulerTest, DecodesShrinkTheAdmissionBudgetWithoutChunking) {
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_batched_tokens = 110;
  config.max_model_len = 110;
  config.chunked_prefill = false;
  Scheduler scheduler(config);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(scheduler.Add(Req(1, 50)).ok());
  ASSERT_TRUE(scheduler.BeginStep(T0()));
  scheduler.FinishStep();
  ASSERT_TRUE(scheduler.Add(Req(105, 5)).ok());  // 6 decodes leave 104: must wait
  auto plan = scheduler.BeginStep(T0() + std::chrono::seconds(1));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->work.prefill_tokens, 0);
  EXPECT_EQ(plan->work.decode_seqs, 6);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  scheduler.FinishStep();
}

TEST(SchedulerTest, ChunkedPrefillSplitsALongPromptAcrossSteps) {
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_batched_tokens = 1000;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(10, 20)).ok());
  ASSERT_TRUE(scheduler.BeginStep(T0()));
  scheduler.FinishStep();  // one sequence now decoding
  SequenceId longer = *scheduler.Add(Req(2500, 5));
  MonoTime now = T0() + std::chrono::seconds(1);
  std::vector<std::int64_t> chunks;
  std::optional<MonoTime> first_token;
  while (!first_token) {
    auto plan = scheduler.BeginStep(now);
    ASSERT_TRUE(plan);
    EXPECT_EQ(plan->work.decode_seqs, 1);  // the decoder is never paused
    EXPECT_LE(plan->work.prefill_tokens + plan->work.decode_seqs, config.max_batched_tokens);
    chunks.push_back(plan->work.prefill_tokens);
    now = plan->end;
    for (const TokenEvent& event : scheduler.FinishStep()) {
      if (event.id == longer) first_token = now;
    }
  }
  EXPECT_EQ(chunks, (std::vector<std::int64_t>{999, 999, 502}));
}

TEST(SchedulerTest, ChunkSizeLimitsOneSequencesPrefillPerStep) {
  EngineConfig config;
  config.prefill_chunk_tokens = 256;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(600, 2)).ok());
  std::vector<std::int64_t> chunks;
  MonoTime now = T0();
  while (auto plan = scheduler.BeginStep(now)) {
    chunks.push_back(plan->work.prefill_tokens);
    now = plan->end;
    scheduler.FinishStep();
  }
  EXPECT_EQ(chunks, (std::vector<std::int64_t>{256, 256, 88, 0}));
  const SingleRequestTiming expected = ExpectedSingleRequest(config, 600, 2);
  EXPECT_EQ(now - T0(), expected.e2e);
}

// The pair term: each chunk pays for its attention over what came before it, so the chunks' pairs
// add up to the whole prompt's, and the scheduler's steps match ExpectedSingleRequest.
TEST(SchedulerTest, ChunksPayTheAttentionPairsOverWhatCameBefore) {
  EngineConfig config;
  config.cost.prefill_ms_per_1m_pairs = 3;
  config.prefill_chunk_tokens = 256;
  Scheduler scheduler(config);
  ASSERT_TRUE(scheduler.Add(Req(600, 2)).ok());
  std::vector<std::int64_t> pairs;
  MonoTime now = T0();
  while (auto plan = scheduler.BeginStep(now)) {
    pairs.push_back(plan->work.prefill_pairs);
    now = plan->end;
    scheduler.FinishStep();
  }
  EXPECT_EQ(pairs, (std::vector<std::int64_t>{PrefillPairs(0, 256), PrefillPairs(256, 256), PrefillPairs(512, 88), 0}));
  EXPECT_EQ(now - T0(), ExpectedSingleRequest(config, 600, 2).e2e);
  // Unchunked, one step: TTFT has the closed form's P (P + 1) / 2 pairs.
  config.chunked_prefill = false;
  const SingleRequestTiming whole = ExpectedSingleRequest(config, 1000, 2);
  EXPECT_NEAR(ToMillis(whole.ttft), 6.0 + 0.06 * 1000 + 0.04 + 3 * 0.5005, 1e-6);
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

// slots_keep_kv: a finished request's slot keeps its KV (prompt and output but the last token)
// until a request takes the slot; requests take the idle slot left longest ago, an unused one
// first; a preempted sequence's slot keeps nothing, an aborted one's what it had computed.
TEST(SchedulerTest, IdleSlotsKeepTheLastRequestsKvUntilTakenLeastRecentlyUsedFirst) {
  EngineConfig config;
  config.max_num_seqs = 3;
  config.slots_keep_kv = true;
  config.cost.whole_batch_attention = true;
  config.cost.prefill_ms_per_1m_pairs = 2;
  Scheduler scheduler(config);
  // Runs one request alone to the end; returns the idle KV its first step attended.
  MonoTime now = T0();
  auto run_alone = [&](std::int64_t prompt, std::int64_t max_tokens) {
    EXPECT_TRUE(scheduler.Add(Req(prompt, max_tokens)).ok());
    auto plan = scheduler.BeginStep(now);
    EXPECT_TRUE(plan);
    if (!plan) return std::int64_t{-1};
    const std::int64_t idle = plan->work.idle_kv_tokens;
    StepWork expected{prompt, 0, prompt};
    expected.idle_kv_tokens = idle;
    EXPECT_EQ(plan->end - now, StepTime(config.cost, expected));
    now = plan->end;
    scheduler.FinishStep();
    for (const Timed& t : RunToIdle(scheduler, now)) now = t.at;
    return idle;
  };
  EXPECT_EQ(run_alone(100, 3), 0);    // slot 0 keeps 102
  EXPECT_EQ(run_alone(200, 1), 102);  // slot 1 (never used) keeps 200
  EXPECT_EQ(run_alone(50, 1), 302);   // slot 2 keeps 50
  EXPECT_EQ(run_alone(10, 1), 250);   // slot 0, left longest ago, replaced: keeps 10
  EXPECT_EQ(run_alone(20, 1), 60);    // slot 1's 200 replaced
  // An aborted request's slot keeps what it had computed.
  const SequenceId aborted = *scheduler.Add(Req(30, 100));
  auto step = scheduler.BeginStep(now);  // slot 2, left longest ago: its 50 replaced
  ASSERT_TRUE(step);
  EXPECT_EQ(step->work.idle_kv_tokens, 10 + 20);
  now = step->end;
  scheduler.FinishStep();
  scheduler.Abort(aborted);               // 30 computed (its first output token's KV is not)
  EXPECT_EQ(run_alone(5, 1), 20 + 30);    // slot 0 (10) taken
  // Without the setting nothing is kept.
  config.slots_keep_kv = false;
  Scheduler plain(config);
  ASSERT_TRUE(plain.Add(Req(100, 2)).ok());
  RunToIdle(plain, T0());
  ASSERT_TRUE(plain.Add(Req(100, 2)).ok());
  auto plan = plain.BeginStep(T0() + std::chrono::seconds(10));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->work.idle_kv_tokens, 0);
}

// A preempted sequence leaves its slot empty (its KV is released); while it waits, the slot is
// idle and can be taken.
TEST(SchedulerTest, APreemptedSequencesSlotKeepsNothing) {
  EngineConfig config;
  config.max_model_len = 600;
  config.kv.block_tokens = 16;
  config.kv.num_blocks = 40;
  config.kv.watermark = 0;
  config.max_num_seqs = 4;
  config.slots_keep_kv = true;
  Scheduler scheduler(config);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(scheduler.Add(Req(100, 200)).ok());
  MonoTime now = T0();
  std::int64_t preempted = 0;
  while (auto plan = scheduler.BeginStep(now)) {
    preempted += plan->preempted;
    // Idle slots hold only what finished sequences kept (each at most 299 tokens).
    EXPECT_LE(plan->work.idle_kv_tokens, 3 * 299);
    now = plan->end;
    scheduler.FinishStep();
  }
  EXPECT_GT(preempted, 0);
  ASSERT_TRUE(scheduler.Add(Req(10, 1)).ok());
  auto plan = scheduler.BeginStep(now);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->work.idle_kv_tokens, 3 * 299) << "four slots kept 299 each; the new request took one";
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
  EXPECT_FALSE(scheduler.Add(Req(0, 5)).ok());
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

TEST(SchedulerTest, RunningOutOfKvPreemptsTheLastAdmittedAndRecomputesIt) {
  EngineConfig config;
  config.max_model_len = 600;
  config.kv.block_tokens = 16;
  config.kv.num_blocks = 40;  // 640 tokens: four requests growing to 300 tokens cannot all fit
  config.kv.watermark = 0;
  Scheduler scheduler(config);
  std::vector<SequenceId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*scheduler.Add(Req(100, 200)));
  std::map<SequenceId, std::int64_t> next_index;
  std::int64_t preempted = 0;
  MonoTime now = T0();
  while (auto plan = scheduler.BeginStep(now)) {
    preempted += plan->preempted;
    EXPECT_LE(scheduler.counters().kv.used_tokens, 640);
    now = plan->end;
    for (const TokenEvent& event : scheduler.FinishStep()) {
      EXPECT_EQ(event.index, next_index[event.id]++) << "each token exactly once, in order";
    }
  }
  EXPECT_GT(preempted, 0);
  const EngineCounters counters = scheduler.counters();
  EXPECT_EQ(counters.preemptions, static_cast<std::uint64_t>(preempted));
  for (SequenceId id : ids) EXPECT_EQ(next_index[id], 200);
  EXPECT_EQ(counters.generation_tokens, 800u);
  EXPECT_EQ(counters.prompt_tokens, 400u);
  EXPECT_GT(counters.prefill_tokens, 400u) << "preempted sequences recompute their context";
  // The exported prefix-cache queries are each prompt once, at its first admission; a preempted
  // request's lookups when it comes back (prompt and answer so far) are counted apart.
  EXPECT_EQ(counters.prefix_queries_tokens, 400u);
  EXPECT_GT(counters.resumed_queries_tokens, 0u);
  EXPECT_GE(counters.kv.prefix_queries_tokens, counters.prefix_queries_tokens + counters.resumed_queries_tokens);
  EXPECT_EQ(counters.kv.used_tokens, 0);
}

class PrefixCachingTest : public ::testing::TestWithParam<PrefixCaching> {};

TEST_P(PrefixCachingTest, ASharedPromptIsPrefilledOnce) {
  EngineConfig config;
  config.kv.prefix_caching = GetParam();
  Scheduler scheduler(config);
  auto first_step_of = [&](SequenceRequest request) {
    const SequenceId id = *scheduler.Add(std::move(request));
    auto plan = scheduler.BeginStep(T0());
    EXPECT_TRUE(plan);
    std::int64_t cached = -1;
    MonoTime now = plan->end;
    for (const TokenEvent& event : scheduler.FinishStep()) {
      if (event.id == id && event.index == 0) cached = event.cached_prompt_tokens;
    }
    while (auto next = scheduler.BeginStep(now)) {
      now = next->end;
      scheduler.FinishStep();
    }
    return std::make_pair(plan->work.prefill_tokens, cached);
  };
  const auto [first_prefill, first_cached] = first_step_of(SharedPrefixReq(2000, 48, 4));
  EXPECT_EQ(first_prefill, 2048);
  EXPECT_EQ(first_cached, 0);
  const auto [second_prefill, second_cached] = first_step_of(SharedPrefixReq(2000, 48, 4));
  if (GetParam() == PrefixCaching::kNone) {
    EXPECT_EQ(second_prefill, 2048);
    EXPECT_EQ(second_cached, 0);
  } else {
    EXPECT_EQ(second_cached, 2000);  // 125 whole blocks of 16: both flavours find all of it
    EXPECT_EQ(second_prefill, 48);
    const EngineCounters counters = scheduler.counters();
    EXPECT_EQ(counters.kv.prefix_hit_tokens, 2000u);
    EXPECT_EQ(counters.kv.prefix_queries_tokens, 2 * 2048u);
    EXPECT_EQ(counters.prefix_hit_tokens, 2000u);  // as vLLM exports them: the same, without preemption
    EXPECT_EQ(counters.prefix_queries_tokens, 2 * 2048u);
    EXPECT_EQ(counters.resumed_queries_tokens, 0u);
  }
}

TEST_P(PrefixCachingTest, ANextTurnQuotingTheAnswerHitsTheAnswerToo) {
  EngineConfig config;
  config.kv.prefix_caching = GetParam();
  Scheduler scheduler(config);
  SequenceRequest first = Req(100, 40);
  first.ignore_eos = true;
  std::vector<TokenId> next_prompt = first.prompt;
  ASSERT_TRUE(scheduler.Add(std::move(first)).ok());
  RunToIdle(scheduler, T0());
  // The client sends the conversation so far: the first prompt, the answer's text, a new turn.
  std::string answer;
  for (std::uint64_t i = 0; i < 40; ++i) answer += OutputPiece(0, i);
  for (TokenId id : TokenIds(answer)) next_prompt.push_back(id);
  for (TokenId id : Req(20, 1).prompt) next_prompt.push_back(id);
  SequenceRequest second;
  second.prompt = next_prompt;
  second.max_tokens = 2;
  const SequenceId id = *scheduler.Add(std::move(second));
  std::int64_t cached = -1;
  for (const Timed& t : RunToIdle(scheduler, T0() + std::chrono::seconds(10))) {
    if (t.event.id == id && t.event.index == 0) cached = t.event.cached_prompt_tokens;
  }
  // 140 tokens of history; the first 139 had KV (the last answer token was never fed back).
  const std::int64_t expected = GetParam() == PrefixCaching::kNone     ? 0
                                : GetParam() == PrefixCaching::kRadix ? 139
                                                                      : 128;  // 8 whole blocks
  EXPECT_EQ(cached, expected);
}

INSTANTIATE_TEST_SUITE_P(AllFlavours, PrefixCachingTest,
                         ::testing::Values(PrefixCaching::kNone, PrefixCaching::kHashedBlocks,
                                           PrefixCaching::kRadix),
                         [](const auto& param_info) {
                           std::string name(PrefixCachingName(param_info.param));
                           std::erase(name, '-');
                           return name;
                         });

// One sequence decoding, then `waiting` more requests queued: the next step's plan.
StepPlan StepAfterOneDecoder(SchedulingPolicy policy, int waiting) {
  EngineConfig config;
  config.policy = policy;
  Scheduler scheduler(config);
  EXPECT_TRUE(scheduler.Add(Req(10, 50)).ok());
  auto first = scheduler.BeginStep(T0());
  EXPECT_TRUE(first);
  scheduler.FinishStep();
  for (int i = 0; i < waiting; ++i) EXPECT_TRUE(scheduler.Add(Req(100, 5)).ok());
  auto plan = scheduler.BeginStep(first->end);
  EXPECT_TRUE(plan);
  scheduler.FinishStep();
  return *plan;
}

TEST(SchedulerPolicyTest, FcfsMixesDecodesAndEveryFittingPrefill) {
  const StepPlan plan = StepAfterOneDecoder(SchedulingPolicy::kFcfs, 3);
  EXPECT_EQ(plan.work.decode_seqs, 1);
  EXPECT_EQ(plan.prefill_seqs, 3);
}

TEST(SchedulerPolicyTest, PrefillFirstPausesDecodes) {
  const StepPlan plan = StepAfterOneDecoder(SchedulingPolicy::kPrefillFirst, 3);
  EXPECT_EQ(plan.work.decode_seqs, 0);
  EXPECT_EQ(plan.prefill_seqs, 3);
  const StepPlan idle_queue = StepAfterOneDecoder(SchedulingPolicy::kPrefillFirst, 0);
  EXPECT_EQ(idle_queue.work.decode_seqs, 1);
}

TEST(SchedulerPolicyTest, DecodeFirstTakesOnePrefillNextToDecodes) {
  const StepPlan plan = StepAfterOneDecoder(SchedulingPolicy::kDecodeFirst, 3);
  EXPECT_EQ(plan.work.decode_seqs, 1);
  EXPECT_EQ(plan.prefill_seqs, 1);
}

TEST(SchedulerPolicyTest, StaticBatchRunsTheBatchToItsLongestMember) {
  EngineConfig config;
  config.policy = SchedulingPolicy::kStaticBatch;
  config.max_num_seqs = 4;
  Scheduler scheduler(config);
  const SequenceId short_one = *scheduler.Add(Req(10, 2));
  const SequenceId long_one = *scheduler.Add(Req(10, 6));
  auto plan = scheduler.BeginStep(T0());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->prefill_seqs, 2);
  scheduler.FinishStep();
  const SequenceId late = *scheduler.Add(Req(10, 2));  // arrives while the batch runs
  MonoTime now = plan->end;
  std::vector<SequenceId> order;
  while (auto next = scheduler.BeginStep(now)) {
    const bool first_batch = order.size() < 2;
    if (first_batch) {
      EXPECT_EQ(next->work.decode_seqs, 2) << "finished members pad the batch";
    } else if (next->prefill_seqs == 0) {
      EXPECT_EQ(next->work.decode_seqs, 1);
    }
    now = next->end;
    for (const TokenEvent& event : scheduler.FinishStep()) {
      if (event.finish) order.push_back(event.id);
    }
  }
  EXPECT_EQ(order, (std::vector<SequenceId>{short_one, long_one, late}));
}

TEST(SchedulerPolicyTest, LongestPrefixMatchAdmitsTheCachedPromptFirst) {
  for (SchedulingPolicy policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kLongestPrefixMatch}) {
    EngineConfig config;
    config.policy = policy;
    config.kv.prefix_caching = PrefixCaching::kRadix;
    config.max_num_seqs = 1;
    Scheduler scheduler(config);
    ASSERT_TRUE(scheduler.Add(SharedPrefixReq(500, 10, 2)).ok());
    RunToIdle(scheduler, T0());  // the shared prefix is now cached
    const SequenceId cold = *scheduler.Add(Req(510, 2));
    const SequenceId warm = *scheduler.Add(SharedPrefixReq(500, 10, 2));
    auto events = RunToIdle(scheduler, T0() + std::chrono::seconds(10));
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front().event.id, policy == SchedulingPolicy::kFcfs ? cold : warm)
        << PolicyName(policy);
  }
}

TEST(SchedulerTest, StepNoiseIsSeededWithMeanOne) {
  auto step_ends = [](std::uint64_t seed) {
    EngineConfig config;
    config.step_noise_cv = 0.2;
    config.seed = seed;
    Scheduler scheduler(config);
    EXPECT_TRUE(scheduler.Add(Req(10, 2000)).ok());
    std::vector<Nanos> durations;
    MonoTime now = T0();
    while (auto plan = scheduler.BeginStep(now)) {
      durations.push_back(plan->end - now);
      now = plan->end;
      scheduler.FinishStep();
    }
    return durations;
  };
  const auto a = step_ends(7);
  EXPECT_EQ(a, step_ends(7));
  EXPECT_NE(a, step_ends(8));
  const SingleRequestTiming clean = ExpectedSingleRequest(EngineConfig{}, 10, 2000);
  double total_ms = 0;
  for (std::size_t i = 1; i < a.size(); ++i) total_ms += ToMillis(a[i]);
  const double mean_ratio = total_ms / (a.size() - 1) / ToMillis(clean.tpot);
  EXPECT_NEAR(mean_ratio, 1.0, 0.03);
}

TEST(SchedulerTest, ValidationRefusesImpossibleKvBudgets) {
  EngineConfig config;
  config.kv.num_blocks = 100;  // 1600 tokens < max_model_len 32768
  Status status = ValidateEngineConfig(config);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("kv.num_blocks"), std::string::npos);
  config = EngineConfig{};
  config.policy = SchedulingPolicy::kLongestPrefixMatch;
  EXPECT_FALSE(ValidateEngineConfig(config).ok());
  config = EngineConfig{};
  config.chunked_prefill = false;  // budget 8192 < max_model_len 32768
  EXPECT_FALSE(ValidateEngineConfig(config).ok());
  config = EngineConfig{};
  config.max_model_len = std::numeric_limits<std::int64_t>::max();  // would overflow the block count
  status = ValidateEngineConfig(config);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("max_model_len"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::emulate

namespace bakeoff::emulate {
namespace {

// Grammar: each decoding step of a constrained sequence costs grammar_ms_per_token more, and
// nothing else changes.
TEST(SchedulerCostTest, AGrammarAddsItsCostToEveryDecodeStep) {
  EngineConfig config;
  config.cost.grammar_ms_per_token = 0.5;
  auto run = [&](bool constrained) {
    Scheduler scheduler(config);
    SequenceRequest request = Req(100, 11);
    request.constrained = constrained;
    EXPECT_TRUE(scheduler.Add(std::move(request)).ok());
    return RunToIdle(scheduler, T0());
  };
  const std::vector<Timed> plain = run(false);
  const std::vector<Timed> constrained = run(true);
  ASSERT_EQ(plain.size(), 11u);
  ASSERT_EQ(constrained.size(), 11u);
  EXPECT_EQ(constrained.front().at, plain.front().at);  // the prefill has no grammar step
  const Nanos plain_decode = plain.back().at - plain.front().at;
  const Nanos constrained_decode = constrained.back().at - constrained.front().at;
  EXPECT_EQ(constrained_decode - plain_decode, 10 * Nanos(500'000));  // 10 decode steps x 0.5 ms
}

// LoRA: the running sequences use at most max_loras adapters (a request with another waits), a
// step that brings an adapter not resident pays lora_load_ms once, and a resident one is free.
TEST(SchedulerCostTest, AdaptersBeyondMaxLorasWaitAndEachLoadIsPaidOnce) {
  EngineConfig config;
  config.max_loras = 1;
  config.cost.lora_load_ms = 40;
  Scheduler scheduler(config);
  SequenceRequest first = Req(20, 5);
  first.lora = 1;
  SequenceRequest second = Req(20, 5);
  second.lora = 2;
  SequenceRequest third = Req(20, 5);
  third.lora = 2;
  const SequenceId a = *scheduler.Add(std::move(first));
  const SequenceId b = *scheduler.Add(std::move(second));
  const SequenceId c = *scheduler.Add(std::move(third));
  std::map<SequenceId, MonoTime> first_token, last_token;
  for (const Timed& t : RunToIdle(scheduler, T0())) {
    if (t.event.index == 0) first_token[t.event.id] = t.at;
    if (t.event.finish) last_token[t.event.id] = t.at;
  }
  // Adapter 2 waits until adapter 1 has no sequence left; the two of adapter 2 run together.
  EXPECT_GE(first_token[b], last_token[a]);
  EXPECT_EQ(first_token[b], first_token[c]);
  EXPECT_EQ(scheduler.counters().lora_loads, 2u);
  // The first prefill step paid one load; a lone request of the base model would not.
  Scheduler base(EngineConfig{});
  ASSERT_TRUE(base.Add(Req(20, 5)).ok());
  const std::vector<Timed> plain = RunToIdle(base, T0());
  EXPECT_EQ(first_token[a] - plain.front().at, Nanos(40'000'000));
}

}  // namespace
}  // namespace bakeoff::emulate
