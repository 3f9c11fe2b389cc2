// Trace replay through the whole load path against the emulated engine: arrivals are honoured
// (time-scaled), and a session's next turn is sent only after the previous answer arrived plus
// its think time, carrying that real answer in its history.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "emulate/server.h"
#include "load/runner.h"

namespace bakeoff {
namespace {

using namespace std::chrono_literals;
using measure::Outcome;
using measure::RequestRecord;

class MemorySink final : public load::RecordSink {
 public:
  void Write(const RequestRecord& record, MonoTime) override {
    std::lock_guard lock(mutex_);
    records.push_back(record);
  }
  std::mutex mutex_;
  std::vector<RequestRecord> records;
};

workload::TraceRequest Turn(double at, std::uint32_t input, std::uint32_t output,
                            std::optional<std::string> session = std::nullopt,
                            std::optional<std::uint32_t> turn = std::nullopt, double think_s = 0) {
  workload::TraceRequest r;
  r.arrival_s = at;
  r.input_tokens = input;
  r.output_tokens = output;
  r.session_id = std::move(session);
  r.turn = turn;
  if (think_s > 0) r.think_time_s = think_s;
  return r;
}

TEST(TraceReplayTest, SessionsWaitForTheAnswerAndCarryIt) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;

  workload::Trace trace;
  trace.requests = {Turn(0.0, 40, 8, "a", 0),         Turn(0.1, 30, 5),
                    Turn(0.2, 20, 6, "b", 0),         Turn(0.3, 25, 7, "a", 1, 0.4),
                    Turn(0.4, 15, 4, "b", 1, 0.2),    Turn(0.5, 10, 3, "a", 2, 0.2)};
  load::RunSpec spec;
  spec.target.endpoint = {false, "127.0.0.1", std::to_string(server.value()->port()), "", ""};
  spec.target.request.model = "emulated-model";
  load::StepSpec step;
  step.mode = load::LoopMode::kTrace;
  step.trace = &trace;
  step.time_scale = 0.5;
  step.label = "trace";
  spec.steps.push_back(step);
  spec.workers = 2;
  MemorySink sink;
  std::atomic<bool> stop{false};
  const auto steps = load::RunLoad(spec, sink, stop, nullptr);
  ASSERT_EQ(steps.size(), 1u);
  const auto& records = sink.records;
  ASSERT_EQ(records.size(), trace.requests.size());
  EXPECT_EQ(steps.front().recorder.counts().measured, trace.requests.size());
  EXPECT_EQ(steps.front().recorder.counts().ok, trace.requests.size());
  std::map<std::uint64_t, const RequestRecord*> by_id;
  for (const RequestRecord& r : records) {
    ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
    by_id[r.id] = &r;
  }
  // Openers (0, 1, 2) are sent at their scaled arrival, within a few ms.
  for (std::uint64_t id : {0u, 1u, 2u}) {
    const RequestRecord& r = *by_id.at(id);
    EXPECT_EQ(r.intended_send - steps.front().t0, FromSeconds(trace.requests[id].arrival_s * 0.5));
  }
  // Each later turn starts after the previous turn finished plus its scaled think time, and its
  // prompt holds the previous prompt, the previous answer and its own text.
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> chains = {{0, 3}, {3, 5}, {2, 4}};
  for (const auto& [previous_id, next_id] : chains) {
    const RequestRecord& previous = *by_id.at(previous_id);
    const RequestRecord& next = *by_id.at(next_id);
    const Nanos think = FromSeconds(trace.requests[next_id].think_time_s.value_or(0) * 0.5);
    EXPECT_GE(*next.send_start, *previous.finished + think) << previous_id << " -> " << next_id;
    EXPECT_LT(*next.send_start, *previous.finished + think + 1s) << previous_id << " -> " << next_id;
    ASSERT_TRUE(previous.usage_prompt_tokens && next.usage_prompt_tokens);
    EXPECT_GE(*next.usage_prompt_tokens,
              *previous.usage_prompt_tokens + previous.OutputTokens() + trace.requests[next_id].input_tokens - 2)
        << previous_id << " -> " << next_id;
  }
}

}  // namespace
}  // namespace bakeoff
