// net/event_loop.cc
//
// Owns: the EventLoop implementation over one asio::io_context. Timers are asio steady_timers,
// which on Linux are backed by timerfd with nanosecond resolution, so RunAt() wakes well under a
// millisecond after its instant (the rest is scheduling noise of the host).
#include "net/event_loop.h"

#include <utility>  // Before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it.

#include <atomic>
#include <optional>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace bakeoff::net {

namespace asio = boost::asio;

struct EventLoop::Impl {
  // A concurrency hint of 1 lets Asio skip some locking for the single thread that runs it;
  // Post() and Stop() from other threads stay safe.
  asio::io_context context{1};
  std::atomic<bool> stop_requested{false};
};

class EventLoop::Timer {
 public:
  Timer(asio::io_context& context, std::function<void()> fn)
      : timer_(context), fn_(std::move(fn)) {}

  asio::steady_timer timer_;
  std::function<void()> fn_;
  bool cancelled_ = false;
};

EventLoop::EventLoop() : impl_(std::make_unique<Impl>()) {}

EventLoop::~EventLoop() = default;

void EventLoop::Run() {
  if (impl_->stop_requested.load(std::memory_order_acquire)) return;
  if (impl_->context.stopped()) impl_->context.restart();
  auto guard = asio::make_work_guard(impl_->context);
  impl_->context.run();
}

void EventLoop::RunUntilIdle() {
  if (impl_->stop_requested.load(std::memory_order_acquire)) return;
  if (impl_->context.stopped()) impl_->context.restart();
  impl_->context.run();
}

void EventLoop::Stop() {
  impl_->stop_requested.store(true, std::memory_order_release);
  impl_->context.stop();
}

bool EventLoop::stopped() const { return impl_->stop_requested.load(std::memory_order_acquire); }

void EventLoop::Post(std::function<void()> fn) { asio::post(impl_->context, std::move(fn)); }

EventLoop::TimerPtr EventLoop::RunAt(MonoTime at, std::function<void()> fn) {
  auto timer = std::make_shared<Timer>(impl_->context, std::move(fn));
  timer->timer_.expires_at(at);
  // The handler holds the timer alive until it has run or been cancelled.
  timer->timer_.async_wait([timer](const boost::system::error_code& ec) {
    if (ec || timer->cancelled_) return;
    auto callback = std::move(timer->fn_);
    callback();
  });
  return timer;
}

void EventLoop::Cancel(const TimerPtr& timer) {
  if (!timer) return;
  // The flag covers a timer that has expired but whose handler is already queued.
  timer->cancelled_ = true;
  timer->timer_.cancel();
  timer->fn_ = nullptr;
}

void* EventLoop::native_context() { return &impl_->context; }

}  // namespace bakeoff::net
