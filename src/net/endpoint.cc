// net/endpoint.cc
//
// Owns: the Asio-free parts of net/http_client.h: Endpoint parsing and printing, ResponseHead
// lookup and TransportEnd names. Kept apart so that they compile without Asio and Beast.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include "net/http_client.h"

namespace bakeoff::net {

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

Error BadUrl(std::string_view url, std::string_view why) {
  return MakeError(ErrorCode::kInvalidInput,
                   "invalid endpoint URL '" + std::string(url) + "': " + std::string(why));
}

}  // namespace

std::string Endpoint::ToString() const {
  std::string out = tls ? "https://" : "http://";
  if (host.find(':') != std::string::npos) {
    out += '[' + host + ']';
  } else {
    out += host;
  }
  out += ':' + port + base_path;
  return out;
}

Result<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint endpoint;
  std::string_view rest = url;
  if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else if (rest.substr(0, 8) == "https://") {
    endpoint.tls = true;
    rest.remove_prefix(8);
  } else {
    return BadUrl(url, "the scheme must be http:// or https://");
  }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return BadUrl(url, "user information in the URL is not supported; use a bearer token");
  }
  if (path.find_first_of("?#") != std::string_view::npos) {
    return BadUrl(url, "a query or fragment is not allowed in the base URL");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return BadUrl(url, "unterminated '[' in the host");
    endpoint.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return BadUrl(url, "unexpected characters after ']'");
      port = after.substr(1);
      if (port.empty()) return BadUrl(url, "empty port");
    }
  } else {
    const std::size_t colon = authority.find(':');
    endpoint.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return BadUrl(url, "empty port");
    }
  }
  if (endpoint.host.empty()) return BadUrl(url, "missing host");
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        })) {
      return BadUrl(url, "the port must be a number");
    }
    const int value = std::stoi(std::string(port));
    if (value < 1 || value > 65535) return BadUrl(url, "the port must be in 1..65535");
    endpoint.port = std::to_string(value);
  } else {
    endpoint.port = endpoint.tls ? "443" : "80";
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  endpoint.base_path = std::string(path);
  return endpoint;
}

std::string_view ResponseHead::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

const char* TransportEndName(TransportEnd end) {
  switch (end) {
    case TransportEnd::kComplete:
      return "complete";
    case TransportEnd::kConnectFailed:
      return "connect_failed";
    case TransportEnd::kReset:
      return "reset";
    case TransportEnd::kTimeoutConnect:
      return "timeout_connect";
    case TransportEnd::kTimeoutFirstByte:
      return "timeout_first_byte";
    case TransportEnd::kTimeoutIdle:
      return "timeout_idle";
    case TransportEnd::kTimeoutTotal:
      return "timeout_total";
    case TransportEnd::kCancelled:
      return "cancelled";
    case TransportEnd::kProtocolError:
      return "protocol_error";
    case TransportEnd::kTooLarge:
      return "too_large";
    case TransportEnd::kHandlerAborted:
      return "handler_aborted";
  }
  return "unknown";
}

}  // namespace bakeoff::net
