// qualify/stream_batch.h
//
// Owns: a batch of streaming generations (on a pooling route, whole pooling requests) sent at
// once to a candidate and watched while the probe acts on it (cancels them, signals the engine,
// polls its health): each one measured by load::Exchange into a measure::RequestRecord with
// exactly one Outcome, so a probe can tell a stream that completed from one that ended with an
// identifiable error or was cut silently.
// Does not own: what a probe concludes from the records.
//
// Thread-safety: the requests run on a private event-loop thread; every public method is called
// from one other thread. The destructor cancels what still runs and joins.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "load/exchange.h"
#include "measure/record.h"
#include "net/event_loop.h"
#include "net/http_client.h"

namespace bakeoff::target {
class Candidate;
}  // namespace bakeoff::target

namespace bakeoff::qualify {

class StreamBatch {
 public:
  // Starts one POST per body, all at once, to the candidate's route (streaming where it
  // generates). `options.deadlines.total` bounds each request.
  StreamBatch(const target::Candidate& candidate, net::ClientOptions options, const std::vector<std::string>& bodies);
  ~StreamBatch();
  StreamBatch(const StreamBatch&) = delete;
  StreamBatch& operator=(const StreamBatch&) = delete;

  std::size_t size() const { return exchanges_.size(); }
  bool streaming() const { return streaming_; }  // false: whole (pooling) answers
  // Streams that have received a first token, or have ended (either way nothing more to wait for);
  // a whole (pooling) request counts once it is written, since nothing comes before its end.
  std::size_t Started() const { return started_; }
  std::size_t Ended() const { return ended_; }
  // Waits until at least `count` streams have started (as above), up to `timeout`.
  bool WaitStarted(std::size_t count, Nanos timeout) const;
  // Cancels every stream that has not ended, now.
  void CancelAll();
  // Waits up to `timeout` for every stream to end, cancels the rest, stops the thread, and returns
  // the records in request order. Call once.
  std::vector<measure::RequestRecord> Finish(Nanos timeout);
  // Each stream's Retry-After header ("" when absent), in request order. Valid after Finish.
  const std::vector<std::string>& retry_after() const { return retry_after_; }

 private:
  // Hands every event to the stream's Exchange, keeping the one header the Exchange does not.
  class HeaderTap final : public net::ResponseHandler {
   public:
    HeaderTap(load::Exchange* exchange, std::string* retry_after)
        : exchange_(exchange), retry_after_(retry_after) {}
    void OnConnected(MonoTime at, bool reused) override { exchange_->OnConnected(at, reused); }
    void OnRequestWritten(MonoTime at) override { exchange_->OnRequestWritten(at); }
    void OnStaleConnectionRetry(MonoTime at, std::string_view reason) override {
      exchange_->OnStaleConnectionRetry(at, reason);
    }
    void OnHeaders(MonoTime at, const net::ResponseHead& head) override {
      *retry_after_ = std::string(head.Header("Retry-After"));
      exchange_->OnHeaders(at, head);
    }
    Status OnBody(MonoTime at, std::string_view bytes) override {
      return exchange_->OnBody(at, bytes);
    }
    void OnEnd(MonoTime at, net::TransportEnd end, std::string_view detail) override {
      exchange_->OnEnd(at, end, detail);
    }

   private:
    load::Exchange* exchange_;
    std::string* retry_after_;
  };

  void Tally();  // loop thread: refreshes started_ and ended_

  bool streaming_ = true;
  net::EventLoop loop_;
  std::unique_ptr<net::HttpClient> client_;
  std::vector<std::unique_ptr<load::Exchange>> exchanges_;
  std::vector<std::unique_ptr<HeaderTap>> taps_;
  std::vector<std::string> retry_after_;      // loop thread until Finish
  std::vector<measure::RequestRecord> done_;  // by request index; guarded by mutex_
  std::vector<bool> ended_flags_;             // loop thread only
  mutable std::mutex mutex_;
  std::atomic<std::size_t> started_{0};
  std::atomic<std::size_t> ended_{0};
  net::EventLoop::TimerPtr tally_timer_;
  std::thread thread_;
};

}  // namespace bakeoff::qualify
