// study/runner_probes.cc: the probes phase of each surviving candidate (runner.h, step 5): its
// probes run against the real server (an emulated candidate against `bakeoff emulate`) within
// its share of the budget, their answers fill the gate's unknowns and may disqualify it, and each
// finding is judged by the study beside the catalog's known limit that names it. Declarations in
// runner_impl.h.
#include <fmt/format.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "qualify/probe_report.h"
#include "study/contracts.h"
#include "study/gate.h"
#include "study/runner_impl.h"
#include "target/adapters.h"

namespace bakeoff::study::runner_internal {

namespace fs = std::filesystem;

void StudyRunner::Probe(std::size_t i) {
  if (ReadBackProbes(i)) return;
  CandidateResult& c = results_.candidates[i];
  const CandidateSpec& spec = study_.candidates[i];
  const fs::path dir = Dir(i, "probes");
  GateRow& row = *results_.gate.Find(spec.name);
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
  NoteProbeCuts(i, probed);
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

ProbeFinding StudyRunner::Judged(std::size_t i, const qualify::Finding& f) const {
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

}  // namespace bakeoff::study::runner_internal
