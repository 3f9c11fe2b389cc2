// run/fleet_plan.cc: the fewest replicas per router and what-if (contract in fleet_plan.h).
#include "run/fleet_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "load/plan.h"
#include "workload/synthesis.h"
#include "workload/trace_transform.h"

namespace bakeoff::run {
namespace {

constexpr std::array<std::pair<WhatIf, std::string_view>, 3> kWhatIfNames = {{
    {WhatIf::kDoubleTraffic, "double-traffic"},
    {WhatIf::kHalfPrefixReuse, "half-prefix-reuse"},
    {WhatIf::kDoubleOutput, "double-output"},
}};

// Requests the saturated replay that measures one replica's capacity uses at most.
constexpr std::uint64_t kCapacityRequests = 2000;
// The idle replay's requests are this far apart (virtual seconds): each finds the replica empty.
constexpr double kIdleGapSeconds = 3600;


// A scenario's load: the config and the trace it points into (owned here, as StepSpec holds a
// plain pointer).
struct Load {
  SimulateConfig config;
  std::shared_ptr<workload::Trace> trace;
  load::StepSpec& step() { return config.run.steps[0]; }
};

Load CopyLoad(const SimulateConfig& base) {
  Load load{base, nullptr};
  if (base.run.steps[0].mode == load::LoopMode::kTrace) {
    load.trace = std::make_shared<workload::Trace>(*base.run.steps[0].trace);
    load.config.trace = load.trace;
    load.step().trace = load.trace.get();
  }
  return load;
}

// The first `count` requests of the load, each at `gap_s` after the previous (0: all at once).
Load Respaced(const SimulateConfig& base, std::uint64_t count, double gap_s) {
  Load load = CopyLoad(base);
  load::StepSpec& step = load.step();
  step.limits = load::StepLimits{};
  if (step.mode == load::LoopMode::kTrace) {
    std::vector<workload::TraceRequest>& requests = load.trace->requests;
    if (requests.size() > count) requests.resize(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < requests.size(); ++i) {
      requests[i].arrival_s = static_cast<double>(i) * gap_s / step.time_scale;
    }
    return load;
  }
  // Open loop: a closed loop keeps that many in flight (one: each request alone).
  step.mode = load::LoopMode::kClosed;
  const auto max_seqs = static_cast<std::uint32_t>(std::max<std::int64_t>(1, base.sim.engine.max_num_seqs));
  step.concurrency = gap_s > 0 ? 1 : std::min<std::uint32_t>(4096, 2 * max_seqs);
  step.limits.requests = count;
  return load;
}

// Requests over the engine's context are refused by every fleet: when they are more than the
// availability target allows, no size can pass. Says so (nullopt: they are few enough or none,
// and `log` is told of any).
std::optional<std::string> OverContext(Load& load, const FleetPlanConfig& config,
                                       const std::function<void(const std::string&)>& log) {
  const std::int64_t limit = config.load.sim.engine.max_model_len;
  std::uint64_t too_long = 0, requests = 0;
  if (load.step().mode == load::LoopMode::kTrace) {
    requests = load.trace->requests.size();
    for (const workload::TraceRequest& r : load.trace->requests) {
      if (static_cast<std::int64_t>(r.input_tokens) + r.output_tokens > limit) ++too_long;
    }
  } else {
    requests = 1;
    const std::int64_t asked = static_cast<std::int64_t>(load.config.run.shape.prompt_tokens) + load.config.run.shape.output_tokens;
    too_long = asked > limit ? 1 : 0;
  }
  const double share = static_cast<double>(too_long) / static_cast<double>(std::max<std::uint64_t>(1, requests));
  if (too_long > 0 && 1 - share < config.min_availability) {
    return fmt::format(
        "{:.1f}% of the requests ask for more than the preset's max_model_len {} (prompt + output): every fleet refuses "
        "them, so availability cannot reach {:g}%; shorten them (filter the trace), use a preset with a longer "
        "context, or lower --min-availability",
        100 * share, limit, 100 * config.min_availability);
  }
  if (too_long > 0) {
    log(fmt::format("{} of {} requests ask for more than max_model_len {}: every fleet refuses them (counted "
                    "against availability)",
                    too_long, requests, limit));
  }
  return std::nullopt;
}

// The SLO terms a step missed ("ttft_p99=200ms observed 812.3 ms"), or empty when it met them.
std::string MissedTerms(const analyze::StepAnalysis& step) {
  std::string miss;
  for (const analyze::SloResult& r : step.slo) {
    if (r.met) continue;
    if (!miss.empty()) miss += ", ";
    miss += fmt::format("{} observed {:.1f} ms", r.term.text, r.observed_ms);
  }
  return miss;
}

FleetTrial Trial(const Load& load, std::int64_t replicas, emulate::Router router, const FleetPlanConfig& config,
                 const std::atomic<bool>& stop, analyze::StepAnalysis* analysis_out = nullptr) {
  SimulateConfig c = load.config;
  c.sim.replicas = replicas;
  c.sim.router = router;
  SimulatedStep simulated = SimulateStep(c, 0, nullptr, stop);
  const analyze::StepAnalysis& a = simulated.analysis;
  analyze::CapacitySearchOptions judge;
  judge.target_attainment = config.target_attainment;
  judge.min_availability = config.min_availability;
  const analyze::RatePoint point =
      analyze::DecideRate(a.offered_rate_per_s, {analyze::TrialFromStep(a, a.offered_rate_per_s, 0)}, judge);
  FleetTrial t;
  t.replicas = replicas;
  t.passed = point.passed;
  // A failed percentile term is named with what was observed, rather than the search's wording.
  const std::string missed = MissedTerms(a);
  t.why_not = point.passed ? "" : missed.empty() ? point.why_not : missed;
  t.attainment = point.attainment.value;
  t.availability = point.availability.value;
  t.ttft_p50_ms = a.ttft_ms.p50.value;
  t.ttft_p99_ms = a.ttft_ms.p99.value;
  t.tpot_p50_ms = a.tpot_ms.p50.value;
  t.tpot_p99_ms = a.tpot_ms.p99.value;
  t.output_tokens_per_s = a.output_tokens_per_s;
  t.busiest_work_over_mean = simulated.balance.value("busiest_work_over_mean", 0.0);
  t.idle_replicas = simulated.balance.value("idle_replicas", std::uint64_t{0});
  if (analysis_out != nullptr) *analysis_out = a;
  return t;
}

struct OfferedLoad {
  std::uint64_t requests = 0;
  double rate_per_s = 0;  // requests over the span of the scheduled sends (a session's later turns count)
};

OfferedLoad Offered(Load& load) {
  const load::StepSpec& step = load.step();
  OfferedLoad offered;
  if (step.mode == load::LoopMode::kOpen) {
    offered.rate_per_s = step.open.rate_per_s;
    offered.requests = step.limits.requests.value_or(
        static_cast<std::uint64_t>(std::llround(step.open.rate_per_s * ToSeconds(step.limits.duration.value_or(Nanos{0})))));
    return offered;
  }
  const load::TracePlan trace_plan = load::BuildTracePlan(*step.trace, step.time_scale, step.limits);
  for (const load::PlannedSend& send : trace_plan.schedule) {
    for (std::int64_t k = static_cast<std::int64_t>(send.item); k >= 0; k = trace_plan.next_turn[static_cast<std::size_t>(k)]) {
      ++offered.requests;
    }
  }
  if (trace_plan.schedule.size() > 1) {
    const double span_s = ToSeconds(trace_plan.schedule.back().offset - trace_plan.schedule.front().offset);
    offered.rate_per_s = span_s > 0 ? static_cast<double>(offered.requests) / span_s : 0;
  }
  return offered;
}

// While growing: empty, or why more replicas look unable to reach the attainment target before
// max_replicas (fleet_plan.h, "Search"): the last growth gained nothing, or at its gain per step
// the target is further than the steps left. Below the saturation knee attainment can jump, so
// this is only a suspicion: the search then tries max_replicas itself before it gives up.
std::string Hopeless(const std::vector<FleetTrial>& trials, const FleetPlanConfig& config) {
  if (trials.size() < 2) return "";
  const FleetTrial& last = trials.back();
  const FleetTrial& before = trials[trials.size() - 2];
  if (last.replicas <= before.replicas || before.passed) return "";
  const double gain = last.attainment - before.attainment;
  const double gap = config.target_attainment - last.attainment;
  if (gap <= 0) return "";  // it fails on a term or availability, not attainment: keep growing
  const double steps_left = std::log(static_cast<double>(config.max_replicas) / static_cast<double>(last.replicas)) /
                            std::log(static_cast<double>(last.replicas) / static_cast<double>(before.replicas));
  if (gain > 0 && gap / gain <= steps_left) return "";
  return fmt::format("more replicas do not help: SLO attainment {:.2f}% at {} and {:.2f}% at {} replicas, "
                     "short of {:.2f}% (the router, not the fleet size, is the limit)",
                     100 * before.attainment, before.replicas, 100 * last.attainment, last.replicas,
                     100 * config.target_attainment);
}

// The fewest replicas that pass for one router (fleet_plan.h, "Search").
RouterPlan SearchReplicas(const Load& load, emulate::Router router, std::int64_t guess, const FleetPlanConfig& config,
                          const std::atomic<bool>& stop, const std::function<void(const std::string&)>& log,
                          const std::string& scenario, std::uint64_t& simulations) {
  RouterPlan plan;
  plan.router = router;
  std::map<std::int64_t, bool> passed;
  std::int64_t failing = 0;             // the largest size known to fail (0: none)
  std::optional<std::int64_t> passing;  // the smallest size known to pass
  std::int64_t n = std::clamp<std::int64_t>(guess, 1, config.max_replicas);
  std::string hopeless;  // set when growth looked unable to pass: max_replicas is tried next
  while (!stop.load()) {
    if (!passed.contains(n)) {
      FleetTrial trial = Trial(load, n, router, config, stop);
      ++simulations;
      if (stop.load()) break;  // a trial cut short judges nothing
      log(fmt::format("{}, {}: {} replica(s) {}", scenario, emulate::RouterName(router), n,
                      trial.passed ? "meet the SLO" : "miss: " + trial.why_not));
      passed[n] = trial.passed;
      plan.trials.push_back(std::move(trial));
    }
    if (passed[n]) passing = std::min(passing.value_or(n), n);
    else failing = std::max(failing, n);
    if (passing && (*passing == 1 || *passing - failing <= 1)) break;
    if (!passing) {
      if (n >= config.max_replicas) {
        if (!hopeless.empty()) {
          plan.gave_up = hopeless + fmt::format(", and --max-replicas {} fails too", config.max_replicas);
          log(fmt::format("{}, {}: {}", scenario, emulate::RouterName(router), plan.gave_up));
        }
        break;
      }
      if (hopeless.empty()) hopeless = Hopeless(plan.trials, config);
      if (!hopeless.empty()) {
        n = config.max_replicas;  // one look at the largest fleet before giving up
        continue;
      }
      n = std::min(config.max_replicas, std::max(n + 1, static_cast<std::int64_t>(std::ceil(1.5 * static_cast<double>(n)))));
    } else if (failing == 0) {
      n = std::max<std::int64_t>(1, std::min(*passing - 1, static_cast<std::int64_t>(std::floor(*passing / 1.5))));
    } else {
      n = failing + (*passing - failing) / 2;
    }
  }
  if (passing && (*passing == 1 || *passing - failing <= 1)) plan.replicas = passing;
  return plan;
}

}  // namespace

std::string_view WhatIfName(WhatIf what_if) {
  for (const auto& [w, name] : kWhatIfNames) {
    if (w == what_if) return name;
  }
  return "?";
}

std::optional<WhatIf> ParseWhatIf(std::string_view name) {
  for (const auto& [w, n] : kWhatIfNames) {
    if (n == name) return w;
  }
  return std::nullopt;
}

const FleetTrial* RouterPlan::Chosen() const {
  if (!replicas) return nullptr;
  for (const FleetTrial& t : trials) {
    if (t.replicas == *replicas) return &t;
  }
  return nullptr;
}

Status ValidateFleetPlanConfig(const FleetPlanConfig& config) {
  if (config.load.slo.empty()) return InvalidInput("--slo: plan sizes a fleet to meet an SLO; give one (e.g. ttft_p99=500ms)");
  if (config.load.run.steps.size() != 1) {
    return InvalidInput(fmt::format("plan sizes a fleet for one load, got {} steps (give one --rate, or --trace)",
                               config.load.run.steps.size()));
  }
  const load::StepSpec& step = config.load.run.steps[0];
  if (step.mode == load::LoopMode::kClosed) {
    return InvalidInput("plan sizes a fleet for an arrival rate: give --rate or --trace, not --concurrency");
  }
  if (step.mode == load::LoopMode::kTrace && step.trace == nullptr) return InvalidInput("plan: the trace step has no trace");
  if (config.routers.empty()) return InvalidInput("--routers: at least one router");
  if (config.max_replicas < 1 || config.max_replicas > kMaxPlanReplicas) {
    return InvalidInput(fmt::format("--max-replicas: {} is not in [1, {}]", config.max_replicas, kMaxPlanReplicas));
  }
  for (std::size_t i = 0; i < config.routers.size(); ++i) {
    if (std::find(config.routers.begin(), config.routers.begin() + static_cast<std::ptrdiff_t>(i), config.routers[i]) !=
        config.routers.begin() + static_cast<std::ptrdiff_t>(i)) {
      return InvalidInput(fmt::format("--routers: {} is named twice", emulate::RouterName(config.routers[i])));
    }
  }
  if (!(config.growth > 0 && config.growth <= 1e6)) return InvalidInput("--growth: must be in (0, 1000000]");
  if (!(config.target_attainment > 0 && config.target_attainment <= 1)) {
    return InvalidInput("--target-attainment: must be in (0, 1]");
  }
  if (!(config.min_availability >= 0 && config.min_availability <= 1)) {
    return InvalidInput("--min-availability: must be in [0, 1]");
  }
  return emulate::ValidateSimConfig(config.load.sim);
}

Result<FleetPlan> PlanFleet(const FleetPlanConfig& config, const std::atomic<bool>& stop,
                            const std::function<void(const std::string&)>& log) {
  if (Status valid = ValidateFleetPlanConfig(config); !valid.ok()) return valid.error();
  FleetPlan plan;
  Load grown = CopyLoad(config.load);
  if (grown.step().mode == load::LoopMode::kTrace) workload::ScaleRate(*grown.trace, config.growth);
  else grown.step().open.rate_per_s *= config.growth;

  if (std::optional<std::string> over = OverContext(grown, config, log)) return InvalidInput(*over);

  // The load on one idle replica: if that misses the SLO, no fleet meets it.
  analyze::StepAnalysis idle;
  plan.idle = Trial(Respaced(grown.config, kIdleRequests, kIdleGapSeconds), 1, emulate::Router::kRoundRobin, config,
                    stop, &idle);
  ++plan.simulations;
  if (const std::string miss = MissedTerms(idle); !miss.empty() || idle.ok_requests == 0) {
    return InvalidInput(fmt::format(
        "the SLO cannot be met by any fleet: one idle replica, serving {} of the load's requests one at a time, "
        "misses it ({})",
        idle.measured_requests, miss.empty() ? "no request completed: " + plan.idle.why_not : miss));
  }
  // Its terms held, but not every request: those requests alone miss on any fleet. A share of the
  // whole load may still reach the target, so this is said, not refused.
  if (!plan.idle.passed) {
    log(fmt::format("one idle replica, serving {} of the load's requests one at a time: {}; the targets may be out of "
                    "reach for any fleet",
                    idle.measured_requests, plan.idle.why_not));
  }

  // Per router, the answer over the capacity guess as given: what-ifs start from their guess scaled
  // by it.
  std::map<emulate::Router, double> guess_ratio;
  std::vector<std::optional<WhatIf>> scenarios = {std::nullopt};
  for (WhatIf w : config.what_ifs) scenarios.emplace_back(w);
  for (const std::optional<WhatIf>& what_if : scenarios) {
    if (stop.load()) break;
    ScenarioPlan scenario;
    scenario.name = what_if ? std::string(WhatIfName(*what_if)) : "as given";
    Load load = CopyLoad(grown.config);
    const bool replay = load.step().mode == load::LoopMode::kTrace;
    if (what_if == WhatIf::kDoubleTraffic) {
      if (replay) workload::ScaleRate(*load.trace, 2);
      else load.step().open.rate_per_s *= 2;
      scenario.change = replay ? "arrivals twice as dense (think times unchanged)" : "twice the arrival rate";
    } else if (what_if == WhatIf::kDoubleOutput) {
      if (replay) workload::ScaleOutputs(*load.trace, 2);
      else load.config.run.shape.output_tokens *= 2;
      scenario.change = "every answer twice as long";
    } else if (what_if == WhatIf::kHalfPrefixReuse) {
      const std::optional<workload::ReuseChange> cut =
          replay ? workload::CutPrefixReuse(*load.trace, 0.5) : std::nullopt;
      if (!cut) {
        scenario.not_applicable = replay ? "the trace carries no prefix block ids to cut reuse in"
                                         : "a synthetic load shares no prefixes";
      } else {
        scenario.change = fmt::format("prefix reuse {:.1f}% -> {:.1f}% of prompt tokens (ideal cache), {:.1f}% of "
                                      "requests given prefixes of their own",
                                      100 * cut->before, 100 * cut->after, 100 * cut->isolated_share);
      }
    }
    if (what_if && scenario.not_applicable.empty()) {  // as given was checked above
      if (std::optional<std::string> over = OverContext(load, config, log)) scenario.not_applicable = *over;
    }
    if (!scenario.not_applicable.empty()) {
      log(scenario.name + ": not applicable: " + scenario.not_applicable);
      plan.scenarios.push_back(std::move(scenario));
      continue;
    }
    // One replica saturated: its throughput, against the load's rate, is the first guess.
    analyze::StepAnalysis saturated;
    Trial(Respaced(load.config, kCapacityRequests, 0), 1, emulate::Router::kRoundRobin, config, stop, &saturated);
    ++plan.simulations;
    scenario.one_replica_capacity_per_s = saturated.request_rate_per_s;
    const OfferedLoad offered = Offered(load);
    scenario.offered_rate_per_s = offered.rate_per_s;
    scenario.requests = offered.requests;
    const std::int64_t guess =
        scenario.one_replica_capacity_per_s > 0
            ? static_cast<std::int64_t>(std::ceil(std::min(1e9, scenario.offered_rate_per_s / scenario.one_replica_capacity_per_s)))
            : 1;
    log(fmt::format("{}: {} requests at {:.2f}/s; one replica serves about {:.2f}/s saturated, so about {} replica(s)",
                    scenario.name, scenario.requests, scenario.offered_rate_per_s, scenario.one_replica_capacity_per_s,
                    guess));
    for (emulate::Router router : config.routers) {
      if (stop.load()) break;
      const auto corrected = guess_ratio.contains(router)
                                 ? static_cast<std::int64_t>(std::ceil(static_cast<double>(guess) * guess_ratio[router]))
                                 : guess;
      RouterPlan found = SearchReplicas(load, router, corrected, config, stop, log, scenario.name, plan.simulations);
      if (!what_if && found.replicas) guess_ratio[router] = static_cast<double>(*found.replicas) / static_cast<double>(guess);
      scenario.routers.push_back(std::move(found));
    }
    plan.scenarios.push_back(std::move(scenario));
  }
  plan.interrupted = stop.load();
  return plan;
}

namespace {

nlohmann::json TrialJson(const FleetTrial& t) {
  nlohmann::json j = {{"replicas", t.replicas},
                      {"passed", t.passed},
                      {"slo_attainment", t.attainment},
                      {"availability", t.availability},
                      {"ttft_ms", {{"p50", t.ttft_p50_ms}, {"p99", t.ttft_p99_ms}}},
                      {"tpot_ms", {{"p50", t.tpot_p50_ms}, {"p99", t.tpot_p99_ms}}},
                      {"output_tokens_per_s", t.output_tokens_per_s},
                      {"busiest_work_over_mean", t.busiest_work_over_mean},
                      {"idle_replicas", t.idle_replicas}};
  if (!t.passed) j["why_not"] = t.why_not;
  return j;
}

// The saving of `replicas` against round-robin's answer in the same scenario, when both exist.
std::optional<double> SavingAgainstRoundRobin(const ScenarioPlan& scenario, std::int64_t replicas) {
  for (const RouterPlan& r : scenario.routers) {
    if (r.router == emulate::Router::kRoundRobin && r.replicas) {
      return static_cast<double>(*r.replicas - replicas) / static_cast<double>(*r.replicas);
    }
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json ToJson(const FleetPlan& plan, const FleetPlanConfig& config) {
  nlohmann::json scenarios = nlohmann::json::array();
  for (const ScenarioPlan& s : plan.scenarios) {
    nlohmann::json routers = nlohmann::json::array();
    for (const RouterPlan& r : s.routers) {
      nlohmann::json trials = nlohmann::json::array();
      for (const FleetTrial& t : r.trials) trials.push_back(TrialJson(t));
      nlohmann::json j = {{"router", emulate::RouterName(r.router)},
                          {"replicas", r.replicas ? nlohmann::json(*r.replicas) : nlohmann::json(nullptr)},
                          {"trials", std::move(trials)}};
      if (r.replicas) {
        const std::optional<double> saving = SavingAgainstRoundRobin(s, *r.replicas);
        j["saving_vs_round_robin"] = saving ? nlohmann::json(*saving) : nlohmann::json(nullptr);
      } else {
        j["why_none"] = r.gave_up.empty() ? fmt::format("no size up to --max-replicas {} met the SLO", config.max_replicas)
                                          : r.gave_up;
      }
      routers.push_back(std::move(j));
    }
    nlohmann::json j = {{"name", s.name}, {"routers", std::move(routers)}};
    if (!s.not_applicable.empty()) {
      j["not_applicable"] = s.not_applicable;
    } else {
      j["change"] = s.change;
      j["requests"] = s.requests;
      j["offered_rate_per_s"] = s.offered_rate_per_s;
      j["one_replica_capacity_per_s"] = s.one_replica_capacity_per_s;
    }
    scenarios.push_back(std::move(j));
  }
  nlohmann::json slo = nlohmann::json::array();
  for (const analyze::SloTerm& term : config.load.slo.terms) slo.push_back(term.text);
  return {{"emulated", true},
          {"note", "every figure is a simulation of bakeoff's engine model (emulated), not a measurement of an engine"},
          {"engine_preset", config.load.preset},
          {"slo", std::move(slo)},
          {"target_attainment", config.target_attainment},
          {"min_availability", config.min_availability},
          {"max_replicas", config.max_replicas},
          {"growth", config.growth},
          {"idle_replica", TrialJson(plan.idle)},
          {"scenarios", std::move(scenarios)},
          {"simulations", plan.simulations},
          {"interrupted", plan.interrupted}};
}

std::string FormatFleetPlan(const FleetPlan& plan) {
  // vs rr: replicas against round-robin's answer for the same scenario; busiest: the busiest
  // replica's work over the mean replica's.
  std::string out = fmt::format("{:<20} {:<18} {:>9} {:>10} {:>10} {:>10} {:>11} {:>9}\n", "scenario", "router",
                                "replicas", "vs rr", "TTFT p99", "TPOT p99", "attainment", "busiest");
  for (const ScenarioPlan& s : plan.scenarios) {
    if (!s.not_applicable.empty()) {
      out += fmt::format("{:<20} not applicable: {}\n", s.name, s.not_applicable);
      continue;
    }
    for (const RouterPlan& r : s.routers) {
      const FleetTrial* t = r.Chosen();
      if (t == nullptr) {
        out += fmt::format("{:<20} {:<18} {:>9}  {}\n", s.name, emulate::RouterName(r.router), "none",
                           r.gave_up.empty() ? "(none met the SLO up to --max-replicas)" : "(more replicas do not help)");
        continue;
      }
      const std::optional<double> saving = SavingAgainstRoundRobin(s, t->replicas);
      std::string versus = "-";
      if (r.router == emulate::Router::kRoundRobin) versus = "base";
      else if (saving) versus = fmt::format("{:+.1f}%", *saving == 0 ? 0.0 : -100 * *saving);
      out += fmt::format("{:<20} {:<18} {:>9} {:>10} {:>8.1f}ms {:>8.1f}ms {:>10.2f}% {:>8.2f}x\n", s.name,
                         emulate::RouterName(r.router), t->replicas, versus, t->ttft_p99_ms, t->tpot_p99_ms,
                         100 * t->attainment, t->busiest_work_over_mean);
    }
  }
  return out;
}

}  // namespace bakeoff::run
