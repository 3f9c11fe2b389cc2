// study/runner.cc: a study end to end into a results bundle (runner.h).
#include "study/runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <simdjson.h>

#include "core/digest.h"
#include "core/file.h"
#include "core/json_dump.h"
#include "core/json_text.h"
#include "core/yaml_doc.h"
#include "emulate/engine_preset.h"
#include "qualify/probe_report.h"
#include "run/load_target.h"
#include "stats/quantile.h"
#include "study/budget.h"
#include "target/adapters.h"
#include "target/candidate.h"
#include "target/detection.h"
#include "target/discovery.h"
#include "workload/fingerprint.h"
#include "workload/importers.h"
#include "workload/synthesis.h"
#include "workload/trace_jsonl.h"

namespace bakeoff::study {
namespace {

namespace fs = std::filesystem;

Error Invalid(std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); }

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

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The host as the manifest records it: CPU model and count, memory, accelerators seen.
nlohmann::json HostJson() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string cpu;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string memory = FirstLine("/proc/meminfo");
  std::vector<std::string> gpus;
  std::error_code ec;
  if (fs::is_directory("/proc/driver/nvidia/gpus", ec)) {
    for (const auto& entry : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
      std::ifstream info(entry.path() / "information");
      std::string line;
      std::getline(info, line);
      gpus.push_back(line.empty() ? entry.path().filename().string() : line);
    }
  }
  return {{"hostname", name},
          {"cpu", cpu},
          {"cpus", std::thread::hardware_concurrency()},
          {"memory", memory},
          {"gpus", gpus},
          {"gpu_note", gpus.empty() ? "no GPU driver found (/proc/driver/nvidia/gpus)" : ""}};
}

target::LaunchSpec Launch(std::vector<std::string> argv, std::filesystem::path log_dir, std::uint16_t port) {
  target::LaunchSpec spec;
  spec.argv = std::move(argv);
  spec.log_dir = std::move(log_dir);
  spec.port = port;
  return spec;
}

// Sets a flag when the user stops or the budget is spent, whichever comes first.
class Halt {
 public:
  Halt(const std::atomic<bool>& stop, MonoTime deadline) : stop_(stop), deadline_(deadline) {
    watcher_ = std::thread([this] {
      while (!done_) {
        if (stop_ || std::chrono::steady_clock::now() >= deadline_) halted_ = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~Halt() {
    done_ = true;
    watcher_.join();
  }
  Halt(const Halt&) = delete;
  Halt& operator=(const Halt&) = delete;
  const std::atomic<bool>& flag() const { return halted_; }
  bool user_stopped() const { return stop_; }
  bool budget_spent() const { return !stop_ && std::chrono::steady_clock::now() >= deadline_; }
  bool halted() const { return halted_ || stop_ || std::chrono::steady_clock::now() >= deadline_; }

 private:
  const std::atomic<bool>& stop_;
  const MonoTime deadline_;
  std::atomic<bool> halted_{false};
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

// TTFT p99 of the shortest and longest quarter of prompts among a step's ok measured records.
// Reads the records a line at a time: a long replay's file is never held whole.
void HeadOfLine(const fs::path& records, StepFigures& f) {
  std::ifstream in(records);
  if (!in) return;
  std::vector<std::pair<double, double>> rows;  // (prompt tokens, ttft ms)
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element row;
    if (!line.empty() && !parser.parse(line).get(row)) {
      std::string_view phase, outcome;
      std::int64_t send = 0, first = 0, planned = 0;
      if (!row["phase"].get(phase) && phase == "measure" && !row["outcome"].get(outcome) && outcome == "ok" &&
          !row["send_start_ns"].get(send) && !row["first_token_ns"].get(first) &&
          !row["prompt_tokens_planned"].get(planned)) {
        rows.emplace_back(static_cast<double>(planned), static_cast<double>(first - send) / 1e6);
      }
    }
  }
  if (rows.size() < 8) return;
  std::sort(rows.begin(), rows.end());
  const std::size_t quarter = rows.size() / 4;
  auto p99 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return stats::NearestRank(v, 0.99);
  };
  std::vector<double> shorts, longs;
  for (std::size_t i = 0; i < quarter; ++i) shorts.push_back(rows[i].second);
  for (std::size_t i = rows.size() - quarter; i < rows.size(); ++i) longs.push_back(rows[i].second);
  f.short_ttft_p99_ms = p99(shorts);
  f.long_ttft_p99_ms = p99(longs);
  f.short_count = shorts.size();
  f.long_count = longs.size();
}

// Arrivals per second over the first `n` requests of a trace (0 when they all arrive at once).
double WindowRate(const workload::Trace& trace, std::uint64_t n) {
  n = std::min<std::uint64_t>(n, trace.requests.size());
  if (n < 2) return 0;
  const double span = trace.requests[n - 1].arrival_s - trace.requests[0].arrival_s;
  return span > 0 ? static_cast<double>(n - 1) / span : 0;
}

class StudyRunner {
 public:
  StudyRunner(const Study& study, const StudyRunOptions& options, const std::atomic<bool>& stop,
              const std::function<void(const std::string&)>& log)
      : study_(study),
        options_(options),
        log_(log),
        deadline_(std::chrono::steady_clock::now() + study.budget),
        halt_(stop, deadline_) {
    results_.study = study;
    results_.bundle = options.out_dir;
  }

  Result<StudyResults> Run() {
    if (Status st = Prepare(); !st.ok()) return st.error();
    if (Status st = OpenBundle(); !st.ok()) return st.error();
    if (Status st = KeepWorkload(); !st.ok()) return st.error();
    results_.gate = GateOnCatalog(study_, catalog_ ? &*catalog_ : nullptr);
    for (const CandidateSpec& spec : study_.candidates) {
      CandidateResult& c = results_.candidates.emplace_back();
      c.name = spec.name;
      c.kind = spec.kind;
      c.emulated = spec.kind == CandidateKind::kEmulated;
      c.engine = c.emulated ? "emulated" : spec.engine;
      if (const CatalogEntry* e = Entry(spec); e != nullptr) {
        if (c.engine.empty()) c.engine = e->engine;
        c.version = e->version;
        c.version_source = c.version.empty() ? "" : "catalog";
        for (const CatalogEntry::KnownLimit& limit : e->known_limits) c.known_limits.push_back(limit.text);
      }
      if (catalog_) {
        for (const LintFinding& f : lint_) {
          if (f.entry == spec.catalog) c.catalog_findings.push_back(fmt::format("{}: {}", f.code, f.message));
        }
      }
      c.eliminated = results_.gate.Find(spec.name)->Eliminated();
      if (c.eliminated) log_(fmt::format("{}: eliminated at the gate: {}", spec.name, results_.gate.Find(spec.name)->Failures()[0]));
    }
    if (Status st = WriteGate(); !st.ok()) return st.error();
    if (Status st = CheckComparable(); !st.ok()) return st.error();
    PlanBudget();
    for (CandidateResult& c : results_.candidates) {
      if (const target::EngineAdapter* adapter = target::FindAdapter(c.engine);
          adapter != nullptr && adapter->request.ignore_eos.empty()) {
        c.unequal_work.push_back(fmt::format("{} cannot force an output length (no ignore_eos): its answers may end "
                                             "early, so it may do less work than the others",
                                             adapter->display_name));
      }
    }

    if (study_.Runs(Phase::kProbes)) {
      for (std::size_t i = 0; i < study_.candidates.size(); ++i) {
        if (results_.candidates[i].eliminated) continue;
        if (Status st = Guarded(i, "probes", [&] { Probe(i); }); !st.ok()) return st.error();
      }
      if (Status st = WriteGate(); !st.ok()) return st.error();
    }
    std::vector<std::size_t> survivors;
    for (std::size_t i = 0; i < study_.candidates.size(); ++i) {
      if (!results_.candidates[i].eliminated) survivors.push_back(i);
    }
    PlanLoadBudget(survivors);
    auto rotated = [&](std::uint32_t round) {
      std::vector<std::size_t> order = survivors;
      if (!order.empty()) std::rotate(order.begin(), order.begin() + (round % order.size()), order.end());
      return order;
    };
    for (std::uint32_t round = 0; round < study_.plan.repeats; ++round) {
      for (std::size_t i : rotated(round)) {
        for (Phase phase : {Phase::kSingle, Phase::kSweep, Phase::kReplay}) {
          if (!study_.Runs(phase)) continue;
          if (Status st = Guarded(i, PhaseName(phase), [&] { LoadPhase(i, phase, round); }); !st.ok()) {
            return st.error();
          }
        }
        StopProcess(i);
      }
    }
    if (study_.Runs(Phase::kCapacity)) {
      for (std::size_t i : rotated(study_.plan.repeats)) {
        if (Status st = Guarded(i, "capacity", [&] { Capacity(i); }); !st.ok()) return st.error();
        StopProcess(i);
      }
    }
    processes_.clear();
    results_.interrupted = halt_.user_stopped();
    results_.budget_spent = !results_.interrupted && halt_.budget_spent();
    results_.verdict = Decide(study_, results_.workload, results_.gate, results_.candidates);
    results_.manifest = Manifest();
    if (Status st = WriteFileAtomically(options_.out_dir / "manifest.json", DumpJson(results_.manifest, 2)); !st.ok()) {
      return st.error();
    }
    if (Status st = WriteFileAtomically(options_.out_dir / "verdict.json", DumpJson(ToJson(results_.verdict), 2));
        !st.ok()) {
      return st.error();
    }
    return std::move(results_);
  }

 private:
  // Runs one phase of candidate i. An exception escaping it (a bug, or an answer no parser
  // expected) ends the study with one line naming the candidate and the phase; the phases already
  // finished are on disk, so a second `bakeoff run` resumes from them, and the launched engines
  // are stopped on the way out.
  template <typename PhaseFn>
  Status Guarded(std::size_t i, std::string_view phase, PhaseFn&& run_phase) {
    try {
      run_phase();
      return Ok{};
    } catch (const std::exception& e) {
      processes_.clear();
      return Error{ErrorCode::kInternal,
                   fmt::format("candidate {}, phase {}: {} (the finished phases are kept in {}; run the same "
                               "command again to resume)",
                               study_.candidates[i].name, phase, ValidUtf8(e.what()), options_.out_dir.string())};
    }
  }

  const CatalogEntry* Entry(const CandidateSpec& spec) const {
    return catalog_ && !spec.catalog.empty() ? catalog_->Find(spec.catalog) : nullptr;
  }

  // --- Before anything is created ---

  Status Prepare() {
    std::vector<std::string> mistakes;
    if (!study_.catalog.empty()) {
      Result<Catalog> catalog = LoadCatalog(study_.catalog);
      if (!catalog.ok()) {
        mistakes.push_back(catalog.error().message);
      } else {
        catalog_ = std::move(catalog.value());
        LintOptions lint;
        lint.today = UtcTodayIso();
        lint_ = LintCatalog(*catalog_, lint);
        catalog_->source = "catalog.yaml";  // gate evidence points at the bundle's copy
      }
    }
    for (const CandidateSpec& c : study_.candidates) {
      if (c.kind != CandidateKind::kEmulated) continue;
      Result<fs::path> file = emulate::ResolveEnginePreset(c.preset, options_.presets_dir);
      if (!file.ok()) {
        mistakes.push_back(fmt::format("{}:{}: candidates[{}].emulated.preset: {}", study_.file.string(), c.line,
                                       &c - study_.candidates.data(), file.error().message));
        continue;
      }
      Result<emulate::EnginePreset> preset = emulate::LoadEnginePreset(file.value());
      if (!preset.ok()) {
        mistakes.push_back(preset.error().message);
        continue;
      }
      presets_[c.name] = std::move(preset.value());
    }
    if (Status st = LoadWorkload(); !st.ok()) mistakes.push_back(st.error().message);
    if (!mistakes.empty()) {
      std::string all;
      for (const std::string& m : mistakes) all += (all.empty() ? "" : "\n") + m;
      return Invalid(all);
    }
    return Ok{};
  }

  Status LoadWorkload() {
    const TrafficSpec& t = study_.traffic;
    workload::SynthesisOptions synth;
    synth.seed = t.seed;
    if (t.requests > 0) synth.requests = t.requests;
    else if (t.duration_s > 0) synth.duration_s = t.duration_s;
    Result<workload::Trace> trace = Invalid("no traffic");
    switch (t.source) {
      case TrafficSource::kTrace: {
        workload::ImportOptions import;
        Result<workload::TraceFormat> format = workload::ParseTraceFormat(t.format);
        if (!format.ok()) return Invalid(fmt::format("{}: traffic.format: {}", study_.file.string(), format.error().message));
        import.format = format.value();
        trace = workload::LoadTrace(t.file, import);
        if (trace.ok() && t.requests > 0 && trace->requests.size() > t.requests) trace->requests.resize(t.requests);
        break;
      }
      case TrafficSource::kFingerprint: {
        Result<std::string> text = ReadFile(t.file);
        if (!text.ok()) return text.error();
        Result<workload::Fingerprint> fp = workload::ParseFingerprintJson(text.value());
        if (!fp.ok()) return Invalid(fmt::format("{}: {}", t.file.string(), fp.error().message));
        trace = workload::SynthesizeFromFingerprint(fp.value(), synth);
        break;
      }
      case TrafficSource::kShape: {
        Result<workload::WorkloadShape> shape = workload::LoadWorkloadShape(t.file);
        if (!shape.ok()) return shape.error();
        trace = workload::SynthesizeFromShape(shape.value(), synth);
        break;
      }
    }
    if (!trace.ok()) return trace.error();
    if (trace->requests.empty()) return Invalid(fmt::format("{}: the traffic has no requests", t.file.string()));
    // Lengths the study's context cannot hold are cut to it, and answers to the plan's cap.
    const std::uint32_t context = study_.model.max_context;
    for (workload::TraceRequest& r : trace->requests) {
      if (study_.plan.output_tokens_cap > 0) r.output_tokens = std::min(r.output_tokens, study_.plan.output_tokens_cap);
      r.output_tokens = std::max<std::uint32_t>(1, std::min(r.output_tokens, context / 2));
      if (r.input_tokens + r.output_tokens > context) {
        r.input_tokens = context - r.output_tokens;
        r.prompt.reset();
        r.messages.clear();
        r.prefix_hashes.resize(std::min<std::size_t>(
            r.prefix_hashes.size(), trace->block_tokens ? r.input_tokens / trace->block_tokens : 0));
      }
    }
    trace_ = std::make_shared<workload::Trace>(std::move(trace.value()));
    return Ok{};
  }

  Status OpenBundle() {
    const fs::path& out = options_.out_dir;
    Result<std::string> study_text = ReadFile(study_.file);
    results_.study_hash = Sha256Hex(study_text.ok() ? study_text.value() : "");
    if (catalog_) {
      if (Result<std::string> text = ReadFile(catalog_->file); text.ok()) catalog_hash_ = Sha256Hex(text.value());
    }
    started_at_ = UtcNowIso();
    std::error_code ec;
    if (fs::exists(out / "manifest.json", ec)) {
      Result<std::string> manifest = ReadFile(out / "manifest.json");
      nlohmann::json j = manifest.ok() ? nlohmann::json::parse(manifest.value(), nullptr, false) : nlohmann::json();
      auto field = [&](const char* key) {
        return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
      };
      // Resume only what this very study, catalog and tool would measure again: anything else is
      // another experiment, whose phases must not be mixed with these.
      std::string differs;
      if (field("study_sha256") != results_.study_hash) differs = "the study file differs";
      else if (field("catalog_sha256") != catalog_hash_) differs = "the catalog differs";
      else if (field("tool_version") != BAKEOFF_VERSION) differs = "it was written by bakeoff " + field("tool_version");
      else if (!j.contains("schema_version") || j["schema_version"] != kBundleSchemaVersion) differs = "its schema_version differs";
      if (options_.fresh) {
        fs::remove_all(out, ec);
      } else if (!differs.empty()) {
        return Invalid(fmt::format("{} holds the bundle of another experiment ({}); choose another --out, or pass "
                                   "--fresh to replace it",
                                   out.string(), differs));
      } else {
        resuming_ = true;
        if (std::string created = field("created_utc"); !created.empty()) started_at_ = created;
        log_(fmt::format("resuming the bundle in {}: finished phases are read back, not run again", out.string()));
      }
    } else if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
      // --fresh replaces a bundle, never a folder that holds something else.
      return Invalid(fmt::format("{} exists, is not empty and is not a study bundle (no manifest.json); choose another "
                                 "--out",
                                 out.string()));
    }
    fs::create_directories(out / "candidates", ec);
    if (ec) return MakeError(ErrorCode::kIo, fmt::format("{}: {}", out.string(), ec.message()));
    if (Status st = WriteFileAtomically(out / "manifest.json", DumpJson(Manifest(), 2)); !st.ok()) return st;
    if (study_text.ok()) {
      if (Status st = WriteFileAtomically(out / "study.yaml", study_text.value()); !st.ok()) return st;
    }
    if (catalog_) {
      if (Result<std::string> text = ReadFile(catalog_->file); text.ok()) {
        if (Status st = WriteFileAtomically(out / "catalog.yaml", text.value()); !st.ok()) return st;
      }
    }
    return Ok{};
  }

  Status KeepWorkload() {
    const fs::path dir = options_.out_dir / "workload";
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (Status st = workload::WriteTraceJsonl(*trace_, dir / "trace.jsonl"); !st.ok()) return st;
    const workload::Fingerprint fp = workload::FingerprintTrace(*trace_);
    if (Status st = WriteFileAtomically(options_.out_dir / "fingerprint.json", workload::FingerprintJson(fp)); !st.ok()) {
      return st;
    }
    results_.workload = WorkloadFiguresOf(fp, study_);
    log_(fmt::format("workload: {} requests at {:.3g} req/s, prompts {:.0f} tokens and answers {:.0f} on average{}",
                     results_.workload.requests, results_.workload.rate_per_s, results_.workload.input_tokens_mean,
                     results_.workload.output_tokens_mean,
                     results_.workload.prefix_reuse >= 0
                         ? fmt::format(", prefix reuse {:.0f}%", 100 * results_.workload.prefix_reuse)
                         : ""));
    return Ok{};
  }

  Status WriteGate() { return WriteFileAtomically(options_.out_dir / "gate.json", DumpJson(ToJson(results_.gate), 2)); }

  // Attached servers must serve the study's model: otherwise the candidates are not comparable.
  Status CheckComparable() {
    std::vector<std::string> problems;
    for (std::size_t i = 0; i < study_.candidates.size(); ++i) {
      const CandidateSpec& spec = study_.candidates[i];
      if (spec.kind != CandidateKind::kUrl || results_.candidates[i].eliminated) continue;
      Result<net::Endpoint> endpoint = net::ParseEndpoint(spec.url);
      if (!endpoint.ok()) {
        problems.push_back(fmt::format("{}: url: {}", spec.name, endpoint.error().message));
        continue;
      }
      target::StripApiVersionSuffix(endpoint.value());
      Result<target::TargetFacts> facts = target::Discover(endpoint.value(), net::ClientOptions{}, study_.model.name);
      if (!facts.ok()) {
        problems.push_back(fmt::format("{}: {}", spec.name, facts.error().message));
        continue;
      }
      const auto& listed = facts->listed_models;
      if (!listed.empty() && std::find(listed.begin(), listed.end(), study_.model.name) == listed.end()) {
        problems.push_back(fmt::format("{} serves {}, not the study's model {}: the candidates would not run the same "
                                       "model",
                                       spec.name, yaml::JoinNames(std::span<const std::string>(listed)),
                                       study_.model.name));
      }
      if (facts->max_context_tokens && *facts->max_context_tokens < study_.model.max_context) {
        problems.push_back(fmt::format("{} accepts {} tokens of context ({}), the study needs {}", spec.name,
                                       *facts->max_context_tokens, facts->max_context_source, study_.model.max_context));
      }
      Result<target::Detection> detection = target::DetectEngine(endpoint.value());
      if (detection.ok() && results_.candidates[i].engine.empty() && detection->adapter != nullptr) {
        results_.candidates[i].engine = std::string(detection->adapter->name);
      }
      if (detection.ok() && !detection->version.empty()) {
        results_.candidates[i].version = detection->version;
        results_.candidates[i].version_source = "discovered (" + detection->version_source + ")";
      }
    }
    if (problems.empty()) return Ok{};
    std::string all = "the candidates cannot be compared, so no load was sent:";
    for (const std::string& p : problems) all += "\n  " + p;
    return Invalid(all);
  }

  // --- Candidates' processes ---

  Result<target::CandidateSpec> TargetSpec(std::size_t i) {
    const CandidateSpec& spec = study_.candidates[i];
    target::CandidateSpec t;
    t.model = study_.model.name;
    t.api = study_.api == "completions" ? dialect::Api::kCompletions : dialect::Api::kChat;
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

  // The candidate's handle for load phases against a process (launch candidates); kept between
  // phases of one round and stopped when the round moves to the next candidate.
  Result<target::Candidate*> Process(std::size_t i) {
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

  void StopProcess(std::size_t i) {
    auto found = processes_.find(i);
    if (found == processes_.end()) return;
    if (found->second->Running()) found->second->Stop();
    processes_.erase(found);
  }

  // --- The budget (study/budget.h) ---

  // Before anything runs: each candidate's share for its probes.
  void PlanBudget() {
    std::size_t probing = 0;
    bool real = false;
    for (std::size_t i = 0; i < results_.candidates.size(); ++i) {
      if (results_.candidates[i].eliminated) continue;
      ++probing;
      real = real || study_.candidates[i].kind != CandidateKind::kEmulated;
    }
    std::string line = fmt::format("budget {:.0f} s", ToSeconds(study_.budget));
    if (study_.Runs(Phase::kProbes) && probing > 0) {
      probe_share_ = ProbeShare(study_, probing, real);
      line += fmt::format(": the probes of each of {} candidates up to {:.0f} s (a probe whose worst case does not "
                          "fit what is left is skipped)",
                          probing, ToSeconds(*probe_share_));
    }
    results_.budget_plan.push_back(line);
    log_(line);
  }

  // After the probes: what the load phases of the survivors share. Emulated candidates' load
  // runs on the virtual clock and takes no share.
  void PlanLoadBudget(const std::vector<std::size_t>& survivors) {
    std::size_t real = 0;
    for (std::size_t i : survivors) real += study_.candidates[i].kind == CandidateKind::kEmulated ? 0 : 1;
    const double per_candidate = CandidateLoadWeight(study_);
    pending_weight_ = per_candidate * static_cast<double>(real);
    if (pending_weight_ <= 0) return;
    const Nanos left = std::max(Nanos{0}, deadline_ - std::chrono::steady_clock::now());
    std::string line = fmt::format(
        "load phases: {:.0f} s left for {} candidate(s), shared by weight when each phase starts (single 1, "
        "sweep 1 per level, replay 2 per round, capacity 4): about {:.0f} s each",
        ToSeconds(left), real, ToSeconds(left) / static_cast<double>(real));
    if (study_.Runs(Phase::kSweep)) {
      line += fmt::format(", {:.0f} s per sweep level",
                          ToSeconds(SliceOf(left, 1, pending_weight_)));
    }
    if (study_.Runs(Phase::kCapacity)) {
      line += fmt::format(", {:.0f} s per capacity search",
                          ToSeconds(SliceOf(left, PhaseWeight(study_, Phase::kCapacity), pending_weight_)));
    }
    results_.budget_plan.push_back(line);
    log_(line);
  }

  // The slice of the time left that candidate i's run of `phase` gets now (none for a simulated
  // one), taking its weight off what is pending.
  std::optional<Nanos> TakeSlice(std::size_t i, Phase phase) {
    if (study_.candidates[i].kind == CandidateKind::kEmulated) return std::nullopt;
    const double weight = PhaseWeight(study_, phase);
    const Nanos left = std::max(Nanos{0}, deadline_ - std::chrono::steady_clock::now());
    const Nanos slice = SliceOf(left, weight, pending_weight_);
    pending_weight_ = std::max(0.0, pending_weight_ - weight);
    return slice;
  }

  void Cut(std::string what) {
    log_("budget: " + what);
    results_.budget_cuts.push_back(std::move(what));
  }

  // --- Phases ---

  fs::path Dir(std::size_t i, const std::string& leaf) const {
    return options_.out_dir / "candidates" / study_.candidates[i].name / leaf;
  }
  std::string Relative(const fs::path& p) const { return p.lexically_relative(options_.out_dir).string(); }

  // A finished phase's saved result, when resuming.
  // `read` turns it into the phase's value; a file that is not what this version writes is
  // reported and the phase measured again.
  template <typename Read>
  auto Saved(const fs::path& dir, Read read) const -> std::optional<decltype(read(nlohmann::json()))> {
    if (!resuming_) return std::nullopt;
    Result<std::string> text = ReadFile(dir / "result.json");
    if (!text.ok()) return std::nullopt;
    nlohmann::json j = nlohmann::json::parse(text.value(), nullptr, false);
    if (!j.is_discarded()) {
      try {
        return read(j);
      } catch (const nlohmann::json::exception& e) {
        log_(fmt::format("{}: cannot be read back ({}); measuring it again", Relative(dir / "result.json"), e.what()));
        return std::nullopt;
      }
    }
    log_(fmt::format("{}: not JSON; measuring it again", Relative(dir / "result.json")));
    return std::nullopt;
  }

  // Why a phase does not run now, or empty.
  std::string WhyNot(std::size_t i) const {
    if (halt_.user_stopped()) return "interrupted";
    if (halt_.budget_spent()) return fmt::format("the study's budget ({:.0f} s) was spent", ToSeconds(study_.budget));
    const CandidateResult& c = results_.candidates[i];
    if (c.eliminated) return "eliminated";
    if (!c.failed.empty()) return "the candidate failed earlier: " + c.failed;
    return "";
  }

  void Skip(std::size_t i, const std::string& what, const std::string& why) {
    results_.skipped.push_back(fmt::format("{}/{}: {}", study_.candidates[i].name, what, why));
  }

  void Probe(std::size_t i) {
    CandidateResult& c = results_.candidates[i];
    const CandidateSpec& spec = study_.candidates[i];
    const fs::path dir = Dir(i, "probes");
    GateRow& row = *results_.gate.Find(spec.name);
    if (std::optional<ProbeSummary> saved = Saved(dir, ProbeSummaryFromJson)) {
      c.probes = std::move(*saved);
      row.cells = c.probes.gate_cells;
      c.eliminated = row.Eliminated();
      results_.resumed.push_back(spec.name + "/probes");
      return;
    }
    if (std::string why = WhyNot(i); !why.empty()) {
      c.probes.skipped_reason = why;
      Skip(i, "probes", why);
      return;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    Result<target::CandidateSpec> target_spec = TargetSpec(i);
    Result<target::Candidate> candidate =
        target_spec.ok() ? target::Candidate::Create(target_spec.value()) : Result<target::Candidate>(target_spec.error());
    if (!candidate.ok()) {
      c.failed = "cannot be reached or started: " + candidate.error().message;
      return;
    }
    qualify::ProbeRunOptions run;
    run.out_dir = dir;
    run.only = study_.plan.probes;
    if (const target::EngineAdapter* adapter = target::FindAdapter(c.engine); adapter != nullptr) {
      for (const target::LogPhase& phase : adapter->cold_start) run.probe.phase_patterns.emplace_back(phase.name, phase.pattern);
    }
    if (study_.slo.cold_start_max) run.probe.cold_start_budget = *study_.slo.cold_start_max;
    run.budget = probe_share_;
    log_(fmt::format("{}: probes", spec.name));
    const qualify::ProbeRun probed = qualify::RunProbes(candidate.value(), run, halt_.flag(), log_);
    for (const std::string& skipped : probed.skipped_for_budget) {
      Cut(fmt::format("{}/probes: {} not run: skipped for the budget", spec.name, skipped));
    }
    const qualify::ProbedTarget described{target_spec->url, target_spec->launch ? "launch" : "attach",
                                          target_spec->launch ? fmt::format("{}", fmt::join(target_spec->launch->argv, " ")) : ""};
    const std::string probes_json = Relative(dir / "probes.json");
    if (Status st = WriteFileAtomically(dir / "probes.json", qualify::ProbesJson(probed, described)); !st.ok()) {
      log_(st.error().message);
    }
    if (probed.interrupted || halt_.halted()) {
      c.probes.skipped_reason = halt_.user_stopped() ? "interrupted" : "the budget was spent during the probes";
      Skip(i, "probes", c.probes.skipped_reason);
      return;
    }
    ProbeSummary& p = c.probes;
    p.ran = true;
    p.path = probes_json;
    p.disqualified = probed.Disqualified();
    for (const qualify::ProbeResult& r : probed.results) {
      p.verdicts.push_back(fmt::format("{}: {}", r.name, qualify::VerdictName(r.verdict)));
      for (const qualify::Finding& f : r.findings) p.findings.push_back(Judged(i, f));
      for (const qualify::Measurement& m : r.measurements) {
        if (r.name == "cold_start" && m.name == "first_answer") p.cold_start_s = m.value;
        if (r.name == "sigterm_drain" && m.name == "drain_time") p.drain_s = m.value;
      }
    }
    ApplyProbeEvidence(row, study_, probed, probes_json);
    p.gate_cells = row.cells;
    c.eliminated = row.Eliminated();
    if (c.eliminated) log_(fmt::format("{}: disqualified: {}", spec.name, row.Failures().back()));
    if (Status st = WriteFileAtomically(dir / "result.json", DumpJson(ToJson(p), 2)); !st.ok()) log_(st.error().message);
  }

  // A finding of candidate i's probes as the study judges it, beside the catalog's known limit
  // that names it.
  ProbeFinding Judged(std::size_t i, const qualify::Finding& f) const {
    const JudgedFinding judged = JudgeFinding(study_, f);
    ProbeFinding out{f.code, qualify::SeverityName(f.severity), f.message, std::string(JudgementName(judged.judgement)),
                     judged.breaks, judged.accepted_reason, "", f.evidence};
    if (const CatalogEntry* entry = Entry(study_.candidates[i]); entry != nullptr) {
      for (const CatalogEntry::KnownLimit& limit : entry->known_limits) {
        if (!limit.finding.empty() && CodeMatches(limit.finding, f.code)) {
          out.known_limit = limit.text;
        }
      }
    }
    return out;
  }

  // Where candidate i's load runs: a simulated engine, or its server (started when it is ours).
  Result<run::LoadTarget> Target(std::size_t i) {
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

  run::LoadJob Job(const fs::path& dir) const {
    run::LoadJob job;
    dialect::GenerationRequest& r = job.run.target.request;
    r.api = study_.api == "completions" ? dialect::Api::kCompletions : dialect::Api::kChat;
    r.model = study_.model.name;
    r.stream = true;
    r.ignore_eos = true;  // every candidate generates the workload's lengths: the same work
    job.run.seed = study_.traffic.seed;
    job.run.shape = TypicalShape();
    job.slo = study_.slo.latency;
    job.run.slo = job.slo.RequestThresholds();
    job.trace = trace_;
    job.out_dir = dir;
    job.flags = {{"study", study_.name}, {"study_sha256", results_.study_hash}};
    return job;
  }

  // The workload's median lengths, for the phases that send one shape (single, sweep).
  load::RequestShape TypicalShape() const {
    std::vector<double> in, out;
    for (const workload::TraceRequest& r : trace_->requests) {
      in.push_back(r.input_tokens);
      out.push_back(r.output_tokens);
    }
    std::sort(in.begin(), in.end());
    std::sort(out.begin(), out.end());
    load::RequestShape shape;
    shape.prompt_tokens = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(stats::NearestRank(in, 0.5)));
    shape.output_tokens = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(stats::NearestRank(out, 0.5)));
    return shape;
  }

  std::vector<load::StepSpec> Steps(Phase phase) const {
    std::vector<load::StepSpec> steps;
    const PlanSpec& plan = study_.plan;
    switch (phase) {
      case Phase::kSingle: {
        load::StepSpec s;
        s.mode = load::LoopMode::kClosed;
        s.concurrency = 1;
        s.limits.requests = plan.single_requests;
        s.limits.warmup_requests = 1;
        s.label = "single";
        steps.push_back(s);
        break;
      }
      case Phase::kSweep:
        for (std::uint32_t n : plan.concurrency) {
          load::StepSpec s;
          s.mode = load::LoopMode::kClosed;
          s.concurrency = n;
          s.limits.requests = plan.step_requests;
          s.limits.warmup_requests = n;
          s.label = fmt::format("concurrency={}", n);
          steps.push_back(s);
        }
        break;
      case Phase::kReplay: {
        load::StepSpec s;
        s.mode = load::LoopMode::kTrace;
        s.trace = trace_.get();
        s.time_scale = 1 / plan.replay_rate_scale;
        s.limits.requests = plan.replay_requests > 0 ? plan.replay_requests : trace_->requests.size();
        s.label = "replay";
        steps.push_back(s);
        break;
      }
      default:
        break;
    }
    return steps;
  }

  void LoadPhase(std::size_t i, Phase phase, std::uint32_t round) {
    CandidateResult& c = results_.candidates[i];
    const std::string name = fmt::format("{}-r{}", PhaseName(phase), round);
    const fs::path dir = Dir(i, name);
    // Its weight leaves the pending share whether it runs, is read back or is skipped.
    const std::optional<Nanos> slice = TakeSlice(i, phase);
    if (std::optional<PhaseResult> saved = Saved(dir, PhaseResultFromJson)) {
      if (!saved->error.empty()) c.failed = saved->error;
      c.emulated = c.emulated || saved->emulated;
      c.phases.push_back(std::move(*saved));
      results_.resumed.push_back(study_.candidates[i].name + "/" + name);
      return;
    }
    if (std::string why = WhyNot(i); !why.empty()) {
      Skip(i, name, why);
      return;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    PhaseResult result;
    result.phase = phase;
    result.round = round;
    result.emulated = c.emulated;
    Result<run::LoadTarget> target = Target(i);
    if (!target.ok()) {
      c.failed = fmt::format("{}: {}", name, target.error().message);
      log_(fmt::format("{}: failed: {}", study_.candidates[i].name, c.failed));
      return;
    }
    result.simulated = target->simulated;
    run::LoadJob job = Job(dir);
    job.run.steps = Steps(phase);
    std::vector<std::uint64_t> planned;
    const Nanos per_step = slice ? *slice / static_cast<std::int64_t>(std::max<std::size_t>(1, job.run.steps.size())) : Nanos{0};
    for (load::StepSpec& step : job.run.steps) {
      planned.push_back(step.limits.requests.value_or(0));
      if (slice && !target->simulated) {
        step.limits.duration = std::max<Nanos>(std::chrono::seconds(1), per_step);
      }
    }
    log_(fmt::format("{}: {} ({}){}", study_.candidates[i].name, PhaseName(phase), round + 1,
                     target->simulated ? " on the virtual clock"
                                       : slice ? fmt::format(", {:.0f} s of the budget", ToSeconds(*slice)) : ""));
    Result<run::BenchOutcome> outcome = run::RunLoadJob(target.value(), std::move(job), halt_.flag(), Quiet());
    if (!outcome.ok()) {
      c.failed = fmt::format("{}: {}", name, outcome.error().message);
      log_(fmt::format("{}: failed: {}", study_.candidates[i].name, c.failed));
      return;
    }
    for (const analyze::StepAnalysis& step : outcome->steps) {
      result.steps.push_back(FiguresOf(step, Relative(outcome->records_path)));
      if (!step.stopped_reason.empty()) result.error = c.failed = fmt::format("{}: {}", name, step.stopped_reason);
    }
    if (phase == Phase::kReplay && !result.steps.empty()) HeadOfLine(outcome->records_path, result.steps.front());
    result.unequal_work = outcome->unequal_work;
    // A server that says it is bakeoff's emulated engine is labelled so, however it was started.
    if (outcome->emulated) result.emulated = c.emulated = true;
    if (outcome->interrupted || halt_.halted()) {
      Skip(i, name, halt_.user_stopped() ? "interrupted" : "cut when the budget was spent");
      return;
    }
    if (Status st = WriteFileAtomically(dir / "result.json", DumpJson(ToJson(result), 2)); !st.ok()) {
      log_(st.error().message);
    }
    for (std::size_t k = 0; k < result.steps.size() && k < planned.size() && result.error.empty(); ++k) {
      if (slice && result.steps[k].measured < planned[k]) {
        Cut(fmt::format("{}/{} {}: {} of {} requests measured in its {:.0f} s of the budget (wider confidence "
                        "intervals)",
                        study_.candidates[i].name, name, result.steps[k].label, result.steps[k].measured, planned[k],
                        ToSeconds(per_step)));
      }
    }
    c.phases.push_back(std::move(result));
  }

  // The rate to start the capacity search at: what one request's latency allows a few at a time.
  double StartRate(std::size_t i) const {
    if (study_.plan.capacity_start_per_s > 0) return study_.plan.capacity_start_per_s;
    double e2e_ms = 0;
    for (const PhaseResult& p : results_.candidates[i].phases) {
      if (p.phase == Phase::kSingle && !p.steps.empty()) e2e_ms = p.steps.front().e2e_p50_ms;
    }
    const double guess = e2e_ms > 0 ? 4000 / e2e_ms : 1;
    return std::clamp(guess, study_.plan.capacity_min_per_s, study_.plan.capacity_max_per_s);
  }

  void Capacity(std::size_t i) {
    CandidateResult& c = results_.candidates[i];
    const fs::path dir = Dir(i, "capacity");
    const std::optional<Nanos> slice = TakeSlice(i, Phase::kCapacity);
    if (std::optional<CapacitySummary> saved = Saved(dir, CapacitySummaryFromJson)) {
      c.capacity = std::move(*saved);
      c.emulated = c.emulated || c.capacity.emulated;
      results_.resumed.push_back(study_.candidates[i].name + "/capacity");
      return;
    }
    if (std::string why = WhyNot(i); !why.empty()) {
      c.capacity.skipped_reason = why;
      Skip(i, "capacity", why);
      return;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    Result<run::LoadTarget> target = Target(i);
    if (!target.ok()) {
      c.failed = "capacity: " + target.error().message;
      return;
    }
    analyze::CapacitySearchOptions o;
    o.min_rate_per_s = study_.plan.capacity_min_per_s;
    o.max_rate_per_s = study_.plan.capacity_max_per_s;
    o.start_rate_per_s = StartRate(i);
    o.precision = study_.plan.capacity_precision;
    o.repeats = study_.plan.repeats;
    o.target_attainment = study_.slo.attainment;
    o.min_availability = study_.slo.availability;
    if (Status st = analyze::ValidateCapacitySearchOptions(o); !st.ok()) {
      c.failed = st.error().message;
      return;
    }
    // A trial replays the workload's first requests, scaled in time so that they arrive at the rate
    // asked: the scale comes from those requests' own span, not the whole workload's mean (a
    // bursty workload's first minutes are not its average).
    const std::uint64_t warmup = std::max<std::uint64_t>(1, study_.plan.step_requests / 10);
    const double window_rate = WindowRate(*trace_, warmup + study_.plan.step_requests);
    const double workload_rate = window_rate > 0 ? window_rate : std::max(results_.workload.rate_per_s, 1e-9);
    std::map<double, std::vector<StepFigures>> trials;
    // The search ends at its slice of the budget with what it has bracketed by then, and no trial
    // takes more than a fifth of the slice, so that several rates fit.
    std::optional<Halt> slice_halt;
    if (slice && !target->simulated) slice_halt.emplace(halt_.flag(), std::chrono::steady_clock::now() + *slice);
    const std::atomic<bool>& stop = slice_halt ? slice_halt->flag() : halt_.flag();
    const std::optional<Nanos> trial_cap =
        slice_halt ? std::optional<Nanos>(std::max<Nanos>(std::chrono::seconds(5), *slice / 5)) : std::nullopt;
    log_(fmt::format("{}: capacity search from {:.3g} req/s{}", study_.candidates[i].name, o.start_rate_per_s,
                     target->simulated ? " on the virtual clock"
                     : slice_halt      ? fmt::format(", {:.0f} s of the budget", ToSeconds(*slice))
                                       : ""));
    auto measure = [&](double rate, std::uint32_t repeat) -> Result<analyze::RateTrial> {
      const fs::path trial_dir = dir / fmt::format("rate-{:.4g}-r{}", rate, repeat);
      run::LoadJob job = Job(trial_dir);
      // A repeat is a new sample: other prompt words, and on the virtual clock other step noise.
      job.run.seed = study_.traffic.seed + repeat;
      run::LoadTarget repeat_target = target.value();
      repeat_target.sim.engine.seed += repeat;
      load::StepSpec s;
      s.mode = load::LoopMode::kTrace;
      s.trace = trace_.get();
      s.time_scale = workload_rate / rate;
      s.limits.requests = study_.plan.step_requests;
      s.limits.duration = trial_cap;
      s.limits.warmup_requests = warmup;
      s.label = fmt::format("rate={:.4g}/s", rate);
      job.run.steps = {s};
      Result<run::BenchOutcome> outcome = run::RunLoadJob(repeat_target, std::move(job), stop, Quiet());
      if (!outcome.ok()) return outcome.error();
      if (outcome->steps.empty()) return MakeError(ErrorCode::kUnavailable, "the step did not run");
      const analyze::StepAnalysis& step = outcome->steps.front();
      analyze::RateTrial t = analyze::TrialFromStep(step, rate, repeat);
      t.interrupted = t.interrupted || outcome->interrupted;
      if (outcome->emulated) c.capacity.emulated = c.emulated = true;
      t.where = Relative(outcome->records_path);
      trials[rate].push_back(FiguresOf(step, t.where));
      log_(fmt::format("{}:   {:.4g} req/s (repeat {}): attainment {:.1f}%, TTFT p99 {:.0f} ms",
                       study_.candidates[i].name, rate, repeat + 1, 100 * step.slo_attainment, step.ttft_ms.p99.value));
      return t;
    };
    const analyze::CapacityResult found = analyze::SearchCapacity(o, measure, stop);
    std::vector<std::vector<StepFigures>> per_point;
    for (const analyze::RatePoint& p : found.points) per_point.push_back(trials[p.rate_per_s]);
    c.capacity = SummarizeCapacity(found, per_point);
    c.capacity.simulated = target->simulated;
    c.capacity.emulated = c.emulated;
    c.capacity.path = Relative(dir / "result.json");
    const bool cut_at_slice = slice_halt && found.interrupted && !halt_.halted();
    if (slice_halt) NoteCapacityCut(i, found, per_point, *slice, cut_at_slice);
    if ((found.interrupted || halt_.halted()) && !cut_at_slice) {
      c.capacity.skipped_reason = halt_.user_stopped() ? "interrupted" : "cut when the budget was spent";
      Skip(i, "capacity", c.capacity.skipped_reason);
      c.capacity.ran = false;
      return;
    }
    if (found.bracket == analyze::Bracket::kUnfinished && !found.stopped_reason.empty() && !cut_at_slice) {
      c.capacity.error = found.stopped_reason;
    }
    if (cut_at_slice) c.capacity.stopped_reason = "ended at its slice of the budget";
    if (Status st = WriteFileAtomically(dir / "result.json", DumpJson(ToJson(c.capacity), 2)); !st.ok()) {
      log_(st.error().message);
    }
    log_(fmt::format("{}: capacity {}", study_.candidates[i].name,
                     c.capacity.capacity_per_s >= 0 ? fmt::format("{:.3g} req/s ({})", c.capacity.capacity_per_s, c.capacity.bracket)
                                                    : c.capacity.bracket));
  }

  // What the capacity search's slice of the budget cost: trials that measured fewer requests than
  // planned, and a search ended before its bracket was narrow enough (its result a lower bound).
  void NoteCapacityCut(std::size_t i, const analyze::CapacityResult& found,
                       const std::vector<std::vector<StepFigures>>& per_point, Nanos slice, bool cut_at_slice) {
    const std::string& name = study_.candidates[i].name;
    std::size_t short_trials = 0, all_trials = 0;
    for (const std::vector<StepFigures>& point : per_point) {
      for (const StepFigures& t : point) {
        ++all_trials;
        short_trials += t.measured < study_.plan.step_requests ? 1 : 0;
      }
    }
    if (short_trials > 0) {
      Cut(fmt::format("{}/capacity: {} of {} trials measured fewer than {} requests (a trial may take a fifth of the "
                      "search's {:.0f} s)",
                      name, short_trials, all_trials, study_.plan.step_requests, ToSeconds(slice)));
    }
    if (!cut_at_slice) return;
    const std::string what =
        found.capacity_per_s
            ? fmt::format("capacity is at least {:.3g} req/s{}", *found.capacity_per_s,
                          found.first_failing_per_s ? fmt::format(" and below {:.3g}", *found.first_failing_per_s) : "")
            : found.first_failing_per_s ? fmt::format("no rate passed; {:.3g} req/s failed", *found.first_failing_per_s)
                                        : "no rate was measured whole";
    const std::string note = fmt::format("the search ended at its {:.0f} s of the budget after {} rate(s): {}",
                                         ToSeconds(slice), found.points.size(), what);
    results_.candidates[i].capacity.notes.push_back(note);
    Cut(fmt::format("{}/capacity: {}", name, note));
  }

  // Runs' own progress lines are not repeated: the study prints one line per phase.
  std::function<void(const std::string&)> Quiet() const {
    return [](const std::string&) {};
  }

  nlohmann::json Manifest() const {
    nlohmann::json engines = nlohmann::json::array();
    bool emulated = false;
    for (const CandidateResult& c : results_.candidates) {
      emulated = emulated || c.emulated;
      engines.push_back({{"candidate", c.name}, {"engine", c.engine}, {"version", c.version},
                         {"version_source", c.version_source}, {"emulated", c.emulated}});
    }
    return {{"schema_version", kBundleSchemaVersion},
            {"tool", "bakeoff"},
            {"tool_version", BAKEOFF_VERSION},
            {"created_utc", started_at_},
            {"finished_utc", UtcNowIso()},
            {"study", study_.name},
            {"study_file", study_.file.string()},
            {"study_sha256", results_.study_hash},
            {"catalog_sha256", catalog_hash_},
            {"seeds", {{"traffic", study_.traffic.seed}}},
            {"host", HostJson()},
            {"emulated", emulated},
            {"engines", engines},
            {"resumed", results_.resumed},
            {"skipped", results_.skipped},
            {"budget_plan", results_.budget_plan},
            {"budget_cuts", results_.budget_cuts},
            {"budget_s", ToSeconds(study_.budget)},
            {"budget_spent", !halt_.user_stopped() && halt_.budget_spent()},
            {"interrupted", halt_.user_stopped()}};
  }

  const Study& study_;
  const StudyRunOptions& options_;
  const std::function<void(const std::string&)>& log_;
  const MonoTime deadline_;
  Halt halt_;
  StudyResults results_;
  std::optional<Catalog> catalog_;
  std::string catalog_hash_;
  std::vector<LintFinding> lint_;
  std::map<std::string, emulate::EnginePreset> presets_;
  std::shared_ptr<workload::Trace> trace_;
  bool resuming_ = false;
  std::string started_at_;
  std::map<std::size_t, std::unique_ptr<target::Candidate>> processes_;
  std::set<std::size_t> detected_;  // launched candidates already asked for their version
  std::optional<Nanos> probe_share_;  // each candidate's probes' share of the budget
  double pending_weight_ = 0;         // of the load phase runs not yet started
};

}  // namespace

Result<StudyResults> RunStudy(const Study& study, const StudyRunOptions& options, const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log) {
  StudyRunner runner(study, options, stop, log);
  return runner.Run();
}

}  // namespace bakeoff::study
