// Resource telemetry: nvidia-smi's CSV lines read (and "[N/A]" kept absent, never zero); a
// process tree's CPU and memory from /proc; GPU energy integrated from power samples; a missing
// nvidia-smi said plainly. A stand-in nvidia-smi (tests/testdata/fake-nvidia-smi) plays the GPU.
#include "target/resource_telemetry.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "support/timing.h"

namespace bakeoff::target {
namespace {

using namespace std::chrono_literals;

TEST(ResourceTelemetryTest, ReadsNvidiaSmiLinesAndKeepsMissingPowerAbsent) {
  std::optional<GpuSample> a = ParseNvidiaSmiLine("0, NVIDIA H100 80GB HBM3, 97, 71234, 612.45, 1980");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->index, 0);
  EXPECT_EQ(a->name, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(a->utilization, 97);
  EXPECT_DOUBLE_EQ(a->memory_used_mib, 71234);
  EXPECT_DOUBLE_EQ(*a->power_w, 612.45);
  std::optional<GpuSample> b = ParseNvidiaSmiLine("3, Tesla T4, 0, 5, [N/A], [N/A]");
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->power_w.has_value());
  EXPECT_FALSE(b->sm_clock_mhz.has_value());
  EXPECT_FALSE(ParseNvidiaSmiLine("index, name, utilization.gpu [%]"));
  EXPECT_FALSE(ParseNvidiaSmiLine("0, x, 1, 2, 3"));
  EXPECT_FALSE(ParseNvidiaSmiLine(""));
}

// Wall-clock-sensitive (a busy child's share of a core, energy over elapsed time): the serial
// `timing` label. Under sanitizers the threads and the child still run (TSan watches them); only
// the time-dependent bounds are left out.
TEST(ResourceTelemetryTimingTest, SamplesAProcessTreeAndIntegratesGpuEnergy) {
  const bool timed = !testing::kSanitizedBuild;
  // A parent shell with a busy child: the tree is both, and it uses about one core.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", "while :; do :; done & wait", nullptr);
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(200ms);
  EXPECT_GE(ProcessTree(pid).size(), 2u);
  TelemetryOptions o;
  o.process = pid;
  o.nvidia_smi = std::string(BAKEOFF_TESTDATA_DIR) + "/fake-nvidia-smi";
  o.interval = 200ms;
  auto telemetry = ResourceTelemetry::Start(o, nullptr);
  std::this_thread::sleep_for(1500ms);
  const ResourceSummary s = telemetry->Stop();
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);

  EXPECT_TRUE(s.process_sampled);
  EXPECT_GE(s.process_samples, 5u);
  EXPECT_GE(s.processes_peak, 2u);
  if (timed) {
    EXPECT_GT(s.cpu_cores_mean, 0.2) << "the busy child keeps about one core (less on a loaded host)";
  }
  EXPECT_GT(s.rss_peak_mib, 0);
  ASSERT_TRUE(s.gpus_sampled) << s.gpu_note;
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_DOUBLE_EQ(*s.gpus[0].power_mean_w, 500);
  ASSERT_TRUE(s.gpus[0].energy_j.has_value());
  // 500 W over the samples' span (at most the 1.5 s run; less when the stand-in starts late).
  if (timed) {
    EXPECT_GT(*s.gpus[0].energy_j, 500 * 0.3);
    EXPECT_LT(*s.gpus[0].energy_j, 500 * 2.0);
  }
  EXPECT_FALSE(s.gpus[1].energy_j.has_value()) << "no power readings: no energy";
  EXPECT_FALSE(s.Energy().has_value()) << "one GPU without power: no total";
}

TEST(ResourceTelemetryTest, AMissingNvidiaSmiIsSaidAndNothingIsInvented) {
  TelemetryOptions o;
  o.nvidia_smi = "bakeoff-no-such-nvidia-smi";
  o.interval = 100ms;
  std::string said;
  auto telemetry = ResourceTelemetry::Start(o, [&](const std::string& line) { said += line; });
  const ResourceSummary s = telemetry->Stop();
  EXPECT_FALSE(s.gpus_sampled);
  EXPECT_TRUE(s.gpus.empty());
  EXPECT_NE(s.gpu_note.find("not found on PATH"), std::string::npos) << s.gpu_note;
  EXPECT_NE(said.find("not found on PATH"), std::string::npos);
  EXPECT_FALSE(s.process_sampled);
  EXPECT_FALSE(s.Energy().has_value());
}

}  // namespace
}  // namespace bakeoff::target
