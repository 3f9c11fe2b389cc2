// load/dispatcher.cc: what one step sends and when (contract in dispatcher.h).
#include "load/dispatcher.h"

#include <algorithm>

#include "core/check.h"
#include "load/runner.h"

namespace bakeoff::load {

namespace {

// Part `index` of `count` of `total` things dealt round robin.
std::uint64_t ShareOf(std::uint64_t total, std::uint64_t index, std::uint64_t count) {
  return total / count + (index < total % count ? 1 : 0);
}

}  // namespace

std::uint64_t ShardShare(const RunSpec& run, std::uint64_t total) {
  return ShareOf(total, run.shard_index, run.shard_count);
}

Dispatcher::Dispatcher(const RunSpec& run, std::uint32_t step_index, const PromptText& prompts,
                       const TracePlan* trace_plan, StepDispatchState& shared, std::uint32_t worker,
                       std::uint32_t workers, MonoTime t0, const Clock& clock, Sender& sender)
    : run_(run), step_(run.steps.at(step_index)), step_index_(step_index), prompts_(prompts),
      trace_plan_(trace_plan), shared_(shared), worker_(worker), workers_(workers), t0_(t0), clock_(clock),
      sender_(sender) {
  BAKEOFF_CHECK(worker < workers);
  if (step_.mode == LoopMode::kOpen) {
    // A variant step replays its baseline's arrivals.
    generator_.emplace(step_.open, step_.limits,
                       ArrivalSeed(run.seed, step_.variant ? step_.baseline : step_index));
    cursor_.emplace(*generator_, worker, workers);
  } else if (step_.mode == LoopMode::kTrace) {
    BAKEOFF_CHECK(trace_plan != nullptr && step_.trace != nullptr) << "a trace step needs a trace and its plan";
    cursor_.emplace(trace_plan->schedule, worker, workers);
  }
}

void Dispatcher::Start() {
  if (step_.mode != LoopMode::kClosed) return;
  // This worker's share of the closed-loop concurrency.
  const std::uint64_t slots = ShareOf(step_.concurrency, worker_, workers_);
  if (slots == 0) closed_done_ = true;  // fewer slots than workers: this one sends nothing
  for (std::uint64_t s = 0; s < slots; ++s) SendClosedLoop(clock_.Now());
}

bool Dispatcher::HasScheduled() const { return !stopped_ && cursor_ && !cursor_->done(); }

MonoTime Dispatcher::NextScheduledAt() const { return t0_ + cursor_->next().offset; }

DispatchOrder Dispatcher::TakeScheduled() {
  const PlannedSend planned = cursor_->next();
  const std::size_t index = cursor_->next_index();
  cursor_->Advance();
  const measure::Phase phase = planned.warmup ? measure::Phase::kWarmup : measure::Phase::kMeasure;
  if (step_.mode == LoopMode::kTrace) {
    return Order(planned.item, t0_ + planned.offset, phase,
                 BuildTraceRequest(run_, *step_.trace, prompts_, step_index_, planned.item, {}));
  }
  return Order(index, t0_ + planned.offset, phase, BuildSyntheticRequest(run_, prompts_, step_index_, index));
}

DispatchOrder Dispatcher::Order(std::uint64_t id, MonoTime at, measure::Phase phase,
                                dialect::GenerationRequest request) {
  DispatchOrder order;
  order.id = id;
  order.at = at;
  order.phase = phase;
  const bool trace = step_.mode == LoopMode::kTrace;
  order.prompt_tokens_planned = static_cast<std::uint32_t>(
      PlannedPromptTokens(run_, trace ? step_.trace->requests[id].input_tokens : run_.shape.prompt_tokens));
  order.continues_session = trace && trace_plan_->next_turn[id] >= 0;
  if (order.continues_session) {
    // The next turn carries the conversation so far: this turn's history and its user message.
    History& conversation = conversations_[id];
    conversation = request.history;
    conversation.emplace_back("user", request.prompt);
  }
  order.request = std::move(request);
  return order;
}

void Dispatcher::SendClosedLoop(MonoTime at) {
  if (stopped_ || closed_done_) return;
  const StepLimits& limits = step_.limits;
  // Ids interleave across shards (a shard's own count times the shards, plus its index), so the
  // records of all shards of one run never share an id.
  const std::uint64_t id = shared_.closed_next_id.fetch_add(1) * run_.shard_count + run_.shard_index;
  const bool warmup = at < t0_ + limits.warmup || id < limits.warmup_requests;
  if (!warmup) {
    const bool past_window = limits.duration && at >= t0_ + limits.warmup + *limits.duration;
    const bool count_reached =
        limits.requests && shared_.closed_measured.fetch_add(1) >= ShardShare(run_, *limits.requests);
    if (past_window || count_reached) {
      closed_done_ = true;
      return;
    }
  }
  sender_.Send(Order(id, at, warmup ? measure::Phase::kWarmup : measure::Phase::kMeasure,
                     BuildSyntheticRequest(run_, prompts_, step_index_, id)));
}

void Dispatcher::OnFinished(const measure::RequestRecord& record, std::string_view answer,
                            std::optional<MonoTime> resume_at) {
  if (step_.mode == LoopMode::kClosed) {
    const MonoTime now = clock_.Now();
    SendClosedLoop(resume_at ? std::max(*resume_at, now) : now);
    return;
  }
  if (step_.mode != LoopMode::kTrace) return;
  const std::int64_t next = trace_plan_->next_turn[record.id];
  if (next < 0) return;
  auto node = conversations_.extract(record.id);
  if (record.outcome != measure::Outcome::kOk || stopped_) {
    std::uint64_t skipped = 0;
    for (std::int64_t k = next; k >= 0; k = trace_plan_->next_turn[k]) ++skipped;
    shared_.session_turns_skipped.fetch_add(skipped);
    return;
  }
  History history = node.empty() ? History{} : std::move(node.mapped());
  history.emplace_back("assistant", std::string(answer));
  const auto turn = static_cast<std::size_t>(next);
  const MonoTime at = clock_.Now() + FromSeconds(step_.trace->requests[turn].think_time_s.value_or(0) * step_.time_scale);
  sender_.Send(Order(turn, at, record.phase,
                     BuildTraceRequest(run_, *step_.trace, prompts_, step_index_, turn, std::move(history))));
}

bool Dispatcher::SendingDone() const {
  if (stopped_) return true;
  if (step_.mode == LoopMode::kClosed) return closed_done_;
  return !cursor_ || cursor_->done();
}

std::size_t Dispatcher::PlannedSends() const {
  if (step_.mode == LoopMode::kTrace) return trace_plan_->schedule.size();
  return generator_ ? ScheduleCursor(*generator_, 0, 1).CountToEnd() : 0;
}

}  // namespace bakeoff::load
