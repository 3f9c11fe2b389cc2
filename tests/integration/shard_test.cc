// Shards of one load (load::RunSpec shard_index/shard_count, bench --shard): together they send
// exactly the schedule one process sends (the same ids at the same intended instants, whatever
// each shard's worker count), a closed loop's concurrency and request count are dealt out under ids
// no two shards share, a trace's sessions stay whole in one shard, and --start-at's instant is the
// load's t0; each shard reads its clock's offset from the target's Date headers. Against the
// emulated engine on 127.0.0.1.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "emulate/server.h"
#include "load/runner.h"
#include "target/clock_offset.h"

namespace bakeoff {
namespace {

using namespace std::chrono_literals;
using measure::RequestRecord;

class RecordsWithOffsets final : public load::RecordSink {
 public:
  void Write(const RequestRecord& record, MonoTime t0) override {
    std::lock_guard lock(mutex_);
    records.push_back(record);
    offsets[record.id] = record.intended_send - t0;
  }
  std::mutex mutex_;
  std::vector<RequestRecord> records;
  std::map<std::uint64_t, Nanos> offsets;  // id -> intended send from t0
};

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulate::EmulatorConfig emulator;
    emulator.port = 0;
    emulator.instant = true;
    auto started = emulate::EmulatorServer::Start(emulator);
    ASSERT_TRUE(started.ok()) << started.error().message;
    server_ = std::move(started.value());
    spec_.target.endpoint = {false, "127.0.0.1", std::to_string(server_->port()), "", ""};
    spec_.target.request.model = "emulated-model";
    spec_.shape.prompt_tokens = 16;
    spec_.shape.output_tokens = 4;
    spec_.seed = 11;
  }

  std::vector<load::StepResult> Run(load::RunSpec spec, RecordsWithOffsets& sink) {
    std::atomic<bool> stop{false};
    return load::RunLoad(spec, sink, stop, nullptr);
  }

  std::unique_ptr<emulate::EmulatorServer> server_;
  load::RunSpec spec_;
};

TEST_F(ShardTest, OpenLoopShardsTogetherSendTheOneProcessSchedule) {
  load::StepSpec step;
  step.mode = load::LoopMode::kOpen;
  step.open = {.rate_per_s = 300, .process = load::ArrivalProcess::kPoisson};
  step.limits.requests = 90;
  step.limits.warmup_requests = 6;
  spec_.steps = {step};
  spec_.workers = 2;
  RecordsWithOffsets whole;
  ASSERT_EQ(Run(spec_, whole).front().planned, 96u);

  std::map<std::uint64_t, Nanos> together;
  std::uint64_t planned = 0;
  for (std::uint32_t shard = 0; shard < 3; ++shard) {
    load::RunSpec part = spec_;
    part.shard_index = shard;
    part.shard_count = 3;
    part.workers = shard + 1;  // a shard's own worker count does not change what it sends
    RecordsWithOffsets sink;
    planned += Run(part, sink).front().planned;
    for (const RequestRecord& r : sink.records) {
      EXPECT_EQ(r.id % 3, shard) << r.id;
      EXPECT_EQ(r.outcome, measure::Outcome::kOk) << r.error;
    }
    together.insert(sink.offsets.begin(), sink.offsets.end());
  }
  EXPECT_EQ(planned, 96u);
  EXPECT_EQ(together, whole.offsets);  // the same ids, each at the same instant from t0
}

TEST_F(ShardTest, ClosedLoopShardsShareTheConcurrencyAndTheCount) {
  load::StepSpec step;
  step.mode = load::LoopMode::kClosed;
  step.concurrency = 5;
  step.limits.requests = 41;
  spec_.steps = {step};
  std::set<std::uint64_t> ids;
  std::uint64_t measured = 0;
  for (std::uint32_t shard = 0; shard < 2; ++shard) {
    load::RunSpec part = spec_;
    part.shard_index = shard;
    part.shard_count = 2;
    RecordsWithOffsets sink;
    const auto steps = Run(part, sink);
    EXPECT_EQ(steps.front().recorder.counts().measured, shard == 0 ? 21u : 20u);
    measured += steps.front().recorder.counts().measured;
    for (const RequestRecord& r : sink.records) {
      EXPECT_EQ(r.id % 2, shard);
      EXPECT_TRUE(ids.insert(r.id).second) << "id " << r.id << " sent twice";
    }
  }
  EXPECT_EQ(measured, 41u);
}

TEST_F(ShardTest, ATracesSessionsStayWholeInOneShard) {
  workload::Trace trace;
  for (int s = 0; s < 6; ++s) {
    for (std::uint32_t turn = 0; turn < 3; ++turn) {
      workload::TraceRequest r;
      r.arrival_s = 0.02 * s + 0.01 * turn;
      r.input_tokens = 12;
      r.output_tokens = 3;
      r.session_id = "s" + std::to_string(s);
      r.turn = turn;
      trace.requests.push_back(r);
    }
  }
  load::StepSpec step;
  step.mode = load::LoopMode::kTrace;
  step.trace = &trace;
  spec_.steps = {step};
  std::map<std::string, std::set<std::uint32_t>> shards_of_session;
  std::size_t sent = 0;
  for (std::uint32_t shard = 0; shard < 2; ++shard) {
    load::RunSpec part = spec_;
    part.shard_index = shard;
    part.shard_count = 2;
    RecordsWithOffsets sink;
    Run(part, sink);
    sent += sink.records.size();
    for (const RequestRecord& r : sink.records) shards_of_session[*trace.requests[r.id].session_id].insert(shard);
  }
  EXPECT_EQ(sent, trace.requests.size());
  ASSERT_EQ(shards_of_session.size(), 6u);
  for (const auto& [session, shards] : shards_of_session) EXPECT_EQ(shards.size(), 1u) << session;
}

TEST_F(ShardTest, TheStartInstantIsTheLoadsT0) {
  load::StepSpec step;
  step.mode = load::LoopMode::kOpen;
  step.open = {.rate_per_s = 100, .process = load::ArrivalProcess::kConstant};
  step.limits.requests = 5;
  spec_.steps = {step};
  spec_.start_at = RealClock().Now() + 300ms;
  RecordsWithOffsets sink;
  const auto steps = Run(spec_, sink);
  EXPECT_EQ(steps.front().t0, *spec_.start_at);
  for (const RequestRecord& r : sink.records) EXPECT_GE(*r.send_start, *spec_.start_at);
}

// The emulator and this test share one clock, so the measured offset is zero within its bound
// (a timing test: its bound is the round trips', run serially).
TEST(ClockOffsetTimingTest, TheOffsetAgainstTheTargetIsReadFromItsDateHeaders) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const net::Endpoint endpoint{false, "127.0.0.1", std::to_string(server.value()->port()), "", ""};
  Result<target::ClockOffset> offset = target::MeasureClockOffset(endpoint, net::ClientOptions{});
  ASSERT_TRUE(offset.ok()) << offset.error().message;
  EXPECT_GE(offset->requests, 2);
  EXPECT_LT(offset->uncertainty_ms, 250);
  EXPECT_LE(std::abs(offset->offset_ms), offset->uncertainty_ms + 5);
}

TEST(HttpDateTest, ImfFixdateIsReadAndOtherFormsAreNot) {
  EXPECT_EQ(target::ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777LL * 1'000'000'000);
  EXPECT_EQ(target::ParseHttpDate("Tue, 01 Dec 2026 21:00:00 GMT"), 1796158800LL * 1'000'000'000);
  EXPECT_FALSE(target::ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT"));
  EXPECT_FALSE(target::ParseHttpDate("Sun, 06 Nox 1994 08:49:37 GMT"));
  EXPECT_FALSE(target::ParseHttpDate(""));
}

}  // namespace
}  // namespace bakeoff
