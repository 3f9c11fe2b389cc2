// `bakeoff bench` against servers on bad days, through the built binary: a server that dies
// mid-run, one that echoes the credentials, inputs that cannot be represented, a full disk, and
// the small ways a run can go quietly wrong (lengths beyond the context, prompts off the plan, a
// base URL ending in /v1, skipped trace rows, a missing input file).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/file.h"
#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/fixture_engine.h"
#include "support/scripted_server.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using bakeoff::testing::LoopbackUrl;

using namespace std::chrono_literals;
using testing::Finished;
using testing::ProcessOptions;
using testing::RunBakeoff;

std::filesystem::path FreshDir(const std::string& name) {
  const auto dir =
      bakeoff::testing::ScratchRoot() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

// The emulated engine on an ephemeral loopback port, answering as fast as it can.
auto StartInstantEmulator(std::uint64_t crash_after = 0) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  emulator.instant = true;
  emulator.faults.crash_after = crash_after;
  return emulate::EmulatorServer::Start(emulator);
}

std::size_t CountLines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// The server crashes after 5 requests; the closed loop must not flood the disk with
// connect_failed records, must stop the step with a clear message, and must exit non-zero.
TEST(BenchBadDaysTest, ADeadServerStopsTheStepWithoutFloodingTheDisk) {
  auto server = StartInstantEmulator(/*crash_after=*/5);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = FreshDir("bakeoff_dead_server");
  const auto started = std::chrono::steady_clock::now();
  const Finished f =
      RunBakeoff({"bench", "--url", LoopbackUrl(server.value()->port()), "--concurrency", "4", "--duration",
                  "60s", "--no-calibrate", "--give-up-after", "1s", "--out", out.string()});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("no request succeeded"), std::string::npos) << f.output;
  const auto summary = nlohmann::json::parse(ReadFile(out / "summary.json").value());
  const auto& step = summary["steps"][0];
  EXPECT_NE(step.value("stopped_reason", "").find("no request succeeded"), std::string::npos)
      << step.dump();
  EXPECT_GT(step["connection_backoff"]["waits"].get<int>(), 0);
  const std::size_t records = CountLines(out / "records.jsonl");
  EXPECT_GE(records, 5u);
  EXPECT_LT(records, 200u) << "records.jsonl was flooded";
  std::filesystem::remove_all(out);
}

// A server that answers nothing but errors is given up the same way, not hammered for the step.
TEST(BenchBadDaysTest, AServerAnsweringOnlyErrorsIsGivenUp) {
  testing::ScriptedServer server(testing::Script{
      testing::Send(testing::FullResponse(500, R"({"error":{"message":"engine dead"}})"))});
  const auto out = FreshDir("bakeoff_only_errors");
  const auto started = std::chrono::steady_clock::now();
  const Finished f = RunBakeoff({"bench", "--url", server.url(), "--model", "m", "--concurrency",
                                 "2", "--duration", "60s", "--no-calibrate", "--give-up-after",
                                 "1s", "--out", out.string()});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  EXPECT_EQ(f.exit_code, 1) << f.output;
  const auto summary = nlohmann::json::parse(ReadFile(out / "summary.json").value());
  EXPECT_NE(summary["steps"][0].value("stopped_reason", "").find("engine dead"), std::string::npos)
      << summary["steps"][0].dump();
  std::filesystem::remove_all(out);
}

// A server that echoes the Authorization header in its error body: the key appears nowhere.
TEST(BenchBadDaysTest, AnEchoedBearerTokenIsRedactedEverywhere) {
  const std::string secret = "sk-test-4f9a1c0d2e7b";
  testing::ScriptedServer server([&](const testing::CapturedRequest& request) -> testing::Script {
    const std::string body = R"({"error":{"message":"invalid key )" +
                             std::string(request.Header("Authorization")) + R"(","type":"auth"}})";
    return {testing::Send(testing::FullResponse(401, body))};
  });
  const auto out = FreshDir("bakeoff_secret");
  ProcessOptions with_key;
  with_key.env = {{"OPENAI_API_KEY", secret}};
  const Finished f = RunBakeoff(
      {"bench", "--url", server.url(), "--model", "m", "--requests", "3", "--out", out.string()},
      with_key);
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_EQ(f.output.find(secret), std::string::npos) << f.output;
  EXPECT_NE(f.output.find("[REDACTED]"), std::string::npos) << f.output;
  for (const char* file : {"records.jsonl", "summary.json"}) {
    const std::string text = ReadFile(out / file).value();
    EXPECT_EQ(text.find(secret), std::string::npos) << file;
    EXPECT_NE(text.find("[REDACTED]"), std::string::npos) << file;
  }
  // The server did get the key: redaction is about what bakeoff writes, not what it sends.
  ASSERT_FALSE(server.requests().empty());
  EXPECT_EQ(server.requests().back().Header("Authorization"), "Bearer " + secret);
  std::filesystem::remove_all(out);
}

TEST(BenchBadDaysTest, ValuesThatCannotBeRepresentedAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--rate", "1e-300", "--arrival", "constant", "--requests", "3"}, "--rate"},
      {{"--rate", "1e-12", "--requests", "3"}, "--rate"},
      {{"--rate", "1", "--duration", "200000000s"}, "--duration"},
      {{"--concurrency", "1", "--duration", "1e9h"}, "--duration"},
      {{"--prompt-tokens", "100000000", "--requests", "1"}, "--prompt-tokens"},
      {{"--output-tokens", "4000000000", "--requests", "1"}, "--output-tokens"},
      {{"--idle-timeout", "0s", "--requests", "1"}, "--idle-timeout"},
      {{"--connect-timeout", "0", "--requests", "1"}, "--connect-timeout"},
      {{"--prompt-tolerance", "lots", "--requests", "1"}, "--prompt-tolerance"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args = {"bench", "--url", "http://127.0.0.1:1"};
    args.insert(args.end(), flags.begin(), flags.end());
    const Finished f = RunBakeoff(args);
    EXPECT_EQ(f.exit_code, 2) << named << ": " << f.output;
    EXPECT_NE(f.output.find(named), std::string::npos) << f.output;
  }
}

// Larger than the server's context: refused before any request, with both numbers.
TEST(BenchBadDaysTest, LengthsBeyondTheServersContextAreRefusedUpFront) {
  testing::FixtureEngine engine;
  engine.max_model_len = 1024;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const auto out = FreshDir("bakeoff_context");
  const Finished f =
      RunBakeoff({"bench", "--url", server.url(), "--prompt-tokens", "1000", "--output-tokens",
                  "100", "--requests", "1", "--out", out.string()});
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("context of 1024 tokens"), std::string::npos) << f.output;
  EXPECT_FALSE(std::filesystem::exists(out)) << "a refused run leaves no output folder";
}

// The engine's usage ignores the prompt: calibration cannot make lengths right, so bench refuses.
TEST(BenchBadDaysTest, PromptsOffThePlanAfterCalibrationAreRefused) {
  testing::FixtureEngine engine;
  engine.tokenize = dialect::TokenizeDialect::kVllm;
  engine.fixed_usage = 900;
  testing::ScriptedServer server(testing::FixtureResponder(engine));
  const auto out = FreshDir("bakeoff_off_plan");
  const Finished f = RunBakeoff({"bench", "--url", server.url(), "--prompt-tokens", "256",
                                 "--requests", "2", "--out", out.string()});
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("tolerance"), std::string::npos) << f.output;
  EXPECT_FALSE(std::filesystem::exists(out));
  // The user can accept it knowingly.
  const Finished accepted =
      RunBakeoff({"bench", "--url", server.url(), "--prompt-tokens", "256", "--requests", "2",
                  "--prompt-tolerance", "1000%", "--out", out.string()});
  EXPECT_EQ(accepted.exit_code, 0) << accepted.output;
  std::filesystem::remove_all(out);
}

// A base URL ending in /v1 is taken for what it means, and the summary counts skipped trace rows.
TEST(BenchBadDaysTest, AV1BaseUrlWorksAndSkippedTraceRowsReachTheSummary) {
  auto server = StartInstantEmulator();
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto dir = FreshDir("bakeoff_v1");
  std::filesystem::create_directories(dir);
  {
    std::ofstream trace(dir / "trace.jsonl");
    trace << R"({"timestamp": 0, "input_length": 20, "output_length": 4})"
          << "\n"
          << R"({"timestamp": 10, "input_length": "x", "output_length": 4})"
          << "\n"
          << R"({"timestamp": 20, "input_length": 30, "output_length": 4})"
          << "\n";
  }
  const Finished f = RunBakeoff({"bench", "--url", LoopbackUrl(server.value()->port()) + "/v1/", "--trace",
                                 (dir / "trace.jsonl").string(), "--skip-invalid", "--time-scale",
                                 "0.01", "--out", (dir / "out").string()});
  EXPECT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find("ends in /v1"), std::string::npos) << f.output;
  const auto summary = nlohmann::json::parse(ReadFile(dir / "out" / "summary.json").value());
  EXPECT_EQ(summary["config"]["trace_import"]["rows_skipped"].get<int>(), 1)
      << summary["config"].dump();
  EXPECT_EQ(summary["steps"][0]["requests"]["outcomes"]["ok"].get<int>(), 2);
  std::filesystem::remove_all(dir);
}

// A full disk: the table still reaches the terminal, no .tmp is left, and the exit code says so.
TEST(BenchBadDaysTest, AFullDiskLeavesNoTemporaryFileAndStillPrintsTheTable) {
  auto server = StartInstantEmulator();
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = FreshDir("bakeoff_full_disk");
  ProcessOptions full_disk;
  full_disk.file_size_limit_bytes = 2048;
  const Finished f = RunBakeoff({"bench", "--url", LoopbackUrl(server.value()->port()), "--requests", "20",
                                 "--concurrency", "2", "--out", out.string()},
                                full_disk);
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("concurrency=2"), std::string::npos) << "the table: " << f.output;
  EXPECT_FALSE(std::filesystem::exists(out / "summary.json.tmp"));
  std::filesystem::remove_all(out);
}

TEST(BenchBadDaysTest, AMissingInputFileExitsTwoInEveryCommand) {
  const std::string missing = "/nonexistent/trace.jsonl";
  const std::vector<std::vector<std::string>> commands = {
      {"fingerprint", missing},
      {"synth", "--from-trace", missing, "--out", "/tmp/unused.jsonl"},
      {"bench", "--url", "http://127.0.0.1:1", "--trace", missing},
      {"simulate", "--trace", missing},
  };
  for (const auto& args : commands) {
    const Finished f = RunBakeoff(args);
    EXPECT_EQ(f.exit_code, 2) << args.front() << ": " << f.output;
    EXPECT_NE(f.output.find(missing), std::string::npos) << f.output;
  }
}

TEST(BenchBadDaysTest, SynthIntoAFolderLeavesNothingBehind) {
  const auto dir = FreshDir("bakeoff_synth_folder");
  std::filesystem::create_directories(dir / "target");
  const Finished f =
      RunBakeoff({"synth", "--from-shape", BAKEOFF_SOURCE_DIR "/examples/workloads/chatbot.yaml",
                  "--out", (dir / "target").string()});
  EXPECT_NE(f.exit_code, 0) << f.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "target.tmp"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bakeoff
