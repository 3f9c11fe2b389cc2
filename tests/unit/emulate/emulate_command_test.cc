// Tests for `bakeoff emulate` (cli/emulate_command.cc) as a black box: the built binary is run
// on an ephemeral loopback port. Skipped when the binary has not been built.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "test_http_client.h"

extern char** environ;

namespace bakeoff::emulate {
namespace {

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;
};

Child Spawn(std::vector<std::string> args) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  Child child;
  if (posix_spawn(&child.pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) child.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  child.stdout_fd = pipe_fds[0];
  return child;
}

// Waits up to ~10 s for the child; returns its exit code, or -1.
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

class EmulateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(BAKEOFF_BINARY)) GTEST_SKIP() << BAKEOFF_BINARY << " not built";
  }
};

TEST_F(EmulateCommandTest, PrintsTheRealPortServesAndExitsZeroOnSigterm) {
  Child child = Spawn({BAKEOFF_BINARY, "emulate", "--port", "0", "--model", "m1"});
  ASSERT_GT(child.pid, 0);
  std::string line;
  char c;
  while (line.find('\n') == std::string::npos && ::read(child.stdout_fd, &c, 1) == 1) line += c;
  const std::string prefix = "bakeoff emulate (emulated engine) listening on http://127.0.0.1:";
  ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
  const int port = std::stoi(line.substr(prefix.size()));
  ASSERT_GT(port, 0);
  testing::HttpResponse models = testing::Fetch(static_cast<std::uint16_t>(port), "GET", "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_NE(models.body.find("\"m1\""), std::string::npos);
  ::kill(child.pid, SIGTERM);
  EXPECT_EQ(Wait(child.pid), 0);
  ::close(child.stdout_fd);
}

TEST_F(EmulateCommandTest, InvalidValuesExitTwo) {
  for (std::vector<std::string> flags : std::vector<std::vector<std::string>>{
           {"--max-num-seqs", "0"}, {"--base-ms=-1"}, {"--load-delay=-2"}, {"--port", "99999"}}) {
    std::vector<std::string> args = {BAKEOFF_BINARY, "emulate", "--port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    Child child = Spawn(args);
    ASSERT_GT(child.pid, 0);
    EXPECT_EQ(Wait(child.pid), 2) << flags[0];
    ::close(child.stdout_fd);
  }
}

}  // namespace
}  // namespace bakeoff::emulate
