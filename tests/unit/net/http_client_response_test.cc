// tests/unit/net/http_client_response_test.cc
//
// Tests for the HttpClient's response reading and parsing (net/http_client_response.cc): chunked,
// content-length and until-close bodies, interim responses, statuses, bad framing, ends mid-way,
// header and body limits, and a handler that rejects the body, against the scripted misbehaving
// server on 127.0.0.1. Every test is bounded by client deadlines of a few seconds at most. Shared
// helpers: http_client_test_util.h.
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
using ::testing::HasSubstr;
namespace t = ::bakeoff::testing;

TEST(HttpClientTest, ChunkedSseBodyIsReassembledExactly) {
  const std::vector<std::string> events = {"{\"t\":\"Hello\"}", "{\"t\":\" world\"}",
                                           "{\"t\":\"!\"}"};
  t::ScriptedServer server(t::SseScript(events, {.first_delay = 5ms, .gap = 5ms}));
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
  EXPECT_EQ(handler->head.status, 200);
  EXPECT_EQ(handler->head.content_type, "text/event-stream");
  std::string expected;
  for (const auto& event : events) expected += t::SseEvent(event);
  expected += t::SseEvent("[DONE]");
  EXPECT_EQ(handler->body, expected);
  EXPECT_GE(handler->body_calls, 3);  // delivered as the events arrived, not at the end
  EXPECT_TRUE(handler->connected);
  EXPECT_FALSE(handler->connected_reused);
  EXPECT_LE(handler->connected_at, handler->written_at);
  EXPECT_LE(handler->written_at, handler->headers_at);
  EXPECT_LE(handler->headers_at, handler->end_at);
}

TEST(HttpClientTest, ResponseSplitIntoSingleBytes) {
  const std::string wire = t::ChunkedHead() + t::Chunk(t::SseEvent("one")) +
                           t::Chunk(t::SseEvent("two")) + t::LastChunk();
  t::Script script;
  for (char c : wire) {
    script.push_back(t::Send(std::string(1, c)));
    script.push_back(t::Sleep(100us));
  }
  t::ScriptedServer server(script);
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
  EXPECT_EQ(handler->body, t::SseEvent("one") + t::SseEvent("two"));
}

TEST(HttpClientTest, BodyUntilCloseWithoutLength) {
  t::ScriptedServer server(
      {t::Send(t::HttpHead(200, {{"Content-Type", "text/plain"}}) + "hello"), t::Close()});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
  EXPECT_EQ(handler->body, "hello");
}

TEST(HttpClientTest, InterimResponseIsSkipped) {
  t::ScriptedServer server(
      {t::Send("HTTP/1.1 100 Continue\r\n\r\n"), t::Send(t::FullResponse(201, "made"))});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
  EXPECT_EQ(handler->head.status, 201);
  EXPECT_EQ(handler->body, "made");
}

TEST(HttpClientTest, NonSuccessStatusIsACompleteResponse) {
  t::ScriptedServer server({t::Send(t::FullResponse(503, R"({"error":"loading"})"))});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kComplete);
  EXPECT_EQ(handler->head.status, 503);
  EXPECT_EQ(handler->body, R"({"error":"loading"})");
}

TEST(HttpClientTest, GarbageIsProtocolError) {
  t::ScriptedServer server({t::Send("SSH-2.0-OpenSSH_9.2\r\nnot http at all\r\n\r\n"), t::Close()});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kProtocolError) << handler->detail;
}

TEST(HttpClientTest, BadChunkFramingIsProtocolError) {
  t::ScriptedServer server({t::Send(t::ChunkedHead() + "zz\r\nhello\r\n"), t::Hang()});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kProtocolError) << handler->detail;
}

TEST(HttpClientTest, CloseMidBodyIsReset) {
  t::ScriptedServer server(
      {t::Send(t::HttpHead(200, {{"Content-Length", "100"}}) + std::string(10, 'x')), t::Close()});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kReset) << handler->detail;
  EXPECT_EQ(handler->body, std::string(10, 'x'));
  EXPECT_THAT(handler->detail, HasSubstr("10 body bytes"));
}

TEST(HttpClientTest, ResetMidStreamIsReset) {
  t::ScriptedServer server(
      {t::Send(t::ChunkedHead() + t::Chunk(t::SseEvent("a"))), t::Sleep(20ms), t::Reset()});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kReset) << handler->detail;
  EXPECT_EQ(handler->body, t::SseEvent("a"));
}

TEST(HttpClientTest, CloseBeforeResponseIsReset) {
  t::ScriptedServer server({t::Close()});
  auto handler = RunOne(server.url(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kReset) << handler->detail;
}

TEST(HttpClientTest, OversizeHeaderIsTooLarge) {
  t::ScriptedServer server(
      {t::Send(t::HttpHead(200, {{"X-Big", std::string(4000, 'h')}, {"Content-Length", "0"}})),
       t::Hang()});
  ClientOptions options = TestOptions();
  options.limits.max_header_bytes = 1024;
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kTooLarge) << handler->detail;
}

TEST(HttpClientTest, OversizeBodyIsTooLarge) {
  ClientOptions options = TestOptions();
  options.limits.max_body_bytes = 1000;
  {
    t::ScriptedServer server({t::Send(t::FullResponse(200, std::string(5000, 'b')))});
    auto handler = RunOne(server.url(), Post(), options);
    EXPECT_EQ(handler->end, TransportEnd::kTooLarge) << handler->detail;
  }
  {
    t::ScriptedServer server({t::Send(t::ChunkedHead()), t::Send(t::Chunk(std::string(600, 'b'))),
                              t::Send(t::Chunk(std::string(600, 'b'))), t::Send(t::LastChunk())});
    auto handler = RunOne(server.url(), Post(), options);
    EXPECT_EQ(handler->end, TransportEnd::kTooLarge) << handler->detail;
    EXPECT_LE(handler->body.size(), 1000u);
  }
}

TEST(HttpClientTest, HandlerErrorAbortsTheRequest) {
  t::ScriptedServer server(t::SseScript({"a", "b", "c"}, {.gap = 10ms}));
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  RecordingHandler handler;
  handler.fail_body_after_bytes = 1;
  client.Start(Post(), &handler);
  loop.RunUntilIdle();
  EXPECT_EQ(handler.ends, 1);
  EXPECT_EQ(handler.end, TransportEnd::kHandlerAborted);
  EXPECT_EQ(handler.detail, "handler says stop");
  EXPECT_EQ(handler.body_calls, 1);
}

}  // namespace
}  // namespace bakeoff::net
