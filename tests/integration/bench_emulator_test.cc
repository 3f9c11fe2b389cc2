// `bakeoff bench`'s library path against the emulated engine on loopback: at low load the
// measured TTFT and TPOT must match the emulator's own cost formula within 5%, every request
// must leave one line in records.jsonl, and the summary must say the target is emulated.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run/bench.h"
#include "core/file.h"
#include "emulate/scheduler.h"
#include "emulate/server.h"
#include "support/timing.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using bakeoff::testing::FreshScratchDir;

using namespace std::chrono_literals;

run::BenchConfig LowLoadConfig(std::uint16_t port, std::uint32_t prompt_tokens,
                                   std::uint32_t output_tokens, const std::filesystem::path& out) {
  run::BenchConfig config;
  config.url = "http://127.0.0.1:" + std::to_string(port);
  config.run.target.endpoint = {false, "127.0.0.1", std::to_string(port), "", ""};
  config.run.shape = {prompt_tokens, output_tokens};
  load::StepSpec step;
  step.mode = load::LoopMode::kClosed;
  step.concurrency = 1;
  step.limits.requests = 20;
  step.limits.warmup_requests = 2;
  step.label = "concurrency=1";
  config.run.steps.push_back(step);
  config.out_dir = out;
  return config;
}

TEST(BenchEmulatorTimingTest, LowLoadTtftAndTpotMatchTheCostFormula) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::uint32_t prompt_tokens = 2000;
  const std::uint32_t output_tokens = 64;
  const auto out = FreshScratchDir("agreement");
  std::atomic<bool> stop{false};
  auto result = run::RunBench(LowLoadConfig(server.value()->port(), prompt_tokens, output_tokens, out),
                                  stop, [](const std::string&) {}, nullptr);
  ASSERT_TRUE(result.ok()) << result.error().message;
  ASSERT_EQ(result->steps.size(), 1u);
  const analyze::StepAnalysis& step = result->steps.front();
  EXPECT_TRUE(result->emulated);
  ASSERT_EQ(step.outcomes.at("ok"), 20u);
  // Calibration through /tokenize brings the prompt close to the planned length; the formula is
  // then evaluated at the length the server actually saw.
  const double served_prompt = step.prompt_tokens.p50.value;
  EXPECT_NEAR(served_prompt, prompt_tokens, 0.03 * prompt_tokens);
  EXPECT_EQ(step.output_tokens.p50.value, output_tokens);

  const auto expected = emulate::ExpectedSingleRequest(
      emulate::EngineConfig{}, static_cast<std::int64_t>(served_prompt), output_tokens);
  const double ttft_expected = ToMillis(expected.ttft);
  const double tpot_expected = ToMillis(expected.tpot);
  EXPECT_NEAR(step.ttft_ms.p50.value, ttft_expected, 0.05 * ttft_expected);
  EXPECT_NEAR(step.tpot_ms.p50.value, tpot_expected, 0.05 * tpot_expected);
  EXPECT_NEAR(step.tpot_ms.mean, tpot_expected, 0.05 * tpot_expected);

  // One record line per request (warm-up included), and a summary that says "emulated".
  auto records = ReadFile(out / "records.jsonl");
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(std::count(records->begin(), records->end(), '\n'), 22);
  auto summary = ReadFile(out / "summary.json");
  ASSERT_TRUE(summary.ok());
  const auto j = nlohmann::json::parse(summary.value());
  EXPECT_EQ(j["schema_version"], run::kSummarySchemaVersion);
  EXPECT_TRUE(j["target"]["emulated"].get<bool>());
  EXPECT_TRUE(j["prompt_calibration"]["checked"].get<bool>());
  EXPECT_EQ(j["steps"][0]["requests"]["measured"], 20);
  std::filesystem::remove_all(out);
}

// The prompt-length check counts prompts built as the run builds them, through the server; it
// must not send the run's own prompts, or the first requests of every run find them in the
// server's prefix cache (and a run of a few requests, such as a lone-request probe, measures its
// TTFT far too short).
TEST(BenchEmulatorTest, TheLengthCheckLeavesNoneOfTheRunsPromptsCached) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  emulator.engine.kv.prefix_caching = emulate::PrefixCaching::kHashedBlocks;
  emulator.engine.cost = {.base_ms = 0.5, .prefill_ms_per_token = 0, .decode_ms_per_seq = 0, .kv_ms_per_1k_tokens = 0};
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = FreshScratchDir("uncached");
  run::BenchConfig config = LowLoadConfig(server.value()->port(), 256, 4, out);
  config.run.steps.front().limits.requests = 6;
  config.run.steps.front().limits.warmup_requests = 0;
  std::atomic<bool> stop{false};
  auto result = run::RunBench(config, stop, [](const std::string&) {}, nullptr);
  ASSERT_TRUE(result.ok()) << result.error().message;
  auto summary = ReadFile(out / "summary.json");
  ASSERT_TRUE(summary.ok());
  ASSERT_TRUE(nlohmann::json::parse(summary.value())["prompt_calibration"]["checked"].get<bool>());
  std::ifstream records(out / "records.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(records, line)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    EXPECT_EQ(record.value("usage_cached_tokens", -1), 0) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 6);
  std::filesystem::remove_all(out);
}

TEST(BenchEmulatorTimingTest, OpenLoopSweepRunsEveryStep) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = FreshScratchDir("sweep");
  run::BenchConfig config = LowLoadConfig(server.value()->port(), 128, 16, out);
  config.run.steps.clear();
  for (double rate : {20.0, 40.0}) {
    load::StepSpec step;
    step.open = {rate, load::ArrivalProcess::kPoisson, 1};
    step.limits.duration = 1s;
    step.label = "rate";
    config.run.steps.push_back(step);
  }
  config.run.workers = 2;
  std::atomic<bool> stop{false};
  auto result = run::RunBench(config, stop, [](const std::string&) {}, nullptr);
  ASSERT_TRUE(result.ok()) << result.error().message;
  ASSERT_EQ(result->steps.size(), 2u);
  for (const auto& step : result->steps) {
    EXPECT_EQ(step.outcomes.at("ok"), step.measured_requests);
    EXPECT_GT(step.measured_requests, 5u);
  }
  // The second step offered about twice the first's rate.
  EXPECT_GT(result->steps[1].offered_rate_per_s, 1.3 * result->steps[0].offered_rate_per_s);
  std::filesystem::remove_all(out);
}

TEST(BenchEmulatorTest, FiftyThousandTokenPromptAndThirtyTwoThousandTokenAnswer) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  emulator.instant = true;
  emulator.engine.max_model_len = 100000;
  emulator.engine.max_batched_tokens = 100000;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = FreshScratchDir("large");
  run::BenchConfig config = LowLoadConfig(server.value()->port(), 50000, 32000, out);
  config.run.steps.front().limits.requests = 2;
  config.run.steps.front().limits.warmup_requests = 0;
  std::atomic<bool> stop{false};
  auto result = run::RunBench(config, stop, [](const std::string&) {}, nullptr);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const analyze::StepAnalysis& step = result->steps.front();
  ASSERT_EQ(step.outcomes.count("ok"), 1u) << step.error_examples.front();
  EXPECT_EQ(step.outcomes.at("ok"), 2u);
  EXPECT_EQ(step.output_tokens.min, 32000);
  EXPECT_NEAR(step.prompt_tokens.min, 50000, 1500);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace bakeoff
