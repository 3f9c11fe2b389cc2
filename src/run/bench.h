// run/bench.h
//
// Owns: one `bakeoff bench` run end to end: discover the target (target/discovery.h), refuse
// lengths the target cannot take, calibrate prompt lengths (target/prompt_calibration.h) and
// refuse a run whose prompts would be off by more than the tolerance, run the load steps, stream
// raw records to <out>/records.jsonl as requests finish, and write <out>/summary.json
// (docs/formats/summary.md) even when the run is interrupted. The output folder is created only
// once the run is about to start, so a run refused early leaves nothing behind.
// Does not own: flag parsing (cli/) or the load itself (load/runner.h).
//
// Thread-safety: RunBench blocks; `stop` may be set from a signal watcher.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/slo.h"
#include "core/file.h"
#include "analyze/step_analysis.h"
#include "load/runner.h"
#include "target/metrics_timeline.h"
#include "target/resource_telemetry.h"
#include "workload/trace.h"

namespace bakeoff::run {

// The run's intent for every request beyond its prompt, before the engine's route had its say.
struct RequestIntent {
  bool forced_length = false;          // --ignore-eos: every answer max_tokens long
  std::string forced_length_not_sent;  // why the route could not ask for it ("" = it was sent)
};

// Withholds what `request`'s route or `adapter` cannot send: --ignore-eos on a route or engine
// without the fields clears them and says why in the returned intent; an engine with ignore_eos
// but no min_tokens gets ignore_eos alone; min_tokens goes under the adapter's field name.
// `adapter` may be null (the generic OpenAI fields are sent).
RequestIntent FitRequestToEngine(dialect::GenerationRequest& request, const target::EngineAdapter* adapter);

struct BenchConfig {
  load::RunSpec run;           // target, shape, steps, workers, seed
  std::string url;             // as given, for the summary
  analyze::Slo slo;
  std::filesystem::path out_dir;
  bool calibrate_prompt = true;  // measure how the server counts prompts (tokenize route, usage)
  double prompt_tolerance = 0.05;  // refuse when the checked prompt length is off by more
  nlohmann::json flags;          // the full configuration as given, recorded in summary.json
  std::shared_ptr<const workload::Trace> trace;  // kept alive for trace-replay steps
  // The engine's metrics page, scraped every `metrics_interval` beside the load into
  // <out>/metrics.jsonl (target/metrics_timeline.h); an empty path or a zero interval: not scraped.
  std::string metrics_path = "/metrics";
  Nanos metrics_interval = std::chrono::seconds(1);
  const target::EngineAdapter* adapter = nullptr;  // its metric names; null: any engine's
  // Resources the engine uses while it serves (target/resource_telemetry.h), into
  // <out>/telemetry.jsonl: its process tree's CPU and RSS when its pid is known, GPUs via nvidia-smi.
  std::optional<pid_t> engine_pid;
  bool gpu_telemetry = true;
  Nanos telemetry_interval = std::chrono::seconds(1);
  // Cost per output token from this price (per hour of everything the engine runs on); 0: none.
  double price_per_hour = 0;
  // What every request was meant to carry, when the engine's route could not send it all
  // (summary.json "fairness"; docs/formats/summary.md).
  RequestIntent intent;
};

struct BenchOutcome {
  std::vector<analyze::StepAnalysis> steps;
  bool emulated = false;        // the target said it is bakeoff's emulated engine
  bool interrupted = false;
  std::filesystem::path summary_path;
  std::filesystem::path records_path;
  std::vector<std::string> notes;  // calibration results and warnings, for the user
  std::vector<target::StepServerFigures> server;  // the engine's own figures per step, when scraped
  std::filesystem::path metrics_path;             // metrics.jsonl, when scraped
  std::optional<target::ResourceSummary> resources;  // what the engine used, when sampled
  std::string summary_error;       // summary.json or records could not be written (exit 1)
  std::vector<std::string> unequal_work;  // summary.json fairness.unequal_work, for comparisons
};

// `log` receives human-readable progress lines (discovery, calibration, step starts).
// `on_tick` receives live counters (see load::RunLoad).
Result<BenchOutcome> RunBench(BenchConfig config, const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log,
                              const std::function<void(std::size_t, const load::Progress&)>& on_tick);

inline constexpr int kSummarySchemaVersion = 1;

// Appends each record to records.jsonl as one line; the first write failure is printed once and
// remembered. Safe to call from several threads (LineWriter serialises).
class JsonlRecordSink final : public load::RecordSink {
 public:
  explicit JsonlRecordSink(LineWriter& writer) : writer_(writer) {}
  void Write(const measure::RequestRecord& record, MonoTime t0) override;
  bool failed() const { return failed_.load(); }

 private:
  LineWriter& writer_;
  std::atomic<bool> failed_{false};
};

// The configuration keys (BenchConfig::flags) that say how one process took part in a load, not
// which load it sent: the shards of one load differ only in these.
inline constexpr const char* kPerProcessConfigKeys[] = {
    "url", "workers", "shard", "start_at", "api_key_env", "insecure", "engine_pid", "gpu_telemetry",
    "metrics_interval", "metrics_path", "price_per_hour"};
// The configuration keys that name files: their contents count in the schedule, not their paths.
inline constexpr const char* kContentConfigKeys[] = {"trace", "structured_spec"};
// `flags` without the per-process keys and without the paths of the trace and of the structured
// output spec (their contents count instead).
nlohmann::json ScheduleDefiningConfig(const nlohmann::json& flags);
// summary.json "schedule": a sha256 over ScheduleDefiningConfig, the trace's content (every
// request's arrival, lengths, text, prefix blocks and session) and the output constraint's spec.
// Equal for the shards of one load; runs with equal digests sent the same schedule under the same
// settings (the SLO, deadlines and tolerances are hashed too: merged shards must share them).
nlohmann::json ScheduleIdentity(const nlohmann::json& flags, const workload::Trace* trace,
                                const std::optional<dialect::OutputConstraint>& constraint);

// The fields every summary.json starts with: schema_version, tool, seed, config.
nlohmann::json SummaryPreamble(std::uint64_t seed, const nlohmann::json& flags);

// summary.json "pooling" of a pooling route's run: the api and, per step, the inputs (texts or
// documents) per request and per second.
nlohmann::json PoolingSummaryJson(dialect::Api api, std::uint32_t inputs_per_request,
                                  const std::vector<analyze::StepAnalysis>& steps);

// Completes `summary` with the fields every run ends with (interrupted, records_file unless it
// names one already, records_write_failed, steps) and writes it atomically to outcome.summary_path. When it or some
// record could not be written, outcome.summary_error says so; the outcome is still returned, so
// the figures reach the terminal.
void WriteSummary(nlohmann::json summary, nlohmann::json steps, BenchOutcome& outcome,
                  const JsonlRecordSink& sink);

}  // namespace bakeoff::run
