// net/http_server.h
//
// Owns: the server side of HTTP/1.1 on Boost.Beast, for servers whose responses are written as
// raw bytes (bakeoff emulate): a listener on a TCP address or a Unix-domain socket file that
// accepts (backing off after accept errors), keeps the open connections and sweeps their
// deadlines; and a connection that reads, parses and writes.
// - Reads use "wait until readable, then read what is there" (async_wait + non-blocking
//   read_some into a flat_buffer), so an idle or streaming connection holds no read buffer and a
//   client that goes away is noticed while its response is still being produced. Requests are
//   parsed incrementally (Beast's parser put()), which also sees pipelined requests; while a
//   response is in progress at most kMaxPipelinedBytes more are read.
// - Deadlines: a keep-alive connection with no request bytes for ServerLimits::idle_timeout is
//   closed, and so is a request whose headers and body have not all arrived within
//   request_timeout of its first byte (slowloris).
// - Writes are gathered (head, chunk-size line, data, CRLF, last-chunk) so body bytes are never
//   copied to frame them. A response is either whole (a content-length) or streamed: chunked
//   (RFC 9112 7.1) for HTTP/1.1, delimited by the close for HTTP/1.0. Everything appended to
//   data() between two writes leaves as one chunk.
// - After a response sent with `connection: close`, the connection half-closes and lingers for
//   the peer's FIN, so unread request bytes cannot turn the close into a reset that destroys the
//   response in flight.
// Does not own: what a request means or what is answered (a subclass's OnRequest), nor any
// header a particular server adds to every response (passed as `extra_headers`).
//
// Threading: everything runs on one io_context's thread; nothing is locked, except in
// WriteFanout (below), whose helpers send while that thread waits for them.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "core/clock.h"
#include "core/result.h"
#include "net/socket_batch.h"

namespace bakeoff::net {

struct ServerLimits {
  Nanos idle_timeout = std::chrono::seconds(60);
  Nanos request_timeout = std::chrono::seconds(10);
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = 32 * 1024 * 1024;
};

// The Date header line every origin server with a clock sends (RFC 9110 6.6.1), in IMF-fixdate,
// with its CRLF; formatted once a second per thread.
const std::string& DateHeaderLine();
// The reason phrase of an HTTP status ("Not Found"); "Unknown" for one this server never sends.
const char* ReasonPhrase(int status);

class HttpListener;

// An accepted TCP or Unix-domain stream socket.
using StreamSocket = boost::asio::generic::stream_protocol::socket;

// One accepted socket, serving its requests one at a time. A subclass answers them: OnRequest is
// called with each parsed request, and the answer is given with SendWhole(), or with StreamHead()
// then data() and Flush() as often as needed, then EndResponse().
class HttpServerConnection : public std::enable_shared_from_this<HttpServerConnection> {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  HttpServerConnection(StreamSocket socket, const ServerLimits& limits);
  virtual ~HttpServerConnection() = default;
  HttpServerConnection(const HttpServerConnection&) = delete;
  HttpServerConnection& operator=(const HttpServerConnection&) = delete;

  void Start();
  // Until the next WriteFanout::FlushAll given this connection, Flush() (SendWhole's included)
  // leaves the pending bytes where they are: for bytes prepared ahead of the instant they may go.
  void HoldWrites() { writes_held_ = true; }
  // Idempotent. Runs OnClose(), closes the socket and leaves the listener. With `reset`, the
  // close sends a TCP RST instead of a FIN (a crashed process); a Unix socket's peer sees a reset
  // only if it had sent bytes not yet read, an end of stream otherwise.
  void Close(bool reset = false);
  // Closes the connection when its read or linger deadline has passed.
  void CheckDeadline(MonoTime now);

 protected:
  // A whole request arrived; the subclass must answer it (at once or later).
  virtual void OnRequest(Request& request) = 0;
  // A request could not be parsed (`status`: 400, 413 or 431); the subclass must answer it with
  // SendWhole (the connection closes after it).
  virtual void OnMalformedRequest(int status, const std::string& message) = 0;
  // Before the socket closes (the client went away, a deadline, or Close()).
  virtual void OnClose() {}
  // A write of stream data finished and the response is not over: by default, what was
  // appended meanwhile is written.
  virtual void OnDataWritten() { Flush(); }
  // The response's last byte was written; the connection then reads the next request or, without
  // keep-alive, lingers and closes.
  virtual void OnResponseWritten() {}

  bool responding() const { return state_ == State::kResponding; }
  bool closed() const { return state_ == State::kClosed; }
  bool keep_alive() const { return keep_alive_; }
  void set_keep_alive(bool keep_alive) { keep_alive_ = keep_alive; }
  // Whether a write is in progress with the response's last bytes (nothing more may be added).
  bool writing_end() const { return writing_final_; }
  // Whether the response's last bytes are queued or being written.
  bool response_ending() const { return response_queued_ || writing_final_; }
  // Writes that carried stream data so far (a subclass tells from it whether a stream was quiet).
  std::uint64_t data_writes() const { return data_writes_; }
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }

  // A whole response with a content-length; ends the current response. `extra_headers`: whole
  // header lines, each ending in CRLF.
  void SendWhole(int status, std::string_view content_type, std::string_view body,
                 std::string_view extra_headers = {});
  // The status line and headers of a 200 stream of `content_type`: chunked for HTTP/1.1; for
  // HTTP/1.0 the body ends with the connection (keep-alive is dropped).
  void StreamHead(std::string_view content_type, std::string_view extra_headers = {});
  // Stream body bytes not yet written; each write sends what is here as one chunk.
  std::string& data() { return pending_data_; }
  // The stream's last bytes are in data(): they are written, then the response ends.
  void EndResponse() { response_queued_ = true; }
  // Writes what is pending unless a write is in progress (OnDataWritten follows it) or writes
  // are held.
  void Flush();

 private:
  friend class HttpListener;
  friend class WriteFanout;
  enum class State : std::uint8_t { kReading, kResponding, kLingering, kClosed };

  void EnterReading();
  void DoRead();
  void OnReadable(boost::system::error_code ec);
  void ParseBuffered();
  // Moves the pending bytes into the write buffers; false when there is nothing to write or a
  // write is in progress.
  bool PrepareWrite();
  void StartAsyncWrite();
  // WriteFanout's part: the prepared buffers as one message, sent (SocketBatchSender) from any
  // thread while the I/O thread waits; then, back on the I/O thread, the send's result (bytes or
  // -errno) is taken and what is left goes as an ordinary write.
  SendSlot PreparedSend();
  void CompleteSend(long result);
  void OnWrite(boost::system::error_code ec);
  void FinishResponse();

  StreamSocket socket_;
  const ServerLimits& limits_;
  std::function<void(HttpServerConnection*)> on_closed_;  // set by the listener
  State state_ = State::kReading;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool reading_ = false;
  bool writing_ = false;
  bool writes_held_ = false;
  bool request_started_ = false;
  MonoTime deadline_;
  // The response in progress.
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool whole_response_ = false;   // a content-length response: no chunk framing
  bool response_queued_ = false;  // the response's last bytes are in pending_*
  bool writing_final_ = false;
  std::uint64_t data_writes_ = 0;
  std::string pending_head_;  // raw bytes (status line and headers, or a whole response)
  std::string pending_data_;  // stream body bytes, framed as one chunk when written
  std::string writing_head_;
  std::string writing_data_;
  std::array<char, 20> chunk_line_{};
  std::array<boost::asio::const_buffer, 5> write_buffers_;  // the write in flight references these
  std::size_t write_buffer_count_ = 0;
  std::array<iovec, std::tuple_size_v<decltype(write_buffers_)>> send_iov_{};  // PreparedSend's message
  msghdr send_message_{};
};

// Writes many connections' pending bytes at once: an engine step hands its tokens to every
// stream together, and on loopback each socket write also runs the receiver's TCP receive path
// on the writing core (4-6 us a write on a 2-core VM, 2 us more for the system call), so one
// thread needs 6-8 ms to hand a step out to 1,024 streams. The sends go in io_uring batches where
// the kernel allows (SocketBatchSender, unless `io_uring` is false), one system call for up to
// 256 of them. With `threads` > 1 and at least kMinConnections to write, the calling (I/O)
// thread and threads - 1 helpers each send a share. A send never blocks: what a full socket
// buffer did not take is then written the ordinary way on the I/O thread, and each write's
// completion runs there as Flush()'s would. For one connection it is Flush().
// Threading: FlushAll is called on the I/O thread. It waits for the helpers that took part in
// the hand-out before it returns (not for one not yet awake, which then skips it), so nothing else
// touches the connections meanwhile.
class WriteFanout {
 public:
  static constexpr std::size_t kMinConnections = 64;

  explicit WriteFanout(int threads, bool io_uring = true);
  ~WriteFanout();
  WriteFanout(const WriteFanout&) = delete;
  WriteFanout& operator=(const WriteFanout&) = delete;

  // Releases each connection's held writes (HoldWrites) and writes what it has pending.
  // True when the write threads shared the hand-out; false when the I/O thread sent it alone.
  bool FlushAll(std::span<const std::shared_ptr<HttpServerConnection>> connections);

  // Opens the I/O thread's sender (its io_uring ring) on the calling thread, which must be the
  // I/O thread (SocketBatchSender says why); the first FlushAll does it otherwise.
  void Open() { sender_.Open(); }
  // The I/O thread's sender: after Open, whether its sends go in io_uring batches, and if not why.
  const SocketBatchSender& sender() const { return sender_; }

 private:
  void HelperLoop();
  void SendShare(SocketBatchSender& sender);

  const bool io_uring_;
  SocketBatchSender sender_;
  std::vector<std::thread> helpers_;
  std::vector<HttpServerConnection*> batch_;
  std::vector<SendSlot> slots_;  // batch_'s sends, index for index
  std::atomic<std::size_t> next_{0};
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;  // hand-outs so far
  bool open_ = false;             // the current hand-out takes helpers
  std::size_t helpers_sending_ = 0;
  bool stopping_ = false;
};

// Accepts connections on one address or socket file and keeps them until they close.
class HttpListener {
 public:
  using Factory = std::function<std::shared_ptr<HttpServerConnection>(StreamSocket)>;

  // `limits` outlives the listener; `on_count` (may be empty) is told the number of open
  // connections whenever it changes.
  HttpListener(boost::asio::io_context& io, const ServerLimits& limits, Factory factory,
               std::function<void(std::size_t)> on_count = {});

  // Binds and listens ("localhost" means 127.0.0.1; any other host must be an IP address), then
  // accepts and sweeps deadlines on the io_context's thread. Port 0: an ephemeral one (port()).
  Status Listen(const std::string& host, std::uint16_t port);
  // Binds a Unix-domain stream socket at `path` and listens, as Listen does. A socket file left
  // there by a server that is gone (connecting is refused) is replaced; a live one or any other
  // file is an error. The file is removed when the listener stops accepting.
  Status ListenUnix(const std::string& path);
  std::uint16_t port() const { return port_; }  // 0 on a Unix socket
  // No more connections are accepted; the open ones stay.
  void StopAccepting();
  // StopAccepting, and the deadline sweep ends (the open connections stay until closed).
  void Stop();
  std::vector<std::shared_ptr<HttpServerConnection>> Connections() const;

 private:
  void DoAccept();
  void ArmSweep();
  void Remove(HttpServerConnection* connection);

  boost::asio::io_context& io_;
  const ServerLimits& limits_;
  Factory factory_;
  std::function<void(std::size_t)> on_count_;
  // Starts accepting on the bound and listening acceptor.
  void BeginAccepting();

  boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol> acceptor_;
  boost::asio::steady_timer accept_retry_timer_;
  boost::asio::steady_timer sweep_timer_;
  std::uint16_t port_ = 0;
  std::string unix_path_;  // the socket file this listener created; removed when it stops
  bool accepting_ = false;
  bool sweeping_ = false;
  std::unordered_map<HttpServerConnection*, std::shared_ptr<HttpServerConnection>> connections_;
};

}  // namespace bakeoff::net
