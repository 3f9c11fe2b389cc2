// Tests for `bakeoff emulate` (cli/emulate_command.cc) as a black box: the built binary is run
// on an ephemeral loopback port. Skipped when the binary has not been built. Every wait is
// bounded; a child that outlives its test is killed.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/bakeoff_process.h"
#include "test_http_client.h"
#include "support/scratch.h"

extern char** environ;

namespace bakeoff::emulate {
namespace {

using nlohmann::json;

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;
};

// Starts the binary with `args` (argv[0] included) and `extra_env` ("NAME=value") added to the
// environment; its stdout is a pipe.
Child Spawn(std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (auto& entry : extra_env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  Child child;
  if (posix_spawn(&child.pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) {
    child.pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  child.stdout_fd = pipe_fds[0];
  return child;
}

// One line of the child's stdout without its newline; empty on EOF or after `timeout_ms`.
std::string ReadLine(int fd, int timeout_ms = 10000) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
    char c;
    if (::read(fd, &c, 1) != 1) return {};
    if (c == '\n') return line;
    line += c;
  }
}

// Reads lines until one starts with `prefix`; returns it, or empty.
std::string ReadLineStartingWith(int fd, const std::string& prefix) {
  for (int i = 0; i < 50; ++i) {
    std::string line = ReadLine(fd);
    if (line.empty()) return {};
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return {};
}

// Waits up to ~10 s for the child; returns its exit code, or -1 (killed, or signalled).
int Wait(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// Waits up to ~10 s for the child; returns its raw wait status, or -1 (still running: killed).
int WaitStatus(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// The port from the listening line, or 0.
std::uint16_t PortOf(const std::string& line) {
  std::smatch m;
  static const std::regex re(R"(^bakeoff emulate \(emulated engine[^)]*\) listening on http://127\.0\.0\.1:([0-9]+)$)");
  if (!std::regex_match(line, m, re)) return 0;
  return static_cast<std::uint16_t>(std::stoi(m[1]));
}

// 1 ms engine steps: a stream of N tokens lasts at least N ms.
const std::vector<std::string> kFastEngine = {"--base-ms", "1", "--prefill-ms-per-token", "0",
                                              "--decode-ms-per-seq", "0", "--kv-ms-per-1k-tokens", "0"};

std::string StreamRequest(int max_tokens) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi there"}}}},
               {"max_tokens", max_tokens},
               {"stream", true}};
  return testing::FormatRequest("POST", "/v1/chat/completions", body.dump());
}

class EmulateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(BAKEOFF_BINARY)) GTEST_SKIP() << BAKEOFF_BINARY << " not built";
  }
  void TearDown() override {
    if (child_.pid > 0) {
      ::kill(child_.pid, SIGKILL);
      ::waitpid(child_.pid, nullptr, 0);
    }
    if (child_.stdout_fd >= 0) ::close(child_.stdout_fd);
  }

  // Starts `bakeoff emulate --port 0 <flags>` and returns the port from its first line (0 when
  // the line did not come).
  std::uint16_t StartEmulator(std::vector<std::string> flags, std::vector<std::string> env = {}) {
    std::vector<std::string> args = {BAKEOFF_BINARY, "emulate", "--port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    child_ = Spawn(args, std::move(env));
    if (child_.pid <= 0) return 0;
    first_line_ = ReadLine(child_.stdout_fd);
    return PortOf(first_line_);
  }

  int WaitExit() {
    const int code = Wait(child_.pid);
    child_.pid = -1;
    return code;
  }

  Child child_;
  std::string first_line_;
};

TEST_F(EmulateCommandTest, PrintsTheRealPortServesAndExitsZeroOnSigterm) {
  const std::uint16_t port = StartEmulator({"--model", "m1"});
  ASSERT_GT(port, 0) << first_line_;
  EXPECT_EQ(first_line_.rfind("bakeoff emulate (emulated engine) listening on http://127.0.0.1:", 0), 0u);
  EXPECT_EQ(ReadLine(child_.stdout_fd).rfind("bakeoff emulate: ready t=", 0), 0u);
  testing::HttpResponse models = testing::Fetch(port, "GET", "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_NE(models.body.find("\"m1\""), std::string::npos);
  ::kill(child_.pid, SIGTERM);
  EXPECT_EQ(ReadLine(child_.stdout_fd), "bakeoff emulate: sigterm mode=drain timeout=30.000");
  EXPECT_EQ(ReadLine(child_.stdout_fd), "bakeoff emulate: stopped mode=drain finished=0 cut=0");
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, InvalidValuesExitTwo) {
  for (std::vector<std::string> flags : std::vector<std::vector<std::string>>{
           {"--max-num-seqs", "0"},
           {"--base-ms=-1"},
           {"--load-delay=-2"},
           {"--startup-warmup=-1"},
           {"--port", "99999"},
           {"--on-sigterm", "later"},
           {"--tokens-per-event", "0"},
           {"--write-threads=-1"},
           {"--write-threads", "65"},
           {"--fault-error-rate", "1.5"},
           {"--max-waiting=-1"},
           {"--not-ready-status", "99"},
           {"--fault-health-busy-delay-ms=-1"},
           {"--fault-slow-after=-1"},
           {"--fault-slow-factor", "0"},
           {"--fault-slow-factor", "nan"},
           {"--fault-health-late-ms=-5"},
           {"--answers", "/nonexistent/answers.jsonl"},
           {"--max-batched-tokens", "10", "--max-num-seqs", "20"},
           {"--preset", "no-such-preset-anywhere"}}) {
    std::vector<std::string> args = {BAKEOFF_BINARY, "emulate", "--port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    Child child = Spawn(args, {"BAKEOFF_PRESETS_DIR=" + bakeoff::testing::ScratchRoot().string()});
    ASSERT_GT(child.pid, 0);
    EXPECT_EQ(Wait(child.pid), 2) << flags[0];
    ::close(child.stdout_fd);
  }
}

TEST_F(EmulateCommandTest, StartupStagesAreLoggedInOrder) {
  const std::uint16_t port = StartEmulator(
      {"--startup-download", "0.1", "--load-delay", "0.1", "--startup-compile", "0.1"});
  ASSERT_GT(port, 0) << first_line_;
  const std::regex stage(R"(bakeoff emulate: stage=(download|load|compile|warmup) state=start t=[0-9]+\.[0-9]{3})");
  std::vector<std::string> lines;
  for (int i = 0; i < 4; ++i) lines.push_back(ReadLine(child_.stdout_fd));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("bakeoff emulate: stage=download state=start t=", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("bakeoff emulate: stage=load state=start t=", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("bakeoff emulate: stage=compile state=start t=", 0), 0u) << lines[2];
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::regex_match(lines[i], stage)) << lines[i];
  EXPECT_TRUE(std::regex_match(lines[3], std::regex(R"(bakeoff emulate: ready t=[0-9]+\.[0-9]{3})")))
      << lines[3];
  EXPECT_GE(std::stod(lines[3].substr(lines[3].find("t=") + 2)), 0.3);
  EXPECT_EQ(testing::Fetch(port, "GET", "/health").status, 200);  // ready once "ready" is logged
  ::kill(child_.pid, SIGINT);
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, HealthIs503AndMetricsServedWhileLoading) {
  const std::uint16_t port = StartEmulator({"--startup-load", "60"});
  ASSERT_GT(port, 0) << first_line_;
  EXPECT_EQ(ReadLine(child_.stdout_fd).rfind("bakeoff emulate: stage=load state=start t=0.", 0), 0u);
  EXPECT_EQ(testing::Fetch(port, "GET", "/health").status, 503);
  testing::HttpResponse metrics = testing::Fetch(port, "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\nbakeoff_emulated 1\n"), std::string::npos);
  ::kill(child_.pid, SIGINT);
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, SigtermDrainLetsTheStreamFinish) {
  const std::uint16_t port = StartEmulator(kFastEngine);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(1500)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  got += stream.ReadToEnd();
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(ReadLineStartingWith(child_.stdout_fd, "bakeoff emulate: stopped"),
            "bakeoff emulate: stopped mode=drain finished=1 cut=0");
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, SigtermDrainTimeoutCutsTheStream) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--drain-timeout", "0.2"});
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(30000)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  bool closed = false;
  got += stream.ReadToEnd(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_EQ(ReadLineStartingWith(child_.stdout_fd, "bakeoff emulate: stopped"),
            "bakeoff emulate: stopped mode=drain finished=0 cut=1");
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, SigtermAbortEndsStreamsWithAnError) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--on-sigterm", "abort"});
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(30000)));
  std::string head;
  ASSERT_TRUE(stream.ReadUntil(head, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  std::string got = head + stream.ReadToEnd();
  EXPECT_NE(got.find(R"(data: {"error":)"), std::string::npos);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_EQ(ReadLineStartingWith(child_.stdout_fd, "bakeoff emulate: stopped"),
            "bakeoff emulate: stopped mode=abort finished=0 cut=1");
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, SigtermExitIsUnclean) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--on-sigterm", "exit"});
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(30000)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  EXPECT_EQ(WaitExit(), 1);
  got += stream.ReadToEnd();
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
}

TEST_F(EmulateCommandTest, SigintStopsAtOnceWhateverTheSigtermMode) {
  const std::uint16_t port = StartEmulator(kFastEngine);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(30000)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGINT);
  EXPECT_EQ(WaitExit(), 0);
  got += stream.ReadToEnd();
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
}

TEST_F(EmulateCommandTest, CrashAfterNRequestsExitsAbruptly) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--fault-crash-after", "2"});
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  const std::string body = R"({"prompt":"a b","max_tokens":2})";
  EXPECT_EQ(testing::Fetch(port, "POST", "/v1/completions", body).status, 200);
  EXPECT_EQ(testing::Fetch(port, "POST", "/v1/completions", body).status, 0);  // never answered
  EXPECT_EQ(WaitExit(), 1);
}

TEST_F(EmulateCommandTest, PresetGivesTheEngineAndTypedFlagsOverrideIt) {
  const std::filesystem::path dir =
      bakeoff::testing::ScratchRoot() / ("bakeoff-presets-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tiny-test.yaml") << "name: tiny-test\nmax_num_seqs: 4\nmax_model_len: 2048\n";
  const std::string env = "BAKEOFF_PRESETS_DIR=" + dir.string();
  auto max_model_len = [](std::uint16_t port) {
    testing::HttpResponse models = testing::Fetch(port, "GET", "/v1/models");
    json body = json::parse(models.body, nullptr, false);
    return body.is_object() ? body["data"][0]["max_model_len"].get<int>() : -1;
  };
  {
    const std::uint16_t port = StartEmulator({"--preset", "tiny-test"}, {env});
    ASSERT_GT(port, 0) << first_line_;
    EXPECT_NE(first_line_.find("(emulated engine, preset tiny-test) listening on"), std::string::npos)
        << first_line_;
    EXPECT_EQ(max_model_len(port), 2048);
    ::kill(child_.pid, SIGINT);
    EXPECT_EQ(WaitExit(), 0);
    ::close(child_.stdout_fd);
    child_.stdout_fd = -1;
  }
  {
    const std::uint16_t port = StartEmulator(
        {"--preset", (dir / "tiny-test.yaml").string(), "--max-model-len", "1500"});
    ASSERT_GT(port, 0) << first_line_;
    EXPECT_EQ(max_model_len(port), 1500);
    ::kill(child_.pid, SIGINT);
    EXPECT_EQ(WaitExit(), 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_F(EmulateCommandTest, SigtermCutClosesStreamsSilently) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--on-sigterm", "cut"});
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(30000)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  bool closed = false;
  got += stream.ReadToEnd(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_EQ(got.find(R"("error")"), std::string::npos);
  EXPECT_EQ(got.find("\r\n0\r\n\r\n"), std::string::npos);  // not even the last chunk
  EXPECT_EQ(ReadLineStartingWith(child_.stdout_fd, "bakeoff emulate: sigterm"),
            "bakeoff emulate: sigterm mode=cut");
  EXPECT_EQ(WaitExit(), 0);
}

TEST_F(EmulateCommandTest, SigtermCrashDiesBySigabrt) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--on-sigterm", "crash"});
  rlimit no_core{0, 0};  // the child inherits it: no core file for the expected SIGABRT
  ::setrlimit(RLIMIT_CORE, &no_core);
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(30000)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  const int status = WaitStatus(child_.pid);
  child_.pid = -1;
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  got += stream.ReadToEnd();
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
}

TEST_F(EmulateCommandTest, SigtermIgnoredOnlySigkillStopsIt) {
  std::vector<std::string> flags = kFastEngine;
  flags.insert(flags.end(), {"--on-sigterm", "ignore"});
  const std::uint16_t port = StartEmulator(flags);
  ASSERT_GT(port, 0) << first_line_;
  testing::TestConnection stream(port);
  ASSERT_TRUE(stream.Send(StreamRequest(400)));
  std::string got;
  ASSERT_TRUE(stream.ReadUntil(got, R"("content":")"));
  ::kill(child_.pid, SIGTERM);
  EXPECT_EQ(ReadLineStartingWith(child_.stdout_fd, "bakeoff emulate: sigterm"),
            "bakeoff emulate: sigterm mode=ignore (only SIGKILL or SIGINT stops it)");
  got += stream.ReadToEnd();
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos);  // the stream went on to its end
  ::kill(child_.pid, SIGTERM);
  ::usleep(200000);
  EXPECT_EQ(testing::Fetch(port, "GET", "/health").status, 200);  // still serving
  ::kill(child_.pid, SIGKILL);
  const int status = WaitStatus(child_.pid);
  child_.pid = -1;
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_F(EmulateCommandTest, ProbeKnobsReachTheServer) {
  const std::filesystem::path answers =
      bakeoff::testing::ScratchRoot() /
      ("bakeoff-answers-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(answers) << R"({"prompt":"2+2=","answer":"4"})"
                         << "\n";
  const std::uint16_t port =
      StartEmulator({"--no-metrics", "--not-ready-status", "200", "--startup-load", "2",
                     "--answers", answers.string(), "--fault-bad-input-500"});
  ASSERT_GT(port, 0) << first_line_;
  testing::HttpResponse loading = testing::Fetch(port, "GET", "/health");
  EXPECT_EQ(loading.status, 200);
  EXPECT_EQ(loading.body, R"({"status":"loading"})");
  EXPECT_EQ(testing::Fetch(port, "GET", "/metrics").status, 404);
  EXPECT_EQ(ReadLineStartingWith(child_.stdout_fd, "bakeoff emulate: ready")
                .rfind("bakeoff emulate: ready", 0),
            0u);
  testing::HttpResponse answered =
      testing::Fetch(port, "POST", "/v1/completions", R"({"prompt":"2+2=","max_tokens":5})");
  EXPECT_EQ(json::parse(answered.body)["choices"][0]["text"], "4");
  EXPECT_EQ(testing::Fetch(port, "POST", "/v1/completions", "{").status, 500);
  ::kill(child_.pid, SIGINT);
  EXPECT_EQ(WaitExit(), 0);
  std::filesystem::remove(answers);
}

TEST_F(EmulateCommandTest, BadAnswersFileNamesTheLineAndExitsTwo) {
  const std::filesystem::path answers =
      bakeoff::testing::ScratchRoot() /
      ("bakeoff-bad-answers-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(answers) << R"({"prompt":"a","answer":"b"})"
                         << "\n"
                         << R"({"prompt":"a","answer":3})"
                         << "\n";
  ::bakeoff::testing::ProcessOptions options;
  options.kill_after = std::chrono::seconds(10);
  ::bakeoff::testing::Finished run = ::bakeoff::testing::RunBakeoff(
      {"emulate", "--port", "0", "--answers", answers.string()}, options);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find(answers.string() + ":2: field \"answer\" must be a string"),
            std::string::npos)
      << run.output;
  std::filesystem::remove(answers);
}

}  // namespace
}  // namespace bakeoff::emulate
