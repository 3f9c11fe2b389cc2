// tests/unit/net/http_client_test_util.h
//
// What the HttpClient tests (tests/unit/net/http_client*_test.cc) share: a handler that records
// every callback and checks their order, the clients' test options, a request, one request on a
// fresh client and loop, a port that refuses connections, and the TLS fixture (a self-signed
// certificate for the scripted server). In a named namespace, not an anonymous one: the fixture's
// tests live in more than one file, and googletest wants one fixture type per suite.
#pragma once


#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/check.h"
#include "net/event_loop.h"
#include "net/http_client.h"
#include "support/scripted_server.h"

namespace bakeoff::net::http_client_test {

using namespace std::chrono_literals;
namespace t = ::bakeoff::testing;

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

inline ClientOptions TestOptions() {
  ClientOptions options;
  options.deadlines.connect = 2s;
  options.deadlines.first_byte = 5s;
  options.deadlines.idle = 5s;
  options.deadlines.total = 10s;
  return options;
}

inline Endpoint EndpointOf(const std::string& url) {
  Result<Endpoint> endpoint = ParseEndpoint(url);
  BAKEOFF_CHECK(endpoint.ok()) << endpoint.error().message;
  return *endpoint;
}

inline HttpRequest Post(std::string path = "/v1/completions",
                        std::string body = R"({"prompt":"hi"})") {
  HttpRequest request;
  request.path = std::move(path);
  request.body = std::move(body);
  return request;
}

// Runs one request on a fresh client and loop; returns the handler.
inline std::unique_ptr<RecordingHandler> RunOne(const std::string& url, HttpRequest request,
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

inline std::string ClosedPortUrl() {
  return "http://127.0.0.1:" + std::to_string(bakeoff::testing::UnusedLoopbackPort());
}

// A self-signed certificate (for 127.0.0.1 and localhost) for the scripted server's TLS.
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

}  // namespace bakeoff::net::http_client_test
