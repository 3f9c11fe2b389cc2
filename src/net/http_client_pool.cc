// net/http_client_pool.cc
//
// Owns: the connection pool and a request's life on a connection: Start (reuse the most recently
// pooled connection that still looks alive, or open a new one), the start of a request and of
// each attempt, its end (Finish: back to the pool or closed, then OnEnd), the reuse checks
// (MSG_PEEK for EOF or unsolicited bytes; the server's announced idle timeout less a margin),
// the Keep-Alive announcement (timeout, max), the stale-connection retry on a new connection, the
// busy list and Shutdown.
// Does not own: connecting (http_client_connect.cc), writing (http_client_write.cc), reading
// (http_client_response.cc), the timer (http_client_deadlines.cc). Shared declarations:
// net/http_client_internal.h.
#include "net/http_client_internal.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <openssl/ssl.h>

#include "core/check.h"

namespace bakeoff::net {
namespace http_internal {

// The parameters of a `Keep-Alive: timeout=5, max=100` response header (RFC 2068 section
// 19.7.1.1; not in RFC 9112, but sent by Apache, nginx and cpp-httplib). Malformed parameters
// are ignored, as if absent.
struct KeepAliveParams {
  std::optional<Nanos> timeout;
  std::optional<std::uint64_t> max;
};

KeepAliveParams ParseKeepAlive(std::string_view value) {
  KeepAliveParams params;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return s;
  };
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) continue;
    const std::string_view name = trim(item.substr(0, equals));
    const std::string_view number = trim(item.substr(equals + 1));
    const char* end = number.data() + number.size();
    if (boost::beast::iequals(BeastStringView(name.data(), name.size()), "timeout")) {
      double seconds = 0;
      const auto parsed = std::from_chars(number.data(), end, seconds);
      if (parsed.ec == std::errc() && parsed.ptr == end && std::isfinite(seconds) &&
          seconds >= 0 && seconds < 1e9) {
        params.timeout = FromSeconds(seconds);
      }
    } else if (boost::beast::iequals(BeastStringView(name.data(), name.size()), "max")) {
      std::uint64_t count = 0;
      const auto parsed = std::from_chars(number.data(), end, count);
      if (parsed.ec == std::errc() && parsed.ptr == end) params.max = count;
    }
  }
  return params;
}

// How long before the server's announced idle timeout we stop reusing a connection: the server's
// timer started when it sent the response's last byte, and our request needs time to reach it.
Nanos KeepAliveMargin(Nanos timeout) {
  return std::min<Nanos>(std::chrono::seconds(1), timeout / 4);
}

// ---------------------------------------------------------------------------------------------
// Connection: a request's start and end, reuse checks, Keep-Alive, the stale-connection retry

void Connection::Begin(HttpRequest&& request, ResponseHandler* handler, bool reused) {
  ClientState& client = *client_;
  BAKEOFF_CHECK(!active_) << "a connection carries one request at a time";
  handler_ = handler;
  start_ = client.clock.Now();
  total_deadline_ = AddSaturating(start_, client.options.deadlines.total);
  cancel_at_ = request.cancel_at;
  head_request_ = request.method == "HEAD";
  client.SerializeHead(request, out_head_);
  out_body_ = std::move(request.body);
  if (reused && requests_left_) --*requests_left_;
  BeginAttempt(reused, start_);
}

void Connection::BeginAttempt(bool reused, MonoTime now) {
  active_ = true;
  reused_ = reused;
  attempt_start_ = now;
  last_progress_ = now;
  written_ = 0;
  ResetParser();
  pending_.clear();
  handler_error_.clear();
  body_bytes_ = 0;
  response_started_ = false;

  const std::uint64_t gen = gen_;
  if (reused) {
    phase_ = Phase::kWriting;
    ArmTimer();
    handler_->OnConnected(now, true);
    if (!Current(gen)) return;
    Write();
  } else {
    phase_ = Phase::kConnecting;
    ArmTimer();
    Connect();
  }
}

void Connection::Finish(TransportEnd end, std::string detail, bool keep_alive) {
  ClientState* client = client_;
  ResponseHandler* handler = handler_;
  BAKEOFF_CHECK(active_ && client != nullptr && handler != nullptr);
  if (StaleBeforeResponse(end)) {
    RetryOnNewConnection(std::move(detail));
    return;
  }
  const MonoTime now = client->clock.Now();
  auto self = shared_from_this();  // `busy` may hold the last reference
  EndActive();
  std::string().swap(out_body_);  // the request body can be large; do not keep it pooled
  if (keep_alive) {
    client->idle.push_back(self);
  } else {
    Close();
  }
  handler->OnEnd(now, end, detail);
}

void Connection::EndActive() {
  active_ = false;
  handler_ = nullptr;
  phase_ = Phase::kIdle;
  ++gen_;
  if (timer_armed_) {
    timer_armed_ = false;
    timer_.cancel();
  }
  client_->RemoveBusy(this);
}

bool Connection::StaleBeforeResponse(TransportEnd end) const {
  // kReset covers EOF, ECONNRESET and EPIPE on write or read (and injected faults); a timeout or
  // a cancellation is not a stale connection. A retry runs on a new connection (not reused_), so
  // it is never retried again.
  return end == TransportEnd::kReset && reused_ && !response_started_;
}

void Connection::RetryOnNewConnection(std::string reason) {
  ClientState& client = *client_;
  ResponseHandler* handler = handler_;
  const MonoTime now = client.clock.Now();
  auto self = shared_from_this();  // `busy` may hold the last reference
  std::shared_ptr<Connection> fresh = client.OpenConnection();
  fresh->handler_ = handler;
  fresh->start_ = start_;
  fresh->total_deadline_ = total_deadline_;
  fresh->cancel_at_ = cancel_at_;
  fresh->head_request_ = head_request_;
  fresh->out_head_.swap(out_head_);
  fresh->out_body_.swap(out_body_);
  EndActive();
  Close();
  // Connecting reports nothing synchronously, so the handler hears of the retry before any event
  // of the new attempt, and a Shutdown() from this callback finds the new connection busy.
  fresh->BeginAttempt(/*reused=*/false, now);
  handler->OnStaleConnectionRetry(now, reason);
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  ++gen_;
  error_code ignored;
  Lowest().close(ignored);
  if (timer_armed_) {
    timer_armed_ = false;
    timer_.cancel();
  }
  client_ = nullptr;
}

bool Connection::LooksAlive(MonoTime now) {
  if (closed_ || now >= reusable_until_) return false;
  if (tls_ && SSL_pending(tls_->native_handle()) > 0) return false;
  char byte;
  const ssize_t got = ::recv(Lowest().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void Connection::PostFinish(TransportEnd end, std::string detail) {
  asio::post(client_->context,
             [self = shared_from_this(), gen = gen_, end, detail = std::move(detail)]() mutable {
               if (self->Current(gen)) self->Finish(end, std::move(detail), false);
             });
}

bool Connection::ServerAllowsAnother(MonoTime now) {
  const KeepAliveParams announced = ParseKeepAlive(head_.Header("Keep-Alive"));
  if (announced.timeout) server_idle_timeout_ = announced.timeout;
  if (announced.max) requests_left_ = announced.max;
  if (requests_left_ && *requests_left_ == 0) return false;
  if (!server_idle_timeout_) return true;
  const Nanos usable = *server_idle_timeout_ - KeepAliveMargin(*server_idle_timeout_);
  if (usable <= Nanos(0)) return false;
  reusable_until_ = AddSaturating(now, usable);
  return true;
}

// ---------------------------------------------------------------------------------------------
// ClientState

void ClientState::Start(HttpRequest&& request, ResponseHandler* handler) {
  BAKEOFF_CHECK(handler != nullptr);
  const MonoTime now = clock.Now();
  std::shared_ptr<Connection> connection;
  while (!idle.empty()) {
    std::shared_ptr<Connection> candidate = std::move(idle.back());
    idle.pop_back();
    if (candidate->LooksAlive(now)) {
      connection = std::move(candidate);
      break;
    }
    candidate->Close();
  }
  const bool reused = connection != nullptr;
  if (reused) {
    AddBusy(connection);
  } else {
    connection = OpenConnection();
  }
  connection->Begin(std::move(request), handler, reused);
}

std::shared_ptr<Connection> ClientState::OpenConnection() {
  auto connection = std::make_shared<Connection>(*this);
  ++connections_opened;
  AddBusy(connection);
  return connection;
}

void ClientState::AddBusy(const std::shared_ptr<Connection>& connection) {
  connection->busy_index = busy.size();
  busy.push_back(connection);
}

void ClientState::RemoveBusy(Connection* connection) {
  const std::size_t index = connection->busy_index;
  BAKEOFF_CHECK(index < busy.size() && busy[index].get() == connection);
  if (index + 1 != busy.size()) {
    busy[index] = std::move(busy.back());
    busy[index]->busy_index = index;
  }
  busy.pop_back();
}

void ClientState::Shutdown() {
  // Handlers may start new requests from OnEnd; those are not cancelled by this call.
  std::vector<std::shared_ptr<Connection>> snapshot = busy;
  for (const auto& connection : snapshot) {
    if (connection->active()) {
      connection->Finish(TransportEnd::kCancelled, "the client was shut down", false);
    }
  }
  for (const auto& connection : idle) connection->Close();
  idle.clear();
}

}  // namespace http_internal
}  // namespace bakeoff::net
