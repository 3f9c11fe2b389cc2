// tests/unit/net/http_client_test.cc
//
// Tests for the HttpClient as a whole (net/http_client.h, net/http_client.cc): many concurrent
// streams, Shutdown and destruction ending every request, and a throughput smoke run (disabled),
// against the scripted misbehaving server on 127.0.0.1. Every test is bounded by client deadlines
// of a few seconds at most. Shared helpers: http_client_test_util.h.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string_view>
#include <vector>

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

}  // namespace
}  // namespace bakeoff::net
