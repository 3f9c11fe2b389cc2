// tests/unit/net/http_client_deadlines_test.cc
//
// Tests for the HttpClient's deadlines (net/http_client_deadlines.cc): first byte, idle, total and
// cancel_at, each ending the request at its instant, against the scripted misbehaving server on
// 127.0.0.1. Every test is bounded by client deadlines of a few seconds at most. Shared helpers:
// http_client_test_util.h.
#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/event_loop.h"
#include "net/http_client.h"
#include "support/scripted_server.h"
#include "http_client_test_util.h"

namespace bakeoff::net {
namespace {

using namespace std::chrono_literals;
using namespace http_client_test;
namespace t = ::bakeoff::testing;

TEST(HttpClientTimingTest, NoResponseIsFirstByteTimeout) {
  t::ScriptedServer server({t::Hang()});
  ClientOptions options = TestOptions();
  options.deadlines.first_byte = 100ms;
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kTimeoutFirstByte) << handler->detail;
  const Nanos waited = handler->end_at - handler->written_at;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 150ms);
}

TEST(HttpClientTest, PartialHeadersAreFirstByteTimeout) {
  t::ScriptedServer server({t::Send("HTTP/1.1 200 OK\r\nContent-Type: text/"), t::Hang()});
  ClientOptions options = TestOptions();
  options.deadlines.first_byte = 100ms;
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kTimeoutFirstByte) << handler->detail;
}

TEST(HttpClientTimingTest, HeadersThenNothingIsIdleTimeout) {
  t::ScriptedServer server(
      {t::Send(t::ChunkedHead()), t::Send(t::Chunk("data: x\n\n")), t::Hang()});
  ClientOptions options = TestOptions();
  options.deadlines.idle = 100ms;
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kTimeoutIdle) << handler->detail;
  EXPECT_EQ(handler->body, "data: x\n\n");
  const Nanos waited = handler->end_at - handler->headers_at;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 150ms);
}

TEST(HttpClientTest, SlowButSteadyStreamIsNotIdle) {
  std::vector<std::string> events(8, "tok");
  t::ScriptedServer server(t::SseScript(events, {.first_delay = 30ms, .gap = 30ms}));
  ClientOptions options = TestOptions();
  options.deadlines.idle = 80ms;  // each gap is shorter; the whole stream is longer
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
}

TEST(HttpClientTimingTest, NeverEndingTrickleIsTotalTimeout) {
  t::Script script = {t::Send(t::ChunkedHead())};
  for (int i = 0; i < 300; ++i) {
    script.push_back(t::Sleep(10ms));
    script.push_back(t::Send(t::Chunk(t::SseEvent("more"))));
  }
  t::ScriptedServer server(script);
  ClientOptions options = TestOptions();
  options.deadlines.total = 150ms;
  const MonoTime start = std::chrono::steady_clock::now();
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kTimeoutTotal) << handler->detail;
  EXPECT_GE(handler->end_at - start, 150ms);
  EXPECT_LT(handler->end_at - start, 200ms);
  EXPECT_FALSE(handler->body.empty());
}

TEST(HttpClientTimingTest, CancelAtEndsTheRequestAtThatInstant) {
  t::ScriptedServer server({t::Send(t::ChunkedHead() + t::Chunk(t::SseEvent("a"))), t::Hang()});
  HttpRequest request = Post();
  const MonoTime cancel_at = std::chrono::steady_clock::now() + 80ms;
  request.cancel_at = cancel_at;
  auto handler = RunOne(server.url(), std::move(request));
  EXPECT_EQ(handler->end, TransportEnd::kCancelled) << handler->detail;
  EXPECT_GE(handler->end_at, cancel_at);
  EXPECT_LT(handler->end_at - cancel_at, 10ms);  // typically ~0.1 ms; the CI host is shared
  EXPECT_EQ(handler->body, t::SseEvent("a"));
}

TEST(HttpClientTest, CancelAtInThePastNeverSends) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, "ok"))});
  HttpRequest request = Post();
  request.cancel_at = std::chrono::steady_clock::now() - 1ms;
  auto handler = RunOne(server.url(), std::move(request));
  EXPECT_EQ(handler->end, TransportEnd::kCancelled);
  EXPECT_EQ(handler->head.status, 0);
}

}  // namespace
}  // namespace bakeoff::net
