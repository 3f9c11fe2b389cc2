// load/dispatcher.h
//
// Owns: what one step sends and when, the same for `bakeoff bench` and `bakeoff simulate`:
// - open loop: the planned arrivals, walked lazily (a variant step replays its baseline's);
// - trace replay: each conversation's opener at its arrival; a session's next turn after the
//   previous turn's real answer plus its think time, carrying the conversation so far (a failed
//   turn ends its session, and the turns it would have led to are counted as skipped);
// - closed loop: a request in each slot, the slot's next one when it ends;
// - the step's warm-up and limits, closed-loop ids that never collide across workers and shards;
// - and when nothing more will be handed out.
// Each request is handed to a Sender with the instant it is intended for. The sender is the
// transport: a live worker waits for that instant on its event loop and sends over HTTP; the
// simulation submits it to the simulator on its virtual clock. Either reports each request's end
// back through OnFinished. Time is read from the injected clock only, so the dispatch is
// unit-tested on a ManualClock.
// Does not own: waiting for an instant, sending, or reacting to failures (giving a step up,
// backing off after connection failures: load/runner.h), nor measuring (measure/).
//
// Thread-safety: one Dispatcher is used from one thread. The dispatchers of one step's workers
// share a StepDispatchState, whose counters are atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/clock.h"
#include "dialect/openai.h"
#include "load/plan.h"
#include "load/prompt_text.h"
#include "load/request_builder.h"
#include "measure/record.h"

namespace bakeoff::load {

struct RunSpec;
struct StepSpec;

// One request to send, and the instant it is meant to leave.
struct DispatchOrder {
  std::uint64_t id = 0;  // open loop: schedule index; trace: trace index; closed loop: slot order
  MonoTime at;           // intended send instant (a response time counts from it)
  measure::Phase phase = measure::Phase::kMeasure;
  dialect::GenerationRequest request;
  std::uint32_t prompt_tokens_planned = 0;
  // Its session has a next turn: OnFinished needs the answer's text.
  bool continues_session = false;
};

// The transport a dispatcher hands its requests to.
class Sender {
 public:
  virtual ~Sender() = default;
  // Sends `order` at order.at, which may be later than now (a session's think time, a closed-loop
  // slot's back-off); the request's end comes back through Dispatcher::OnFinished.
  virtual void Send(DispatchOrder order) = 0;
};

// This shard's part of `total` things dealt round robin over the run's shards (indices
// shard_index, shard_index + shard_count, ...).
std::uint64_t ShardShare(const RunSpec& run, std::uint64_t total);

// What the dispatchers of one step's workers share.
struct StepDispatchState {
  std::atomic<std::uint64_t> closed_next_id{0};   // closed loop: ids handed out in this process
  std::atomic<std::uint64_t> closed_measured{0};  // closed loop: measured requests started
  std::atomic<std::uint64_t> session_turns_skipped{0};
};

class Dispatcher {
 public:
  // Step `step_index` of `run`, as worker `worker` of `workers` (numbered across every shard of
  // the run: a shard's workers are its share of all shards' workers). `trace_plan` is the step's
  // (trace replay only); the step starts at `t0`. Every reference outlives the dispatcher.
  // REQUIRES: worker < workers.
  Dispatcher(const RunSpec& run, std::uint32_t step_index, const PromptText& prompts, const TracePlan* trace_plan,
             StepDispatchState& shared, std::uint32_t worker, std::uint32_t workers, MonoTime t0, const Clock& clock,
             Sender& sender);

  // Closed loop: this worker's slots' first requests, handed to the sender now. Otherwise nothing.
  void Start();

  // Planned sends (open loop, a trace's conversation openers), in time order: whether one is left,
  // its instant, and the order itself (the request built now). A live worker takes them ahead of
  // their instants; the simulation as its clock reaches them.
  bool HasScheduled() const;
  MonoTime NextScheduledAt() const;  // REQUIRES: HasScheduled()
  DispatchOrder TakeScheduled();     // REQUIRES: HasScheduled()

  // Request `record.id` ended (any outcome; a cancelled one too). `answer`: its generated text,
  // needed when its order continued a session. A closed-loop slot sends its next request at
  // `resume_at` (later than now after a connection failure, for a back-off), else now.
  void OnFinished(const measure::RequestRecord& record, std::string_view answer,
                  std::optional<MonoTime> resume_at = std::nullopt);

  // No more orders: closed-loop slots stay empty and sessions end at their current turn.
  void Stop() { stopped_ = true; }
  // Nothing more will be handed out, except the next turns of sessions whose current turn is still
  // in flight (the sender knows which orders still wait for their instant).
  bool SendingDone() const;

  // The step's whole planned schedule, every worker's share (open loop: walked from a copy of the
  // generator; trace: the openers; closed loop: 0).
  std::size_t PlannedSends() const;

 private:
  void SendClosedLoop(MonoTime at);
  DispatchOrder Order(std::uint64_t id, MonoTime at, measure::Phase phase, dialect::GenerationRequest request);

  const RunSpec& run_;
  const StepSpec& step_;
  std::uint32_t step_index_;
  const PromptText& prompts_;
  const TracePlan* trace_plan_;
  StepDispatchState& shared_;
  std::uint32_t worker_;
  std::uint32_t workers_;
  MonoTime t0_;
  const Clock& clock_;
  Sender& sender_;
  std::optional<OpenLoopGenerator> generator_;  // open loop: the step's whole schedule, unwalked
  std::optional<ScheduleCursor> cursor_;        // open loop and trace: this worker's next planned send
  std::unordered_map<std::uint64_t, History> conversations_;  // by id of a session's turn in flight
  bool closed_done_ = false;
  bool stopped_ = false;
};

}  // namespace bakeoff::load
