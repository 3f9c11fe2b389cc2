// run/fleet_plan.h
//
// Owns: `bakeoff plan`: the fewest replicas of an engine model that serve a load within an SLO,
// for each router, and how that answer moves under what-ifs (double the traffic, prefix reuse
// halved, answers twice as long). Every fleet size it states was simulated (run/simulate.h,
// SimulateStep) and judged by the capacity search's rule (analyze/capacity_search.h, DecideRate):
// SLO attainment and availability at least their targets and every percentile term met.
// Does not own: flags (cli/plan_command.cc), the engine model or the routers (emulate/simulator.h).
//
// Search, per scenario and router: a first guess from one replica's measured capacity (a trace's
// first 2,000 requests queued at once on one replica, or a synthetic load as a closed loop at twice
// max_num_seqs: its throughput bounds what one replica serves; for a what-if, scaled by how far the guess was from the answer for the same
// router as given), then up by half again until a size passes (or --max-replicas fails), down by
// a third until one fails, then bisection, so the answer N has N passing and N - 1 failing (or N
// = 1). When growth looks unable to reach the attainment target before --max-replicas (the last
// growth gained nothing, or at its gain the target lies beyond the steps left), the search tries
// --max-replicas itself: if that fails too it stops, saying the router, not the fleet size, is the
// limit; if it passes, it bisects down from there. A trial cut short by a stop signal is dropped. This assumes more replicas
// never make the SLO harder to meet; plan.json lists every size simulated so a reader can see it
// held.
//
// Refusal: before any search, the load is replayed on one idle replica (up to kIdleRequests of its
// requests, each alone: far apart in time); when even that misses an SLO term, no fleet size can
// meet it, and PlanFleet returns kInvalidInput saying which term and by how much.
//
// Thread-safety: PlanFleet blocks; `stop` may be set from a signal watcher (the plan ends with
// what it has, marked interrupted).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/capacity_search.h"
#include "run/simulate.h"

namespace bakeoff::run {

inline constexpr std::uint64_t kIdleRequests = 200;
// The largest fleet a plan may try, as simulate's --replicas: each replica holds its own KV pool.
inline constexpr std::int64_t kMaxPlanReplicas = 4096;

enum class WhatIf : std::uint8_t { kDoubleTraffic, kHalfPrefixReuse, kDoubleOutput };
inline constexpr WhatIf kAllWhatIfs[] = {WhatIf::kDoubleTraffic, WhatIf::kHalfPrefixReuse, WhatIf::kDoubleOutput};
std::string_view WhatIfName(WhatIf what_if);  // "double-traffic", "half-prefix-reuse", "double-output"
std::optional<WhatIf> ParseWhatIf(std::string_view name);

struct FleetPlanConfig {
  // The load (one open-loop or trace-replay step), the engine model, the SLO; its sim.replicas and
  // sim.router are set per trial.
  SimulateConfig load;
  double growth = 1;  // the load's arrival rate is multiplied by this before anything else
  std::vector<emulate::Router> routers;
  std::vector<WhatIf> what_ifs;
  std::int64_t max_replicas = 1024;
  double target_attainment = 0.99;
  double min_availability = 0.99;
};

// OK, or kInvalidInput naming what is wrong (no SLO, a closed-loop or multi-step load, no router).
Status ValidateFleetPlanConfig(const FleetPlanConfig& config);

// One fleet size simulated.
struct FleetTrial {
  std::int64_t replicas = 0;
  bool passed = false;
  std::string why_not;  // when not passed
  double attainment = 0;
  double availability = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p50_ms = 0, tpot_p99_ms = 0;
  double output_tokens_per_s = 0;
  double busiest_work_over_mean = 0;  // simulator.balance: 1 is an even spread
  std::uint64_t idle_replicas = 0;
};

struct RouterPlan {
  emulate::Router router = emulate::Router::kRoundRobin;
  std::optional<std::int64_t> replicas;  // the fewest that passed; nullopt: none up to max_replicas
  std::string gave_up;                   // when the search stopped growing early, why
  std::vector<FleetTrial> trials;        // in the order simulated
  const FleetTrial* Chosen() const;      // the trial at `replicas`
};

struct ScenarioPlan {
  std::string name;    // "as given" or a what-if's name
  std::string change;  // what was changed, in words ("prefix reuse 57.1% -> 28.6% (ideal cache)")
  std::string not_applicable;  // non-empty: the what-if does not apply to this load, and why
  double offered_rate_per_s = 0;  // requests / span of their arrivals
  std::uint64_t requests = 0;
  double one_replica_capacity_per_s = 0;  // the saturated replay's throughput
  std::vector<RouterPlan> routers;
};

struct FleetPlan {
  FleetTrial idle;  // one replica, one request at a time
  std::vector<ScenarioPlan> scenarios;
  bool interrupted = false;
  std::uint64_t simulations = 0;
};

// Plans the fleet. kInvalidInput when the config is invalid or the SLO fails on one idle replica.
// `log` gets one line per simulated fleet size.
Result<FleetPlan> PlanFleet(const FleetPlanConfig& config, const std::atomic<bool>& stop,
                            const std::function<void(const std::string&)>& log);

// plan.json (docs/formats/plan.md).
nlohmann::json ToJson(const FleetPlan& plan, const FleetPlanConfig& config);

// The table `bakeoff plan` prints: per scenario and router the replicas, the saving against
// round-robin, and the figures at that size.
std::string FormatFleetPlan(const FleetPlan& plan);

}  // namespace bakeoff::run
