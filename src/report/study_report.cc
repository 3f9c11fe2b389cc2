// report/study_report.cc: report.md and the terminal summary of a study (study_report.h).
#include "report/study_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/markdown.h"

namespace bakeoff::report {
namespace {

using study::CandidateResult;
using study::CandidateStatus;
using study::CandidateVerdict;
using study::CellStatus;
using study::StudyResults;

std::string Num(double x, const char* unit = "") {
  if (x < 0) return "-";
  return fmt::format("{:.3g}{}", x, unit);
}

std::string Ms(double ms) {
  if (ms <= 0) return "-";
  return ms >= 1000 ? fmt::format("{:.2f} s", ms / 1000) : fmt::format("{:.0f} ms", ms);
}

const CandidateVerdict* VerdictOf(const StudyResults& r, const std::string& name) {
  for (const CandidateVerdict& v : r.verdict.candidates) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::string Banner(const StudyResults& r) {
  if (!r.verdict.emulated) return "";
  return r.verdict.simulated
             ? "EMULATED: the candidates are bakeoff's emulated engine (load phases on the virtual clock, probes "
               "against the real-time emulator). This exercises the method; it is no conclusion about any real "
               "engine's performance."
             : "EMULATED: the candidates are bakeoff's emulated engine. This exercises the method; it is no "
               "conclusion about any real engine's performance.";
}

}  // namespace

std::string StudyMarkdown(const StudyResults& r) {
  const study::Study& s = r.study;
  std::string md = fmt::format("# Decision record: {}\n\n", s.name);
  if (std::string banner = Banner(r); !banner.empty()) md += fmt::format("> **{}**\n\n", banner);
  md += fmt::format("- Study: `study.yaml` (sha256 `{}`)\n", r.study_hash.substr(0, 16));
  // A pooling study's answers are whole: it speaks in E2E and inputs (texts or documents) per
  // second, never TTFT or TPOT.
  const bool pooling = study::IsPoolingTask(s.task);
  const std::uint32_t inputs = s.traffic.inputs_per_request;
  if (pooling) {
    md += fmt::format("- Task: {} (POST {}, {} {} per request)\n", study::TaskName(s.task),
                      s.task == study::Task::kRerank ? "/v1/rerank" : "/v1/embeddings", inputs,
                      s.task == study::Task::kRerank ? "documents" : "texts");
  }
  md += fmt::format("- Model: {} ({}{}, {}, {} tokens of context{})\n", s.model.name, s.model.architecture,
                    s.model.moe ? ", MoE" : "", s.model.quantization, s.model.max_context,
                    s.model.revision.empty() ? ", revision not pinned" : ", revision " + s.model.revision);
  md += fmt::format("- Hardware: {}{}{}\n", s.hardware.accelerator,
                    s.hardware.gpu.empty() ? "" : fmt::format(", {} x {}", s.hardware.gpus, s.hardware.gpu),
                    s.hardware.price_per_hour > 0
                        ? fmt::format(", {:.2f} {}/h", s.hardware.price_per_hour, s.hardware.currency)
                        : "");
  md += fmt::format("- SLO: ");
  for (const analyze::SloTerm& t : s.slo.latency.terms) md += t.text + ", ";
  md += fmt::format("attainment {:.1f}%, availability {:.1f}%", 100 * s.slo.attainment, 100 * s.slo.availability);
  if (s.slo.cold_start_max) md += fmt::format(", cold start <= {:.0f} s", ToSeconds(*s.slo.cold_start_max));
  if (s.slo.drain_max) md += fmt::format(", drain <= {:.0f} s", ToSeconds(*s.slo.drain_max));
  md += fmt::format("\n- Objective: {}\n\n", study::ObjectiveName(s.objective));

  md += "## Verdict\n\n";
  if (!r.verdict.choice.empty()) {
    md += fmt::format("**Keep {}**; roll back to **{}**.\n\n", r.verdict.choice,
                      r.verdict.rollback.empty() ? "(none: no second candidate meets the SLO)" : r.verdict.rollback);
  } else {
    md += "**No candidate meets the SLO.**\n\n";
  }
  for (const study::Sentence& sentence : r.verdict.rationale) {
    md += fmt::format("- {}", sentence.text);
    std::string pointers;
    for (const std::string& p : sentence.pointers) {
      if (!p.empty()) pointers += fmt::format("{}`{}`", pointers.empty() ? "" : ", ", p);
    }
    md += pointers.empty() ? "\n" : fmt::format(" ({})\n", pointers);
  }
  if (pooling) {
    md +=
        "\n| candidate | status | capacity (req/s) | inputs/s at capacity | goodput (req/s) | E2E "
        "p99 at capacity | "
        "cost/M input tokens | rank |\n|---|---|---|---|---|---|---|---|\n";
  } else {
    md +=
        "\n| candidate | status | capacity (req/s) | goodput (req/s) | TTFT p99 at capacity | "
        "cost/Mtok | rank |\n";
    md += "|---|---|---|---|---|---|---|\n";
  }
  for (const CandidateResult& c : r.candidates) {
    const CandidateVerdict* v = VerdictOf(r, c.name);
    if (v == nullptr) continue;
    const std::string rank = v->rank > 0 ? std::to_string(v->rank) : "-";
    const std::string name = MarkdownCell(c.name) + (c.emulated ? " (emulated)" : "");
    if (pooling) {
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", name,
                        study::CandidateStatusName(v->status), Num(v->capacity_per_s),
                        Num(v->inputs_per_s), Num(v->goodput_per_s), Ms(v->e2e_p99_ms),
                        Num(v->cost_per_million_tokens), rank);
    } else {
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", name,
                        study::CandidateStatusName(v->status), Num(v->capacity_per_s),
                        Num(v->goodput_per_s), Ms(v->ttft_p99_ms), Num(v->cost_per_million_tokens),
                        rank);
    }
  }

  md += "\n## Evidence per SLO clause\n\n";
  for (const CandidateVerdict& v : r.verdict.candidates) {
    md += fmt::format("### {}\n\n", v.name);
    md += fmt::format("Engine: {} {}{}\n\n", v.engine.empty() ? "unknown" : v.engine,
                      v.version.empty() ? "(version not recorded)" : v.version, v.emulated ? " (emulated)" : "");
    for (const std::string& reason : v.reasons) md += fmt::format("- {}\n", reason);
    if (!v.reasons.empty()) md += "\n";
    if (!v.evidence.empty()) {
      md += "| clause | result | observed | threshold | where |\n|---|---|---|---|---|\n";
      for (const study::EvidenceItem& e : v.evidence) {
        md += fmt::format("| {} | {} | {} | {:.4g} {} | `{}` |\n", MarkdownCell(e.clause), study::CellStatusName(e.status),
                          MarkdownCell(e.text), e.threshold, e.unit, e.pointer.empty() ? "-" : e.pointer);
      }
    }
    if (!v.evidence.empty() && (!v.findings.empty() || !v.risks.empty())) md += "\n";
    for (const std::string& f : v.findings) md += fmt::format("- Finding: {}\n", f);
    for (const std::string& risk : v.risks) md += fmt::format("- Risk: {}\n", risk);
    md += "\n";
  }

  md += "## Hard-constraint gate\n\n| candidate | constraint | result | reason | evidence |\n|---|---|---|---|---|\n";
  for (const study::GateRow& row : r.gate.rows) {
    for (const study::GateCell& cell : row.cells) {
      md += fmt::format("| {} | {} | {} | {} | `{}` |\n", MarkdownCell(row.candidate), MarkdownCell(cell.constraint),
                        study::CellStatusName(cell.status), MarkdownCell(cell.reason), MarkdownCell(cell.evidence));
    }
  }

  md += "\n## Workload\n\n";
  const study::WorkloadFigures& w = r.workload;
  md += fmt::format("- Source: {}{}\n", w.source, w.synthesized ? " (synthesized)" : "");
  if (pooling) {
    md += fmt::format(
        "- {} requests at {:.3g} req/s; {} inputs per request of {:.0f} tokens each on average\n",
        w.requests, w.rate_per_s, inputs, w.input_tokens_mean);
  } else {
    md += fmt::format(
        "- {} requests at {:.3g} req/s; prompts {:.0f} tokens, answers {:.0f} tokens on average "
        "(output/input {:.2f})\n",
        w.requests, w.rate_per_s, w.input_tokens_mean, w.output_tokens_mean, w.output_input_ratio);
  }
  if (w.prefix_reuse >= 0) md += fmt::format("- Prefix reuse: {:.0f}% of prompt tokens\n", 100 * w.prefix_reuse);
  if (w.peak_to_mean_1s > 0) md += fmt::format("- 1 s peak-to-mean: {:.1f}\n", w.peak_to_mean_1s);
  if (!w.classification.empty()) md += fmt::format("- Classified as: {}\n", w.classification);
  md += "- Fingerprint: `fingerprint.json`; the requests: `workload/trace.jsonl`\n";

  md += pooling ? "\n## Measurements\n\n| candidate | phase | step | requests | attainment | E2E "
                  "p50 / p99 | req/s | "
                  "inputs/s | records |\n|---|---|---|---|---|---|---|---|---|\n"
                : "\n## Measurements\n\n| candidate | phase | step | requests | attainment | TTFT "
                  "p50 / p99 | TPOT p50 / p99 | "
                  "output tok/s | records |\n|---|---|---|---|---|---|---|---|---|\n";
  // The latency and throughput columns of a step: the task's own figures.
  const auto step_columns = [&](const study::StepFigures& f) {
    return pooling ? fmt::format("{} / {} | {:.3g} | {:.0f}", Ms(f.e2e_p50_ms), Ms(f.e2e_p99_ms),
                                 f.request_rate_per_s, f.request_rate_per_s * inputs)
                   : fmt::format("{} / {} | {} / {} | {:.0f}", Ms(f.ttft_p50_ms), Ms(f.ttft_p99_ms),
                                 Ms(f.tpot_p50_ms), Ms(f.tpot_p99_ms), f.output_tokens_per_s);
  };
  // A capacity trial's: the tails alone.
  const auto capacity_columns = [&](const study::StepFigures& f) {
    return pooling ? step_columns(f)
                   : fmt::format("{} | {} | {:.0f}", Ms(f.ttft_p99_ms), Ms(f.tpot_p99_ms),
                                 f.output_tokens_per_s);
  };
  for (const CandidateResult& c : r.candidates) {
    for (const study::PhaseResult& p : c.phases) {
      for (const study::StepFigures& f : p.steps) {
        md += fmt::format("| {} | {} {}{} | {} | {} | {:.1f}% | {} | `{}` |\n",
                          MarkdownCell(c.name), study::PhaseName(p.phase), p.round + 1,
                          p.simulated ? " (simulated)" : "", MarkdownCell(f.label), f.measured,
                          100 * f.attainment, step_columns(f), f.records);
      }
    }
    for (const study::CapacitySummary::Point& p : c.capacity.points) {
      std::uint64_t requests = 0;
      for (const study::StepFigures& t : p.trials) requests += t.measured;
      md += fmt::format(
          "| {} | capacity{} | {:.4g} req/s: {} | {} | {:.1f}% [{:.1f}, {:.1f}] | {} | {} |\n",
          MarkdownCell(c.name), c.capacity.simulated ? " (simulated)" : "", p.rate_per_s,
          p.passed ? "pass" : MarkdownCell("fail, " + p.why_not), requests, 100 * p.attainment,
          100 * p.attainment_lower, 100 * p.attainment_upper,
          p.trials.empty() ? "- | - | -" : capacity_columns(p.trials.front()),
          p.trials.empty() ? "-" : "`" + p.trials.front().records + "`");
    }
  }

  md += "\n## Revisit this choice when\n\n";
  for (const std::string& when : r.verdict.revisit) md += fmt::format("- {}\n", when);
  md += "\n## The method's common mistakes, checked on this study\n\n";
  if (r.verdict.mistakes.empty()) md += "None found.\n";
  for (const study::Mistake& m : r.verdict.mistakes) md += fmt::format("- `{}`: {}\n", m.code, m.message);
  if (!r.budget_plan.empty()) {
    md += "\n## Budget\n\n";
    for (const std::string& line : r.budget_plan) md += fmt::format("- {}\n", line);
    if (r.budget_cuts.empty()) {
      md += "\nNothing was cut: every phase that ran measured what the plan asked.\n";
    } else {
      md += "\nWhat the budget cut:\n\n";
      for (const std::string& cut : r.budget_cuts) md += fmt::format("- {}\n", cut);
    }
  }
  if (!r.skipped.empty() || !r.resumed.empty()) {
    md += "\n## Skipped and resumed\n\n";
    for (const std::string& s2 : r.skipped) md += fmt::format("- skipped {}\n", s2);
    for (const std::string& s2 : r.resumed) md += fmt::format("- read back from an earlier run: {}\n", s2);
  }
  return md;
}

std::string StudySummaryText(const StudyResults& r) {
  std::string out;
  if (std::string banner = Banner(r); !banner.empty()) out += banner + "\n\n";
  const bool pooling = study::IsPoolingTask(r.study.task);
  out += fmt::format("{:<20} {:<13} {:>12} {:>12} {:>14} {:>10} {:>6}\n", "candidate", "status",
                     "capacity/s", "goodput/s", pooling ? "E2E p99" : "TTFT p99", "cold start",
                     "rank");
  for (const CandidateResult& c : r.candidates) {
    const CandidateVerdict* v = VerdictOf(r, c.name);
    if (v == nullptr) continue;
    out += fmt::format(
        "{:<20} {:<13} {:>12} {:>12} {:>14} {:>10} {:>6}\n", c.name + (c.emulated ? "*" : ""),
        study::CandidateStatusName(v->status), Num(v->capacity_per_s), Num(v->goodput_per_s),
        Ms(v->TailLatencyMs()),
        c.probes.cold_start_s >= 0 ? fmt::format("{:.2f} s", c.probes.cold_start_s) : "-",
        v->rank > 0 ? std::to_string(v->rank) : "-");
  }
  if (r.verdict.emulated) out += "(* emulated)\n";
  out += "\n";
  out += r.verdict.choice.empty() ? "No candidate meets the SLO.\n"
                                  : fmt::format("Keep {}; roll back to {}.\n", r.verdict.choice,
                                                r.verdict.rollback.empty() ? "(none)" : r.verdict.rollback);
  for (const study::Sentence& s : r.verdict.rationale) out += "  - " + s.text + "\n";
  if (!r.verdict.mistakes.empty()) {
    out += "Mistakes found in the study itself:\n";
    for (const study::Mistake& m : r.verdict.mistakes) out += fmt::format("  - {}: {}\n", m.code, m.message);
  }
  for (const std::string& s : r.skipped) out += "skipped " + s + "\n";
  for (const std::string& cut : r.budget_cuts) out += "budget cut " + cut + "\n";
  return out;
}

}  // namespace bakeoff::report
