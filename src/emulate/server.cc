// emulate/server.cc: Beast HTTP/1.1 transport for the emulated engine (contract in server.h).
//
// Design notes:
// - One I/O thread owns everything (acceptor, connections, the step timer and the Scheduler), so
//   nothing is locked; EmulatorServer's public methods reach it by posting.
// - Reads use "wait until readable, then read what is there" (async_wait + non-blocking
//   read_some into the connection's flat_buffer), so an idle or streaming connection holds no
//   read buffer at all and a client disconnect is noticed while its stream is open. Requests are
//   parsed with Beast's incremental parser (put()), which also sees pipelined requests.
// - Responses are written as raw bytes: a stream is one chunked HTTP/1.1 body (RFC 9112 7.1)
//   whose chunks each hold every SSE event (WHATWG HTML "Server-sent events") produced for the
//   connection since its last write: one engine step's tokens in modelled mode, up to
//   kInstantBatchBytes of events in instant mode. Writes are gathered (header, chunk-size line,
//   data, CRLF, last-chunk) so event bytes are never copied to frame them.
#include "emulate/server.h"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <array>
#include <atomic>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <fmt/format.h>

#include "emulate/openai_api.h"

namespace bakeoff::emulate {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// Instant mode renders at most this many event bytes before handing them to the socket.
constexpr std::size_t kInstantBatchBytes = 64 * 1024;
// Bytes read per read_some call.
constexpr std::size_t kReadChunkBytes = 4096;
// While a response is in progress, stop reading once a client has pipelined this much.
constexpr std::size_t kMaxPipelinedBytes = 64 * 1024;
// After a response with `connection: close`, how long to wait for the peer's FIN.
constexpr Nanos kLingerTime = std::chrono::seconds(2);
// When the step timer fires later than this after the planned step end, the next step starts
// at the actual time (the server fell behind real time) instead of back to back.
constexpr Nanos kMaxStepLag = std::chrono::milliseconds(10);
// Retry delay after accept() fails (e.g. out of file descriptors).
constexpr Nanos kAcceptRetry = std::chrono::milliseconds(50);

constexpr std::string_view kEmulatedHeader = "X-Bakeoff-Emulated: true\r\n";

MonoTime Now() { return std::chrono::steady_clock::now(); }

std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

}  // namespace

class Connection;

class EmulatorServer::Impl {
 public:
  explicit Impl(EmulatorConfig config)
      : config_(std::move(config)),
        served_{config_.served_model_name, config_.engine.max_model_len},
        acceptor_(io_),
        step_timer_(io_),
        sweep_timer_(io_),
        accept_retry_timer_(io_),
        scheduler_(config_.engine),
        request_base_(static_cast<std::uint64_t>(UnixSeconds()) << 24) {}

  Status Listen();
  void Run() { io_.run(); }
  void StopOnIoThread();

  // --- used by Connection (I/O thread only) ---
  const EmulatorConfig& config() const { return config_; }
  const ServedModel& served() const { return served_; }
  bool Loading() const { return Now() < ready_at_; }
  std::uint64_t NextRequestNumber() { return request_base_ + (++requests_); }
  void CountRequest() { stats_requests_.fetch_add(1, std::memory_order_relaxed); }
  // Queues a generation in the engine model; `connection` receives its tokens.
  Result<SequenceId> AddSequence(const SequenceRequest& request, Connection* connection);
  // Drops a generation whose client went away.
  void AbortSequence(SequenceId id);
  void Unregister(Connection* connection);

  EmulatorConfig config_;
  ServedModel served_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_;
  asio::steady_timer step_timer_;
  asio::steady_timer sweep_timer_;
  asio::steady_timer accept_retry_timer_;
  Scheduler scheduler_;
  std::uint16_t port_ = 0;
  MonoTime ready_at_;
  std::thread thread_;
  std::atomic<bool> stop_requested_{false};

  // Stats mirrored for other threads.
  std::atomic<std::uint64_t> stats_connections_{0};
  std::atomic<std::uint64_t> stats_requests_{0};
  std::atomic<std::uint64_t> stats_running_{0};
  std::atomic<std::uint64_t> stats_waiting_{0};
  std::atomic<std::uint64_t> stats_aborted_{0};
  std::atomic<std::uint64_t> stats_steps_{0};

 private:
  void DoAccept();
  void ArmSweep();
  void Sweep();
  // Starts a step now unless one is in flight (coalesced: many arrivals, one kick).
  void Kick();
  void BeginStep(MonoTime start);
  void OnStepDone();
  void PublishQueueStats();

  bool stopping_ = false;
  bool kick_posted_ = false;
  MonoTime step_end_;
  std::uint64_t request_base_;
  std::uint64_t requests_ = 0;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections_;
  std::unordered_map<SequenceId, Connection*> streams_;
};

// One accepted socket; serves its requests one at a time (pipelined ones are queued in buffer_).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(EmulatorServer::Impl& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)) {}

  void Start() {
    beast::error_code ec;
    socket_.non_blocking(true, ec);
    socket_.set_option(tcp::no_delay(true), ec);
    EnterReading();
    DoRead();
  }

  // Idempotent. Aborts the generation in progress, closes the socket and unregisters.
  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    if (sequence_ != 0) {
      server_.AbortSequence(sequence_);
      sequence_ = 0;
    } else if (instant_generating_) {
      server_.stats_aborted_.fetch_add(1, std::memory_order_relaxed);
    }
    beast::error_code ec;
    socket_.close(ec);
    server_.Unregister(this);
  }

  // Closes the connection when its read deadline has passed.
  void CheckDeadline(MonoTime now) {
    if ((state_ == State::kReading || state_ == State::kLingering) && now >= deadline_) Close();
  }

  // A token of this connection's sequence (modelled mode). The caller calls Flush() after the
  // whole step has been dispatched.
  void OnToken(const TokenEvent& event) {
    if (state_ != State::kResponding || !renderer_) return;
    emitted_ = event.index + 1;
    if (event.finish) sequence_ = 0;  // the scheduler has already freed it
    if (renderer_->spec().stream) {
      if (event.index == 0) renderer_->AppendRoleEvent(pending_data_);
      renderer_->AppendTokenEvent(pending_data_, event.index, event.finish);
      if (event.finish) EndStream();
    } else if (event.finish) {
      SendBody(200, "application/json", renderer_->RenderFullBody(emitted_, *event.finish));
    }
  }

  void Flush() { StartWrite(); }

 private:
  enum class State : std::uint8_t { kReading, kResponding, kLingering, kClosed };

  void EnterReading() {
    state_ = State::kReading;
    request_started_ = false;
    deadline_ = Now() + server_.config().idle_timeout;
  }

  void DoRead() {
    if (reading_ || state_ == State::kClosed) return;
    if (state_ == State::kResponding && buffer_.size() >= kMaxPipelinedBytes) return;
    reading_ = true;
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](beast::error_code ec) { self->OnReadable(ec); });
  }

  void OnReadable(beast::error_code ec) {
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

  void ParseBuffered() {
    while (state_ == State::kReading && buffer_.size() > 0) {
      if (!request_started_) {
        request_started_ = true;
        deadline_ = Now() + server_.config().request_timeout;
      }
      if (!parser_) {
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(server_.config().max_header_bytes));
        parser_->body_limit(server_.config().max_body_bytes);
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
        state_ = State::kResponding;
        SendError(ApiError{status, "BadRequestError",
                           fmt::format("malformed HTTP request: {}", ec.message()), ""});
        return;
      }
      if (parser_->is_done()) {
        http::request<http::string_body> request = parser_->release();
        parser_.reset();
        HandleRequest(request);
      } else if (used == 0) {
        break;
      }
    }
  }

  void HandleRequest(http::request<http::string_body>& request) {
    server_.CountRequest();
    state_ = State::kResponding;
    keep_alive_ = request.keep_alive();
    chunked_ = request.version() >= 11;
    if (buffer_.size() == 0) buffer_.shrink_to_fit();  // hold no read memory while streaming

    std::string_view target(request.target().data(), request.target().size());
    std::string_view path = target.substr(0, target.find('?'));
    const http::verb method = request.method();
    auto expect = [&](http::verb verb) {
      if (method == verb) return true;
      SendError(ApiError{405, "MethodNotAllowed", "Method Not Allowed", ""});
      return false;
    };
    const bool loading = server_.Loading();
    if (path == "/health") {
      if (expect(http::verb::get)) SendBody(loading ? 503 : 200, "application/json", "");
    } else if (path == "/v1/models") {
      if (!expect(http::verb::get)) return;
      if (loading) return SendLoading();
      SendBody(200, "application/json", RenderModelsResponse(server_.served(), UnixSeconds()));
    } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!expect(http::verb::post)) return;
      if (loading) return SendLoading();
      BeginGeneration(path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions,
                      request.body());
    } else if (path == "/tokenize") {
      if (!expect(http::verb::post)) return;
      if (loading) return SendLoading();
      auto response = RenderTokenizeResponse(request.body(), server_.served());
      if (auto* error = std::get_if<ApiError>(&response)) return SendError(*error);
      SendBody(200, "application/json", std::get<std::string>(response));
    } else {
      SendError(NotFound("Not Found"));
    }
  }

  void SendLoading() {
    SendError(ApiError{503, "ServiceUnavailableError", "the emulated model is still loading", ""});
  }

  void BeginGeneration(Endpoint endpoint, const std::string& body) {
    auto parsed = ParseGenerationRequest(endpoint, body, server_.served());
    if (auto* error = std::get_if<ApiError>(&parsed)) return SendError(*error);
    const GenerationSpec& spec = std::get<GenerationSpec>(parsed);
    renderer_.emplace(spec, server_.served(), server_.NextRequestNumber(), UnixSeconds());
    emitted_ = 0;
    if (server_.config().instant) {
      if (!spec.stream) {
        return SendBody(200, "application/json",
                        renderer_->RenderFullBody(spec.max_tokens, FinishReason::kLength));
      }
      AppendStreamHead();
      instant_generating_ = true;
      return PumpInstant();
    }
    SequenceRequest request{spec.prompt_tokens, spec.max_tokens, spec.min_tokens, spec.ignore_eos};
    auto id = server_.AddSequence(request, this);
    if (!id.ok()) return SendError(BadRequest(id.error().message));
    sequence_ = *id;
    if (spec.stream) {
      AppendStreamHead();  // headers now, as a real server does before the first token
      StartWrite();
    }
  }

  // Renders up to kInstantBatchBytes of events, then writes them.
  void PumpInstant() {
    const GenerationSpec& spec = renderer_->spec();
    while (emitted_ < spec.max_tokens && pending_data_.size() < kInstantBatchBytes) {
      if (emitted_ == 0) renderer_->AppendRoleEvent(pending_data_);
      std::optional<FinishReason> finish;
      if (emitted_ + 1 == spec.max_tokens) finish = FinishReason::kLength;
      renderer_->AppendTokenEvent(pending_data_, emitted_, finish);
      ++emitted_;
    }
    if (emitted_ == spec.max_tokens) {
      instant_generating_ = false;
      EndStream();
    }
    StartWrite();
  }

  void EndStream() {
    if (renderer_->spec().include_usage) renderer_->AppendUsageEvent(pending_data_, emitted_);
    ResponseRenderer::AppendDone(pending_data_);
    response_queued_ = true;
  }

  void AppendStreamHead() {
    pending_head_ += "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n";
    pending_head_ += "cache-control: no-cache\r\n";
    pending_head_ += kEmulatedHeader;
    if (chunked_) {
      pending_head_ += "transfer-encoding: chunked\r\n";
    } else {
      keep_alive_ = false;  // HTTP/1.0: the body ends when the connection closes
    }
    if (!keep_alive_) pending_head_ += "connection: close\r\n";
    pending_head_ += "\r\n";
  }

  void SendError(const ApiError& error) { SendBody(error.status, "application/json", RenderError(error)); }

  // A whole response with a content-length; ends the current response.
  void SendBody(int status, std::string_view content_type, std::string_view body) {
    fmt::format_to(std::back_inserter(pending_head_),
                   "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n{}{}\r\n", status,
                   Reason(status), content_type, body.size(), kEmulatedHeader,
                   keep_alive_ ? "" : "connection: close\r\n");
    pending_head_ += body;
    raw_response_ = true;
    response_queued_ = true;
    renderer_.reset();
    StartWrite();
  }

  void StartWrite() {
    if (writing_ || state_ == State::kClosed) return;
    if (pending_head_.empty() && pending_data_.empty() && !response_queued_) return;
    std::swap(pending_head_, writing_head_);
    std::swap(pending_data_, writing_data_);
    pending_head_.clear();
    pending_data_.clear();
    writing_final_ = response_queued_;
    response_queued_ = false;
    std::array<asio::const_buffer, 5>& buffers = write_buffers_;
    std::size_t count = 0;
    buffers[count++] = asio::buffer(writing_head_);
    const bool framed = chunked_ && !raw_response_;
    if (!writing_data_.empty()) {
      if (framed) {
        auto end = fmt::format_to_n(chunk_line_.data(), chunk_line_.size(), "{:x}\r\n",
                                    writing_data_.size());
        buffers[count++] = asio::buffer(chunk_line_.data(), end.size);
      }
      buffers[count++] = asio::buffer(writing_data_);
      if (framed) buffers[count++] = asio::buffer("\r\n", 2);
    }
    if (writing_final_ && framed) buffers[count++] = asio::buffer("0\r\n\r\n", 5);
    writing_ = true;
    asio::async_write(socket_, std::span(buffers.data(), count),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        self->OnWrite(ec);
                      });
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    if (state_ == State::kClosed) return;
    if (ec) {
      Close();
      return;
    }
    if (writing_final_) return OnResponseWritten();
    if (instant_generating_) return PumpInstant();
    StartWrite();  // events that arrived while writing
  }

  void OnResponseWritten() {
    renderer_.reset();
    raw_response_ = false;
    instant_generating_ = false;
    sequence_ = 0;
    if (writing_data_.capacity() > kInstantBatchBytes * 2) std::string().swap(writing_data_);
    if (pending_data_.capacity() > kInstantBatchBytes * 2) std::string().swap(pending_data_);
    if (!keep_alive_) {
      // Half-close and wait for the peer's FIN so unread request bytes cannot turn our close
      // into a reset that destroys the response in flight.
      beast::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      state_ = State::kLingering;
      deadline_ = Now() + kLingerTime;
      DoRead();
      return;
    }
    EnterReading();
    ParseBuffered();  // pipelined requests
    DoRead();
  }

  EmulatorServer::Impl& server_;
  tcp::socket socket_;
  State state_ = State::kReading;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool reading_ = false;
  bool writing_ = false;
  bool request_started_ = false;
  MonoTime deadline_;
  // Response in progress.
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool raw_response_ = false;       // a content-length response: no chunk framing
  bool response_queued_ = false;    // the response's last bytes are in pending_*
  bool instant_generating_ = false;
  std::optional<ResponseRenderer> renderer_;
  SequenceId sequence_ = 0;         // 0: none in the engine model
  std::int64_t emitted_ = 0;
  std::string pending_head_;  // raw bytes (status line and headers, or a whole response)
  std::string pending_data_;  // stream body bytes, framed as one chunk when written
  std::string writing_head_;
  std::string writing_data_;
  bool writing_final_ = false;
  std::array<char, 20> chunk_line_{};
  std::array<asio::const_buffer, 5> write_buffers_;  // the write in flight references these
};

Status EmulatorServer::Impl::Listen() {
  beast::error_code ec;
  std::string host = config_.host == "localhost" ? "127.0.0.1" : config_.host;
  auto address = asio::ip::make_address(host, ec);
  if (ec) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("host '{}' is not an IP address", config_.host));
  }
  tcp::endpoint endpoint(address, config_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, fmt::format("cannot listen on {}:{}: {}", config_.host,
                                                 config_.port, ec.message()));
  }
  port_ = acceptor_.local_endpoint(ec).port();
  ready_at_ = Now() + config_.load_delay;
  DoAccept();
  ArmSweep();
  return Ok{};
}

void EmulatorServer::Impl::DoAccept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopping_) return;
    if (ec) {
      // Out of descriptors or a transient error: back off instead of spinning.
      accept_retry_timer_.expires_after(kAcceptRetry);
      accept_retry_timer_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec && !stopping_) DoAccept();
      });
      return;
    }
    auto connection = std::make_shared<Connection>(*this, std::move(socket));
    connections_.emplace(connection.get(), connection);
    stats_connections_.store(connections_.size(), std::memory_order_relaxed);
    connection->Start();
    DoAccept();
  });
}

void EmulatorServer::Impl::ArmSweep() {
  Nanos period = std::min<Nanos>({std::chrono::seconds(1), config_.request_timeout / 4,
                                  config_.idle_timeout / 4});
  period = std::max<Nanos>(period, std::chrono::milliseconds(5));
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([this](beast::error_code ec) {
    if (ec || stopping_) return;
    Sweep();
    ArmSweep();
  });
}

void EmulatorServer::Impl::Sweep() {
  const MonoTime now = Now();
  std::vector<std::shared_ptr<Connection>> all;
  all.reserve(connections_.size());
  for (auto& [raw, connection] : connections_) all.push_back(connection);
  for (auto& connection : all) connection->CheckDeadline(now);
}

void EmulatorServer::Impl::Unregister(Connection* connection) {
  connections_.erase(connection);
  stats_connections_.store(connections_.size(), std::memory_order_relaxed);
}

Result<SequenceId> EmulatorServer::Impl::AddSequence(const SequenceRequest& request,
                                                     Connection* connection) {
  auto id = scheduler_.Add(request);
  if (!id.ok()) return id;
  streams_.emplace(*id, connection);
  PublishQueueStats();
  Kick();
  return id;
}

void EmulatorServer::Impl::AbortSequence(SequenceId id) {
  if (streams_.erase(id) == 0) return;
  scheduler_.Abort(id);
  stats_aborted_.fetch_add(1, std::memory_order_relaxed);
  PublishQueueStats();
}

void EmulatorServer::Impl::Kick() {
  if (kick_posted_ || scheduler_.StepInFlight() || stopping_) return;
  kick_posted_ = true;
  // Posted so that every request parsed in this turn of the loop joins the same first step.
  asio::post(io_, [this] {
    kick_posted_ = false;
    if (!scheduler_.StepInFlight() && !stopping_) BeginStep(Now());
  });
}

void EmulatorServer::Impl::BeginStep(MonoTime start) {
  std::optional<StepPlan> plan = scheduler_.BeginStep(start);
  PublishQueueStats();
  if (!plan) return;  // idle until the next arrival
  step_end_ = plan->end;
  step_timer_.expires_at(plan->end);
  step_timer_.async_wait([this](beast::error_code ec) {
    if (ec || stopping_) return;
    OnStepDone();
  });
}

void EmulatorServer::Impl::OnStepDone() {
  std::vector<TokenEvent> events = scheduler_.FinishStep();
  stats_steps_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::shared_ptr<Connection>> touched;
  touched.reserve(events.size());
  for (const TokenEvent& event : events) {
    auto it = streams_.find(event.id);
    if (it == streams_.end()) continue;
    Connection* connection = it->second;
    if (event.finish) streams_.erase(it);
    connection->OnToken(event);
    touched.push_back(connection->shared_from_this());
  }
  // One write per connection for the whole step.
  for (auto& connection : touched) connection->Flush();
  // Back to back in model time, unless the loop fell behind real time.
  const MonoTime now = Now();
  BeginStep(now - step_end_ <= kMaxStepLag ? step_end_ : now);
}

void EmulatorServer::Impl::PublishQueueStats() {
  stats_running_.store(scheduler_.num_running(), std::memory_order_relaxed);
  stats_waiting_.store(scheduler_.num_waiting(), std::memory_order_relaxed);
}

void EmulatorServer::Impl::StopOnIoThread() {
  stopping_ = true;
  beast::error_code ec;
  acceptor_.close(ec);
  step_timer_.cancel();
  sweep_timer_.cancel();
  accept_retry_timer_.cancel();
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& [raw, connection] : connections_) all.push_back(connection);
  for (auto& connection : all) connection->Close();
}

// --- EmulatorServer ---

Status ValidateEmulatorConfig(const EmulatorConfig& config) {
  if (config.served_model_name.empty()) {
    return MakeError(ErrorCode::kInvalidInput, "served_model_name must not be empty");
  }
  if (config.load_delay < Nanos{0}) {
    return MakeError(ErrorCode::kInvalidInput, "load_delay must be >= 0");
  }
  if (config.idle_timeout <= Nanos{0} || config.request_timeout <= Nanos{0}) {
    return MakeError(ErrorCode::kInvalidInput, "idle_timeout and request_timeout must be > 0");
  }
  return ValidateEngineConfig(config.engine);
}

Result<std::unique_ptr<EmulatorServer>> EmulatorServer::Start(EmulatorConfig config) {
  Status valid = ValidateEmulatorConfig(config);
  if (!valid.ok()) return valid.error();
  auto impl = std::make_unique<Impl>(std::move(config));
  Status listening = impl->Listen();
  if (!listening.ok()) return listening.error();
  Impl* raw = impl.get();
  impl->thread_ = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<EmulatorServer>(new EmulatorServer(std::move(impl)));
}

EmulatorServer::EmulatorServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EmulatorServer::~EmulatorServer() { Stop(); }

std::uint16_t EmulatorServer::port() const { return impl_->port_; }

const EmulatorConfig& EmulatorServer::config() const { return impl_->config_; }

void EmulatorServer::Stop() {
  if (impl_->stop_requested_.exchange(true)) return;
  Impl* impl = impl_.get();
  asio::post(impl->io_, [impl] { impl->StopOnIoThread(); });
  if (impl->thread_.joinable()) impl->thread_.join();
}

EmulatorStats EmulatorServer::stats() const {
  EmulatorStats stats;
  stats.connections_open = impl_->stats_connections_.load(std::memory_order_relaxed);
  stats.requests_total = impl_->stats_requests_.load(std::memory_order_relaxed);
  stats.running = impl_->stats_running_.load(std::memory_order_relaxed);
  stats.waiting = impl_->stats_waiting_.load(std::memory_order_relaxed);
  stats.aborted = impl_->stats_aborted_.load(std::memory_order_relaxed);
  stats.steps = impl_->stats_steps_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace bakeoff::emulate
