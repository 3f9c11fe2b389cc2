// tests/unit/net/http_client_pool_test.cc
//
// Tests for the HttpClient's connection pool (net/http_client_pool.cc): keep-alive reuse,
// `Connection: close`, stale pooled connections, the one retry of a request a stale kept-alive
// connection lost, and the server's `Keep-Alive: timeout, max`, against the scripted misbehaving
// server on 127.0.0.1. Every test is bounded by client deadlines of a few seconds at most. Shared
// helpers: http_client_test_util.h.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
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

TEST(HttpClientTest, KeepAliveReusesOneConnection) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, "ok"))});
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  RecordingHandler first;
  RecordingHandler second;
  client.Start(Post(), &first);
  loop.RunUntilIdle();
  client.Start(Post(), &second);
  loop.RunUntilIdle();
  EXPECT_EQ(first.end, TransportEnd::kComplete) << first.detail;
  EXPECT_EQ(second.end, TransportEnd::kComplete) << second.detail;
  EXPECT_EQ(second.body, "ok");
  EXPECT_FALSE(first.connected_reused);
  EXPECT_TRUE(second.connected_reused);
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(server.connections_accepted(), 1);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClientTest, ChainedRequestsFromOnEndReuseTheConnection) {
  t::ScriptedServer server(t::SseScript({"a", "b"}));
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  int completed = 0;
  std::function<void()> start_next;
  start_next = [&] {
    // A fresh handler each time, deleted inside its own OnEnd: the client must not touch it after.
    auto* handler = new RecordingHandler();
    handler->on_end = [&completed, &start_next, handler] {
      // Deleting the handler destroys this lambda too: copy what is needed first.
      int* count = &completed;
      std::function<void()>* next = &start_next;
      const bool ok = handler->end == TransportEnd::kComplete;
      delete handler;
      if (ok) ++*count;
      if (*count < 5) (*next)();
    };
    client.Start(Post(), handler);
  };
  start_next();
  loop.RunUntilIdle();
  EXPECT_EQ(completed, 5);
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClientTest, ConnectionCloseIsNotReused) {
  t::ScriptedServer server(
      {t::Send(t::HttpHead(200, {{"Content-Length", "2"}, {"Connection", "close"}}) + "ok"),
       t::Close()});
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  RecordingHandler first;
  RecordingHandler second;
  client.Start(Post(), &first);
  loop.RunUntilIdle();
  client.Start(Post(), &second);
  loop.RunUntilIdle();
  EXPECT_EQ(first.end, TransportEnd::kComplete);
  EXPECT_EQ(second.end, TransportEnd::kComplete);
  EXPECT_EQ(client.connections_opened(), 2u);
}

TEST(HttpClientTest, StalePooledConnectionIsNotUsed) {
  // The server answers with keep-alive and then closes, as servers do after their idle timeout.
  t::ScriptedServer server({t::Send(t::FullResponse(200, "ok")), t::Close()});
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  RecordingHandler first;
  RecordingHandler second;
  client.Start(Post(), &first);
  loop.RunUntilIdle();
  std::this_thread::sleep_for(50ms);  // let the FIN arrive
  client.Start(Post(), &second);
  loop.RunUntilIdle();
  EXPECT_EQ(first.end, TransportEnd::kComplete);
  EXPECT_EQ(second.end, TransportEnd::kComplete) << second.detail;
  EXPECT_FALSE(second.connected_reused);
  EXPECT_EQ(client.connections_opened(), 2u);
}

// Runs `count` requests one after another on `client`, each after the previous one ended.
std::vector<std::unique_ptr<RecordingHandler>> RunInTurn(EventLoop& loop, HttpClient& client,
                                                         int count,
                                                         const std::function<HttpRequest()>& make) {
  std::vector<std::unique_ptr<RecordingHandler>> handlers;
  for (int i = 0; i < count; ++i) {
    handlers.push_back(std::make_unique<RecordingHandler>());
    client.Start(make(), handlers.back().get());
    loop.RunUntilIdle();
    EXPECT_EQ(handlers.back()->ends, 1) << "request " << i;
  }
  return handlers;
}
std::vector<std::unique_ptr<RecordingHandler>> RunInTurn(EventLoop& loop, HttpClient& client,
                                                         int count) {
  return RunInTurn(loop, client, count, [] { return Post(); });
}

// The second request of every connection finds it dropped by the server: after reading the whole
// request (`drop` = Close() or Reset()), or after its head only (`head_action`).
t::Script AnswerFirstDropSecond(const t::CapturedRequest& request, t::Step drop) {
  if (request.index_on_connection == 1) return {drop};
  return {t::Send(t::FullResponse(200, "ok"))};
}

TEST(HttpClientTest, KeptAliveConnectionClosedOnArrivalIsRetriedOnANewOne) {
  for (const t::Step& drop : {t::Close(), t::Reset()}) {
    t::ScriptedServer server(
        [&drop](const t::CapturedRequest& r) { return AnswerFirstDropSecond(r, drop); });
    EventLoop loop;
    HttpClient client(loop, EndpointOf(server.url()), TestOptions());
    const auto handlers = RunInTurn(loop, client, 2);
    const RecordingHandler& first = *handlers[0];
    const RecordingHandler& second = *handlers[1];
    EXPECT_EQ(first.end, TransportEnd::kComplete) << first.detail;
    EXPECT_EQ(first.retries, 0);
    EXPECT_EQ(second.end, TransportEnd::kComplete) << second.detail;
    EXPECT_EQ(second.body, "ok");
    EXPECT_EQ(second.retries, 1);
    EXPECT_EQ(second.connections, (std::vector<bool>{true, false}));
    EXPECT_THAT(second.retry_reason, HasSubstr(drop.kind == t::Step::Kind::kClose
                                                   ? "closed the kept-alive connection"
                                                   : "reset"));
    EXPECT_LE(second.retry_at, second.connected_at);
    EXPECT_EQ(client.connections_opened(), 2u);
    // The dropped request reached the server completely; only its retry was answered.
    EXPECT_EQ(server.requests().size(), 3u);
    EXPECT_EQ(server.requests_answered(), 2u);
    EXPECT_EQ(server.connections_accepted(), 2);
  }
}

TEST(HttpClientTest, KeptAliveConnectionResetWhileWritingIsRetried) {
  // The server resets the reused connection as soon as the request head arrives; the large body
  // is still being written, so the write fails (ECONNRESET or EPIPE).
  t::ServerOptions options;
  options.head_action = [](const t::CapturedRequest& head) {
    return head.index_on_connection == 1 ? t::HeadAction::kReset : t::HeadAction::kServe;
  };
  t::ScriptedServer server({t::Send(t::FullResponse(200, "ok"))}, options);
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  const std::string body(16 * 1024 * 1024, 'b');  // more than both socket buffers hold
  const auto handlers = RunInTurn(loop, client, 2, [&body] { return Post("/big", body); });
  const RecordingHandler& second = *handlers[1];
  EXPECT_EQ(second.end, TransportEnd::kComplete) << second.detail;
  EXPECT_EQ(second.retries, 1);
  EXPECT_THAT(second.retry_reason, HasSubstr("writing the request"));
  EXPECT_EQ(second.connections, (std::vector<bool>{true, false}));
  EXPECT_EQ(server.heads_dropped(), 1u);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].body.size(), body.size());
  EXPECT_EQ(server.requests_answered(), 2u);
}

TEST(HttpClientTest, ResetAfterTheFirstResponseByteIsNotRetried) {
  // Part of the head arrives before the reset: the server has seen the request; never resend.
  t::ScriptedServer server([](const t::CapturedRequest& request) {
    if (request.index_on_connection == 0) return t::Script{t::Send(t::FullResponse(200, "ok"))};
    return t::Script{t::Send("HTTP/1.1 200 OK\r\nContent-"), t::Sleep(20ms), t::Reset()};
  });
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  const auto handlers = RunInTurn(loop, client, 2);
  const RecordingHandler& second = *handlers[1];
  EXPECT_EQ(second.end, TransportEnd::kReset) << second.detail;
  EXPECT_EQ(second.retries, 0);
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests_answered(), 2u);
}

TEST(HttpClientTest, CloseOnAFreshConnectionIsNotRetried) {
  for (const t::Step& drop : {t::Close(), t::Reset()}) {
    t::ScriptedServer server({drop});
    auto handler = RunOne(server.url(), Post());
    EXPECT_EQ(handler->end, TransportEnd::kReset) << handler->detail;
    EXPECT_EQ(handler->retries, 0);
    EXPECT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.connections_accepted(), 1);
  }
}

TEST(HttpClientTest, FailureOfTheRetryIsTheRequestsEnd) {
  // Connection 0 answers once, then drops; every later connection drops its first request.
  t::ScriptedServer server([](const t::CapturedRequest& request) {
    if (request.connection == 0 && request.index_on_connection == 0) {
      return t::Script{t::Send(t::FullResponse(200, "ok"))};
    }
    return t::Script{t::Close()};
  });
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  const auto handlers = RunInTurn(loop, client, 2);
  const RecordingHandler& second = *handlers[1];
  EXPECT_EQ(second.end, TransportEnd::kReset) << second.detail;
  EXPECT_THAT(second.detail, HasSubstr("closed the connection before responding"));
  EXPECT_EQ(second.retries, 1);
  EXPECT_EQ(second.connections, (std::vector<bool>{true, false}));
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(server.requests_answered(), 1u);
}

TEST(HttpClientTimingTest, RetryKeepsTheTotalDeadlineAndCancelInstant) {
  // A request to /warm opens a connection to reuse. On it, the measured request's first try is
  // dropped after 150 ms; its retry's new connection never answers.
  t::ScriptedServer server([](const t::CapturedRequest& request) {
    if (request.target == "/warm") return t::Script{t::Send(t::FullResponse(200, "ok"))};
    if (request.index_on_connection == 1) return t::Script{t::Sleep(150ms), t::Close()};
    return t::Script{t::Hang()};
  });
  ClientOptions options = TestOptions();
  options.deadlines.total = 300ms;
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), options);
  std::vector<MonoTime> starts;
  std::vector<std::unique_ptr<RecordingHandler>> handlers;
  for (const bool cancel : {false, true}) {
    RunInTurn(loop, client, 1, [] { return Post("/warm"); });
    handlers.push_back(std::make_unique<RecordingHandler>());
    HttpRequest request = Post();
    starts.push_back(std::chrono::steady_clock::now());
    if (cancel) request.cancel_at = starts.back() + 250ms;
    client.Start(std::move(request), handlers.back().get());
    loop.RunUntilIdle();
  }
  const RecordingHandler& timed_out = *handlers[0];
  EXPECT_EQ(timed_out.retries, 1);
  EXPECT_EQ(timed_out.end, TransportEnd::kTimeoutTotal) << timed_out.detail;
  EXPECT_GE(timed_out.end_at - starts[0], 300ms);
  EXPECT_LT(timed_out.end_at - starts[0], 400ms) << "the total deadline counts from the start";
  const RecordingHandler& cancelled = *handlers[1];
  EXPECT_EQ(cancelled.retries, 1);
  EXPECT_EQ(cancelled.end, TransportEnd::kCancelled) << cancelled.detail;
  EXPECT_GE(cancelled.end_at - starts[1], 250ms);
  EXPECT_LT(cancelled.end_at - starts[1], 300ms);
}

TEST(HttpClientTest, ConnectionCloseHeaderEndsReuseEvenWhenTheServerKeepsItOpen) {
  t::ScriptedServer server(
      {t::Send(t::HttpHead(200, {{"Content-Length", "2"}, {"Connection", "close"}}) + "ok")});
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  const auto handlers = RunInTurn(loop, client, 3);
  for (const auto& handler : handlers) {
    EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
    EXPECT_EQ(handler->connections, std::vector<bool>{false});
  }
  EXPECT_EQ(client.connections_opened(), 3u);
  EXPECT_EQ(server.connections_accepted(), 3);
}

// A response announcing `Keep-Alive` with the given parameters (e.g. "timeout=5, max=1").
t::Script KeepAliveResponse(const std::string& parameters) {
  return {t::Send(t::HttpHead(200, {{"Content-Length", "2"}, {"Keep-Alive", parameters}}) + "ok")};
}

TEST(HttpClientTest, KeepAliveMaxIsTheNumberOfFurtherRequests) {
  // Apache's countdown: max=1 on the first response, max=0 on the second. The server keeps the
  // connection open all the same; the client must not send a third request on it.
  t::ScriptedServer server([](const t::CapturedRequest& request) {
    return KeepAliveResponse("timeout=5, max=" + std::to_string(1 - request.index_on_connection % 2));
  });
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  const auto handlers = RunInTurn(loop, client, 3);
  std::vector<bool> reused;
  for (const auto& handler : handlers) {
    EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
    EXPECT_EQ(handler->retries, 0);
    reused.push_back(handler->connected_reused);
  }
  EXPECT_EQ(reused, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(server.connections_accepted(), 2);
}

TEST(HttpClientTest, KeepAliveMaxAnnouncedOnceCountsDown) {
  t::ScriptedServer server([](const t::CapturedRequest& request) {
    if (request.index_on_connection == 0) return KeepAliveResponse("max=2");
    return t::Script{t::Send(t::FullResponse(200, "ok"))};
  });
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  const auto handlers = RunInTurn(loop, client, 4);
  std::vector<bool> reused;
  for (const auto& handler : handlers) reused.push_back(handler->connected_reused);
  EXPECT_EQ(reused, (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(server.connections_accepted(), 2);
}

TEST(HttpClientTest, KeepAliveTimeoutLessAMarginLimitsIdleReuse) {
  // timeout=2 s: reusable while idle for less than 2 s - min(1 s, 2 s / 4) = 1.5 s. The injected
  // clock moves the idle time; the server never closes.
  t::ScriptedServer server(KeepAliveResponse("timeout=2, max=100"));
  ManualClock clock(std::chrono::steady_clock::now());
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions(), clock);
  std::vector<bool> reused;
  for (const Nanos idle : {Nanos(0), Nanos(1400ms), Nanos(1500ms), Nanos(0)}) {
    clock.Advance(idle);
    RecordingHandler handler;
    client.Start(Post(), &handler);
    loop.RunUntilIdle();
    EXPECT_EQ(handler.end, TransportEnd::kComplete) << handler.detail;
    reused.push_back(handler.connected_reused);
  }
  EXPECT_EQ(reused, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(server.connections_accepted(), 2);
}

TEST(HttpClientTest, KeepAliveZeroOrMalformedParameters) {
  struct Case {
    const char* parameters;
    int connections;  // for three requests in turn
  };
  for (const Case& c : {Case{"timeout=0", 3}, Case{"max=0", 3}, Case{"timeout=5, max=0", 3},
                        Case{"TIMEOUT = \"5\" , MAX=\"9\"", 1}, Case{"timeout=x, max=-1", 1},
                        Case{"timeout=0.4", 1}, Case{"", 1}}) {
    t::ScriptedServer server(KeepAliveResponse(c.parameters));
    EventLoop loop;
    HttpClient client(loop, EndpointOf(server.url()), TestOptions());
    const auto handlers = RunInTurn(loop, client, 3);
    for (const auto& handler : handlers) {
      EXPECT_EQ(handler->end, TransportEnd::kComplete) << c.parameters << ": " << handler->detail;
    }
    EXPECT_EQ(server.connections_accepted(), c.connections) << c.parameters;
  }
}

}  // namespace
}  // namespace bakeoff::net
