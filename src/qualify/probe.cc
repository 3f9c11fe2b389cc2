// qualify/probe.cc: result bookkeeping, evidence files, and the probe runner.
#include "qualify/probe.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "core/json_dump.h"
#include "core/json_text.h"
#include "qualify/probes.h"

namespace bakeoff::qualify {
namespace {

constexpr std::size_t kEvidenceBodyBytes = 64 * 1024;
constexpr Nanos kAttachWait = std::chrono::seconds(10);

// An evidence body as a JSON string: cut at a character boundary past kEvidenceBodyBytes, and
// valid UTF-8 (the bad-input battery sends invalid UTF-8, and servers answer with anything).
nlohmann::json Text(std::string_view text) {
  const std::string_view kept = Utf8Prefix(text, kEvidenceBodyBytes);
  if (kept.size() == text.size()) return ValidUtf8(text);
  return fmt::format("{}... [{} more bytes]", ValidUtf8(kept), text.size() - kept.size());
}

bool Selected(const ProbeRunOptions& options, std::string_view name) {
  auto has = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  return (options.only.empty() || has(options.only)) && !has(options.skip);
}

}  // namespace

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kDisqualifying:
      return "disqualifying";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "?";
}

const char* CheckStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kUnsupported:
      return "unsupported";
  }
  return "?";
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "fail";
    case Verdict::kNotRun:
      return "not_run";
  }
  return "?";
}

void ProbeResult::Find(Severity severity, std::string code, std::string message,
                       std::vector<std::string> evidence) {
  // Messages quote what the server sent; they are kept valid UTF-8 for every writer after this.
  findings.push_back({severity, name + "." + code, ValidUtf8(message), std::move(evidence)});
}

void ProbeResult::Measure(std::string measurement, double value, std::string unit) {
  measurements.push_back({std::move(measurement), value, std::move(unit)});
}

void ProbeResult::AddCheck(std::string check, CheckStatus status, std::string detail,
                           std::vector<std::string> evidence) {
  checks.push_back({std::move(check), status, std::move(detail), std::move(evidence)});
}

void ProbeResult::Conclude() {
  if (verdict == Verdict::kNotRun) return;
  verdict = Verdict::kPass;
  for (const Finding& finding : findings) {
    if (finding.severity == Severity::kDisqualifying) verdict = Verdict::kFail;
    if (finding.severity == Severity::kWarning && verdict == Verdict::kPass)
      verdict = Verdict::kWarn;
  }
}

Nanos ProbeContext::Remaining() const {
  return std::max(Nanos{0},
                  std::chrono::duration_cast<Nanos>(deadline - std::chrono::steady_clock::now()));
}

std::string Evidence::Write(const std::string& name, std::string_view content) const {
  const std::filesystem::path relative = std::filesystem::path("evidence") / probe_ / name;
  std::error_code ec;
  std::filesystem::create_directories((out_dir_ / relative).parent_path(), ec);
  (void)WriteFileAtomically(out_dir_ / relative, content);
  return relative.string();
}

std::string Evidence::WriteExchange(const std::string& name, const std::string& method,
                                    const std::string& path, std::string_view request_body,
                                    int status, std::string_view response_body,
                                    std::string_view error, Nanos took) const {
  nlohmann::ordered_json j;
  j["request"] = {{"method", method}, {"path", path}, {"body", Text(request_body)}};
  j["response"] = {{"status", status}, {"body", Text(response_body)}};
  if (!error.empty()) j["error"] = Text(error);
  j["took_ms"] = std::chrono::duration<double, std::milli>(took).count();
  return Write(name + ".json",
               DumpJson(j, 2));
}

const std::vector<ProbeInfo>& AllProbes() {
  using std::chrono::seconds;
  static const std::vector<ProbeInfo> probes = {
      {"cold_start", "spawn to port, ready and first answer, with log phases", true, true,
       seconds(660), ProbeColdStart},
      {"readiness", "health against real requests from the spawn on, and under load", false, true,
       seconds(700), ProbeReadiness},
      {"compatibility", "the OpenAI API features a benchmark relies on, one check each", false,
       false, seconds(240), ProbeCompatibility},
      {"bad_input", "invalid requests get a 4xx; no 5xx, hang or death; health after each", false,
       false, seconds(420), ProbeBadInput},
      {"quality", "a prompt set asked greedily and scored against its references", false, false,
       seconds(600), ProbeQuality},
      {"observability", "metrics page: which operator signals exist, and when counters move", false,
       false, seconds(180), ProbeObservability},
      {"cancellation", "abandoned streams stop their work and capacity comes back", false, false,
       seconds(120), ProbeCancellation},
      {"overload", "shedding, queueing and recovery far above capacity", false, false, seconds(120),
       ProbeOverload},
      {"sigterm_drain", "streams in flight at SIGTERM finish or end visibly; exit in the grace",
       true, false, seconds(180), ProbeSigtermDrain},
      {"restart", "SIGKILL, relaunch, time to the first good answer", true, false, seconds(660),
       ProbeRestart},
  };
  return probes;
}

std::string Evidence::Relative(const std::filesystem::path& path) const {
  std::error_code ec;
  const std::filesystem::path relative = std::filesystem::proximate(path, out_dir_, ec);
  return ec ? path.string() : relative.string();
}

Status ValidateProbeSelection(const ProbeRunOptions& options) {
  std::string known;
  for (const ProbeInfo& probe : AllProbes())
    known += (known.empty() ? "" : ", ") + std::string(probe.name);
  for (const auto* names : {&options.only, &options.skip}) {
    for (const std::string& name : *names) {
      const bool exists = std::any_of(AllProbes().begin(), AllProbes().end(),
                                      [&](const ProbeInfo& probe) { return probe.name == name; });
      if (!exists) {
        return MakeError(ErrorCode::kInvalidInput,
                         fmt::format("unknown probe \"{}\" (known: {})", name, known));
      }
    }
  }
  return Ok{};
}

bool ProbeRun::Disqualified() const {
  return std::any_of(results.begin(), results.end(),
                     [](const ProbeResult& r) { return r.verdict == Verdict::kFail; });
}

bool ProbeRun::NothingRan() const {
  return std::all_of(results.begin(), results.end(),
                     [](const ProbeResult& r) { return r.verdict == Verdict::kNotRun; });
}

ProbeRun RunProbes(target::Candidate& candidate, const ProbeRunOptions& options,
                   const std::atomic<bool>& stop,
                   const std::function<void(const std::string&)>& log) {
  ProbeRun run;
  const MonoTime run_start = std::chrono::steady_clock::now();
  std::string& unavailable = run.unavailable;
  for (const ProbeInfo& info : AllProbes()) {
    if (!Selected(options, info.name)) continue;
    ProbeResult result;
    result.name = std::string(info.name);
    const MonoTime start = std::chrono::steady_clock::now();
    auto not_run = [&](std::string reason) {
      result.verdict = Verdict::kNotRun;
      result.not_run_reason = std::move(reason);
    };
    if (stop) {
      run.interrupted = true;
      not_run("interrupted");
    } else if (info.needs_launch && !candidate.launch_mode()) {
      not_run("attach mode: this probe signals or relaunches the process; pass --launch");
    } else if (info.needs_fresh_start && candidate.launch_mode()) {
      if (candidate.Running()) candidate.Stop();
    } else if (!unavailable.empty()) {
      not_run(unavailable);
    } else {
      // A launch gets the whole start-up budget; an attached server is either up or not.
      const Nanos wait = candidate.launch_mode()
                             ? options.probe.cold_start_budget
                             : std::min<Nanos>(options.probe.cold_start_budget, kAttachWait);
      Status up = candidate.EnsureUp(wait);
      if (!up.ok()) {
        // Said once: later probes do not wait for it again.
        unavailable = fmt::format("the candidate is not up (found before {}): {}", info.name,
                                  up.error().message);
        not_run(unavailable);
      }
    }
    if (result.verdict != Verdict::kNotRun) {
      log(fmt::format("probe {}: {}", info.name, info.summary));
      const Evidence evidence(options.out_dir, result.name);
      ProbeContext context{candidate, evidence, options.probe, stop, log, start + info.time_bound};
      info.run(context, result);
      if (stop) {
        run.interrupted = true;
        result.Find(Severity::kInfo, "interrupted",
                    "the probe was interrupted; its result is partial");
      }
    }
    result.Conclude();
    result.took = std::chrono::steady_clock::now() - start;
    log(fmt::format("probe {}: {}{}", info.name, VerdictName(result.verdict),
                    result.not_run_reason.empty() ? "" : " (" + result.not_run_reason + ")"));
    run.results.push_back(std::move(result));
  }
  if (candidate.launch_mode() && candidate.Running()) candidate.Stop();
  if (Result<target::TargetFacts> facts = candidate.Facts(); facts.ok()) {
    run.model = facts->model;
    run.emulated = facts->emulated;
  }
  run.took = std::chrono::steady_clock::now() - run_start;
  return run;
}

}  // namespace bakeoff::qualify
