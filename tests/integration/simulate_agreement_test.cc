// One engine model, two clocks: `bakeoff bench` against the real-time emulated server and
// `bakeoff simulate` on the virtual clock, given the same preset, seed and open-loop load at
// moderate load, agree on TTFT and TPOT p50 and p90 within 5% (an embedding load: on E2E p50 and
// p90). Also checks that a simulate run writes the same files as a real run, marked emulated, and
// byte-identical for a seed.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "emulate/engine_preset.h"
#include "emulate/server.h"
#include "run/bench.h"
#include "run/simulate.h"
#include "support/scratch.h"
#include "support/timing.h"

namespace bakeoff {
namespace {

using bakeoff::testing::FreshScratchDir;

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

emulate::EngineConfig ContinuousPagedConfig() {
  auto preset = emulate::LoadEnginePreset(std::filesystem::path(BAKEOFF_SOURCE_DIR) /
                                          "examples/engines/continuous-paged.yaml");
  EXPECT_TRUE(preset.ok()) << preset.error().message;
  return preset.ok() ? preset->config : emulate::EngineConfig{};
}

// About 5 requests in flight: 8 requests a second of 512 prompt and 64 output tokens.
load::RunSpec ModerateLoad() {
  load::RunSpec run;
  run.shape = {512, 64};
  run.seed = 42;
  run.target.request.ignore_eos = true;
  run.target.request.min_tokens = 64;
  load::StepSpec step;
  step.mode = load::LoopMode::kOpen;
  step.open = {8.0, load::ArrivalProcess::kPoisson, 1.0};
  step.limits.requests = 120;
  step.limits.warmup_requests = 5;
  step.label = "rate=8/s";
  run.steps.push_back(step);
  return run;
}

// The same rate of embedding requests, 4 texts of 128 tokens each: one prefill of 512 tokens.
load::RunSpec ModeratePoolingLoad() {
  load::RunSpec run = ModerateLoad();
  run.shape = {128, 1};
  run.shape.batch = 4;
  run.target.request.api = dialect::Api::kEmbeddings;
  run.target.request.stream = false;
  run.target.request.ignore_eos = false;
  run.target.request.min_tokens.reset();
  return run;
}

Result<run::BenchOutcome> Simulate(const std::filesystem::path& out,
                                   const load::RunSpec& load = ModerateLoad()) {
  run::SimulateConfig config;
  config.run = load;
  config.run.target.request.model = "emulated-model";
  config.sim.engine = ContinuousPagedConfig();
  config.out_dir = out;
  std::atomic<bool> stop{false};
  return run::RunSimulate(config, stop, [](const std::string&) {});
}

// The figures of a real-time run that disagree with the simulation by more than 5%, one line each;
// empty when they all agree.
std::string Disagreements(const analyze::StepAnalysis& real, const analyze::StepAnalysis& sim) {
  struct Figure {
    const char* name;
    double real, sim;
  };
  std::string out;
  for (const Figure& f : {Figure{"TTFT p50", real.ttft_ms.p50.value, sim.ttft_ms.p50.value},
                          Figure{"TTFT p90", real.ttft_ms.p90.value, sim.ttft_ms.p90.value},
                          Figure{"TPOT p50", real.tpot_ms.p50.value, sim.tpot_ms.p50.value},
                          Figure{"TPOT p90", real.tpot_ms.p90.value, sim.tpot_ms.p90.value}}) {
    if (std::abs(f.sim / f.real - 1.0) > 0.05) {
      out += std::string(f.name) + ": bench " + std::to_string(f.real) + " ms, simulate " +
             std::to_string(f.sim) + " ms\n";
    }
  }
  return out;
}

// The figures of a pooling run that disagree by more than 5% (E2E p50 and p90), and the prompt
// tokens the server counted against what the simulator prefilled.
std::string PoolingDisagreements(const analyze::StepAnalysis& real,
                                 const analyze::StepAnalysis& sim) {
  std::string out;
  for (const auto& [name, r, m] :
       {std::tuple{"E2E p50", real.e2e_ms.p50.value, sim.e2e_ms.p50.value},
        std::tuple{"E2E p90", real.e2e_ms.p90.value, sim.e2e_ms.p90.value}}) {
    if (std::abs(m / r - 1.0) > 0.05) {
      out += std::string(name) + ": bench " + std::to_string(r) + " ms, simulate " +
             std::to_string(m) + " ms\n";
    }
  }
  if (real.prompt_tokens.mean != sim.prompt_tokens.mean) {
    out += "prompt tokens: the server counted " + std::to_string(real.prompt_tokens.mean) +
           ", the simulator " + std::to_string(sim.prompt_tokens.mean) + "\n";
  }
  return out;
}

// Simulates `load`, then benches it against the real-time emulated server with the same preset,
// and expects `disagreements` of the two to be empty. The real-time run gets a second try: on a
// shared 2-core host one descheduled thread can move a request into the next engine step, which
// shifts a p90 of 120 samples by a few percent.
void ExpectBenchAndSimulateAgree(const load::RunSpec& load, const std::string& name,
                                 std::string (*disagreements)(const analyze::StepAnalysis&,
                                                              const analyze::StepAnalysis&)) {
  auto simulated = Simulate(FreshScratchDir(name + "_sim"), load);
  ASSERT_TRUE(simulated.ok()) << simulated.error().message;
  const analyze::StepAnalysis& sim = simulated->steps.at(0);
  ASSERT_EQ(sim.outcomes.at("ok"), 120u);
  std::string misses;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    emulate::EmulatorConfig emulator;
    emulator.port = 0;
    emulator.engine = ContinuousPagedConfig();
    auto server = emulate::EmulatorServer::Start(emulator);
    ASSERT_TRUE(server.ok()) << server.error().message;
    run::BenchConfig bench;
    bench.run = load;
    bench.url = "http://127.0.0.1:" + std::to_string(server.value()->port());
    bench.run.target.endpoint = {false, "127.0.0.1", std::to_string(server.value()->port()), "", ""};
    bench.out_dir = FreshScratchDir(name + "_bench");
    std::atomic<bool> stop{false};
    auto measured = run::RunBench(
        bench, stop, [](const std::string&) {}, nullptr);
    ASSERT_TRUE(measured.ok()) << measured.error().message;
    const analyze::StepAnalysis& real = measured->steps.at(0);
    ASSERT_EQ(real.outcomes.at("ok"), 120u);
    const std::string missed = disagreements(real, sim);
    if (missed.empty()) return;
    misses += "attempt " + std::to_string(attempt) + ":\n" + missed;
  }
  ADD_FAILURE() << "bench and simulate disagree by more than 5% in both attempts\n" << misses;
}

TEST(SimulateAgreementTimingTest, BenchOnTheServerAndSimulateAgreeAtModerateLoad) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  ExpectBenchAndSimulateAgree(ModerateLoad(), "agree", Disagreements);
}

TEST(SimulateAgreementTimingTest, BenchAndSimulateAgreeOnAnEmbeddingLoad) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  ExpectBenchAndSimulateAgree(ModeratePoolingLoad(), "agree_pool", PoolingDisagreements);
}

TEST(SimulateAgreementTest, SimulateWritesTheRunFilesMarkedEmulatedAndIsDeterministic) {
  const auto first_dir = FreshScratchDir("sim_first");
  const auto second_dir = FreshScratchDir("sim_second");
  auto first = Simulate(first_dir);
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = Simulate(second_dir);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_TRUE(first->emulated);
  const std::string records = ReadAll(first_dir / "records.jsonl");
  EXPECT_EQ(std::count(records.begin(), records.end(), '\n'), 125);
  EXPECT_EQ(records, ReadAll(second_dir / "records.jsonl"));
  const std::string summary_text = ReadAll(first_dir / "summary.json");
  EXPECT_EQ(summary_text, ReadAll(second_dir / "summary.json"));
  const nlohmann::json summary = nlohmann::json::parse(summary_text);
  EXPECT_EQ(summary["target"]["emulated"], true);
  EXPECT_EQ(summary["target"]["simulated"], true);
  EXPECT_EQ(summary["schema_version"], run::kSummarySchemaVersion);
  EXPECT_EQ(summary["steps"][0]["simulator"]["replicas"][0]["routed"], 125);
}

// Four replicas behind prefix-affinity, every prompt opening with the same 300-word system
// message: the router's hash of the first 256 tokens is the same for all, one replica takes every
// request, and the summary and the notes say so; round-robin spreads the same load evenly.
TEST(SimulateAgreementTest, AReplicaThatTakesTheWholeLoadIsNotedWithTheRoutersReason) {
  const auto run_with = [](emulate::Router router, const std::string& name) {
    run::SimulateConfig config;
    config.run = ModerateLoad();
    config.run.target.request.model = "emulated-model";
    config.run.target.request.system.clear();
    for (int i = 0; i < 300; ++i) config.run.target.request.system += "policy" + std::to_string(i) + " ";
    config.sim.engine = ContinuousPagedConfig();
    config.sim.replicas = 4;
    config.sim.router = router;
    config.out_dir = FreshScratchDir(name);
    std::atomic<bool> stop{false};
    Result<run::BenchOutcome> outcome = run::RunSimulate(config, stop, [](const std::string&) {});
    EXPECT_TRUE(outcome.ok()) << outcome.error().message;
    const nlohmann::json summary = nlohmann::json::parse(ReadAll(config.out_dir / "summary.json"));
    std::filesystem::remove_all(config.out_dir);
    return std::pair{summary["steps"][0]["simulator"]["balance"], outcome.ok() ? outcome->notes : std::vector<std::string>{}};
  };
  const auto [affinity, affinity_notes] = run_with(emulate::Router::kPrefixAffinity, "sim_affinity");
  EXPECT_EQ(affinity["idle_replicas"], 3);
  EXPECT_DOUBLE_EQ(affinity["busiest_requests_share"].get<double>(), 1.0);
  EXPECT_NEAR(affinity["busiest_work_over_mean"].get<double>(), 4.0, 1e-9);
  const std::string notes = ::testing::PrintToString(affinity_notes);
  EXPECT_NE(notes.find("3 of 4 replicas got none"), std::string::npos) << notes;
  EXPECT_NE(notes.find("first 256 prompt tokens"), std::string::npos) << notes;

  const auto [even, even_notes] = run_with(emulate::Router::kRoundRobin, "sim_round_robin");
  EXPECT_EQ(even["idle_replicas"], 0);
  EXPECT_LT(even["busiest_work_over_mean"].get<double>(), run::kImbalanceNoted);
  EXPECT_TRUE(even_notes.empty()) << ::testing::PrintToString(even_notes);
}

}  // namespace
}  // namespace bakeoff
