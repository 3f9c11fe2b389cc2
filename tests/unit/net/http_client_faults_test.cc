// tests/unit/net/http_client_faults_test.cc
//
// Tests for the HttpClient's FaultPlan seam (net/fault_plan.h, Connection::FaultFires): every I/O
// operation failed in turn, over plain TCP and TLS, each request ending once as an injected fault,
// against the scripted misbehaving server on 127.0.0.1. Every test is bounded by client deadlines
// of a few seconds at most. Shared helpers: http_client_test_util.h.
#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/event_loop.h"
#include "net/fault_plan.h"
#include "net/http_client.h"
#include "support/scripted_server.h"
#include "http_client_test_util.h"

namespace bakeoff::net {
namespace {

using namespace http_client_test;
using ::testing::HasSubstr;
namespace t = ::bakeoff::testing;

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

TEST_F(HttpClientTlsTest, FaultCountdownTls) {
  t::ScriptedServer server(t::SseScript({"a", "b"}), ServerTls());
  ClientOptions options = TestOptions();
  options.ca_file = cert_.cert_file;
  FaultCountdown(server.url(), options);
}

}  // namespace
}  // namespace bakeoff::net
