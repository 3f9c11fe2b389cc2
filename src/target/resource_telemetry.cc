// target/resource_telemetry.cc: /proc and nvidia-smi sampling beside a load (resource_telemetry.h).
#include "target/resource_telemetry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file.h"
#include "core/json_dump.h"

namespace bakeoff::target {
namespace {

struct ProcStat {
  pid_t pid = 0, ppid = 0;
  std::uint64_t cpu_ticks = 0;  // utime + stime
  std::uint64_t rss_pages = 0;
};

// /proc/<pid>/stat: the command may hold spaces and parentheses, so fields are counted from the
// last ')'.
std::optional<ProcStat> ReadStat(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; fields >> x;) f.push_back(x);
  // After the command: state(3) ppid(4) ... utime(14) stime(15) ... rss(24): index = field - 3.
  if (f.size() < 22) return std::nullopt;
  ProcStat s;
  s.pid = pid;
  s.ppid = static_cast<pid_t>(std::strtol(f[1].c_str(), nullptr, 10));
  s.cpu_ticks =
      std::strtoull(f[11].c_str(), nullptr, 10) + std::strtoull(f[12].c_str(), nullptr, 10);
  s.rss_pages = std::strtoull(f[21].c_str(), nullptr, 10);
  return s;
}

std::vector<ProcStat> AllProcesses() {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    const char* name = e->d_name;
    if (name[0] < '0' || name[0] > '9') continue;
    if (std::optional<ProcStat> s = ReadStat(static_cast<pid_t>(std::strtol(name, nullptr, 10))))
      out.push_back(*s);
  }
  ::closedir(dir);
  return out;
}

std::vector<ProcStat> Tree(pid_t root) {
  std::vector<ProcStat> all = AllProcesses();
  std::vector<ProcStat> tree;
  std::vector<pid_t> frontier = {root};
  for (const ProcStat& s : all) {
    if (s.pid == root) tree.push_back(s);
  }
  if (tree.empty()) return tree;
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (const ProcStat& s : all) {
      if (s.ppid == parent && s.pid != root) {
        tree.push_back(s);
        frontier.push_back(s.pid);
      }
    }
  }
  return tree;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<double> Number(std::string_view s) {
  s = Trim(s);
  double x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

struct GpuAccumulator {
  GpuSummary summary;
  double utilization_sum = 0, power_sum = 0, clock_sum = 0;
  std::uint64_t power_n = 0, clock_n = 0;
  bool power_missing = false;
  std::optional<MonoTime> last_at;
  std::optional<double> last_power;
};

}  // namespace

std::vector<pid_t> ProcessTree(pid_t root) {
  std::vector<pid_t> pids;
  for (const ProcStat& s : Tree(root)) pids.push_back(s.pid);
  return pids;
}

std::optional<GpuSample> ParseNvidiaSmiLine(std::string_view line) {
  std::vector<std::string_view> f;
  for (std::size_t start = 0;;) {
    const std::size_t comma = line.find(',', start);
    f.push_back(Trim(line.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (f.size() != 6) return std::nullopt;
  std::optional<double> index = Number(f[0]), util = Number(f[2]), memory = Number(f[3]);
  if (!index || !util || !memory || *index < 0 || *index > 1024) return std::nullopt;
  GpuSample s;
  s.index = static_cast<int>(*index);
  s.name = std::string(f[1]);
  s.utilization = *util;
  s.memory_used_mib = *memory;
  s.power_w = Number(f[4]);  // "[N/A]" on some boards: absent, not zero
  s.sm_clock_mhz = Number(f[5]);
  return s;
}

std::optional<double> ResourceSummary::Energy() const {
  if (gpus.empty()) return std::nullopt;
  double total = 0;
  for (const GpuSummary& g : gpus) {
    if (!g.energy_j) return std::nullopt;
    total += *g.energy_j;
  }
  return total;
}

struct ResourceTelemetry::Impl {
  TelemetryOptions options;
  std::function<void(const std::string&)> log;
  std::unique_ptr<LineWriter> writer;
  MonoTime start = std::chrono::steady_clock::now();
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread sampler, gpu_reader;
  ResourceSummary summary;  // guarded by mutex
  double cpu_sum = 0, rss_sum = 0;
  std::uint64_t cpu_n = 0;  // samples with a CPU figure (the first has none)
  std::optional<std::pair<MonoTime, std::uint64_t>> last_cpu;  // (instant, ticks)
  std::map<int, GpuAccumulator> gpus;
  pid_t smi_pid = -1;
  int smi_fd = -1;

  double Ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }
  void Write(const nlohmann::json& line) {
    // nvidia-smi's text (a GPU's name) may hold any bytes.
    if (writer)
      (void)writer->Append(DumpJson(line, -1));
  }
  void Say(const std::string& text) {
    if (log) log(text);
  }

  void SampleProcess() {
    const std::vector<ProcStat> tree = Tree(*options.process);
    const MonoTime now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    if (tree.empty()) {
      if (summary.process_note.empty()) {
        summary.process_note = fmt::format("process {} ended during the run", *options.process);
        Say(summary.process_note);
      }
      return;
    }
    std::uint64_t ticks = 0, pages = 0;
    for (const ProcStat& s : tree) ticks += s.cpu_ticks, pages += s.rss_pages;
    const double rss_mib =
        static_cast<double>(pages) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
    std::optional<double> cores;
    if (last_cpu) {
      const double seconds = std::chrono::duration<double>(now - last_cpu->first).count();
      if (seconds > 0 && ticks >= last_cpu->second) {
        cores = static_cast<double>(ticks - last_cpu->second) /
                static_cast<double>(::sysconf(_SC_CLK_TCK)) / seconds;
      }
    }
    last_cpu = {now, ticks};
    summary.process_sampled = true;
    ++summary.process_samples;
    rss_sum += rss_mib;
    summary.rss_peak_mib = std::max(summary.rss_peak_mib, rss_mib);
    summary.processes_peak = std::max<std::uint64_t>(summary.processes_peak, tree.size());
    if (cores) {
      cpu_sum += *cores;
      ++cpu_n;
      summary.cpu_cores_peak = std::max(summary.cpu_cores_peak, *cores);
    }
    nlohmann::json line = {{"t_ms", std::round(Ms())},
                           {"kind", "process"},
                           {"processes", tree.size()},
                           {"rss_mib", rss_mib}};
    line["cpu_cores"] = cores ? nlohmann::json(*cores) : nlohmann::json();
    Write(line);
  }

  void SampleLoop() {
    MonoTime next = start;
    for (;;) {
      if (options.process) {
        try {
          SampleProcess();
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mutex);
          if (summary.process_note.empty())
            summary.process_note = std::string("process sampling failed: ") + e.what();
        }
      }
      next += options.interval;
      std::unique_lock<std::mutex> lock(mutex);
      if (wake.wait_until(lock, next, [this] { return stopping; })) break;
    }
  }

  // nvidia-smi's own loop (-lms) writes a line per GPU per interval; we read until it ends.
  bool StartNvidiaSmi() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    const std::string every = std::to_string(std::max<long long>(
        100, std::chrono::duration_cast<std::chrono::milliseconds>(options.interval).count()));
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return false;
    }
    if (pid == 0) {
      ::setpgid(0, 0);  // its own group: a kill reaches whatever it starts
      ::dup2(fds[1], STDOUT_FILENO);
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, STDERR_FILENO);
      ::close_range(3, ~0U, 0);  // nothing of bakeoff's (sockets, files) stays open in it
      const char* argv[] = {
          options.nvidia_smi.c_str(),
          "--query-gpu=index,name,utilization.gpu,memory.used,power.draw,clocks.sm",
          "--format=csv,noheader,nounits",
          "-lms",
          every.c_str(),
          nullptr};
      ::execvp(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(fds[1]);
    smi_pid = pid;
    smi_fd = fds[0];
    return true;
  }

  void GpuLine(std::string_view text) {
    std::optional<GpuSample> s = ParseNvidiaSmiLine(text);
    const MonoTime now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    if (!s) {
      if (summary.gpu_note.empty()) {
        summary.gpu_note = fmt::format("nvidia-smi printed a line bakeoff cannot read: '{}'", text);
        Say(summary.gpu_note);
      }
      return;
    }
    summary.gpus_sampled = true;
    GpuAccumulator& g = gpus[s->index];
    g.summary.index = s->index;
    g.summary.name = s->name;
    ++g.summary.samples;
    g.utilization_sum += s->utilization;
    g.summary.utilization_peak = std::max(g.summary.utilization_peak, s->utilization);
    g.summary.memory_used_peak_mib = std::max(g.summary.memory_used_peak_mib, s->memory_used_mib);
    if (s->power_w) {
      g.power_sum += *s->power_w;
      ++g.power_n;
      // Trapezoids between consecutive samples.
      if (g.last_at && g.last_power) {
        g.summary.energy_j = g.summary.energy_j.value_or(0) +
                             (*g.last_power + *s->power_w) / 2 *
                                 std::chrono::duration<double>(now - *g.last_at).count();
      }
      g.last_power = s->power_w;
    } else {
      g.power_missing = true;
    }
    g.last_at = now;
    if (s->sm_clock_mhz) g.clock_sum += *s->sm_clock_mhz, ++g.clock_n;
    nlohmann::json line = {{"t_ms", std::round(Ms())},
                           {"kind", "gpu"},
                           {"index", s->index},
                           {"name", s->name},
                           {"utilization", s->utilization},
                           {"memory_used_mib", s->memory_used_mib}};
    line["power_w"] = s->power_w ? nlohmann::json(*s->power_w) : nlohmann::json();
    line["sm_clock_mhz"] = s->sm_clock_mhz ? nlohmann::json(*s->sm_clock_mhz) : nlohmann::json();
    Write(line);
  }

  void GpuLoop() {
    std::string buffer;
    char chunk[4096];
    for (;;) {
      pollfd p{smi_fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stopping) break;
      }
      if (ready <= 0) continue;
      const ssize_t n = ::read(smi_fd, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
      for (std::size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
        const std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        if (!Trim(line).empty()) GpuLine(line);
      }
    }
  }
};

ResourceTelemetry::ResourceTelemetry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ResourceTelemetry::~ResourceTelemetry() {
  if (impl_) Stop();
}

std::unique_ptr<ResourceTelemetry> ResourceTelemetry::Start(
    TelemetryOptions options, std::function<void(const std::string&)> log) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->log = std::move(log);
  if (!impl->options.jsonl.empty()) {
    Result<std::unique_ptr<LineWriter>> writer = LineWriter::Open(impl->options.jsonl);
    if (writer.ok()) impl->writer = std::move(writer.value());
  }
  if (!impl->options.process)
    impl->summary.process_note = "no engine process to sample (attached by URL)";
  if (impl->options.gpus) {
    // execvp's own search, done here first, so "not found" is one clear sentence, not a silent
    // exit.
    bool found = impl->options.nvidia_smi.find('/') != std::string::npos &&
                 ::access(impl->options.nvidia_smi.c_str(), X_OK) == 0;
    if (!found) {
      const char* path = std::getenv("PATH");
      std::istringstream dirs(path != nullptr ? path : "");
      for (std::string dir; !found && std::getline(dirs, dir, ':');) {
        found = !dir.empty() && ::access((dir + "/" + impl->options.nvidia_smi).c_str(), X_OK) == 0;
      }
    }
    if (!found) {
      impl->summary.gpu_note =
          fmt::format("{} not found on PATH: GPU figures unavailable", impl->options.nvidia_smi);
      if (impl->log) impl->log(impl->summary.gpu_note);
    } else if (impl->StartNvidiaSmi()) {
      Impl* raw = impl.get();
      impl->gpu_reader = std::thread([raw] { raw->GpuLoop(); });
    } else {
      impl->summary.gpu_note = "could not start nvidia-smi: GPU figures unavailable";
      if (impl->log) impl->log(impl->summary.gpu_note);
    }
  } else {
    impl->summary.gpu_note = "GPU sampling off";
  }
  Impl* raw = impl.get();
  impl->sampler = std::thread([raw] { raw->SampleLoop(); });
  return std::unique_ptr<ResourceTelemetry>(new ResourceTelemetry(std::move(impl)));
}

ResourceSummary ResourceTelemetry::Stop() {
  Impl& i = *impl_;
  {
    std::lock_guard<std::mutex> lock(i.mutex);
    i.stopping = true;
  }
  i.wake.notify_all();
  if (i.sampler.joinable()) i.sampler.join();
  if (i.smi_pid > 0) {
    ::kill(-i.smi_pid, SIGTERM);
    if (i.gpu_reader.joinable()) i.gpu_reader.join();
    // nvidia-smi stuck in the driver may ignore SIGTERM: wait 2 s, then SIGKILL, then 2 s more,
    // then leave it (said) rather than hang the run.
    int status = 0;
    bool reaped = false;
    for (int round = 0; round < 2 && !reaped; ++round) {
      if (round == 1) ::kill(-i.smi_pid, SIGKILL);
      for (int n = 0; n < 40 && !reaped; ++n) {
        reaped = ::waitpid(i.smi_pid, &status, WNOHANG) == i.smi_pid;
        if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (!reaped)
      i.summary.gpu_note += fmt::format(" (nvidia-smi {} did not exit; left running)", i.smi_pid);
    ::close(i.smi_fd);
    i.smi_pid = -1;
    if (!i.summary.gpus_sampled && i.summary.gpu_note.empty()) {
      i.summary.gpu_note =
          WIFEXITED(status) && WEXITSTATUS(status) != 0
              ? fmt::format("nvidia-smi exited {} without a reading: GPU figures unavailable",
                            WEXITSTATUS(status))
              : "nvidia-smi gave no reading: GPU figures unavailable";
    }
  }
  ResourceSummary s;
  {
    std::lock_guard<std::mutex> lock(i.mutex);
    s = i.summary;
    s.duration_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - i.start).count();
    if (s.process_samples > 0) s.rss_mean_mib = i.rss_sum / static_cast<double>(s.process_samples);
    if (i.cpu_n > 0) s.cpu_cores_mean = i.cpu_sum / static_cast<double>(i.cpu_n);
    s.gpus.clear();
    for (auto& [index, g] : i.gpus) {
      GpuSummary out = g.summary;
      if (out.samples > 0)
        out.utilization_mean = g.utilization_sum / static_cast<double>(out.samples);
      if (g.power_n > 0) out.power_mean_w = g.power_sum / static_cast<double>(g.power_n);
      if (g.power_missing) out.energy_j.reset();  // a gap in the power figures: no honest integral
      if (g.clock_n > 0) out.sm_clock_mean_mhz = g.clock_sum / static_cast<double>(g.clock_n);
      s.gpus.push_back(out);
    }
  }  // the lock is released before its mutex goes with the Impl
  impl_.reset();
  return s;
}

nlohmann::json ToJson(const ResourceSummary& s) {
  auto opt = [](const std::optional<double>& x) {
    return x ? nlohmann::json(*x) : nlohmann::json();
  };
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuSummary& g : s.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"samples", g.samples},
                    {"utilization_mean", g.utilization_mean},
                    {"utilization_peak", g.utilization_peak},
                    {"memory_used_peak_mib", g.memory_used_peak_mib},
                    {"power_mean_w", opt(g.power_mean_w)},
                    {"energy_j", opt(g.energy_j)},
                    {"sm_clock_mean_mhz", opt(g.sm_clock_mean_mhz)}});
  }
  return {{"duration_s", s.duration_s},
          {"process",
           {{"sampled", s.process_sampled},
            {"note", s.process_note},
            {"samples", s.process_samples},
            {"cpu_cores_mean", s.cpu_cores_mean},
            {"cpu_cores_peak", s.cpu_cores_peak},
            {"rss_mean_mib", s.rss_mean_mib},
            {"rss_peak_mib", s.rss_peak_mib},
            {"processes_peak", s.processes_peak}}},
          {"gpus", {{"sampled", s.gpus_sampled}, {"note", s.gpu_note}, {"devices", gpus}}},
          {"gpu_energy_j", opt(s.Energy())}};
}

}  // namespace bakeoff::target
