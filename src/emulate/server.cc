// emulate/server.cc: the emulated engine's routes, faults and life cycle over net/http_server.h
// (contract in server.h).
//
// Design notes:
// - One I/O thread owns everything (listener, connections, timers, the Scheduler and the
//   metrics), so nothing is locked; EmulatorServer's public methods reach it by posting.
// - A stream is one chunked HTTP/1.1 body whose chunks each hold every SSE event (WHATWG HTML
//   "Server-sent events") produced for the connection since its last write: one engine step's
//   tokens in modelled mode, up to kInstantBatchBytes of events in instant mode.
// - Every accepted generation is "open" from acceptance until its last byte is written or its
//   connection closes; the count of open generations is what a drain waits for.
// - A step's token events are rendered ahead of its planned end, by a lead learnt from the last
//   steps' render time (BeginStep), with writes held (HttpServerConnection::HoldWrites); the I/O
//   thread then waits out the rest of the lead (OnStepDone), and the tokens leave at the step's
//   end. Rendering 1,024 events takes about a millisecond, which the step's lag would otherwise
//   carry; vLLM's asynchronous scheduling likewise hides the CPU's part of a step behind the GPU's.
#include "emulate/server.h"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "core/rng.h"
#include "emulate/metrics.h"
#include "emulate/native_api.h"
#include "emulate/pooling_api.h"
#include "emulate/openai_api.h"
#include "net/http_server.h"

namespace bakeoff::emulate {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

// --fault-cut-utf8: `bytes` spliced into `body` right after the first `marker` (no marker: unchanged).
void InsertAfter(std::string& body, std::string_view marker, std::string_view bytes) {
  if (const std::size_t at = body.find(marker); at != std::string::npos) body.insert(at + marker.size(), bytes);
}

// Instant mode renders at most this many event bytes before handing them to the socket.
constexpr std::size_t kInstantBatchBytes = 64 * 1024;
// When the step timer fires later than this after the planned step end, the next step starts
// at the actual time (the server fell behind real time) instead of back to back.
constexpr Nanos kMaxStepLag = std::chrono::milliseconds(10);
// The render lead (OnStepDone): at most this, and at most half the step, so that a lead learnt
// on a slow moment cannot block the I/O thread for long.
constexpr Nanos kMaxRenderLead = std::chrono::milliseconds(3);
// The lead is this many times the render time the last steps predict, plus the margin: a step's
// render time varies (at 1,024 events on a 2-core VM: median 0.5 ms, 90th percentile 0.8 ms, at
// most 1.2 ms in 138 steps), and what a render overruns the step's end adds to its lag, while
// what the lead has to spare costs only the wait.
constexpr double kRenderLeadFactor = 2.0;
constexpr Nanos kRenderLeadMargin = std::chrono::microseconds(100);
// After AbortAll, how long the last bytes (error events) may take to be written.
constexpr Nanos kAbortGrace = std::chrono::seconds(2);

constexpr std::string_view kEmulatedHeader = "X-Bakeoff-Emulated: true\r\n";

constexpr std::string_view kKeepAliveComment = ": keep-alive\n\n";

constexpr std::array<std::string_view, 4> kStageNames = {"download", "load", "compile", "warmup"};

MonoTime Now() { return std::chrono::steady_clock::now(); }

std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ApiError Unavailable(std::string message) {
  return ApiError{503, "ServiceUnavailableError", std::move(message), ""};
}

ApiError ShuttingDownError() { return Unavailable("the emulated server is shutting down"); }

}  // namespace

class Connection;

class EmulatorServer::Impl {
 public:
  explicit Impl(EmulatorConfig config)
      : config_(std::move(config)),
        served_{config_.served_model_name, config_.engine.max_model_len, config_.faults.truncate_prompts,
                config_.lora_adapters},
        limits_{config_.idle_timeout, config_.request_timeout, config_.max_header_bytes, config_.max_body_bytes},
        listener_(io_, limits_, [this](net::StreamSocket socket) { return MakeConnection(std::move(socket)); },
                  [this](std::size_t open) { stats_connections_.store(open, std::memory_order_relaxed); }),
        step_timer_(io_),
        startup_timer_(io_),
        shutdown_timer_(io_),
        scheduler_(config_.engine),
        write_fanout_(config_.write_threads, config_.io_uring_writes),
        fault_rng_(config_.faults.seed),
        request_base_(static_cast<std::uint64_t>(UnixSeconds()) << 24) {}

  Status Listen();
  void Run() { io_.run(); }
  void StopOnIoThread();
  void BeginDrainOnIoThread(Nanos timeout);
  void AbortAllOnIoThread();

  // --- used by Connection (I/O thread only) ---
  const EmulatorConfig& config() const { return config_; }
  const net::ServerLimits& limits() const { return limits_; }
  const ServedModel& served() const { return served_; }
  bool Loading() const { return !ready_; }
  bool ShuttingDown() const { return shutting_down_ || stopping_; }
  bool ReportsCachedTokens() const {
    return !config_.instant && config_.engine.kv.prefix_caching != PrefixCaching::kNone;
  }
  std::uint64_t NextRequestNumber() { return request_base_ + (++requests_); }
  void CountRequest() { stats_requests_.fetch_add(1, std::memory_order_relaxed); }
  RequestMetrics& metrics() { return metrics_; }
  Rng& fault_rng() { return fault_rng_; }
  std::size_t NumWaiting() const { return scheduler_.num_waiting(); }
  // Counts a generation request toward --fault-crash-after; true when it crashed the server
  // (every connection, the caller's included, is closed by then).
  bool CountGenerationRequestAndMaybeCrash();
  void CountRejected(std::uint64_t RequestMetrics::*reason) {
    ++(metrics_.*reason);
    stats_rejected_.fetch_add(1, std::memory_order_relaxed);
  }
  // Queues a generation in the engine model; `connection` receives its tokens.
  Result<SequenceId> AddSequence(SequenceRequest request, Connection* connection);
  // Drops a generation whose client went away, whose stream failed or that a shutdown cut.
  void AbortSequence(SequenceId id);
  // --fault-ignore-disconnect: the sequence's client went away, but it runs on to its end.
  void DetachSequence(SequenceId id);
  // What /health answers now: ready, not shutting down, and past --fault-health-late-ms.
  bool Healthy() const;
  // Sequences running or waiting (instant streams included).
  bool Busy() const {
    return scheduler_.num_running() + scheduler_.num_waiting() > 0 || instant_running_ > 0;
  }
  // --fault-health-busy-delay-ms: `connection` answers /health when the engine goes idle (or its
  // own timer fires first).
  void WaitForIdle(std::weak_ptr<Connection> connection) {
    if (idle_waiters_.size() >= 1024) {
      std::erase_if(idle_waiters_, [](const auto& weak) { return weak.expired(); });
    }
    idle_waiters_.push_back(std::move(connection));
  }
  // Output seed salt of the next generation (--fault-nondeterministic).
  std::uint64_t NextOutputSalt() { return ++output_salt_; }
  // Instant-mode bookkeeping.
  void InstantStarted(std::int64_t prompt_tokens);
  void InstantTokens(std::int64_t tokens) { instant_generation_tokens_ += tokens; }
  void InstantEnded(bool finished);
  // An accepted generation begins / ends (its last byte written, or its connection closed).
  void GenerationOpened() { ++open_generations_; }
  void GenerationClosed(bool completed);
  std::string RenderMetrics() const;
  // Hands the shutdown report to WaitShutdown() callers (once). Any thread once the loop is done.
  void PublishShutdownDone();

  EmulatorConfig config_;
  ServedModel served_;
  asio::io_context io_{1};
  net::ServerLimits limits_;
  net::HttpListener listener_;
  asio::steady_timer step_timer_;
  asio::steady_timer startup_timer_;
  asio::steady_timer shutdown_timer_;
  Scheduler scheduler_;
  net::WriteFanout write_fanout_;  // hands each step's tokens out
  std::string unbatched_writes_;  // its sender at start-up (EmulatorServer::unbatched_writes)
  Rng fault_rng_;
  std::uint16_t port_ = 0;
  MonoTime started_at_;
  std::thread thread_;
  std::atomic<bool> stop_requested_{false};

  // Stats mirrored for other threads.
  std::atomic<std::uint64_t> stats_connections_{0};
  std::atomic<std::uint64_t> stats_requests_{0};
  std::atomic<std::uint64_t> stats_running_{0};
  std::atomic<std::uint64_t> stats_waiting_{0};
  std::atomic<std::uint64_t> stats_finished_{0};
  std::atomic<std::uint64_t> stats_aborted_{0};
  std::atomic<std::uint64_t> stats_rejected_{0};
  std::atomic<std::uint64_t> stats_steps_{0};
  std::atomic<std::uint64_t> stats_steps_fanned_out_{0};
  std::atomic<bool> stats_ready_{false};
  std::atomic<bool> stats_crashed_{false};

  // Shutdown completion, handed to WaitShutdown() callers.
  std::mutex shutdown_mutex_;
  std::condition_variable shutdown_cv_;
  bool shutdown_done_ = false;  // guarded by shutdown_mutex_
  ShutdownReport shutdown_report_;  // guarded by shutdown_mutex_ once shutdown_done_

 private:
  std::shared_ptr<net::HttpServerConnection> MakeConnection(net::StreamSocket socket);
  void RunStartupStage(std::size_t stage, Nanos offset);
  void Log(const std::string& line) const {
    if (config_.log) config_.log(line);
  }
  // Starts a step now unless one is in flight (coalesced: many arrivals, one kick).
  void Kick();
  void BeginStep(MonoTime start);
  void OnStepDone();
  void PublishQueueStats();
  // Answers the /health requests waiting for idleness once the engine is idle.
  void WakeIdleWaiters();
  void BeginShutdown();
  void CutOpenGenerations();
  void FinishShutdown();
  void StopHard();
  std::vector<std::shared_ptr<Connection>> AllConnections() const;

  bool stopping_ = false;
  bool ready_ = false;
  bool shutting_down_ = false;
  bool shutdown_finished_ = false;
  bool kick_posted_ = false;
  MonoTime ready_at_;
  std::uint64_t output_salt_ = 0;
  std::vector<std::weak_ptr<Connection>> idle_waiters_;
  MonoTime step_end_;
  MonoTime step_wake_at_;             // the step timer's instant: step_end_ less the render lead
  double render_ns_per_event_ = 0;    // moving average of a step's render time per token event
  std::uint64_t request_base_;
  std::uint64_t requests_ = 0;
  std::uint64_t generation_requests_ = 0;
  std::int64_t open_generations_ = 0;
  ShutdownReport report_;
  RequestMetrics metrics_;
  std::int64_t instant_running_ = 0;
  std::uint64_t instant_prompt_tokens_ = 0;
  std::uint64_t instant_generation_tokens_ = 0;
  std::vector<TokenEvent> step_events_;  // FinishStep()'s events, copied: handlers may Abort()
  std::vector<std::shared_ptr<net::HttpServerConnection>> step_connections_;  // written at the step's end
  std::unordered_map<SequenceId, Connection*> streams_;
};

// One accepted socket (net/http_server.h reads, parses and writes): what each request means, and
// the generation in progress with its faults, stalls and keep-alive comments.
class Connection final : public net::HttpServerConnection {
 public:
  Connection(EmulatorServer::Impl& server, net::StreamSocket socket)
      : HttpServerConnection(std::move(socket), server.limits()), server_(server) {}

  std::shared_ptr<Connection> Self() { return std::static_pointer_cast<Connection>(shared_from_this()); }

  bool generation_open() const { return generation_open_; }

  // A token of this connection's sequence (modelled mode), produced by the step that ended at
  // `now`. The caller writes it (WriteFanout) after the whole step has been dispatched.
  void OnToken(const TokenEvent& event, MonoTime now) {
    if (!responding() || !renderer_ || !generation_open_) return;
    RequestMetrics& metrics = server_.metrics();
    if (event.index == 0) {
      cached_tokens_ = event.cached_prompt_tokens;
      metrics.ttft.Observe(ToSeconds(now - arrival_));
      metrics.queue_time.Observe(ToSeconds(std::max(Nanos{0}, event.admitted - arrival_)));
    } else {
      metrics.inter_token.Observe(ToSeconds(now - last_token_at_));
    }
    last_token_at_ = now;
    emitted_ = event.index + 1;
    if (event.finish) {
      sequence_ = 0;  // the scheduler has already freed it
      metrics.e2e.Observe(ToSeconds(now - arrival_));
    }
    if (!renderer_->spec().stream) {
      if (event.finish) {
        SendBody(200, "application/json",
                 renderer_->RenderFullBody(emitted_, *event.finish, CachedTokens()));
      }
      return;
    }
    std::string& out = Out();
    if (event.index == 0) renderer_->AppendRoleEvent(out);
    const bool error_now = stream_error_after_ && emitted_ >= *stream_error_after_ && !event.finish;
    const bool stall_now = stall_after_ && emitted_ == *stall_after_ && !event.finish;
    renderer_->AppendProgress(out, progress_, emitted_, event.finish,
                              server_.config().tokens_per_event, error_now || stall_now);
    if (event.finish) {
      EndStream();
    } else if (error_now) {
      FailStream();
    } else if (stall_now) {
      BeginStall();
    }
  }

  // AbortAll: ends the generation in progress with an error and closes after writing it.
  void AbortForShutdown() {
    if (!responding() || !generation_open_) return;
    set_keep_alive(false);
    if (response_ending() || held_final_) return;  // already complete
    aborted_ = true;
    if (sequence_ != 0) {
      server_.AbortSequence(sequence_);
      sequence_ = 0;
    }
    if (instant_generating_) {
      instant_generating_ = false;
      server_.InstantEnded(false);
    }
    if (!renderer_ || !renderer_->spec().stream) {
      SendError(Unavailable("the request was aborted: the server is shutting down"));
      return;
    }
    EndStall();
    renderer_->AppendStreamError(data(), Unavailable("the request was aborted: the server is shutting down"));
    EndResponse();
    Flush();
  }

  // The engine went idle (or the health delay passed): answers a waiting /health.
  void OnIdle() {
    if (!health_waiting_ || !responding()) return;
    if (health_timer_) health_timer_->cancel();
    AnswerHealth();
  }

 private:
  // Aborts (or, with --fault-ignore-disconnect, detaches) the generation in progress.
  void OnClose() override {
    if (sequence_ != 0) {
      if (server_.config().faults.ignore_disconnect && !server_.ShuttingDown()) {
        server_.DetachSequence(sequence_);
      } else {
        server_.AbortSequence(sequence_);
      }
      sequence_ = 0;
    } else if (instant_generating_) {
      instant_generating_ = false;
      server_.InstantEnded(false);
    }
    if (generation_open_) CloseGeneration(false);
    CancelTimers();
  }

  void OnMalformedRequest(int status, const std::string& message) override {
    SendError(ApiError{status, "BadRequestError", message, ""});
  }

  void OnDataWritten() override {
    if (instant_generating_ && !stalled_) return PumpInstant();
    Flush();  // events that arrived while writing (or before a stall began)
  }

  void OnResponseWritten() override {
    if (generation_open_) CloseGeneration(!aborted_);
    if (keepalive_timer_) keepalive_timer_->cancel();
    renderer_.reset();
    instant_generating_ = false;
    sequence_ = 0;
    if (server_.ShuttingDown()) set_keep_alive(false);
  }

  void OnRequest(Request& request) override {
    server_.CountRequest();
    arrival_ = Now();
    wire_ = Wire::kOpenAi;
    if (server_.ShuttingDown()) set_keep_alive(false);

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
      if (!expect(http::verb::get)) return;
      const Nanos delay = server_.config().faults.health_busy_delay;
      if (delay > Nanos{0} && server_.Busy()) return DelayHealth(delay);
      AnswerHealth();
    } else if (path == "/metrics") {
      if (!expect(http::verb::get)) return;
      if (server_.config().no_metrics) return SendError(NotFound("Not Found"));
      SendBody(200, "text/plain; version=0.0.4; charset=utf-8", server_.RenderMetrics());
    } else if (path == "/v1/models") {
      if (!expect(http::verb::get)) return;
      if (loading) return SendLoading();
      std::string body = RenderModelsResponse(server_.served(), UnixSeconds());
      if (server_.config().faults.cut_utf8) {
        InsertAfter(body, "\"data\":[",
                    fmt::format("{{\"id\":\"{}-\xC3\",\"object\":\"model\",\"owned_by\":\"bakeoff\"}},",
                                server_.served().name));
      }
      SendBody(200, "application/json", body);
    } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!expect(http::verb::post) || !AdmitGeneration(loading)) return;
      const Endpoint endpoint = path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions;
      BeginGeneration(ParseGenerationRequest(endpoint, request.body(), server_.served()));
    } else if (const std::optional<Wire> pooling = MatchPoolingRoute(path)) {
      if (!expect(http::verb::post) || !AdmitGeneration(loading)) return;
      BeginGeneration(ParsePoolingRequest(*pooling, request.body(), server_.served()));
    } else if (const std::optional<NativeRoute> native = MatchNativeRoute(path)) {
      wire_ = native->wire;
      if (!expect(http::verb::post) || !AdmitGeneration(loading)) return;
      BeginGeneration(ParseNativeRequest(*native, request.body(), server_.served()));
    } else if (path == "/tokenize") {
      if (!expect(http::verb::post)) return;
      if (loading) return SendLoading();
      auto response = RenderTokenizeResponse(request.body(), server_.served());
      if (auto* error = std::get_if<ApiError>(&response)) return SendBadInput(*error);
      SendBody(200, "application/json", std::get<std::string>(response));
    } else {
      SendError(NotFound("Not Found"));
    }
  }

  void SendLoading() { SendError(Unavailable("the emulated model is still loading")); }

  // Whether a generation request may start now; if not, its answer (or the crash) is under way.
  bool AdmitGeneration(bool loading) {
    if (server_.CountGenerationRequestAndMaybeCrash()) return false;  // this connection is gone
    if (server_.ShuttingDown()) {
      server_.CountRejected(&RequestMetrics::rejected_shutting_down);
      SendError(ShuttingDownError());
      return false;
    }
    if (loading) {
      server_.CountRejected(&RequestMetrics::rejected_not_ready);
      SendLoading();
      return false;
    }
    return true;
  }

  void AnswerHealth() {
    health_waiting_ = false;
    if (server_.Healthy()) return SendBody(200, "application/json", "");
    const int status = server_.ShuttingDown() ? 503 : server_.config().not_ready_status;
    SendBody(status, "application/json", status == 503 ? "" : R"({"status":"loading"})");
  }

  // --fault-health-busy-delay-ms: the answer waits for `delay` or for the engine to go idle.
  void DelayHealth(Nanos delay) {
    health_waiting_ = true;
    server_.WaitForIdle(Self());
    if (!health_timer_) health_timer_.emplace(executor());
    health_timer_->expires_after(delay);
    health_timer_->async_wait([self = Self()](beast::error_code ec) {
      if (ec) return;
      self->OnIdle();
    });
  }

  // Draws this request's faults, always in the same order, so a seed fixes which requests fail.
  struct FaultDraws {
    bool error = false;
    bool stall = false;
    bool stream_error = false;
  };
  FaultDraws DrawFaults() {
    const FaultConfig& faults = server_.config().faults;
    Rng& rng = server_.fault_rng();
    FaultDraws draws;
    if (faults.error_rate > 0) draws.error = rng.Uniform() < faults.error_rate;
    if (faults.stall_rate > 0 && faults.stall > Nanos{0}) {
      draws.stall = rng.Uniform() < faults.stall_rate;
    }
    if (faults.stream_error_rate > 0) draws.stream_error = rng.Uniform() < faults.stream_error_rate;
    return draws;
  }

  // --fault-bad-input-500: a 400 becomes a 500.
  void SendBadInput(const ApiError& error) {
    if (error.status != 400 || !server_.config().faults.bad_input_500) return SendError(error);
    SendError(ApiError{500, "InternalServerError",
                       fmt::format("Internal Server Error: {}", error.message), error.param});
  }

  // Each choice's output: an --answers answer for the request's answer key, a JSON text
  // (response_format) or tool-call arguments, or the word stream of the request's seed (varied
  // per request with --fault-nondeterministic); then the stop strings (not for tool calls, nor
  // with --fault-ignore-stop). `structured` tells whether the output is an answer, JSON or a tool
  // call, which an EOS draw must not cut.
  std::vector<ChoiceText> ChoicesFor(const GenerationSpec& spec, bool& structured) {
    const EmulatorConfig& config = server_.config();
    std::uint64_t seed = spec.seed;
    if (config.faults.nondeterministic) seed ^= server_.NextOutputSalt() * 0x9e3779b97f4a7c15ULL;
    const std::string* answer = nullptr;
    if (!config.answers.empty() && spec.answer_key) {
      auto it = config.answers.find(*spec.answer_key);
      if (it != config.answers.end()) answer = &it->second;
    }
    structured = answer != nullptr || spec.json_text || spec.tool_call || spec.choice_text;
    std::vector<ChoiceText> choices;
    choices.reserve(static_cast<std::size_t>(spec.n));
    for (std::int64_t c = 0; c < spec.n; ++c) {
      if (spec.tool_call) {
        choices.push_back(ChoiceText::Fixed(spec.tool_call->arguments, FinishReason::kToolCalls));
        continue;
      }
      if (answer != nullptr) {
        choices.push_back(ChoiceText::Fixed(*answer, FinishReason::kStop));
      } else if (spec.json_text) {
        choices.push_back(ChoiceText::Fixed(*spec.json_text, FinishReason::kStop));
      } else if (spec.choice_text) {
        choices.push_back(ChoiceText::Fixed(*spec.choice_text, FinishReason::kStop));
      } else if (config.faults.cut_utf8) {
        choices.push_back(ChoiceText::CutUtf8());
      } else {
        choices.push_back(ChoiceText::Words(seed + static_cast<std::uint64_t>(c)));
      }
      if (!spec.stop.empty() && !config.faults.ignore_stop) {
        choices.back().ApplyStop(spec.stop, spec.max_tokens);
      }
    }
    return choices;
  }

  void BeginGeneration(std::variant<GenerationSpec, ApiError> parsed) {
    if (auto* error = std::get_if<ApiError>(&parsed)) return SendBadInput(*error);
    GenerationSpec& spec = std::get<GenerationSpec>(parsed);
    const FaultDraws faults = DrawFaults();
    if (faults.error) {
      ++server_.metrics().fault_errors;
      return SendError(ApiError{500, "InternalServerError",
                                "emulated fault: the engine failed this request "
                                "(--fault-error-rate)",
                                ""});
    }
    const EmulatorConfig& config = server_.config();
    if (!config.instant && config.max_waiting > 0 &&
        static_cast<std::int64_t>(server_.NumWaiting()) >= config.max_waiting) {
      server_.CountRejected(&RequestMetrics::rejected_queue_full);
      // Well-behaved shedding: tell the client when to come back.
      return SendError(Unavailable("The request queue is full."), "Retry-After: 1\r\n");
    }
    ResetGeneration();
    const bool stream = spec.stream;
    const std::int64_t prompt_tokens = spec.prompt_tokens;
    bool structured = false;
    std::vector<ChoiceText> choices = ChoicesFor(spec, structured);
    if (config.instant) {
      std::vector<TokenId>().swap(spec.prompt);  // the renderer needs only the count
      renderer_.emplace(spec, server_.served(), server_.NextRequestNumber(), UnixSeconds(),
                        std::move(choices));
      progress_.assign(static_cast<std::size_t>(spec.n), ChoiceProgress{});
      if (stream) PlanStreamFaults(faults);
      if (!stream) {
        const std::int64_t tokens = renderer_->engine_tokens();
        server_.InstantStarted(prompt_tokens);
        server_.InstantTokens(tokens);
        server_.InstantEnded(true);
        return SendBody(200, "application/json",
                        renderer_->RenderFullBody(tokens, FinishReason::kLength));
      }
      OpenGeneration();
      server_.InstantStarted(prompt_tokens);
      instant_generating_ = true;
      AppendStreamHead();
      return PumpInstant();
    }
    SequenceRequest request;
    request.prompt = std::move(spec.prompt);  // the renderer needs only the count
    renderer_.emplace(spec, server_.served(), server_.NextRequestNumber(), UnixSeconds(),
                      std::move(choices));
    progress_.assign(static_cast<std::size_t>(spec.n), ChoiceProgress{});
    if (stream) PlanStreamFaults(faults);
    // One sequence for all choices, as long as the longest; an answer, a JSON text or a tool
    // call ends where it ends, never at an EOS draw.
    request.max_tokens = renderer_->engine_tokens();
    request.min_tokens = std::min(spec.min_tokens, request.max_tokens);
    request.ignore_eos = spec.ignore_eos || structured;
    request.output_seed = spec.seed;
    request.constrained = spec.json_text || spec.tool_call || spec.choice_text;
    request.lora = spec.lora;
    auto id = server_.AddSequence(std::move(request), this);
    if (!id.ok()) {
      ResetGeneration();
      return SendError(BadRequest(id.error().message));
    }
    sequence_ = *id;
    OpenGeneration();
    if (stream) {
      AppendStreamHead();  // headers now, as a real server does before the first token
      Flush();
      ArmKeepAlive();
      if (stream_error_after_ == 0) {
        FailStream();
      } else if (stall_after_ == 0) {
        BeginStall();
      }
    }
  }

  // Stalls and stream errors strike after half of the engine's tokens.
  void PlanStreamFaults(const FaultDraws& faults) {
    const std::int64_t midway = renderer_->engine_tokens() / 2;
    if (faults.stall) stall_after_ = midway;
    if (faults.stream_error) stream_error_after_ = midway;
  }

  void ResetGeneration() {
    renderer_.reset();
    emitted_ = 0;
    progress_.clear();
    cached_tokens_ = 0;
    aborted_ = false;
    writes_at_tick_ = data_writes();
    stall_after_.reset();
    stream_error_after_.reset();
  }

  void OpenGeneration() {
    generation_open_ = true;
    server_.GenerationOpened();
  }

  void CloseGeneration(bool completed) {
    generation_open_ = false;
    server_.GenerationClosed(completed);
  }

  std::optional<std::int64_t> CachedTokens() const {
    if (!server_.ReportsCachedTokens()) return std::nullopt;
    return cached_tokens_;
  }

  // Where stream events go: held back while a stall fault is in progress.
  std::string& Out() { return stalled_ ? held_data_ : data(); }

  // Renders up to kInstantBatchBytes of events, then writes them.
  void PumpInstant() {
    if (stalled_ || !instant_generating_) return;
    const std::int64_t total = renderer_->engine_tokens();
    std::int64_t limit = total;
    if (stall_after_) limit = std::min(limit, *stall_after_);
    if (stream_error_after_) limit = std::min(limit, *stream_error_after_);
    const std::int64_t per_event = server_.config().tokens_per_event;
    const std::int64_t before = emitted_;
    if (emitted_ == 0 && limit > 0) renderer_->AppendRoleEvent(data());
    while (emitted_ < limit && data().size() < kInstantBatchBytes) {
      emitted_ += std::min(per_event, limit - emitted_);
      renderer_->AppendProgress(data(), progress_, emitted_, std::nullopt, per_event,
                                /*flush=*/true);
    }
    server_.InstantTokens(emitted_ - before);
    if (emitted_ == total) {
      instant_generating_ = false;
      server_.InstantEnded(true);
      EndStream();
    } else if (stream_error_after_ && emitted_ == *stream_error_after_) {
      instant_generating_ = false;
      server_.InstantEnded(false);
      FailStream();
      return;
    } else if (stall_after_ && emitted_ == *stall_after_) {
      Flush();
      BeginStall();
      return;
    }
    Flush();
  }

  void EndStream() {
    const GenerationSpec& spec = renderer_->spec();
    std::string& out = Out();
    if (spec.include_usage || server_.config().usage_always) {
      renderer_->AppendUsageEvent(out, renderer_->CompletionTokens(emitted_), CachedTokens());
    }
    if (!server_.config().faults.no_done) renderer_->AppendStreamEnd(out);
    if (stalled_) {
      held_final_ = true;
    } else {
      EndResponse();
    }
  }

  // --fault-stream-error-rate: an error event instead of the rest of the stream.
  void FailStream() {
    ++server_.metrics().fault_stream_errors;
    aborted_ = true;
    if (sequence_ != 0) {
      server_.AbortSequence(sequence_);
      sequence_ = 0;
    }
    std::string& out = Out();
    renderer_->AppendStreamError(
        out, ApiError{500, "InternalServerError",
                      "emulated fault: the engine failed during generation "
                      "(--fault-stream-error-rate)",
                      ""});
    if (!server_.config().faults.no_done) renderer_->AppendStreamEnd(out);
    if (stalled_) {
      held_final_ = true;
    } else {
      EndResponse();
      Flush();
    }
  }

  // --fault-stall-ms: holds back every later event for the stall duration.
  void BeginStall() {
    ++server_.metrics().fault_stalls;
    stall_after_.reset();  // once per stream
    Flush();          // what was produced before the stall still goes out
    stalled_ = true;
    if (!stall_timer_) stall_timer_.emplace(executor());
    stall_timer_->expires_after(server_.config().faults.stall);
    stall_timer_->async_wait([self = Self()](beast::error_code ec) {
      if (ec || self->closed()) return;
      self->EndStall();
      if (self->instant_generating_) return self->PumpInstant();
      self->Flush();
    });
  }

  void EndStall() {
    if (!stalled_) return;
    stalled_ = false;
    if (stall_timer_) stall_timer_->cancel();
    data() += held_data_;
    held_data_.clear();
    if (held_final_) {
      held_final_ = false;
      EndResponse();
    }
  }

  // --keepalive-comments-ms: ": keep-alive" while a stream has written nothing for a period.
  void ArmKeepAlive() {
    const Nanos period = server_.config().keepalive_comments;
    if (period <= Nanos{0}) return;
    if (!keepalive_timer_) keepalive_timer_.emplace(executor());
    keepalive_timer_->expires_after(period);
    keepalive_timer_->async_wait([self = Self()](beast::error_code ec) {
      if (ec) return;
      self->OnKeepAliveTick();
    });
  }

  void OnKeepAliveTick() {
    if (!responding() || !generation_open_ || !renderer_ || response_ending() || held_final_) return;
    if (data_writes() == writes_at_tick_ && !stalled_) {
      data() += kKeepAliveComment;
      Flush();
    }
    writes_at_tick_ = data_writes();
    ArmKeepAlive();
  }

  void CancelTimers() {
    if (health_timer_) health_timer_->cancel();
    health_waiting_ = false;
    if (stall_timer_) stall_timer_->cancel();
    if (keepalive_timer_) keepalive_timer_->cancel();
    stalled_ = false;
    held_data_.clear();
    held_final_ = false;
  }


  void AppendStreamHead() {
    std::string headers = "cache-control: no-cache\r\n";
    headers += kEmulatedHeader;
    StreamHead(StreamContentType(renderer_->spec().wire), headers);
  }

  // `extra_headers`: whole header lines, each ending in CRLF.
  void SendError(const ApiError& error, std::string_view extra_headers = {}) {
    std::string body = RenderErrorFor(wire_, error);
    if (server_.config().faults.cut_utf8) InsertAfter(body, "\"message\":\"", "\xE2\x82");
    SendBody(error.status, "application/json", body, extra_headers);
  }

  // A whole response with a content-length; ends the current response.
  void SendBody(int status, std::string_view content_type, std::string_view body,
                std::string_view extra_headers = {}) {
    renderer_.reset();
    SendWhole(status, content_type, body, fmt::format("{}{}", kEmulatedHeader, extra_headers));
  }

  EmulatorServer::Impl& server_;
  // The request in progress.
  MonoTime arrival_;                // when the request was parsed
  Wire wire_ = Wire::kOpenAi;       // its wire format (its error shapes)
  bool instant_generating_ = false;
  bool generation_open_ = false;    // an accepted generation not yet fully written
  bool aborted_ = false;            // that generation was cut (fault or shutdown)
  std::optional<ResponseRenderer> renderer_;
  SequenceId sequence_ = 0;         // 0: none in the engine model
  std::int64_t emitted_ = 0;        // output tokens produced for the client so far
  std::vector<ChoiceProgress> progress_;  // per choice, what the stream has rendered
  std::int64_t cached_tokens_ = 0;  // prompt tokens the prefix cache served
  MonoTime last_token_at_;
  // Fault plan of the generation in progress (token counts after which they strike).
  std::optional<std::int64_t> stall_after_;
  std::optional<std::int64_t> stream_error_after_;
  bool stalled_ = false;
  bool held_final_ = false;         // the stream ended during a stall: its end is in held_data_
  std::string held_data_;           // events produced during a stall
  std::optional<asio::steady_timer> stall_timer_;
  std::optional<asio::steady_timer> keepalive_timer_;
  std::optional<asio::steady_timer> health_timer_;
  bool health_waiting_ = false;     // a /health answer waits for the engine to go idle
  std::uint64_t writes_at_tick_ = 0;  // data_writes() at the last keep-alive tick
};

Status EmulatorServer::Impl::Listen() {
  started_at_ = Now();
  // Posted before the listener accepts, so no request is served before the stage state is set.
  asio::post(io_, [this] { RunStartupStage(0, Nanos{0}); });
  Status listening = config_.unix_socket.empty() ? listener_.Listen(config_.host, config_.port)
                                                 : listener_.ListenUnix(config_.unix_socket);
  if (!listening.ok()) return listening;
  port_ = listener_.port();
  return Ok{};
}

// Logs the start of stage `stage` (skipping zero-length ones) and arms the timer for its end;
// `offset` is the planned start of the stage relative to started_at_, so timer lateness does not
// accumulate across stages.
void EmulatorServer::Impl::RunStartupStage(std::size_t stage, Nanos offset) {
  if (stopping_) return;
  const std::array<Nanos, 4> durations = {config_.startup.download, config_.startup.load,
                                          config_.startup.compile, config_.startup.warmup};
  while (stage < durations.size() && durations[stage] <= Nanos{0}) ++stage;
  const double t = ToSeconds(Now() - started_at_);
  if (stage == durations.size()) {
    ready_ = true;
    ready_at_ = Now();
    stats_ready_.store(true, std::memory_order_relaxed);
    Log(fmt::format("bakeoff emulate: ready t={:.3f}", t));
    return;
  }
  Log(fmt::format("bakeoff emulate: stage={} state=start t={:.3f}", kStageNames[stage], t));
  const Nanos end = offset + durations[stage];
  startup_timer_.expires_at(started_at_ + end);
  startup_timer_.async_wait([this, stage, end](beast::error_code ec) {
    if (ec || stopping_) return;
    RunStartupStage(stage + 1, end);
  });
}

std::shared_ptr<net::HttpServerConnection> EmulatorServer::Impl::MakeConnection(net::StreamSocket socket) {
  return std::make_shared<Connection>(*this, std::move(socket));
}

// Every open connection (the listener makes only Connections).
std::vector<std::shared_ptr<Connection>> EmulatorServer::Impl::AllConnections() const {
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& connection : listener_.Connections()) all.push_back(std::static_pointer_cast<Connection>(connection));
  return all;
}

bool EmulatorServer::Impl::CountGenerationRequestAndMaybeCrash() {
  ++generation_requests_;
  if (config_.faults.crash_after == 0 || generation_requests_ < config_.faults.crash_after) {
    return false;
  }
  StopHard();
  return true;
}

Result<SequenceId> EmulatorServer::Impl::AddSequence(SequenceRequest request,
                                                     Connection* connection) {
  auto id = scheduler_.Add(std::move(request));
  if (!id.ok()) return id;
  streams_.emplace(*id, connection);
  PublishQueueStats();
  Kick();
  return id;
}

void EmulatorServer::Impl::AbortSequence(SequenceId id) {
  if (streams_.erase(id) == 0) return;
  scheduler_.Abort(id);
  ++metrics_.finished_abort;
  stats_aborted_.fetch_add(1, std::memory_order_relaxed);
  PublishQueueStats();
  WakeIdleWaiters();
}

void EmulatorServer::Impl::DetachSequence(SequenceId id) {
  auto it = streams_.find(id);
  if (it != streams_.end()) it->second = nullptr;  // OnStepDone counts its tokens, sends nothing
}

bool EmulatorServer::Impl::Healthy() const {
  if (ShuttingDown()) return false;
  if (config_.faults.health_lies) return true;
  return ready_ && Now() >= ready_at_ + config_.faults.health_late;
}

void EmulatorServer::Impl::WakeIdleWaiters() {
  if (idle_waiters_.empty() || Busy()) return;
  // Posted: the caller may be in the middle of another connection's handler.
  asio::post(io_, [this] {
    if (Busy() || stopping_) return;
    std::vector<std::weak_ptr<Connection>> waiters;
    waiters.swap(idle_waiters_);
    for (auto& weak : waiters) {
      if (auto connection = weak.lock()) connection->OnIdle();
    }
  });
}

void EmulatorServer::Impl::InstantStarted(std::int64_t prompt_tokens) {
  ++instant_running_;
  instant_prompt_tokens_ += static_cast<std::uint64_t>(prompt_tokens);
}

void EmulatorServer::Impl::InstantEnded(bool finished) {
  --instant_running_;
  WakeIdleWaiters();
  if (finished) {
    ++metrics_.finished_length;
    stats_finished_.fetch_add(1, std::memory_order_relaxed);
  } else {
    ++metrics_.finished_abort;
    stats_aborted_.fetch_add(1, std::memory_order_relaxed);
  }
}

void EmulatorServer::Impl::GenerationClosed(bool completed) {
  --open_generations_;
  if (!shutting_down_ || shutdown_finished_) return;
  if (completed) {
    ++report_.finished;
  } else {
    ++report_.cut;
  }
  if (open_generations_ == 0) {
    // Posted: the caller is in the middle of a connection's handler.
    asio::post(io_, [this] { FinishShutdown(); });
  }
}

std::string EmulatorServer::Impl::RenderMetrics() const {
  EngineCounters engine = scheduler_.counters();
  engine.running += instant_running_;
  engine.prompt_tokens += instant_prompt_tokens_;
  engine.generation_tokens += instant_generation_tokens_;
  return RenderPrometheusMetrics(config_.served_model_name, engine, metrics_);
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
  if (config_.faults.slow_after > 0 && generation_requests_ >= config_.faults.slow_after) {
    plan->end = start + Nanos(std::llround(static_cast<double>((plan->end - start).count()) * config_.faults.slow_factor));
  }
  step_end_ = plan->end;
  // Render ahead: a multiple of what the last steps took for as many events, within bounds.
  const Nanos render_lead(
      std::llround(kRenderLeadFactor * render_ns_per_event_ * static_cast<double>(scheduler_.num_running())));
  const Nanos lead = std::min({render_lead + kRenderLeadMargin, kMaxRenderLead, (plan->end - start) / 2});
  step_wake_at_ = plan->end - std::max(lead, Nanos{0});
  step_timer_.expires_at(step_wake_at_);
  step_timer_.async_wait([this](beast::error_code ec) {
    if (ec || stopping_) return;
    OnStepDone();
  });
}

void EmulatorServer::Impl::OnStepDone() {
  const MonoTime woke = Now();
  metrics_.step_wake_lag.Observe(ToSeconds(woke - step_wake_at_));
  std::span<const TokenEvent> finished = scheduler_.FinishStep();
  step_events_.assign(finished.begin(), finished.end());
  stats_steps_.fetch_add(1, std::memory_order_relaxed);
  // The tokens' instant: the step's planned end, or now when the step is late.
  const MonoTime now = std::max(woke, step_end_);
  std::vector<std::shared_ptr<net::HttpServerConnection>>& touched = step_connections_;  // empty
  for (const TokenEvent& event : step_events_) {
    auto it = streams_.find(event.id);
    if (it == streams_.end()) continue;
    Connection* connection = it->second;
    if (event.finish) {
      streams_.erase(it);
      if (*event.finish == FinishReason::kStop) {
        ++metrics_.finished_stop;
      } else {
        ++metrics_.finished_length;
      }
      stats_finished_.fetch_add(1, std::memory_order_relaxed);
    }
    if (connection == nullptr) continue;  // its client went away (--fault-ignore-disconnect)
    connection->HoldWrites();  // until the step's end, below
    connection->OnToken(event, now);
    touched.push_back(connection->shared_from_this());
  }
  if (!step_events_.empty()) {
    const double per_event = static_cast<double>((Now() - woke).count()) / static_cast<double>(step_events_.size());
    render_ns_per_event_ = render_ns_per_event_ == 0 ? per_event : 0.8 * render_ns_per_event_ + 0.2 * per_event;
  }
  // Nothing leaves before the step's planned end: the I/O thread waits out the lead's rest.
  while (Now() < step_end_) {
  }
  // One write per connection for the whole step.
  if (write_fanout_.FlushAll(touched)) stats_steps_fanned_out_.fetch_add(1, std::memory_order_relaxed);
  touched.clear();  // holds no connection between steps
  metrics_.step_lag.Observe(ToSeconds(Now() - step_end_));
  PublishQueueStats();
  WakeIdleWaiters();
  // Back to back in model time, unless the loop fell behind real time.
  BeginStep(now - step_end_ <= kMaxStepLag ? step_end_ : now);
}

void EmulatorServer::Impl::PublishQueueStats() {
  stats_running_.store(scheduler_.num_running(), std::memory_order_relaxed);
  stats_waiting_.store(scheduler_.num_waiting(), std::memory_order_relaxed);
}

// Common to BeginDrain and AbortAll: no new connections, no new work.
void EmulatorServer::Impl::BeginShutdown() {
  shutting_down_ = true;
  listener_.StopAccepting();
}

void EmulatorServer::Impl::BeginDrainOnIoThread(Nanos timeout) {
  if (stopping_ || shutting_down_) return;
  BeginShutdown();
  if (open_generations_ == 0) return FinishShutdown();
  shutdown_timer_.expires_after(timeout);
  shutdown_timer_.async_wait([this](beast::error_code ec) {
    if (ec || shutdown_finished_) return;
    CutOpenGenerations();
    FinishShutdown();
  });
}

void EmulatorServer::Impl::AbortAllOnIoThread() {
  if (stopping_ || shutting_down_) return;
  BeginShutdown();
  for (auto& connection : AllConnections()) connection->AbortForShutdown();
  if (open_generations_ == 0) return FinishShutdown();
  shutdown_timer_.expires_after(kAbortGrace);
  shutdown_timer_.async_wait([this](beast::error_code ec) {
    if (ec || shutdown_finished_) return;
    CutOpenGenerations();
    FinishShutdown();
  });
}

void EmulatorServer::Impl::CutOpenGenerations() {
  for (auto& connection : AllConnections()) {
    if (connection->generation_open()) connection->Close();
  }
}

void EmulatorServer::Impl::FinishShutdown() {
  if (shutdown_finished_) return;
  shutdown_finished_ = true;
  shutdown_timer_.cancel();
  StopOnIoThread();
}

void EmulatorServer::Impl::PublishShutdownDone() {
  {
    std::lock_guard<std::mutex> lock(shutdown_mutex_);
    if (shutdown_done_) return;
    shutdown_done_ = true;
    shutdown_report_ = report_;
  }
  shutdown_cv_.notify_all();
}

void EmulatorServer::Impl::StopOnIoThread() {
  if (stopping_) return;
  stopping_ = true;
  listener_.Stop();
  step_timer_.cancel();
  startup_timer_.cancel();
  shutdown_timer_.cancel();
  for (auto& connection : AllConnections()) connection->Close();
  PublishQueueStats();
  PublishShutdownDone();
}

// --fault-crash-after: what a crashed process looks like from outside: every connection reset,
// nothing listening, no goodbye.
void EmulatorServer::Impl::StopHard() {
  stats_crashed_.store(true, std::memory_order_relaxed);
  stopping_ = true;
  listener_.Stop();
  step_timer_.cancel();
  startup_timer_.cancel();
  shutdown_timer_.cancel();
  for (auto& connection : AllConnections()) connection->Close(/*reset=*/true);
  PublishShutdownDone();
  if (config_.on_crash) config_.on_crash();
}

// --- EmulatorServer ---

Status ValidateEmulatorConfig(const EmulatorConfig& config) {
  auto invalid = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  if (config.served_model_name.empty()) return invalid("served_model_name must not be empty");
  const StartupStages& s = config.startup;
  if (s.download < Nanos{0} || s.load < Nanos{0} || s.compile < Nanos{0} || s.warmup < Nanos{0}) {
    return invalid("startup stage durations must be >= 0");
  }
  if (config.idle_timeout <= Nanos{0} || config.request_timeout <= Nanos{0}) {
    return invalid("idle_timeout and request_timeout must be > 0");
  }
  if (config.max_waiting < 0) return invalid("max_waiting must be >= 0");
  if (config.tokens_per_event < 1) return invalid("tokens_per_event must be >= 1");
  if (config.write_threads < 1 || config.write_threads > kMaxWriteThreads) {
    return invalid(fmt::format("write_threads must be in [1, {}]", kMaxWriteThreads));
  }
  if (config.keepalive_comments < Nanos{0}) return invalid("keepalive_comments must be >= 0");
  const FaultConfig& f = config.faults;
  for (auto [name, rate] : {std::pair{"faults.error_rate", f.error_rate},
                            std::pair{"faults.stall_rate", f.stall_rate},
                            std::pair{"faults.stream_error_rate", f.stream_error_rate}}) {
    if (!(rate >= 0 && rate <= 1)) return invalid(fmt::format("{} must be in [0, 1]", name));
  }
  if (f.stall < Nanos{0}) return invalid("faults.stall must be >= 0");
  if (f.health_busy_delay < Nanos{0}) return invalid("faults.health_busy_delay must be >= 0");
  if (f.health_late < Nanos{0}) return invalid("faults.health_late must be >= 0");
  if (config.not_ready_status < 200 || config.not_ready_status > 599) {
    return invalid("not_ready_status must be in [200, 599]");
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
  // The write fan-out's io_uring ring is made on the I/O thread, the one that sends on it.
  std::promise<void> opened;
  std::future<void> open = opened.get_future();
  impl->thread_ = std::thread([raw, opened = std::move(opened)]() mutable {
    raw->write_fanout_.Open();
    raw->unbatched_writes_ = raw->write_fanout_.sender().unbatched_reason();
    opened.set_value();
    raw->Run();
  });
  open.wait();
  return std::unique_ptr<EmulatorServer>(new EmulatorServer(std::move(impl)));
}

EmulatorServer::EmulatorServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EmulatorServer::~EmulatorServer() { Stop(); }

std::uint16_t EmulatorServer::port() const { return impl_->port_; }

const EmulatorConfig& EmulatorServer::config() const { return impl_->config_; }

const std::string& EmulatorServer::unbatched_writes() const { return impl_->unbatched_writes_; }

void EmulatorServer::BeginDrain(Nanos timeout) {
  Impl* impl = impl_.get();
  asio::post(impl->io_, [impl, timeout] { impl->BeginDrainOnIoThread(timeout); });
}

void EmulatorServer::AbortAll() {
  Impl* impl = impl_.get();
  asio::post(impl->io_, [impl] { impl->AbortAllOnIoThread(); });
}

std::optional<ShutdownReport> EmulatorServer::WaitShutdown(Nanos max_wait) {
  std::unique_lock<std::mutex> lock(impl_->shutdown_mutex_);
  if (!impl_->shutdown_cv_.wait_for(lock, max_wait, [this] { return impl_->shutdown_done_; })) {
    return std::nullopt;
  }
  return impl_->shutdown_report_;
}

void EmulatorServer::Stop() {
  if (impl_->stop_requested_.exchange(true)) return;
  Impl* impl = impl_.get();
  asio::post(impl->io_, [impl] { impl->StopOnIoThread(); });
  if (impl->thread_.joinable()) impl->thread_.join();
  impl->PublishShutdownDone();  // the loop may have ended before running the posted stop
}

EmulatorStats EmulatorServer::stats() const {
  EmulatorStats stats;
  stats.connections_open = impl_->stats_connections_.load(std::memory_order_relaxed);
  stats.requests_total = impl_->stats_requests_.load(std::memory_order_relaxed);
  stats.running = impl_->stats_running_.load(std::memory_order_relaxed);
  stats.waiting = impl_->stats_waiting_.load(std::memory_order_relaxed);
  stats.finished = impl_->stats_finished_.load(std::memory_order_relaxed);
  stats.aborted = impl_->stats_aborted_.load(std::memory_order_relaxed);
  stats.rejected = impl_->stats_rejected_.load(std::memory_order_relaxed);
  stats.steps = impl_->stats_steps_.load(std::memory_order_relaxed);
  stats.steps_fanned_out = impl_->stats_steps_fanned_out_.load(std::memory_order_relaxed);
  stats.ready = impl_->stats_ready_.load(std::memory_order_relaxed);
  stats.crashed = impl_->stats_crashed_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace bakeoff::emulate
