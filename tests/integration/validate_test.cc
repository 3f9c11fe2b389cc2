// `bakeoff calibrate --validate` against the emulated engine on 127.0.0.1: validating the preset the
// server runs shows small errors at every held-out load, a deliberately wrong preset large ones
// (the check can fail), both wall-clock (*TimingTest); and the refusals through the CLI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file.h"
#include "emulate/engine_preset.h"
#include "emulate/server.h"
#include "run/validate.h"
#include "support/bakeoff_process.h"
#include "support/timing.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;

emulate::EnginePreset ContinuousPagedPreset() {
  Result<emulate::EnginePreset> preset =
      emulate::LoadEnginePreset(fs::path(BAKEOFF_SOURCE_DIR) / "examples/engines/continuous-paged.yaml");
  EXPECT_TRUE(preset.ok()) << preset.error().message;
  return preset.ok() ? preset.value() : emulate::EnginePreset{};
}

const run::MetricError& Metric(const run::ValidationStep& step, const std::string& name) {
  for (const run::MetricError& e : step.metrics) {
    if (e.metric == name) return e;
  }
  static const run::MetricError missing{"missing", 0, 0, 1e9};
  ADD_FAILURE() << "no metric " << name;
  return missing;
}

class ValidateTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulate::EmulatorConfig emulator;
    emulator.port = 0;
    emulator.engine = ContinuousPagedPreset().config;
    auto server = emulate::EmulatorServer::Start(emulator);
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(server.value());
    dir_ = bakeoff::testing::ScratchRoot() / ("bakeoff_validate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A seed per run: a second run on the same server must not find the first one's prompts cached.
  run::ValidateConfig Config(const emulate::EnginePreset& preset, const std::string& name, std::uint64_t run) {
    run::ValidateConfig config;
    config.server.url = "http://127.0.0.1:" + std::to_string(server_->port());
    config.request.ignore_eos = true;
    config.preset = preset;
    config.preset_name = name;
    config.out_dir = dir_ / name;
    config.seed = static_cast<std::uint64_t>(::getpid()) * 7919 + run;
    config.budget = std::chrono::seconds(12);
    fs::create_directories(config.out_dir);
    return config;
  }

  std::unique_ptr<emulate::EmulatorServer> server_;
  fs::path dir_;
  const std::atomic<bool> stop_{false};
};

TEST_F(ValidateTimingTest, TheServersOwnPresetPredictsItAndAWrongOneDoesNot) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  // Wall-clock on a shared machine: the server's own preset must hold in one of three attempts (a
  // loaded machine slows the real run, never the simulated one). Three, because on a 2-core
  // machine running the other tests two attempts in a row can miss the 15% tolerance by a few
  // points (a bursty TTFT p50, a lone request with nothing else running) while the preset is
  // right. The wrong preset below still has to miss by far.
  std::string misses;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const std::string name = "right" + std::to_string(attempt);
    Result<run::ValidationOutcome> right = run::ValidatePreset(Config(ContinuousPagedPreset(), name, attempt), stop_, [](const std::string&) {});
    ASSERT_TRUE(right.ok()) << right.error().message;
    ASSERT_EQ(right->steps.size(), 4u);
    EXPECT_GT(right->capacity_per_s, 0);
    EXPECT_TRUE(fs::exists(dir_ / name / "simulated_capacity" / "summary.json"));
    EXPECT_TRUE(fs::exists(dir_ / name / "validation.json"));
    EXPECT_TRUE(fs::exists(dir_ / name / "measured" / "summary.json"));
    EXPECT_TRUE(fs::exists(dir_ / name / "simulated" / "summary.json"));
    std::string miss;
    // The preset's own capacity: the same closed loop on the simulator.
    if (!(std::abs(right->capacity.error) < run::kThroughputTolerance)) {
      miss += "capacity " + std::to_string(right->capacity.error) + "\n";
    }
    for (const run::ValidationStep& step : right->steps) {
      for (const auto& [metric, tolerance] : {std::pair{"requests_per_s", run::kThroughputTolerance},
                                              std::pair{"tpot_p50_ms", run::kMedianTolerance},
                                              std::pair{"ttft_p50_ms", run::kMedianTolerance}}) {
        const run::MetricError& e = Metric(step, metric);
        if (!(std::abs(e.error) < tolerance)) miss += step.label + ": " + metric + " " + std::to_string(e.error) + "\n";
      }
      // The lone request just before the load, predicted as closely.
      EXPECT_EQ(step.lone.size(), 2u) << step.label;
      for (const run::MetricError& e : step.lone) {
        if (!(std::abs(e.error) < run::kMedianTolerance)) {
          miss += step.label + ": lone " + e.metric + " " + std::to_string(e.error) + "\n";
        }
      }
    }
    if (miss.empty()) {
      misses.clear();
      break;
    }
    misses += "attempt " + std::to_string(attempt) + ":\n" + miss;
  }
  EXPECT_TRUE(misses.empty()) << misses;

  // Steps twice as slow and decodes three times as costly: every load is predicted far off.
  emulate::EnginePreset wrong = ContinuousPagedPreset();
  wrong.config.cost.base_ms *= 2;
  wrong.config.cost.decode_ms_per_seq *= 3;
  Result<run::ValidationOutcome> off = run::ValidatePreset(Config(wrong, "wrong", 4), stop_, [](const std::string&) {});
  ASSERT_TRUE(off.ok()) << off.error().message;
  for (const run::ValidationStep& step : off->steps) {
    EXPECT_FALSE(step.holds) << step.label;
    EXPECT_GT(Metric(step, "tpot_p50_ms").error, 0.5) << step.label;
    // Wrong with nothing else running too: the lone request's TPOT is predicted as far off.
    ASSERT_EQ(step.lone.size(), 2u) << step.label;
    EXPECT_EQ(step.lone[1].metric, "tpot_p50_ms");
    EXPECT_GT(step.lone[1].error, 0.5) << step.label;
  }
  EXPECT_NE(off->summary.find("stops holding"), std::string::npos) << off->summary;
  // Its capacity far below the server's, and the summary says how near its own saturation each
  // failing load ran.
  EXPECT_LT(off->capacity.error, -0.3) << off->capacity.simulated << " against " << off->capacity.measured;
  EXPECT_NE(off->summary.find("of the model's own capacity"), std::string::npos) << off->summary;
  // ... and that its lone requests were off before any load ran.
  EXPECT_NE(off->summary.find("a lone request was already predicted off (TTFT p50"), std::string::npos) << off->summary;
  // validation.json carries the probe and the load's error beyond it, (1 + load) / (1 + lone) - 1.
  Result<std::string> text = ReadFile(dir_ / "wrong" / "validation.json");
  ASSERT_TRUE(text.ok()) << text.error().message;
  const nlohmann::json first = nlohmann::json::parse(*text)["steps"][0];
  const double load = first["metrics"]["tpot_p50_ms"]["error"].get<double>();
  const double lone = first["lone_request"]["tpot_p50_ms"]["error"].get<double>();
  EXPECT_NEAR(first["error_beyond_lone_request"]["tpot_p50_ms"].get<double>(), (1 + load) / (1 + lone) - 1, 1e-9);
}

TEST(ValidateTest, RefusesAWrongPresetOrShareAndNamesAnEndpointThatServesNothing) {
  const std::string out = (bakeoff::testing::ScratchRoot() / ("bakeoff_validate_cli_" + std::to_string(::getpid()))).string();
  const testing::Finished preset = testing::RunBakeoff(
      {"calibrate", "--url", "http://127.0.0.1:1", "--validate", "no-such-preset", "--out", out, "--engine", "vllm"});
  EXPECT_EQ(preset.exit_code, 2) << preset.output;
  EXPECT_NE(preset.output.find("--validate"), std::string::npos) << preset.output;
  const testing::Finished share = testing::RunBakeoff({"calibrate", "--url", "http://127.0.0.1:1", "--validate",
                                                       "continuous-paged", "--fractions", "0.3,3", "--out", out,
                                                       "--engine", "vllm"});
  EXPECT_EQ(share.exit_code, 2) << share.output;
  EXPECT_NE(share.output.find("--fractions: 3"), std::string::npos) << share.output;
  const testing::Finished nothing = testing::RunBakeoff({"calibrate", "--url", "http://127.0.0.1:1", "--validate",
                                                         "continuous-paged", "--budget", "10s", "--out", out,
                                                         "--engine", "vllm"});
  EXPECT_EQ(nothing.exit_code, 1) << nothing.output;
  EXPECT_NE(nothing.output.find("127.0.0.1:1"), std::string::npos) << nothing.output;
  fs::remove_all(out);
}

}  // namespace
}  // namespace bakeoff
