// The metrics timeline against scripted pages on loopback: a page that does not parse is said
// once and scraping goes on; a scrape that hangs never holds the timeline past its bound. (Against
// the emulated engine: tests/integration/metrics_timeline_test.cc.)
#include "target/metrics_timeline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "support/scripted_server.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using bakeoff::testing::FreshScratchDir;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(MetricsTimelineTest, APageThatDoesNotParseIsSaidOnceAndScrapingGoesOn) {
  testing::ScriptedServer server([](const testing::CapturedRequest&) {
    return testing::Script{testing::Send(testing::FullResponse(200, "vllm:num_requests_running{ 3\n", "text/plain"))};
  });
  const fs::path out = FreshScratchDir("garbage");
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
