// Engine-metric timelines beside a load, on loopback: a bench against the emulated engine writes
// metrics.jsonl and a server section per step whose counters agree with what the emulator did
// (requests finished, tokens generated and prompted); a page that does not parse is reported once
// and the timeline goes on; a scrape that hangs never holds the timeline past its bound.
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
#include "support/scripted_server.h"
#include "target/metrics_timeline.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

fs::path OutDir(const std::string& name) {
  const fs::path out = fs::temp_directory_path() / ("bakeoff_timeline_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(out);
  return out;
}

TEST(MetricsTimelineTest, ABenchAgainstTheEmulatorKeepsTheServersViewAndItAgreesWithTheClient) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;  // modelled timing, vLLM's metric names
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const fs::path out = OutDir("emulator");
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

TEST(MetricsTimelineTest, APageThatDoesNotParseIsSaidOnceAndScrapingGoesOn) {
  testing::ScriptedServer server([](const testing::CapturedRequest&) {
    return testing::Script{testing::Send(testing::FullResponse(200, "vllm:num_requests_running{ 3\n", "text/plain"))};
  });
  const fs::path out = OutDir("garbage");
  fs::create_directories(out);
  target::TimelineOptions options;
  options.endpoint = net::ParseEndpoint(server.url()).value();
  options.interval = 250ms;
  options.jsonl = out / "metrics.jsonl";
  int logged = 0;
  auto timeline = target::MetricsTimeline::Start(options, [&](const std::string&) { ++logged; });
  std::this_thread::sleep_for(800ms);
  const std::vector<target::StepServerFigures> figures = timeline->Stop();
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_GE(figures[0].scrapes, 3u);
  EXPECT_EQ(figures[0].failed_scrapes, figures[0].scrapes);
  // Said once however many pages failed (a timeout on a loaded host would be a second kind).
  const std::vector<std::string> problems = timeline->Problems();
  EXPECT_EQ(std::count_if(problems.begin(), problems.end(),
                          [](const std::string& p) { return p.find("did not parse") != std::string::npos; }),
            1);
  EXPECT_EQ(logged, static_cast<int>(problems.size()));
  fs::remove_all(out);
}

TEST(MetricsTimelineTest, AHangingScrapeIsBoundedAndNeverHoldsTheCaller) {
  testing::ServerOptions hang;
  hang.hang_limit = 10s;
  testing::ScriptedServer server(testing::Script{testing::Hang()}, hang);
  target::TimelineOptions options;
  options.endpoint = net::ParseEndpoint(server.url()).value();
  options.interval = 200ms;  // each scrape is bounded by max(0.5 s, the interval)
  auto timeline = target::MetricsTimeline::Start(options, nullptr);
  std::this_thread::sleep_for(500ms);
  const auto before = std::chrono::steady_clock::now();
  const std::vector<target::StepServerFigures> figures = timeline->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 3s) << "the scrape in flight and a last one, 0.5 s each";
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_GE(figures[0].failed_scrapes, 2u);
}

}  // namespace
}  // namespace bakeoff
