// Tests for load/dispatcher.h on a manual clock: what each loop mode hands to its transport and
// when, with no network and no simulator (bench and simulate both run on this dispatch).
#include "load/dispatcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "load/runner.h"

namespace bakeoff::load {
namespace {

using namespace std::chrono_literals;

constexpr MonoTime kT0 = MonoTime(1000s);

// A transport that only remembers what it was handed.
class RecordingSender final : public Sender {
 public:
  void Send(DispatchOrder order) override { orders.push_back(std::move(order)); }
  std::vector<DispatchOrder> orders;
};

measure::RequestRecord Ended(const DispatchOrder& order, measure::Outcome outcome = measure::Outcome::kOk) {
  measure::RequestRecord record;
  record.id = order.id;
  record.phase = order.phase;
  record.outcome = outcome;
  return record;
}

RunSpec OneStep(StepSpec step) {
  RunSpec run;
  run.seed = 7;
  run.shape.prompt_tokens = 16;
  run.shape.output_tokens = 4;
  run.steps.push_back(std::move(step));
  return run;
}

StepSpec OpenStep(double rate, std::uint64_t requests, std::uint64_t warmup_requests) {
  StepSpec step;
  step.mode = LoopMode::kOpen;
  step.open.rate_per_s = rate;
  step.limits.requests = requests;
  step.limits.warmup_requests = warmup_requests;
  return step;
}

StepSpec ClosedStep(std::uint32_t concurrency) {
  StepSpec step;
  step.mode = LoopMode::kClosed;
  step.concurrency = concurrency;
  return step;
}

// Everything a dispatcher for step `step` of `run` needs, on a manual clock at t0. `run` (and its
// trace) outlive the harness.
struct Harness {
  Harness(const RunSpec& run, std::uint32_t step = 0, std::uint32_t worker = 0, std::uint32_t workers = 1,
          StepDispatchState* shared = nullptr)
      : trace_plan(run.steps[step].mode == LoopMode::kTrace
                       ? BuildTracePlan(*run.steps[step].trace, run.steps[step].time_scale, run.steps[step].limits)
                       : TracePlan{}),
        dispatcher(run, step, prompts, &trace_plan, shared != nullptr ? *shared : own_state, worker, workers, kT0,
                   clock, sender) {}

  std::vector<DispatchOrder> TakeAllScheduled() {
    std::vector<DispatchOrder> taken;
    while (dispatcher.HasScheduled()) {
      const MonoTime at = dispatcher.NextScheduledAt();
      taken.push_back(dispatcher.TakeScheduled());
      EXPECT_EQ(taken.back().at, at);
    }
    return taken;
  }

  ManualClock clock{kT0};
  PromptText prompts;
  RecordingSender sender;
  StepDispatchState own_state;
  TracePlan trace_plan;
  Dispatcher dispatcher;
};

TEST(DispatcherTest, OpenLoopWorkersShareThePlannedScheduleExactly) {
  const RunSpec run = OneStep(OpenStep(50, 200, 10));
  const std::vector<PlannedSend> plan =
      BuildOpenLoopSchedule(run.steps[0].open, run.steps[0].limits, ArrivalSeed(run.seed, 0));
  ASSERT_EQ(plan.size(), 210u);
  std::map<std::uint64_t, DispatchOrder> all;
  for (std::uint32_t w = 0; w < 3; ++w) {
    Harness h(run, 0, w, 3);
    EXPECT_EQ(h.dispatcher.PlannedSends(), plan.size());
    EXPECT_FALSE(h.dispatcher.SendingDone());
    for (DispatchOrder& order : h.TakeAllScheduled()) {
      EXPECT_EQ(order.id % 3, w) << "worker " << w << " took another's send";
      all.emplace(order.id, std::move(order));
    }
    EXPECT_TRUE(h.dispatcher.SendingDone());
    EXPECT_TRUE(h.sender.orders.empty()) << "planned sends are taken, not pushed";
  }
  ASSERT_EQ(all.size(), plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const DispatchOrder& order = all.at(i);
    EXPECT_EQ(order.at, kT0 + plan[i].offset) << i;
    EXPECT_EQ(order.phase == measure::Phase::kWarmup, plan[i].warmup) << i;
    EXPECT_EQ(order.prompt_tokens_planned, 16u);
    EXPECT_EQ(order.request.max_tokens, 4u);
    EXPECT_FALSE(order.continues_session);
  }
  EXPECT_EQ(all.at(9).phase, measure::Phase::kWarmup);
  EXPECT_EQ(all.at(10).phase, measure::Phase::kMeasure);
}

TEST(DispatcherTest, AVariantStepReplaysItsBaselinesArrivalsAndPrompts) {
  RunSpec run = OneStep(OpenStep(20, 30, 0));
  StepSpec variant = run.steps[0];
  variant.variant = true;
  variant.baseline = 0;
  run.steps.push_back(variant);
  StepSpec other = run.steps[0];
  run.steps.push_back(other);  // an ordinary third step draws arrivals of its own
  Harness baseline(run, 0), replay(run, 1), third(run, 2);
  const auto a = baseline.TakeAllScheduled(), b = replay.TakeAllScheduled(), c = third.TakeAllScheduled();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at, b[i].at);
    EXPECT_EQ(a[i].request.prompt, b[i].request.prompt);
  }
  ASSERT_EQ(c.size(), a.size());
  EXPECT_NE(c[1].at, a[1].at);
}

TEST(DispatcherTest, ClosedLoopKeepsEachSlotBusyUntilTheCountIsMeasured) {
  StepSpec step = ClosedStep(3);
  step.limits.requests = 5;
  step.limits.warmup_requests = 2;
  const RunSpec run = OneStep(step);
  Harness h(run);
  EXPECT_FALSE(h.dispatcher.HasScheduled());
  EXPECT_EQ(h.dispatcher.PlannedSends(), 0u);
  h.dispatcher.Start();
  ASSERT_EQ(h.sender.orders.size(), 3u);
  // Each ended request frees its slot for the next, sent at the instant it ended, until the fifth
  // measured request has been sent: then the slots empty one by one.
  const std::vector<std::size_t> sent_after = {4, 5, 6, 7, 7, 7, 7};
  for (std::size_t next = 0; next < sent_after.size(); ++next) {
    h.clock.Advance(10ms);
    h.dispatcher.OnFinished(Ended(h.sender.orders[next]), "");
    ASSERT_EQ(h.sender.orders.size(), sent_after[next]) << "after request " << next << " ended";
    if (sent_after[next] > (next == 0 ? 3 : sent_after[next - 1])) {
      EXPECT_EQ(h.sender.orders.back().at, h.clock.Now());
    }
    EXPECT_EQ(h.dispatcher.SendingDone(), next >= 4) << next;
  }
  ASSERT_EQ(h.sender.orders.size(), 7u) << "2 warm-up requests and 5 measured";
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(h.sender.orders[i].id, i);
    EXPECT_EQ(h.sender.orders[i].phase, i < 2 ? measure::Phase::kWarmup : measure::Phase::kMeasure) << i;
  }
  EXPECT_EQ(h.sender.orders[0].at, kT0);
  EXPECT_TRUE(h.dispatcher.SendingDone());
}

TEST(DispatcherTest, ClosedLoopWarmsUpAndMeasuresByTime) {
  StepSpec step = ClosedStep(1);
  step.limits.warmup = 1s;
  step.limits.duration = 2s;
  const RunSpec run = OneStep(step);
  Harness h(run);
  h.dispatcher.Start();
  const std::vector<std::pair<Nanos, measure::Phase>> expected = {
      {0s, measure::Phase::kWarmup}, {900ms, measure::Phase::kWarmup}, {1s, measure::Phase::kMeasure},
      {2900ms, measure::Phase::kMeasure}};
  for (std::size_t i = 1; i < expected.size(); ++i) {
    h.clock.Set(kT0 + expected[i].first);
    h.dispatcher.OnFinished(Ended(h.sender.orders.back()), "");
  }
  ASSERT_EQ(h.sender.orders.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(h.sender.orders[i].at, kT0 + expected[i].first) << i;
    EXPECT_EQ(h.sender.orders[i].phase, expected[i].second) << i;
  }
  EXPECT_FALSE(h.dispatcher.SendingDone());
  h.clock.Set(kT0 + 3s);  // the window (warm-up + duration) is over
  h.dispatcher.OnFinished(Ended(h.sender.orders.back()), "");
  EXPECT_EQ(h.sender.orders.size(), expected.size());
  EXPECT_TRUE(h.dispatcher.SendingDone());
}

TEST(DispatcherTest, ClosedLoopSlotResumesAfterItsBackOff) {
  StepSpec step = ClosedStep(1);
  step.limits.requests = 10;
  const RunSpec run = OneStep(step);
  Harness h(run);
  h.dispatcher.Start();
  h.clock.Advance(5ms);
  h.dispatcher.OnFinished(Ended(h.sender.orders.back(), measure::Outcome::kConnectFailed), "",
                          h.clock.Now() + 40ms);
  ASSERT_EQ(h.sender.orders.size(), 2u);
  EXPECT_EQ(h.sender.orders[1].at, kT0 + 45ms);
  // A resume instant already past is now.
  h.clock.Advance(100ms);
  h.dispatcher.OnFinished(Ended(h.sender.orders.back()), "", kT0);
  EXPECT_EQ(h.sender.orders.back().at, h.clock.Now());
}

// One shard's closed loop, as its two workers' dispatchers run it: the ids each sends, in order.
std::vector<std::uint64_t> ShardIds(std::uint32_t shard_index) {
  StepSpec step = ClosedStep(5);
  step.limits.requests = 5;
  RunSpec run = OneStep(step);
  run.shard_index = shard_index;
  run.shard_count = 2;
  StepDispatchState shared;
  // This shard's two workers are the run's workers shard_index and shard_index + 2 of 4 (runner.cc
  // deals them so): of 5 slots, worker 0 of the run gets 2, the others 1.
  Harness first(run, 0, shard_index, 4, &shared), second(run, 0, shard_index + 2, 4, &shared);
  first.dispatcher.Start();
  second.dispatcher.Start();
  EXPECT_EQ(first.sender.orders.size(), shard_index == 0 ? 2u : 1u);
  EXPECT_EQ(second.sender.orders.size(), 1u);
  for (std::size_t round = 0; round < 4; ++round) {
    for (Harness* h : {&first, &second}) {
      if (round < h->sender.orders.size()) h->dispatcher.OnFinished(Ended(h->sender.orders[round]), "");
    }
  }
  EXPECT_TRUE(first.dispatcher.SendingDone());
  EXPECT_TRUE(second.dispatcher.SendingDone());
  std::vector<std::uint64_t> ids;
  for (const Harness* h : {&first, &second}) {
    for (const DispatchOrder& order : h->sender.orders) ids.push_back(order.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(DispatcherTest, ClosedLoopIdsAndCountsAreDealtAcrossShardsAndWorkers) {
  // 5 measured requests over 2 shards: shard 0 measures 3 (even ids), shard 1 measures 2 (odd).
  EXPECT_EQ(ShardIds(0), (std::vector<std::uint64_t>{0, 2, 4}));
  EXPECT_EQ(ShardIds(1), (std::vector<std::uint64_t>{1, 3}));
}

TEST(DispatcherTest, AWorkerWithoutASlotIsDoneAtOnce) {
  const RunSpec run = OneStep(ClosedStep(1));
  Harness idle(run, 0, 1, 2);
  idle.dispatcher.Start();
  EXPECT_TRUE(idle.sender.orders.empty());
  EXPECT_TRUE(idle.dispatcher.SendingDone()) << "else its step would never end";
}

workload::Trace SessionTrace() {
  workload::Trace trace;
  auto add = [&](double arrival, std::optional<std::string> session, std::uint32_t turn, double think) {
    workload::TraceRequest r;
    r.arrival_s = arrival;
    r.input_tokens = 12;
    r.output_tokens = 3;
    r.session_id = std::move(session);
    if (r.session_id) r.turn = turn;
    if (think > 0) r.think_time_s = think;
    trace.requests.push_back(std::move(r));
  };
  add(0, "a", 0, 0);       // 0: opens session a
  add(0.5, {}, 0, 0);      // 1: on its own
  add(3, "a", 1, 2);       // 2: a's second turn, 2 s after the first answer
  add(9, "a", 2, 1);       // 3: a's third turn
  return trace;
}

TEST(DispatcherTest, ASessionsNextTurnFollowsTheRealAnswerAfterItsThinkTime) {
  const workload::Trace trace = SessionTrace();
  StepSpec step;
  step.mode = LoopMode::kTrace;
  step.trace = &trace;
  step.time_scale = 2;
  step.limits.requests = 100;
  RunSpec run = OneStep(step);
  run.target.request.api = dialect::Api::kChat;
  Harness h(run);
  EXPECT_EQ(h.dispatcher.PlannedSends(), 2u) << "only the openers are planned";
  const std::vector<DispatchOrder> openers = h.TakeAllScheduled();
  ASSERT_EQ(openers.size(), 2u);
  EXPECT_EQ(openers[0].id, 0u);
  EXPECT_EQ(openers[0].at, kT0);
  EXPECT_TRUE(openers[0].continues_session);
  EXPECT_EQ(openers[1].id, 1u);
  EXPECT_EQ(openers[1].at, kT0 + 1s) << "arrivals scaled by --time-scale";
  EXPECT_FALSE(openers[1].continues_session);
  EXPECT_TRUE(h.dispatcher.SendingDone()) << "nothing planned is left; turns follow answers";

  // The first answer arrives at 5 s: the second turn leaves 2 s x 2 later, carrying it.
  h.clock.Set(kT0 + 5s);
  h.dispatcher.OnFinished(Ended(openers[1]), "");
  EXPECT_TRUE(h.sender.orders.empty()) << "a request without a session leads to nothing";
  h.dispatcher.OnFinished(Ended(openers[0]), "the first answer");
  ASSERT_EQ(h.sender.orders.size(), 1u);
  const DispatchOrder second = h.sender.orders[0];
  EXPECT_EQ(second.id, 2u);
  EXPECT_EQ(second.at, kT0 + 9s);
  EXPECT_TRUE(second.continues_session);
  const History& history = second.request.history;
  ASSERT_GE(history.size(), 2u);
  EXPECT_EQ(history[history.size() - 2], (std::pair<std::string, std::string>("user", openers[0].request.prompt)));
  EXPECT_EQ(history.back(), (std::pair<std::string, std::string>("assistant", "the first answer")));

  // The second turn fails: its session ends, and the turn it would have led to is counted.
  h.clock.Set(kT0 + 12s);
  h.dispatcher.OnFinished(Ended(second, measure::Outcome::kHttpError), "");
  EXPECT_EQ(h.sender.orders.size(), 1u);
  EXPECT_EQ(h.own_state.session_turns_skipped.load(), 1u);
}

TEST(DispatcherTest, StopLeavesSlotsEmptyAndEndsSessions) {
  StepSpec closed = ClosedStep(2);
  closed.limits.requests = 100;
  const RunSpec closed_run = OneStep(closed);
  Harness h(closed_run);
  h.dispatcher.Start();
  ASSERT_EQ(h.sender.orders.size(), 2u);
  EXPECT_FALSE(h.dispatcher.SendingDone());
  h.dispatcher.Stop();
  EXPECT_TRUE(h.dispatcher.SendingDone());
  h.dispatcher.OnFinished(Ended(h.sender.orders[0], measure::Outcome::kCancelled), "");
  EXPECT_EQ(h.sender.orders.size(), 2u);

  const workload::Trace trace = SessionTrace();
  StepSpec replay;
  replay.mode = LoopMode::kTrace;
  replay.trace = &trace;
  replay.limits.requests = 100;
  const RunSpec replay_run = OneStep(replay);
  Harness t(replay_run);
  const DispatchOrder opener = t.dispatcher.TakeScheduled();
  t.dispatcher.Stop();
  EXPECT_FALSE(t.dispatcher.HasScheduled());
  t.dispatcher.OnFinished(Ended(opener), "an answer");
  EXPECT_TRUE(t.sender.orders.empty());
  EXPECT_EQ(t.own_state.session_turns_skipped.load(), 2u);
}

}  // namespace
}  // namespace bakeoff::load
