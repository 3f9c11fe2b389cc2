// The built `bakeoff` binary: flag errors name the flag and exit 2; an interrupted bench run
// exits 130 and still writes a valid summary of what it measured.
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

namespace bakeoff {
namespace {

using namespace std::chrono_literals;

struct Finished {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs the binary with `args`; sends SIGINT after `interrupt_after` when given. Bounded: the
// child is killed after 60 s.
Finished RunBakeoff(const std::vector<std::string>& args, std::optional<Nanos> interrupt_after = {}) {
  const auto output_path = std::filesystem::temp_directory_path() /
                           ("bakeoff_cli_" + std::to_string(::getpid()) + ".txt");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    std::string binary = BAKEOFF_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copies = args;
    for (auto& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  const MonoTime start = RealClock().Now();
  bool interrupted = false;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (interrupt_after && !interrupted && RealClock().Now() - start > *interrupt_after) {
      ::kill(pid, SIGINT);
      interrupted = true;
    }
    if (RealClock().Now() - start > 60s) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(10ms);
  }
  Finished finished;
  finished.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  finished.output = ReadFile(output_path).value();
  std::filesystem::remove(output_path);
  return finished;
}

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

TEST(CliTest, InterruptedRunExits130WithAValidSummary) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = std::filesystem::temp_directory_path() / ("bakeoff_sigint_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  const Finished f = RunBakeoff({"bench", "--url", "http://127.0.0.1:" + std::to_string(server.value()->port()),
                                 "--concurrency", "4", "--duration", "30s", "--output-tokens", "400",
                                 "--out", out.string()},
                                1500ms);
  EXPECT_EQ(f.exit_code, 130) << f.output;
  EXPECT_NE(f.output.find("EMULATED"), std::string::npos) << f.output;
  const auto summary = nlohmann::json::parse(ReadFile(out / "summary.json").value());
  EXPECT_TRUE(summary["interrupted"].get<bool>());
  EXPECT_TRUE(summary["target"]["emulated"].get<bool>());
  const auto outcomes = summary["steps"][0]["requests"]["outcomes"];
  EXPECT_GE(outcomes.value("cancelled", 0), 1) << outcomes.dump();
  // Every line of records.jsonl is complete JSON.
  std::ifstream records(out / "records.jsonl");
  int lines = 0;
  for (std::string line; std::getline(records, line); ++lines) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
  EXPECT_EQ(lines, summary["steps"][0]["requests"]["measured"].get<int>());
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace bakeoff
