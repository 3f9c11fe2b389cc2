#include "load/runner.h"

#include <charconv>

#include <time.h>

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/check.h"
#include "core/rng.h"
#include "dialect/codec.h"
#include "load/exchange.h"
#include "load/prompt_text.h"
#include "load/request_builder.h"
#include "net/event_loop.h"

namespace bakeoff::load {
namespace {

using measure::Outcome;
using measure::RequestRecord;

// How often each worker samples its own event-loop lag and looks at the stop flag.
constexpr Nanos kTickPeriod = std::chrono::milliseconds(10);

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
  const std::vector<PlannedSend>* schedule = nullptr;  // trace replay
  std::optional<OpenLoopGenerator> open_loop;          // open loop: each worker walks a copy
  const TracePlan* trace_plan = nullptr;               // trace replay only
  RecordSink* sink = nullptr;
  const std::atomic<bool>* stop = nullptr;
  Progress* progress = nullptr;
  const PromptText* prompts = nullptr;
  std::atomic<std::uint64_t> closed_loop_next_id{0};  // closed loop: ids handed out so far
  std::atomic<std::uint64_t> closed_loop_measured{0};
  std::atomic<std::uint64_t> session_turns_skipped{0};

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

// A request built and encoded, waiting for its send instant.
struct ReadyRequest {
  dialect::GenerationRequest request;
  std::string body;
  std::uint32_t prompt_tokens_planned = 0;
};

// This shard's part of `total` things dealt round robin over the shards (indices shard_index,
// shard_index + shard_count, ...).
std::uint64_t ShardShare(const RunSpec& run, std::uint64_t total) {
  return total / run.shard_count + (run.shard_index < total % run.shard_count ? 1 : 0);
}

// Scheduled requests prepared ahead of their instants, per worker (bursts of simultaneous
// arrivals are common in real traces), and how close to the next send instant preparing stops.
constexpr std::size_t kPrepareAhead = 32;
constexpr Nanos kPrepareMargin = std::chrono::milliseconds(1);

// One thread, one event loop, one HTTP client; sends its share of the step's requests.
class Worker {
 public:
  Worker(StepContext& context, std::uint32_t index, std::uint32_t count)
      : context_(context), index_(index), count_(count),
        client_(loop_, context.run->target.endpoint, context.run->target.client),
        recorder_(context.run->slo) {}

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
  // The length of the whole schedule this worker walked a share of (after its loop has ended).
  std::size_t ScheduleLength() { return cursor_ ? cursor_->CountToEnd() : 0; }

 private:
  bool trace_mode() const { return context_.step->mode == LoopMode::kTrace; }

  void Start() {
    ScheduleTick(context_.t0);
    if (context_.step->mode == LoopMode::kClosed) {
      // This worker's share of the closed-loop concurrency.
      const std::uint32_t total = context_.step->concurrency;
      const std::uint32_t slots = total / count_ + (index_ < total % count_ ? 1 : 0);
      loop_.RunAt(context_.t0, [this, slots] {
        for (std::uint32_t s = 0; s < slots; ++s) SendClosedLoop();
        MaybeFinish();
      });
    } else {
      if (context_.open_loop) {
        cursor_.emplace(*context_.open_loop, index_, count_);
        lookahead_.emplace(*context_.open_loop, index_, count_);
      } else {
        cursor_.emplace(*context_.schedule, index_, count_);
        lookahead_.emplace(*context_.schedule, index_, count_);
      }
      ArmNextScheduledSend();
    }
  }

  // Open loop and trace replay: one timer at a time, armed for this worker's next planned instant.
  // The next few requests are built and encoded ahead, while the loop waits, so a send at its
  // instant costs only the write (a 50k-token prompt takes milliseconds to make).
  void ArmNextScheduledSend() {
    PrepareAhead();
    if (cursor_->done()) {
      MaybeFinish();
      return;
    }
    loop_.RunAt(context_.t0 + cursor_->next().offset, [this] {
      if (stopping_) return;
      const Nanos elapsed = RealClock().Now() - context_.t0;
      while (cursor_->NextIsDue(elapsed)) {
        const PlannedSend& planned = cursor_->next();
        ReadyRequest ready;
        if (!ready_.empty() && ready_.front().first == cursor_->next_index()) {
          ready = std::move(ready_.front().second);
          ready_.pop_front();
        } else {
          ready = MakeScheduled(cursor_->next_index(), planned);
          if (!lookahead_->done() && lookahead_->next_index() == cursor_->next_index()) {
            lookahead_->Advance();
          }
        }
        Send(trace_mode() ? planned.item : cursor_->next_index(), context_.t0 + planned.offset,
             planned.warmup, std::move(ready));
        cursor_->Advance();
      }
      ArmNextScheduledSend();
    });
  }

  void PrepareAhead() {
    while (ready_.size() < kPrepareAhead && !lookahead_->done() &&
           (cursor_->done() ||
            RealClock().Now() + kPrepareMargin < context_.t0 + cursor_->next().offset)) {
      ready_.emplace_back(lookahead_->next_index(),
                          MakeScheduled(lookahead_->next_index(), lookahead_->next()));
      lookahead_->Advance();
    }
  }

  ReadyRequest MakeScheduled(std::size_t index, const PlannedSend& planned) const {
    return trace_mode() ? MakeTraceRequest(planned.item, {}) : MakeSyntheticRequest(index);
  }

  void SendClosedLoop() {
    if (stopping_ || closed_loop_done_) return;
    const StepLimits& limits = context_.step->limits;
    const MonoTime now = RealClock().Now();
    const bool warmup_by_time = now < context_.t0 + limits.warmup;
    // Ids interleave across shards (a shard's own count times the shards, plus its index), so the
    // records of all shards of one run never share an id.
    const RunSpec& run = *context_.run;
    const std::uint64_t id = context_.closed_loop_next_id.fetch_add(1) * run.shard_count + run.shard_index;
    const bool warmup = warmup_by_time || id < limits.warmup_requests;
    if (!warmup) {
      const bool past_window =
          limits.duration && now >= context_.t0 + limits.warmup + *limits.duration;
      const bool count_reached =
          limits.requests && context_.closed_loop_measured.fetch_add(1) >= ShardShare(run, *limits.requests);
      if (past_window || count_reached) {
        closed_loop_done_ = true;
        return;
      }
    }
    Send(id, now, warmup, MakeSyntheticRequest(id));
  }

  // A request of the run's fixed shape with its own corpus text.
  ReadyRequest MakeSyntheticRequest(std::uint64_t id) const {
    const RunSpec& run = *context_.run;
    return Ready(BuildSyntheticRequest(run, *context_.prompts, context_.step_index, id),
                 run.shape.prompt_tokens);
  }

  // Trace request `item`, with the real earlier turns of its session in `history`.
  ReadyRequest MakeTraceRequest(std::size_t item, History history) const {
    const workload::Trace& trace = *context_.step->trace;
    return Ready(BuildTraceRequest(*context_.run, trace, *context_.prompts, context_.step_index, item,
                                   std::move(history)),
                 trace.requests[item].input_tokens);
  }

  static ReadyRequest Ready(dialect::GenerationRequest request, std::uint32_t prompt_tokens_planned) {
    ReadyRequest ready;
    ready.body = dialect::EncodeRequestBody(request);
    ready.request = std::move(request);
    ready.prompt_tokens_planned = prompt_tokens_planned;
    return ready;
  }

  void Send(std::uint64_t id, MonoTime intended, bool warmup, ReadyRequest ready) {
    dialect::GenerationRequest& request = ready.request;
    RequestRecord record;
    record.id = id;
    record.step = context_.step_index;
    record.worker = index_;
    record.phase = warmup ? measure::Phase::kWarmup : measure::Phase::kMeasure;
    record.intended_send = intended;
    record.prompt_tokens_planned = ready.prompt_tokens_planned;
    record.max_tokens = request.max_tokens;

    net::HttpRequest http;
    http.path = dialect::RequestPath(request.api, request.model, request.stream);
    http.body = std::move(ready.body);

    Exchange* exchange = AcquireExchange();
    // A session's next turn needs this answer's text and the conversation so far.
    const bool continues_session = trace_mode() && context_.trace_plan->next_turn[id] >= 0;
    if (continues_session) {
      History conversation = std::move(request.history);
      conversation.emplace_back("user", std::move(request.prompt));
      conversations_[id] = std::move(conversation);
    }
    record.send_start = RealClock().Now();
    exchange->Begin(std::move(record), continues_session);
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
    context_.NoteOutcome(record, RealClock().Now());
    const bool connection_failed = FailedToConnect(record);
    if (trace_mode()) ContinueSession(record, exchange.answer_text());
    recorder_.Add(record);
    idle_exchanges_.push_back(&exchange);
    --in_flight_;
    if (context_.step->mode == LoopMode::kClosed && connection_failed) {
      // Back off before this slot's next request, doubling while the failures go on.
      const Nanos wait =
          std::min<Nanos>(kLongestBackoff, kFirstBackoff * (1LL << std::min(connection_failures_, 20)));
      ++connection_failures_;
      ++backoff_waits_;
      backoff_total_ += wait;
      ++pending_backoffs_;
      loop_.RunAt(RealClock().Now() + wait, [this] {
        --pending_backoffs_;
        SendClosedLoop();
        MaybeFinish();
      });
      return;
    }
    if (!connection_failed) connection_failures_ = 0;
    // The HTTP client may still be inside its own callback; continue from a fresh stack frame.
    loop_.Post([this] {
      if (context_.step->mode == LoopMode::kClosed) SendClosedLoop();
      MaybeFinish();
    });
  }

  // Sends the next turn of a finished request's session after its think time, carrying the real
  // answer; a failed turn ends its session and the turns it would have led to are counted.
  void ContinueSession(const RequestRecord& record, const std::string& answer) {
    const std::int64_t next = context_.trace_plan->next_turn[record.id];
    if (next < 0) return;
    auto node = conversations_.extract(record.id);
    if (record.outcome != Outcome::kOk || stopping_) {
      std::uint64_t skipped = 0;
      for (std::int64_t k = next; k >= 0; k = context_.trace_plan->next_turn[k]) ++skipped;
      context_.session_turns_skipped.fetch_add(skipped);
      return;
    }
    History history = node.empty() ? History{} : std::move(node.mapped());
    history.emplace_back("assistant", answer);
    const workload::TraceRequest& turn = context_.step->trace->requests[next];
    const MonoTime at = RealClock().Now() +
                        FromSeconds(turn.think_time_s.value_or(0) * context_.step->time_scale);
    const bool warmup = record.phase == measure::Phase::kWarmup;
    // Built now, during the think time, so the send at its instant costs only the write.
    ReadyRequest ready = MakeTraceRequest(static_cast<std::size_t>(next), std::move(history));
    ++pending_turns_;
    loop_.RunAt(at, [this, next, at, warmup, ready = std::move(ready)]() mutable {
      --pending_turns_;
      if (stopping_) {
        MaybeFinish();
        return;
      }
      Send(static_cast<std::uint64_t>(next), at, warmup, std::move(ready));
    });
  }

  bool SendingDone() const {
    if (stopping_) return true;
    if (context_.step->mode == LoopMode::kClosed) return closed_loop_done_ && pending_backoffs_ == 0;
    return cursor_ && cursor_->done() && pending_turns_ == 0;
  }

  void ScheduleTick(MonoTime at) {
    loop_.RunAt(at, [this, at] {
      const MonoTime now = RealClock().Now();
      recorder_.AddLoopLag(ToMillis(now - at));
      if ((context_.stop->load(std::memory_order_relaxed) || context_.step_stopped.load()) &&
          !stopping_) {
        stopping_ = true;
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
  std::uint32_t count_;
  net::EventLoop loop_;
  net::HttpClient client_;
  std::vector<std::unique_ptr<Exchange>> exchanges_;
  std::vector<Exchange*> idle_exchanges_;
  measure::StepRecorder recorder_;
  double cpu_share_ = 0;
  std::optional<ScheduleCursor> cursor_;     // open loop and trace replay: the next send
  std::optional<ScheduleCursor> lookahead_;  // the next send not yet prepared
  std::deque<std::pair<std::size_t, ReadyRequest>> ready_;  // prepared, by schedule index
  std::unordered_map<std::uint64_t, History> conversations_;  // by id of the turn in flight
  std::size_t in_flight_ = 0;
  std::size_t pending_turns_ = 0;  // session turns waiting out their think time
  std::size_t pending_backoffs_ = 0;  // closed-loop slots waiting out a back-off
  int connection_failures_ = 0;       // in a row on this worker (sets the back-off)
  std::uint64_t backoff_waits_ = 0;
  Nanos backoff_total_{0};
  std::optional<MonoTime> drain_deadline_;
  bool closed_loop_done_ = false;
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
    std::vector<PlannedSend> schedule;  // trace replay
    std::uint64_t planned = 0;
    TracePlan trace_plan;
    StepContext context;
    if (step.mode == LoopMode::kOpen) {
      // Walked lazily by each worker: the schedule is never held (its length is counted at the end).
      // A variant step replays its baseline's arrivals.
      context.open_loop.emplace(step.open, step.limits,
                                ArrivalSeed(spec.seed, step.variant ? step.baseline : s));
    } else if (step.mode == LoopMode::kTrace) {
      BAKEOFF_CHECK(step.trace != nullptr) << "a trace step needs a trace";
      trace_plan = BuildTracePlan(*step.trace, step.time_scale, step.limits);
      schedule = trace_plan.schedule;
      planned = schedule.size();
    }
    context.run = &spec;
    context.step = &step;
    context.step_index = static_cast<std::uint32_t>(s);
    context.schedule = &schedule;
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
    std::atomic<std::size_t> running{workers.size()};
    for (auto& worker : workers) {
      threads.emplace_back([&worker, &running] {
        worker->Run();
        running.fetch_sub(1);
      });
    }
    for (int polls = 1; running.load() > 0; ++polls) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (polls % 5 == 0 && on_tick) on_tick(s, progress);
    }
    for (auto& thread : threads) thread.join();
    if (on_tick) on_tick(s, progress);

    StepResult result;
    result.spec = step;
    result.t0 = context.t0;
    result.planned = ShardShare(spec, step.mode == LoopMode::kOpen ? workers.front()->ScheduleLength() : planned);
    result.interrupted = stop.load();
    result.session_turns_skipped = context.session_turns_skipped.load();
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
