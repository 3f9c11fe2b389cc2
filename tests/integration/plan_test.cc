// `bakeoff plan` through the CLI: plan.json and the table for a rate and for a trace with prefix
// blocks (every what-if applied or declared not applicable), --fingerprint synthesized into the
// output folder, and each refusal with exit 2 and a message naming the cause.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file.h"
#include "support/bakeoff_process.h"
#include "workload/fingerprint.h"
#include "workload/trace_jsonl.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = bakeoff::testing::ScratchRoot() /
           ("bakeoff_plan_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 240 requests, 4 per second, of 512 prompt tokens in 32 blocks of 16: request i shares its
  // first 16 blocks with every request of its group (i % 8), the rest its own.
  fs::path WriteTrace() const {
    workload::Trace trace;
    trace.source = "plan_test";
    trace.block_tokens = 16;
    for (std::uint64_t i = 0; i < 240; ++i) {
      workload::TraceRequest r;
      r.arrival_s = static_cast<double>(i) / 4;
      r.input_tokens = 512;
      r.output_tokens = 16;
      for (std::uint64_t k = 0; k < 32; ++k) r.prefix_hashes.push_back(k < 16 ? (i % 8) * 100 + k : 100000 + i * 32 + k);
      trace.requests.push_back(r);
    }
    const fs::path path = dir_ / "trace.jsonl";
    EXPECT_TRUE(workload::WriteTraceJsonl(trace, path).ok());
    return path;
  }

  nlohmann::json ReadPlan(const fs::path& out) const {
    Result<std::string> text = ReadFile(out / "plan.json");
    EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json{};
  }

  fs::path dir_;
};

TEST_F(PlanTest, PlansARateForEveryRouterAndSaysWhichWhatIfsApply) {
  const testing::Finished f = testing::RunBakeoff(
      {"plan", "--preset", "small-cpu", "--rate", "2", "--requests", "200", "--prompt-tokens", "100", "--output-tokens",
       "20", "--ignore-eos", "--slo", "ttft_p99=3s", "--out", (dir_ / "rate").string()});
  ASSERT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find("emulated: every figure is a simulation"), std::string::npos) << f.output;
  EXPECT_NE(f.output.find("kv-aware"), std::string::npos) << f.output;
  const nlohmann::json plan = ReadPlan(dir_ / "rate");
  EXPECT_TRUE(plan["emulated"].get<bool>());
  ASSERT_EQ(plan["scenarios"].size(), 4u);
  EXPECT_EQ(plan["scenarios"][0]["routers"].size(), 4u);
  for (const nlohmann::json& router : plan["scenarios"][0]["routers"]) {
    ASSERT_TRUE(router["replicas"].is_number()) << router.dump();
    EXPECT_GT(router["replicas"].get<std::int64_t>(), 1) << "one small-cpu replica serves about 1 request/s";
    // The answer is bracketed: the size below it (when there is one) was simulated and failed.
    const std::int64_t n = router["replicas"];
    bool below_failed = n == 1;
    for (const nlohmann::json& t : router["trials"]) {
      if (t["replicas"] == n - 1) below_failed = !t["passed"].get<bool>();
      if (t["replicas"] == n) {
        EXPECT_TRUE(t["passed"].get<bool>());
      }
    }
    EXPECT_TRUE(below_failed) << router.dump();
  }
  EXPECT_EQ(plan["scenarios"][2]["name"], "half-prefix-reuse");
  EXPECT_NE(plan["scenarios"][2]["not_applicable"].get<std::string>().find("synthetic"), std::string::npos);
  // Twice the traffic never needs fewer replicas than the load as given (round-robin).
  EXPECT_GE(plan["scenarios"][1]["routers"][0]["replicas"].get<std::int64_t>(),
            plan["scenarios"][0]["routers"][0]["replicas"].get<std::int64_t>());
}

TEST_F(PlanTest, HalvesATracesPrefixReuseAndSynthesizesFromAFingerprint) {
  const fs::path trace = WriteTrace();
  const testing::Finished f = testing::RunBakeoff(
      {"plan", "--trace", trace.string(), "--slo", "ttft_p99=500ms", "--routers", "round-robin,kv-aware", "--what-if",
       "half-prefix-reuse", "--out", (dir_ / "trace").string()});
  ASSERT_EQ(f.exit_code, 0) << f.output;
  const nlohmann::json plan = ReadPlan(dir_ / "trace");
  ASSERT_EQ(plan["scenarios"].size(), 2u);
  const std::string change = plan["scenarios"][1]["change"];
  // All but each group's first request find its 256-token half cached: 232 * 256 of 240 * 512.
  EXPECT_NE(change.find("prefix reuse 48.3% -> "), std::string::npos) << change;
  EXPECT_EQ(plan["scenarios"][1]["requests"], 240);

  Result<workload::Fingerprint> fingerprint = workload::FingerprintFile(trace, {});
  ASSERT_TRUE(fingerprint.ok()) << fingerprint.error().message;
  ASSERT_TRUE(WriteFileAtomically(dir_ / "fp.json", workload::FingerprintJson(*fingerprint)).ok());
  const testing::Finished g = testing::RunBakeoff({"plan", "--fingerprint", (dir_ / "fp.json").string(), "--slo",
                                                   "ttft_p99=500ms", "--routers", "round-robin", "--what-if", "none",
                                                   "--out", (dir_ / "fp").string()});
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_TRUE(fs::exists(dir_ / "fp" / "workload.jsonl"));
  EXPECT_NE(g.output.find("synthesized 240 requests"), std::string::npos) << g.output;
  EXPECT_TRUE(ReadPlan(dir_ / "fp")["scenarios"][0]["routers"][0]["replicas"].is_number());
}

TEST_F(PlanTest, RefusesWhatNoFleetCanMeetOrItCannotPlan) {
  const std::string out = (dir_ / "never").string();
  const std::vector<std::string> load = {"--rate", "5", "--requests", "50", "--prompt-tokens", "200", "--output-tokens", "20"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"plan"};
    args.insert(args.end(), load.begin(), load.end());
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--out", out});
    return testing::RunBakeoff(args);
  };
  const testing::Finished impossible = run({"--slo", "ttft_p99=0.01ms"});
  EXPECT_EQ(impossible.exit_code, 2) << impossible.output;
  EXPECT_NE(impossible.output.find("cannot be met by any fleet: one idle replica"), std::string::npos)
      << impossible.output;
  EXPECT_NE(impossible.output.find("ttft_p99=0.01ms observed"), std::string::npos) << impossible.output;

  const testing::Finished no_slo = run({});
  EXPECT_EQ(no_slo.exit_code, 2);
  EXPECT_NE(no_slo.output.find("--slo"), std::string::npos) << no_slo.output;
  const testing::Finished router = run({"--slo", "ttft_p99=1s", "--routers", "random"});
  EXPECT_EQ(router.exit_code, 2);
  EXPECT_NE(router.output.find("--routers: 'random'"), std::string::npos) << router.output;
  const testing::Finished what_if = run({"--slo", "ttft_p99=1s", "--what-if", "triple-traffic"});
  EXPECT_EQ(what_if.exit_code, 2);
  EXPECT_NE(what_if.output.find("--what-if: 'triple-traffic'"), std::string::npos) << what_if.output;
  const testing::Finished closed = testing::RunBakeoff(
      {"plan", "--concurrency", "4", "--requests", "50", "--slo", "ttft_p99=1s", "--out", out});
  EXPECT_EQ(closed.exit_code, 2);
  EXPECT_NE(closed.output.find("--concurrency"), std::string::npos) << closed.output;
  EXPECT_FALSE(fs::exists(dir_ / "never" / "plan.json"));
}

// The emulated server answers another model name 404; simulate and plan, which model it, refuse it
// up front instead of predicting a load the server would not serve.
TEST(SimulateModelTest, SimulateAndPlanRefuseAModelTheEmulatedServerWouldNotServe) {
  for (const char* command : {"simulate", "plan"}) {
    const testing::Finished f = testing::RunBakeoff(
        {command, "--model", "llama-3-8b", "--rate", "5", "--requests", "5", "--slo", "ttft_p99=1s", "--out",
         (bakeoff::testing::ScratchRoot() / ("bakeoff_model_" + std::to_string(::getpid()))).string()});
    EXPECT_EQ(f.exit_code, 2) << command << ": " << f.output;
    EXPECT_NE(f.output.find("--model: the simulated engine serves 'emulated-model'"), std::string::npos) << f.output;
    EXPECT_NE(f.output.find("404"), std::string::npos) << f.output;
  }
  const testing::Finished same = testing::RunBakeoff(
      {"simulate", "--model", "emulated-model", "--rate", "5", "--requests", "5", "--keep", "summary", "--out",
       (bakeoff::testing::ScratchRoot() / ("bakeoff_model_ok_" + std::to_string(::getpid()))).string()});
  EXPECT_EQ(same.exit_code, 0) << same.output;
  fs::remove_all(bakeoff::testing::ScratchRoot() / ("bakeoff_model_ok_" + std::to_string(::getpid())));
}

}  // namespace
}  // namespace bakeoff
