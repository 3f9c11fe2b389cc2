// net/event_loop.h
//
// Owns: one single-threaded event loop (an Asio io_context behind a pimpl, so that only net/
// and the emulator's server compile Asio). A load worker owns one EventLoop and runs it on its
// own thread; every callback it schedules runs on that thread.
// Does not own: what runs on it (load/ decides when to send, net/http_client.h sends).
//
// Thread-safety: Post() and Stop() may be called from any thread; everything else only from the
// loop's own thread (or before Run()).
#pragma once

#include <functional>
#include <memory>

#include "core/clock.h"

namespace bakeoff::net {

class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs callbacks until Stop() is called. Returns at once if Stop() was called before.
  void Run();
  // Runs callbacks until there is no pending work (no timers, no I/O), or Stop().
  void RunUntilIdle();
  // Makes Run() return soon; pending callbacks are not run. Safe from any thread and signal-free
  // contexts (not from a signal handler).
  void Stop();
  bool stopped() const;

  // Queues `fn` to run on the loop thread.
  void Post(std::function<void()> fn);

  // Runs `fn` on the loop thread at (or just after) the steady-clock instant `at`; at once if
  // `at` has passed. The returned handle cancels the call if it has not run yet.
  class Timer;
  using TimerPtr = std::shared_ptr<Timer>;
  TimerPtr RunAt(MonoTime at, std::function<void()> fn);
  static void Cancel(const TimerPtr& timer);

  // The underlying asio::io_context, for net/ internals and the emulator's server only.
  void* native_context();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bakeoff::net
