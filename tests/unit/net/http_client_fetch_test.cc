// tests/unit/net/http_client_fetch_test.cc
//
// Tests for Fetch and RedactSecret (net/http_client_fetch.cc), Fetch against the scripted server on
// 127.0.0.1. Shared helpers: http_client_test_util.h.
#include <string>

#include <gtest/gtest.h>

#include "net/http_client.h"
#include "support/scripted_server.h"
#include "http_client_test_util.h"

namespace bakeoff::net {
namespace {

using namespace http_client_test;
namespace t = ::bakeoff::testing;

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
