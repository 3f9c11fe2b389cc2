// study/runner.h
//
// Owns: running a study end to end into a results bundle (docs/formats/bundle.md):
//   1. the catalog, the emulated candidates' presets and the workload are loaded (every mistake
//      at once; nothing is created before they are right);
//   2. the bundle is opened: a new folder, or the same study's earlier bundle, which is resumed
//      (every phase whose result.json exists is read back, not run again);
//   3. the workload is fingerprinted and kept (workload/trace.jsonl, fingerprint.json);
//   4. the gate answers each candidate x constraint from the catalog (gate.json); eliminated
//      candidates are never started; attached servers must serve the study's model, or the study
//      stops before any load (they cannot be compared);
//   5. each surviving candidate is probed (its probes answer the gate's unknowns and may
//      disqualify it);
//   6. the load phases run one candidate at a time, in rotating order across rounds: single
//      request, the concurrency sweep and the workload replay once per round, then the capacity
//      search (with its own repeats per rate); a candidate that fails mid-study is recorded as
//      failed with its evidence and the others go on;
//   7. the verdict is decided from the results model and written (verdict.json).
// The budget bounds the wall time: when it is spent, the phase in progress is cut and every
// later phase is recorded as skipped, with that reason. Emulated candidates are probed against
// the real-time emulated server (`bakeoff emulate`, launched on loopback) and measured on the
// virtual clock (the same engine model), and every result says so.
// Does not own: reading the study (study/study.h), the gate's or verdict's rules, report.md
// (report/), the figures (analyze/), the load (run/).
//
// Thread-safety: RunStudy blocks; `stop` may be set from a signal watcher (the phase in progress
// is cut and recorded as interrupted; nothing of it is kept as done, so a rerun measures it again).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "study/catalog.h"
#include "study/results.h"
#include "study/study.h"
#include "study/verdict.h"

namespace bakeoff::study {

struct StudyRunOptions {
  std::filesystem::path out_dir;      // the bundle
  std::filesystem::path self_exe;     // the bakeoff binary, which serves emulated candidates
  std::filesystem::path presets_dir;  // where preset names are looked up (examples/engines)
  bool fresh = false;  // an existing bundle is emptied first instead of resumed
};

struct StudyResults {
  Study study;
  std::string study_hash;  // sha256 of the study file's bytes
  WorkloadFigures workload;
  GateTable gate;
  std::vector<CandidateResult> candidates;  // the study's order
  Verdict verdict;
  nlohmann::json manifest;
  std::filesystem::path bundle;
  bool interrupted = false;
  bool budget_spent = false;
  std::vector<std::string> skipped;  // "candidate/phase: why"
  // How the budget was shared before the run (study/budget.h), and what its cuts cost: probes
  // skipped for it, steps that measured fewer requests than planned in their slice, a capacity
  // search ended at its slice.
  std::vector<std::string> budget_plan;
  std::vector<std::string> budget_cuts;
  std::vector<std::string> resumed;  // "candidate/phase" read back from an earlier run
};

inline constexpr int kBundleSchemaVersion = 1;

// kInvalidInput: the catalog, a preset or the workload is wrong (every mistake at once), the
// bundle folder holds another study, or the candidates cannot be compared. kIo: the bundle cannot
// be written. Otherwise the results, whatever the candidates did.
Result<StudyResults> RunStudy(const Study& study, const StudyRunOptions& options, const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::study
