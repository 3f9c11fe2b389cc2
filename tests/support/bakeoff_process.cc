// tests/support/bakeoff_process.cc: the bakeoff binary as a child process (contract in the header).
#include "support/bakeoff_process.h"
#include "support/scratch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bakeoff::testing {

Finished RunBakeoff(const std::vector<std::string>& args, const ProcessOptions& options) {
#ifndef BAKEOFF_BINARY
#error "tests that run the binary define BAKEOFF_BINARY"
#endif
  using Clock = std::chrono::steady_clock;
  // Atomic: tests run several children at once from their own threads (MergeTest's shards), and
  // two runs given one number would share an output file and mix their outputs.
  static std::atomic<int> run_number = 0;
  const auto output_path =
      bakeoff::testing::ScratchRoot() / ("bakeoff_process_" + std::to_string(::getpid()) +
                                                "_" + std::to_string(run_number++) + ".txt");
  // Everything the child needs is made before fork(): the test process has other threads (an
  // in-process server), and one of them may hold the allocator's lock at the fork, so the child
  // must not allocate (it would wait on that lock forever) and calls only async-signal-safe
  // functions until execve.
  std::string binary = BAKEOFF_BINARY;
  std::vector<std::string> copies = args;
  std::vector<char*> argv;
  argv.push_back(binary.data());
  for (auto& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const bool overridden = std::any_of(options.env.begin(), options.env.end(), [&](const auto& kv) {
      return entry.size() > kv.first.size() && entry.starts_with(kv.first) && entry[kv.first.size()] == '=';
    });
    if (!overridden) environment.emplace_back(entry);
  }
  for (const auto& [name, value] : options.env) environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::optional<rlimit> file_size_limit;
  if (options.file_size_limit_bytes) {
    file_size_limit = rlimit{static_cast<rlim_t>(*options.file_size_limit_bytes),
                             static_cast<rlim_t>(*options.file_size_limit_bytes)};
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    // Nothing else of the test process (an in-process server's listening socket, above all) may
    // live on in the child: a listener kept open there would queue connections nobody accepts.
    ::close_range(3, ~0U, 0);
    if (file_size_limit) {
      // Past the limit write(2) fails with EFBIG, as on a full disk, instead of killing the child.
      ::signal(SIGXFSZ, SIG_IGN);
      ::setrlimit(RLIMIT_FSIZE, &*file_size_limit);
    }
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  const auto start = Clock::now();
  bool signalled = false;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (options.signal_after && !signalled && Clock::now() - start > *options.signal_after) {
      ::kill(pid, options.signal);
      signalled = true;
    }
    if (Clock::now() - start > options.kill_after) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Finished finished;
  finished.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(output_path);
  std::ostringstream text;
  text << in.rdbuf();
  finished.output = text.str();
  std::filesystem::remove(output_path);
  return finished;
}

}  // namespace bakeoff::testing
