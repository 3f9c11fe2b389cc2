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

Nanos PatienceFromPace(Nanos long_answer) {
  return std::clamp<Nanos>(long_answer * kPatiencePerAnswer, kPatienceFloor, kPatienceCeiling);
}

const std::vector<ProbeInfo>& AllProbes() {
  using std::chrono::seconds;
  // Each worst case is the sum of the probe's own waits, in answer_within (A) where a wait is for
  // an answer, and in the start-up budget (C) where it is for a launch.
  static const std::vector<ProbeInfo> probes = {
      {"cold_start", "spawn to port, ready and first answer, with log phases", true, true, false,
       [](const ProbeOptions& o, Nanos) -> Nanos { return o.cold_start_budget + seconds(35); },
       ProbeColdStart},
      {"readiness", "health against real requests from the spawn on, and under load", false, true, false,
       [](const ProbeOptions& o, Nanos) -> Nanos {
         return o.cold_start_budget + seconds(45) + o.answer_within;
       },
       ProbeReadiness},
      {"compatibility", "the OpenAI API features a benchmark relies on, one check each", false,
       false, false, [](const ProbeOptions& o, Nanos) -> Nanos { return 8 * o.answer_within; },
       ProbeCompatibility},
      {"bad_input", "invalid requests get a 4xx; no 5xx, hang or death; health after each", false,
       false, false,
       [](const ProbeOptions& o, Nanos) -> Nanos { return 4 * o.answer_within + seconds(30); },
       ProbeBadInput},
      {"quality", "a prompt set asked greedily and scored against its references", false, false, true,
       [](const ProbeOptions& o, Nanos) -> Nanos { return 20 * o.answer_within; }, ProbeQuality},
      {"observability", "metrics page: which operator signals exist, and when counters move", false,
       false, false, [](const ProbeOptions& o, Nanos) -> Nanos { return 6 * o.answer_within; },
       ProbeObservability},
      {"cancellation", "abandoned streams stop their work and capacity comes back", false, false, true,
       [](const ProbeOptions& o, Nanos) -> Nanos { return 4 * o.answer_within; },
       ProbeCancellation},
      {"overload", "shedding, queueing and recovery far above capacity", false, false, false,
       [](const ProbeOptions& o, Nanos) -> Nanos {
         return o.overload_duration + 3 * o.answer_within + seconds(30);
       },
       ProbeOverload},
      {"sigterm_drain", "streams in flight at SIGTERM finish or end visibly; exit in the grace",
       true, false, false,
       [](const ProbeOptions& o, Nanos grace) -> Nanos {
         return 2 * o.answer_within + grace + seconds(30);
       },
       ProbeSigtermDrain},
      {"restart", "SIGKILL, relaunch, time to the first good answer", true, false, false,
       [](const ProbeOptions& o, Nanos) -> Nanos {
         return o.cold_start_budget + o.answer_within + seconds(30);
       },
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
  ProbeOptions paced = options.probe;
  if (paced.answer_within > Nanos{0}) run.answer_within_source = "given";
  // Once the candidate serves: one long answer at idle sets answer_within (when not given).
  auto measure_pace = [&] {
    if (paced.answer_within > Nanos{0}) return;
    if (!dialect::ApiGenerates(candidate.spec().api)) {
      // A pooling answer has no length to scale: the time of one long text is the pace.
      std::string text = "A long passage about a lighthouse keeper:";
      for (int w = 0; w < 256; ++w) text += " lighthouse";
      target::GenerationAnswer answer = candidate.Generate(text, 1, kPatienceCeiling);
      // A server whose batch is shorter than the text (llama.cpp's -ub) refuses it: time a short
      // one.
      if (!answer.ok) answer = candidate.Generate("A lighthouse keeper.", 1, kPatienceCeiling);
      paced.answer_within = answer.ok ? PatienceFromPace(answer.took) : kPatienceCeiling;
      run.answer_within_source =
          answer.ok ? fmt::format("{} x one text at idle ({:.2f} s), within [{:.0f} s, {:.0f} s]",
                                  kPatiencePerAnswer, Seconds(answer.took), Seconds(kPatienceFloor),
                                  Seconds(kPatienceCeiling))
                    : fmt::format("the ceiling: the pace request failed ({})", answer.error);
      log(fmt::format("probes wait {:.0f} s for one answer: {}", Seconds(paced.answer_within),
                      run.answer_within_source));
      return;
    }
    const target::GenerationAnswer answer = candidate.Generate(
        "Tell a long story about a lighthouse keeper.", paced.long_output_tokens, kPatienceCeiling);
    const std::uint64_t tokens = answer.completion_tokens.value_or(0);
    if (!answer.ok || tokens == 0) {
      paced.answer_within = kPatienceCeiling;
      run.answer_within_source = fmt::format("the ceiling: the pace request failed ({})",
                                             answer.ok ? "no usage" : answer.error);
    } else {
      const Nanos long_answer =
          answer.took * paced.long_output_tokens / tokens;
      paced.answer_within = PatienceFromPace(long_answer);
      run.answer_within_source = fmt::format(
          "{} x a {}-token answer at idle ({:.2f} s for {} tokens), within [{:.0f} s, {:.0f} s]",
          kPatiencePerAnswer, paced.long_output_tokens, Seconds(answer.took), tokens,
          Seconds(kPatienceFloor), Seconds(kPatienceCeiling));
    }
    log(fmt::format("probes wait {:.0f} s for one answer: {}", Seconds(paced.answer_within),
                    run.answer_within_source));
  };
  for (const ProbeInfo& info : AllProbes()) {
    if (!Selected(options, info.name)) continue;
    ProbeResult result;
    result.name = std::string(info.name);
    const MonoTime start = std::chrono::steady_clock::now();
    auto not_run = [&](std::string reason) {
      result.verdict = Verdict::kNotRun;
      result.not_run_reason = std::move(reason);
    };
    // Before the pace is known (the fresh-start probes come first), waits take the ceiling.
    ProbeOptions now = paced;
    if (now.answer_within <= Nanos{0}) now.answer_within = kPatienceCeiling;
    // False, and the probe not run, when its worst case does not fit what is left of the budget.
    auto fits = [&] {
      const Nanos worst = info.worst_case(now, candidate.spec().grace);
      const Nanos used = std::chrono::steady_clock::now() - run_start;
      const Nanos left = options.budget ? std::max(Nanos{0}, *options.budget - used) : Nanos::max();
      if (worst <= left) return true;
      not_run(
          fmt::format("skipped for the budget: its worst case is {:.0f} s, {:.0f} s of the "
                      "probes' {:.0f} s were left",
                      Seconds(worst), Seconds(left), Seconds(*options.budget)));
      run.skipped_for_budget.push_back(fmt::format("{} (worst case {:.0f} s, {:.0f} s left)",
                                                   info.name, Seconds(worst), Seconds(left)));
      return false;
    };
    if (stop) {
      run.interrupted = true;
      not_run("interrupted");
    } else if (info.generation_only && !dialect::ApiGenerates(candidate.spec().api)) {
      not_run(fmt::format("the {} route generates nothing", dialect::ApiName(candidate.spec().api)));
    } else if (info.needs_launch && !candidate.launch_mode()) {
      not_run("attach mode: this probe signals or relaunches the process; pass --launch");
    } else if (info.needs_fresh_start && candidate.launch_mode()) {
      if (fits() && candidate.Running()) candidate.Stop();
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
      } else {
        measure_pace();  // the worst case below counts in the candidate's own pace
        now = paced;
        (void)fits();
      }
    }
    if (result.verdict != Verdict::kNotRun) {
      log(fmt::format("probe {}: {}", info.name, info.summary));
      const Evidence evidence(options.out_dir, result.name);
      result.worst_case = info.worst_case(now, candidate.spec().grace);
      ProbeContext context{candidate, evidence, now, stop, log, start + result.worst_case};
      info.run(context, result);
      if (stop) {
        run.interrupted = true;
        result.Find(Severity::kInfo, "interrupted",
                    "the probe was interrupted; its result is partial");
      }
      // A fresh-start probe leaves the candidate serving: the pace is taken there.
      if (candidate.Running() && !stop) measure_pace();
    }
    result.Conclude();
    result.took = std::chrono::steady_clock::now() - start;
    log(fmt::format("probe {}: {}{}", info.name, VerdictName(result.verdict),
                    result.not_run_reason.empty() ? "" : " (" + result.not_run_reason + ")"));
    run.results.push_back(std::move(result));
  }
  run.answer_within = paced.answer_within;
  if (candidate.launch_mode() && candidate.Running()) candidate.Stop();
  if (Result<target::TargetFacts> facts = candidate.Facts(); facts.ok()) {
    run.model = facts->model;
    run.emulated = facts->emulated;
  }
  run.took = std::chrono::steady_clock::now() - run_start;
  return run;
}

}  // namespace bakeoff::qualify
