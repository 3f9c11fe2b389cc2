// emulate/server_impl.h (internal to emulate/server*.cc)
//
// Owns: the declarations the emulated server's translation units share: EmulatorServer::Impl
// (the I/O thread's state: listener, timers, the engine model, metrics, the life cycle) and
// Connection (one accepted socket: what each request means, and the generation it carries), with
// the few helpers more than one of them uses. Their members are defined by job:
//   server.cc            EmulatorServer's public methods and ValidateEmulatorConfig
//   server_lifecycle.cc  start-up stages, readiness, drain, abort, shutdown and stop
//   server_engine.cc     the engine step loop and the sequences it runs (Impl)
//   server_routes.cc     Connection's HTTP side: routing, /health, admission, error and whole
//                        bodies
//   server_generation.cc Connection's generation: choices, tokens, instant pumping, stream end,
//                        keep-alive comments, abort on shutdown
//   server_faults.cc     fault injection: per-request draws, errors, stalls, stream errors, bad
//                        input as 500, cut UTF-8, health delays, the crash
// Contract: emulate/server.h; design notes at the top of server.cc and of each file.
//
// Carries Boost (through net/http_server.h): only the server's own translation units include it
// (tests/unit/core/layering_test.cc).
//
// Threading: as server.h says: everything here runs on the I/O thread, except the atomics and
// the shutdown hand-off, which other threads read.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/rng.h"
#include "emulate/metrics.h"
#include "emulate/openai_api.h"
#include "emulate/server.h"
#include "net/http_server.h"

namespace bakeoff::emulate {

namespace server_internal {

inline MonoTime Now() { return std::chrono::steady_clock::now(); }

inline std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline ApiError Unavailable(std::string message) {
  return ApiError{503, "ServiceUnavailableError", std::move(message), ""};
}

// --fault-cut-utf8 (server_faults.cc): /v1/models' body gains a second card whose id (`model`
// followed by a lone lead byte) ends inside a character; an error body's message starts with a
// cut character.
void CutUtf8InModelList(std::string& body, std::string_view model);
void CutUtf8InErrorBody(std::string& body);

}  // namespace server_internal

class Connection;

class EmulatorServer::Impl {
 public:
  // server_lifecycle.cc
  explicit Impl(EmulatorConfig config);

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
  boost::asio::io_context io_{1};
  net::ServerLimits limits_;
  net::HttpListener listener_;
  boost::asio::steady_timer step_timer_;
  boost::asio::steady_timer startup_timer_;
  boost::asio::steady_timer shutdown_timer_;
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
  // server_lifecycle.cc
  std::shared_ptr<net::HttpServerConnection> MakeConnection(net::StreamSocket socket);
  void RunStartupStage(std::size_t stage, Nanos offset);
  void Log(const std::string& line) const {
    if (config_.log) config_.log(line);
  }
  // server_engine.cc
  // Starts a step now unless one is in flight (coalesced: many arrivals, one kick).
  void Kick();
  void BeginStep(MonoTime start);
  void OnStepDone();
  void PublishQueueStats();
  // Answers the /health requests waiting for idleness once the engine is idle.
  void WakeIdleWaiters();
  // server_lifecycle.cc
  void BeginShutdown();
  void CutOpenGenerations();
  void FinishShutdown();
  // server_faults.cc
  void StopHard();
  // server_lifecycle.cc
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

  // server_generation.cc
  // A token of this connection's sequence (modelled mode), produced by the step that ended at
  // `now`. The caller writes it (WriteFanout) after the whole step has been dispatched.
  void OnToken(const TokenEvent& event, MonoTime now);
  // AbortAll: ends the generation in progress with an error and closes after writing it.
  void AbortForShutdown();

  // server_routes.cc
  // The engine went idle (or the health delay passed): answers a waiting /health.
  void OnIdle();

 private:
  // --- server_routes.cc: the HTTP side ---
  // Aborts (or, with --fault-ignore-disconnect, detaches) the generation in progress.
  void OnClose() override;
  void OnMalformedRequest(int status, const std::string& message) override;
  void OnDataWritten() override;
  void OnResponseWritten() override;
  void OnRequest(Request& request) override;
  void SendLoading();
  // Whether a generation request may start now; if not, its answer (or the crash) is under way.
  bool AdmitGeneration(bool loading);
  void AnswerHealth();
  void AppendStreamHead();
  // `extra_headers`: whole header lines, each ending in CRLF.
  void SendError(const ApiError& error, std::string_view extra_headers = {});
  // A whole response with a content-length; ends the current response.
  void SendBody(int status, std::string_view content_type, std::string_view body,
                std::string_view extra_headers = {});

  // --- server_faults.cc: fault injection ---
  // Draws this request's faults, always in the same order, so a seed fixes which requests fail.
  struct FaultDraws {
    bool error = false;
    bool stall = false;
    bool stream_error = false;
  };
  FaultDraws DrawFaults();
  // --fault-health-busy-delay-ms: the answer waits for `delay` or for the engine to go idle.
  void DelayHealth(Nanos delay);
  // --fault-bad-input-500: a 400 becomes a 500.
  void SendBadInput(const ApiError& error);
  // --fault-error-rate: a 500 instead of the generation, before anything is streamed.
  void FailRequest();
  // Stalls and stream errors strike after half of the engine's tokens.
  void PlanStreamFaults(const FaultDraws& faults);
  // --fault-stream-error-rate: an error event instead of the rest of the stream.
  void FailStream();
  // --fault-stall-ms: holds back every later event for the stall duration.
  void BeginStall();
  void EndStall();

  // --- server_generation.cc: the generation in progress ---
  // Each choice's output: an --answers answer for the request's answer key, a JSON text
  // (response_format) or tool-call arguments, or the word stream of the request's seed (varied
  // per request with --fault-nondeterministic); then the stop strings (not for tool calls, nor
  // with --fault-ignore-stop). `structured` tells whether the output is an answer, JSON or a tool
  // call, which an EOS draw must not cut.
  std::vector<ChoiceText> ChoicesFor(const GenerationSpec& spec, bool& structured);
  void BeginGeneration(std::variant<GenerationSpec, ApiError> parsed);
  void ResetGeneration();
  void OpenGeneration();
  void CloseGeneration(bool completed);
  std::optional<std::int64_t> CachedTokens() const;
  // Where stream events go: held back while a stall fault is in progress.
  std::string& Out() { return stalled_ ? held_data_ : data(); }
  // Renders up to kInstantBatchBytes of events, then writes them.
  void PumpInstant();
  void EndStream();
  // --keepalive-comments-ms: ": keep-alive" while a stream has written nothing for a period.
  void ArmKeepAlive();
  void OnKeepAliveTick();
  void CancelTimers();

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
  std::optional<boost::asio::steady_timer> stall_timer_;
  std::optional<boost::asio::steady_timer> keepalive_timer_;
  std::optional<boost::asio::steady_timer> health_timer_;
  bool health_waiting_ = false;     // a /health answer waits for the engine to go idle
  std::uint64_t writes_at_tick_ = 0;  // data_writes() at the last keep-alive tick
};

}  // namespace bakeoff::emulate
