// cli/simulate_setup.h
//
// Owns: the flags `bakeoff simulate` and `bakeoff plan` share (the load flags, an engine preset,
// the prefix-affinity tokens, a replica's queue limit and bench's drain timeout) and the run::SimulateConfig they build,
// validated with one line naming the flag or the preset file:line.
// Does not own: each command's own flags (replicas and router for simulate; routers, what-ifs and
// the search bounds for plan).
#pragma once

#include <cstdint>
#include <string>

#include "cli/load_flags.h"
#include "run/simulate.h"

namespace bakeoff::cli {

struct EngineModelFlags {
  std::string preset = "continuous-paged";
  std::int64_t affinity_tokens = 256;
  std::int64_t max_waiting = 0;
  std::string drain_timeout = "60s";  // bench's client deadline after the last send, simulated
  // bench's per-request client deadlines, simulated: a stream silent this long, a whole answer
  // not there this long after the send, any request this long.
  std::string idle_timeout = "60s";
  std::string first_byte_timeout = "120s";
  std::string request_timeout = "30min";
};

void AddEngineModelOptions(CLI::App& command, EngineModelFlags& flags);

// The load and engine model the flags describe, with summary.json's flags record (load flags,
// preset, affinity_tokens, max_waiting and the preset's full engine). `command` prefixes warnings.
Result<run::SimulateConfig> BuildSimulateConfig(const LoadFlags& load, const EngineModelFlags& engine,
                                                const std::string& command);

}  // namespace bakeoff::cli
