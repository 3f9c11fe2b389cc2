// target/resource_telemetry.h
//
// Owns: what the thing under test uses while it serves: the CPU (cores busy) and resident memory
// of an engine's whole process tree (the process bakeoff launched, or one it was told about, and
// every descendant) read from /proc, and each GPU's utilisation, memory, power and SM clock from
// `nvidia-smi --query-gpu ... --format=csv -lms` when nvidia-smi exists. One line per sample goes
// to telemetry.jsonl as it is taken; Stop() summarises (means, peaks, and the energy the GPUs drew,
// integrated over the samples). Nothing is invented: a missing nvidia-smi, a process that is gone
// or a line that does not parse is said once and marked unavailable.
// Does not own: starting the engine (target/launcher.h), the client's own CPU (load/).
//
// Thread-safety: Start spawns one sampling thread (and nvidia-smi, when asked); Stop joins it and
// ends nvidia-smi. Linux only (/proc).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"

namespace bakeoff::target {

struct TelemetryOptions {
  std::optional<pid_t> process;  // the engine's process: its tree's CPU and RSS; none: not sampled
  bool gpus = true;              // sample GPUs with nvidia-smi when it is on the PATH
  std::string nvidia_smi = "nvidia-smi";
  Nanos interval = std::chrono::seconds(1);
  std::filesystem::path jsonl;  // telemetry.jsonl; empty: summaries only
};

struct GpuSummary {
  int index = 0;
  std::string name;
  std::uint64_t samples = 0;
  double utilization_mean = 0, utilization_peak = 0;  // percent
  double memory_used_peak_mib = 0;
  std::optional<double> power_mean_w;  // absent when nvidia-smi reports "[N/A]"
  std::optional<double> energy_j;      // power integrated over the samples' spacing
  std::optional<double> sm_clock_mean_mhz;
};

struct ResourceSummary {
  double duration_s = 0;
  bool process_sampled = false;
  std::string process_note;  // why not, or that the process ended
  std::uint64_t process_samples = 0;
  double cpu_cores_mean = 0, cpu_cores_peak = 0;  // cores busy (1.0 = one core all the time)
  double rss_mean_mib = 0, rss_peak_mib = 0;
  std::uint64_t processes_peak = 0;  // processes in the tree
  bool gpus_sampled = false;
  std::string gpu_note;  // why not ("nvidia-smi not found on PATH: GPU figures unavailable")
  std::vector<GpuSummary> gpus;
  std::optional<double> Energy() const;  // every GPU's energy, when each one had power figures
};

// The pids of `root` and every descendant, from /proc (empty when `root` is gone).
std::vector<pid_t> ProcessTree(pid_t root);

// One nvidia-smi CSV line (index, name, utilization.gpu, memory.used, power.draw, clocks.sm;
// noheader, nounits), or nullopt when it is not one.
struct GpuSample {
  int index = 0;
  std::string name;
  double utilization = 0, memory_used_mib = 0;
  std::optional<double> power_w, sm_clock_mhz;
};
std::optional<GpuSample> ParseNvidiaSmiLine(std::string_view line);

class ResourceTelemetry {
 public:
  static std::unique_ptr<ResourceTelemetry> Start(TelemetryOptions options,
                                                  std::function<void(const std::string&)> log);
  ~ResourceTelemetry();
  ResourceTelemetry(const ResourceTelemetry&) = delete;
  ResourceTelemetry& operator=(const ResourceTelemetry&) = delete;
  ResourceSummary Stop();

 private:
  struct Impl;
  explicit ResourceTelemetry(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

nlohmann::json ToJson(const ResourceSummary& summary);

}  // namespace bakeoff::target
