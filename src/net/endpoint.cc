// net/endpoint.cc
//
// Owns: the Asio-free parts of net/http_client.h: Endpoint parsing and printing (with the
// percent-encoded socket path of http+unix:// URLs), ResponseHead lookup and TransportEnd names. Kept apart so that they compile without Asio and Beast.
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

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The socket path of an http+unix:// URL, percent-decoded; an error names what is wrong.
Result<std::string> DecodeSocketPath(std::string_view url, std::string_view encoded) {
  std::string path;
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] != '%') {
      path += encoded[i];
      continue;
    }
    const int high = i + 2 < encoded.size() ? HexDigit(encoded[i + 1]) : -1;
    const int low = high >= 0 ? HexDigit(encoded[i + 2]) : -1;
    if (low < 0) return BadUrl(url, "a '%' in the socket path must be followed by two hex digits");
    path += static_cast<char>(high * 16 + low);
    i += 2;
  }
  if (path.empty()) return BadUrl(url, "missing socket path (write '/' as %2F: http+unix://%2Frun%2Fengine.sock)");
  if (path.find('\0') != std::string::npos) return BadUrl(url, "abstract sockets (a NUL in the path) are not supported");
  if (path.size() > kMaxUnixSocketPath) {
    return BadUrl(url, "the socket path is longer than " + std::to_string(kMaxUnixSocketPath) + " bytes");
  }
  return path;
}

}  // namespace

std::string Endpoint::Where() const {
  if (!unix_socket.empty()) return "unix:" + unix_socket;
  return (host.find(':') != std::string::npos ? '[' + host + ']' : host) + ':' + port;
}

std::string Endpoint::ToString() const {
  if (!unix_socket.empty()) {
    std::string out = "http+unix://";
    for (char c : unix_socket) {
      if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
        out += c;
      } else {
        constexpr char kHex[] = "0123456789ABCDEF";
        out += '%';
        out += kHex[static_cast<unsigned char>(c) >> 4];
        out += kHex[static_cast<unsigned char>(c) & 15];
      }
    }
    return out + base_path;
  }
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
  bool unix_socket = false;
  std::string_view rest = url;
  if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else if (rest.substr(0, 8) == "https://") {
    endpoint.tls = true;
    rest.remove_prefix(8);
  } else if (rest.substr(0, 12) == "http+unix://") {
    unix_socket = true;
    rest.remove_prefix(12);
  } else {
    return BadUrl(url, "the scheme must be http://, https:// or http+unix://");
  }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return BadUrl(url, "user information in the URL is not supported; use a bearer token");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return BadUrl(url, "a query or fragment is not allowed in the base URL");
  }
  if (unix_socket) {
    Result<std::string> socket_path = DecodeSocketPath(url, authority);
    if (!socket_path.ok()) return socket_path.error();
    endpoint.unix_socket = std::move(socket_path).value();
    endpoint.host = "localhost";
    endpoint.port = "80";
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    endpoint.base_path = std::string(path);
    return endpoint;
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
  if (std::any_of(endpoint.host.begin(), endpoint.host.end(), [](char c) {
        return c == '[' || c == ']' || std::isspace(static_cast<unsigned char>(c)) != 0 ||
               std::iscntrl(static_cast<unsigned char>(c)) != 0;
      })) {
    return BadUrl(url, "the host has a character no host name or address may have");
  }
  if (authority.front() == '[' && endpoint.host.find(':') == std::string::npos) {
    return BadUrl(url, "only IPv6 addresses go in brackets");
  }
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
