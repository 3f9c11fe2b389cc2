// run/simulate.h
//
// Owns: one `bakeoff simulate` run end to end: the same load steps `bakeoff bench` would run
// (open loop, closed loop, trace replay with sessions; the same prompts for the same seed, built
// by load/request_builder.h), fed on a virtual clock to replicas of the emulated engine
// (emulate/simulator.h), written as the same records.jsonl and summary.json as a real run, marked
// emulated and simulated. Each step starts on fresh, idle replicas with empty caches.
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

#include <nlohmann/json.hpp>

#include "run/bench.h"
#include "analyze/slo.h"
#include "emulate/simulator.h"
#include "load/runner.h"
#include "workload/trace.h"

namespace bakeoff::run {

struct SimulateConfig {
  load::RunSpec run;  // steps, shape, seed, and the request template (api, ignore_eos, ...)
  emulate::SimConfig sim;
  std::string preset;  // the engine preset's name and file, for the summary
  analyze::Slo slo;
  std::filesystem::path out_dir;
  nlohmann::json flags;  // the configuration as given, recorded in summary.json
  std::shared_ptr<const workload::Trace> trace;
};

Result<BenchOutcome> RunSimulate(const SimulateConfig& config, const std::atomic<bool>& stop,
                                 const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::run
