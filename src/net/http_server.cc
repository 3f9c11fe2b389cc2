// net/http_server.cc: HTTP/1.1 listener and server connection (contract in http_server.h).
#include "net/http_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <span>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <fmt/format.h>

namespace bakeoff::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// Bytes read per read_some call.
constexpr std::size_t kReadChunkBytes = 4096;
// While a response is in progress, stop reading once a client has pipelined this much.
constexpr std::size_t kMaxPipelinedBytes = 64 * 1024;
// After a response with `connection: close`, how long to wait for the peer's FIN.
constexpr Nanos kLingerTime = std::chrono::seconds(2);
// Retry delay after accept() fails (e.g. out of file descriptors).
constexpr Nanos kAcceptRetry = std::chrono::milliseconds(50);
// Write buffers larger than this are released after their response (a long stream's burst).
constexpr std::size_t kKeptBufferBytes = 128 * 1024;

MonoTime Now() { return std::chrono::steady_clock::now(); }

}  // namespace

const std::string& DateHeaderLine() {
  thread_local std::time_t formatted_second = -1;
  thread_local std::string line;
  // The precise clock, as a server's time of day is: time() reads a coarse one that turns its
  // second up to a tick late.
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  if (now != formatted_second) {
    std::tm utc{};
    gmtime_r(&now, &utc);
    static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    line = fmt::format("date: {}, {:02d} {} {:04d} {:02d}:{:02d}:{:02d} GMT\r\n", kDays[utc.tm_wday], utc.tm_mday,
                       kMonths[utc.tm_mon], utc.tm_year + 1900, utc.tm_hour, utc.tm_min, utc.tm_sec);
    formatted_second = now;
  }
  return line;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

// --- HttpServerConnection ---

HttpServerConnection::HttpServerConnection(StreamSocket socket, const ServerLimits& limits)
    : socket_(std::move(socket)), limits_(limits) {}

void HttpServerConnection::Start() {
  beast::error_code ec;
  socket_.non_blocking(true, ec);
  socket_.set_option(tcp::no_delay(true), ec);  // fails, harmlessly, on a Unix socket
  EnterReading();
  DoRead();
}

void HttpServerConnection::Close(bool reset) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  OnClose();
  beast::error_code ec;
  if (reset) socket_.set_option(asio::socket_base::linger(true, 0), ec);
  socket_.close(ec);
  if (on_closed_) on_closed_(this);
}

void HttpServerConnection::CheckDeadline(MonoTime now) {
  if ((state_ == State::kReading || state_ == State::kLingering) && now >= deadline_) Close();
}

void HttpServerConnection::EnterReading() {
  state_ = State::kReading;
  request_started_ = false;
  deadline_ = Now() + limits_.idle_timeout;
}

void HttpServerConnection::DoRead() {
  if (reading_ || state_ == State::kClosed) return;
  if (state_ == State::kResponding && buffer_.size() >= kMaxPipelinedBytes) return;
  reading_ = true;
  socket_.async_wait(StreamSocket::wait_read,
                     [self = shared_from_this()](beast::error_code ec) { self->OnReadable(ec); });
}

void HttpServerConnection::OnReadable(beast::error_code ec) {
  reading_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    Close();
    return;
  }
  for (;;) {
    beast::error_code read_ec;
    std::size_t n = socket_.read_some(buffer_.prepare(kReadChunkBytes), read_ec);
    if (read_ec == asio::error::would_block || read_ec == asio::error::try_again) break;
    if (read_ec) {  // EOF or reset: the client is gone
      Close();
      return;
    }
    buffer_.commit(n);
    if (n < kReadChunkBytes) break;
    if (state_ != State::kReading && buffer_.size() >= kMaxPipelinedBytes) break;
    if (state_ == State::kReading && parser_ && buffer_.size() >= kReadChunkBytes * 4) {
      ParseBuffered();  // let the parser take body bytes before reading more
      if (state_ != State::kReading) break;
    }
  }
  if (state_ == State::kLingering) {
    buffer_.consume(buffer_.size());
  } else if (state_ == State::kReading) {
    ParseBuffered();
  }
  DoRead();
}

void HttpServerConnection::ParseBuffered() {
  while (state_ == State::kReading && buffer_.size() > 0) {
    if (!request_started_) {
      request_started_ = true;
      deadline_ = Now() + limits_.request_timeout;
    }
    if (!parser_) {
      parser_.emplace();
      parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
      parser_->body_limit(limits_.max_body_bytes);
      parser_->eager(true);
    }
    beast::error_code ec;
    std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) {
      int status = 400;
      if (ec == http::error::body_limit) status = 413;
      if (ec == http::error::header_limit) status = 431;
      parser_.reset();
      keep_alive_ = false;
      chunked_ = true;
      state_ = State::kResponding;
      OnMalformedRequest(status, fmt::format("malformed HTTP request: {}", ec.message()));
      return;
    }
    if (parser_->is_done()) {
      Request request = parser_->release();
      parser_.reset();
      state_ = State::kResponding;
      keep_alive_ = request.keep_alive();
      chunked_ = request.version() >= 11;
      if (buffer_.size() == 0) buffer_.shrink_to_fit();  // hold no read memory while streaming
      OnRequest(request);
    } else if (used == 0) {
      break;
    }
  }
}

void HttpServerConnection::SendWhole(int status, std::string_view content_type, std::string_view body,
                                     std::string_view extra_headers) {
  fmt::format_to(std::back_inserter(pending_head_),
                 "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n{}{}{}\r\n", status,
                 ReasonPhrase(status), content_type, body.size(), DateHeaderLine(), extra_headers,
                 keep_alive_ ? "" : "connection: close\r\n");
  pending_head_ += body;
  whole_response_ = true;
  response_queued_ = true;
  Flush();
}

void HttpServerConnection::StreamHead(std::string_view content_type, std::string_view extra_headers) {
  fmt::format_to(std::back_inserter(pending_head_), "HTTP/1.1 200 OK\r\ncontent-type: {}\r\n", content_type);
  pending_head_ += DateHeaderLine();
  pending_head_ += extra_headers;
  if (chunked_) {
    pending_head_ += "transfer-encoding: chunked\r\n";
  } else {
    keep_alive_ = false;  // HTTP/1.0: the body ends when the connection closes
  }
  if (!keep_alive_) pending_head_ += "connection: close\r\n";
  pending_head_ += "\r\n";
}

void HttpServerConnection::Flush() {
  if (!writes_held_ && PrepareWrite()) StartAsyncWrite();
}

bool HttpServerConnection::PrepareWrite() {
  if (writing_ || state_ == State::kClosed) return false;
  if (pending_head_.empty() && pending_data_.empty() && !response_queued_) return false;
  if (!pending_data_.empty()) ++data_writes_;
  std::swap(pending_head_, writing_head_);
  std::swap(pending_data_, writing_data_);
  pending_head_.clear();
  pending_data_.clear();
  writing_final_ = response_queued_;
  response_queued_ = false;
  std::array<asio::const_buffer, 5>& buffers = write_buffers_;
  std::size_t count = 0;
  buffers[count++] = asio::buffer(writing_head_);
  const bool framed = chunked_ && !whole_response_;
  if (!writing_data_.empty()) {
    if (framed) {
      auto end = fmt::format_to_n(chunk_line_.data(), chunk_line_.size(), "{:x}\r\n", writing_data_.size());
      buffers[count++] = asio::buffer(chunk_line_.data(), end.size);
    }
    buffers[count++] = asio::buffer(writing_data_);
    if (framed) buffers[count++] = asio::buffer("\r\n", 2);
  }
  if (writing_final_ && framed) buffers[count++] = asio::buffer("0\r\n\r\n", 5);
  write_buffer_count_ = count;
  writing_ = true;
  return true;
}

void HttpServerConnection::StartAsyncWrite() {
  asio::async_write(socket_, std::span(write_buffers_.data(), write_buffer_count_),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnWrite(ec); });
}

SendSlot HttpServerConnection::PreparedSend() {
  for (std::size_t i = 0; i < write_buffer_count_; ++i) {
    send_iov_[i] = {const_cast<void*>(write_buffers_[i].data()), write_buffers_[i].size()};
  }
  send_message_ = {};
  send_message_.msg_iov = send_iov_.data();
  send_message_.msg_iovlen = write_buffer_count_;
  return {socket_.native_handle(), &send_message_};
}

void HttpServerConnection::CompleteSend(long result) {
  auto complete = [this](beast::error_code ec) {
    asio::post(socket_.get_executor(), [self = shared_from_this(), ec] { self->OnWrite(ec); });
  };
  if (result < 0 && result != -EAGAIN && result != -EWOULDBLOCK && result != -EINTR) {
    return complete(beast::error_code(static_cast<int>(-result), boost::system::system_category()));
  }
  // Drop what left from the front; the rest (the socket's buffer was full) goes as usual.
  std::size_t sent = result < 0 ? 0 : static_cast<std::size_t>(result);
  std::size_t first = 0;
  while (first < write_buffer_count_ && sent >= write_buffers_[first].size()) {
    sent -= write_buffers_[first].size();
    ++first;
  }
  if (first == write_buffer_count_) return complete({});
  write_buffers_[first] += sent;
  std::copy(write_buffers_.begin() + static_cast<std::ptrdiff_t>(first),
            write_buffers_.begin() + static_cast<std::ptrdiff_t>(write_buffer_count_), write_buffers_.begin());
  write_buffer_count_ -= first;
  StartAsyncWrite();
}

void HttpServerConnection::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    Close();
    return;
  }
  if (writing_final_) return FinishResponse();
  OnDataWritten();
}

void HttpServerConnection::FinishResponse() {
  writing_final_ = false;
  whole_response_ = false;
  if (writing_data_.capacity() > kKeptBufferBytes) std::string().swap(writing_data_);
  if (pending_data_.capacity() > kKeptBufferBytes) std::string().swap(pending_data_);
  OnResponseWritten();
  if (state_ == State::kClosed) return;  // the subclass closed it (a shutdown that just completed)
  if (!keep_alive_) {
    beast::error_code ignored;
    socket_.shutdown(StreamSocket::shutdown_send, ignored);
    state_ = State::kLingering;
    deadline_ = Now() + kLingerTime;
    DoRead();
    return;
  }
  EnterReading();
  ParseBuffered();  // pipelined requests
  DoRead();
}

// --- WriteFanout ---

WriteFanout::WriteFanout(int threads, bool io_uring) : io_uring_(io_uring), sender_(io_uring) {
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { HelperLoop(); });
}

WriteFanout::~WriteFanout() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

bool WriteFanout::FlushAll(std::span<const std::shared_ptr<HttpServerConnection>> connections) {
  for (const auto& connection : connections) connection->writes_held_ = false;
  if (connections.size() < 2) {
    for (const auto& connection : connections) connection->Flush();
    return false;
  }
  batch_.clear();
  slots_.clear();
  for (const auto& connection : connections) {
    if (!connection->PrepareWrite()) continue;
    batch_.push_back(connection.get());
    slots_.push_back(connection->PreparedSend());
  }
  const bool shared = !helpers_.empty() && batch_.size() >= kMinConnections;
  if (shared) {
    {
      std::lock_guard lock(mutex_);
      next_.store(0, std::memory_order_relaxed);
      ++generation_;
      open_ = true;
    }
    start_.notify_all();
    SendShare(sender_);
    // Every share is taken; wait for the helpers still sending theirs, not for those not yet
    // awake (a busy core may not run them for milliseconds): they skip this hand-out.
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return helpers_sending_ == 0; });
    open_ = false;
  } else {
    sender_.Send(slots_);
  }
  for (std::size_t i = 0; i < batch_.size(); ++i) batch_[i]->CompleteSend(slots_[i].result);
  return shared;
}

void WriteFanout::HelperLoop() {
  SocketBatchSender sender(io_uring_);
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || (open_ && generation_ != seen); });
      if (stopping_) return;
      seen = generation_;
      ++helpers_sending_;
    }
    SendShare(sender);
    std::lock_guard lock(mutex_);
    if (--helpers_sending_ == 0) done_.notify_one();
  }
}

void WriteFanout::SendShare(SocketBatchSender& sender) {
  // Shares taken in turn, so a thread that wakes late takes less.
  constexpr std::size_t kShare = 16;
  for (;;) {
    const std::size_t first = next_.fetch_add(kShare, std::memory_order_relaxed);
    if (first >= slots_.size()) return;
    sender.Send(std::span(slots_).subspan(first, std::min(kShare, slots_.size() - first)));
  }
}

// --- HttpListener ---

HttpListener::HttpListener(asio::io_context& io, const ServerLimits& limits, Factory factory,
                           std::function<void(std::size_t)> on_count)
    : io_(io), limits_(limits), factory_(std::move(factory)), on_count_(std::move(on_count)),
      acceptor_(io), accept_retry_timer_(io), sweep_timer_(io) {}

Status HttpListener::Listen(const std::string& host, std::uint16_t port) {
  beast::error_code ec;
  auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return MakeError(ErrorCode::kInvalidInput, fmt::format("host '{}' is not an IP address", host));
  const tcp::endpoint endpoint(address, port);
  acceptor_.open(asio::generic::stream_protocol(endpoint.protocol()), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return MakeError(ErrorCode::kIo, fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(acceptor_.native_handle(), reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                            : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
  BeginAccepting();
  return Ok{};
}

Status HttpListener::ListenUnix(const std::string& path) {
  const asio::local::stream_protocol::endpoint endpoint(path);
  auto fail = [&path](const std::string& why) {
    return MakeError(ErrorCode::kIo, fmt::format("cannot listen on Unix socket {}: {}", path, why));
  };
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) return fail("the path exists and is not a socket");
    asio::local::stream_protocol::socket probe(io_);
    beast::error_code connect_ec;
    probe.connect(endpoint, connect_ec);
    if (!connect_ec) return fail("another server is listening there");
    if (connect_ec != asio::error::connection_refused) return fail(connect_ec.message());
    ::unlink(path.c_str());  // left by a server that is gone
  }
  beast::error_code ec;
  acceptor_.open(asio::generic::stream_protocol(endpoint.protocol()), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (ec) return fail(ec.message());
  unix_path_ = path;
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    StopAccepting();
    return fail(ec.message());
  }
  BeginAccepting();
  return Ok{};
}

void HttpListener::BeginAccepting() {
  accepting_ = sweeping_ = true;
  DoAccept();
  ArmSweep();
}

void HttpListener::StopAccepting() {
  accepting_ = false;
  beast::error_code ec;
  acceptor_.close(ec);
  accept_retry_timer_.cancel();
  if (!unix_path_.empty()) {
    ::unlink(unix_path_.c_str());
    unix_path_.clear();
  }
}

void HttpListener::Stop() {
  StopAccepting();
  sweeping_ = false;
  sweep_timer_.cancel();
}

std::vector<std::shared_ptr<HttpServerConnection>> HttpListener::Connections() const {
  std::vector<std::shared_ptr<HttpServerConnection>> all;
  all.reserve(connections_.size());
  for (const auto& [raw, connection] : connections_) all.push_back(connection);
  return all;
}

void HttpListener::DoAccept() {
  acceptor_.async_accept([this](beast::error_code ec, StreamSocket socket) {
    if (!accepting_) return;
    if (ec) {
      // Out of descriptors or a transient error: back off instead of spinning.
      accept_retry_timer_.expires_after(kAcceptRetry);
      accept_retry_timer_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec && accepting_) DoAccept();
      });
      return;
    }
    std::shared_ptr<HttpServerConnection> connection = factory_(std::move(socket));
    connection->on_closed_ = [this](HttpServerConnection* closed) { Remove(closed); };
    connections_.emplace(connection.get(), connection);
    if (on_count_) on_count_(connections_.size());
    connection->Start();
    DoAccept();
  });
}

void HttpListener::ArmSweep() {
  Nanos period = std::min<Nanos>({std::chrono::seconds(1), limits_.request_timeout / 4, limits_.idle_timeout / 4});
  period = std::max<Nanos>(period, std::chrono::milliseconds(5));
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([this](beast::error_code ec) {
    if (ec || !sweeping_) return;
    const MonoTime now = Now();
    for (auto& connection : Connections()) connection->CheckDeadline(now);
    ArmSweep();
  });
}

void HttpListener::Remove(HttpServerConnection* connection) {
  connections_.erase(connection);
  if (on_count_) on_count_(connections_.size());
}

}  // namespace bakeoff::net
