// study/runner.cc: a study end to end into a results bundle (runner.h): the run's order, the
// guard around each phase, and what every phase asks. The other jobs are in runner_*.cc
// (runner_impl.h lists them).
#include "study/runner.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "study/gate.h"
#include "study/runner_impl.h"
#include "target/adapters.h"

namespace bakeoff::study {
namespace runner_internal {

namespace fs = std::filesystem;

StudyRunner::StudyRunner(const Study& study, const StudyRunOptions& options, const std::atomic<bool>& stop,
                         const std::function<void(const std::string&)>& log)
    : study_(study),
      options_(options),
      log_(log),
      deadline_(std::chrono::steady_clock::now() + study.budget),
      halt_(stop, deadline_) {
  results_.study = study;
  results_.bundle = options.out_dir;
}

Result<StudyResults> StudyRunner::Run() {
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
  if (Status st = CheckRoutes(); !st.ok()) return st.error();
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
  if (Status st = WriteManifest(); !st.ok()) return st.error();
  if (Status st = WriteFileAtomically(options_.out_dir / "verdict.json", DumpJson(ToJson(results_.verdict), 2));
      !st.ok()) {
    return st.error();
  }
  return std::move(results_);
}

const CatalogEntry* StudyRunner::Entry(const CandidateSpec& spec) const {
  return catalog_ && !spec.catalog.empty() ? catalog_->Find(spec.catalog) : nullptr;
}

Status StudyRunner::WriteGate() {
  return WriteFileAtomically(options_.out_dir / "gate.json", DumpJson(ToJson(results_.gate), 2));
}

fs::path StudyRunner::Dir(std::size_t i, const std::string& leaf) const {
  return options_.out_dir / "candidates" / study_.candidates[i].name / leaf;
}

std::string StudyRunner::Relative(const fs::path& p) const { return p.lexically_relative(options_.out_dir).string(); }

std::string StudyRunner::WhyNot(std::size_t i) const {
  if (halt_.user_stopped()) return "interrupted";
  if (halt_.budget_spent()) return fmt::format("the study's budget ({:.0f} s) was spent", ToSeconds(study_.budget));
  const CandidateResult& c = results_.candidates[i];
  if (c.eliminated) return "eliminated";
  if (!c.failed.empty()) return "the candidate failed earlier: " + c.failed;
  return "";
}

void StudyRunner::Skip(std::size_t i, const std::string& what, const std::string& why) {
  results_.skipped.push_back(fmt::format("{}/{}: {}", study_.candidates[i].name, what, why));
}

}  // namespace runner_internal

Result<StudyResults> RunStudy(const Study& study, const StudyRunOptions& options, const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log) {
  runner_internal::StudyRunner runner(study, options, stop, log);
  return runner.Run();
}

}  // namespace bakeoff::study
