// tests/support/scripted_server.h
//
// Owns: a scripted, misbehaving HTTP/1.1 server for tests, on plain POSIX sockets and threads
// (optionally TLS through OpenSSL). It binds 127.0.0.1 on an ephemeral port; every accepted
// connection reads one request (head + Content-Length body), records it, then plays a script of
// steps: send bytes, sleep, close, reset (RST), hang. When the script ends without closing, the
// connection reads the next request and plays the script again (keep-alive).
//
//   ScriptedServer server({Send(ChunkedHead()), Sleep(50ms), Send(Chunk(SseEvent("hi"))),
//                          Send(LastChunk())});
//   ... connect to server.url() ...
//
// Connection behaviours of real servers, for keep-alive tests:
// - close right after a response without saying so: end the script with Close();
// - `Connection: close` or `Keep-Alive: timeout=T, max=N`: put the header in the head (a
//   Responder can count down max=N with CapturedRequest::index_on_connection and Close() after
//   the last request it allows);
// - close a connection idle for a while (a keep-alive timeout): ServerOptions::idle_close;
// - drop a connection just as a request arrives: a Responder returning {Close()} or {Reset()}
//   after reading the whole request, or ServerOptions::head_action to drop it after its head,
//   before the body is read (the client may still be writing it).
// requests() holds the requests received completely; requests_answered() counts those that got
// at least one response byte, so a test can prove that no request was answered twice.
//
// Does not own: HTTP correctness of what it sends (scripts may send anything, on purpose).
//
// Thread-safety: the public methods may be called from any thread. The destructor stops every
// connection (sleeps and hangs are interrupted, blocked reads and writes are shut down) and
// joins all threads, so a test never outlives its server.
// Timing: Sleep(d) pauses d after the previous step finished, measured on the steady clock;
// wake-ups are typically within 0.1 ms, well inside a 2 ms tolerance. Each Send records the
// steady-clock instant at which its bytes were handed to the kernel (CapturedRequest::sent_at).
// Linking: TLS uses OpenSSL; binaries that use this file link OpenSSL (bakeoff_net does).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace bakeoff::testing {

using SteadyTime = std::chrono::steady_clock::time_point;

// One step of a script.
struct Step {
  enum class Kind { kSend, kSleep, kClose, kReset, kHang };
  Kind kind = Kind::kSend;
  std::string bytes;                    // kSend
  std::chrono::nanoseconds duration{};  // kSleep
};
using Script = std::vector<Step>;

Step Send(std::string bytes);
Step Sleep(std::chrono::nanoseconds duration);
Step Close();  // orderly close (FIN)
Step Reset();  // abortive close: SO_LINGER 0, the client sees a reset
Step Hang();   // do nothing until the server is destroyed (or ServerOptions::hang_limit)

// ---- wire builders ----
using HeaderList = std::vector<std::pair<std::string, std::string>>;
// "HTTP/1.1 <status> <reason>\r\n<headers>\r\n"; add Content-Length or Transfer-Encoding yourself.
std::string HttpHead(int status, const HeaderList& headers = {});
// A head for a chunked body, "text/event-stream" by default, with `extra` headers at the end.
std::string ChunkedHead(int status = 200, std::string_view content_type = "text/event-stream",
                        const HeaderList& extra = {});
// One chunk in chunked transfer coding (RFC 9112 section 7.1). REQUIRES: !data.empty().
std::string Chunk(std::string_view data);
// The last chunk and the end of the chunked body: "0\r\n\r\n".
std::string LastChunk();
// A complete response with Content-Length.
std::string FullResponse(int status, std::string_view body,
                         std::string_view content_type = "application/json");
// One SSE event: "data: <data>\n\n" (each '\n' in data starts a new data line).
std::string SseEvent(std::string_view data);

struct SseScriptOptions {
  std::chrono::nanoseconds first_delay{0};  // after the head, before the first event
  std::chrono::nanoseconds gap{0};          // between events
  bool done_marker = true;                  // end with "data: [DONE]"
  HeaderList head_headers{};                // added to the head (e.g. Connection, Keep-Alive)
};
// A chunked SSE response: head, then one chunk per event with the given delays, then the end.
Script SseScript(const std::vector<std::string>& events, const SseScriptOptions& options = {});

// ---- what the server saw ----
struct CapturedRequest {
  int connection = 0;           // 0-based index of the accepted connection that carried it
  int index_on_connection = 0;  // 0-based: how many requests that connection carried before
  std::string method;
  std::string target;
  HeaderList headers;
  std::string body;
  SteadyTime received_at{};         // the whole request had been read; the script starts
  std::vector<SteadyTime> sent_at;  // one per Send step played for this request
  bool answered = false;            // at least one response byte was handed to the kernel
  std::string_view Header(std::string_view name) const;  // case-insensitive; "" if absent
};

// What to do with a request once its head is read (ServerOptions::head_action).
enum class HeadAction {
  kServe,  // read the body, record the request, play the script
  kClose,  // close at once without reading the body (unread bytes make the kernel send RST)
  kReset,  // abortive close (SO_LINGER 0)
};

struct ServerOptions {
  // Both set: serve TLS with this certificate chain and key (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Non-empty: listen on this Unix-domain socket file (plain HTTP; '/' in the path only needs
  // encoding in url()) instead of a 127.0.0.1 port; the file is removed with the server.
  std::string unix_socket{};
  // false: play the script as soon as a connection is accepted, without reading a request.
  bool read_request = true;
  // Upper bound for Hang() (keeps a broken test bounded).
  std::chrono::nanoseconds hang_limit = std::chrono::seconds(30);
  // Non-zero: a kept-alive connection that waits this long for the next request's first byte
  // after a response is closed (FIN, without a word), as a server's keep-alive timeout does. A new
  // connection's first request is waited for without limit.
  std::chrono::nanoseconds idle_close{0};
  // Null: serve every request. Otherwise called with each request's head (no body yet, `body`
  // empty, `received_at` unset); kClose/kReset drop the connection there. A dropped request is
  // not in requests() but counted by heads_dropped().
  std::function<HeadAction(const CapturedRequest& head)> head_action{};
};

class ScriptedServer {
 public:
  // Chooses the script for each request (e.g. by connection index or path).
  using Responder = std::function<Script(const CapturedRequest&)>;

  explicit ScriptedServer(Script script, ServerOptions options = {});
  explicit ScriptedServer(Responder responder, ServerOptions options = {});
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>" (https when TLS; http+unix:// on a socket file)

  std::vector<CapturedRequest> requests() const;  // received completely, in arrival order
  // Of those, the requests answered with at least one byte. Waits (up to 5 s) for Send steps in
  // progress, so that bytes a client has already received are always counted.
  std::size_t requests_answered() const;
  std::size_t heads_dropped() const;               // dropped by ServerOptions::head_action
  int connections_accepted() const;
  // Waits until at least `count` requests were read; false on timeout.
  bool WaitForRequests(std::size_t count, std::chrono::nanoseconds timeout) const;

 private:
  struct Tls;
  class Io;
  void AcceptLoop();
  void Serve(int fd, int connection);
  // Returns false when the connection must end (closed, reset, hang, write failure).
  bool Play(Io& io, const Script& script, std::size_t request_index);
  bool SleepFor(std::chrono::nanoseconds duration);  // false if stopped
  // Reads the next request into `request`; false when the connection must end.
  bool ReadNext(Io& io, std::string& buffer, CapturedRequest& request);
  void Forget(int fd);

  ServerOptions options_;
  Responder responder_;
  std::unique_ptr<Tls> tls_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread acceptor_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  int accepted_ = 0;
  std::size_t heads_dropped_ = 0;
  int sends_in_progress_ = 0;
  std::set<int> live_fds_;
  std::vector<std::thread> workers_;
  std::vector<CapturedRequest> requests_;
};

// A loopback TCP port that was free a moment ago: bound by the kernel's choice, then closed, never
// listened on, so connecting to it is refused until something else takes it.
std::uint16_t UnusedLoopbackPort();

// http://127.0.0.1:`port`
std::string LoopbackUrl(std::uint16_t port);

// A self-signed certificate (by default for 127.0.0.1 and localhost), made with the openssl
// command line tool in a fresh directory under `dir`. `subject_alt_names` is openssl's
// subjectAltName syntax. Fails the current test (and returns empty paths) on error. The directory
// is removed when the last copy of the certificate goes.
struct TestCertificate {
  std::string cert_file;
  std::string key_file;
  std::shared_ptr<void> directory_remover;
};
TestCertificate MakeSelfSignedCertificate(
    const std::string& dir, const std::string& subject_alt_names = "IP:127.0.0.1,DNS:localhost");

}  // namespace bakeoff::testing
