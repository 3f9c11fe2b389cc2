// net/http_client_internal.h (internal to net/http_client*.cc)
//
// Owns: the declarations the HTTP client's translation units share: ClientState (everything one
// client's connections share: endpoint, options, resolved addresses, TLS context, the pool),
// Connection (one connection's state machine and the request it carries), ResponseParser (the
// Beast parser that feeds a Connection), and the few helpers more than one of them uses. The
// implementation is a pool of keep-alive connections, each a small state machine driven by Asio
// callbacks (connect -> [TLS handshake] -> write -> read headers -> read body), a Beast
// basic_parser subclass that hands de-chunked body bytes straight to the handler (no body copy),
// and one lazily re-armed deadline timer per connection. Its members are defined by job:
//   http_client.cc            HttpClient's public methods, and ClientState's construction (the
//                             endpoint's address or socket file, the TLS context, the headers
//                             every request carries)
//   http_client_connect.cc    connection establishment: resolve, TCP or Unix-domain connect, the
//                             TLS handshake (SNI, certificate and host verification)
//   http_client_pool.cc       the pool and a request's life on a connection: start, end, reuse
//                             checks, the Keep-Alive announcement, the stale-connection retry,
//                             Shutdown
//   http_client_write.cc      request writing: the serialized head, writing head and body
//   http_client_response.cc   response reading and parsing: status line, headers, chunked,
//                             content-length and until-close bodies, interim responses, limits,
//                             how a failed read or parse ends the request
//   http_client_deadlines.cc  deadlines: the lazily re-armed timer and what each timeout says
//   http_client_fetch.cc      Fetch and RedactSecret (no Asio: they use only the public API)
// The FaultPlan seam is Connection::FaultFires (below), which each job consults before the I/O
// operation it starts (resolve, connect, TLS handshake, write, read).
// Contract: net/http_client.h.
//
// Carries Boost (Asio, Beast): only the client's own translation units include it
// (tests/unit/core/layering_test.cc).
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
//
// Thread-safety: as net/http_client.h says: all of it runs on the client's EventLoop thread.
#pragma once

#include <utility>  // Before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>

#include "core/clock.h"
#include "net/event_loop.h"
#include "net/fault_plan.h"
#include "net/http_client.h"

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

// A plain connection's reads start at a page (a stream's events are small, and ten thousand
// streams each hold their buffer) and double while a read fills them, up to 64 KiB. Each
// connection reads into its own buffer because Asio's reads then need no readiness wait: a
// socket the last read drained is waited on without an epoll_ctl call, which a wait_read costs
// on every wait.
constexpr std::size_t kFirstPlainReadBytes = 4 * 1024;
constexpr std::size_t kPlainReadBytes = 64 * 1024;
constexpr std::size_t kTlsReadBytes = 16 * 1024;  // one TLS record

// On the per-request path of more than one translation unit (the pool's, the deadlines'): inline,
// so that a call across files costs that path nothing.
inline MonoTime AddSaturating(MonoTime at, Nanos d) {
  if (d > MonoTime::max() - at) return MonoTime::max();
  return at + d;
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
  // The FaultPlan seam: true if the injected plan fails the I/O operation about to start.
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

  // http_client_connect.cc
  void Connect();
  void Resolve();
  void ConnectSocket();
  void OnSocketConnected(const error_code& ec);
  void OnHandshake(const error_code& ec);
  void OnConnectionReady();

  // http_client_write.cc
  void Write();
  void OnWritten(const error_code& ec, std::size_t bytes);

  // http_client_response.cc
  void Read();
  void OnData(const error_code& ec, const char* data, std::size_t size);
  void Consume(const char* data, std::size_t size);
  void OnEof();
  void FailIo(const error_code& ec, const char* doing);
  void FailParse(const error_code& ec);
  void ResetParser();

  // http_client_deadlines.cc
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
  std::vector<char> read_buffer_;  // the pending read's; kept while pooled
  bool last_read_filled_ = false;
  std::string handler_error_;
  std::uint64_t body_bytes_ = 0;
};

}  // namespace http_internal
}  // namespace bakeoff::net
