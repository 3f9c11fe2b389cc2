// load/plan.h
//
// Owns: turning a load description into the instants requests *should* be sent. Open loop: the
// whole schedule is computed before the run from a seed (constant rate, Poisson, or Gamma
// arrivals with a burstiness factor); each offset is computed from t0, never accumulated from
// the previous send, so late wake-ups cannot drift the schedule (wrk2's rule). Closed loop has no
// schedule: a fixed number of requests is kept in flight.
// Does not own: sending (load/worker.h) or measuring (measure/).
//
// Thread-safety: a Schedule is immutable once built; workers share it without locks.
// Units: offsets are Nanos from the run's t0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "core/rng.h"
#include "workload/trace.h"

namespace bakeoff::load {

enum class ArrivalProcess { kConstant, kPoisson, kGamma };
const char* ArrivalProcessName(ArrivalProcess process);
Result<ArrivalProcess> ParseArrivalProcess(std::string_view name);

struct OpenLoopShape {
  double rate_per_s = 1;                          // mean requests per second
  ArrivalProcess process = ArrivalProcess::kPoisson;
  double burstiness = 1;  // Gamma shape k: inter-arrival CV = 1/sqrt(k); 1 = Poisson, <1 burstier
};

// Bounds of one load step. A step ends at whichever limit is reached first; at least one must be
// set. Requests are in the warm-up phase while their intended send is before `warmup`, or while
// fewer than `warmup_requests` have been planned.
struct StepLimits {
  std::optional<Nanos> duration;          // measurement window after warm-up
  std::optional<std::uint64_t> requests;  // measured requests (warm-up not counted)
  Nanos warmup{0};
  std::uint64_t warmup_requests = 0;
};

struct PlannedSend {
  Nanos offset;         // intended send instant, from t0
  bool warmup = false;
  std::size_t item = 0;  // trace replay: index of the trace request; otherwise unused
};

// An open-loop schedule for one step, one send at a time: the runner walks it without holding it
// (a day at 2,000 requests/s is 173 million sends), and BuildOpenLoopSchedule collects it.
// REQUIRES: shape.rate_per_s > 0, burstiness > 0, and a limit set in `limits`. The process is
// deterministic for `seed`. Planning stops at an offset past kMaxDurationSeconds (core/clock.h),
// which no instant could hold; callers refuse inputs that would get there (cli/load_flags.h), so a
// plan is never cut short in practice. Thread-safety: a plain value; copies are independent.
class OpenLoopGenerator {
 public:
  OpenLoopGenerator(const OpenLoopShape& shape, const StepLimits& limits, std::uint64_t seed);

  bool done() const { return done_; }
  std::size_t index() const { return index_; }  // of current() in the schedule
  const PlannedSend& current() const { return current_; }  // REQUIRES: !done()
  void Advance();

 private:
  void Plan();  // computes current_ for index_, or sets done_

  OpenLoopShape shape_;
  StepLimits limits_;
  Rng rng_;
  double warmup_s_;
  double end_s_;
  double at_s_ = 0;
  std::uint64_t measured_ = 0;
  std::size_t index_ = 0;
  PlannedSend current_{};
  bool done_ = false;
};

// The whole open-loop schedule (the simulator and tests hold it; the runner walks it lazily).
std::vector<PlannedSend> BuildOpenLoopSchedule(const OpenLoopShape& shape, const StepLimits& limits,
                                               std::uint64_t seed);

// Trace replay. Every request that opens a conversation (no session, or turn 0 / the first turn
// seen of its session) is scheduled at its arrival time multiplied by `time_scale`; a later turn
// is not scheduled by time at all: it is sent when the previous turn's answer has arrived plus its
// think time (also scaled), so `next_turn[i]` names the trace index that follows request i in its
// session (or -1). Limits apply to the scheduled openers by their scaled arrival.
struct TracePlan {
  std::vector<PlannedSend> schedule;
  std::vector<std::int64_t> next_turn;
};
// REQUIRES: trace.requests sorted by arrival; time_scale > 0. Stops, as the open loop does, at a
// scaled arrival past kMaxDurationSeconds.
TracePlan BuildTracePlan(const workload::Trace& trace, double time_scale, const StepLimits& limits);

// Walks one worker's share of a schedule (entries first, first + stride, ...) in time order: a
// held schedule (trace replay) or a generated one (open loop, never held whole).
// The worker asks which entries are due at the current instant; a late wake-up makes several
// due at once and each keeps its own intended instant, so the lateness shows as send lag.
class ScheduleCursor {
 public:
  // REQUIRES: stride >= 1; `schedule` outlives the cursor.
  ScheduleCursor(const std::vector<PlannedSend>& schedule, std::size_t first, std::size_t stride)
      : schedule_(&schedule), next_(first), stride_(stride) {}
  // REQUIRES: stride >= 1; `generator` at the schedule's start.
  ScheduleCursor(OpenLoopGenerator generator, std::size_t first, std::size_t stride);

  bool done() const { return schedule_ != nullptr ? next_ >= schedule_->size() : generator_->done(); }
  // Index and entry of the next send. REQUIRES: !done().
  std::size_t next_index() const { return next_; }
  const PlannedSend& next() const { return schedule_ != nullptr ? (*schedule_)[next_] : generator_->current(); }
  // True when the next send's offset is at or before `elapsed` (time since t0).
  bool NextIsDue(Nanos elapsed) const { return !done() && next().offset <= elapsed; }
  void Advance();
  // Walks a generated schedule to its end and returns its length (all workers' shares).
  std::size_t CountToEnd();

 private:
  const std::vector<PlannedSend>* schedule_ = nullptr;
  std::optional<OpenLoopGenerator> generator_;
  std::size_t next_;
  std::size_t stride_;
};

}  // namespace bakeoff::load
