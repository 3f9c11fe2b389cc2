// study/runner_load.cc: the load phases a round runs for each candidate (runner.h, step 6):
// single request, the concurrency sweep and the workload replay, each in its slice of the budget
// (runner_budget.cc) and measured on the virtual clock for an emulated candidate; and the load job
// every load phase sends (the capacity search's trials too: runner_capacity.cc). Declarations in
// runner_impl.h.
#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <simdjson.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "stats/quantile.h"
#include "study/runner_impl.h"

namespace bakeoff::study::runner_internal {

namespace fs = std::filesystem;

namespace {

// TTFT p99 of the shortest and longest quarter of prompts among a step's ok measured records.
// Reads the records a line at a time: a long replay's file is never held whole.
void HeadOfLine(const fs::path& records, StepFigures& f) {
  std::ifstream in(records);
  if (!in) return;
  std::vector<std::pair<double, double>> rows;  // (prompt tokens, ttft ms)
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element row;
    if (!line.empty() && !parser.parse(line).get(row)) {
      std::string_view phase, outcome;
      std::int64_t send = 0, first = 0, planned = 0;
      if (!row["phase"].get(phase) && phase == "measure" && !row["outcome"].get(outcome) && outcome == "ok" &&
          !row["send_start_ns"].get(send) && !row["first_token_ns"].get(first) &&
          !row["prompt_tokens_planned"].get(planned)) {
        rows.emplace_back(static_cast<double>(planned), static_cast<double>(first - send) / 1e6);
      }
    }
  }
  if (rows.size() < 8) return;
  std::sort(rows.begin(), rows.end());
  const std::size_t quarter = rows.size() / 4;
  auto p99 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return stats::NearestRank(v, 0.99);
  };
  std::vector<double> shorts, longs;
  for (std::size_t i = 0; i < quarter; ++i) shorts.push_back(rows[i].second);
  for (std::size_t i = rows.size() - quarter; i < rows.size(); ++i) longs.push_back(rows[i].second);
  f.short_ttft_p99_ms = p99(shorts);
  f.long_ttft_p99_ms = p99(longs);
  f.short_count = shorts.size();
  f.long_count = longs.size();
}

}  // namespace

void StudyRunner::LoadPhase(std::size_t i, Phase phase, std::uint32_t round) {
  CandidateResult& c = results_.candidates[i];
  const std::string name = fmt::format("{}-r{}", PhaseName(phase), round);
  const fs::path dir = Dir(i, name);
  // Its weight leaves the pending share whether it runs, is read back or is skipped.
  const std::optional<Nanos> slice = TakeSlice(i, phase);
  if (ReadBackLoadPhase(i, name)) return;
  if (std::string why = WhyNot(i); !why.empty()) {
    Skip(i, name, why);
    return;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  PhaseResult result;
  result.phase = phase;
  result.round = round;
  result.emulated = c.emulated;
  Result<run::LoadTarget> target = Target(i);
  if (!target.ok()) {
    c.failed = fmt::format("{}: {}", name, target.error().message);
    log_(fmt::format("{}: failed: {}", study_.candidates[i].name, c.failed));
    return;
  }
  result.simulated = target->simulated;
  run::LoadJob job = Job(dir);
  job.run.steps = Steps(phase);
  const StepsSlice sliced = SliceSteps(slice, target->simulated, job.run.steps);
  log_(fmt::format("{}: {} ({}){}", study_.candidates[i].name, PhaseName(phase), round + 1,
                   target->simulated ? " on the virtual clock"
                                     : slice ? fmt::format(", {:.0f} s of the budget", ToSeconds(*slice)) : ""));
  Result<run::BenchOutcome> outcome = run::RunLoadJob(target.value(), std::move(job), halt_.flag(), Quiet());
  if (!outcome.ok()) {
    c.failed = fmt::format("{}: {}", name, outcome.error().message);
    log_(fmt::format("{}: failed: {}", study_.candidates[i].name, c.failed));
    return;
  }
  for (const analyze::StepAnalysis& step : outcome->steps) {
    result.steps.push_back(FiguresOf(step, Relative(outcome->records_path)));
    if (!step.stopped_reason.empty()) result.error = c.failed = fmt::format("{}: {}", name, step.stopped_reason);
  }
  if (phase == Phase::kReplay && !result.steps.empty()) HeadOfLine(outcome->records_path, result.steps.front());
  result.unequal_work = outcome->unequal_work;
  // A server that says it is bakeoff's emulated engine is labelled so, however it was started.
  if (outcome->emulated) result.emulated = c.emulated = true;
  if (outcome->interrupted || halt_.halted()) {
    Skip(i, name, halt_.user_stopped() ? "interrupted" : "cut when the budget was spent");
    return;
  }
  if (Status st = WriteFileAtomically(dir / "result.json", DumpJson(ToJson(result), 2)); !st.ok()) {
    log_(st.error().message);
  }
  NoteStepCuts(i, name, result, sliced);
  c.phases.push_back(std::move(result));
}

run::LoadJob StudyRunner::Job(const fs::path& dir) const {
  run::LoadJob job;
  dialect::GenerationRequest& r = job.run.target.request;
  r.api = StudyApi(study_);
  r.model = study_.model.name;
  // Every candidate generates the workload's lengths: the same work. A pooling route answers
  // whole, with `inputs_per_request` texts of each workload request's input length.
  r.stream = dialect::ApiGenerates(r.api);
  r.ignore_eos = dialect::ApiGenerates(r.api);
  job.run.seed = study_.traffic.seed;
  job.run.shape = TypicalShape();
  job.run.shape.batch = study_.traffic.inputs_per_request;
  job.slo = study_.slo.latency;
  job.run.slo = job.slo.RequestThresholds();
  job.trace = trace_;
  job.out_dir = dir;
  job.flags = {{"study", study_.name}, {"study_sha256", results_.study_hash}};
  return job;
}

load::RequestShape StudyRunner::TypicalShape() const {
  std::vector<double> in, out;
  for (const workload::TraceRequest& r : trace_->requests) {
    in.push_back(r.input_tokens);
    out.push_back(r.output_tokens);
  }
  std::sort(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  load::RequestShape shape;
  shape.prompt_tokens = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(stats::NearestRank(in, 0.5)));
  shape.output_tokens = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(stats::NearestRank(out, 0.5)));
  return shape;
}

std::vector<load::StepSpec> StudyRunner::Steps(Phase phase) const {
  std::vector<load::StepSpec> steps;
  const PlanSpec& plan = study_.plan;
  switch (phase) {
    case Phase::kSingle: {
      load::StepSpec s;
      s.mode = load::LoopMode::kClosed;
      s.concurrency = 1;
      s.limits.requests = plan.single_requests;
      s.limits.warmup_requests = 1;
      s.label = "single";
      steps.push_back(s);
      break;
    }
    case Phase::kSweep:
      for (std::uint32_t n : plan.concurrency) {
        load::StepSpec s;
        s.mode = load::LoopMode::kClosed;
        s.concurrency = n;
        s.limits.requests = plan.step_requests;
        s.limits.warmup_requests = n;
        s.label = fmt::format("concurrency={}", n);
        steps.push_back(s);
      }
      break;
    case Phase::kReplay: {
      load::StepSpec s;
      s.mode = load::LoopMode::kTrace;
      s.trace = trace_.get();
      s.time_scale = 1 / plan.replay_rate_scale;
      s.limits.requests = plan.replay_requests > 0 ? plan.replay_requests : trace_->requests.size();
      s.label = "replay";
      steps.push_back(s);
      break;
    }
    default:
      break;
  }
  return steps;
}

}  // namespace bakeoff::study::runner_internal
