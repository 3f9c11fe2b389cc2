// emulate/server_lifecycle.cc: the emulated server's life cycle on the I/O thread: the Impl's
// making, the start-up stages and readiness, and the ends: drain, abort, shutdown and stop
// (contract in server.h; declarations in server_impl.h).
//
// Every accepted generation is "open" from acceptance until its last byte is written or its
// connection closes; the count of open generations is what a drain waits for, and a shutdown's
// report counts how each of them ended.
#include "emulate/server_impl.h"

#include <array>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

namespace bakeoff::emulate {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

using server_internal::Now;
using server_internal::UnixSeconds;

// After AbortAll, how long the last bytes (error events) may take to be written.
constexpr Nanos kAbortGrace = std::chrono::seconds(2);

constexpr std::array<std::string_view, 4> kStageNames = {"download", "load", "compile", "warmup"};

}  // namespace

EmulatorServer::Impl::Impl(EmulatorConfig config)
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

bool EmulatorServer::Impl::Healthy() const {
  if (ShuttingDown()) return false;
  if (config_.faults.health_lies) return true;
  return ready_ && Now() >= ready_at_ + config_.faults.health_late;
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

}  // namespace bakeoff::emulate
