// qualify/stream_batch.cc
#include "qualify/stream_batch.h"

#include <future>

#include "target/candidate.h"

namespace bakeoff::qualify {
namespace {

constexpr Nanos kTallyEvery = std::chrono::milliseconds(2);

}  // namespace

StreamBatch::StreamBatch(const target::Candidate& candidate, net::ClientOptions options,
                         const std::vector<std::string>& bodies) {
  const dialect::Api api = candidate.spec().api;
  streaming_ = dialect::ApiGenerates(api);
  const std::string path = dialect::RequestPath(api, candidate.model(), streaming_);
  const std::string secret = options.bearer_token;  // kept out of the records' error texts
  client_ = std::make_unique<net::HttpClient>(loop_, candidate.endpoint(), std::move(options));
  done_.resize(bodies.size());
  ended_flags_.assign(bodies.size(), false);
  retry_after_.resize(bodies.size());
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    exchanges_.push_back(
        std::make_unique<load::Exchange>(api, streaming_, secret, [this, i](load::Exchange& exchange) {
          std::lock_guard lock(mutex_);
          done_[i] = exchange.record();
          ended_flags_[i] = true;
        }));
    taps_.push_back(std::make_unique<HeaderTap>(exchanges_.back().get(), &retry_after_[i]));
  }
  loop_.Post([this, path, bodies] {
    const MonoTime now = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      measure::RequestRecord record;
      record.id = i;
      record.intended_send = now;
      record.send_start = now;
      exchanges_[i]->Begin(std::move(record));
      net::HttpRequest request;
      request.path = path;
      request.body = bodies[i];
      client_->Start(std::move(request), taps_[i].get());
    }
    Tally();
  });
  thread_ = std::thread([this] { loop_.Run(); });
}

StreamBatch::~StreamBatch() {
  if (thread_.joinable()) Finish(Nanos{0});
}

void StreamBatch::Tally() {
  std::size_t started = 0;
  std::size_t ended = 0;
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < exchanges_.size(); ++i) {
      const bool is_ended = ended_flags_[i];
      ended += is_ended ? 1 : 0;
      const measure::RequestRecord& record = exchanges_[i]->record();
      const bool answering = streaming_ ? record.first_token.has_value() : record.request_written.has_value();
      started += (is_ended || answering) ? 1 : 0;
    }
  }
  started_ = started;
  ended_ = ended;
  tally_timer_ = loop_.RunAt(std::chrono::steady_clock::now() + kTallyEvery, [this] { Tally(); });
}

bool StreamBatch::WaitStarted(std::size_t count, Nanos timeout) const {
  const MonoTime until = std::chrono::steady_clock::now() + timeout;
  while (started_ < count) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void StreamBatch::CancelAll() {
  std::promise<void> done;
  loop_.Post([this, &done] {
    client_->Shutdown();
    done.set_value();
  });
  done.get_future().wait();
}

std::vector<measure::RequestRecord> StreamBatch::Finish(Nanos timeout) {
  const MonoTime until = std::chrono::steady_clock::now() + timeout;
  while (ended_ < exchanges_.size() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::promise<void> done;
  loop_.Post([this, &done] {
    client_->Shutdown();  // every unfinished request ends kCancelled, synchronously
    net::EventLoop::Cancel(tally_timer_);
    loop_.Stop();
    done.set_value();
  });
  done.get_future().wait();
  thread_.join();
  client_.reset();
  std::lock_guard lock(mutex_);
  return done_;
}

}  // namespace bakeoff::qualify
