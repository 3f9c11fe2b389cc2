// tests/support/scripted_server.cc
//
// Owns: the ScriptedServer implementation (one acceptor thread, one thread per connection, all
// joined in the destructor) and the wire-format helpers for scripts.
#include "scripted_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <gtest/gtest.h>

#include "core/check.h"

namespace bakeoff::testing {

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

// ---- steps and builders ----

Step Send(std::string bytes) { return Step{Step::Kind::kSend, std::move(bytes), {}}; }
Step Sleep(std::chrono::nanoseconds duration) { return Step{Step::Kind::kSleep, {}, duration}; }
Step Close() { return Step{Step::Kind::kClose, {}, {}}; }
Step Reset() { return Step{Step::Kind::kReset, {}, {}}; }
Step Hang() { return Step{Step::Kind::kHang, {}, {}}; }

std::string HttpHead(int status, const HeaderList& headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) + "\r\n";
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  return out;
}

std::string ChunkedHead(int status, std::string_view content_type, const HeaderList& extra) {
  HeaderList headers = {{"Content-Type", std::string(content_type)},
                        {"Transfer-Encoding", "chunked"},
                        {"Cache-Control", "no-cache"}};
  headers.insert(headers.end(), extra.begin(), extra.end());
  return HttpHead(status, headers);
}

std::string Chunk(std::string_view data) {
  BAKEOFF_CHECK(!data.empty()) << "an empty chunk would end the body; use LastChunk()";
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out = size;
  out += data;
  out += "\r\n";
  return out;
}

std::string LastChunk() { return "0\r\n\r\n"; }

std::string FullResponse(int status, std::string_view body, std::string_view content_type) {
  return HttpHead(status, {{"Content-Type", std::string(content_type)},
                           {"Content-Length", std::to_string(body.size())}}) +
         std::string(body);
}

std::string SseEvent(std::string_view data) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  out += '\n';
  return out;
}

Script SseScript(const std::vector<std::string>& events, const SseScriptOptions& options) {
  Script script;
  script.push_back(Send(ChunkedHead(200, "text/event-stream", options.head_headers)));
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto delay = i == 0 ? options.first_delay : options.gap;
    if (delay.count() > 0) script.push_back(Sleep(delay));
    script.push_back(Send(Chunk(SseEvent(events[i]))));
  }
  std::string tail;
  if (options.done_marker) tail += Chunk(SseEvent("[DONE]"));
  tail += LastChunk();
  script.push_back(Send(std::move(tail)));
  return script;
}

std::string_view CapturedRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

// ---- TLS ----

struct ScriptedServer::Tls {
  SSL_CTX* context = nullptr;
  ~Tls() {
    if (context != nullptr) SSL_CTX_free(context);
  }
};

// One connection's byte stream, plain or TLS. Blocking; the destructor of the server unblocks it
// with shutdown(2) on the socket.
class ScriptedServer::Io {
 public:
  Io(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  ~Io() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }
  Io(const Io&) = delete;
  Io& operator=(const Io&) = delete;

  // Bytes read (0 at EOF or on error).
  std::size_t Read(char* data, std::size_t size) {
    if (ssl_ != nullptr) {
      const int got = SSL_read(ssl_, data, static_cast<int>(size));
      return got > 0 ? static_cast<std::size_t>(got) : 0;
    }
    while (true) {
      const ssize_t got = ::recv(fd_, data, size, 0);
      if (got < 0 && errno == EINTR) continue;
      return got > 0 ? static_cast<std::size_t>(got) : 0;
    }
  }

  // Waits until a byte can be read (or the peer closed, or the server stops); false on timeout.
  bool WaitReadable(std::chrono::nanoseconds timeout) {
    if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
    pollfd entry{fd_, POLLIN, 0};
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    const timespec limit{static_cast<time_t>(seconds.count()),
                         static_cast<long>((timeout - seconds).count())};
    while (true) {
      const int ready = ::ppoll(&entry, 1, &limit, nullptr);
      if (ready < 0 && errno == EINTR) continue;  // may wait longer than asked; tests allow it
      return ready != 0;
    }
  }

  // Makes the coming close(2) abortive: the peer sees a reset (RST), not an orderly FIN.
  void Reset() {
    const linger abortive{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive);
  }

  // Returns how many bytes were handed to the kernel (all of them unless the write failed).
  std::size_t WriteAll(std::string_view bytes) {
    std::size_t written = 0;
    while (written < bytes.size()) {
      const std::string_view rest = bytes.substr(written);
      if (ssl_ != nullptr) {
        const int sent = SSL_write(ssl_, rest.data(), static_cast<int>(rest.size()));
        if (sent <= 0) break;
        written += static_cast<std::size_t>(sent);
      } else {
        const ssize_t sent = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) break;
        written += static_cast<std::size_t>(sent);
      }
    }
    return written;
  }

 private:
  int fd_;
  SSL* ssl_;
};

// ---- server ----

ScriptedServer::ScriptedServer(Script script, ServerOptions options)
    : ScriptedServer([script = std::move(script)](const CapturedRequest&) { return script; },
                     std::move(options)) {}

ScriptedServer::ScriptedServer(Responder responder, ServerOptions options)
    : options_(std::move(options)), responder_(std::move(responder)) {
  // SSL_write on a socket the peer reset must not kill the test binary.
  std::signal(SIGPIPE, SIG_IGN);
  if (!options_.tls_cert_file.empty()) {
    tls_ = std::make_unique<Tls>();
    tls_->context = SSL_CTX_new(TLS_server_method());
    BAKEOFF_CHECK(tls_->context != nullptr);
    BAKEOFF_CHECK(
        SSL_CTX_use_certificate_chain_file(tls_->context, options_.tls_cert_file.c_str()) == 1)
        << "cannot load " << options_.tls_cert_file;
    BAKEOFF_CHECK(SSL_CTX_use_PrivateKey_file(tls_->context, options_.tls_key_file.c_str(),
                                              SSL_FILETYPE_PEM) == 1)
        << "cannot load " << options_.tls_key_file;
  }
  if (!options_.unix_socket.empty()) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BAKEOFF_CHECK(listen_fd_ >= 0) << std::strerror(errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    BAKEOFF_CHECK(options_.unix_socket.size() < sizeof address.sun_path) << options_.unix_socket;
    std::memcpy(address.sun_path, options_.unix_socket.data(), options_.unix_socket.size());
    ::unlink(options_.unix_socket.c_str());
    BAKEOFF_CHECK(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0)
        << std::strerror(errno);
    BAKEOFF_CHECK(::listen(listen_fd_, 1024) == 0) << std::strerror(errno);
    acceptor_ = std::thread([this] { AcceptLoop(); });
    return;
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BAKEOFF_CHECK(listen_fd_ >= 0) << std::strerror(errno);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  BAKEOFF_CHECK(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0)
      << std::strerror(errno);
  BAKEOFF_CHECK(::listen(listen_fd_, 1024) == 0) << std::strerror(errno);
  socklen_t length = sizeof address;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

ScriptedServer::~ScriptedServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (int fd : live_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept() on Linux
  acceptor_.join();
  ::close(listen_fd_);
  if (!options_.unix_socket.empty()) ::unlink(options_.unix_socket.c_str());
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& worker : workers) worker.join();
}

std::string ScriptedServer::url() const {
  if (!options_.unix_socket.empty()) {
    std::string url = "http+unix://";
    for (char c : options_.unix_socket) url += c == '/' ? std::string("%2F") : std::string(1, c);
    return url;
  }
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

std::vector<CapturedRequest> ScriptedServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::size_t ScriptedServer::requests_answered() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::seconds(5), [this] { return sends_in_progress_ == 0; });
  return static_cast<std::size_t>(std::count_if(requests_.begin(), requests_.end(),
                                                [](const CapturedRequest& r) { return r.answered; }));
}

std::size_t ScriptedServer::heads_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heads_dropped_;
}

int ScriptedServer::connections_accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

bool ScriptedServer::WaitForRequests(std::size_t count, std::chrono::nanoseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= count || stop_; }) &&
         requests_.size() >= count;
}

void ScriptedServer::AcceptLoop() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    const int one = 1;
    if (options_.unix_socket.empty()) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    live_fds_.insert(fd);
    const int connection = accepted_++;
    workers_.emplace_back([this, fd, connection] { Serve(fd, connection); });
  }
}

void ScriptedServer::Forget(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  live_fds_.erase(fd);
  ::close(fd);  // under the lock, so the destructor never shuts down a reused descriptor
}

namespace {

// Reads one request head into `request` (method, target, headers), keeping the bytes after it in
// `buffer`, and returns its Content-Length. Nothing on EOF or bad input.
template <typename ReadFn>
std::optional<std::size_t> ReadHead(ReadFn&& read, std::string& buffer, CapturedRequest& request) {
  char chunk[16 * 1024];
  std::size_t head_end;
  while ((head_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    const std::size_t got = read(chunk, sizeof chunk);
    if (got == 0) return std::nullopt;
    buffer.append(chunk, got);
  }
  const std::string head = buffer.substr(0, head_end);
  buffer.erase(0, head_end + 4);
  std::size_t line_end = head.find("\r\n");
  const std::string request_line = head.substr(0, line_end);
  const std::size_t space1 = request_line.find(' ');
  const std::size_t space2 = request_line.find(' ', space1 + 1);
  if (space1 == std::string::npos || space2 == std::string::npos) return std::nullopt;
  request.method = request_line.substr(0, space1);
  request.target = request_line.substr(space1 + 1, space2 - space1 - 1);
  std::size_t content_length = 0;
  while (line_end != std::string::npos) {
    const std::size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line =
        head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::size_t value_start = colon + 1;
    while (value_start < line.size() && line[value_start] == ' ') ++value_start;
    std::string value = line.substr(value_start);
    if (EqualsIgnoreCase(name, "Content-Length")) content_length = std::stoul(value);
    request.headers.emplace_back(std::move(name), std::move(value));
  }
  return content_length;
}

// Reads a body of `content_length` bytes into `request`. False on EOF.
template <typename ReadFn>
bool ReadBody(ReadFn&& read, std::string& buffer, std::size_t content_length,
              CapturedRequest& request) {
  char chunk[16 * 1024];
  while (buffer.size() < content_length) {
    const std::size_t got = read(chunk, sizeof chunk);
    if (got == 0) return false;
    buffer.append(chunk, got);
  }
  request.body = buffer.substr(0, content_length);
  buffer.erase(0, content_length);
  return true;
}

}  // namespace

void ScriptedServer::Serve(int fd, int connection) {
  SSL* ssl = nullptr;
  if (tls_) {
    ssl = SSL_new(tls_->context);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) {  // e.g. the client rejected our certificate
      SSL_free(ssl);
      Forget(fd);
      return;
    }
  }
  Io io(fd, ssl);
  std::string buffer;
  bool open = true;
  for (int index_on_connection = 0; open; ++index_on_connection) {
    std::size_t request_index = 0;
    CapturedRequest request;
    request.connection = connection;
    request.index_on_connection = index_on_connection;
    if (options_.read_request && !ReadNext(io, buffer, request)) break;
    request.received_at = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      request_index = requests_.size();
      requests_.push_back(request);
    }
    cv_.notify_all();
    const Script script = responder_(request);
    open = Play(io, script, request_index);
    if (open && !options_.read_request) {
      // Nothing more to play: wait for the client to close.
      char sink[4096];
      while (io.Read(sink, sizeof sink) > 0) {
      }
      open = false;
    }
  }
  Forget(fd);
}

bool ScriptedServer::ReadNext(Io& io, std::string& buffer, CapturedRequest& request) {
  if (options_.idle_close.count() > 0 && request.index_on_connection > 0 && buffer.empty() &&
      !io.WaitReadable(options_.idle_close)) {
    return false;  // idle too long: Serve() closes the connection
  }
  auto read = [&io](char* data, std::size_t size) { return io.Read(data, size); };
  const std::optional<std::size_t> content_length = ReadHead(read, buffer, request);
  if (!content_length) return false;
  const HeadAction action = options_.head_action ? options_.head_action(request) : HeadAction::kServe;
  if (action != HeadAction::kServe) {
    if (action == HeadAction::kReset) io.Reset();
    std::lock_guard<std::mutex> lock(mu_);
    ++heads_dropped_;
    return false;
  }
  return ReadBody(read, buffer, *content_length, request);
}

bool ScriptedServer::SleepFor(std::chrono::nanoseconds duration) {
  const SteadyTime until = std::chrono::steady_clock::now() + duration;
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_until(lock, until, [this] { return stop_; });
}

bool ScriptedServer::Play(Io& io, const Script& script, std::size_t request_index) {
  for (const Step& step : script) {
    switch (step.kind) {
      case Step::Kind::kSend: {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++sends_in_progress_;
        }
        const std::size_t written = io.WriteAll(step.bytes);
        const SteadyTime now = std::chrono::steady_clock::now();
        {
          std::lock_guard<std::mutex> lock(mu_);
          --sends_in_progress_;
          if (written > 0) requests_[request_index].answered = true;
          if (written == step.bytes.size()) requests_[request_index].sent_at.push_back(now);
        }
        cv_.notify_all();
        if (written < step.bytes.size()) return false;
        break;
      }
      case Step::Kind::kSleep:
        if (!SleepFor(step.duration)) return false;
        break;
      case Step::Kind::kClose:
        return false;  // Serve() closes the descriptor: an orderly FIN
      case Step::Kind::kReset:
        io.Reset();
        return false;
      case Step::Kind::kHang:
        SleepFor(options_.hang_limit);
        return false;
    }
  }
  return true;
}

std::uint16_t UnusedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string LoopbackUrl(std::uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

TestCertificate MakeSelfSignedCertificate(const std::string& dir,
                                          const std::string& subject_alt_names) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::path(dir) / "bakeoff-cert-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp in " << dir << ": " << std::strerror(errno);
    return {};
  }
  TestCertificate cert{pattern + "/cert.pem", pattern + "/key.pem",
                       std::shared_ptr<void>(nullptr, [directory = pattern](void*) {
                         std::error_code ignored;
                         fs::remove_all(directory, ignored);
                       })};
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "
      "/CN=localhost"
      " -addext subjectAltName=" +
      subject_alt_names + " -keyout " + cert.key_file + " -out " + cert.cert_file +
      " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "openssl could not make a test certificate: " << command;
    return {};
  }
  return cert;
}

}  // namespace bakeoff::testing
