// cli/stop_signals.h
//
// Owns: turning SIGINT and SIGTERM into a clean stop for commands that run a load (bench,
// simulate). SIGTERM is what `timeout`, systemd and Kubernetes send, so it is treated exactly like
// Ctrl-C: the first signal sets the stop flag (in-flight requests are cancelled and recorded,
// summary.json is written), a second one of either kind ends the process at once.
//
// Thread-safety: the flag is an atomic; install and remove from the main thread.
#pragma once

#include <atomic>

namespace bakeoff::cli {

class StopSignals {
 public:
  // Installs the handlers and clears the flag.
  StopSignals();
  // Restores the default actions.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  const std::atomic<bool>& flag() const;
  // Runs in the handler of the second signal, just before the process ends: must be
  // async-signal-safe (e.g. target::KillEveryLaunchedGroup).
  void OnImmediateExit(void (*hook)());
  // The exit code for a run the signal stopped: 128 + the signal's number (130 for SIGINT,
  // 143 for SIGTERM), the shell's convention.
  int ExitCode() const;
};

}  // namespace bakeoff::cli
