// study/runner_processes.cc: the study's candidates as processes and load targets: the target
// spec of each (an attached server, a launched engine, or `bakeoff emulate` on a free loopback
// port), the launched engine kept between the phases of one round (its version read once it
// serves) and stopped when the round moves on, and where each load phase sends its load (the
// virtual clock for an emulated candidate). Declarations in runner_impl.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/json_dump.h"
#include "study/runner_impl.h"
#include "target/adapters.h"
#include "target/detection.h"

namespace bakeoff::study::runner_internal {

namespace fs = std::filesystem;

namespace {

// A loopback port nobody listens on right now (the kernel's choice).
Result<std::uint16_t> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return MakeError(ErrorCode::kIo, "socket: cannot pick a port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return MakeError(ErrorCode::kIo, "cannot pick a free loopback port");
  return ntohs(addr.sin_port);
}

target::LaunchSpec Launch(std::vector<std::string> argv, std::filesystem::path log_dir, std::uint16_t port) {
  target::LaunchSpec spec;
  spec.argv = std::move(argv);
  spec.log_dir = std::move(log_dir);
  spec.port = port;
  return spec;
}

}  // namespace

Result<target::CandidateSpec> StudyRunner::TargetSpec(std::size_t i) {
  const CandidateSpec& spec = study_.candidates[i];
  target::CandidateSpec t;
  t.model = study_.model.name;
  t.api = StudyApi(study_);
  t.grace = std::chrono::seconds(30);
  t.ready_timeout = study_.slo.cold_start_max ? *study_.slo.cold_start_max * 2 : std::chrono::seconds(600);
  const std::string engine = results_.candidates[i].engine;
  if (const target::EngineAdapter* adapter = target::FindAdapter(engine); adapter != nullptr) {
    t.health_path = adapter->ReadinessRoute().path;
    if (!adapter->metrics_path.empty()) t.metrics_path = adapter->metrics_path;
  }
  const fs::path logs = options_.out_dir / "candidates" / spec.name / "logs";
  switch (spec.kind) {
    case CandidateKind::kUrl:
      t.url = spec.url;
      break;
    case CandidateKind::kLaunch: {
      Result<std::vector<std::string>> argv = target::SplitCommandLine(spec.launch);
      if (!argv.ok()) return argv.error();
      t.url = fmt::format("http://127.0.0.1:{}", spec.port);
      t.launch = Launch(argv.value(), logs, spec.port);
      break;
    }
    case CandidateKind::kEmulated: {
      Result<std::uint16_t> port = FreeLoopbackPort();
      if (!port.ok()) return port.error();
      std::vector<std::string> argv = {options_.self_exe.string(), "emulate", "--host", "127.0.0.1", "--port",
                                       std::to_string(port.value()), "--preset", presets_.at(spec.name).file.string(),
                                       "--model", study_.model.name};
      argv.insert(argv.end(), spec.emulator_flags.begin(), spec.emulator_flags.end());
      t.url = fmt::format("http://127.0.0.1:{}", port.value());
      t.launch = Launch(std::move(argv), logs, port.value());
      break;
    }
  }
  return t;
}

Result<target::Candidate*> StudyRunner::Process(std::size_t i) {
  auto found = processes_.find(i);
  if (found == processes_.end()) {
    Result<target::CandidateSpec> spec = TargetSpec(i);
    if (!spec.ok()) return spec.error();
    Result<target::Candidate> candidate = target::Candidate::Create(spec.value());
    if (!candidate.ok()) return candidate.error();
    found = processes_.emplace(i, std::make_unique<target::Candidate>(std::move(candidate.value()))).first;
  }
  target::Candidate& c = *found->second;
  if (Status up = c.EnsureUp(c.spec().ready_timeout); !up.ok()) return up.error();
  // A launched engine's version (and engine, when the study named none) is read once it serves.
  CandidateResult& r = results_.candidates[i];
  if (r.version.empty() && detected_.insert(i).second) {  // once: not before every trial
    Result<target::Detection> d = target::DetectEngine(c.endpoint());
    if (d.ok() && !d->version.empty()) {
      r.version = d->version;
      r.version_source = "discovered (" + d->version_source + ")";
    }
    if (d.ok() && r.engine.empty() && d->adapter != nullptr) r.engine = std::string(d->adapter->name);
  }
  return &c;
}

void StudyRunner::StopProcess(std::size_t i) {
  auto found = processes_.find(i);
  if (found == processes_.end()) return;
  if (found->second->Running()) found->second->Stop();
  processes_.erase(found);
}

Status StudyRunner::CheckRoutes() {
  if (!IsPoolingTask(study_.task)) return Ok{};
  for (std::size_t i = 0; i < study_.candidates.size(); ++i) {
    CandidateResult& c = results_.candidates[i];
    if (c.eliminated) continue;
    // What cannot be brought up is the probes' to say (cold_start, readiness), not the gate's.
    Result<target::CandidateSpec> spec = TargetSpec(i);
    if (!spec.ok()) continue;
    Result<target::Candidate> candidate = target::Candidate::Create(spec.value());
    if (!candidate.ok() || (candidate->launch_mode() && !candidate->Launch().ok())) continue;
    // WaitReady stops at once on a missing route; any other failure shows in the answer below.
    (void)candidate->WaitReady(candidate->spec().ready_timeout);
    const target::GenerationAnswer answer = candidate->Generate("Hello", 1);
    if (candidate->launch_mode() && candidate->Running()) candidate->Stop();
    const std::string route = dialect::RequestPath(spec->api, study_.model.name, false);
    const std::string detail =
        answer.ok ? fmt::format("POST {} answered HTTP {} with {} {}", route, answer.status,
                                answer.items, answer.items == 1 ? "answer" : "answers")
                  : answer.error;
    const fs::path file = Dir(i, "route.json");
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    nlohmann::ordered_json j = {{"route", "POST " + route}, {"status", answer.status},
                                {"served", answer.ok},      {"route_missing", answer.route_missing},
                                {"detail", detail},         {"body", answer.body}};
    if (Status st = WriteFileAtomically(file, DumpJson(j, 2)); !st.ok()) return st.error();
    if (!answer.ok && !answer.route_missing) continue;  // some other failure: the probes say it
    GateRow* row = results_.gate.Find(study_.candidates[i].name);
    ApplyRouteCheck(*row, study_, answer.ok, detail, "route check: " + Relative(file));
    c.eliminated = row->Eliminated();
    if (c.eliminated)
      log_(fmt::format("{}: eliminated at the gate: {}", c.name, row->Failures()[0]));
  }
  return Ok{};
}

Result<run::LoadTarget> StudyRunner::Target(std::size_t i) {
  const CandidateSpec& spec = study_.candidates[i];
  run::LoadTarget t;
  if (spec.kind == CandidateKind::kEmulated) {
    t.simulated = true;
    t.sim.engine = presets_.at(spec.name).config;
    t.preset = presets_.at(spec.name).config.name;
    return t;
  }
  if (spec.kind == CandidateKind::kLaunch) {
    Result<target::Candidate*> process = Process(i);
    if (!process.ok()) return process.error();
    t.url = process.value()->spec().url;
    if (target::LaunchedProcess* launched = process.value()->process()) t.engine_pid = launched->pid();
  } else {
    t.url = spec.url;
  }
  t.price_per_hour = study_.hardware.price_per_hour;
  if (const target::EngineAdapter* adapter = target::FindAdapter(results_.candidates[i].engine); adapter != nullptr) {
    t.adapter = adapter;
    t.metrics_path = adapter->metrics_path.empty() ? "" : std::string(adapter->metrics_path);
  }
  return t;
}

}  // namespace bakeoff::study::runner_internal
