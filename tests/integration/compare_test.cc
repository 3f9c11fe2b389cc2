// `bakeoff compare` on real runs, on loopback: two runs of the same load against the same
// emulated engine show no regression (exit 0); the same load against an engine whose prefill is
// twice as slow regresses TTFT (exit 4); runs of different loads are refused (exit 2); a folder
// that is not a result is one line (exit 1).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using nlohmann::json;
namespace t = testing;

// A bench of 40 requests, one at a time, against an emulator with this prefill cost.
std::filesystem::path BenchAgainst(double prefill_ms_per_token, const std::string& name,
                                   std::vector<std::string> extra = {}) {
  emulate::EmulatorConfig config;
  config.port = 0;
  config.engine.cost.prefill_ms_per_token = prefill_ms_per_token;
  auto server = emulate::EmulatorServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.error().message;
  const std::filesystem::path out = bakeoff::testing::FreshScratchDir("bakeoff_compare_" + name);
  std::vector<std::string> args = {"bench", "--url", "http://127.0.0.1:" + std::to_string(server.value()->port()),
                                   "--requests", "40", "--concurrency", "1", "--prompt-tokens", "512",
                                   "--output-tokens", "8", "--ignore-eos", "--metrics-interval", "0", "--out",
                                   out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const t::Finished run = t::RunBakeoff(args);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return out;
}

TEST(CompareTimingTest, TheSameLoadTwiceIsNoRegressionAndASlowerPrefillIs) {
  const std::filesystem::path first = BenchAgainst(0.06, "first");
  const std::filesystem::path again = BenchAgainst(0.06, "again");
  const std::filesystem::path slower = BenchAgainst(0.12, "slower");

  const t::Finished same = t::RunBakeoff({"compare", first.string(), again.string()});
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("no regression"), std::string::npos) << same.output;
  EXPECT_NE(same.output.find("EMULATED"), std::string::npos) << same.output;

  const t::Finished regressed = t::RunBakeoff({"compare", first.string(), slower.string(), "--out", first.string()});
  EXPECT_EQ(regressed.exit_code, 4) << regressed.output;
  const json report = json::parse(std::ifstream(first / "compare.json"));
  EXPECT_TRUE(std::filesystem::exists(first / "compare.html")) << "compare.html beside compare.json";
  EXPECT_TRUE(report["regressed"].get<bool>());
  bool ttft_worse = false;
  for (const json& change : report["changes"]) {
    if (change["metric"] == "TTFT p50 ms") ttft_worse = change["verdict"] == "worse" && change["relative_change"] > 0.5;
  }
  EXPECT_TRUE(ttft_worse) << report.dump(2);

  const std::filesystem::path longer = BenchAgainst(0.06, "longer", {"--seed", "7"});
  const t::Finished refused = t::RunBakeoff({"compare", first.string(), longer.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("seed: 1 -> 7"), std::string::npos) << refused.output;
  EXPECT_EQ(t::RunBakeoff({"compare", first.string(), "/nonexistent/run"}).exit_code, 1);
  for (const auto& dir : {first, again, slower, longer}) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bakeoff
