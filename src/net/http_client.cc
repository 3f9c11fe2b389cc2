// net/http_client.cc
//
// Owns: the HttpClient implementation: a pool of keep-alive connections, each a small state
// machine driven by Asio callbacks (connect -> [TLS handshake] -> write -> read headers -> read
// body), a Beast basic_parser subclass that hands de-chunked body bytes straight to the handler
// (no body copy), and one lazily re-armed deadline timer per connection.
//
// Design notes (why, not what):
// - Sockets are Asio's generic stream sockets, so one connection type carries TCP and Unix-domain
//   (http+unix://) connections alike; only TCP gets TCP_NODELAY.
// - Plain reads wait for readiness (async_wait) and then read synchronously into one
//   64 KiB scratch buffer shared by the whole client. A waiting stream therefore holds no read
//   buffer, which keeps 10,000 open streams cheap. Only bytes the parser could not consume yet (a
//   partial header or chunk-size line) are kept per connection. TLS reads go through the
//   ssl::stream, which needs a per-connection buffer (16 KiB, one TLS record).
// - Deadlines: one steady_timer per connection, armed at the earliest pending deadline and only
//   moved when a deadline becomes *earlier*. Progress that pushes a deadline later (each read
//   extends the idle deadline) costs nothing; when the timer fires, the deadlines are
//   re-evaluated and the timer re-armed if none has really passed.
// - Stale callbacks: every request bumps the connection's generation when it ends; callbacks
//   carry the generation they were issued for and do nothing when it no longer matches. Handlers
//   capture a shared_ptr to the connection, so a closed connection lives until its last
//   callback has run.
// - A pooled connection is checked with a non-blocking MSG_PEEK before reuse: a server that
//   closed an idle keep-alive connection (EOF) or sent unsolicited bytes is not reused. The check
//   cannot see a close that is still on its way, so a request that such a connection loses before
//   any response byte is sent again on a new connection (the contract is in http_client.h). The
//   retry starts from Finish(), which every failure passes through, while the request's bytes are
//   still held; the new connection takes them over with the handler, start and deadlines.
// - The server's Keep-Alive announcement (timeout, max) is applied when a response completes, so
//   a connection the server is about to drop is neither pooled nor taken from the pool.
//
// Wire format: RFC 9112 (HTTP/1.1 message syntax, chunked transfer coding); parsing by Beast.
#include "net/http_client.h"

#include <utility>  // Before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it.

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/check.h"

namespace bakeoff::net {
namespace http_internal {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
// TCP and Unix-domain connections share one socket type; its endpoints convert from both.
using StreamSocket = asio::generic::stream_protocol::socket;
using StreamEndpoint = asio::generic::stream_protocol::endpoint;
using boost::system::error_code;
using BeastStringView = boost::beast::string_view;

constexpr std::size_t kPlainReadBytes = 64 * 1024;
constexpr std::size_t kTlsReadBytes = 16 * 1024;  // one TLS record

std::string_view ToStd(BeastStringView s) { return {s.data(), s.size()}; }

MonoTime AddSaturating(MonoTime at, Nanos d) {
  if (d > MonoTime::max() - at) return MonoTime::max();
  return at + d;
}

std::string Millis(Nanos d) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f ms", ToMillis(d));
  return text;
}

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

enum class Phase { kIdle, kConnecting, kWriting, kAwaitingHeaders, kReadingBody };

class Connection;

// Everything the client's connections share. Lives inside HttpClient::Impl.
struct ClientState {
  ClientState(EventLoop& loop, Endpoint endpoint_in, ClientOptions options_in,
              const Clock& clock_in);

  void Start(HttpRequest&& request, ResponseHandler* handler);
  void Shutdown();
  // A new, unconnected connection, counted and registered as busy.
  std::shared_ptr<Connection> OpenConnection();
  void AddBusy(const std::shared_ptr<Connection>& connection);
  void RemoveBusy(Connection* connection);
  void SerializeHead(const HttpRequest& request, std::string& out) const;
  std::string Where() const { return endpoint.Where(); }

  asio::io_context& context;
  Endpoint endpoint;
  ClientOptions options;
  const Clock& clock;
  bool clock_is_steady;
  bool host_is_address = false;
  std::optional<ssl::context> tls_context;
  std::string tls_setup_error;          // non-empty: every connection attempt fails with it
  // The socket file or literal address, or the first resolution's answer.
  std::vector<StreamEndpoint> resolved;
  std::optional<tcp::resolver> resolver;
  std::string fixed_headers;  // Host, User-Agent, Authorization: the same on every request
  std::vector<char> read_scratch;
  std::vector<std::shared_ptr<Connection>> idle;  // LIFO: the most recently used is reused first
  std::vector<std::shared_ptr<Connection>> busy;
  std::size_t connections_opened = 0;
};

// Beast's parser with our callbacks: the head goes into Connection::head_, body pieces go to the
// handler as they are parsed, de-chunked, without copying.
class ResponseParser final : public http::basic_parser<false> {
 public:
  explicit ResponseParser(Connection& connection) : connection_(connection) {}

 private:
  void on_request_impl(http::verb, BeastStringView, BeastStringView, int, error_code&) override {}
  void on_response_impl(int code, BeastStringView reason, int version, error_code& ec) override;
  void on_field_impl(http::field name, BeastStringView name_string, BeastStringView value,
                     error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(BeastStringView body, error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t, BeastStringView, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, BeastStringView body, error_code& ec) override;
  void on_finish_impl(error_code&) override {}

  Connection& connection_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(ClientState& client);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // REQUIRES: not active; reused only if the connection is open.
  void Begin(HttpRequest&& request, ResponseHandler* handler, bool reused);
  // Ends the active request with `end`; returns the connection to the pool when `keep_alive`,
  // otherwise closes it. Calls OnEnd last: nothing of this connection may be touched after.
  // A stale reused connection's failure does not end the request: it moves to a new connection.
  void Finish(TransportEnd end, std::string detail, bool keep_alive);
  // Closes the socket; the connection is never used again.
  void Close();
  // True if a pooled connection can carry another request at `now`: the server's announced idle
  // timeout (less the margin) has not run out, and it shows no EOF and no unsolicited bytes.
  bool LooksAlive(MonoTime now);
  bool active() const { return active_; }

  std::size_t busy_index = 0;

  // Parser callbacks.
  void OnStatusLine(int code);
  void OnField(http::field name, std::string_view name_string, std::string_view value);
  void OnHeaderDone(error_code& ec);
  void OnBodyBytes(std::string_view bytes, error_code& ec);

 private:
  struct Deadline {
    MonoTime at;
    TransportEnd kind;
  };

  bool Current(std::uint64_t gen) const { return client_ != nullptr && active_ && gen == gen_; }
  bool FaultFires() {
    return client_->options.faults != nullptr && client_->options.faults->NextOperationFails();
  }
  // Ends the request from a fresh loop turn, so that OnEnd never runs inside Start().
  void PostFinish(TransportEnd end, std::string detail);
  // Starts sending the request already held (handler, bytes, start and deadlines) on this
  // connection: writes at once when `reused`, otherwise connects first.
  void BeginAttempt(bool reused, MonoTime now);
  // Makes this connection idle (no active request) and no longer busy; the timer is stopped.
  void EndActive();
  // True if the active request failed only because its reused connection had gone stale.
  bool StaleBeforeResponse(TransportEnd end) const;
  // Moves the active request, unchanged, to a new connection and closes this one.
  void RetryOnNewConnection(std::string reason);
  // Reads the response's Keep-Alive announcement; true if the server allows another request.
  bool ServerAllowsAnother(MonoTime now);
  StreamSocket& Lowest() { return tls_ ? tls_->next_layer() : *plain_; }

  void Connect();
  void Resolve();
  void ConnectSocket();
  void OnSocketConnected(const error_code& ec);
  void OnHandshake(const error_code& ec);
  void OnConnectionReady();
  void Write();
  void OnWritten(const error_code& ec, std::size_t bytes);
  void Read();
  void OnReadable(const error_code& ec);
  void OnData(const error_code& ec, const char* data, std::size_t size);
  void Consume(const char* data, std::size_t size);
  void OnEof();
  void FailIo(const error_code& ec, const char* doing);
  void FailParse(const error_code& ec);
  void ResetParser();

  Deadline NextDeadline() const;
  void ArmTimer();
  void OnTimer();
  std::string DeadlineDetail(TransportEnd kind) const;

  ClientState* client_;  // null once closed
  std::optional<StreamSocket> plain_;
  std::optional<ssl::stream<StreamSocket>> tls_;
  asio::steady_timer timer_;
  bool timer_armed_ = false;
  MonoTime timer_at_{};
  bool closed_ = false;

  // What the server announced in Keep-Alive, for the life of the connection.
  std::optional<Nanos> server_idle_timeout_;
  std::optional<std::uint64_t> requests_left_;  // max=N, less the requests sent since
  MonoTime reusable_until_ = MonoTime::max();   // pooled: reuse only before this instant

  // The active request.
  std::uint64_t gen_ = 0;
  std::uint64_t callback_gen_ = 0;  // gen_ when the parser was last fed
  bool active_ = false;
  bool reused_ = false;
  bool response_started_ = false;  // a response byte was read in this attempt
  Phase phase_ = Phase::kIdle;
  ResponseHandler* handler_ = nullptr;
  MonoTime start_{};
  MonoTime attempt_start_{};  // this connection's attempt; after a stale retry, later than start_
  MonoTime written_at_{};
  MonoTime last_progress_{};
  MonoTime total_deadline_{};
  std::optional<MonoTime> cancel_at_;
  bool head_request_ = false;
  std::string out_head_;
  std::string out_body_;
  std::size_t written_ = 0;
  std::optional<ResponseParser> parser_;
  ResponseHead head_;
  MonoTime read_at_{};
  std::string pending_;  // bytes read but not yet consumed by the parser
  std::vector<char> tls_buffer_;
  std::string handler_error_;
  std::uint64_t body_bytes_ = 0;
};

// ---------------------------------------------------------------------------------------------
// ResponseParser

void ResponseParser::on_response_impl(int code, BeastStringView, int, error_code&) {
  connection_.OnStatusLine(code);
}

void ResponseParser::on_field_impl(http::field name, BeastStringView name_string,
                                   BeastStringView value, error_code&) {
  connection_.OnField(name, ToStd(name_string), ToStd(value));
}

void ResponseParser::on_header_impl(error_code& ec) { connection_.OnHeaderDone(ec); }

std::size_t ResponseParser::on_body_impl(BeastStringView body, error_code& ec) {
  connection_.OnBodyBytes(ToStd(body), ec);
  return body.size();
}

std::size_t ResponseParser::on_chunk_body_impl(std::uint64_t, BeastStringView body,
                                               error_code& ec) {
  connection_.OnBodyBytes(ToStd(body), ec);
  return body.size();
}

// ---------------------------------------------------------------------------------------------
// Connection

Connection::Connection(ClientState& client) : client_(&client), timer_(client.context) {
  if (client.endpoint.tls) {
    tls_.emplace(client.context, *client.tls_context);
    SSL* ssl = tls_->native_handle();
    if (!client.host_is_address) {
      // SNI (RFC 6066) carries names only, never address literals.
      SSL_set_tlsext_host_name(ssl, client.endpoint.host.c_str());
    }
    if (client.options.verify_tls) {
      if (client.host_is_address) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), client.endpoint.host.c_str());
      } else {
        SSL_set1_host(ssl, client.endpoint.host.c_str());
      }
    }
  } else {
    plain_.emplace(client.context);
  }
}

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

void Connection::ResetParser() {
  const Limits& limits = client_->options.limits;
  parser_.emplace(*this);
  parser_->header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(limits.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser_->body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
  parser_->eager(true);
  parser_->skip(head_request_);
  head_.status = 0;
  head_.content_type.clear();
  head_.headers.clear();
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

void Connection::Connect() {
  if (!client_->tls_setup_error.empty()) {
    PostFinish(TransportEnd::kConnectFailed, client_->tls_setup_error);
    return;
  }
  if (client_->resolved.empty()) {
    Resolve();
  } else {
    ConnectSocket();
  }
}

void Connection::Resolve() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kConnectFailed, "injected fault while resolving " + client_->Where());
    return;
  }
  if (!client_->resolver) client_->resolver.emplace(client_->context);
  client_->resolver->async_resolve(
      client_->endpoint.host, client_->endpoint.port,
      [self = shared_from_this(), gen = gen_](const error_code& ec,
                                              const tcp::resolver::results_type& results) {
        if (!self->Current(gen)) return;
        ClientState& client = *self->client_;
        if (ec || results.empty()) {
          self->Finish(TransportEnd::kConnectFailed,
                       "cannot resolve " + client.endpoint.host + ": " +
                           (ec ? ec.message() : std::string("no addresses")),
                       false);
          return;
        }
        if (client.resolved.empty()) {
          for (const auto& entry : results) client.resolved.emplace_back(entry.endpoint());
        }
        self->ConnectSocket();
      });
}

void Connection::ConnectSocket() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kConnectFailed,
               "injected fault while connecting to " + client_->Where());
    return;
  }
  auto done = [self = shared_from_this(), gen = gen_](const error_code& ec, auto&&...) {
    if (self->Current(gen)) self->OnSocketConnected(ec);
  };
  if (client_->resolved.size() == 1) {
    Lowest().async_connect(client_->resolved.front(), std::move(done));
  } else {
    asio::async_connect(Lowest(), client_->resolved, std::move(done));
  }
}

void Connection::OnSocketConnected(const error_code& ec) {
  if (ec) {
    Finish(TransportEnd::kConnectFailed,
           "connect to " + client_->Where() + " failed: " + ec.message(), false);
    return;
  }
  error_code ignored;
  if (client_->endpoint.unix_socket.empty()) Lowest().set_option(tcp::no_delay(true), ignored);
  if (!tls_) {
    // Plain reads are synchronous after a readiness wait; they must not block.
    Lowest().non_blocking(true, ignored);
    OnConnectionReady();
    return;
  }
  if (FaultFires()) {
    Finish(TransportEnd::kConnectFailed,
           "injected fault during the TLS handshake with " + client_->Where(), false);
    return;
  }
  tls_->async_handshake(ssl::stream_base::client,
                        [self = shared_from_this(), gen = gen_](const error_code& handshake_ec) {
                          if (self->Current(gen)) self->OnHandshake(handshake_ec);
                        });
}

void Connection::OnHandshake(const error_code& ec) {
  if (ec) {
    std::string detail = "TLS handshake with " + client_->Where() + " failed: " + ec.message();
    const long verify = SSL_get_verify_result(tls_->native_handle());
    if (verify != X509_V_OK) {
      detail += std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
    }
    Finish(TransportEnd::kConnectFailed, std::move(detail), false);
    return;
  }
  OnConnectionReady();
}

void Connection::OnConnectionReady() {
  const MonoTime now = client_->clock.Now();
  phase_ = Phase::kWriting;
  last_progress_ = now;
  ArmTimer();
  const std::uint64_t gen = gen_;
  handler_->OnConnected(now, false);
  if (!Current(gen)) return;
  Write();
}

void Connection::Write() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kReset, "injected fault while writing the request");
    return;
  }
  std::array<asio::const_buffer, 2> buffers;
  if (written_ < out_head_.size()) {
    buffers[0] = asio::buffer(out_head_.data() + written_, out_head_.size() - written_);
    buffers[1] = asio::buffer(out_body_);
  } else {
    const std::size_t offset = written_ - out_head_.size();
    buffers[0] = asio::buffer(out_body_.data() + offset, out_body_.size() - offset);
  }
  auto done = [self = shared_from_this(), gen = gen_](const error_code& ec, std::size_t bytes) {
    if (self->Current(gen)) self->OnWritten(ec, bytes);
  };
  if (tls_) {
    tls_->async_write_some(buffers, std::move(done));
  } else {
    plain_->async_write_some(buffers, std::move(done));
  }
}

void Connection::OnWritten(const error_code& ec, std::size_t bytes) {
  if (ec) {
    FailIo(ec, "writing the request");
    return;
  }
  const MonoTime now = client_->clock.Now();
  written_ += bytes;
  last_progress_ = now;
  if (written_ < out_head_.size() + out_body_.size()) {
    Write();
    return;
  }
  phase_ = Phase::kAwaitingHeaders;
  written_at_ = now;
  ArmTimer();
  const std::uint64_t gen = gen_;
  handler_->OnRequestWritten(now);
  if (!Current(gen)) return;
  Read();
}

void Connection::Read() {
  if (tls_) {
    if (FaultFires()) {
      PostFinish(TransportEnd::kReset, "injected fault while reading the response");
      return;
    }
    if (tls_buffer_.empty()) tls_buffer_.resize(kTlsReadBytes);
    tls_->async_read_some(asio::buffer(tls_buffer_), [self = shared_from_this(), gen = gen_](
                                                         const error_code& ec, std::size_t bytes) {
      if (self->Current(gen)) {
        self->OnData(ec, self->tls_buffer_.data(), bytes);
      }
    });
    return;
  }
  plain_->async_wait(StreamSocket::wait_read,
                     [self = shared_from_this(), gen = gen_](const error_code& ec) {
                       if (self->Current(gen)) self->OnReadable(ec);
                     });
}

void Connection::OnReadable(const error_code& ec) {
  if (ec) {
    FailIo(ec, "waiting for the response");
    return;
  }
  if (FaultFires()) {
    Finish(TransportEnd::kReset, "injected fault while reading the response", false);
    return;
  }
  std::vector<char>& scratch = client_->read_scratch;
  error_code read_ec;
  const std::size_t bytes = plain_->read_some(asio::buffer(scratch), read_ec);
  if (read_ec == asio::error::would_block || read_ec == asio::error::try_again) {
    Read();  // spurious wake-up
    return;
  }
  OnData(read_ec, scratch.data(), bytes);
}

void Connection::OnData(const error_code& ec, const char* data, std::size_t size) {
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
    OnEof();
    return;
  }
  if (ec) {
    FailIo(ec, "reading the response");
    return;
  }
  read_at_ = client_->clock.Now();
  last_progress_ = read_at_;
  if (size > 0) response_started_ = true;
  Consume(data, size);
}

void Connection::Consume(const char* data, std::size_t size) {
  const bool from_pending = !pending_.empty();
  std::string_view input;
  if (from_pending) {
    pending_.append(data, size);
    input = pending_;
  } else {
    input = std::string_view(data, size);
  }
  const std::uint64_t gen = gen_;
  callback_gen_ = gen;
  std::size_t used = 0;
  error_code ec;
  while (used < input.size() && !parser_->is_done()) {
    used += parser_->put(asio::const_buffer(input.data() + used, input.size() - used), ec);
    if (!Current(gen)) return;  // a handler callback ended this request (e.g. Shutdown())
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) break;
    if (parser_->is_done() && head_.status / 100 == 1 && head_.status != 101) {
      ResetParser();  // an interim 1xx response: the real one follows
    }
  }
  if (ec) {
    FailParse(ec);
    return;
  }
  if (parser_->is_done()) {
    // No pipelining: bytes after the response mean the connection is not clean. Beast's
    // keep_alive() is false after `Connection: close` (and for HTTP/1.0 without keep-alive).
    const bool keep_alive =
        parser_->keep_alive() && used == input.size() && ServerAllowsAnother(read_at_);
    Finish(TransportEnd::kComplete, std::string(), keep_alive);
    return;
  }
  if (from_pending) {
    pending_.erase(0, used);
  } else {
    pending_.assign(input.substr(used));
  }
  if (pending_.size() > client_->options.limits.max_header_bytes + kPlainReadBytes) {
    Finish(TransportEnd::kProtocolError, "unparsable response framing (line too long)", false);
    return;
  }
  Read();
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

void Connection::OnEof() {
  if (parser_->is_header_done() && parser_->need_eof()) {
    // A body delimited by the end of the connection (RFC 9112 section 6.3, rule 8).
    error_code ec;
    callback_gen_ = gen_;
    parser_->put_eof(ec);
    if (!ec && parser_->is_done()) {
      Finish(TransportEnd::kComplete, std::string(), false);
    } else {
      FailParse(ec);
    }
    return;
  }
  std::string detail;
  if (!parser_->got_some() && pending_.empty()) {
    detail = reused_ ? "the server closed the kept-alive connection before responding"
                     : "the server closed the connection before responding";
  } else if (!parser_->is_header_done()) {
    detail = "the server closed the connection in the middle of the response headers";
  } else {
    detail = "the server closed the connection before the end of the body (" +
             std::to_string(body_bytes_) + " body bytes received)";
  }
  Finish(TransportEnd::kReset, std::move(detail), false);
}

void Connection::FailIo(const error_code& ec, const char* doing) {
  const TransportEnd end =
      phase_ == Phase::kConnecting ? TransportEnd::kConnectFailed : TransportEnd::kReset;
  Finish(end, std::string(doing) + ": " + ec.message(), false);
}

void Connection::FailParse(const error_code& ec) {
  if (!handler_error_.empty()) {
    Finish(TransportEnd::kHandlerAborted, std::move(handler_error_), false);
    return;
  }
  const Limits& limits = client_->options.limits;
  if (ec == http::error::header_limit) {
    Finish(TransportEnd::kTooLarge,
           "response header over the " + std::to_string(limits.max_header_bytes) + "-byte limit",
           false);
  } else if (ec == http::error::body_limit) {
    Finish(TransportEnd::kTooLarge,
           "response body over the " + std::to_string(limits.max_body_bytes) + "-byte limit",
           false);
  } else if (ec == http::error::buffer_overflow) {
    Finish(TransportEnd::kTooLarge, "response element over the parser's buffer", false);
  } else if (ec == http::error::partial_message) {
    Finish(TransportEnd::kReset, "the server closed the connection mid-response", false);
  } else {
    Finish(TransportEnd::kProtocolError, "invalid HTTP/1.1 response: " + ec.message(), false);
  }
}

void Connection::OnStatusLine(int code) { head_.status = code; }

void Connection::OnField(http::field name, std::string_view name_string, std::string_view value) {
  if (name == http::field::content_type) head_.content_type.assign(value);
  head_.headers.emplace_back(std::string(name_string), std::string(value));
}

void Connection::OnHeaderDone(error_code& ec) {
  if (head_.status / 100 == 1 && head_.status != 101) return;  // interim; not shown
  phase_ = Phase::kReadingBody;
  last_progress_ = read_at_;
  ArmTimer();
  handler_->OnHeaders(read_at_, head_);
  if (gen_ != callback_gen_ || !active_) ec = asio::error::operation_aborted;
}

void Connection::OnBodyBytes(std::string_view bytes, error_code& ec) {
  if (bytes.empty()) return;
  body_bytes_ += bytes.size();
  Status status = handler_->OnBody(read_at_, bytes);
  if (gen_ != callback_gen_ || !active_) {
    ec = asio::error::operation_aborted;
    return;
  }
  if (!status.ok()) {
    handler_error_ = status.error().message.empty() ? std::string("the handler rejected the body")
                                                    : status.error().message;
    ec = asio::error::operation_aborted;
  }
}

Connection::Deadline Connection::NextDeadline() const {
  const Deadlines& limits = client_->options.deadlines;
  Deadline next{total_deadline_, TransportEnd::kTimeoutTotal};
  auto consider = [&next](MonoTime at, TransportEnd kind) {
    if (at < next.at) next = Deadline{at, kind};
  };
  switch (phase_) {
    case Phase::kConnecting:
      consider(AddSaturating(attempt_start_, limits.connect), TransportEnd::kTimeoutConnect);
      break;
    case Phase::kWriting:  // a server that stops reading our request body
      consider(AddSaturating(last_progress_, limits.idle), TransportEnd::kTimeoutIdle);
      break;
    case Phase::kAwaitingHeaders:
      consider(AddSaturating(written_at_, limits.first_byte), TransportEnd::kTimeoutFirstByte);
      break;
    case Phase::kReadingBody:
      consider(AddSaturating(last_progress_, limits.idle), TransportEnd::kTimeoutIdle);
      break;
    case Phase::kIdle:
      break;
  }
  if (cancel_at_ && *cancel_at_ <= next.at) next = Deadline{*cancel_at_, TransportEnd::kCancelled};
  return next;
}

void Connection::ArmTimer() {
  if (!active_) return;
  const Deadline next = NextDeadline();
  if (timer_armed_ && timer_at_ <= next.at) return;  // fires earlier and re-evaluates then
  timer_armed_ = true;
  timer_at_ = next.at;
  if (next.at == MonoTime::max()) {
    timer_.expires_at(MonoTime::max());
  } else if (client_->clock_is_steady) {
    timer_.expires_at(next.at);
  } else {
    // An injected clock: translate its instant into a real steady-clock wait.
    timer_.expires_after(std::max(Nanos(0), next.at - client_->clock.Now()));
  }
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec) return;  // cancelled or moved
    self->timer_armed_ = false;
    self->OnTimer();
  });
}

void Connection::OnTimer() {
  if (!active_ || client_ == nullptr) return;
  const Deadline next = NextDeadline();
  if (next.at > client_->clock.Now()) {
    ArmTimer();  // progress moved the deadline since the timer was armed
    return;
  }
  Finish(next.kind, DeadlineDetail(next.kind), false);
}

std::string Connection::DeadlineDetail(TransportEnd kind) const {
  const Deadlines& limits = client_->options.deadlines;
  switch (kind) {
    case TransportEnd::kTimeoutConnect:
      return "not connected to " + client_->Where() + " within the connect deadline of " +
             Millis(limits.connect);
    case TransportEnd::kTimeoutFirstByte:
      return "no complete response header within " + Millis(limits.first_byte) +
             " of writing the request";
    case TransportEnd::kTimeoutIdle:
      return std::string(phase_ == Phase::kWriting ? "the server stopped reading the request"
                                                   : "no response bytes") +
             " for the idle deadline of " + Millis(limits.idle);
    case TransportEnd::kTimeoutTotal:
      return "the request exceeded its total deadline of " + Millis(limits.total);
    case TransportEnd::kCancelled:
      return "cancelled at the requested instant";
    default:
      return TransportEndName(kind);
  }
}

// ---------------------------------------------------------------------------------------------
// ClientState

ClientState::ClientState(EventLoop& loop, Endpoint endpoint_in, ClientOptions options_in,
                         const Clock& clock_in)
    : context(*static_cast<asio::io_context*>(loop.native_context())),
      endpoint(std::move(endpoint_in)),
      options(std::move(options_in)),
      clock(clock_in),
      clock_is_steady(dynamic_cast<const SteadyClock*>(&clock_in) != nullptr),
      read_scratch(kPlainReadBytes) {
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(endpoint.host, ec);
  if (!endpoint.unix_socket.empty()) {
    resolved.emplace_back(asio::local::stream_protocol::endpoint(endpoint.unix_socket));
  } else if (!ec) {
    host_is_address = true;
    int port = 0;
    for (char c : endpoint.port) port = port * 10 + (c - '0');
    resolved.emplace_back(tcp::endpoint(address, static_cast<unsigned short>(port)));
  }
  if (endpoint.tls) {
    tls_context.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls_context->native_handle(), TLS1_2_VERSION);
    if (options.verify_tls) {
      tls_context->set_verify_mode(ssl::verify_peer);
      if (options.ca_file.empty()) {
        tls_context->set_default_verify_paths(ec);
        if (ec) tls_setup_error = "cannot load the system trust store: " + ec.message();
      } else {
        tls_context->load_verify_file(options.ca_file, ec);
        if (ec) tls_setup_error = "cannot load CA file " + options.ca_file + ": " + ec.message();
      }
    } else {
      tls_context->set_verify_mode(ssl::verify_none);
    }
  }
  const bool default_port = endpoint.port == (endpoint.tls ? "443" : "80");
  fixed_headers = "Host: ";
  fixed_headers +=
      endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
  if (!default_port) fixed_headers += ":" + endpoint.port;
  fixed_headers += "\r\n";
  if (!options.user_agent.empty()) fixed_headers += "User-Agent: " + options.user_agent + "\r\n";
  if (!options.bearer_token.empty()) {
    fixed_headers += "Authorization: Bearer " + options.bearer_token + "\r\n";
  }
}

void ClientState::SerializeHead(const HttpRequest& request, std::string& out) const {
  out.clear();
  out += request.method;
  out += ' ';
  out += endpoint.base_path;
  if (request.path.empty() || request.path.front() != '/') out += '/';
  out += request.path;
  out += " HTTP/1.1\r\n";
  out += fixed_headers;
  const bool has_body = !request.body.empty() || request.method == "POST" ||
                        request.method == "PUT" || request.method == "PATCH";
  if (has_body) {
    if (!request.content_type.empty()) {
      out += "Content-Type: ";
      out += request.content_type;
      out += "\r\n";
    }
    out += "Content-Length: ";
    out += std::to_string(request.body.size());
    out += "\r\n";
  }
  for (const auto& [name, value] : request.headers) {
    BAKEOFF_CHECK(name.find_first_of("\r\n:") == std::string::npos &&
                  value.find_first_of("\r\n") == std::string::npos)
        << "header injection in request header " << name;
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "\r\n";
}

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

// -----------------------------------------------------------------------------------------------
// HttpClient

struct HttpClient::Impl : http_internal::ClientState {
  using ClientState::ClientState;
};

HttpClient::HttpClient(EventLoop& loop, Endpoint endpoint, ClientOptions options,
                       const Clock& clock)
    : impl_(std::make_unique<Impl>(loop, std::move(endpoint), std::move(options), clock)) {}

HttpClient::~HttpClient() {
  for (int round = 0; round < 1000 && !(impl_->busy.empty() && impl_->idle.empty()); ++round) {
    impl_->Shutdown();
  }
  BAKEOFF_CHECK(impl_->busy.empty()) << "handlers kept starting requests during ~HttpClient";
}

void HttpClient::Start(HttpRequest request, ResponseHandler* handler) {
  impl_->Start(std::move(request), handler);
}

void HttpClient::Shutdown() { impl_->Shutdown(); }

std::size_t HttpClient::in_flight() const { return impl_->busy.size(); }

std::size_t HttpClient::connections_opened() const { return impl_->connections_opened; }

// -----------------------------------------------------------------------------------------------
// Fetch

namespace {

class CollectingHandler final : public ResponseHandler {
 public:
  explicit CollectingHandler(EventLoop& loop) : loop_(loop) {}
  void OnHeaders(MonoTime, const ResponseHead& head) override { response.head = head; }
  Status OnBody(MonoTime, std::string_view bytes) override {
    response.body.append(bytes);
    return Ok{};
  }
  void OnEnd(MonoTime, TransportEnd end_in, std::string_view detail_in) override {
    end = end_in;
    detail = detail_in;
    loop_.Stop();
  }

  FetchedResponse response;
  TransportEnd end = TransportEnd::kCancelled;
  std::string detail;

 private:
  EventLoop& loop_;
};

ErrorCode ErrorCodeFor(TransportEnd end) {
  switch (end) {
    case TransportEnd::kConnectFailed:
      return ErrorCode::kUnavailable;
    case TransportEnd::kTimeoutConnect:
    case TransportEnd::kTimeoutFirstByte:
    case TransportEnd::kTimeoutIdle:
    case TransportEnd::kTimeoutTotal:
      return ErrorCode::kTimeout;
    case TransportEnd::kCancelled:
      return ErrorCode::kCancelled;
    case TransportEnd::kProtocolError:
    case TransportEnd::kTooLarge:
      return ErrorCode::kProtocol;
    case TransportEnd::kReset:
    case TransportEnd::kHandlerAborted:
    case TransportEnd::kComplete:
      break;
  }
  return ErrorCode::kIo;
}

}  // namespace

Result<FetchedResponse> Fetch(const Endpoint& endpoint, HttpRequest request,
                              const ClientOptions& options) {
  EventLoop loop;
  CollectingHandler handler(loop);
  const std::string what = request.method + " " + endpoint.ToString() +
                           (request.path.empty() || request.path.front() != '/' ? "/" : "") +
                           request.path;
  {
    HttpClient client(loop, endpoint, options);
    client.Start(std::move(request), &handler);
    loop.Run();
  }
  if (handler.end != TransportEnd::kComplete) {
    return MakeError(ErrorCodeFor(handler.end),
                     what + ": " + TransportEndName(handler.end) + ": " + handler.detail);
  }
  FetchedResponse response = std::move(handler.response);
  response.body = RedactSecret(std::move(response.body), options.bearer_token);
  for (auto& [name, value] : response.head.headers) {
    value = RedactSecret(std::move(value), options.bearer_token);
  }
  return response;
}

std::string RedactSecret(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  constexpr std::string_view kRedacted = "[REDACTED]";
  for (std::size_t at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at + kRedacted.size())) {
    text.replace(at, secret.size(), kRedacted);
  }
  // Text cut to a length (error bodies, messages ending in "...") may end inside the secret.
  constexpr std::size_t kShortestTail = 8;
  const std::size_t end = text.ends_with("...") ? text.size() - 3 : text.size();
  for (std::size_t length = std::min(secret.size() - 1, end); length >= kShortestTail; --length) {
    if (std::string_view(text).substr(end - length, length) == secret.substr(0, length)) {
      text.replace(end - length, length, kRedacted);
      break;
    }
  }
  return text;
}

}  // namespace bakeoff::net
