#include "load/runner.h"

#include <time.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "core/check.h"
#include "core/rng.h"
#include "load/exchange.h"
#include "load/prompt_text.h"
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

std::uint64_t MixSeed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  Rng rng(seed ^ (a * 0x9e3779b97f4a7c15ULL) ^ (b * 0xc2b2ae3d27d4eb4fULL));
  return rng.Next();
}

// Shared by the workers of one step.
struct StepContext {
  const RunSpec* run = nullptr;
  const StepSpec* step = nullptr;
  std::uint32_t step_index = 0;
  MonoTime t0;
  const std::vector<PlannedSend>* schedule = nullptr;  // open loop only
  RecordSink* sink = nullptr;
  const std::atomic<bool>* stop = nullptr;
  Progress* progress = nullptr;
  const PromptText* prompts = nullptr;
  std::atomic<std::uint64_t> closed_loop_next_id{0};  // closed loop: ids handed out so far
  std::atomic<std::uint64_t> closed_loop_measured{0};
};

// One thread, one event loop, one HTTP client; sends its share of the step's requests.
class Worker {
 public:
  Worker(StepContext& context, std::uint32_t index, std::uint32_t count)
      : context_(context), index_(index), count_(count),
        client_(loop_, context.run->target.endpoint, context.run->target.client) {}

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

  std::vector<RequestRecord>& records() { return records_; }
  std::vector<double>& loop_lag_ms() { return loop_lag_ms_; }
  double cpu_share() const { return cpu_share_; }
  MonoTime last_send() const { return last_send_; }

 private:
  void Start() {
    ScheduleTick(context_.t0);
    if (context_.step->mode == LoopMode::kOpen) {
      cursor_.emplace(*context_.schedule, index_, count_);
      ArmNextOpenLoopSend();
    } else {
      // This worker's share of the closed-loop concurrency.
      const std::uint32_t total = context_.step->concurrency;
      const std::uint32_t slots = total / count_ + (index_ < total % count_ ? 1 : 0);
      loop_.RunAt(context_.t0, [this, slots] {
        for (std::uint32_t s = 0; s < slots; ++s) SendClosedLoop();
        MaybeFinish();
      });
    }
  }

  // Open loop: one timer at a time, armed for this worker's next planned instant.
  void ArmNextOpenLoopSend() {
    if (cursor_->done()) {
      sending_done_ = true;
      MaybeFinish();
      return;
    }
    loop_.RunAt(context_.t0 + cursor_->next().offset, [this] {
      if (stopping_) return;
      const Nanos elapsed = RealClock().Now() - context_.t0;
      while (cursor_->NextIsDue(elapsed)) {
        const PlannedSend& planned = cursor_->next();
        Send(cursor_->next_index(), context_.t0 + planned.offset, planned.warmup);
        cursor_->Advance();
      }
      ArmNextOpenLoopSend();
    });
  }

  void SendClosedLoop() {
    if (stopping_ || sending_done_) return;
    const StepLimits& limits = context_.step->limits;
    const MonoTime now = RealClock().Now();
    const bool warmup_by_time = now < context_.t0 + limits.warmup;
    const std::uint64_t id = context_.closed_loop_next_id.fetch_add(1);
    const bool warmup = warmup_by_time || id < limits.warmup_requests;
    if (!warmup) {
      const bool past_window =
          limits.duration && now >= context_.t0 + limits.warmup + *limits.duration;
      const bool count_reached =
          limits.requests && context_.closed_loop_measured.fetch_add(1) >= *limits.requests;
      if (past_window || count_reached) {
        sending_done_ = true;
        return;
      }
    }
    Send(id, now, warmup);
  }

  void Send(std::uint64_t id, MonoTime intended, bool warmup) {
    const RunSpec& run = *context_.run;
    RequestRecord record;
    record.id = id;
    record.step = context_.step_index;
    record.worker = index_;
    record.phase = warmup ? measure::Phase::kWarmup : measure::Phase::kMeasure;
    record.intended_send = intended;
    record.prompt_tokens_planned = run.shape.prompt_tokens;
    record.max_tokens = run.shape.output_tokens;

    dialect::GenerationRequest request = run.target.request;
    const std::uint32_t words = WordsForTokens(run.shape.prompt_tokens, run.target.words_per_token);
    request.prompt = context_.prompts->Build(words, MixSeed(run.seed, context_.step_index, id));
    request.max_tokens = run.shape.output_tokens;

    net::HttpRequest http;
    http.path = dialect::ApiPath(request.api);
    http.body = dialect::EncodeRequestBody(request);

    Exchange* exchange = AcquireExchange();
    record.send_start = RealClock().Now();
    last_send_ = *record.send_start;
    exchange->Begin(std::move(record));
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
    exchanges_.push_back(std::make_unique<Exchange>(
        context_.run->target.request.stream, [this](Exchange& done) { OnExchangeDone(done); }));
    return exchanges_.back().get();
  }

  void OnExchangeDone(Exchange& exchange) {
    RequestRecord& record = exchange.record();
    context_.sink->Write(record, context_.t0);
    Progress& progress = *context_.progress;
    progress.finished.fetch_add(1, std::memory_order_relaxed);
    progress.tokens.fetch_add(record.OutputTokens(), std::memory_order_relaxed);
    if (record.outcome != Outcome::kOk) progress.failed.fetch_add(1, std::memory_order_relaxed);
    records_.push_back(std::move(record));
    idle_exchanges_.push_back(&exchange);
    --in_flight_;
    // The HTTP client may still be inside its own callback; continue from a fresh stack frame.
    loop_.Post([this] {
      if (context_.step->mode == LoopMode::kClosed) SendClosedLoop();
      MaybeFinish();
    });
  }

  void ScheduleTick(MonoTime at) {
    loop_.RunAt(at, [this, at] {
      const MonoTime now = RealClock().Now();
      loop_lag_ms_.push_back(ToMillis(now - at));
      if (context_.stop->load(std::memory_order_relaxed) && !stopping_) {
        stopping_ = true;
        sending_done_ = true;
        client_.Shutdown();
      }
      if (sending_done_ && in_flight_ > 0 && !drain_deadline_) {
        drain_deadline_ = now + context_.run->drain_timeout;
      }
      if (drain_deadline_ && now >= *drain_deadline_ && in_flight_ > 0) client_.Shutdown();
      if (finished_) return;
      ScheduleTick(std::max(at + kTickPeriod, now));
      MaybeFinish();
    });
  }

  void MaybeFinish() {
    if (!finished_ && sending_done_ && in_flight_ == 0) {
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
  std::vector<RequestRecord> records_;
  std::vector<double> loop_lag_ms_;
  double cpu_share_ = 0;
  std::optional<ScheduleCursor> cursor_;  // open loop only
  std::size_t in_flight_ = 0;
  MonoTime last_send_;
  std::optional<MonoTime> drain_deadline_;
  bool sending_done_ = false;
  bool stopping_ = false;
  bool finished_ = false;
};

}  // namespace

std::vector<StepResult> RunLoad(const RunSpec& spec, RecordSink& sink, const std::atomic<bool>& stop,
                                const std::function<void(std::size_t, const Progress&)>& on_tick) {
  BAKEOFF_CHECK(spec.workers >= 1);
  const PromptText prompts;
  std::vector<StepResult> results;
  for (std::size_t s = 0; s < spec.steps.size() && !stop.load(); ++s) {
    const StepSpec& step = spec.steps[s];
    std::vector<PlannedSend> schedule;
    if (step.mode == LoopMode::kOpen) {
      schedule = BuildOpenLoopSchedule(step.open, step.limits, MixSeed(spec.seed, s, 0));
    }
    Progress progress;
    StepContext context;
    context.run = &spec;
    context.step = &step;
    context.step_index = static_cast<std::uint32_t>(s);
    context.schedule = &schedule;
    context.sink = &sink;
    context.stop = &stop;
    context.progress = &progress;
    context.prompts = &prompts;
    context.t0 = RealClock().Now() + spec.start_lead;

    std::vector<std::unique_ptr<Worker>> workers;
    for (std::uint32_t w = 0; w < spec.workers; ++w) {
      workers.push_back(std::make_unique<Worker>(context, w, spec.workers));
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
    result.end = RealClock().Now();
    result.planned = schedule.size();
    result.interrupted = stop.load();
    result.last_send = context.t0;
    for (auto& worker : workers) {
      auto& records = worker->records();
      result.records.insert(result.records.end(), std::make_move_iterator(records.begin()),
                            std::make_move_iterator(records.end()));
      auto& lag = worker->loop_lag_ms();
      result.loop_lag_ms.insert(result.loop_lag_ms.end(), lag.begin(), lag.end());
      result.last_send = std::max(result.last_send, worker->last_send());
      result.busiest_worker_cpu = std::max(result.busiest_worker_cpu, worker->cpu_share());
    }
    std::sort(result.records.begin(), result.records.end(),
              [](const RequestRecord& a, const RequestRecord& b) { return a.id < b.id; });
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace bakeoff::load
