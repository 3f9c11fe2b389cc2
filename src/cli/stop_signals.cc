// cli/stop_signals.cc: SIGINT and SIGTERM as a clean stop (contract in stop_signals.h).
#include "cli/stop_signals.h"

#include <csignal>

namespace bakeoff::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<void (*)()> g_immediate_exit_hook{nullptr};

extern "C" void OnStopSignal(int signal_number) {
  // The signal is recorded before the flag is raised, so whoever sees the flag sees the signal.
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, signal_number)) {
    // The second signal: the user wants out now.
    if (void (*hook)() = g_immediate_exit_hook.load()) hook();
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  g_stop.store(true);
}

}  // namespace

StopSignals::StopSignals() {
  g_stop.store(false);
  g_signal.store(0);
  g_immediate_exit_hook.store(nullptr);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

const std::atomic<bool>& StopSignals::flag() const { return g_stop; }

void StopSignals::OnImmediateExit(void (*hook)()) { g_immediate_exit_hook.store(hook); }

int StopSignals::ExitCode() const {
  const int signal_number = g_signal.load();
  return 128 + (signal_number == 0 ? SIGINT : signal_number);
}

}  // namespace bakeoff::cli
