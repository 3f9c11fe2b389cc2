// tests/support/bakeoff_process.h
//
// Owns: running the built `bakeoff` binary from a test as a child process, with its stdout and
// stderr captured together, an optional signal sent after a delay, extra environment, and an
// optional file-size limit (a stand-in for a full disk: writes past it fail with EFBIG). Bounded:
// the child is killed after `kill_after`.
#pragma once

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bakeoff::testing {

struct ProcessOptions {
  std::optional<std::chrono::nanoseconds> signal_after;  // send `signal` this long after the start
  int signal = SIGINT;
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  std::optional<long> file_size_limit_bytes;             // RLIMIT_FSIZE in the child
  std::chrono::nanoseconds kill_after = std::chrono::seconds(60);
};

struct Finished {
  int exit_code = -1;  // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr together
};

// Runs BAKEOFF_BINARY (a compile definition of the test) with `args`.
Finished RunBakeoff(const std::vector<std::string>& args, const ProcessOptions& options = {});

}  // namespace bakeoff::testing
