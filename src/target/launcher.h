// target/launcher.h
//
// Owns: starting a candidate engine as a child process and stopping it: argv, extra environment
// and working directory; its own process group (so a signal reaches the engine's workers too);
// stdout and stderr each copied line by line into a log file in the output folder, every line
// stamped with the instant it arrived (so a probe can time "weights loaded" from the log); a
// refusal to start when the port it will listen on is already taken; SIGTERM, then SIGKILL after a
// grace period; the exit code or the signal that ended it. A process that is still running when
// its LaunchedProcess is destroyed is killed with its group, so nothing bakeoff started outlives
// it. Does not own: when the engine counts as ready (qualify/), what a log line means (the probes).
//
// Thread-safety: a LaunchedProcess is used from one thread; its log readers run on a private
// thread and their lines are read under a lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "core/clock.h"
#include "core/result.h"

namespace bakeoff::target {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // set on top of bakeoff's environment
  std::filesystem::path working_dir;                     // empty: bakeoff's own
  std::filesystem::path log_dir;   // <log_dir>/<name>.stdout.log and .stderr.log
  std::string name = "candidate";  // names the log files; several launches append to them
  std::string host = "127.0.0.1";  // where the candidate will listen
  std::uint16_t port = 0;          // 0: no port check
};

// Splits a command line the way a POSIX shell splits words: blanks separate, '...' and "..."
// quote, backslash escapes outside single quotes. No expansion. kInvalidInput for an unclosed quote
// or an empty command.
Result<std::vector<std::string>> SplitCommandLine(std::string_view command);

struct ExitStatus {
  bool exited = false;  // true: exit code; false: killed by `signal`
  int code = 0;
  int signal = 0;
  bool Clean() const { return exited && code == 0; }
  std::string Describe() const;  // "exit code 0", "killed by SIGABRT"
};

// One line the candidate wrote, with the instant bakeoff read it.
struct LogLine {
  MonoTime at;
  bool stderr_stream = false;
  std::string text;  // without the newline
};

// True when a TCP connection to host:port is accepted right now (a blocking connect, bounded by
// `timeout`). Loopback use only.
bool PortAcceptsConnections(const std::string& host, std::uint16_t port,
                            Nanos timeout = std::chrono::milliseconds(200));

// Sends SIGKILL to the process group of every LaunchedProcess still alive. Async-signal-safe: for
// a handler that ends bakeoff at once (a second Ctrl-C), so no candidate outlives it.
void KillEveryLaunchedGroup();

class LaunchedProcess {
 public:
  // Checks the port is free (kUnavailable naming it when something already listens there), opens
  // the log files (kIo), and starts the process (kInvalidInput when argv[0] cannot be executed).
  static Result<std::unique_ptr<LaunchedProcess>> Start(const LaunchSpec& spec);

  // Kills the process group (SIGKILL) if the process still runs, and reaps it.
  ~LaunchedProcess();
  LaunchedProcess(const LaunchedProcess&) = delete;
  LaunchedProcess& operator=(const LaunchedProcess&) = delete;

  pid_t pid() const { return pid_; }
  MonoTime started_at() const { return started_at_; }
  const std::filesystem::path& stdout_path() const { return stdout_path_; }
  const std::filesystem::path& stderr_path() const { return stderr_path_; }

  // Whether it still runs (reaps it without blocking when it has ended).
  bool Running();
  // Its end, once it has ended.
  const std::optional<ExitStatus>& exit_status() const { return exit_status_; }
  // Waits up to `timeout` for it to end.
  std::optional<ExitStatus> WaitFor(Nanos timeout);
  // Sends `signal` to its whole process group. No-op once it has ended.
  void Signal(int signal);

  struct StopReport {
    ExitStatus status;
    Nanos took{0};        // from SIGTERM to the end
    bool killed = false;  // the grace period ran out and SIGKILL ended it
  };
  // SIGTERM to the group, up to `grace` for it to end, then SIGKILL. Returns at once (took 0)
  // when it had already ended.
  StopReport Stop(Nanos grace);

  // Lines read so far from both streams, in arrival order (the first kMaxKeptLines of them; the
  // log files have all). The earliest line matching `pattern` after `since`, if any.
  std::vector<LogLine> Lines() const;
  std::optional<LogLine> FirstLineMatching(const std::regex& pattern, MonoTime since = {}) const;
  static constexpr std::size_t kMaxKeptLines = 20000;

 private:
  struct Logs;
  LaunchedProcess() = default;
  void Reaped(int wait_status);

  pid_t pid_ = -1;
  MonoTime started_at_{};
  std::filesystem::path stdout_path_;
  std::filesystem::path stderr_path_;
  std::optional<ExitStatus> exit_status_;
  std::unique_ptr<Logs> logs_;
};

}  // namespace bakeoff::target
