// emulate/server_faults.cc: the fault injection of the emulated server, the knobs that imitate
// misbehaving engines (server.h FaultConfig; docs/emulator.md, "Faults and quirks"): each
// request's draws, stalls and stream errors, bad input answered 500, text cut inside UTF-8
// characters, /health held while busy, and the crash. Declarations in server_impl.h; the faults
// that only bend a step or an output (slow steps, ignored stops, varied output) stay where the
// step or the output is made (server_engine.cc, server_generation.cc).
#include "emulate/server_impl.h"

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace bakeoff::emulate {

namespace {

namespace beast = boost::beast;

// --fault-cut-utf8: `bytes` spliced into `body` right after the first `marker` (no marker: unchanged).
void InsertAfter(std::string& body, std::string_view marker, std::string_view bytes) {
  if (const std::size_t at = body.find(marker); at != std::string::npos) body.insert(at + marker.size(), bytes);
}

}  // namespace

namespace server_internal {

void CutUtf8InModelList(std::string& body, std::string_view model) {
  InsertAfter(body, "\"data\":[",
              fmt::format("{{\"id\":\"{}-\xC3\",\"object\":\"model\",\"owned_by\":\"bakeoff\"}},",
                          model));
}

void CutUtf8InErrorBody(std::string& body) { InsertAfter(body, "\"message\":\"", "\xE2\x82"); }

}  // namespace server_internal

bool EmulatorServer::Impl::CountGenerationRequestAndMaybeCrash() {
  ++generation_requests_;
  if (config_.faults.crash_after == 0 || generation_requests_ < config_.faults.crash_after) {
    return false;
  }
  StopHard();
  return true;
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

Connection::FaultDraws Connection::DrawFaults() {
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

void Connection::DelayHealth(Nanos delay) {
  health_waiting_ = true;
  server_.WaitForIdle(Self());
  if (!health_timer_) health_timer_.emplace(executor());
  health_timer_->expires_after(delay);
  health_timer_->async_wait([self = Self()](beast::error_code ec) {
    if (ec) return;
    self->OnIdle();
  });
}

void Connection::SendBadInput(const ApiError& error) {
  if (error.status != 400 || !server_.config().faults.bad_input_500) return SendError(error);
  SendError(ApiError{500, "InternalServerError",
                     fmt::format("Internal Server Error: {}", error.message), error.param});
}

void Connection::FailRequest() {
  ++server_.metrics().fault_errors;
  SendError(ApiError{500, "InternalServerError",
                     "emulated fault: the engine failed this request "
                     "(--fault-error-rate)",
                     ""});
}

void Connection::PlanStreamFaults(const FaultDraws& faults) {
  const std::int64_t midway = renderer_->engine_tokens() / 2;
  if (faults.stall) stall_after_ = midway;
  if (faults.stream_error) stream_error_after_ = midway;
}

void Connection::FailStream() {
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

void Connection::BeginStall() {
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

void Connection::EndStall() {
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

}  // namespace bakeoff::emulate
