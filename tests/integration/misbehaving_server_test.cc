// The whole load path (runner -> HTTP client -> SSE -> OpenAI decoder -> record) against scripted
// servers that misbehave in the ways real servers do (refused connections, HTTP errors, cut,
// garbled or endless streams, silence, resets, errors inside a 200, keep-alive closes and drops).
// Each request must end with exactly one record carrying the expected outcome, and nothing may
// outlive its deadline.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include <gtest/gtest.h>

#include "load/runner.h"
#include "support/scripted_server.h"
#include "support/timing.h"

namespace bakeoff {
namespace {

using measure::Outcome;
using measure::RequestRecord;
using namespace std::chrono_literals;
namespace t = bakeoff::testing;

class MemorySink final : public load::RecordSink {
 public:
  void Write(const RequestRecord& record, MonoTime) override {
    std::lock_guard lock(mutex_);
    records.push_back(record);
  }
  std::mutex mutex_;
  std::vector<RequestRecord> records;
};

std::string ContentChunk(std::string_view text) {
  return R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":")" +
         std::string(text) + R"("},"finish_reason":null}]})";
}
const std::string kRoleChunk =
    R"({"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})";
const std::string kFinishChunk =
    R"({"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}]})";
const std::string kUsageChunk =
    R"({"id":"c","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11}})";

load::RunSpec SpecFor(std::uint16_t port, std::uint64_t requests, std::uint32_t concurrency = 1) {
  load::RunSpec spec;
  spec.target.endpoint = {false, "127.0.0.1", std::to_string(port), "", ""};
  spec.target.request.model = "m";
  spec.target.client.deadlines.connect = 2s;
  spec.target.client.deadlines.first_byte = 1s;
  spec.target.client.deadlines.idle = 500ms;
  spec.target.client.deadlines.total = 3s;
  spec.shape = {8, 3};
  load::StepSpec step;
  step.mode = load::LoopMode::kClosed;
  step.concurrency = concurrency;
  step.limits.requests = requests;
  step.label = "test";
  spec.steps.push_back(step);
  spec.drain_timeout = 5s;
  return spec;
}

struct RunOutput {
  std::vector<load::StepResult> steps;
  std::vector<RequestRecord> sunk;  // every record the runner handed to its sink, in id order
  Nanos wall{0};
};

std::vector<RequestRecord> ById(std::vector<RequestRecord> records) {
  std::sort(records.begin(), records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.id < b.id; });
  return records;
}

// Requests the step's recorder counted (warm-up and measured).
std::uint64_t Recorded(const load::StepResult& step) {
  return step.recorder.counts().warmup + step.recorder.counts().measured;
}

RunOutput RunSteps(const load::RunSpec& spec) {
  MemorySink sink;
  std::atomic<bool> stop{false};
  const MonoTime start = RealClock().Now();
  RunOutput out;
  out.steps = load::RunLoad(spec, sink, stop, nullptr);
  out.wall = RealClock().Now() - start;
  out.sunk = ById(sink.records);
  return out;
}

// Runs `requests` requests against a server playing `script` and returns their records,
// checking the one-record-per-request invariant on the way.
std::vector<RequestRecord> RunAgainst(const t::Script& script, std::uint64_t requests = 3) {
  t::ScriptedServer server(script);
  const RunOutput out = RunSteps(SpecFor(server.port(), requests));
  EXPECT_LT(out.wall, 15s) << "the run outlived every deadline";
  EXPECT_EQ(out.steps.size(), 1u);
  const auto& records = out.sunk;
  EXPECT_EQ(records.size(), requests) << "every record reaches the sink";
  EXPECT_EQ(Recorded(out.steps.front()), requests) << "and the step's recorder";
  for (std::size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i].id, i);
  return records;
}

t::Script GoodStream() {
  return t::SseScript({kRoleChunk, ContentChunk("a"), ContentChunk("b"), ContentChunk("c"),
                       kFinishChunk, kUsageChunk});
}

TEST(MisbehavingServerTest, WellBehavedStreamIsOk) {
  for (const RequestRecord& r : RunAgainst(GoodStream())) {
    EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
    EXPECT_EQ(r.token_events.size(), 3u);
    EXPECT_EQ(r.usage_completion_tokens, 3u);
    EXPECT_EQ(r.finish_reason, "length");
    ASSERT_TRUE(r.first_chunk && r.first_token);
    EXPECT_LE(*r.first_chunk, *r.first_token);
  }
}

TEST(MisbehavingServerTest, RefusedConnection) {
  std::uint16_t port = 0;
  {
    t::ScriptedServer closed(GoodStream());
    port = closed.port();
  }  // now nobody listens there
  const RunOutput out = RunSteps(SpecFor(port, 3));
  ASSERT_EQ(out.sunk.size(), 3u);
  EXPECT_EQ(out.steps.front().recorder.counts().outcomes[static_cast<int>(Outcome::kConnectFailed)],
            3u);
  for (const RequestRecord& r : out.sunk) {
    EXPECT_EQ(r.outcome, Outcome::kConnectFailed);
    EXPECT_NE(r.error.find("request #"), std::string::npos) << r.error;
  }
}

TEST(MisbehavingServerTest, HttpErrorKeepsStatusAndMessage) {
  const auto records = RunAgainst({t::Send(t::FullResponse(
      503, R"({"error":{"message":"The request queue is full.","type":"x","code":503}})"))});
  for (const RequestRecord& r : records) {
    EXPECT_EQ(r.outcome, Outcome::kHttpError);
    EXPECT_EQ(r.http_status, 503);
    EXPECT_NE(r.error.find("queue is full"), std::string::npos) << r.error;
  }
}

TEST(MisbehavingServerTest, StreamWithoutDoneOrFinishIsTruncated) {
  t::SseScriptOptions options;
  options.done_marker = false;
  for (const RequestRecord& r : RunAgainst(t::SseScript({ContentChunk("a")}, options))) {
    EXPECT_EQ(r.outcome, Outcome::kTruncated) << r.error;
  }
}

TEST(MisbehavingServerTest, StreamWithFinishReasonButNoDoneIsOk) {
  // Triton-style and some proxies omit [DONE]; a finish_reason completes the stream.
  t::SseScriptOptions options;
  options.done_marker = false;
  for (const RequestRecord& r :
       RunAgainst(t::SseScript({ContentChunk("a"), kFinishChunk}, options))) {
    EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
  }
}

TEST(MisbehavingServerTest, GarbageBytesAreMalformed) {
  for (const RequestRecord& r : RunAgainst({t::Send("\x01\x02garbage\r\n\r\n"), t::Close()})) {
    EXPECT_EQ(r.outcome, Outcome::kMalformedStream) << r.error;
  }
}

TEST(MisbehavingServerTest, GarbageInsideTheStreamIsMalformed) {
  const auto records =
      RunAgainst({t::Send(t::ChunkedHead()), t::Send(t::Chunk("data: {not json\n\n")), t::Hang()});
  for (const RequestRecord& r : records) EXPECT_EQ(r.outcome, Outcome::kMalformedStream) << r.error;
}

TEST(MisbehavingServerTest, HeadersThenNothingTimesOut) {
  const MonoTime start = RealClock().Now();
  for (const RequestRecord& r : RunAgainst({t::Send(t::ChunkedHead()), t::Hang()}, 2)) {
    EXPECT_EQ(r.outcome, Outcome::kTimeout) << r.error;
    ASSERT_TRUE(r.finished && r.send_start);
    EXPECT_LT(*r.finished - *r.send_start, 2s);  // the 500 ms idle deadline, not the hang
  }
  EXPECT_LT(RealClock().Now() - start, 10s);
}

TEST(MisbehavingServerTest, NothingAtAllTimesOutOnFirstByte) {
  for (const RequestRecord& r : RunAgainst({t::Hang()}, 2)) {
    EXPECT_EQ(r.outcome, Outcome::kTimeout);
    EXPECT_NE(r.error.find("first"), std::string::npos) << r.error;
  }
}

TEST(MisbehavingServerTest, NeverEndingStreamHitsTheTotalDeadline) {
  t::Script script = {t::Send(t::ChunkedHead())};
  for (int i = 0; i < 100; ++i) {
    script.push_back(t::Send(t::Chunk("data: " + ContentChunk("x") + "\n\n")));
    script.push_back(t::Sleep(100ms));
  }
  for (const RequestRecord& r : RunAgainst(script, 1)) {
    EXPECT_EQ(r.outcome, Outcome::kTimeout) << r.error;
    EXPECT_GT(r.token_events.size(), 10u);  // what arrived before the deadline is kept
  }
}

TEST(MisbehavingServerTest, CloseMidEventIsReset) {
  const auto records = RunAgainst({t::Send(t::ChunkedHead()),
                                   t::Send(t::Chunk("data: " + ContentChunk("a") + "\n\n")),
                                   t::Send(t::Chunk("data: {\"choi")), t::Close()});
  for (const RequestRecord& r : records) {
    EXPECT_EQ(r.outcome, Outcome::kReset) << r.error;
    EXPECT_EQ(r.token_events.size(), 1u);
  }
}

TEST(MisbehavingServerTest, AbortiveResetIsReset) {
  for (const RequestRecord& r : RunAgainst({t::Send(t::ChunkedHead()), t::Reset()})) {
    EXPECT_EQ(r.outcome, Outcome::kReset) << r.error;
  }
}

TEST(MisbehavingServerTest, ErrorInsideA200StreamIsStreamError) {
  const auto records = RunAgainst(t::SseScript(
      {ContentChunk("a"),
       R"({"error":{"message":"engine died","type":"InternalServerError","code":500}})"}));
  for (const RequestRecord& r : records) {
    EXPECT_EQ(r.outcome, Outcome::kStreamError);
    EXPECT_NE(r.error.find("engine died"), std::string::npos) << r.error;
  }
}

TEST(MisbehavingServerTest, LlamaCppErrorFieldIsStreamError) {
  const auto records =
      RunAgainst({t::Send(t::ChunkedHead()),
                  t::Send(t::Chunk("error: {\"code\":400,\"message\":\"context too long\"}\n\n")),
                  t::Send(t::LastChunk())});
  for (const RequestRecord& r : records) {
    EXPECT_EQ(r.outcome, Outcome::kStreamError);
    EXPECT_NE(r.error.find("context too long"), std::string::npos) << r.error;
  }
}

TEST(MisbehavingServerTimingTest, ScriptedDelaysAreMeasuredWithinTwoMilliseconds) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  // The server waits 80 ms before the first token, then 30 ms between tokens. A busy machine can
  // make the server itself late, so the client's figures are compared with the instants the
  // server actually wrote each event (recorded by the server), and with the script as a floor.
  t::SseScriptOptions options;
  options.first_delay = 80ms;
  options.gap = 30ms;
  t::ScriptedServer server(t::SseScript(
      {ContentChunk("a"), ContentChunk("b"), ContentChunk("c"), ContentChunk("d"), kFinishChunk},
      options));
  constexpr std::size_t kRequests = 5;
  const RunOutput out = RunSteps(SpecFor(server.port(), kRequests));
  const auto captured = server.requests();
  ASSERT_EQ(captured.size(), kRequests);
  // Errors of the client's figures against the server's own instants. The median must be within
  // 2 ms. Single samples may suffer a descheduled thread on a busy machine (one can be off by
  // close to 100 ms), so at most one in ten may be off by more than 15 ms.
  std::vector<double> ttft_errors;
  std::vector<double> gap_errors;
  for (const RequestRecord& r : out.sunk) {
    ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
    ASSERT_EQ(r.token_events.size(), 4u);
    const t::CapturedRequest& seen = captured.at(r.id);  // one connection, requests in order
    ASSERT_GE(seen.sent_at.size(), 5u);                  // head, then one write per event
    const double ttft_ms = ToMillis(*r.first_token - *r.request_written);
    EXPECT_GE(ttft_ms, 80 - 1) << "request " << r.id;
    ttft_errors.push_back(std::abs(ttft_ms - ToMillis(seen.sent_at[1] - seen.received_at)));
    for (std::size_t i = 1; i < r.token_events.size(); ++i) {
      const double gap_ms = ToMillis(r.token_events[i].at - r.token_events[i - 1].at);
      EXPECT_GE(gap_ms, 30 - 2) << "request " << r.id << " token " << i;
      gap_errors.push_back(std::abs(gap_ms - ToMillis(seen.sent_at[i + 1] - seen.sent_at[i])));
    }
  }
  for (std::vector<double>* errors : {&ttft_errors, &gap_errors}) {
    std::sort(errors->begin(), errors->end());
    EXPECT_LT((*errors)[errors->size() / 2], 2.0) << "median error";
  }
  std::vector<double> all_errors = ttft_errors;
  all_errors.insert(all_errors.end(), gap_errors.begin(), gap_errors.end());
  const auto far_off =
      std::count_if(all_errors.begin(), all_errors.end(), [](double e) { return e > 15.0; });
  EXPECT_LE(static_cast<std::size_t>(far_off), all_errors.size() / 10)
      << "samples off by more than 15 ms";
}

TEST(MisbehavingServerTest, FaultCountdownAlwaysYieldsExactlyOneRecord) {
  // The n-th I/O operation of the client fails, for n = 1, 2, ... until a request completes
  // without the fault firing: every time exactly one record, a sensible outcome, no hang.
  t::ScriptedServer server(GoodStream());
  bool completed_clean = false;
  for (std::uint64_t n = 1; n <= 200 && !completed_clean; ++n) {
    net::FaultPlan faults(n);
    load::RunSpec spec = SpecFor(server.port(), 1);
    spec.target.client.faults = &faults;
    const RunOutput out = RunSteps(spec);
    ASSERT_EQ(out.sunk.size(), 1u) << "fault at operation " << n;
    ASSERT_EQ(Recorded(out.steps.front()), 1u) << "fault at operation " << n;
    EXPECT_LT(out.wall, 5s) << n;
    const RequestRecord& r = out.sunk.front();
    completed_clean = faults.operations() < n;
    if (completed_clean) {
      EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
    } else {
      EXPECT_TRUE(r.outcome == Outcome::kConnectFailed || r.outcome == Outcome::kReset ||
                  r.outcome == Outcome::kOk)  // a reset after [DONE] loses nothing
          << "fault at operation " << n << ": " << measure::OutcomeName(r.outcome) << " "
          << r.error;
    }
  }
  EXPECT_TRUE(completed_clean) << "the request never completed without a fault";
}

// ---- kept-alive connections that the server closes ----
//
// Each case runs the closed loop at concurrency 1, 4, 16 and 64 against a fresh server. Every
// request must end ok; a stale-connection retry is recorded, happens only after a reused first
// try (Exchange checks that on every retry), and the server answered exactly as many requests as
// the run made: none was answered twice.

constexpr std::uint64_t kKeepAliveRequests = 200;
constexpr std::uint32_t kConcurrencies[] = {1, 4, 16, 64};

struct KeepAliveRun {
  std::vector<RequestRecord> records;
  std::size_t retries = 0;
};

KeepAliveRun RunKeepAliveCase(const t::ScriptedServer& server, std::uint32_t concurrency) {
  const RunOutput out = RunSteps(SpecFor(server.port(), kKeepAliveRequests, concurrency));
  EXPECT_LT(out.wall, 30s);
  KeepAliveRun run;
  run.records = out.sunk;
  EXPECT_EQ(run.records.size(), kKeepAliveRequests);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.outcome, Outcome::kOk) << "concurrency " << concurrency << ": " << r.error;
    if (!r.stale_retry_at) continue;
    ++run.retries;
    EXPECT_FALSE(r.stale_retry_reason.empty());
    EXPECT_FALSE(r.connection_reused) << "the retry runs on a new connection";
    EXPECT_TRUE(r.send_start && r.connected);
    if (!r.send_start || !r.connected) continue;
    EXPECT_LE(*r.send_start, *r.stale_retry_at) << "send_start stays the first try's";
    EXPECT_LE(*r.stale_retry_at, *r.connected);
  }
  EXPECT_EQ(server.requests_answered(), run.records.size())
      << "concurrency " << concurrency << ": a request was answered twice, or not at all";
  return run;
}

t::Script StreamThen(std::vector<t::Step> after, t::HeaderList head_headers = {}) {
  t::SseScriptOptions options;
  options.head_headers = std::move(head_headers);
  t::Script script =
      t::SseScript({kRoleChunk, ContentChunk("a"), kFinishChunk, kUsageChunk}, options);
  script.insert(script.end(), after.begin(), after.end());
  return script;
}

TEST(MisbehavingServerTest, ServerClosingAfterEveryResponseWithoutSayingSo) {
  // llama.cpp's case: the FIN races the reuse check; what slips through is retried.
  for (const std::uint32_t concurrency : kConcurrencies) {
    t::ScriptedServer server(StreamThen({t::Close()}));
    const KeepAliveRun run = RunKeepAliveCase(server, concurrency);
    EXPECT_EQ(server.requests().size(), kKeepAliveRequests) << "nothing was received twice";
    std::printf("concurrency %u: %zu stale retries\n", concurrency, run.retries);
  }
}

TEST(MisbehavingServerTest, ServerClosingIdleConnectionsAfterAFewMilliseconds) {
  for (const std::uint32_t concurrency : kConcurrencies) {
    t::ServerOptions options;
    options.idle_close = 2ms;
    t::ScriptedServer server(StreamThen({}), options);
    const KeepAliveRun run = RunKeepAliveCase(server, concurrency);
    EXPECT_EQ(server.requests().size(), kKeepAliveRequests) << "nothing was received twice";
    std::printf("concurrency %u: %zu stale retries\n", concurrency, run.retries);
  }
}

TEST(MisbehavingServerTest, ConnectionCloseIsHonouredEvenWhenTheServerKeepsItOpen) {
  for (const std::uint32_t concurrency : kConcurrencies) {
    t::ScriptedServer server(StreamThen({}, {{"Connection", "close"}}));
    const KeepAliveRun run = RunKeepAliveCase(server, concurrency);
    EXPECT_EQ(run.retries, 0u);
    for (const RequestRecord& r : run.records) EXPECT_FALSE(r.connection_reused);
    EXPECT_EQ(server.connections_accepted(), static_cast<int>(kKeepAliveRequests));
  }
}

TEST(MisbehavingServerTest, KeepAliveMaxIsHonouredBeforeTheServerCloses) {
  // Apache-style: each response announces how many more requests the connection takes, and the
  // server closes silently after the last. Honouring max, the client never meets the close.
  constexpr int kPerConnection = 3;
  for (const std::uint32_t concurrency : kConcurrencies) {
    t::ScriptedServer server([](const t::CapturedRequest& request) {
      const int left = kPerConnection - 1 - request.index_on_connection;
      return StreamThen(left == 0 ? std::vector<t::Step>{t::Close()} : std::vector<t::Step>{},
                        {{"Keep-Alive", "timeout=5, max=" + std::to_string(left)}});
    });
    const KeepAliveRun run = RunKeepAliveCase(server, concurrency);
    EXPECT_EQ(run.retries, 0u) << "concurrency " << concurrency;
    for (const t::CapturedRequest& request : server.requests()) {
      EXPECT_LT(request.index_on_connection, kPerConnection);
    }
  }
}

TEST(MisbehavingServerTest, ServerDroppingEverySecondRequestOfAConnection) {
  // The server reads the second request of each connection completely (or only its head), then
  // closes or resets without a byte: each such request is retried once, on a new connection.
  struct Case {
    const char* name;
    t::HeadAction on_head;  // kServe: drop after the whole request
    t::Step drop;
  };
  for (const Case& c : {Case{"close", t::HeadAction::kServe, t::Close()},
                        Case{"reset", t::HeadAction::kServe, t::Reset()},
                        Case{"reset at head", t::HeadAction::kReset, t::Close()}}) {
    for (const std::uint32_t concurrency : kConcurrencies) {
      t::ServerOptions options;
      options.head_action = [&c](const t::CapturedRequest& head) {
        return head.index_on_connection == 1 ? c.on_head : t::HeadAction::kServe;
      };
      t::ScriptedServer server(
          [&c](const t::CapturedRequest& request) {
            return request.index_on_connection == 1 ? t::Script{c.drop} : StreamThen({});
          },
          options);
      const KeepAliveRun run = RunKeepAliveCase(server, concurrency);
      const auto received = server.requests();
      const std::size_t dropped =
          received.size() - server.requests_answered() + server.heads_dropped();
      EXPECT_EQ(run.retries, dropped) << c.name << ", concurrency " << concurrency;
      EXPECT_GE(run.retries, kKeepAliveRequests - 2 * concurrency) << c.name;
      for (const t::CapturedRequest& request : received) {
        if (!request.answered) {
          EXPECT_EQ(request.index_on_connection, 1) << "only reused connections drop requests";
        }
      }
    }
  }
}

TEST(MisbehavingServerTest, StaleRetryLimits) {
  // Answers only the first request of the first connection. Second request: its reused
  // connection drops it, the retry's new connection too: a reset, with the retry recorded.
  // Third: a new connection drops it: a reset, not retried. Fourth: same.
  t::ScriptedServer dropping([](const t::CapturedRequest& request) {
    if (request.connection == 0 && request.index_on_connection == 0) return GoodStream();
    return t::Script{t::Close()};
  });
  const RunOutput out = RunSteps(SpecFor(dropping.port(), 4));
  const auto& records = out.sunk;
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].outcome, Outcome::kOk) << records[0].error;
  EXPECT_FALSE(records[0].stale_retry_at);
  EXPECT_EQ(records[1].outcome, Outcome::kReset);
  EXPECT_TRUE(records[1].stale_retry_at);
  for (std::size_t i = 2; i < records.size(); ++i) {
    EXPECT_EQ(records[i].outcome, Outcome::kReset) << records[i].error;
    EXPECT_FALSE(records[i].stale_retry_at) << "a new connection's failure is not retried";
    EXPECT_FALSE(records[i].connection_reused);
  }
  EXPECT_EQ(dropping.requests().size(), 5u);
  EXPECT_EQ(dropping.requests_answered(), 1u);

  // A reset after the first response byte of a reused connection: the server has the request.
  t::ScriptedServer late_reset([](const t::CapturedRequest& request) {
    if (request.index_on_connection == 0) return GoodStream();
    return t::Script{t::Send(t::ChunkedHead()), t::Sleep(20ms), t::Reset()};
  });
  const RunOutput late = RunSteps(SpecFor(late_reset.port(), 6));
  ASSERT_EQ(late.sunk.size(), 6u);
  for (const RequestRecord& r : late.sunk) {
    EXPECT_FALSE(r.stale_retry_at);
    EXPECT_EQ(r.outcome, r.connection_reused ? Outcome::kReset : Outcome::kOk) << r.error;
  }
  EXPECT_EQ(late_reset.requests().size(), 6u) << "no request was sent twice";
  EXPECT_EQ(late_reset.requests_answered(), 6u);
}

TEST(MisbehavingServerTest, InterruptCancelsInFlightAndKeepsTheirRecords) {
  t::ScriptedServer server({t::Send(t::ChunkedHead()), t::Hang()});
  load::RunSpec spec = SpecFor(server.port(), 100, 4);
  spec.target.client.deadlines.idle = 20s;
  spec.target.client.deadlines.total = 20s;
  MemorySink sink;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    server.WaitForRequests(4, 5s);
    std::this_thread::sleep_for(100ms);
    stop.store(true);
  });
  const MonoTime start = RealClock().Now();
  const auto steps = load::RunLoad(spec, sink, stop, nullptr);
  stopper.join();
  EXPECT_LT(RealClock().Now() - start, 5s);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_TRUE(steps.front().interrupted);
  ASSERT_EQ(sink.records.size(), 4u);
  for (const RequestRecord& r : sink.records) EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_EQ(Recorded(steps.front()), 4u);
  EXPECT_EQ(steps.front().recorder.counts().outcomes[static_cast<int>(Outcome::kCancelled)], 4u);
}

}  // namespace
}  // namespace bakeoff
