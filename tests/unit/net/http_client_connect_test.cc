// tests/unit/net/http_client_connect_test.cc
//
// Tests for the HttpClient's connection establishment (net/http_client_connect.cc): a refused
// connection, a Unix-domain socket (present or missing), and TLS (certificate verification, a CA
// file, host name mismatch, keep-alive over TLS), against the scripted misbehaving server on
// 127.0.0.1. Every test is bounded by client deadlines of a few seconds at most. Shared helpers:
// http_client_test_util.h.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/event_loop.h"
#include "net/http_client.h"
#include "support/scratch.h"
#include "support/scripted_server.h"
#include "http_client_test_util.h"

namespace bakeoff::net {
namespace {

using namespace std::chrono_literals;
using namespace http_client_test;
using ::testing::HasSubstr;
namespace t = ::bakeoff::testing;

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

}  // namespace
}  // namespace bakeoff::net
