// Tests for target/launcher.h: a candidate started in its own process group, its logs stamped
// line by line, stopped with SIGTERM then SIGKILL, and nothing left behind.
#include "target/launcher.h"
#include "support/scratch.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bakeoff::target {
namespace {

using namespace std::chrono_literals;

std::filesystem::path LogDir() {
  const auto dir = bakeoff::testing::ScratchRoot() /
                   ("bakeoff_launcher_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  return dir;
}

LaunchSpec Shell(const std::string& script) {
  LaunchSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.log_dir = LogDir();
  return spec;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Waits up to 5 s for a line matching `pattern`.
std::optional<LogLine> AwaitLine(const LaunchedProcess& process, const std::string& pattern) {
  const std::regex re(pattern);
  for (int i = 0; i < 500; ++i) {
    if (auto line = process.FirstLineMatching(re)) return line;
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

TEST(SplitCommandLineTest, SplitsLikeAShell) {
  auto words = SplitCommandLine(R"(bakeoff emulate --model "my model" --x 'a "b"' c\ d)");
  ASSERT_TRUE(words.ok()) << words.error().message;
  EXPECT_EQ(*words, (std::vector<std::string>{"bakeoff", "emulate", "--model", "my model", "--x",
                                              "a \"b\"", "c d"}));
  EXPECT_FALSE(SplitCommandLine("a 'b").ok());
  EXPECT_FALSE(SplitCommandLine("   ").ok());
}

TEST(LauncherTest, CopiesBothStreamsIntoLogFilesAndStampsEachLine) {
  auto spec = Shell("echo out-line; echo err-line >&2; printf 'no newline'");
  auto process = LaunchedProcess::Start(spec);
  ASSERT_TRUE(process.ok()) << process.error().message;
  const auto status = (*process)->WaitFor(5s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->Clean()) << status->Describe();
  ASSERT_TRUE(AwaitLine(**process, "no newline"));
  const auto out = AwaitLine(**process, "^out-line$");
  const auto err = AwaitLine(**process, "^err-line$");
  ASSERT_TRUE(out && err);
  EXPECT_FALSE(out->stderr_stream);
  EXPECT_TRUE(err->stderr_stream);
  EXPECT_GE(out->at, (*process)->started_at());
  EXPECT_EQ(ReadAll((*process)->stdout_path()), "out-line\nno newline");
  EXPECT_EQ(ReadAll((*process)->stderr_path()), "err-line\n");
}

TEST(LauncherTest, EnvironmentAndWorkingDirectory) {
  auto spec = Shell("echo \"foo=$BAKEOFF_TEST_FOO\"; pwd");
  spec.env = {{"BAKEOFF_TEST_FOO", "bar"}};
  spec.working_dir = "/tmp";
  auto process = LaunchedProcess::Start(spec);
  ASSERT_TRUE(process.ok()) << process.error().message;
  (*process)->WaitFor(5s);
  EXPECT_TRUE(AwaitLine(**process, "^foo=bar$"));
  EXPECT_TRUE(AwaitLine(**process, "^/tmp$"));
}

TEST(LauncherTest, ExitCodeAndSignalAreRecorded) {
  auto exits = LaunchedProcess::Start(Shell("exit 3"));
  ASSERT_TRUE(exits.ok());
  auto status = (*exits)->WaitFor(5s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->exited);
  EXPECT_EQ(status->code, 3);
  EXPECT_EQ(status->Describe(), "exit code 3");

  auto aborts = LaunchedProcess::Start(Shell("kill -ABRT $$"));
  ASSERT_TRUE(aborts.ok());
  status = (*aborts)->WaitFor(5s);
  ASSERT_TRUE(status);
  EXPECT_FALSE(status->exited);
  EXPECT_EQ(status->signal, SIGABRT);
  EXPECT_EQ(status->Describe(), "killed by SIGABRT");
}

TEST(LauncherTest, StopSendsSigtermToTheGroupAndKillsAfterTheGrace) {
  auto polite = LaunchedProcess::Start(Shell("sleep 30"));
  ASSERT_TRUE(polite.ok());
  auto report = (*polite)->Stop(5s);
  EXPECT_FALSE(report.killed);
  EXPECT_EQ(report.status.signal, SIGTERM) << report.status.Describe();
  EXPECT_LT(report.took, 5s);

  // Ignores SIGTERM (the ignored disposition is inherited by its sleep too).
  auto stubborn = LaunchedProcess::Start(Shell("trap '' TERM; echo trapped; sleep 30"));
  ASSERT_TRUE(stubborn.ok());
  ASSERT_TRUE(AwaitLine(**stubborn, "trapped"));
  report = (*stubborn)->Stop(300ms);
  EXPECT_TRUE(report.killed);
  EXPECT_EQ(report.status.signal, SIGKILL) << report.status.Describe();
  EXPECT_GE(report.took, 300ms);
  EXPECT_LT(report.took, 5s);
}

TEST(LauncherTest, DestroyingItKillsTheWholeGroup) {
  pid_t grandchild = 0;
  {
    auto process = LaunchedProcess::Start(Shell("sleep 30 & echo \"child=$!\"; wait"));
    ASSERT_TRUE(process.ok());
    const auto line = AwaitLine(**process, "^child=[0-9]+$");
    ASSERT_TRUE(line);
    grandchild = std::stoi(line->text.substr(6));
    ASSERT_EQ(::kill(grandchild, 0), 0);
  }
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(grandchild, 0) != 0;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "pid " << grandchild << " survived";
}

TEST(LauncherTest, ACandidateDiesWithABakeoffThatDiesWithoutUnwinding) {
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {  // plays a bakeoff that crashes: no destructor runs
    auto process = LaunchedProcess::Start(Shell("sleep 30"));
    const pid_t pid = process.ok() ? (*process)->pid() : -1;
    (void)!::write(report[1], &pid, sizeof pid);
    ::_exit(0);
  }
  pid_t candidate = -1;
  ASSERT_EQ(::read(report[0], &candidate, sizeof candidate),
            static_cast<ssize_t>(sizeof candidate));
  ::close(report[0]);
  ::close(report[1]);
  ::waitpid(middle, nullptr, 0);
  ASSERT_GT(candidate, 0);
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    gone = ::kill(candidate, 0) != 0;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "pid " << candidate << " outlived the bakeoff that launched it";
}

TEST(LauncherTest, RefusesATakenPortAndAMissingProgram) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const std::uint16_t port = ntohs(address.sin_port);
  EXPECT_TRUE(PortAcceptsConnections("127.0.0.1", port));
  auto spec = Shell("true");
  spec.port = port;
  auto taken = LaunchedProcess::Start(spec);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(taken.error().message.find(std::to_string(port)), std::string::npos)
      << taken.error().message;
  ::close(fd);
  EXPECT_FALSE(PortAcceptsConnections("127.0.0.1", port));

  LaunchSpec missing;
  missing.argv = {"/nonexistent/engine-binary", "--serve"};
  missing.log_dir = LogDir();
  auto not_run = LaunchedProcess::Start(missing);
  ASSERT_FALSE(not_run.ok());
  EXPECT_EQ(not_run.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(not_run.error().message.find("/nonexistent/engine-binary"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::target
