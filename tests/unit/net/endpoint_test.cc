// tests/unit/net/endpoint_test.cc
//
// Tests for net/http_client.h's Endpoint parsing and printing and ResponseHead::Header
// (net/endpoint.cc).
#include <string>

#include <gtest/gtest.h>

#include "net/http_client.h"

namespace bakeoff::net {
namespace {


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

}  // namespace
}  // namespace bakeoff::net
