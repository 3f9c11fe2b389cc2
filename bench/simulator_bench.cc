// bench/simulator_bench.cc
//
// Owns: the simulator throughput benchmark (bakeoff_sim_bench): how many requests per second of
// CPU the virtual-clock simulator (emulate/simulator.h) gets through on one core, for requests of
// about 500 prompt and 200 output tokens arriving as a Poisson process at a set share of the
// engine's capacity. The capacity is measured first, in the same invocation, by a closed loop that
// keeps the batch full. Baseline in the same invocation: only making the requests (the prompt
// token ids the simulator consumes), so the figure reads "simulating costs N x making the input".
// Every run is checked: each request must finish with exactly its max_tokens tokens.
//
// With --replicas N the open loop goes to N replicas behind --router at N times the rate: the
// figure then says what a fleet costs per request against one replica (docs/simulator.md).
//
// Usage: bakeoff_sim_bench [--requests N] [--load F] [--preset FILE] [--seed S] [--replicas N]
//                          [--router NAME]
// Prints one JSON object on stdout.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/rng.h"
#include "emulate/engine_preset.h"
#include "emulate/simulator.h"

namespace bakeoff::bench {
namespace {

double CpuSeconds() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// Requests of 450..550 prompt and 150..250 output tokens; ids unique per request.
struct RequestMaker {
  explicit RequestMaker(std::uint64_t seed) : rng(seed) {}
  emulate::SimRequest Make(std::uint64_t id, Nanos arrival) {
    emulate::SimRequest request;
    request.id = id;
    request.arrival = arrival;
    const std::uint64_t prompt = 450 + rng.Below(101);
    request.request.prompt.resize(prompt);
    for (auto& token : request.request.prompt) token = static_cast<emulate::TokenId>(next_token++ % 32000);
    request.request.max_tokens = static_cast<std::int64_t>(150 + rng.Below(101));
    return request;
  }
  Rng rng;
  std::uint64_t next_token = 0;
};

struct Outcome {
  std::uint64_t finished = 0;
  std::uint64_t wrong = 0;  // finished with a token count other than max_tokens, or refused
  double simulated_s = 0;
  double cpu_s = 0;
};

// Closed loop at the engine's max_num_seqs: the most requests per simulated second it serves.
double CapacityPerSecond(const emulate::SimConfig& config, std::uint64_t seed) {
  emulate::Simulator simulator(config);
  RequestMaker maker(seed);
  const std::uint64_t total = 20000;
  std::uint64_t submitted = 0, finished = 0;
  for (; submitted < static_cast<std::uint64_t>(config.engine.max_num_seqs); ++submitted) {
    simulator.Submit(maker.Make(submitted, Nanos{0}));
  }
  simulator.Run(nullptr, [&](emulate::SimResult&&) {
    ++finished;
    if (submitted < total) simulator.Submit(maker.Make(submitted++, simulator.now()));
  });
  return static_cast<double>(finished) / ToSeconds(simulator.now());
}

Outcome RunOpenLoop(const emulate::SimConfig& config, std::uint64_t requests, double rate, std::uint64_t seed) {
  emulate::Simulator simulator(config);
  RequestMaker maker(seed);
  Rng arrivals(seed + 1);
  double t = 0;
  std::uint64_t made = 0;
  Outcome outcome;
  const double start = CpuSeconds();
  simulator.Run(
      [&]() -> std::optional<emulate::SimRequest> {
        if (made == requests) return std::nullopt;
        t += arrivals.Exponential(1.0 / rate);
        return maker.Make(made++, FromSeconds(t));
      },
      [&](emulate::SimResult&& result) {
        ++outcome.finished;
        const bool ok = result.http_status == 200 && result.output_tokens >= 150 && result.output_tokens <= 250 &&
                        result.finish == emulate::FinishReason::kLength;
        if (!ok) ++outcome.wrong;
      });
  outcome.cpu_s = CpuSeconds() - start;
  outcome.simulated_s = ToSeconds(simulator.now());
  return outcome;
}

// The baseline: making the same requests and dropping them.
double MakeOnlyCpuSeconds(std::uint64_t requests, std::uint64_t seed) {
  RequestMaker maker(seed);
  const double start = CpuSeconds();
  std::uint64_t checksum = 0;
  for (std::uint64_t i = 0; i < requests; ++i) {
    emulate::SimRequest request = maker.Make(i, Nanos{0});
    checksum += request.request.prompt.back();
  }
  if (checksum == 42) std::fputs("", stderr);  // keeps the loop observable
  return CpuSeconds() - start;
}

int Main(int argc, char** argv) {
  std::uint64_t requests = 1'000'000;
  double load = 0.7;
  std::uint64_t seed = 1;
  std::string preset_file;
  std::int64_t replicas = 1;
  std::string router = "round-robin";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--requests") requests = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--replicas") replicas = std::strtoll(argv[i + 1], nullptr, 10);
    else if (flag == "--router") router = argv[i + 1];
    else if (flag == "--load") load = std::strtod(argv[i + 1], nullptr);
    else if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--preset") preset_file = argv[i + 1];
    else {
      std::fprintf(stderr, "bakeoff_sim_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  emulate::SimConfig config;
  config.keep_token_times = false;
  std::string preset_name = "built-in defaults";
  if (!preset_file.empty()) {
    auto preset = emulate::LoadEnginePreset(preset_file);
    if (!preset.ok()) {
      std::fprintf(stderr, "bakeoff_sim_bench: %s\n", preset.error().message.c_str());
      return 2;
    }
    config.engine = preset->config;
    preset_name = preset->config.name;
  }
  const double capacity = CapacityPerSecond(config, seed);  // of one replica
  const std::optional<emulate::Router> parsed = emulate::ParseRouter(router);
  if (replicas < 1 || !parsed) {
    std::fprintf(stderr, "bakeoff_sim_bench: --replicas must be >= 1 and --router a router's name\n");
    return 2;
  }
  config.replicas = replicas;
  config.router = *parsed;
  const double rate = load * capacity * static_cast<double>(replicas);
  const Outcome run = RunOpenLoop(config, requests, rate, seed);
  const double baseline_cpu = MakeOnlyCpuSeconds(requests, seed);
  fmt::print(
      "{{\"preset\": \"{}\", \"replicas\": {}, \"router\": \"{}\", \"requests\": {}, \"finished\": {}, \"wrong\": {}, "
      "\"capacity_per_s\": {:.2f}, "
      "\"rate_per_s\": {:.2f}, \"simulated_s\": {:.1f}, \"cpu_s\": {:.3f}, \"requests_per_cpu_s\": {:.0f}, "
      "\"speedup_over_real_time\": {:.0f}, \"baseline_make_only_cpu_s\": {:.3f}, \"ratio_to_baseline\": {:.1f}}}\n",
      preset_name, replicas, router, requests, run.finished, run.wrong, capacity, rate, run.simulated_s, run.cpu_s,
      static_cast<double>(run.finished) / run.cpu_s, run.simulated_s / run.cpu_s, baseline_cpu,
      run.cpu_s / baseline_cpu);
  return run.finished == requests && run.wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace bakeoff::bench

int main(int argc, char** argv) { return bakeoff::bench::Main(argc, argv); }
