// study/runner_capacity.cc: the capacity search of each candidate (runner.h, step 6), after
// every round of the other load phases: trials that replay the workload's first requests scaled
// to the rate asked, each rate repeated, started from what the single-request phase's latency
// allows; the search ends at its slice of the budget with what it has bracketed by then
// (runner_budget.cc records what that cut). Declarations in runner_impl.h.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "study/runner_impl.h"

namespace bakeoff::study::runner_internal {

namespace fs = std::filesystem;

namespace {

// Arrivals per second over the first `n` requests of a trace (0 when they all arrive at once).
double WindowRate(const workload::Trace& trace, std::uint64_t n) {
  n = std::min<std::uint64_t>(n, trace.requests.size());
  if (n < 2) return 0;
  const double span = trace.requests[n - 1].arrival_s - trace.requests[0].arrival_s;
  return span > 0 ? static_cast<double>(n - 1) / span : 0;
}

}  // namespace

double StudyRunner::StartRate(std::size_t i) const {
  if (study_.plan.capacity_start_per_s > 0) return study_.plan.capacity_start_per_s;
  double e2e_ms = 0;
  for (const PhaseResult& p : results_.candidates[i].phases) {
    if (p.phase == Phase::kSingle && !p.steps.empty()) e2e_ms = p.steps.front().e2e_p50_ms;
  }
  const double guess = e2e_ms > 0 ? 4000 / e2e_ms : 1;
  return std::clamp(guess, study_.plan.capacity_min_per_s, study_.plan.capacity_max_per_s);
}

void StudyRunner::Capacity(std::size_t i) {
  CandidateResult& c = results_.candidates[i];
  const fs::path dir = Dir(i, "capacity");
  const std::optional<Nanos> slice = TakeSlice(i, Phase::kCapacity);
  if (ReadBackCapacity(i)) return;
  if (std::string why = WhyNot(i); !why.empty()) {
    c.capacity.skipped_reason = why;
    Skip(i, "capacity", why);
    return;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  Result<run::LoadTarget> target = Target(i);
  if (!target.ok()) {
    c.failed = "capacity: " + target.error().message;
    return;
  }
  analyze::CapacitySearchOptions o;
  o.min_rate_per_s = study_.plan.capacity_min_per_s;
  o.max_rate_per_s = study_.plan.capacity_max_per_s;
  o.start_rate_per_s = StartRate(i);
  o.precision = study_.plan.capacity_precision;
  o.repeats = study_.plan.repeats;
  o.target_attainment = study_.slo.attainment;
  o.min_availability = study_.slo.availability;
  if (Status st = analyze::ValidateCapacitySearchOptions(o); !st.ok()) {
    c.failed = st.error().message;
    return;
  }
  // A trial replays the workload's first requests, scaled in time so that they arrive at the rate
  // asked: the scale comes from those requests' own span, not the whole workload's mean (a
  // bursty workload's first minutes are not its average).
  const std::uint64_t warmup = std::max<std::uint64_t>(1, study_.plan.step_requests / 10);
  const double window_rate = WindowRate(*trace_, warmup + study_.plan.step_requests);
  const double workload_rate = window_rate > 0 ? window_rate : std::max(results_.workload.rate_per_s, 1e-9);
  std::map<double, std::vector<StepFigures>> trials;
  // The search ends at its slice of the budget with what it has bracketed by then, and no trial
  // takes more than a fifth of the slice, so that several rates fit.
  std::optional<Halt> slice_halt;
  if (slice && !target->simulated) slice_halt.emplace(halt_.flag(), std::chrono::steady_clock::now() + *slice);
  const std::atomic<bool>& stop = slice_halt ? slice_halt->flag() : halt_.flag();
  const std::optional<Nanos> trial_cap =
      slice_halt ? std::optional<Nanos>(std::max<Nanos>(std::chrono::seconds(5), *slice / 5)) : std::nullopt;
  log_(fmt::format("{}: capacity search from {:.3g} req/s{}", study_.candidates[i].name, o.start_rate_per_s,
                   target->simulated ? " on the virtual clock"
                   : slice_halt      ? fmt::format(", {:.0f} s of the budget", ToSeconds(*slice))
                                     : ""));
  auto measure = [&](double rate, std::uint32_t repeat) -> Result<analyze::RateTrial> {
    const fs::path trial_dir = dir / fmt::format("rate-{:.4g}-r{}", rate, repeat);
    run::LoadJob job = Job(trial_dir);
    // A repeat is a new sample: other prompt words, and on the virtual clock other step noise.
    job.run.seed = study_.traffic.seed + repeat;
    run::LoadTarget repeat_target = target.value();
    repeat_target.sim.engine.seed += repeat;
    load::StepSpec s;
    s.mode = load::LoopMode::kTrace;
    s.trace = trace_.get();
    s.time_scale = workload_rate / rate;
    s.limits.requests = study_.plan.step_requests;
    s.limits.duration = trial_cap;
    s.limits.warmup_requests = warmup;
    s.label = fmt::format("rate={:.4g}/s", rate);
    job.run.steps = {s};
    Result<run::BenchOutcome> outcome = run::RunLoadJob(repeat_target, std::move(job), stop, Quiet());
    if (!outcome.ok()) return outcome.error();
    if (outcome->steps.empty()) return MakeError(ErrorCode::kUnavailable, "the step did not run");
    const analyze::StepAnalysis& step = outcome->steps.front();
    analyze::RateTrial t = analyze::TrialFromStep(step, rate, repeat);
    t.interrupted = t.interrupted || outcome->interrupted;
    if (outcome->emulated) c.capacity.emulated = c.emulated = true;
    t.where = Relative(outcome->records_path);
    trials[rate].push_back(FiguresOf(step, t.where));
    const bool pooling = IsPoolingTask(study_.task);
    log_(fmt::format("{}:   {:.4g} req/s (repeat {}): attainment {:.1f}%, {} p99 {:.0f} ms",
                     study_.candidates[i].name, rate, repeat + 1, 100 * step.slo_attainment,
                     pooling ? "E2E" : "TTFT",
                     pooling ? step.e2e_ms.p99.value : step.ttft_ms.p99.value));
    return t;
  };
  const analyze::CapacityResult found = analyze::SearchCapacity(o, measure, stop);
  std::vector<std::vector<StepFigures>> per_point;
  for (const analyze::RatePoint& p : found.points) per_point.push_back(trials[p.rate_per_s]);
  c.capacity = SummarizeCapacity(found, per_point);
  c.capacity.simulated = target->simulated;
  c.capacity.emulated = c.emulated;
  c.capacity.path = Relative(dir / "result.json");
  const bool cut_at_slice = slice_halt && found.interrupted && !halt_.halted();
  if (slice_halt) NoteCapacityCut(i, found, per_point, *slice, cut_at_slice);
  if ((found.interrupted || halt_.halted()) && !cut_at_slice) {
    c.capacity.skipped_reason = halt_.user_stopped() ? "interrupted" : "cut when the budget was spent";
    Skip(i, "capacity", c.capacity.skipped_reason);
    c.capacity.ran = false;
    return;
  }
  if (found.bracket == analyze::Bracket::kUnfinished && !found.stopped_reason.empty() && !cut_at_slice) {
    c.capacity.error = found.stopped_reason;
  }
  if (cut_at_slice) c.capacity.stopped_reason = "ended at its slice of the budget";
  if (Status st = WriteFileAtomically(dir / "result.json", DumpJson(ToJson(c.capacity), 2)); !st.ok()) {
    log_(st.error().message);
  }
  log_(fmt::format("{}: capacity {}", study_.candidates[i].name,
                   c.capacity.capacity_per_s >= 0 ? fmt::format("{:.3g} req/s ({})", c.capacity.capacity_per_s, c.capacity.bracket)
                                                  : c.capacity.bracket));
}

}  // namespace bakeoff::study::runner_internal
