// tests/fuzz/endpoint_fuzz.cc
//
// Owns: the libFuzzer harness for net::ParseEndpoint (a URL from a flag or a study file). The input
// is the URL. Invariants checked: a URL that parses prints (ToString) as one that parses again to
// the same endpoint; a Unix socket's path is non-empty, NUL-free and fits sockaddr_un; a refusal
// is kInvalidInput and names the URL.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "net/http_client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  const bakeoff::Result<bakeoff::net::Endpoint> parsed = bakeoff::net::ParseEndpoint(url);
  if (!parsed.ok()) {
    BAKEOFF_CHECK(parsed.error().code == bakeoff::ErrorCode::kInvalidInput);
    BAKEOFF_CHECK(parsed.error().message.find("invalid endpoint URL") == 0);
    return 0;
  }
  const bakeoff::net::Endpoint& endpoint = *parsed;
  BAKEOFF_CHECK(!endpoint.host.empty() && !endpoint.port.empty());
  BAKEOFF_CHECK(endpoint.base_path.empty() || endpoint.base_path.back() != '/');
  if (!endpoint.unix_socket.empty()) {
    BAKEOFF_CHECK(endpoint.unix_socket.find('\0') == std::string::npos);
    BAKEOFF_CHECK(endpoint.unix_socket.size() <= bakeoff::net::kMaxUnixSocketPath);
  }
  const std::string printed = endpoint.ToString();
  const bakeoff::Result<bakeoff::net::Endpoint> again = bakeoff::net::ParseEndpoint(printed);
  BAKEOFF_CHECK(again.ok()) << printed << ": " << again.error().message;
  BAKEOFF_CHECK(again->tls == endpoint.tls && again->host == endpoint.host && again->port == endpoint.port &&
                again->base_path == endpoint.base_path && again->unix_socket == endpoint.unix_socket)
      << printed;
  BAKEOFF_CHECK(!endpoint.Where().empty());
  return 0;
}
