// run/load_target.h
//
// Owns: where a load runs, and running it there through one call: a server over HTTP (bench:
// run/bench.h, with discovery and prompt calibration) or replicas of the emulated engine on the
// virtual clock (simulate: run/simulate.h). The study drives every candidate through this, so a
// measured and a simulated candidate get the same steps, prompts, SLO and output files.
// Does not own: what the steps are (the caller's load::RunSpec), or starting a server (target/).
//
// Thread-safety: RunLoadJob blocks; `stop` may be set from another thread.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "emulate/simulator.h"
#include "run/bench.h"
#include "target/adapters.h"

namespace bakeoff::run {

struct LoadTarget {
  bool simulated = false;
  // A server: its base URL, client options, and the engine's adapter.
  std::string url;
  net::ClientOptions client;
  // Its request fields (forced length) and metric names; null: generic OpenAI fields, any engine's
  // metric names.
  const target::EngineAdapter* adapter = nullptr;
  std::string metrics_path = "/metrics";           // scraped beside the load; empty: not scraped
  std::optional<pid_t> engine_pid;                 // a launched engine: its CPU and memory are sampled
  double price_per_hour = 0;                       // for cost per output token in summary.json
  // The virtual clock: the engine model and its preset's name.
  emulate::SimConfig sim;
  std::string preset;
};

struct LoadJob {
  load::RunSpec run;  // request template, shape, steps, seed (the endpoint is the target's)
  analyze::Slo slo;
  std::shared_ptr<const workload::Trace> trace;
  std::filesystem::path out_dir;
  nlohmann::json flags;  // recorded in summary.json
};

Result<BenchOutcome> RunLoadJob(const LoadTarget& target, LoadJob job, const std::atomic<bool>& stop,
                                const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::run
