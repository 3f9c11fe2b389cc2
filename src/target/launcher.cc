// target/launcher.cc: fork/exec into a new process group, log copying, stop and reap.
#include "target/launcher.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bakeoff::target {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string SignalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

// Process groups of the LaunchedProcesses alive, for KillEveryLaunchedGroup (0 = free slot).
constexpr std::size_t kMaxTrackedGroups = 64;
std::atomic<pid_t> g_groups[kMaxTrackedGroups];

void TrackGroup(pid_t group) {
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t free_slot = 0;
    if (slot.compare_exchange_strong(free_slot, group)) return;
  }
}

void UntrackGroup(pid_t group) {
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t expected = group;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

}  // namespace

void KillEveryLaunchedGroup() {
  for (std::atomic<pid_t>& slot : g_groups) {
    const pid_t group = slot.load();
    if (group > 0) ::kill(-group, SIGKILL);
  }
}

Result<std::vector<std::string>> SplitCommandLine(std::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote == '\'') {
      if (c == '\'')
        quote = 0;
      else
        word += c;
    } else if (c == '\\' && i + 1 < command.size() &&
               (quote == 0 || command[i + 1] == '"' || command[i + 1] == '\\')) {
      word += command[++i];
      in_word = true;
    } else if (quote == '"') {
      if (c == '"')
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0)
    return Error{ErrorCode::kInvalidInput, fmt::format("command has an unclosed {} quote", quote)};
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return Error{ErrorCode::kInvalidInput, "empty command"};
  return words;
}

std::string ExitStatus::Describe() const {
  return exited ? fmt::format("exit code {}", code)
                : fmt::format("killed by {}", SignalName(signal));
}

bool PortAcceptsConnections(const std::string& host, std::uint16_t port, Nanos timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ms =
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
      if (::poll(&p, 1, ms) == 1) {
        int error = 0;
        socklen_t length = sizeof error;
        accepted = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return accepted;
}

// Copies the child's stdout and stderr into their log files on a private thread, line by line,
// stamping each line; keeps the first kMaxKeptLines in memory for the probes.
struct LaunchedProcess::Logs {
  int fds[2] = {-1, -1};    // read ends: stdout, stderr
  int files[2] = {-1, -1};  // log files, append mode
  std::string partial[2];
  std::atomic<bool> stop{false};
  mutable std::mutex mutex;
  std::vector<LogLine> lines;  // guarded by mutex
  std::thread thread;

  ~Logs() {
    stop = true;
    if (thread.joinable()) thread.join();
    for (int& fd : fds) CloseFd(fd);
    for (int& fd : files) CloseFd(fd);
  }

  void Keep(int stream, std::string text) {
    std::lock_guard lock(mutex);
    if (lines.size() < kMaxKeptLines)
      lines.push_back({std::chrono::steady_clock::now(), stream == 1, std::move(text)});
  }

  void Consume(int stream, const char* data, std::size_t size) {
    // The log file gets the bytes as they came; a failed write loses log text, never the run.
    for (std::size_t written = 0; written < size;) {
      const ssize_t n = ::write(files[stream], data + written, size - written);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
    }
    std::string& rest = partial[stream];
    rest.append(data, size);
    std::size_t start = 0;
    for (std::size_t newline; (newline = rest.find('\n', start)) != std::string::npos;
         start = newline + 1) {
      std::string line = rest.substr(start, newline - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      Keep(stream, std::move(line));
    }
    rest.erase(0, start);
    if (rest.size() > 64 * 1024) {  // a line that never ends is kept in pieces
      Keep(stream, std::move(rest));
      rest.clear();
    }
  }

  void Run() {
    char buffer[16 * 1024];
    while (!stop && (fds[0] >= 0 || fds[1] >= 0)) {
      pollfd polled[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      if (::poll(polled, 2, 100) <= 0) continue;
      for (int stream = 0; stream < 2; ++stream) {
        if (fds[stream] < 0 || polled[stream].revents == 0) continue;
        const ssize_t n = ::read(fds[stream], buffer, sizeof buffer);
        if (n > 0) {
          Consume(stream, buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          if (!partial[stream].empty()) Keep(stream, std::move(partial[stream]));
          partial[stream].clear();
          CloseFd(fds[stream]);
        }
      }
    }
  }
};

Result<std::unique_ptr<LaunchedProcess>> LaunchedProcess::Start(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Error{ErrorCode::kInvalidInput, "no command to launch"};
  if (spec.port != 0 && PortAcceptsConnections(spec.host, spec.port)) {
    return Error{
        ErrorCode::kUnavailable,
        fmt::format(
            "port {} on {} is already taken: something listens there; stop it or pass another "
            "port",
            spec.port, spec.host)};
  }
  std::unique_ptr<LaunchedProcess> process(new LaunchedProcess());
  process->logs_ = std::make_unique<Logs>();
  Logs& logs = *process->logs_;
  std::error_code ec;
  std::filesystem::create_directories(spec.log_dir, ec);
  process->stdout_path_ = spec.log_dir / (spec.name + ".stdout.log");
  process->stderr_path_ = spec.log_dir / (spec.name + ".stderr.log");
  const std::filesystem::path* paths[2] = {&process->stdout_path_, &process->stderr_path_};
  for (int stream = 0; stream < 2; ++stream) {
    logs.files[stream] =
        ::open(paths[stream]->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logs.files[stream] < 0) {
      return Error{ErrorCode::kIo, fmt::format("{}: cannot open: {}", paths[stream]->string(),
                                               std::strerror(errno))};
    }
  }
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return Error{ErrorCode::kIo, fmt::format("cannot create pipes: {}", std::strerror(errno))};
  }
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& word : spec.argv) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [key, value] : spec.env) overridden = overridden || key == name;
    if (!overridden) env_strings.emplace_back(entry);
  }
  for (const auto& [key, value] : spec.env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const std::string working_dir = spec.working_dir.string();

  process->started_at_ = std::chrono::steady_clock::now();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Error{ErrorCode::kIo, fmt::format("fork failed: {}", std::strerror(errno))};
  if (pid == 0) {
    ::setpgid(0, 0);
    // A safety net for a bakeoff that dies without unwinding (a crash, SIGKILL): the candidate
    // gets SIGKILL too. Launches run on the main thread, whose end is the process's end.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // bakeoff already died before prctl
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    const int null_in = ::open("/dev/null", O_RDONLY);
    if (null_in >= 0) ::dup2(null_in, STDIN_FILENO);
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // keeps exec_pipe[1] until exec succeeds
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (!working_dir.empty() && ::chdir(working_dir.c_str()) != 0) {
      const int error = errno;
      (void)!::write(exec_pipe[1], &error, sizeof error);
      ::_exit(127);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!::write(exec_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so a signal sent right after Start reaches the group
  process->pid_ = pid;
  TrackGroup(pid);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int exec_error = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  logs.fds[0] = out_pipe[0];
  logs.fds[1] = err_pipe[0];
  logs.thread = std::thread([&logs] { logs.Run(); });
  if (n == static_cast<ssize_t>(sizeof exec_error)) {
    process->WaitFor(std::chrono::seconds(1));
    return Error{
        ErrorCode::kInvalidInput,
        fmt::format("cannot run `{}`{}: {}", spec.argv[0],
                    working_dir.empty() ? "" : " in " + working_dir, std::strerror(exec_error))};
  }
  return process;
}

LaunchedProcess::~LaunchedProcess() {
  if (pid_ > 0 && !exit_status_) {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    Reaped(status);
  }
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);  // whatever of its group is left
    UntrackGroup(pid_);
  }
}

void LaunchedProcess::Reaped(int wait_status) {
  ExitStatus status;
  status.exited = WIFEXITED(wait_status);
  status.code = status.exited ? WEXITSTATUS(wait_status) : 0;
  status.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  exit_status_ = status;
}

bool LaunchedProcess::Running() {
  if (exit_status_) return false;
  int status = 0;
  const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
  if (reaped == pid_) Reaped(status);
  return !exit_status_;
}

std::optional<ExitStatus> LaunchedProcess::WaitFor(Nanos timeout) {
  const MonoTime until = std::chrono::steady_clock::now() + timeout;
  while (Running() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_status_;
}

void LaunchedProcess::Signal(int signal) {
  if (Running()) ::kill(-pid_, signal);
}

LaunchedProcess::StopReport LaunchedProcess::Stop(Nanos grace) {
  StopReport report;
  if (!Running()) {
    report.status = *exit_status_;
    return report;
  }
  const MonoTime start = std::chrono::steady_clock::now();
  Signal(SIGTERM);
  if (!WaitFor(grace)) {
    Signal(SIGKILL);
    report.killed = true;
    WaitFor(std::chrono::seconds(10));
  }
  report.took = std::chrono::steady_clock::now() - start;
  if (exit_status_) report.status = *exit_status_;
  return report;
}

std::vector<LogLine> LaunchedProcess::Lines() const {
  std::lock_guard lock(logs_->mutex);
  return logs_->lines;
}

std::optional<LogLine> LaunchedProcess::FirstLineMatching(const std::regex& pattern,
                                                          MonoTime since) const {
  std::lock_guard lock(logs_->mutex);
  for (const LogLine& line : logs_->lines) {
    if (line.at >= since && std::regex_search(line.text, pattern)) return line;
  }
  return std::nullopt;
}

}  // namespace bakeoff::target
