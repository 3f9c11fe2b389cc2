// Engine-metric timelines beside a load, on loopback: a bench against the emulated engine writes
// metrics.jsonl and a server section per step whose counters agree with what the emulator did
// (requests finished, tokens generated and prompted). Bad pages and hanging scrapes:
// tests/unit/target/metrics_timeline_test.cc.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "emulate/server.h"
#include "run/bench.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using bakeoff::testing::FreshScratchDir;

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

TEST(MetricsTimelineTest, ABenchAgainstTheEmulatorKeepsTheServersViewAndItAgreesWithTheClient) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;  // modelled timing, vLLM's metric names
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const fs::path out = FreshScratchDir("emulator");
  run::BenchConfig config;
  config.url = "http://127.0.0.1:" + std::to_string(server.value()->port());
  config.run.target.endpoint = net::ParseEndpoint(config.url).value();
  config.run.target.request.model = "emulated-model";
  config.run.target.request.ignore_eos = true;
  config.run.shape = {.prompt_tokens = 128, .output_tokens = 24};
  load::StepSpec step;
  step.mode = load::LoopMode::kClosed;
  step.concurrency = 4;
  step.limits.requests = 40;
  step.label = "concurrency=4";
  config.run.steps = {step};
  config.out_dir = out;
  config.metrics_interval = 500ms;  // each scrape may take 500 ms: a loaded host still answers
  const std::atomic<bool> stop{false};
  Result<run::BenchOutcome> outcome = run::RunBench(config, stop, [](const std::string&) {}, nullptr);
  ASSERT_TRUE(outcome.ok()) << outcome.error().message;
  ASSERT_EQ(outcome->steps.at(0).ok_requests, 40u);

  // metrics.jsonl: one line per scrape, every one read.
  Result<std::string> lines = ReadFile(out / "metrics.jsonl");
  ASSERT_TRUE(lines.ok());
  int scrapes = 0;
  for (std::size_t at = 0; at < lines->size();) {
    const std::size_t end = lines->find('\n', at);
    const json line = json::parse(lines->substr(at, end - at));
    EXPECT_TRUE(line["ok"].get<bool>()) << line.dump();
    EXPECT_TRUE(line["signals"].contains("running")) << line.dump();
    ++scrapes;
    at = end + 1;
  }
  EXPECT_GE(scrapes, 3);

  // The server's counters over the step are what the client asked for and got.
  const json summary = json::parse(ReadFile(out / "summary.json").value());
  const json& s = summary["steps"][0]["server"];
  ASSERT_TRUE(s.is_object()) << summary["steps"][0].dump(2);
  EXPECT_EQ(s["e2e_count"].get<double>(), 40) << s.dump(2);
  EXPECT_EQ(s["generation_tokens"].get<double>(), 40 * 24) << s.dump(2);
  const double prompt_mean = outcome->steps.at(0).prompt_tokens.mean;
  EXPECT_NEAR(s["prompt_tokens"].get<double>(), 40 * prompt_mean, 1e-6) << s.dump(2);
  EXPECT_LE(s["running"]["peak"].get<double>(), 4);
  // Client and server time the same requests: no gap is reported.
  EXPECT_TRUE(s["client_gaps"].empty()) << s.dump(2);
  EXPECT_EQ(summary["metrics_file"], "metrics.jsonl");
  ASSERT_EQ(outcome->server.size(), 1u);
  ASSERT_TRUE(outcome->server[0].ttft_mean_ms.has_value());
  EXPECT_NEAR(*outcome->server[0].ttft_mean_ms, outcome->steps[0].ttft_ms.mean,
              std::max(20.0, 0.25 * outcome->steps[0].ttft_ms.mean));
  fs::remove_all(out);
}

}  // namespace
}  // namespace bakeoff
