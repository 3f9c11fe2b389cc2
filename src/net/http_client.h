// net/http_client.h
//
// Owns: an asynchronous HTTP/1.1 client (RFC 9112) over TCP, TLS or a Unix-domain stream socket
// on one EventLoop: keep-alive
// connection reuse (honouring `Connection: close` and the server's `Keep-Alive: timeout, max`),
// one retry of a request that a stale kept-alive connection lost before any response byte, one
// connection per in-flight request, chunked transfer decoding, per-request deadlines, size limits,
// client-side cancellation at a chosen instant, and the FaultPlan seam.
// TLS verifies certificates by default (OpenSSL, system trust store or a given CA file).
// The bearer token is sent as `Authorization: Bearer ...` and never logged or echoed in errors.
// Does not own: SSE/NDJSON framing (net/sse.h, net/ndjson.h) or what the body means (dialect/).
//
// Thread-safety: an HttpClient belongs to one EventLoop; call it only on that loop's thread.
// Units: deadlines are Nanos; sizes are bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "net/event_loop.h"
#include "net/fault_plan.h"

namespace bakeoff::net {

// Where requests go: scheme, host, port and a base path prefix ("" or "/prefix"), or a Unix-domain
// socket's path instead of the host and port.
struct Endpoint {
  bool tls = false;
  std::string host;         // name or literal address; IPv6 without brackets
  std::string port;         // "80"/"443" when the URL has none
  std::string base_path;    // no trailing '/'
  std::string unix_socket;  // non-empty: connect to this socket file; host is then "localhost"

  // "http://host:port/base", or "http+unix://%2Frun%2Fengine.sock/base" for a Unix socket.
  std::string ToString() const;
  // Where connections go, for messages: "host:port", or "unix:/run/engine.sock".
  std::string Where() const;
};

// The longest Unix socket path Linux takes (sockaddr_un's 108 bytes, less the terminating NUL).
inline constexpr std::size_t kMaxUnixSocketPath = 107;

// Parses "http://host[:port][/base]" or "https://...". IPv6 hosts in brackets.
// "http+unix://SOCKET[/base]" names a Unix-domain socket (as vLLM's `--uds` serves): SOCKET is
// the socket file's path percent-encoded, '/' as %2F ("http+unix://%2Frun%2Fengine.sock/v1");
// requests then carry `Host: localhost`.
Result<Endpoint> ParseEndpoint(std::string_view url);

struct Deadlines {
  Nanos connect = std::chrono::seconds(10);     // resolve + TCP connect + TLS handshake
  Nanos first_byte = std::chrono::seconds(120);  // request written -> response headers complete
  // Longest time without progress while writing the request (the server stopped reading) or
  // between two reads of the body.
  Nanos idle = std::chrono::seconds(60);
  Nanos total = std::chrono::seconds(1800);      // request start -> end of body
};

struct Limits {
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_body_bytes = 256 * 1024 * 1024;  // a 32k-token answer as SSE is ~10 MiB
};

struct ClientOptions {
  Deadlines deadlines;
  Limits limits;
  bool verify_tls = true;
  std::string ca_file;       // empty: the system trust store
  std::string bearer_token;  // empty: no Authorization header. Never printed.
  std::string user_agent = std::string("bakeoff/") + BAKEOFF_VERSION;
  FaultPlan* faults = nullptr;  // not owned; null: no injected faults
};

struct HttpRequest {
  std::string method = "POST";
  std::string path;  // appended to Endpoint::base_path, e.g. "/v1/completions"
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<MonoTime> cancel_at;  // the client abandons the request at this instant
};

struct ResponseHead {
  int status = 0;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;  // as received, in order
  std::string_view Header(std::string_view name) const;      // case-insensitive; "" if absent
};

// How the transport ended a request. Exactly one per request.
enum class TransportEnd {
  kComplete,          // full response received (any status)
  kConnectFailed,     // resolve, connect or TLS handshake failed
  kReset,             // peer closed or reset before the response was complete
  kTimeoutConnect,
  kTimeoutFirstByte,
  kTimeoutIdle,
  kTimeoutTotal,
  kCancelled,         // cancel_at reached, or the client was shut down
  kProtocolError,     // not valid HTTP/1.1 (garbage bytes, bad chunk framing)
  kTooLarge,          // header or body over its limit
  kHandlerAborted,    // ResponseHandler::OnBody returned an error
};
const char* TransportEndName(TransportEnd end);

// Receives one request's events, all on the loop thread, in this order:
//   OnConnected? OnRequestWritten? [OnStaleConnectionRetry OnConnected? OnRequestWritten?]
//   OnHeaders? OnBody* OnEnd (always, exactly once, last).
// OnConnected runs inside Start() when a pooled connection is reused; OnEnd never runs inside
// Start(). The handler may be destroyed in OnEnd; the client does not touch it afterwards.
// Callbacks may call Start() and Shutdown() on the same client, but must not destroy it.
//
// Stale-connection retry: a server may close a kept-alive connection (its idle timeout, or right
// after a response) while our request is already on its way; the close arrives after the pool's
// check, and the request fails without a single response byte. Such a request is sent again,
// once, on a new connection, and the handler hears OnStaleConnectionRetry before that
// connection's OnConnected(at, false). Only when all of these hold: the failed attempt ran on a
// *reused* connection; it ended by EOF, reset or broken pipe (a write or read error, or an
// injected FaultPlan fault) before any response byte was read. Never after a response byte,
// never from a new connection, hence never twice; a failure of the retry is the request's end.
// The request keeps its start instant, total deadline and cancel_at; connect, first-byte and idle
// deadlines run afresh on the new connection. Note that a server may have received the first
// attempt completely (it closed without answering); such a request reaches it twice.
class ResponseHandler {
 public:
  virtual ~ResponseHandler() = default;
  virtual void OnConnected(MonoTime /*at*/, bool /*reused*/) {}
  virtual void OnRequestWritten(MonoTime /*at*/) {}
  // The request is being sent again on a new connection; `reason` says how the reused one failed.
  virtual void OnStaleConnectionRetry(MonoTime /*at*/, std::string_view /*reason*/) {}
  virtual void OnHeaders(MonoTime at, const ResponseHead& head) = 0;
  // One piece of the de-chunked body, as read. An error aborts the request (kHandlerAborted).
  virtual Status OnBody(MonoTime at, std::string_view bytes) = 0;
  virtual void OnEnd(MonoTime at, TransportEnd end, std::string_view detail) = 0;
};

class HttpClient {
 public:
  HttpClient(EventLoop& loop, Endpoint endpoint, ClientOptions options,
             const Clock& clock = RealClock());
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request` now, reusing an idle keep-alive connection or opening a new one. A pooled
  // connection is discarded instead of reused when the server has closed it or sent unsolicited
  // bytes, or when its idle time has reached the server's announced keep-alive timeout less a
  // safety margin. A connection is never pooled after a response that said `Connection: close`
  // (or was HTTP/1.0 without keep-alive) or that used up the server's announced request count.
  // `Keep-Alive: timeout=T, max=N` (the de-facto header of RFC 2068 section 19.7.1.1, which
  // Apache, nginx and cpp-httplib send) is read as follows: T seconds is the server's idle
  // timeout; the connection is reused only while idle for less than T - min(1 s, T/4). N is the
  // number of further requests the connection may carry after this response (Apache's count:
  // its last keep-alive response says max=1, the one after it `Connection: close`); max=0 means
  // none, and the connection is closed. A header that lacks either parameter leaves the earlier
  // announcement of that parameter in force; the count is decremented with every reuse.
  // Deadlines run on the steady clock; the Clock given to the constructor stamps the callbacks.
  // REQUIRES: on the loop thread; `handler` outlives the request (until its OnEnd); the
  // EventLoop outlives this client.
  void Start(HttpRequest request, ResponseHandler* handler);

  // Cancels every in-flight request (each ends kCancelled, synchronously, before this returns)
  // and closes idle connections. Requests started from those OnEnd calls are not cancelled.
  // The destructor does the same.
  void Shutdown();

  std::size_t in_flight() const;
  std::size_t connections_opened() const;  // new connections attempted (not reuses), retries too

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A whole response, for control calls (models, tokenize, health) that are not measured.
struct FetchedResponse {
  ResponseHead head;
  std::string body;
};

// Blocking request on a private event loop. Errors name the endpoint and path. The bearer token
// is redacted from the body and headers returned (a server may echo it in an error).
Result<FetchedResponse> Fetch(const Endpoint& endpoint, HttpRequest request,
                              const ClientOptions& options);

// `text` with every occurrence of `secret` replaced by "[REDACTED]", and so is a start of the
// secret (8 bytes or more) at the very end of the text or before a final "...", where text cut
// to a length may stop inside it; unchanged when `secret` is empty. For any response text that is
// recorded or printed, since servers echo credentials.
std::string RedactSecret(std::string text, std::string_view secret);

}  // namespace bakeoff::net
