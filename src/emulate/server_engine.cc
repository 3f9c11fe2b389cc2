// emulate/server_engine.cc: the engine step loop of the emulated server: sequences queued in the
// engine model (emulate/scheduler.h), steps run back to back in real time while there is work,
// each step's tokens handed to their connections and written at the step's end; the instant-mode
// bookkeeping and /metrics (contract in server.h; declarations in server_impl.h).
//
// A step's token events are rendered ahead of its planned end, by a lead learnt from the last
// steps' render time (BeginStep), with writes held (HttpServerConnection::HoldWrites); the I/O
// thread then waits out the rest of the lead (OnStepDone), and the tokens leave at the step's
// end. Rendering 1,024 events takes about a millisecond, which the step's lag would otherwise
// carry; vLLM's asynchronous scheduling likewise hides the CPU's part of a step behind the GPU's.
#include "emulate/server_impl.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

namespace bakeoff::emulate {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

using server_internal::Now;

// When the step timer fires later than this after the planned step end, the next step starts
// at the actual time (the server fell behind real time) instead of back to back.
constexpr Nanos kMaxStepLag = std::chrono::milliseconds(10);
// The render lead (OnStepDone): at most this, and at most half the step, so that a lead learnt
// on a slow moment cannot block the I/O thread for long.
constexpr Nanos kMaxRenderLead = std::chrono::milliseconds(3);
// The lead is this many times the render time the last steps predict, plus the margin: a step's
// render time varies from step to step (the slowest take over twice the median), and what a
// render overruns the step's end adds to its lag, while what the lead has to spare costs only
// the wait.
constexpr double kRenderLeadFactor = 2.0;
constexpr Nanos kRenderLeadMargin = std::chrono::microseconds(100);

}  // namespace

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

}  // namespace bakeoff::emulate
