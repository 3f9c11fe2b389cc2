// emulate/server.cc: EmulatorServer's public methods over its Impl (contract in server.h; the
// shared declarations in server_impl.h, which lists the files that define the rest by job).
//
// Design notes:
// - One I/O thread owns everything (listener, connections, timers, the Scheduler and the
//   metrics), so nothing is locked; EmulatorServer's public methods reach it by posting.
// - A stream is one chunked HTTP/1.1 body whose chunks each hold every SSE event (WHATWG HTML
//   "Server-sent events") produced for the connection since its last write: one engine step's
//   tokens in modelled mode, up to kInstantBatchBytes of events in instant mode
//   (server_generation.cc).
// - Every accepted generation is "open" from acceptance until its last byte is written or its
//   connection closes; the count of open generations is what a drain waits for
//   (server_lifecycle.cc).
// - A step's token events are rendered ahead of its planned end, with writes held
//   (server_engine.cc).
#include "emulate/server.h"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "emulate/server_impl.h"

namespace bakeoff::emulate {

namespace {

namespace asio = boost::asio;

}  // namespace

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
