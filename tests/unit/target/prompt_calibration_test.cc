// Prompt calibration against fake engines of every tokenize dialect and one with none (usage
// fallback): prompts the run builds land within 2% of the asked length, as the engine counts.
#include "target/prompt_calibration.h"

#include <gtest/gtest.h>

#include "load/request_builder.h"
#include "load/runner.h"
#include "support/fixture_engine.h"
#include "target/discovery.h"

namespace bakeoff::target {
namespace {

using testing::FixtureEngine;

CalibrationPlan PlanFor(const testing::ScriptedServer& server,
                        std::optional<std::uint32_t> planned) {
  CalibrationPlan plan;
  plan.endpoint = net::ParseEndpoint(server.url()).value();
  plan.request.model = "fixture-model";
  plan.request.api = dialect::Api::kChat;
  plan.planned_prompt_tokens = planned;
  plan.seed = 7;
  return plan;
}

// Mean prompt length, as the engine counts it, of the first `n` requests a run would send.
double RunPromptMean(const FixtureEngine& engine, const load::PromptSizing& sizing,
                     std::uint32_t planned, int n) {
  load::RunSpec run;
  run.target.request.model = "fixture-model";
  run.target.prompt_sizing = sizing;
  run.shape.prompt_tokens = planned;
  run.seed = 7;
  const load::PromptText prompts;
  double sum = 0;
  for (int id = 0; id < n; ++id) {
    const dialect::GenerationRequest request = load::BuildSyntheticRequest(run, prompts, 0, id);
    sum += static_cast<double>(testing::FixtureChatPromptTokens(engine, request.prompt));
  }
  return sum / n;
}

struct DialectCase {
  std::optional<dialect::TokenizeDialect> dialect;
  const char* method;
};

class CalibrationByDialectTest : public ::testing::TestWithParam<DialectCase> {};

TEST_P(CalibrationByDialectTest, PromptsLandWithinTwoPercentOfThePlan) {
  FixtureEngine engine;
  engine.tokenize = GetParam().dialect;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  for (std::uint32_t planned : {256u, 1024u}) {
    const PromptCalibration c = CalibratePrompts(PlanFor(server, planned), load::PromptText());
    ASSERT_TRUE(c.checked) << c.reason;
    EXPECT_EQ(c.method, GetParam().method);
    EXPECT_EQ(c.tokenize_dialect, GetParam().dialect);
    EXPECT_TRUE(c.overhead_measured);
    // BOS + template + one message's markers.
    EXPECT_NEAR(c.sizing.overhead_tokens, 8, 2);
    ASSERT_TRUE(c.achieved_tokens.has_value());
    EXPECT_LT(std::abs(*c.Deviation()), 0.02)
        << planned << " planned, " << *c.achieved_tokens << " counted";
    const double mean = RunPromptMean(engine, c.sizing, planned, 40);
    EXPECT_NEAR(mean, planned, 0.02 * planned) << "the run's own prompts, planned " << planned;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryDialect, CalibrationByDialectTest,
    ::testing::Values(DialectCase{dialect::TokenizeDialect::kVllm, "tokenize+usage"},
                      DialectCase{dialect::TokenizeDialect::kLlamaCpp, "tokenize+usage"},
                      DialectCase{dialect::TokenizeDialect::kTgi, "tokenize+usage"},
                      DialectCase{dialect::TokenizeDialect::kTrtLlm, "tokenize+usage"},
                      DialectCase{dialect::TokenizeDialect::kLmdeploy, "tokenize+usage"},
                      DialectCase{std::nullopt, "usage"}),
    [](const ::testing::TestParamInfo<DialectCase>& param_info) {
      std::string name = param_info.param.dialect
                             ? dialect::TokenizeDialectName(*param_info.param.dialect)
                             : "usage_only";
      std::erase(name, '.');
      return name;
    });

TEST(PromptCalibrationTest, TokenizeWithoutUsageSizesByTheRatioAlone) {
  FixtureEngine engine;
  engine.tokenize = dialect::TokenizeDialect::kLlamaCpp;
  engine.reports_usage = false;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const PromptCalibration c = CalibratePrompts(PlanFor(server, 256), load::PromptText());
  ASSERT_TRUE(c.checked) << c.reason;
  EXPECT_EQ(c.method, "tokenize");
  EXPECT_FALSE(c.overhead_measured);
  EXPECT_EQ(c.achieved_by, "tokenize + overhead");
  EXPECT_FALSE(c.notes.empty());
  // The content alone is 256 tokens; the template on top cannot be known without usage.
  ASSERT_TRUE(c.achieved_tokens.has_value());
  EXPECT_NEAR(*c.achieved_tokens, 256, 0.02 * 256);
}

TEST(PromptCalibrationTest, NoTokenizeAndNoUsageIsNotCheckedAndSaysWhy) {
  FixtureEngine engine;
  engine.reports_usage = false;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const PromptCalibration c = CalibratePrompts(PlanFor(server, 256), load::PromptText());
  EXPECT_FALSE(c.checked);
  EXPECT_NE(c.reason.find("usage"), std::string::npos) << c.reason;
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes.front().find("no token-counting route"), std::string::npos) << c.notes.front();
  EXPECT_FALSE(c.Deviation().has_value());
}

TEST(PromptCalibrationTest, ReplayMeasuresTheSizingWithoutACheck) {
  FixtureEngine engine;
  engine.tokenize = dialect::TokenizeDialect::kVllm;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const PromptCalibration c = CalibratePrompts(PlanFor(server, std::nullopt), load::PromptText());
  ASSERT_TRUE(c.checked);
  EXPECT_FALSE(c.planned_tokens.has_value());
  EXPECT_FALSE(c.achieved_tokens.has_value());
  EXPECT_GT(c.sizing.words_per_token, 0.5);
  EXPECT_LT(c.sizing.words_per_token, 1.0);  // the fixture makes more tokens than words
}

TEST(PromptCalibrationTest, AnEngineWhoseUsageIgnoresThePromptShowsAsADeviation) {
  FixtureEngine engine;
  engine.tokenize = dialect::TokenizeDialect::kVllm;
  engine.fixed_usage = 900;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const PromptCalibration c = CalibratePrompts(PlanFor(server, 256), load::PromptText());
  ASSERT_TRUE(c.Deviation().has_value());
  EXPECT_GT(*c.Deviation(), 1.0);
}

TEST(DiscoveryTest, StripsATrailingV1AndSaysSo) {
  net::Endpoint endpoint = net::ParseEndpoint("http://127.0.0.1:8000/v1").value();
  const std::optional<std::string> note = StripApiVersionSuffix(endpoint);
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(endpoint.base_path, "");
  EXPECT_NE(note->find("/v1"), std::string::npos);
  net::Endpoint prefixed = net::ParseEndpoint("http://h:1/openai/v1/").value();
  EXPECT_TRUE(StripApiVersionSuffix(prefixed).has_value());
  EXPECT_EQ(prefixed.base_path, "/openai");
  net::Endpoint plain = net::ParseEndpoint("http://h:1/v1beta").value();
  EXPECT_FALSE(StripApiVersionSuffix(plain).has_value());
  EXPECT_EQ(plain.base_path, "/v1beta");
}

TEST(DiscoveryTest, FindsTheModelAndItsContextLimit) {
  FixtureEngine engine;
  engine.max_model_len = 2048;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const Result<TargetFacts> facts =
      Discover(net::ParseEndpoint(server.url()).value(), net::ClientOptions{}, "");
  ASSERT_TRUE(facts.ok()) << facts.error().message;
  EXPECT_EQ(facts->model, "fixture-model");
  EXPECT_TRUE(facts->model_from_listing);
  EXPECT_FALSE(facts->emulated);
  EXPECT_EQ(facts->max_context_tokens, 2048u);
  EXPECT_FALSE(facts->slots.has_value()) << "no GET /props";
}

// llama.cpp says how many slots it runs in GET /props (total_slots).
TEST(DiscoveryTest, ReadsLlamaCppsSlotCount) {
  FixtureEngine engine;
  engine.total_slots = 4;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const Result<TargetFacts> facts =
      Discover(net::ParseEndpoint(server.url()).value(), net::ClientOptions{}, "");
  ASSERT_TRUE(facts.ok()) << facts.error().message;
  EXPECT_EQ(facts->slots, 4u);
}

}  // namespace
}  // namespace bakeoff::target
