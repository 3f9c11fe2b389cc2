// qualify/probe.h
//
// Owns: what a qualification probe is and returns, and running a selection of them against one
// candidate. A probe checks one thing that can disqualify an engine before any benchmark
// (readiness, cold start, compatibility, cancellation, overload, SIGTERM drain, restart, bad
// input, observability, quality) and returns a ProbeResult: checks, measurements and findings,
// each finding with its evidence (files in the output folder). The verdict follows from the
// findings: any disqualifying finding fails the probe; warnings alone make it "warn".
// Every probe has a worst case known before it starts (its deadline, from the options and the
// patience answer_within, itself taken from the candidate's pace unless given); a candidate that
// dies during one makes that probe report it, and the runner brings the candidate back (launch
// mode) before the next. Does not own: the candidate's process and HTTP calls (target/candidate.h),
// the probes' own logic (qualify/*_probes.cc), probes.json's rendering (qualify/probe_report.h).
//
// Thread-safety: RunProbes blocks; `stop` may be set from a signal watcher.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "target/candidate.h"

namespace bakeoff::qualify {

enum class Severity { kDisqualifying, kWarning, kInfo };
const char* SeverityName(Severity severity);

struct Finding {
  Severity severity = Severity::kDisqualifying;
  std::string code;     // stable, "<probe>.<what>", e.g. "readiness.ready_before_serving"
  std::string message;  // one or two sentences with the numbers
  std::vector<std::string> evidence;  // paths relative to the output folder
};

enum class CheckStatus { kPass, kFail, kUnsupported };
const char* CheckStatusName(CheckStatus status);

// One item of a probe that has several (the compatibility list, the bad-input battery).
struct Check {
  std::string name;
  CheckStatus status = CheckStatus::kPass;
  std::string detail;
  std::vector<std::string> evidence;
};

struct Measurement {
  std::string name;  // "time_to_ready"
  double value = 0;
  std::string unit;  // "s", "ms", "requests", ...
};

enum class Verdict { kPass, kWarn, kFail, kNotRun };
const char* VerdictName(Verdict verdict);

struct ProbeResult {
  std::string name;
  Verdict verdict = Verdict::kPass;
  std::string not_run_reason;  // set with kNotRun
  std::vector<Check> checks;
  std::vector<Measurement> measurements;
  std::vector<Finding> findings;
  Nanos worst_case{0};  // its deadline, from the start (0 when it did not run)
  Nanos took{0};

  void Find(Severity severity, std::string code, std::string message,
            std::vector<std::string> evidence = {});
  void Measure(std::string name, double value, std::string unit);
  void AddCheck(std::string name, CheckStatus status, std::string detail,
                std::vector<std::string> evidence = {});
  // Sets the verdict from the findings (kNotRun is kept).
  void Conclude();
};

// Writes a probe's evidence under <out>/evidence/<probe>/ and returns the path relative to <out>.
class Evidence {
 public:
  Evidence(std::filesystem::path out_dir, std::string probe)
      : out_dir_(std::move(out_dir)), probe_(std::move(probe)) {}
  // Writes (replaces) `name` with `content`; on a write failure returns the path all the same
  // and the failure is in the text of the next call's file (evidence never stops a probe).
  std::string Write(const std::string& name, std::string_view content) const;
  // A request and its answer as one JSON document: method, path, request body, status, headers,
  // response body (bodies cut at 64 KiB), error, took_ms.
  std::string WriteExchange(const std::string& name, const std::string& method,
                            const std::string& path, std::string_view request_body, int status,
                            std::string_view response_body, std::string_view error,
                            Nanos took) const;
  // `path` (e.g. a log file in the output folder) relative to the output folder, for findings.
  std::string Relative(const std::filesystem::path& path) const;
  const std::filesystem::path& out_dir() const { return out_dir_; }

 private:
  std::filesystem::path out_dir_;
  std::string probe_;
};

struct ProbeOptions {
  // Concurrency that saturates the candidate (overload and readiness-under-load probes drive more).
  std::uint32_t saturation_concurrency = 32;
  Nanos overload_duration = std::chrono::seconds(10);
  std::uint32_t drain_streams = 8;         // streams in flight at SIGTERM
  std::uint32_t cancel_streams = 8;        // streams cancelled per phase
  std::uint32_t long_output_tokens = 256;  // long enough to still be generating when acted upon
  Nanos cold_start_budget = std::chrono::seconds(600);  // the rollout window a start must fit
  // Optional log patterns (ECMAScript regex) that mark the end of a cold-start phase.
  std::vector<std::pair<std::string, std::string>> phase_patterns;  // (phase name, regex)
  std::filesystem::path quality_set;  // JSONL; empty: the built-in set
  // The longest wait for the answer to one probe request before it counts as a hang, and the
  // unit of a probe's other waits and of its worst case (ProbeInfo::worst_case). Zero: taken from
  // the candidate's own pace once it is up (PatienceFromPace), so that a CPU engine is given the
  // time its answers take and a fast GPU engine no more than it needs.
  Nanos answer_within{0};
  double quality_min_score = 0.8;  // the quality probe's score below this disqualifies
};

// What a probe gets.
struct ProbeContext {
  target::Candidate& candidate;
  const Evidence& evidence;
  const ProbeOptions& options;
  const std::atomic<bool>& stop;
  std::function<void(const std::string&)> log;  // progress lines for the user
  MonoTime deadline;                            // the probe's time bound

  bool Expired() const { return stop || std::chrono::steady_clock::now() >= deadline; }
  Nanos Remaining() const;
};

struct ProbeInfo {
  std::string_view name;
  std::string_view summary;        // one line for --help and the table
  bool needs_launch = false;       // signals or relaunches the process: not run in attach mode
  bool needs_fresh_start = false;  // observes a launch from the spawn: runs on a stopped candidate
  bool generation_only = false;    // watches or scores generated text: not run on a pooling route
  // The longest the probe may take with these options (answer_within set) and the candidate's
  // SIGTERM grace: its deadline, known before it starts, so a runner can budget it.
  Nanos (*worst_case)(const ProbeOptions& options, Nanos grace);
  std::function<void(ProbeContext&, ProbeResult&)> run;
};

// answer_within from the time one long greedy answer (ProbeOptions::long_output_tokens) took at
// idle: kPatiencePerAnswer times it, within [kPatienceFloor, kPatienceCeiling].
inline constexpr Nanos kPatienceFloor = std::chrono::seconds(10);
inline constexpr Nanos kPatienceCeiling = std::chrono::seconds(120);
inline constexpr int kPatiencePerAnswer = 4;
Nanos PatienceFromPace(Nanos long_answer);

// Every probe, in the order they run.
const std::vector<ProbeInfo>& AllProbes();

struct ProbeRunOptions {
  std::vector<std::string> only;  // names; empty = all
  std::vector<std::string> skip;
  std::filesystem::path out_dir;
  ProbeOptions probe;
  // The probes' share of a study's budget: a probe whose worst case exceeds what is left of it
  // when its turn comes is skipped for the budget (not_run, said so). None: no limit.
  std::optional<Nanos> budget;
};

// Checks --only/--skip names against AllProbes(): kInvalidInput listing the known names.
Status ValidateProbeSelection(const ProbeRunOptions& options);

struct ProbeRun {
  std::vector<ProbeResult> results;
  std::string model;
  bool emulated = false;
  bool interrupted = false;
  std::string unavailable;  // why the candidate could not be brought up, when it could not
  Nanos answer_within{0};   // what the probes waited for one answer
  std::string answer_within_source;             // "given", or the pace it was taken from
  std::vector<std::string> skipped_for_budget;  // "restart (worst case 95 s, 41 s left)"
  Nanos took{0};
  bool Disqualified() const;
  // No selected probe ran (every one not_run): nothing was qualified.
  bool NothingRan() const;
};

// Runs the selected probes in order. Before each probe: a probe that needs a fresh start gets the
// candidate stopped first; any other gets it up and ready (launching it in launch mode); a
// candidate that cannot be brought up makes the probe not run, with the reason. Ends with every
// process it started stopped.
ProbeRun RunProbes(target::Candidate& candidate, const ProbeRunOptions& options,
                   const std::atomic<bool>& stop,
                   const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::qualify
