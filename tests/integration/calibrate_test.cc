// `bakeoff calibrate` against the emulated engine on 127.0.0.1, whose costs are the ground truth:
// run with costs unlike the base preset's, the fit recovers them within the tolerances
// docs/engine-presets.md states (wall-clock, so a *TimingTest), and writes a preset the simulator
// reads; an endpoint that serves nothing fails with a message naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "emulate/engine_preset.h"
#include "emulate/server.h"
#include "run/calibrate.h"
#include "support/bakeoff_process.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;

emulate::EnginePreset BasePreset() {
  Result<emulate::EnginePreset> preset =
      emulate::LoadEnginePreset(fs::path(BAKEOFF_SOURCE_DIR) / "examples/engines/continuous-paged.yaml");
  EXPECT_TRUE(preset.ok()) << preset.error().message;
  return preset.ok() ? preset.value() : emulate::EnginePreset{};
}

TEST(CalibrateTimingTest, RecoversTheEmulatedEnginesStepCosts) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  emulator.engine = BasePreset().config;
  // Costs unlike the base preset's, so a fit that kept the base's figures would fail.
  emulate::CostModel truth;
  truth.base_ms = 9.0;
  truth.prefill_ms_per_token = 0.025;
  truth.decode_ms_per_seq = 0.12;
  truth.kv_ms_per_1k_tokens = 0.09;
  emulator.engine.cost = truth;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;

  run::CalibrateConfig config;
  config.target.endpoint = {false, "127.0.0.1", std::to_string(server.value()->port()), ""};
  config.target.request.ignore_eos = true;
  config.target.request.min_tokens = 1;
  config.url = "http://127.0.0.1:" + std::to_string(server.value()->port());
  config.base = BasePreset();
  config.budget = std::chrono::seconds(90);
  config.out = fs::temp_directory_path() / ("bakeoff_calibrated_" + std::to_string(::getpid()) + ".yaml");
  std::atomic<bool> stop{false};
  Result<run::CalibrationOutcome> outcome = run::Calibrate(config, stop, [](const std::string&) {});
  ASSERT_TRUE(outcome.ok()) << outcome.error().message;
  ASSERT_EQ(outcome->fits.size(), 2u);
  for (const run::CalibrationFit& fit : outcome->fits) {
    EXPECT_TRUE(fit.good) << fit.name << ": " << fit.problem;
    EXPECT_GE(fit.points.size(), 4u) << fit.name;
  }
  const emulate::CostModel& fitted = outcome->preset.config.cost;
  EXPECT_NEAR(fitted.base_ms, truth.base_ms, 0.10 * truth.base_ms);
  EXPECT_NEAR(fitted.prefill_ms_per_token, truth.prefill_ms_per_token, 0.15 * truth.prefill_ms_per_token);
  EXPECT_NEAR(fitted.decode_ms_per_seq, truth.decode_ms_per_seq, 0.25 * truth.decode_ms_per_seq);
  EXPECT_NEAR(fitted.kv_ms_per_1k_tokens, truth.kv_ms_per_1k_tokens, 0.25 * truth.kv_ms_per_1k_tokens);
  EXPECT_FALSE(outcome->not_determined.empty());

  // The file is a preset the emulator and simulator read, with the fitted costs.
  Result<emulate::EnginePreset> reread = emulate::LoadEnginePreset(config.out);
  ASSERT_TRUE(reread.ok()) << reread.error().message;
  EXPECT_DOUBLE_EQ(reread->config.cost.decode_ms_per_seq, fitted.decode_ms_per_seq);
  EXPECT_EQ(reread->config.kv.num_blocks, config.base.config.kv.num_blocks);  // not measured: the base's
  fs::remove(config.out);
}

TEST(CalibrateTest, AnEndpointThatServesNothingFailsNamingIt) {
  const testing::Finished f = testing::RunBakeoff({"calibrate", "--url", "http://127.0.0.1:1", "--out", "/tmp/never.yaml"});
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("127.0.0.1:1"), std::string::npos) << f.output;
  EXPECT_FALSE(fs::exists("/tmp/never.yaml"));
  const testing::Finished budget =
      testing::RunBakeoff({"calibrate", "--url", "http://127.0.0.1:1", "--out", "/tmp/never.yaml", "--budget", "1s"});
  EXPECT_EQ(budget.exit_code, 2) << budget.output;
  EXPECT_NE(budget.output.find("--budget"), std::string::npos) << budget.output;
  const testing::Finished base = testing::RunBakeoff(
      {"calibrate", "--url", "http://127.0.0.1:1", "--out", "/tmp/never.yaml", "--base-preset", "no-such-preset"});
  EXPECT_EQ(base.exit_code, 2) << base.output;
  EXPECT_NE(base.output.find("--base-preset"), std::string::npos) << base.output;
}

}  // namespace
}  // namespace bakeoff
