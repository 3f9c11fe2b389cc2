// The built `bakeoff` binary: flag errors name the flag and exit 2; a bench run stopped by SIGINT
// or SIGTERM exits 128 + the signal and still writes a valid summary of what it measured.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/file.h"
#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using namespace std::chrono_literals;

using testing::Finished;
using testing::ProcessOptions;
using testing::RunBakeoff;

TEST(CliTest, InvalidFlagsNameTheFlagAndExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench", "--url", "ftp://x", "--requests", "1"}, "--url"},
      {{"bench", "--url", "http://127.0.0.1:1", "--rate", "-3", "--requests", "1"}, "--rate"},
      {{"bench", "--url", "http://127.0.0.1:1", "--duration", "ten", "--rate", "1"}, "--duration"},
      {{"bench", "--url", "http://127.0.0.1:1", "--rate", "1"}, "--duration or --requests"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--slo", "ttft=1"}, "--slo"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--arrival", "x", "--rate", "1"}, "--arrival"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--api", "grpc"}, "--api"},
      {{"bench", "--requests", "1"}, "--url"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "x"}, "--requests"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--shard", "3/3", "--start-at", "4000000000"}, "--shard"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--shard", "0/2"}, "needs --start-at"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--start-at", "2020-01-01T00:00:00Z"}, "passed"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--start-at", "tomorrow"}, "--start-at"},
      {{"bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--concurrency", "1,2", "--shard", "1/2",
        "--start-at", "4000000000"}, "one load per step"},
  };
  for (const auto& [args, flag] : cases) {
    const Finished f = RunBakeoff(args);
    EXPECT_EQ(f.exit_code, 2) << f.output;
    EXPECT_NE(f.output.find(flag), std::string::npos) << f.output;
  }
}

TEST(CliTest, UnreachableServerFailsWithAClearMessage) {
  const Finished f = RunBakeoff({"bench", "--url", "http://127.0.0.1:1", "--requests", "1",
                                 "--connect-timeout", "2s", "--out", "/tmp/bakeoff_unreachable"});
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("cannot reach http://127.0.0.1:1"), std::string::npos) << f.output;
}

// A bench writes report.html beside summary.json; `bakeoff report` draws it again, also from a
// records.jsonl cut by a killed run (and says so on the page); a folder that is no result is one
// line and exit 2.
TEST(CliTest, ReportPagesAreWrittenAndRenderedAgain) {
  emulate::EmulatorConfig config;
  config.port = 0;
  auto server = emulate::EmulatorServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::filesystem::path out = bakeoff::testing::ScratchRoot() / ("bakeoff_report_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  const Finished bench = RunBakeoff({"bench", "--url", "http://127.0.0.1:" + std::to_string(server.value()->port()),
                                     "--requests", "12", "--concurrency", "2", "--prompt-tokens", "64",
                                     "--output-tokens", "4", "--metrics-interval", "0", "--out", out.string()});
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("report: " + (out / "report.html").string()), std::string::npos) << bench.output;
  ASSERT_TRUE(std::filesystem::exists(out / "report.html"));

  Result<std::string> records = ReadFile(out / "records.jsonl");
  ASSERT_TRUE(records.ok());
  std::ofstream(out / "records.jsonl", std::ios::trunc) << records->substr(0, records->size() - 40);
  std::filesystem::remove(out / "report.html");
  const Finished again = RunBakeoff({"report", out.string()});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  Result<std::string> page = ReadFile(out / "report.html");
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->find("1 of 12 lines of records.jsonl could not be read (the first is line 12)"), std::string::npos);
  EXPECT_NE(page->find("\"emulated\":true"), std::string::npos);

  const Finished not_a_result = RunBakeoff({"report", out.parent_path().string() + "/bakeoff_no_such_folder"});
  EXPECT_EQ(not_a_result.exit_code, 2) << not_a_result.output;
  std::filesystem::create_directories(out / "empty");
  const Finished empty = RunBakeoff({"report", (out / "empty").string()});
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("not a bakeoff results folder"), std::string::npos) << empty.output;
  std::filesystem::remove_all(out);
}

// An engine served on a Unix socket (vLLM's --uds) is measured as one on a port: the emulator
// listens there, bench reaches it by an http+unix:// URL, and the socket file goes with the server.
TEST(CliTest, BenchReachesAnEmulatorOnAUnixSocket) {
  const std::filesystem::path socket = bakeoff::testing::ScratchRoot() / "emulator.sock";
  emulate::EmulatorConfig config;
  config.unix_socket = socket.string();
  auto server = emulate::EmulatorServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.error().message;
  std::string url = "http+unix://";
  for (char c : socket.string()) url += c == '/' ? std::string("%2F") : std::string(1, c);
  const std::filesystem::path out = bakeoff::testing::ScratchRoot() / "unix_socket_bench";
  const Finished bench = RunBakeoff({"bench", "--url", url + "/v1", "--requests", "6", "--concurrency", "2",
                                     "--prompt-tokens", "32", "--output-tokens", "4", "--out", out.string()});
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const auto summary = nlohmann::json::parse(ReadFile(out / "summary.json").value());
  EXPECT_EQ(summary["steps"][0]["requests"]["outcomes"].value("ok", 0), 6) << summary["steps"][0].dump();
  EXPECT_TRUE(summary["target"]["emulated"].get<bool>());
  server.value()->Stop();
  EXPECT_FALSE(std::filesystem::exists(socket));

  // The command line: the URL it prints, and --unix-socket cannot be given with --port.
  ProcessOptions stop_soon;
  stop_soon.signal_after = 1s;
  stop_soon.signal = SIGTERM;
  const Finished emulate = RunBakeoff({"emulate", "--unix-socket", socket.string()}, stop_soon);
  EXPECT_NE(emulate.output.find("listening on " + url), std::string::npos) << emulate.output;
  EXPECT_FALSE(std::filesystem::exists(socket));
  const Finished both = RunBakeoff({"emulate", "--unix-socket", socket.string(), "--port", "0"});
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("--unix-socket"), std::string::npos) << both.output;
}

// SIGTERM (what timeout, systemd and Kubernetes send) stops a run exactly as Ctrl-C does.
class StopSignalTest : public ::testing::TestWithParam<int> {};

TEST_P(StopSignalTest, StoppedRunExits128PlusSignalWithAValidSummary) {
  const int signal_number = GetParam();
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = bakeoff::testing::ScratchRoot() /
                   ("bakeoff_signal_" + std::to_string(signal_number) + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  ProcessOptions stop_later;
  stop_later.signal_after = 1500ms;
  stop_later.signal = signal_number;
  const Finished f = RunBakeoff({"bench", "--url", "http://127.0.0.1:" + std::to_string(server.value()->port()),
                                 "--concurrency", "4", "--duration", "30s", "--output-tokens", "400",
                                 "--out", out.string()},
                                stop_later);
  EXPECT_EQ(f.exit_code, 128 + signal_number) << f.output;
  EXPECT_NE(f.output.find("EMULATED"), std::string::npos) << f.output;
  const auto summary = nlohmann::json::parse(ReadFile(out / "summary.json").value());
  EXPECT_TRUE(summary["interrupted"].get<bool>());
  EXPECT_TRUE(summary["target"]["emulated"].get<bool>());
  const auto outcomes = summary["steps"][0]["requests"]["outcomes"];
  EXPECT_GE(outcomes.value("cancelled", 0), 1) << outcomes.dump();
  // Every line of records.jsonl is complete JSON, and the in-flight requests are among them.
  std::ifstream records(out / "records.jsonl");
  int lines = 0;
  for (std::string line; std::getline(records, line); ++lines) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
  EXPECT_EQ(lines, summary["steps"][0]["requests"]["measured"].get<int>());
  std::filesystem::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(SigintAndSigterm, StopSignalTest, ::testing::Values(SIGINT, SIGTERM));

}  // namespace
}  // namespace bakeoff

namespace bakeoff {
namespace {

// simulate --keep: what records.jsonl keeps changes nothing in summary.json's figures (they come
// from every request), and the report is drawn either way.
TEST(CliTest, SimulateKeepsAllASampleOrNoRecordsWithTheSameFigures) {
  const std::filesystem::path base = bakeoff::testing::ScratchRoot() / ("bakeoff_keep_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  const auto simulate = [&](const std::string& keep) {
    const std::filesystem::path out = base / keep;
    const Finished f = RunBakeoff({"simulate", "--requests", "600", "--rate", "20", "--prompt-tokens", "64",
                                   "--output-tokens", "8", "--keep", keep, "--out", out.string()});
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(std::filesystem::exists(out / "report.html")) << keep;
    return out;
  };
  const auto lines = [](const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string line;
    std::size_t n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  };
  const auto figures = [](const std::filesystem::path& out) {
    nlohmann::json s = nlohmann::json::parse(std::ifstream(out / "summary.json"));
    return std::make_pair(s["steps"][0]["latency"].dump(), s["steps"][0]["latency_curves"].dump());
  };
  const std::filesystem::path all = simulate("all");
  const std::filesystem::path sample = simulate("sample:100");
  const std::filesystem::path bare = simulate("records");
  const std::filesystem::path none = simulate("summary");
  EXPECT_EQ(lines(all / "records.jsonl"), 600u);
  EXPECT_EQ(lines(sample / "records.jsonl"), 100u) << "every 6th of 600";
  EXPECT_EQ(lines(bare / "records.jsonl"), 600u);
  Result<std::string> bare_text = ReadFile(bare / "records.jsonl");
  ASSERT_TRUE(bare_text.ok());
  EXPECT_EQ(bare_text->find("token_event_ns\":[0"), std::string::npos) << "records without token instants";
  EXPECT_FALSE(std::filesystem::exists(none / "records.jsonl"));
  for (const auto& out : {sample, bare, none}) EXPECT_EQ(figures(out), figures(all)) << out;
  const nlohmann::json kept = nlohmann::json::parse(std::ifstream(sample / "summary.json"))["records_kept"];
  EXPECT_EQ(kept["steps"][0]["every"], 6);
  EXPECT_TRUE(nlohmann::json::parse(std::ifstream(none / "summary.json"))["records_file"].is_null());
  Result<std::string> page = ReadFile(none / "report.html");
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->find("this run kept no records"), std::string::npos);

  const Finished bad = RunBakeoff({"simulate", "--requests", "10", "--keep", "sample:0", "--out", (base / "bad").string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--keep"), std::string::npos) << bad.output;
  std::filesystem::remove_all(base);
}


// simulate applies bench's client deadlines: an overloaded engine's queued streams time out at
// --idle-timeout, as bench's would; a deadline that is no duration is refused naming its flag.
TEST(CliTest, SimulateGivesUpAtTheClientsDeadlines) {
  const std::filesystem::path out = bakeoff::testing::ScratchRoot() / ("bakeoff_deadline_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  // 8 requests 1 ms apart on small-cpu (4 slots, no chunked prefill): request 0's first token
  // comes at 0.58 s, requests 1-3 are prefilled together by 2.33 s, and 4-7 would wait for a slot
  // until the first four end at 25 s. With a 5 s idle deadline 0-3 are served and 4-7 time out.
  const std::vector<std::string> load = {"simulate", "--requests", "8", "--rate", "1000", "--prompt-tokens", "64",
                                         "--output-tokens", "300", "--ignore-eos", "--preset", "small-cpu"};
  std::vector<std::string> args = load;
  for (const char* a : {"--idle-timeout", "5s", "--out"}) args.push_back(a);
  args.push_back(out.string());
  const Finished f = RunBakeoff(args);
  EXPECT_EQ(f.exit_code, 0) << f.output;
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  const nlohmann::json outcomes = summary["steps"][0]["requests"]["outcomes"];
  EXPECT_EQ(outcomes.value("ok", 0), 4) << outcomes.dump();
  EXPECT_EQ(outcomes.value("timeout", 0), 4) << outcomes.dump();
  EXPECT_EQ(summary["config"]["idle_timeout"], "5s");

  args = load;
  for (const char* a : {"--idle-timeout", "soon", "--out"}) args.push_back(a);
  args.push_back((out / "bad").string());
  const Finished bad = RunBakeoff(args);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--idle-timeout"), std::string::npos) << bad.output;
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace bakeoff

namespace bakeoff {
namespace {

TEST(CliTest, K8sLintExitsByWhatItFound) {
  const std::string dir = std::string(BAKEOFF_SOURCE_DIR) + "/tests/testdata/k8s/";
  const Finished good = RunBakeoff({"k8s", "lint", dir + "good.yaml", dir + "lws.yaml"});
  EXPECT_EQ(good.exit_code, 1) << good.output << "lws.yaml's InferenceService has an unpinned model";
  const Finished clean = RunBakeoff({"k8s", "lint", dir + "good.yaml"});
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(clean.output.find("Service/vllm: skipped"), std::string::npos) << clean.output;
  const Finished bad = RunBakeoff({"k8s", "lint", dir + "bad.yaml"});
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find(dir + "bad.yaml:16: Deployment/sglang: image_latest: "), std::string::npos) << bad.output;
  const Finished missing = RunBakeoff({"k8s", "lint", dir + "no-such.yaml", dir + "bad.yaml"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("image_latest"), std::string::npos) << "the readable file is still linted";
  const Finished no_bundle = RunBakeoff({"k8s", "lint", dir + "good.yaml", "--bundle", "/nonexistent-bundle"});
  EXPECT_EQ(no_bundle.exit_code, 2) << no_bundle.output;
}

TEST(CliTest, K8sRenderRefusesWhatIsNoBundle) {
  const Finished none = RunBakeoff({"k8s", "render", "/nonexistent-bundle"});
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("/nonexistent-bundle: not a study bundle"), std::string::npos) << none.output;
}

TEST(CliTest, K8sLoadJobNeedsAnInstantAndAnUrl) {
  const Finished no_url = RunBakeoff({"k8s", "load-job", "--image", "x", "--shards", "2", "--start-at", "4000000000",
                                      "--", "--rate", "5"});
  EXPECT_EQ(no_url.exit_code, 2) << no_url.output;
  EXPECT_NE(no_url.output.find("need --url"), std::string::npos) << no_url.output;
  const Finished bad_instant = RunBakeoff({"k8s", "load-job", "--image", "x", "--shards", "2", "--start-at", "soon",
                                           "--", "--url", "http://e"});
  EXPECT_EQ(bad_instant.exit_code, 2) << bad_instant.output;
  EXPECT_NE(bad_instant.output.find("--start-at: 'soon'"), std::string::npos) << bad_instant.output;
  const Finished job = RunBakeoff({"k8s", "load-job", "--image", "x", "--shards", "3", "--start-at",
                                   "2026-12-01T22:00:00Z", "--", "--url", "http://e", "--rate", "5"});
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("completions: 3"), std::string::npos) << job.output;
}

}  // namespace
}  // namespace bakeoff
