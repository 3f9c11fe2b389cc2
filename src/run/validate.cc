// run/validate.cc: the simulator's prediction error against a live endpoint (contract in
// validate.h).
#include "run/validate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "run/calibrate_slots.h"

namespace bakeoff::run {
namespace {


constexpr std::uint32_t kMaxCapacityStreams = 64;
constexpr std::uint64_t kMinRequestsPerLoad = 40;
constexpr double kBurstyShape = 0.25;  // Gamma shape: inter-arrival CV 1 / sqrt(0.25) = 2
constexpr std::uint64_t kCapacitySeedMix = 0x6361706163697479ULL;  // "capacity": unlike the step multiplier in load/request_builder.cc
constexpr std::uint64_t kLoneRequests = 3;  // each load's lone-request probe
// A capacity error this large is named in the summary beside the loads that fail: at 80% of
// measured capacity, 5% more capacity in the model cuts a queue's wait (rho / (1 - rho)) by a fifth.
constexpr double kCapacityNoted = 0.05;

LoadJob Job(const ValidateConfig& config, std::vector<load::StepSpec> steps, const std::filesystem::path& out,
            std::uint64_t seed) {
  LoadJob job;
  job.run.target.request = config.request;
  job.run.shape.prompt_tokens = config.prompt_tokens;
  job.run.shape.output_tokens = config.output_tokens;
  job.run.steps = std::move(steps);
  job.run.seed = seed;
  job.run.slo = config.slo.RequestThresholds();
  job.slo = config.slo;
  job.out_dir = out;
  job.flags = {{"validate", config.preset_name}, {"seed", seed}, {"prompt_tokens", config.prompt_tokens},
               {"output_tokens", config.output_tokens}};
  return job;
}

MetricError Compare(std::string metric, double measured, double simulated) {
  MetricError e{std::move(metric), measured, simulated, 0};
  if (measured != 0) e.error = (simulated - measured) / measured;
  else if (simulated != 0) e.error = INFINITY;
  return e;
}

std::vector<MetricError> CompareStep(const analyze::StepAnalysis& m, const analyze::StepAnalysis& s, bool with_slo) {
  std::vector<MetricError> out = {
      Compare("ttft_p50_ms", m.ttft_ms.p50.value, s.ttft_ms.p50.value),
      Compare("ttft_p90_ms", m.ttft_ms.p90.value, s.ttft_ms.p90.value),
      Compare("ttft_p99_ms", m.ttft_ms.p99.value, s.ttft_ms.p99.value),
      Compare("tpot_p50_ms", m.tpot_ms.p50.value, s.tpot_ms.p50.value),
      Compare("tpot_p90_ms", m.tpot_ms.p90.value, s.tpot_ms.p90.value),
      Compare("tpot_p99_ms", m.tpot_ms.p99.value, s.tpot_ms.p99.value),
      Compare("requests_per_s", m.request_rate_per_s, s.request_rate_per_s),
      Compare("output_tokens_per_s", m.output_tokens_per_s, s.output_tokens_per_s),
  };
  if (with_slo) out.push_back(Compare("goodput_per_s", m.goodput_per_s, s.goodput_per_s));
  return out;
}

// {metric: {measured, simulated, error}}, an error that is not finite as null.
nlohmann::json MetricsJson(const std::vector<MetricError>& metrics) {
  nlohmann::json out = nlohmann::json::object();
  for (const MetricError& e : metrics) {
    out[e.metric] = {{"measured", e.measured},
                     {"simulated", e.simulated},
                     {"error", std::isfinite(e.error) ? nlohmann::json(e.error) : nlohmann::json(nullptr)}};
  }
  return out;
}

// A lone request's TTFT and TPOT medians, simulated against measured.
std::vector<MetricError> CompareLone(const analyze::StepAnalysis& m, const analyze::StepAnalysis& s) {
  return {Compare("ttft_p50_ms", m.ttft_ms.p50.value, s.ttft_ms.p50.value),
          Compare("tpot_p50_ms", m.tpot_ms.p50.value, s.tpot_ms.p50.value)};
}

// The entry for `metric` in `list` with a finite error, or nullptr.
const MetricError* FindMetric(const std::vector<MetricError>& list, std::string_view metric) {
  const auto it = std::find_if(list.begin(), list.end(), [&](const MetricError& e) { return e.metric == metric; });
  return it == list.end() || !std::isfinite(it->error) ? nullptr : &*it;
}

// The load's error on `metric` once the lone request's error at the same minute is taken out:
// (1 + load error) / (1 + lone error) - 1; nullopt when either is missing, not finite or -100%.
std::optional<double> BeyondLone(const ValidationStep& v, std::string_view metric) {
  const MetricError* load = FindMetric(v.metrics, metric);
  const MetricError* lone = FindMetric(v.lone, metric);
  if (!load || !lone || lone->error <= -1) return std::nullopt;
  return (1 + load->error) / (1 + lone->error) - 1;
}

// The metrics a step must predict within the validation's tolerances, and how closely.
std::string OutOfTolerance(const std::vector<MetricError>& metrics) {
  std::string out;
  for (const MetricError& e : metrics) {
    const bool throughput = e.metric == "requests_per_s" || e.metric == "output_tokens_per_s";
    const bool median = e.metric == "ttft_p50_ms" || e.metric == "tpot_p50_ms";
    const double tolerance = throughput ? kThroughputTolerance : median ? kMedianTolerance : INFINITY;
    if (!(std::abs(e.error) <= tolerance)) {
      if (!out.empty()) out += ", ";
      out += fmt::format("{} {:+.1f}% (tolerance ±{:.0f}%)", e.metric, 100 * e.error, 100 * tolerance);
    }
  }
  return out;
}

// What the simulated capacity adds to the summary: its error, and where a load failed while the
// model saturates elsewhere than the endpoint, how near its own saturation the model ran that load.
std::string CapacityNote(const ValidationOutcome& outcome) {
  const MetricError& c = outcome.capacity;
  if (c.measured <= 0) return "";
  if (c.simulated <= 0) {
    return fmt::format("; the preset finished no request in the capacity loop's window, where the endpoint "
                       "finished {:.2f} a second",
                       c.measured);
  }
  std::string note = fmt::format("; the preset's own capacity is {:.2f} requests/s, {:+.1f}% against the "
                                 "measured {:.2f}",
                                 c.simulated, 100 * c.error, c.measured);
  if (std::abs(c.error) < kCapacityNoted) return note;
  std::vector<std::string> shares;
  for (const ValidationStep& v : outcome.steps) {
    if (v.holds || v.bursty) continue;
    shares.push_back(fmt::format("{:.0f}% ({})", 100 * v.rate_per_s / c.simulated, v.label));
  }
  if (!shares.empty()) {
    note += fmt::format(": the loads that failed ran at {} of the model's own capacity", fmt::join(shares, ", "));
  }
  return note;
}

// Where the lone requests, nothing else running, were all predicted off by more than the median
// tolerance on the same side: the loads' errors then start from the endpoint's speed at that
// time or the preset's step costs, not from batching or queueing.
std::string LoneNote(const ValidationOutcome& outcome) {
  std::vector<std::string> off;
  for (const auto& [metric, name] : {std::pair{"ttft_p50_ms", "TTFT p50"}, std::pair{"tpot_p50_ms", "TPOT p50"}}) {
    double low = INFINITY, high = -INFINITY;
    std::size_t probed = 0;
    for (const ValidationStep& v : outcome.steps) {
      if (const MetricError* e = FindMetric(v.lone, metric)) {
        low = std::min(low, e->error);
        high = std::max(high, e->error);
        ++probed;
      }
    }
    if (probed == 0 || probed < outcome.steps.size()) continue;  // not before every load
    if (low > kMedianTolerance || high < -kMedianTolerance) {
      off.push_back(fmt::format("{} {:+.1f}% to {:+.1f}%", name, 100 * low, 100 * high));
    }
  }
  if (off.empty()) return "";
  return fmt::format("; before every load a lone request was already predicted off ({}): the endpoint's speed is "
                     "not what calibration measured, or the preset's step costs are wrong; calibrate again before "
                     "reading the loads' errors as the model's",
                     fmt::join(off, ", "));
}

}  // namespace

Status ValidateValidateConfig(const ValidateConfig& config) {
  if (config.fractions.empty()) return InvalidInput("--fractions: at least one share of capacity");
  for (double f : config.fractions) {
    if (!(f > 0 && f <= 2)) return InvalidInput(fmt::format("--fractions: {} is not in (0, 2]", f));
  }
  if (!(config.bursty_fraction >= 0 && config.bursty_fraction <= 2)) {
    return InvalidInput("--bursty-fraction: must be in [0, 2] (0: no bursty load)");
  }
  if (config.budget < std::chrono::seconds(10)) return InvalidInput("--budget: at least 10s to validate");
  if (config.prompt_tokens < 1 || config.output_tokens < 2) {
    return InvalidInput("validation needs prompts of at least 1 token and answers of at least 2 (for TPOT)");
  }
  return Ok{};
}

Result<ValidationOutcome> ValidatePreset(const ValidateConfig& config, const std::atomic<bool>& stop,
                                         const std::function<void(const std::string&)>& log) {
  if (Status valid = ValidateValidateConfig(config); !valid.ok()) return valid.error();
  ValidationOutcome outcome;
  const std::size_t loads = config.fractions.size() + (config.bursty_fraction > 0 ? 1 : 0);
  // The endpoint's time: one share for the capacity, one per load.
  const Nanos window = config.budget / static_cast<std::int64_t>(loads + 1);

  // 1. Measured capacity.
  outcome.capacity_concurrency = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(config.preset.config.max_num_seqs, 1, kMaxCapacityStreams));
  load::StepSpec closed;
  closed.mode = load::LoopMode::kClosed;
  closed.concurrency = outcome.capacity_concurrency;
  closed.limits.duration = window;
  closed.limits.warmup_requests = outcome.capacity_concurrency;  // the first wave fills the batch
  closed.label = fmt::format("capacity (concurrency={})", closed.concurrency);
  log(fmt::format("measuring capacity: {} streams for {:.0f} s", closed.concurrency, ToSeconds(window)));
  // Its own seed: prompts the held-out loads then send are not in the endpoint's prefix cache (the
  // simulator starts every step with an empty one).
  Result<BenchOutcome> capacity =
      RunLoadJob(config.server, Job(config, {closed}, config.out_dir / "capacity", config.seed ^ kCapacitySeedMix), stop, log);
  if (!capacity.ok()) return capacity.error();
  if (capacity->steps.empty() || capacity->steps[0].ok_requests == 0) {
    return MakeError(ErrorCode::kUnavailable,
                     "the endpoint completed no request while capacity was measured (" +
                         (capacity->steps.empty() || capacity->steps[0].error_examples.empty()
                              ? std::string("no step ran")
                              : capacity->steps[0].error_examples[0]) +
                         ")");
  }
  outcome.capacity_per_s = capacity->steps[0].request_rate_per_s;
  log(fmt::format("measured capacity: {:.2f} requests/s", outcome.capacity_per_s));
  LoadTarget simulator;
  simulator.simulated = true;
  simulator.sim.engine = config.preset.config;
  simulator.preset = config.preset_name;
  Result<BenchOutcome> simulated_capacity = RunLoadJob(
      simulator, Job(config, {closed}, config.out_dir / "simulated_capacity", config.seed ^ kCapacitySeedMix), stop,
      [](const std::string&) {});
  if (!simulated_capacity.ok()) return simulated_capacity.error();
  outcome.capacity = Compare("requests_per_s", outcome.capacity_per_s,
                             simulated_capacity->steps.empty() ? 0 : simulated_capacity->steps[0].request_rate_per_s);
  log(fmt::format("the preset's own capacity (simulated): {:.2f} requests/s, {:+.1f}%", outcome.capacity.simulated,
                  100 * outcome.capacity.error));

  // 2. The held-out loads, on the endpoint and on the simulator, one schedule. Before each, a
  // lone-request probe: how far the preset is from the endpoint at that minute with nothing else
  // running, so a load's error can be told from the machine's speed having moved since calibration.
  std::vector<load::StepSpec> steps;
  std::vector<ValidationStep> planned;
  const Nanos load_window = window - window / 8;  // the rest is the probe's at most
  auto add = [&](double fraction, bool bursty) {
    load::StepSpec& lone = steps.emplace_back();
    lone.mode = load::LoopMode::kClosed;
    lone.concurrency = 1;
    lone.limits.requests = kLoneRequests;
    // A preset whose slots keep their last request's KV: first as many lone requests as slots, left
    // out, so that every slot holds one of the probe's requests on both sides (the simulator starts
    // each step on a fresh engine; the endpoint's slots still hold the previous load's prompts).
    if (config.preset.config.slots_keep_kv) {
      lone.limits.warmup_requests = static_cast<std::uint64_t>(std::min<std::int64_t>(
          config.preset.config.max_num_seqs, kMaxSlotsProbed));
    }
    lone.limits.duration = window - load_window;
    lone.label = fmt::format("lone request before {:.0f}%{}", 100 * fraction, bursty ? " bursty" : "");
    load::StepSpec step;
    step.mode = load::LoopMode::kOpen;
    step.open.rate_per_s = fraction * outcome.capacity_per_s;
    step.open.process = bursty ? load::ArrivalProcess::kGamma : load::ArrivalProcess::kPoisson;
    step.open.burstiness = bursty ? kBurstyShape : 1;
    // The window bounds the endpoint's time; the count gives a slow endpoint's load enough requests.
    step.limits.requests = std::max<std::uint64_t>(
        kMinRequestsPerLoad, static_cast<std::uint64_t>(std::llround(step.open.rate_per_s * ToSeconds(load_window))));
    step.limits.duration = load_window;
    step.label = bursty ? fmt::format("bursty (CV 2) at {:.0f}%", 100 * fraction)
                        : fmt::format("{:.0f}% of capacity", 100 * fraction);
    ValidationStep v;
    v.label = step.label;
    v.fraction = fraction;
    v.rate_per_s = step.open.rate_per_s;
    v.bursty = bursty;
    planned.push_back(std::move(v));
    steps.push_back(std::move(step));
  };
  for (double f : config.fractions) add(f, false);
  if (config.bursty_fraction > 0) add(config.bursty_fraction, true);

  Result<BenchOutcome> measured =
      RunLoadJob(config.server, Job(config, steps, config.out_dir / "measured", config.seed), stop, log);
  if (!measured.ok()) return measured.error();
  Result<BenchOutcome> simulated =
      RunLoadJob(simulator, Job(config, steps, config.out_dir / "simulated", config.seed), stop, [](const std::string&) {});
  if (!simulated.ok()) return simulated.error();

  // 3. The errors, load by load (its lone-request probe the step before it).
  const std::size_t done = std::min(measured->steps.size(), simulated->steps.size());
  for (std::size_t i = 0; 2 * i + 1 < done; ++i) {
    const analyze::StepAnalysis& measured_load = measured->steps[2 * i + 1];
    if (measured_load.interrupted) break;  // a load cut short is not compared with a whole one
    ValidationStep v = planned[i];
    v.metrics = CompareStep(measured_load, simulated->steps[2 * i + 1], !config.slo.empty());
    if (measured->steps[2 * i].ok_requests > 0) v.lone = CompareLone(measured->steps[2 * i], simulated->steps[2 * i]);
    v.why_not = OutOfTolerance(v.metrics);
    v.holds = v.why_not.empty();
    outcome.steps.push_back(std::move(v));
  }
  outcome.interrupted = measured->interrupted || stop.load();

  std::string holding, failing;
  for (const ValidationStep& v : outcome.steps) {
    std::string& list = v.holds ? holding : failing;
    if (!list.empty()) list += ", ";
    list += v.label;
  }
  outcome.summary = failing.empty()
                        ? fmt::format("the model holds at every load ({})", holding)
                        : fmt::format("the model holds at: {}; it stops holding at: {}", holding.empty() ? "none" : holding,
                                      failing);
  outcome.summary += CapacityNote(outcome) + LoneNote(outcome);
  Status written = WriteFileAtomically(config.out_dir / "validation.json", DumpJson(ToJson(outcome, config), 2));
  if (!written.ok()) return written.error();
  return outcome;
}

nlohmann::json ToJson(const ValidationOutcome& outcome, const ValidateConfig& config) {
  nlohmann::json steps = nlohmann::json::array();
  for (const ValidationStep& v : outcome.steps) {
    nlohmann::json beyond = nlohmann::json::object();
    for (const char* metric : {"ttft_p50_ms", "tpot_p50_ms"}) {
      if (const std::optional<double> b = BeyondLone(v, metric)) beyond[metric] = *b;
    }
    nlohmann::json j = {{"label", v.label},   {"fraction_of_capacity", v.fraction}, {"rate_per_s", v.rate_per_s},
                        {"bursty", v.bursty}, {"metrics", MetricsJson(v.metrics)},   {"holds", v.holds},
                        {"lone_request", MetricsJson(v.lone)}, {"error_beyond_lone_request", std::move(beyond)}};
    if (!v.holds) j["why_not"] = v.why_not;
    steps.push_back(std::move(j));
  }
  nlohmann::json slo = nlohmann::json::array();
  for (const analyze::SloTerm& term : config.slo.terms) slo.push_back(term.text);
  return {{"preset", config.preset_name},
          {"url", config.server.url},
          {"seed", config.seed},
          {"prompt_tokens", config.prompt_tokens},
          {"output_tokens", config.output_tokens},
          {"slo", std::move(slo)},
          {"tolerances", {{"throughput", kThroughputTolerance}, {"median_ttft_tpot", kMedianTolerance}}},
          {"capacity",
           {{"requests_per_s", outcome.capacity_per_s},
            {"concurrency", outcome.capacity_concurrency},
            {"simulated_requests_per_s", outcome.capacity.simulated},
            {"error", std::isfinite(outcome.capacity.error) ? nlohmann::json(outcome.capacity.error)
                                                            : nlohmann::json(nullptr)}}},
          {"steps", std::move(steps)},
          {"summary", outcome.summary},
          {"interrupted", outcome.interrupted},
          {"runs",
           {{"capacity", "capacity"},
            {"simulated_capacity", "simulated_capacity (emulated)"},
            {"measured", "measured"},
            {"simulated", "simulated (emulated)"}}}};
}

std::string FormatValidation(const ValidationOutcome& outcome) {
  std::string out;
  if (outcome.capacity.measured > 0) {
    out += fmt::format("capacity: measured {:.2f} requests/s at {} streams, simulated {:.2f} ({:+.1f}%)\n",
                       outcome.capacity_per_s, outcome.capacity_concurrency, outcome.capacity.simulated,
                       100 * outcome.capacity.error);
  }
  out += fmt::format("{:<24} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", "load", "rate/s", "TTFT p50",
                     "TTFT p99", "TPOT p50", "TPOT p99", "req/s", "out tok/s", "verdict");
  for (const ValidationStep& v : outcome.steps) {
    out += fmt::format("{:<24} {:>8.2f}", v.label, v.rate_per_s);
    for (const char* metric : {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "requests_per_s",
                               "output_tokens_per_s"}) {
      const MetricError* e = FindMetric(v.metrics, metric);
      out += e ? fmt::format(" {:>9.1f}%", 100 * e->error) : fmt::format(" {:>10}", "-");
    }
    out += v.holds ? "  holds\n" : "  OFF: " + v.why_not + "\n";
    const std::optional<double> ttft = BeyondLone(v, "ttft_p50_ms");
    const std::optional<double> tpot = BeyondLone(v, "tpot_p50_ms");
    if (ttft && tpot) {  // so both lone errors are there
      const double lone_ttft = FindMetric(v.lone, "ttft_p50_ms")->error;
      const double lone_tpot = FindMetric(v.lone, "tpot_p50_ms")->error;
      out += fmt::format("{:<24} a lone request just before: TTFT p50 {:+.1f}%, TPOT p50 {:+.1f}%; the load's error beyond "
                         "it: TTFT p50 {:+.1f}%, TPOT p50 {:+.1f}%\n",
                         "", 100 * lone_ttft, 100 * lone_tpot, 100 * *ttft, 100 * *tpot);
    }
  }
  out += "error = (simulated - measured) / measured; simulated figures are emulated\n" + outcome.summary + "\n";
  return out;
}

}  // namespace bakeoff::run
