// tests/unit/emulate/test_http_client.h
//
// Owns: a minimal blocking HTTP/1.1 client over loopback for the emulator's server tests:
// plain POSIX sockets with receive timeouts, chunked-body decoding and SSE event splitting.
// Deliberately independent of net/ so the server is tested against a separate implementation.
// Also the fast emulator configuration and the chat request body the server tests share.
// Thread-safety: functions are independent; a TestConnection is used by one thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulate/server.h"

namespace bakeoff::emulate::testing {

struct HttpResponse {
  int status = 0;                             // 0: no response could be read
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                           // de-chunked
  std::string raw;                            // every byte received
};

inline std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A connected socket; closes on destruction.
class TestConnection {
 public:
  explicit TestConnection(std::uint16_t port, int recv_timeout_ms = 10000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{recv_timeout_ms / 1000, (recv_timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~TestConnection() { Close(); }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Appends whatever arrives next to `out`; returns bytes read, 0 on EOF, -1 on error/timeout.
  // An interrupted wait is waited again: with a receive timeout the kernel does not restart it,
  // and a thread that made an io_uring ring is interrupted when the ring is torn down.
  ssize_t ReadSome(std::string& out) {
    char buf[16384];
    ssize_t n;
    do {
      n = ::recv(fd_, buf, sizeof buf, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    return n;
  }

  // Reads one complete response (content-length or chunked; otherwise until EOF).
  HttpResponse ReadResponse() {
    HttpResponse response;
    std::size_t header_end;
    while ((header_end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (ReadSome(pending_) <= 0) return response;
    }
    std::string head = pending_.substr(0, header_end);
    std::size_t pos = pending_.find(' ');
    response.status = std::stoi(pending_.substr(pos + 1, 3));
    std::size_t line = head.find("\r\n");
    while (line != std::string::npos && line < head.size()) {
      std::size_t next = head.find("\r\n", line + 2);
      std::string field = head.substr(line + 2, next == std::string::npos ? std::string::npos
                                                                           : next - line - 2);
      std::size_t colon = field.find(':');
      if (colon != std::string::npos) {
        std::size_t v = field.find_first_not_of(' ', colon + 1);
        response.headers[Lower(field.substr(0, colon))] =
            v == std::string::npos ? "" : field.substr(v);
      }
      line = next;
    }
    std::size_t at = header_end + 4;
    if (Lower(response.headers["transfer-encoding"]) == "chunked") {
      for (;;) {
        std::size_t crlf;
        while ((crlf = pending_.find("\r\n", at)) == std::string::npos) {
          if (ReadSome(pending_) <= 0) return response;
        }
        std::size_t size = std::stoul(pending_.substr(at, crlf - at), nullptr, 16);
        while (pending_.size() < crlf + 2 + size + 2) {
          if (ReadSome(pending_) <= 0) return response;
        }
        response.body += pending_.substr(crlf + 2, size);
        at = crlf + 2 + size + 2;
        if (size == 0) break;
      }
    } else if (response.headers.count("content-length")) {
      std::size_t size = std::stoul(response.headers["content-length"]);
      while (pending_.size() < at + size) {
        if (ReadSome(pending_) <= 0) return response;
      }
      response.body = pending_.substr(at, size);
      at += size;
    } else {
      while (ReadSome(pending_) > 0) {
      }
      response.body = pending_.substr(at);
      at = pending_.size();
    }
    response.raw = pending_.substr(0, at);
    pending_.erase(0, at);
    return response;
  }

  // Reads until `got` contains `needle`; false on EOF, error or a receive timeout first.
  bool ReadUntil(std::string& got, std::string_view needle) {
    while (got.find(needle) == std::string::npos) {
      if (ReadSome(got) <= 0) return false;
    }
    return true;
  }

  // Reads until the peer closes or resets; returns what arrived. `closed` tells whether it did
  // (false: a receive timeout first).
  std::string ReadToEnd(bool* closed = nullptr) {
    std::string got;
    ssize_t n;
    while ((n = ReadSome(got)) > 0) {
    }
    if (closed != nullptr) *closed = n == 0 || (n < 0 && errno == ECONNRESET);
    return got;
  }

  // True when the peer closed (recv returns 0) within the receive timeout.
  bool WaitForClose() {
    std::string sink;
    for (;;) {
      ssize_t n = ReadSome(sink);
      if (n == 0) return true;
      if (n < 0) return false;
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string pending_;
};

inline std::string FormatRequest(std::string_view method, std::string_view path,
                                 std::string_view body, bool keep_alive = false) {
  std::string request = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\n";
  request += "host: 127.0.0.1\r\n";
  if (!body.empty() || method == "POST") {
    request += "content-type: application/json\r\ncontent-length: " + std::to_string(body.size()) +
               "\r\n";
  }
  if (!keep_alive) request += "connection: close\r\n";
  request += "\r\n";
  request += body;
  return request;
}

// One request on a fresh connection.
inline HttpResponse Fetch(std::uint16_t port, std::string_view method, std::string_view path,
                          std::string_view body = {}) {
  TestConnection connection(port);
  if (!connection.connected() || !connection.Send(FormatRequest(method, path, body))) return {};
  return connection.ReadResponse();
}

// The value of one sample ("name{labels}" exactly as rendered) in a Prometheus text body, or -1
// when absent.
inline double PrometheusValue(std::string_view text, std::string_view series) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.size() > series.size() && line.substr(0, series.size()) == series &&
        line[series.size()] == ' ') {
      return std::stod(std::string(line.substr(series.size() + 1)));
    }
    at = end + 1;
  }
  return -1;
}

// The `data:` payloads of an SSE body, in order.
inline std::vector<std::string> SseData(std::string_view body) {
  std::vector<std::string> events;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t end = body.find("\n\n", at);
    if (end == std::string_view::npos) end = body.size();
    std::string_view event = body.substr(at, end - at);
    if (event.substr(0, 6) == "data: ") events.emplace_back(event.substr(6));
    at = end + 2;
  }
  return events;
}

// Starts an in-process emulator; a failure fails the test and returns null.
inline std::unique_ptr<EmulatorServer> StartOrDie(EmulatorConfig config) {
  auto server = EmulatorServer::Start(std::move(config));
  EXPECT_TRUE(server.ok()) << (server.ok() ? "" : server.error().message);
  if (!server.ok()) return nullptr;
  return std::move(server).value();
}

// Polls `condition` every 5 ms for up to `limit`.
template <typename Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// An emulator on an ephemeral port whose steps cost 1 ms whatever they hold (`instant`: no
// waiting at all), with a 4,096-token context.
inline EmulatorConfig FastConfig(bool instant = false) {
  EmulatorConfig config;
  config.port = 0;
  config.engine.cost = CostModel{1.0, 0.0, 0.0, 0.0};
  config.engine.max_model_len = 4096;
  config.instant = instant;
  return config;
}

inline std::string ChatBody(int max_tokens, bool stream, bool usage = false,
                            const std::string& content = "hello emulated world") {
  nlohmann::json body = {{"model", "emulated-model"},
                         {"messages", {{{"role", "user"}, {"content", content}}}},
                         {"max_tokens", max_tokens},
                         {"stream", stream}};
  if (usage) body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

}  // namespace bakeoff::emulate::testing
