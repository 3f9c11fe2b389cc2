// tests/unit/net/http_client_request_test.cc
//
// Tests for the HttpClient's request writing (net/http_client_write.cc): the request as sent
// (target under the base path, headers, body), a large request body, and the bearer token, sent but
// never in an error, against the scripted misbehaving server on 127.0.0.1. Every test is bounded by
// client deadlines of a few seconds at most. Shared helpers: http_client_test_util.h.
#include <string>

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
using ::testing::Not;
namespace t = ::bakeoff::testing;

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

}  // namespace
}  // namespace bakeoff::net
