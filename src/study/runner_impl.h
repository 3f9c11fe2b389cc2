// study/runner_impl.h (internal to study/runner*.cc)
//
// Owns: the declarations the study runner's translation units share: StudyRunner (one run of one
// study: what it loaded, the results it builds, the candidates' processes, the budget's state)
// and Halt (the flag that the user's stop or the spent budget sets). StudyRunner's members are
// defined by job:
//   runner.cc            RunStudy, the run's order (Run), the guard around each phase, and what
//                        every phase asks (why it does not run now, a skip, its folder)
//   runner_prepare.cc    before anything is created: the catalog, the emulated candidates'
//                        presets, the workload; then the workload kept in the bundle, and attached
//                        servers checked to serve the study's model
//   runner_resume.cc     the resume bookkeeping: the bundle opened new or resumed, a finished
//                        phase's result.json read back instead of run again, the manifest
//   runner_budget.cc     the budget's runner side (the sharing itself is study/budget.h): the
//                        plan's lines, each load phase run's slice and its steps' parts of it,
//                        and every cut recorded
//   runner_processes.cc  candidates' processes (launched, emulated, attached), where the load
//                        runs, and the route check of a pooling study
//   runner_probes.cc     the probes phase, and its findings as the study judges them
//   runner_load.cc       the single, sweep and replay phases (a round each), and the load job
//                        every load phase sends
//   runner_capacity.cc   the capacity search
// Contract: study/runner.h.
//
// Threading: as runner.h says: everything here runs on RunStudy's thread, except Halt's watcher,
// which only sets its flag.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/capacity_search.h"
#include "core/clock.h"
#include "core/json_text.h"
#include "core/result.h"
#include "emulate/engine_preset.h"
#include "load/runner.h"
#include "qualify/probe.h"
#include "run/load_target.h"
#include "study/catalog.h"
#include "study/results.h"
#include "study/runner.h"
#include "study/study.h"
#include "target/candidate.h"
#include "workload/trace.h"

namespace bakeoff::study::runner_internal {

inline Error Invalid(std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); }

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

// How a load phase run's slice of the budget is shared by its steps (StudyRunner::SliceSteps).
struct StepsSlice {
  std::optional<Nanos> per_step;       // each step's part of the slice; none without a slice
  std::vector<std::uint64_t> planned;  // the requests each step was to measure
};

class StudyRunner {
 public:
  // runner.cc
  StudyRunner(const Study& study, const StudyRunOptions& options, const std::atomic<bool>& stop,
              const std::function<void(const std::string&)>& log);

  Result<StudyResults> Run();

 private:
  // --- runner.cc: the run's order, and what every phase asks ---

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

  const CatalogEntry* Entry(const CandidateSpec& spec) const;
  Status WriteGate();
  std::filesystem::path Dir(std::size_t i, const std::string& leaf) const;
  std::string Relative(const std::filesystem::path& p) const;
  // Why a phase does not run now, or empty.
  std::string WhyNot(std::size_t i) const;
  void Skip(std::size_t i, const std::string& what, const std::string& why);
  // Runs' own progress lines are not repeated: the study prints one line per phase.
  std::function<void(const std::string&)> Quiet() const {
    return [](const std::string&) {};
  }

  // --- runner_prepare.cc: before anything is created, and before any load ---

  Status Prepare();
  Status LoadWorkload();
  Status KeepWorkload();
  // Attached servers must serve the study's model: otherwise the candidates are not comparable.
  Status CheckComparable();
  // A pooling study: one request to the route of every candidate still in; one that does not
  // serve it is eliminated at the gate (gate.h ApplyRouteCheck), with route.json kept.
  Status CheckRoutes();

  // --- runner_resume.cc: what an earlier run left in the bundle ---

  // A new bundle, or the same study's earlier one, resumed (resuming_).
  Status OpenBundle();
  // A finished phase's saved result, when resuming. `read` turns it into the phase's value; a
  // file that is not what this version writes is reported and the phase measured again.
  template <typename Read>
  auto Saved(const std::filesystem::path& dir, Read read) const -> std::optional<decltype(read(nlohmann::json()))>;
  // Each reads candidate i's phase back from an earlier run into the results and says so (true),
  // or finds nothing to read back (false: the phase runs).
  bool ReadBackProbes(std::size_t i);
  bool ReadBackLoadPhase(std::size_t i, const std::string& name);
  bool ReadBackCapacity(std::size_t i);
  nlohmann::json Manifest() const;
  // The manifest as it stands (results_.manifest), written to the bundle.
  Status WriteManifest();

  // --- runner_budget.cc: the budget's runner side (study/budget.h) ---

  // Before anything runs: each candidate's share for its probes.
  void PlanBudget();
  // After the probes: what the load phases of the survivors share.
  void PlanLoadBudget(const std::vector<std::size_t>& survivors);
  // The slice of the time left that candidate i's run of `phase` gets now (none for a simulated
  // one), taking its weight off what is pending.
  std::optional<Nanos> TakeSlice(std::size_t i, Phase phase);
  // A load phase run's slice shared by its steps, each step's duration bounded by its part
  // (not on the virtual clock).
  StepsSlice SliceSteps(const std::optional<Nanos>& slice, bool simulated, std::vector<load::StepSpec>& steps) const;
  void Cut(std::string what);
  // What the budget cost candidate i's probes: those skipped for it.
  void NoteProbeCuts(std::size_t i, const qualify::ProbeRun& probed);
  // What a load phase run's slice cost: steps that measured fewer requests than planned.
  void NoteStepCuts(std::size_t i, const std::string& name, const PhaseResult& result, const StepsSlice& sliced);
  // What the capacity search's slice cost (its trials and where the search ended).
  void NoteCapacityCut(std::size_t i, const analyze::CapacityResult& found,
                       const std::vector<std::vector<StepFigures>>& per_point, Nanos slice, bool cut_at_slice);

  // --- runner_processes.cc: candidates' processes ---

  Result<target::CandidateSpec> TargetSpec(std::size_t i);
  // The candidate's handle for load phases against a process (launch candidates); kept between
  // phases of one round and stopped when the round moves to the next candidate.
  Result<target::Candidate*> Process(std::size_t i);
  void StopProcess(std::size_t i);
  // Where candidate i's load runs: a simulated engine, or its server (started when it is ours).
  Result<run::LoadTarget> Target(std::size_t i);

  // --- runner_probes.cc ---

  void Probe(std::size_t i);
  // A finding of candidate i's probes as the study judges it, beside the catalog's known limit
  // that names it.
  ProbeFinding Judged(std::size_t i, const qualify::Finding& f) const;

  // --- runner_load.cc: single, sweep, replay ---

  void LoadPhase(std::size_t i, Phase phase, std::uint32_t round);
  run::LoadJob Job(const std::filesystem::path& dir) const;
  // The workload's median lengths, for the phases that send one shape (single, sweep).
  load::RequestShape TypicalShape() const;
  std::vector<load::StepSpec> Steps(Phase phase) const;

  // --- runner_capacity.cc ---

  // The rate to start the capacity search at: what one request's latency allows a few at a time.
  double StartRate(std::size_t i) const;
  void Capacity(std::size_t i);

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
  std::set<std::size_t> detected_;    // launched candidates already asked for their version
  std::optional<Nanos> probe_share_;  // each candidate's probes' share of the budget
  double pending_weight_ = 0;         // of the load phase runs not yet started
};

}  // namespace bakeoff::study::runner_internal
