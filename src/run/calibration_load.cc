// run/calibration_load.cc: the calibration experiments' loads (contract in calibration_load.h).
#include "run/calibration_load.h"

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "stats/quantile.h"

namespace bakeoff::run {
namespace {

class MemorySink final : public load::RecordSink {
 public:
  void Write(const measure::RequestRecord& record, MonoTime) override {
    std::lock_guard lock(mutex_);
    records_.push_back(record);
  }
  std::vector<measure::RequestRecord> Take() {
    std::lock_guard lock(mutex_);
    return std::move(records_);
  }

 private:
  std::mutex mutex_;
  std::vector<measure::RequestRecord> records_;
};

CalibrationLoad Run(const load::RunSpec& spec, const std::atomic<bool>& stop) {
  MemorySink sink;
  load::RunLoad(spec, sink, stop, nullptr);
  std::vector<measure::RequestRecord> records = sink.Take();
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  CalibrationLoad load;
  for (measure::RequestRecord& r : records) {
    if (r.outcome == measure::Outcome::kOk && r.send_start && r.first_token) {
      load.ok.push_back(std::move(r));
    } else {
      ++load.failed;
      if (load.first_error.empty()) {
        load.first_error = !r.error.empty()                     ? r.error
                           : r.outcome == measure::Outcome::kOk ? "answered without any token event (no first token)"
                                                                : measure::OutcomeName(r.outcome);
      }
    }
  }
  return load;
}

load::RunSpec OneStep(const load::TargetSpec& target, load::StepSpec step, std::uint64_t seed) {
  load::RunSpec spec;
  spec.target = target;
  spec.seed = seed;
  spec.workers = 1;
  spec.start_lead = std::chrono::milliseconds(2);  // one worker: nothing to start together
  step.limits.warmup_requests = 0;
  spec.steps = {std::move(step)};
  return spec;
}

}  // namespace

CalibrationLoad RunClosedPoint(const load::TargetSpec& target, std::uint32_t prompt_tokens,
                               std::uint32_t output_tokens, std::uint32_t concurrency, std::uint64_t requests,
                               std::uint64_t seed, const std::atomic<bool>& stop) {
  load::StepSpec step;
  step.mode = load::LoopMode::kClosed;
  step.concurrency = concurrency;
  step.limits.requests = requests;
  step.label = fmt::format("P={} c={}", prompt_tokens, concurrency);
  load::RunSpec spec = OneStep(target, std::move(step), seed);
  // The template says how this engine forces a length (run::FitRequestToEngine); it holds here.
  if (spec.target.request.min_tokens) spec.target.request.min_tokens = output_tokens;
  spec.shape = {prompt_tokens, output_tokens, 1};
  return Run(spec, stop);
}

CalibrationLoad RunTracePoint(const load::TargetSpec& target, const workload::Trace& trace, std::uint64_t seed,
                              const std::atomic<bool>& stop, Nanos drain_timeout) {
  load::StepSpec step;
  step.mode = load::LoopMode::kTrace;
  step.trace = &trace;
  step.limits.requests = trace.requests.size();
  step.label = "calibration trace";
  load::RunSpec spec = OneStep(target, std::move(step), seed);
  spec.drain_timeout = drain_timeout;
  return Run(spec, stop);
}

workload::TraceRequest TraceRequestOf(double arrival_s, std::uint32_t input, std::uint32_t output,
                                      std::vector<std::uint64_t> blocks) {
  workload::TraceRequest r;
  r.arrival_s = arrival_s;
  r.input_tokens = input;
  r.output_tokens = output;
  r.prefix_hashes = std::move(blocks);
  return r;
}

workload::Trace TraceOf(std::vector<workload::TraceRequest> requests, std::uint32_t block_tokens) {
  workload::Trace trace;
  trace.source = "bakeoff calibrate";
  trace.block_tokens = block_tokens;
  trace.requests = std::move(requests);
  return trace;
}

PromptCount CountedPrompt(const std::vector<measure::RequestRecord>& ok, std::uint32_t planned) {
  PromptCount sum;
  std::size_t counted = 0;
  for (const measure::RequestRecord& r : ok) {
    if (r.usage_prompt_tokens) {
      sum.tokens += static_cast<double>(*r.usage_prompt_tokens);
      sum.cached += static_cast<double>(r.usage_cached_tokens.value_or(0));
      ++counted;
    }
  }
  if (counted == 0) return {static_cast<double>(planned), 0};
  return {sum.tokens / static_cast<double>(counted), sum.cached / static_cast<double>(counted)};
}

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return stats::NearestRank(values, 0.5);
}

double TtftMs(const measure::RequestRecord& r) { return ToMillis(*r.first_token - *r.send_start); }

}  // namespace bakeoff::run
