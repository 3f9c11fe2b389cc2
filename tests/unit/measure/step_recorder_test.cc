#include "measure/step_recorder.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/rng.h"

namespace bakeoff::measure {
namespace {

using std::chrono::milliseconds;

const MonoTime kT0{std::chrono::seconds(100)};

// An ok request sent at `send_ms` whose token events come `gap_ms` apart from `ttft_ms` on.
RequestRecord Ok(std::uint64_t id, double send_ms, double ttft_ms, double gap_ms, int events,
                 std::uint32_t tokens_per_event = 1) {
  RequestRecord r;
  r.id = id;
  r.intended_send = kT0 + FromMillis(send_ms);
  r.send_start = r.intended_send + FromMillis(0.05);
  for (int i = 0; i < events; ++i) {
    r.token_events.push_back({*r.send_start + FromMillis(ttft_ms + gap_ms * i), tokens_per_event, false, true});
    r.counted_tokens += tokens_per_event;
  }
  r.first_chunk = r.first_token = r.first_answer_token = r.token_events.front().at;
  r.last_token = r.token_events.back().at;
  r.finished = *r.last_token + milliseconds(1);
  r.usage_completion_tokens = r.counted_tokens;
  r.usage_prompt_tokens = 10 + id % 7;
  r.outcome = Outcome::kOk;
  return r;
}

RequestRecord Failed(std::uint64_t id, Outcome outcome, double send_ms) {
  RequestRecord r;
  r.id = id;
  r.intended_send = kT0 + FromMillis(send_ms);
  r.send_start = r.intended_send;
  r.finished = *r.send_start + milliseconds(3);
  r.outcome = outcome;
  r.error = "request #" + std::to_string(id) + ": " + OutcomeName(outcome);
  return r;
}

TEST(StepRecorderTest, CountsPhasesOutcomesWindowAndTokens) {
  StepRecorder recorder;
  RequestRecord warm = Ok(0, 0, 10, 5, 4);
  warm.phase = Phase::kWarmup;
  recorder.Add(warm);
  recorder.Add(Ok(1, 100, 10, 5, 4));
  recorder.Add(Failed(2, Outcome::kTimeout, 50));
  const StepCounts& c = recorder.counts();
  EXPECT_EQ(c.warmup, 1u);
  EXPECT_EQ(c.measured, 2u);
  EXPECT_EQ(c.sent, 2u);
  EXPECT_EQ(c.ok, 1u);
  EXPECT_EQ(c.outcomes[static_cast<int>(Outcome::kTimeout)], 1u);
  EXPECT_EQ(c.output_tokens, 4u);
  EXPECT_EQ(c.input_tokens, 11u);
  EXPECT_EQ(*c.first_send, kT0 + milliseconds(50));  // the failed request was sent first
  EXPECT_EQ(*c.last_finish, *Ok(1, 100, 10, 5, 4).finished);
  EXPECT_EQ(recorder.sketches().ttft_ms.count(), 1u);  // warm-up and failures feed no latency
  EXPECT_EQ(recorder.sketches().itl_event_ms.count(), 3u);
}

TEST(StepRecorderTest, ErrorExamplesAreTheFirstFailureOfEachKindByIdWhateverTheOrder) {
  std::vector<RequestRecord> records;
  const Outcome kinds[] = {Outcome::kTimeout, Outcome::kReset, Outcome::kHttpError, Outcome::kTruncated,
                           Outcome::kConnectFailed, Outcome::kMalformedStream, Outcome::kStreamError};
  for (std::uint64_t id = 0; id < 70; ++id) records.push_back(Failed(id, kinds[(id / 3) % 7], 0));
  // Completion order is not id order; workers see interleaved ids.
  Rng rng(5);
  for (std::size_t i = records.size() - 1; i > 0; --i) std::swap(records[i], records[rng.Below(i + 1)]);
  StepRecorder merged;
  StepRecorder parts[3];
  StepRecorder one;
  for (std::size_t i = 0; i < records.size(); ++i) {
    parts[i % 3].Add(records[i]);
    one.Add(records[i]);
  }
  for (const StepRecorder& part : parts) merged.Merge(part);
  const std::vector<std::string> expected = {"request #0: timeout", "request #3: reset",
                                             "request #6: http_error", "request #9: truncated",
                                             "request #12: connect_failed"};
  EXPECT_EQ(one.ErrorExamples(), expected);
  EXPECT_EQ(merged.ErrorExamples(), expected);
}

TEST(StepRecorderTest, GoodRequestsMeetEveryThreshold) {
  const std::vector<SloThreshold> slo = {{SloMetric::kTtft, 50}, {SloMetric::kItl, 8}};
  StepRecorder recorder(slo);
  recorder.Add(Ok(0, 0, 40, 5, 3));     // good
  recorder.Add(Ok(1, 0, 60, 5, 3));     // TTFT too long
  recorder.Add(Ok(2, 0, 40, 9, 3));     // a 9 ms gap
  recorder.Add(Ok(3, 0, 40, 12, 3, 2)); // 12 ms events of 2 tokens: 6 ms per token, good
  recorder.Add(Ok(4, 0, 40, 5, 1));     // one event: no gap, good
  recorder.Add(Failed(5, Outcome::kReset, 0));
  EXPECT_EQ(recorder.counts().good, 3u);
  EXPECT_EQ(recorder.counts().measured, 6u);
}

TEST(StepRecorderTest, MeetsThresholdsIgnoresMissingFigures) {
  RequestFigures f;
  f.ttft = 10;
  EXPECT_TRUE(MeetsThresholds(f, {{SloMetric::kTpot, 1}}));  // no TPOT
  EXPECT_FALSE(MeetsThresholds(f, {{SloMetric::kTtft, 9.5}}));
  EXPECT_TRUE(MeetsThresholds(f, {{SloMetric::kTtft, 10}}));
}

TEST(StepRecorderTest, MergedWorkersGiveTheSameFiguresAsOne) {
  std::vector<RequestRecord> records;
  Rng rng(3);
  for (std::uint64_t id = 0; id < 3000; ++id) {
    if (id % 97 == 5) {
      records.push_back(Failed(id, Outcome::kHttpError, id * 0.5));
    } else {
      records.push_back(Ok(id, id * 0.5, 5 + rng.Exponential(20), 1 + rng.Exponential(3),
                           1 + static_cast<int>(rng.Below(40)), 1 + static_cast<std::uint32_t>(rng.Below(2))));
    }
  }
  for (std::size_t cap : {std::size_t{1'000'000}, std::size_t{2000}}) {
    SCOPED_TRACE(cap);
    const std::vector<SloThreshold> slo = {{SloMetric::kTtft, 30}};
    StepRecorder one(slo, cap);
    StepRecorder workers[4] = {StepRecorder(slo, cap), StepRecorder(slo, cap), StepRecorder(slo, cap),
                               StepRecorder(slo, cap)};
    for (const RequestRecord& r : records) {
      one.Add(r);
      workers[r.id % 4].Add(r);
    }
    StepRecorder merged(slo, cap);
    for (const StepRecorder& w : workers) merged.Merge(w);
    const StepCounts& a = merged.counts();
    const StepCounts& b = one.counts();
    EXPECT_EQ(a.measured, b.measured);
    EXPECT_EQ(a.ok, b.ok);
    EXPECT_EQ(a.good, b.good);
    EXPECT_EQ(a.outcomes, b.outcomes);
    EXPECT_EQ(a.input_tokens, b.input_tokens);
    EXPECT_EQ(a.output_tokens, b.output_tokens);
    EXPECT_EQ(a.first_send, b.first_send);
    EXPECT_EQ(a.last_finish, b.last_finish);
    EXPECT_EQ(merged.ErrorExamples(), one.ErrorExamples());
    const stats::Summary m = merged.sketches().itl_token_ms.Summarize();
    const stats::Summary o = one.sketches().itl_token_ms.Summarize();
    EXPECT_EQ(m.count, o.count);
    EXPECT_EQ(m.percentiles_exact, o.percentiles_exact);
    EXPECT_EQ(m.p99.value, o.p99.value);
    EXPECT_EQ(m.p50.value, o.p50.value);
    EXPECT_EQ(merged.sketches().ttft_ms.Summarize().p90.value, one.sketches().ttft_ms.Summarize().p90.value);
  }
}

TEST(StepRecorderTest, MemoryDoesNotGrowWithRequests) {
  // The recorder keeps no record: past the caps, a million more requests cost nothing.
  StepRecorder recorder({}, 1000);
  Rng rng(8);
  const auto heap = [&] {
    std::size_t bytes = 0;
    const StepSketches& s = recorder.sketches();
    for (const stats::QuantileSketch* k :
         {&s.ttft_ms, &s.ttft_answer_ms, &s.itl_event_ms, &s.itl_token_ms, &s.tpot_ms, &s.e2e_ms,
          &s.response_ms, &s.send_lag_ms, &s.output_tokens, &s.prompt_tokens, &s.vllm_ttft_ms,
          &s.vllm_tpot_ms, &s.vllm_e2e_ms, &s.guidellm_tpot_ms, &s.loop_lag_ms}) {
      bytes += k->HeapBytes();
    }
    return bytes;
  };
  std::uint64_t id = 0;
  const auto feed = [&](int n) {
    for (int i = 0; i < n; ++i, ++id) {
      recorder.Add(Ok(id, static_cast<double>(id) * 0.5, 1 + rng.Exponential(2), 0.1 + rng.Exponential(0.3), 32));
      recorder.AddLoopLag(rng.Exponential(0.2));
    }
  };
  feed(20'000);
  const std::size_t after_warm = heap();
  feed(100'000);
  EXPECT_LE(heap(), after_warm + 16 * 1024);
  EXPECT_EQ(recorder.counts().measured, 120'000u);
}

}  // namespace
}  // namespace bakeoff::measure
