// tests/unit/net/http_client_test.cc
//
// Tests for net/event_loop.h and net/http_client.h (Endpoint parsing, the EventLoop, and the
// HTTP/1.1 client against the scripted misbehaving server on 127.0.0.1). Every test is bounded
// by client deadlines of a few seconds at most.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/event_loop.h"
#include "net/fault_plan.h"
#include "net/http_client.h"
#include "support/scratch.h"
#include "support/scripted_server.h"

namespace bakeoff::net {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
namespace t = ::bakeoff::testing;

// ------------------------------------------------------------------------------------------------
// Endpoint

TEST(EndpointTest, ParsesHostPortAndBasePath) {
  Result<Endpoint> endpoint = ParseEndpoint("http://127.0.0.1:8000/v1/");
  ASSERT_TRUE(endpoint.ok()) << endpoint.error().message;
  EXPECT_FALSE(endpoint->tls);
  EXPECT_EQ(endpoint->host, "127.0.0.1");
  EXPECT_EQ(endpoint->port, "8000");
  EXPECT_EQ(endpoint->base_path, "/v1");
  EXPECT_EQ(endpoint->ToString(), "http://127.0.0.1:8000/v1");
}

TEST(EndpointTest, DefaultPortsAndIpv6) {
  Result<Endpoint> https = ParseEndpoint("https://api.example.com");
  ASSERT_TRUE(https.ok());
  EXPECT_TRUE(https->tls);
  EXPECT_EQ(https->port, "443");
  EXPECT_EQ(https->base_path, "");
  Result<Endpoint> http = ParseEndpoint("http://example.com/");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->port, "80");
  EXPECT_EQ(http->base_path, "");
  Result<Endpoint> v6 = ParseEndpoint("http://[::1]:9000/base");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "9000");
  EXPECT_EQ(v6->ToString(), "http://[::1]:9000/base");
}

TEST(EndpointTest, RejectsMalformedUrls) {
  for (const char* url :
       {"ftp://host", "host:80", "http://", "http://:80", "http://h:0", "http://h:99999",
        "http://h:8x", "http://[::1", "http://u:p@h/", "http://h/a?b=1", "http://h:", "http://h?x",
        "http://[[]:1", "http://[h]:80", "http://a]b", "http://a b"}) {
    Result<Endpoint> endpoint = ParseEndpoint(url);
    EXPECT_FALSE(endpoint.ok()) << url;
    if (!endpoint.ok()) {
      EXPECT_EQ(endpoint.error().code, ErrorCode::kInvalidInput);
    }
  }
}

TEST(EndpointTest, UnixSocketUrlsCarryThePercentDecodedPathAndABasePath) {
  Result<Endpoint> endpoint = ParseEndpoint("http+unix://%2Frun%2Fvllm%20a.sock/v1/");
  ASSERT_TRUE(endpoint.ok()) << endpoint.error().message;
  EXPECT_EQ(endpoint->unix_socket, "/run/vllm a.sock");
  EXPECT_EQ(endpoint->base_path, "/v1");
  EXPECT_EQ(endpoint->host, "localhost");  // what the Host header says
  EXPECT_FALSE(endpoint->tls);
  EXPECT_EQ(endpoint->ToString(), "http+unix://%2Frun%2Fvllm%20a.sock/v1");
  EXPECT_EQ(endpoint->Where(), "unix:/run/vllm a.sock");
  Result<Endpoint> again = ParseEndpoint(endpoint->ToString());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->unix_socket, endpoint->unix_socket);
  Result<Endpoint> relative = ParseEndpoint("http+unix://engine.sock");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ(relative->unix_socket, "engine.sock");
  EXPECT_EQ(relative->base_path, "");
  EXPECT_EQ(ParseEndpoint("http://[::1]:9000")->Where(), "[::1]:9000");
}

TEST(EndpointTest, RejectsMalformedUnixSocketUrls) {
  const std::string too_long = "http+unix://%2F" + std::string(kMaxUnixSocketPath, 'a');
  for (const std::string& url : {std::string("http+unix://"), std::string("http+unix:///v1"),
                                 std::string("http+unix://%2"), std::string("http+unix://%zz.sock"),
                                 std::string("http+unix://%00abstract"), std::string("http+unix://a.sock/x?y=1"),
                                 too_long}) {
    Result<Endpoint> endpoint = ParseEndpoint(url);
    EXPECT_FALSE(endpoint.ok()) << url;
    if (!endpoint.ok()) {
      EXPECT_EQ(endpoint.error().code, ErrorCode::kInvalidInput);
    }
  }
  EXPECT_TRUE(ParseEndpoint("http+unix://%2F" + std::string(kMaxUnixSocketPath - 1, 'a')).ok());
}

TEST(EndpointTest, HeaderLookupIsCaseInsensitive) {
  ResponseHead head;
  head.headers = {{"Content-Type", "text/event-stream"}, {"X-Request-Id", "7"}};
  EXPECT_EQ(head.Header("content-type"), "text/event-stream");
  EXPECT_EQ(head.Header("X-REQUEST-ID"), "7");
  EXPECT_EQ(head.Header("missing"), "");
}

// ------------------------------------------------------------------------------------------------
// EventLoop

TEST(EventLoopTimingTest, RunAtFiresInOrderAtItsInstant) {
  EventLoop loop;
  const MonoTime base = std::chrono::steady_clock::now() + 20ms;
  std::vector<std::pair<int, Nanos>> fired;  // (id, lateness)
  for (int id : {3, 1, 2}) {
    const MonoTime at = base + id * 5ms;
    loop.RunAt(at,
               [&fired, id, at] { fired.emplace_back(id, std::chrono::steady_clock::now() - at); });
  }
  loop.RunUntilIdle();
  ASSERT_EQ(fired.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fired[i].first, i + 1);
    EXPECT_GE(fired[i].second.count(), 0);
    // Typically a few tens of microseconds; generous for a loaded CI machine.
    EXPECT_LT(fired[i].second, 10ms) << "timer " << fired[i].first;
  }
}

TEST(EventLoopTest, PastInstantRunsAtOnceAndCancelPreventsTheCall) {
  EventLoop loop;
  bool ran_past = false;
  bool ran_cancelled = false;
  loop.RunAt(std::chrono::steady_clock::now() - 1s, [&] { ran_past = true; });
  EventLoop::TimerPtr timer =
      loop.RunAt(std::chrono::steady_clock::now() + 10ms, [&] { ran_cancelled = true; });
  EventLoop::Cancel(timer);
  loop.RunUntilIdle();
  EXPECT_TRUE(ran_past);
  EXPECT_FALSE(ran_cancelled);
}

TEST(EventLoopTest, RunKeepsGoingUntilStopFromAnotherThread) {
  EventLoop loop;
  std::atomic<int> ran{0};
  std::thread other([&] {
    std::this_thread::sleep_for(20ms);
    loop.Post([&] { ++ran; });
    std::this_thread::sleep_for(20ms);
    loop.Post([&] { ++ran; });
    loop.Stop();
  });
  loop.Run();  // would return at once without the work guard: nothing is queued yet
  other.join();
  EXPECT_TRUE(loop.stopped());
  EXPECT_GE(ran.load(), 1);
}

TEST(EventLoopTest, StopBeforeRunReturnsAtOnce) {
  EventLoop loop;
  loop.Stop();
  bool ran = false;
  loop.Post([&] { ran = true; });
  loop.Run();
  EXPECT_FALSE(ran);
}

// ------------------------------------------------------------------------------------------------
// HttpClient

// Records every callback; checks the order contract as it goes.
class RecordingHandler : public ResponseHandler {
 public:
  void OnConnected(MonoTime at, bool reused) override {
    EXPECT_EQ(ends, 0);
    EXPECT_EQ(head.status, 0) << "OnConnected after OnHeaders";
    EXPECT_EQ(connections.size(), static_cast<std::size_t>(retries)) << "one OnConnected per try";
    connections.push_back(reused);
    connected = true;
    connected_reused = reused;
    connected_at = at;
  }
  void OnStaleConnectionRetry(MonoTime at, std::string_view reason) override {
    EXPECT_EQ(ends, 0);
    EXPECT_EQ(head.status, 0) << "retried after a response head";
    EXPECT_EQ(connections, std::vector<bool>{true}) << "retried other than a reused first try";
    ++retries;
    retry_reason = reason;
    retry_at = at;
  }
  void OnRequestWritten(MonoTime at) override {
    EXPECT_EQ(ends, 0);
    written_at = at;
  }
  void OnHeaders(MonoTime at, const ResponseHead& received) override {
    EXPECT_EQ(ends, 0);
    EXPECT_EQ(head.status, 0) << "OnHeaders twice";
    head = received;
    headers_at = at;
  }
  Status OnBody(MonoTime, std::string_view bytes) override {
    EXPECT_EQ(ends, 0);
    EXPECT_NE(head.status, 0) << "OnBody before OnHeaders";
    body.append(bytes);
    ++body_calls;
    if (fail_body_after_bytes > 0 && body.size() >= fail_body_after_bytes) {
      return MakeError(ErrorCode::kProtocol, "handler says stop");
    }
    return Ok{};
  }
  void OnEnd(MonoTime at, TransportEnd end_in, std::string_view detail_in) override {
    ++ends;
    end = end_in;
    detail = detail_in;
    end_at = at;
    if (on_end) on_end();
  }

  bool connected = false;
  bool connected_reused = false;     // of the last OnConnected
  std::vector<bool> connections;     // `reused` of each OnConnected, in order
  int retries = 0;
  std::string retry_reason;
  MonoTime retry_at{};
  MonoTime connected_at{};
  MonoTime written_at{};
  MonoTime headers_at{};
  MonoTime end_at{};
  ResponseHead head;
  std::string body;
  int body_calls = 0;
  int ends = 0;
  TransportEnd end = TransportEnd::kComplete;
  std::string detail;
  std::size_t fail_body_after_bytes = 0;
  std::function<void()> on_end;
};

ClientOptions TestOptions() {
  ClientOptions options;
  options.deadlines.connect = 2s;
  options.deadlines.first_byte = 5s;
  options.deadlines.idle = 5s;
  options.deadlines.total = 10s;
  return options;
}

Endpoint EndpointOf(const std::string& url) {
  Result<Endpoint> endpoint = ParseEndpoint(url);
  BAKEOFF_CHECK(endpoint.ok()) << endpoint.error().message;
  return *endpoint;
}

HttpRequest Post(std::string path = "/v1/completions", std::string body = R"({"prompt":"hi"})") {
  HttpRequest request;
  request.path = std::move(path);
  request.body = std::move(body);
  return request;
}

// Runs one request on a fresh client and loop; returns the handler.
std::unique_ptr<RecordingHandler> RunOne(const std::string& url, HttpRequest request,
                                         const ClientOptions& options = TestOptions()) {
  EventLoop loop;
  HttpClient client(loop, EndpointOf(url), options);
  auto handler = std::make_unique<RecordingHandler>();
  client.Start(std::move(request), handler.get());
  loop.RunUntilIdle();
  EXPECT_EQ(handler->ends, 1) << "exactly one OnEnd";
  EXPECT_EQ(client.in_flight(), 0u);
  return handler;
}

std::string ClosedPortUrl() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);  // bound, never listening: connecting is refused
  return "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
}

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

TEST(HttpClientTest, ContentLengthBodyAndRequestAsSent) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, R"({"ok":true})"))});
  HttpRequest request = Post("/v1/chat/completions", R"({"x":1})");
  request.headers.emplace_back("X-Trace", "abc");
  auto handler = RunOne(server.url() + "/base", std::move(request));
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
  EXPECT_EQ(handler->head.status, 200);
  EXPECT_EQ(handler->head.Header("content-length"), "11");
  EXPECT_EQ(handler->body, R"({"ok":true})");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/base/v1/chat/completions");
  EXPECT_EQ(requests[0].body, R"({"x":1})");
  EXPECT_EQ(requests[0].Header("Content-Type"), "application/json");
  EXPECT_EQ(requests[0].Header("X-Trace"), "abc");
  EXPECT_EQ(requests[0].Header("Host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(requests[0].Header("Authorization"), "");
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

TEST(HttpClientTest, RefusedConnectionIsConnectFailed) {
  auto handler = RunOne(ClosedPortUrl(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kConnectFailed);
  EXPECT_THAT(handler->detail, HasSubstr("refused"));
  EXPECT_FALSE(handler->connected);
}

TEST(HttpClientTest, StreamsAndKeepsAliveOverAUnixSocket) {
  t::ServerOptions options;
  options.unix_socket = (bakeoff::testing::ScratchRoot() / "client.sock").string();
  const std::vector<std::string> events = {"{\"t\":\"a\"}", "{\"t\":\"b\"}"};
  t::ScriptedServer server(t::SseScript(events, {.first_delay = 2ms, .gap = 2ms}), options);
  ASSERT_THAT(server.url(), ::testing::StartsWith("http+unix://%2F"));
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url() + "/base"), TestOptions());
  RecordingHandler first;
  RecordingHandler second;
  client.Start(Post(), &first);
  loop.RunUntilIdle();
  client.Start(Post(), &second);
  loop.RunUntilIdle();
  std::string expected;
  for (const auto& event : events) expected += t::SseEvent(event);
  expected += t::SseEvent("[DONE]");
  for (const RecordingHandler* handler : {&first, &second}) {
    EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
    EXPECT_EQ(handler->body, expected);
  }
  EXPECT_TRUE(second.connected_reused);
  EXPECT_EQ(server.connections_accepted(), 1);
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[0].target, "/base/v1/completions");
  EXPECT_EQ(server.requests()[0].Header("Host"), "localhost");
}

TEST(HttpClientTest, MissingUnixSocketIsConnectFailedNamingIt) {
  const std::string path = (bakeoff::testing::ScratchRoot() / "nobody.sock").string();
  Endpoint endpoint;
  endpoint.unix_socket = path;
  auto handler = RunOne(endpoint.ToString(), Post());
  EXPECT_EQ(handler->end, TransportEnd::kConnectFailed);
  EXPECT_THAT(handler->detail, HasSubstr("unix:" + path));
  EXPECT_THAT(handler->detail, HasSubstr("No such file"));
  EXPECT_FALSE(handler->connected);
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

TEST(HttpClientTest, ShutdownCancelsEveryInFlightRequest) {
  t::ScriptedServer server({t::Hang()});
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  std::vector<RecordingHandler> handlers(3);
  for (auto& handler : handlers) client.Start(Post(), &handler);
  EXPECT_EQ(client.in_flight(), 3u);
  loop.RunAt(std::chrono::steady_clock::now() + 50ms, [&] { client.Shutdown(); });
  loop.RunUntilIdle();
  EXPECT_EQ(client.in_flight(), 0u);
  for (const auto& handler : handlers) {
    EXPECT_EQ(handler.ends, 1);
    EXPECT_EQ(handler.end, TransportEnd::kCancelled);
  }
}

TEST(HttpClientTest, DestroyingTheClientEndsItsRequests) {
  t::ScriptedServer server({t::Hang()});
  EventLoop loop;
  RecordingHandler handler;
  {
    HttpClient client(loop, EndpointOf(server.url()), TestOptions());
    client.Start(Post(), &handler);
    loop.RunAt(std::chrono::steady_clock::now() + 30ms, [&] { loop.Stop(); });
    loop.Run();
  }
  EXPECT_EQ(handler.ends, 1);
  EXPECT_EQ(handler.end, TransportEnd::kCancelled);
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

TEST(HttpClientTest, BearerTokenIsSentButNeverInErrors) {
  const std::string token = "sk-secret-token-4242";
  ClientOptions options = TestOptions();
  options.bearer_token = token;
  {
    t::ScriptedServer server({t::Send(t::FullResponse(200, "ok"))});
    auto handler = RunOne(server.url(), Post(), options);
    EXPECT_EQ(handler->end, TransportEnd::kComplete);
    const auto requests = server.requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].Header("Authorization"), "Bearer " + token);
  }
  {
    t::ScriptedServer server({t::Send("garbage\r\n\r\n"), t::Close()});
    auto handler = RunOne(server.url(), Post(), options);
    EXPECT_EQ(handler->end, TransportEnd::kProtocolError);
    EXPECT_THAT(handler->detail, Not(HasSubstr(token)));
  }
  auto refused = RunOne(ClosedPortUrl(), Post(), options);
  EXPECT_THAT(refused->detail, Not(HasSubstr(token)));
  HttpRequest request;
  request.method = "GET";
  request.path = "/v1/models";
  Result<FetchedResponse> fetched = Fetch(EndpointOf(ClosedPortUrl()), request, options);
  ASSERT_FALSE(fetched.ok());
  EXPECT_THAT(fetched.error().message, Not(HasSubstr(token)));
  EXPECT_THAT(fetched.error().message, HasSubstr("/v1/models"));
}

TEST(HttpClientTest, LargeRequestAndLargeStreamedResponse) {
  const std::string request_body(300 * 1024, 'p');
  std::string chunk(64 * 1024, 'r');
  t::Script script = {t::Send(t::ChunkedHead(200, "application/x-ndjson"))};
  constexpr int kChunks = 160;  // 10 MiB
  for (int i = 0; i < kChunks; ++i) script.push_back(t::Send(t::Chunk(chunk)));
  script.push_back(t::Send(t::LastChunk()));
  t::ScriptedServer server(script);
  auto handler = RunOne(server.url(), Post("/big", request_body));
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;
  EXPECT_EQ(handler->body.size(), chunk.size() * kChunks);
  EXPECT_EQ(handler->body.find_first_not_of('r'), std::string::npos);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].body, request_body);
}

TEST(HttpClientTest, ManyConcurrentStreams) {
  t::ScriptedServer server(t::SseScript({"a", "b"}, {.first_delay = 20ms}));
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  std::vector<RecordingHandler> handlers(64);
  for (auto& handler : handlers) client.Start(Post(), &handler);
  loop.RunUntilIdle();
  for (const auto& handler : handlers) {
    EXPECT_EQ(handler.ends, 1);
    EXPECT_EQ(handler.end, TransportEnd::kComplete) << handler.detail;
    EXPECT_EQ(handler.body, t::SseEvent("a") + t::SseEvent("b") + t::SseEvent("[DONE]"));
  }
  EXPECT_EQ(client.connections_opened(), 64u);
}

TEST(HttpClientTest, FetchReturnsTheWholeResponse) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, R"({"data":[]})"))});
  HttpRequest request;
  request.method = "GET";
  request.path = "/v1/models";
  Result<FetchedResponse> fetched = Fetch(EndpointOf(server.url()), request, TestOptions());
  ASSERT_TRUE(fetched.ok()) << fetched.error().message;
  EXPECT_EQ(fetched->head.status, 200);
  EXPECT_EQ(fetched->body, R"({"data":[]})");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].Header("Content-Length"), "");
}

// Fails the n-th I/O operation for n = 1, 2, ... until two sequential requests (the second on
// the kept-alive connection) complete without the fault firing. Each request must end exactly
// once, with an outcome that fits an injected reset.
void FaultCountdown(const std::string& url, ClientOptions options) {
  bool finished = false;
  for (std::uint64_t n = 1; n <= 64 && !finished; ++n) {
    FaultPlan plan(n);
    options.faults = &plan;
    EventLoop loop;
    HttpClient client(loop, EndpointOf(url), options);
    RecordingHandler first;
    RecordingHandler second;
    client.Start(Post(), &first);
    loop.RunUntilIdle();
    client.Start(Post(), &second);
    loop.RunUntilIdle();
    for (const RecordingHandler* handler : {&first, &second}) {
      ASSERT_EQ(handler->ends, 1) << "n=" << n;
      EXPECT_TRUE(handler->end == TransportEnd::kComplete || handler->end == TransportEnd::kReset ||
                  handler->end == TransportEnd::kConnectFailed)
          << "n=" << n << ": " << TransportEndName(handler->end) << ": " << handler->detail;
      if (handler->end != TransportEnd::kComplete) {
        EXPECT_THAT(handler->detail, HasSubstr("injected fault")) << "n=" << n;
      }
      // A fault on the kept-alive connection before the response looks like a stale connection.
      if (handler->retries > 0) {
        EXPECT_THAT(handler->retry_reason, HasSubstr("injected fault")) << "n=" << n;
      }
    }
    EXPECT_EQ(first.retries, 0) << "n=" << n;
    if (plan.operations() < n) {
      EXPECT_EQ(first.end, TransportEnd::kComplete);
      EXPECT_EQ(second.end, TransportEnd::kComplete);
      finished = true;
    }
  }
  EXPECT_TRUE(finished) << "the requests never completed without a fault";
}

TEST(HttpClientTest, FaultCountdownPlain) {
  t::ScriptedServer server(t::SseScript({"a", "b", "c"}));
  FaultCountdown(server.url(), TestOptions());
}

class HttpClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cert_ = t::MakeSelfSignedCertificate(::testing::TempDir());
    ASSERT_FALSE(cert_.cert_file.empty());
  }
  t::ServerOptions ServerTls() const {
    return {.tls_cert_file = cert_.cert_file, .tls_key_file = cert_.key_file};
  }
  t::TestCertificate cert_;
};

TEST_F(HttpClientTlsTest, VerificationFailsForAnUnknownCertificate) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, "secret"))}, ServerTls());
  auto handler = RunOne(server.url(), Post());  // system trust store
  EXPECT_EQ(handler->end, TransportEnd::kConnectFailed);
  EXPECT_THAT(handler->detail, HasSubstr("certificate"));
  EXPECT_TRUE(handler->body.empty());
}

TEST_F(HttpClientTlsTest, SucceedsWithTheCaFileOrWithoutVerification) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, "secret"))}, ServerTls());
  ClientOptions with_ca = TestOptions();
  with_ca.ca_file = cert_.cert_file;
  auto verified = RunOne(server.url(), Post(), with_ca);
  EXPECT_EQ(verified->end, TransportEnd::kComplete) << verified->detail;
  EXPECT_EQ(verified->body, "secret");

  ClientOptions unverified = TestOptions();
  unverified.verify_tls = false;
  auto handler = RunOne(server.url(), Post(), unverified);
  EXPECT_EQ(handler->end, TransportEnd::kComplete) << handler->detail;

  // By name, through the resolver: the certificate also names localhost.
  auto by_name = RunOne("https://localhost:" + std::to_string(server.port()), Post(), with_ca);
  EXPECT_EQ(by_name->end, TransportEnd::kComplete) << by_name->detail;
}

TEST_F(HttpClientTlsTest, HostNameMismatchFails) {
  const t::TestCertificate other =
      t::MakeSelfSignedCertificate(::testing::TempDir(), "DNS:other.example");
  t::ScriptedServer server({t::Send(t::FullResponse(200, "secret"))},
                           {.tls_cert_file = other.cert_file, .tls_key_file = other.key_file});
  ClientOptions options = TestOptions();
  options.ca_file = other.cert_file;
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kConnectFailed);
  EXPECT_THAT(handler->detail, HasSubstr("certificate"));
}

TEST_F(HttpClientTlsTest, MissingCaFileIsConnectFailed) {
  t::ScriptedServer server({t::Send(t::FullResponse(200, "secret"))}, ServerTls());
  ClientOptions options = TestOptions();
  options.ca_file = "/nonexistent/ca.pem";
  auto handler = RunOne(server.url(), Post(), options);
  EXPECT_EQ(handler->end, TransportEnd::kConnectFailed);
  EXPECT_THAT(handler->detail, HasSubstr("/nonexistent/ca.pem"));
}

TEST_F(HttpClientTlsTest, StreamsAndKeepsAliveOverTls) {
  t::ScriptedServer server(t::SseScript({"x", "y"}, {.gap = 5ms}), ServerTls());
  ClientOptions options = TestOptions();
  options.ca_file = cert_.cert_file;
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), options);
  RecordingHandler first;
  RecordingHandler second;
  client.Start(Post(), &first);
  loop.RunUntilIdle();
  client.Start(Post(), &second);
  loop.RunUntilIdle();
  const std::string expected = t::SseEvent("x") + t::SseEvent("y") + t::SseEvent("[DONE]");
  EXPECT_EQ(first.end, TransportEnd::kComplete) << first.detail;
  EXPECT_EQ(first.body, expected);
  EXPECT_EQ(second.end, TransportEnd::kComplete) << second.detail;
  EXPECT_EQ(second.body, expected);
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST_F(HttpClientTlsTest, FaultCountdownTls) {
  t::ScriptedServer server(t::SseScript({"a", "b"}), ServerTls());
  ClientOptions options = TestOptions();
  options.ca_file = cert_.cert_file;
  FaultCountdown(server.url(), options);
}

// Not a pass/fail test: prints short-streaming-request throughput on one client thread against
// the (thread-per-connection) scripted server. Run with --gtest_also_run_disabled_tests.
TEST(HttpClientTest, DISABLED_ThroughputSmoke) {
  t::Script script = {t::Send(t::ChunkedHead() + t::Chunk(t::SseEvent("a")) +
                              t::Chunk(t::SseEvent("b")) + t::Chunk(t::SseEvent("[DONE]")) +
                              t::LastChunk())};
  t::ScriptedServer server(script);
  EventLoop loop;
  HttpClient client(loop, EndpointOf(server.url()), TestOptions());
  constexpr int kConnections = 16;
  constexpr int kRequests = 40000;
  int started = 0;
  int completed = 0;
  struct LoopHandler final : ResponseHandler {
    void OnHeaders(MonoTime, const ResponseHead&) override {}
    Status OnBody(MonoTime, std::string_view bytes) override {
      body_bytes += bytes.size();
      return Ok{};
    }
    void OnEnd(MonoTime, TransportEnd end, std::string_view) override { on_end(*this, end); }
    std::function<void(LoopHandler&, TransportEnd)> on_end;
    std::size_t body_bytes = 0;
  };
  auto start = [&](LoopHandler& handler) {
    ++started;
    client.Start(Post(), &handler);
  };
  std::vector<LoopHandler> handlers(kConnections);
  for (auto& handler : handlers) {
    handler.on_end = [&](LoopHandler& self, TransportEnd end) {
      if (end == TransportEnd::kComplete) ++completed;
      if (started < kRequests) start(self);
    };
  }
  auto thread_cpu_seconds = [] {
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
           (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  };
  const double cpu_begin = thread_cpu_seconds();
  const auto begin = std::chrono::steady_clock::now();
  for (auto& handler : handlers) start(handler);
  loop.RunUntilIdle();
  const double seconds = ToSeconds(std::chrono::steady_clock::now() - begin);
  const double client_cpu = thread_cpu_seconds() - cpu_begin;
  EXPECT_EQ(completed, kRequests);
  // The client's own CPU time is the figure that matters; the scripted server shares the cores.
  std::printf(
      "%d streaming requests in %.3f s: %.0f req/s wall, %.0f req/s per client CPU-second,"
      " %zu connections\n",
      completed, seconds, completed / seconds, completed / client_cpu, client.connections_opened());
}

TEST(RedactSecretTest, EveryOccurrenceAndACutTailAreRedacted) {
  const std::string key = "sk-0123456789abcdef";
  EXPECT_EQ(RedactSecret("key sk-0123456789abcdef and sk-0123456789abcdef.", key),
            "key [REDACTED] and [REDACTED].");
  EXPECT_EQ(RedactSecret("nothing here", key), "nothing here");
  EXPECT_EQ(RedactSecret("text unchanged", ""), "text unchanged");
  // A message cut inside the key, with or without the "..." a cut adds.
  EXPECT_EQ(RedactSecret("invalid key sk-01234567", key), "invalid key [REDACTED]");
  EXPECT_EQ(RedactSecret("invalid key sk-0123456789...", key), "invalid key [REDACTED]...");
  // Fewer than 8 bytes of it at the end are ordinary text.
  EXPECT_EQ(RedactSecret("prefix sk-0", key), "prefix sk-0");
}

}  // namespace
}  // namespace bakeoff::net
