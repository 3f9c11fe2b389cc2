// run/simulate.h
//
// Owns: one `bakeoff simulate` run end to end: the same load steps `bakeoff bench` would run
// (open loop, closed loop, trace replay with sessions; the same prompts for the same seed, built
// by load/request_builder.h), fed on a virtual clock to replicas of the emulated engine
// (emulate/simulator.h), written as the same records.jsonl and summary.json as a real run, marked
// emulated and simulated (records.jsonl keeps all, a sample or none of the requests: RecordsKept).
// Each step starts on fresh, idle replicas with empty caches.
// Does not own: flag parsing (cli/), the engine model (emulate/), figures (analyze/step_analysis.h).
//
// Determinism: records.jsonl and summary.json depend only on the configuration (no wall-clock
// field), so the same seed gives byte-identical files.
// Thread-safety: RunSimulate blocks; `stop` may be set from a signal watcher (sending stops, the
// requests already in the engine finish on the virtual clock, and the files are written).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "run/bench.h"
#include "analyze/slo.h"
#include "emulate/simulator.h"
#include "load/runner.h"
#include "workload/trace.h"

namespace bakeoff::run {

// What records.jsonl keeps of a simulate run's requests. summary.json and every figure in it come
// from every request whatever is kept; a fleet-sized run need not write gigabytes to say so.
struct RecordsKept {
  enum class Mode {
    kAuto,      // kAll for a step of at most kAutoAllUpTo planned requests, else kSample
    kAll,       // every request with its token instants
    kNoTokens,  // every request, without the token instants (token_event_* fields)
    kSample,    // every request whose id is a multiple of a step's stride (about sample_size per step)
    kNone,      // no records.jsonl
  };
  static constexpr std::uint64_t kAutoAllUpTo = 100'000;
  Mode mode = Mode::kAll;
  std::uint64_t sample_size = 20'000;
};
std::string_view RecordsKeptName(RecordsKept::Mode mode);  // "auto", "all", "records", "sample", "summary"

// A step's replicas are noted as unbalanced when the busiest did more than this many times the
// mean replica's work (or some got no request at all): summary.json simulator.balance.
inline constexpr double kImbalanceNoted = 1.25;

struct SimulateConfig {
  load::RunSpec run;  // steps, shape, seed, and the request template (api, ignore_eos, ...)
  emulate::SimConfig sim;
  std::string preset;  // the engine preset's name and file, for the summary
  analyze::Slo slo;
  std::filesystem::path out_dir;
  nlohmann::json flags;  // the configuration as given, recorded in summary.json
  std::shared_ptr<const workload::Trace> trace;
  RecordsKept keep;  // a study keeps every record (its replay's head-of-line figures read them)
};

// One step of a simulate run, simulated on fresh replicas: its figures, what each replica did, and
// how evenly the router spread it (summary.json simulator.balance, with a note when uneven).
struct SimulatedStep {
  analyze::StepAnalysis analysis;
  std::vector<emulate::ReplicaCounters> replicas;
  nlohmann::json balance;
  std::vector<std::string> notes;
  std::uint64_t kept_every = 0;  // records written to `sink`: every kept_every-th request (0: none)
  std::uint64_t kept = 0;
};

// Simulates step `step` of `config`, writing the records `config.keep` keeps to `sink` (null: none;
// `bakeoff plan` runs many steps and keeps only their figures). REQUIRES: step < config.run.steps.size()
// and ValidateSimConfig(config.sim).ok().
SimulatedStep SimulateStep(const SimulateConfig& config, std::uint32_t step, load::RecordSink* sink,
                           const std::atomic<bool>& stop);

// The words per token of the emulated tokenizer (the figure bench measures against a server's /tokenize).
double EmulatedWordsPerToken();

Result<BenchOutcome> RunSimulate(const SimulateConfig& config, const std::atomic<bool>& stop,
                                 const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::run
