#include "load/runner.h"

#include <charconv>

#include <time.h>

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "dialect/codec.h"
#include "load/exchange.h"
#include "load/prompt_text.h"
#include "load/dispatcher.h"
#include "net/event_loop.h"

namespace bakeoff::load {
namespace {

using measure::Outcome;
using measure::RequestRecord;

// How often each worker samples its own event-loop lag and looks at the stop flag.
constexpr Nanos kTickPeriod = std::chrono::milliseconds(10);
// How often a running step reports its progress (on_tick).
constexpr Nanos kProgressPeriod = std::chrono::milliseconds(250);

// CPU time the calling thread has used.
Nanos ThreadCpuTime() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + Nanos(now.tv_nsec);
}

// A request that never got a connection to the server, or lost a fresh one before any byte came
// back: the server is down, not slow (closed-loop slots back off after one).
bool FailedToConnect(const RequestRecord& r) {
  if (r.outcome == Outcome::kConnectFailed) return true;
  if (r.outcome == Outcome::kTimeout) return !r.connected;
  return r.outcome == Outcome::kReset && !r.connection_reused && !r.headers_received;
}

// Shared by the workers of one step.
struct StepContext {
  const RunSpec* run = nullptr;
  const StepSpec* step = nullptr;
  std::uint32_t step_index = 0;
  MonoTime t0;
  const TracePlan* trace_plan = nullptr;  // trace replay only
  RecordSink* sink = nullptr;
  const std::atomic<bool>* stop = nullptr;
  Progress* progress = nullptr;
  const PromptText* prompts = nullptr;
  StepDispatchState dispatch;

  // Whether requests still succeed, across the step's workers.
  std::mutex failures_mutex;
  std::uint64_t failures_in_a_row = 0;    // GUARDED_BY(failures_mutex)
  std::optional<MonoTime> failing_since;  // GUARDED_BY(failures_mutex)
  std::string stopped_reason;             // GUARDED_BY(failures_mutex)
  std::atomic<bool> step_stopped{false};
  std::atomic<bool> all_well{true};  // no failure since the last success: the common, lock-free case

  // Notes how `record` ended; stops the step when nothing has succeeded for too long.
  void NoteOutcome(const RequestRecord& record, MonoTime now) {
    if (record.outcome == Outcome::kCancelled) return;  // ours, not the server's
    const bool ok = record.outcome == Outcome::kOk;
    if (ok && all_well.load(std::memory_order_relaxed)) return;
    std::lock_guard lock(failures_mutex);
    if (ok) {
      failures_in_a_row = 0;
      failing_since.reset();
      all_well.store(true, std::memory_order_relaxed);
      return;
    }
    all_well.store(false, std::memory_order_relaxed);
    if (failures_in_a_row++ == 0) failing_since = now;
    const bool given_up = failures_in_a_row >= kGiveUpMinFailures && now - *failing_since >= run->give_up_after;
    if (step_stopped.load() || !given_up) return;
    stopped_reason = fmt::format(
        "stopped: no request succeeded for {:.1f} s ({} failed in a row; last: {})",
        ToSeconds(now - *failing_since), failures_in_a_row, record.error);
    step_stopped.store(true);
  }
};

// A dispatched request with its body encoded, waiting for its send instant.
struct ReadyRequest {
  DispatchOrder order;
  std::string body;
};

// Planned requests prepared ahead of their instants, per worker (bursts of simultaneous arrivals
// are common in real traces), and how close to the next send instant preparing stops.
constexpr std::size_t kPrepareAhead = 32;
constexpr Nanos kPrepareMargin = std::chrono::milliseconds(1);

// One thread, one event loop, one HTTP client: the transport of its share of the step's requests,
// which its Dispatcher decides.
class Worker final : public Sender {
 public:
  Worker(StepContext& context, std::uint32_t index, std::uint32_t count)
      : context_(context), index_(index),
        client_(loop_, context.run->target.endpoint, context.run->target.client),
        recorder_(context.run->slo),
        dispatcher_(*context.run, context.step_index, *context.prompts, context.trace_plan, context.dispatch, index,
                    count, context.t0, RealClock(), *this) {}

  void Run() {
    const MonoTime wall_start = RealClock().Now();
    const Nanos cpu_start = ThreadCpuTime();
    loop_.Post([this] { Start(); });
    loop_.Run();
    const Nanos wall = RealClock().Now() - wall_start;
    if (wall > Nanos(0)) {
      cpu_share_ = static_cast<double>((ThreadCpuTime() - cpu_start).count()) /
                   static_cast<double>(wall.count());
    }
  }

  const measure::StepRecorder& recorder() const { return recorder_; }
  double cpu_share() const { return cpu_share_; }
  std::uint64_t backoff_waits() const { return backoff_waits_; }
  Nanos backoff_total() const { return backoff_total_; }
  std::size_t PlannedSends() const { return dispatcher_.PlannedSends(); }

  // Sender: a request the dispatcher decided on outside the schedule (a closed-loop slot's next, a
  // session's next turn; always from a frame of this worker's own, never inside the HTTP client's
  // callback): sent now when it is due, else at its instant.
  void Send(DispatchOrder order) override {
    if (order.at <= RealClock().Now()) {
      SendNow(Encode(std::move(order)));
      return;
    }
    ++pending_sends_;
    loop_.RunAt(order.at, [this, ready = Encode(std::move(order))]() mutable {
      --pending_sends_;
      if (!stopping_) SendNow(std::move(ready));
      MaybeFinish();
    });
  }

 private:
  void Start() {
    ScheduleTick(context_.t0);
    loop_.RunAt(context_.t0, [this] {
      dispatcher_.Start();
      MaybeFinish();  // a worker without a closed-loop slot
    });
    ArmNextScheduledSend();  // prepares the first planned requests during the start lead
  }

  // Open loop and trace replay: one timer at a time, armed for this worker's next planned instant.
  // The next few requests are built and encoded ahead, while the loop waits, so a send at its
  // instant costs only the write (a 50k-token prompt takes milliseconds to make).
  void ArmNextScheduledSend() {
    PrepareAhead();
    if (ready_.empty()) {
      MaybeFinish();
      return;
    }
    loop_.RunAt(ready_.front().order.at, [this] {
      if (stopping_) return;
      const MonoTime now = RealClock().Now();
      for (;;) {
        if (ready_.empty() && dispatcher_.HasScheduled() && dispatcher_.NextScheduledAt() <= now) {
          ready_.push_back(Encode(dispatcher_.TakeScheduled()));
        }
        if (ready_.empty() || ready_.front().order.at > now) break;
        SendNow(std::move(ready_.front()));
        ready_.pop_front();
      }
      ArmNextScheduledSend();
    });
  }

  // Takes the next planned request, and more while there is time before the first one's instant.
  void PrepareAhead() {
    while (dispatcher_.HasScheduled() &&
           (ready_.empty() ||
            (ready_.size() < kPrepareAhead && RealClock().Now() + kPrepareMargin < ready_.front().order.at))) {
      ready_.push_back(Encode(dispatcher_.TakeScheduled()));
    }
  }

  static ReadyRequest Encode(DispatchOrder order) {
    ReadyRequest ready;
    ready.body = dialect::EncodeRequestBody(order.request);
    ready.order = std::move(order);
    return ready;
  }

  void SendNow(ReadyRequest ready) {
    const DispatchOrder& order = ready.order;
    RequestRecord record;
    record.id = order.id;
    record.step = context_.step_index;
    record.worker = index_;
    record.phase = order.phase;
    record.intended_send = order.at;
    record.prompt_tokens_planned = order.prompt_tokens_planned;
    record.max_tokens = order.request.max_tokens;

    net::HttpRequest http;
    http.path = dialect::RequestPath(order.request.api, order.request.model, order.request.stream);
    http.body = std::move(ready.body);

    Exchange* exchange = AcquireExchange();
    record.send_start = RealClock().Now();
    exchange->Begin(std::move(record), order.continues_session);
    ++in_flight_;
    context_.progress->sent.fetch_add(1, std::memory_order_relaxed);
    client_.Start(std::move(http), exchange);
  }

  Exchange* AcquireExchange() {
    if (!idle_exchanges_.empty()) {
      Exchange* exchange = idle_exchanges_.back();
      idle_exchanges_.pop_back();
      return exchange;
    }
    exchanges_.push_back(std::make_unique<Exchange>(context_.run->target.request.api,
                                                    context_.run->target.request.stream,
                                                    context_.run->target.client.bearer_token,
                                                    [this](Exchange& done) { OnExchangeDone(done); }));
    return exchanges_.back().get();
  }

  void OnExchangeDone(Exchange& exchange) {
    RequestRecord& record = exchange.record();
    context_.sink->Write(record, context_.t0);
    Progress& progress = *context_.progress;
    progress.finished.fetch_add(1, std::memory_order_relaxed);
    progress.tokens.fetch_add(record.OutputTokens(), std::memory_order_relaxed);
    if (record.outcome != Outcome::kOk) progress.failed.fetch_add(1, std::memory_order_relaxed);
    const MonoTime now = RealClock().Now();
    context_.NoteOutcome(record, now);
    // A closed-loop slot backs off after a connection failure, doubling while the failures go on.
    std::optional<MonoTime> resume_at;
    if (FailedToConnect(record)) {
      if (context_.step->mode == LoopMode::kClosed) {
        const Nanos wait =
            std::min<Nanos>(kLongestBackoff, kFirstBackoff * (1LL << std::min(connection_failures_, 20)));
        ++connection_failures_;
        ++backoff_waits_;
        backoff_total_ += wait;
        resume_at = now + wait;
      }
    } else {
      connection_failures_ = 0;
    }
    // What follows this request is decided from a fresh stack frame (the HTTP client may still be
    // inside its own callback), where a due request can be sent at once; until then it counts as
    // in flight, so the worker cannot finish before a session's next turn is known.
    measure::RequestRecord ended;
    ended.id = record.id;
    ended.phase = record.phase;
    ended.outcome = record.outcome;
    recorder_.Add(record);
    std::string answer = exchange.answer_text();
    idle_exchanges_.push_back(&exchange);
    loop_.Post([this, ended = std::move(ended), answer = std::move(answer), resume_at] {
      dispatcher_.OnFinished(ended, answer, resume_at);
      --in_flight_;
      MaybeFinish();
    });
  }

  bool SendingDone() const { return stopping_ || (dispatcher_.SendingDone() && ready_.empty() && pending_sends_ == 0); }

  void ScheduleTick(MonoTime at) {
    loop_.RunAt(at, [this, at] {
      const MonoTime now = RealClock().Now();
      recorder_.AddLoopLag(ToMillis(now - at));
      if ((context_.stop->load(std::memory_order_relaxed) || context_.step_stopped.load()) &&
          !stopping_) {
        stopping_ = true;
        dispatcher_.Stop();
        client_.Shutdown();
      }
      if (SendingDone() && in_flight_ > 0 && !drain_deadline_) {
        drain_deadline_ = now + context_.run->drain_timeout;
      }
      if (drain_deadline_ && now >= *drain_deadline_ && in_flight_ > 0) client_.Shutdown();
      if (finished_) return;
      ScheduleTick(std::max(at + kTickPeriod, now));
      MaybeFinish();
    });
  }

  void MaybeFinish() {
    if (!finished_ && SendingDone() && in_flight_ == 0) {
      finished_ = true;
      loop_.Stop();
    }
  }

  StepContext& context_;
  std::uint32_t index_;
  net::EventLoop loop_;
  net::HttpClient client_;
  std::vector<std::unique_ptr<Exchange>> exchanges_;
  std::vector<Exchange*> idle_exchanges_;
  measure::StepRecorder recorder_;
  Dispatcher dispatcher_;
  double cpu_share_ = 0;
  std::deque<ReadyRequest> ready_;  // planned requests taken from the dispatcher, in time order
  std::size_t in_flight_ = 0;
  std::size_t pending_sends_ = 0;  // sends waiting for their instant (think time, back-off)
  int connection_failures_ = 0;    // in a row on this worker (sets the back-off)
  std::uint64_t backoff_waits_ = 0;
  Nanos backoff_total_{0};
  std::optional<MonoTime> drain_deadline_;
  bool stopping_ = false;
  bool finished_ = false;
};

}  // namespace

std::optional<ShardId> ParseShard(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto number = [](std::string_view digits) -> std::optional<std::uint32_t> {
    std::uint32_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
  };
  const std::optional<std::uint32_t> index = number(text.substr(0, slash)), count = number(text.substr(slash + 1));
  if (!index || !count || *count == 0 || *count > kMaxShards || *index >= *count) return std::nullopt;
  return ShardId{*index, *count};
}

std::vector<StepResult> RunLoad(const RunSpec& spec, RecordSink& sink, const std::atomic<bool>& stop,
                                const std::function<void(std::size_t, const Progress&)>& on_tick) {
  BAKEOFF_CHECK(spec.workers >= 1);
  BAKEOFF_CHECK(spec.shard_index < spec.shard_count);
  const PromptText prompts;
  std::vector<StepResult> results;
  for (std::size_t s = 0; s < spec.steps.size() && !stop.load() &&
                          (results.empty() || results.back().stopped_reason.empty());
       ++s) {
    const StepSpec& step = spec.steps[s];
    Progress progress;
    if (on_tick) on_tick(s, progress);  // the step begins: watchers tag what they see with it
    TracePlan trace_plan;
    StepContext context;
    if (step.mode == LoopMode::kTrace) {
      BAKEOFF_CHECK(step.trace != nullptr) << "a trace step needs a trace";
      trace_plan = BuildTracePlan(*step.trace, step.time_scale, step.limits);
    }
    context.run = &spec;
    context.step = &step;
    context.step_index = static_cast<std::uint32_t>(s);
    context.trace_plan = &trace_plan;
    context.sink = &sink;
    context.stop = &stop;
    context.progress = &progress;
    context.prompts = &prompts;
    context.t0 = s == 0 && spec.start_at ? *spec.start_at : RealClock().Now() + spec.start_lead;

    std::vector<std::unique_ptr<Worker>> workers;
    // A shard's workers are its share of every shard's workers: worker w is the shard_index + w x
    // shard_count-th of shard_count x workers, so the sends are dealt as one process would deal them.
    for (std::uint32_t w = 0; w < spec.workers; ++w) {
      workers.push_back(std::make_unique<Worker>(context, spec.shard_index + w * spec.shard_count,
                                                 spec.workers * spec.shard_count));
    }
    std::vector<std::thread> threads;
    // The workers still running; the last one to end wakes the wait below at once (a short step,
    // such as calibration's, should not wait out a polling period).
    std::mutex running_mutex;
    std::condition_variable all_ended;
    std::size_t running = workers.size();
    for (auto& worker : workers) {
      threads.emplace_back([&worker, &running, &running_mutex, &all_ended] {
        worker->Run();
        std::lock_guard lock(running_mutex);
        if (--running == 0) all_ended.notify_all();
      });
    }
    {
      std::unique_lock lock(running_mutex);
      while (!all_ended.wait_for(lock, kProgressPeriod, [&] { return running == 0; })) {
        if (!on_tick) continue;
        lock.unlock();
        on_tick(s, progress);
        lock.lock();
      }
    }
    for (auto& thread : threads) thread.join();
    if (on_tick) on_tick(s, progress);

    StepResult result;
    result.spec = step;
    result.t0 = context.t0;
    result.planned = ShardShare(spec, workers.front()->PlannedSends());
    result.interrupted = stop.load();
    result.session_turns_skipped = context.dispatch.session_turns_skipped.load();
    result.stopped_reason = context.stopped_reason;
    result.recorder = measure::StepRecorder(spec.slo);
    for (auto& worker : workers) {
      result.recorder.Merge(worker->recorder());
      result.busiest_worker_cpu = std::max(result.busiest_worker_cpu, worker->cpu_share());
      result.backoff_waits += worker->backoff_waits();
      result.backoff_total += worker->backoff_total();
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace bakeoff::load
