// study/results.cc: the results model's figures and its JSON form (results.h).
#include "study/results.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace bakeoff::study {

NLOHMANN_JSON_SERIALIZE_ENUM(Phase, {{Phase::kProbes, "probes"},
                                     {Phase::kSingle, "single"},
                                     {Phase::kSweep, "sweep"},
                                     {Phase::kCapacity, "capacity"},
                                     {Phase::kReplay, "replay"}})
NLOHMANN_JSON_SERIALIZE_ENUM(CellStatus, {{CellStatus::kUnknown, "unknown"},
                                          {CellStatus::kPass, "pass"},
                                          {CellStatus::kFail, "fail"}})
// A term with no sample has NaN for its observed value, which JSON writes as null: read back as NaN.
void to_json(nlohmann::json& j, const TermFigure& t) {
  j = {{"text", t.text}, {"observed_ms", t.observed_ms}, {"threshold_ms", t.threshold_ms}, {"met", t.met}};
}
void from_json(const nlohmann::json& j, TermFigure& t) {
  const auto number = [&](const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  t.text = j.value("text", std::string());
  t.observed_ms = number("observed_ms");
  t.threshold_ms = number("threshold_ms");
  t.met = j.value("met", false);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StepFigures, label, records, measured, ok, good, attainment,
                                                offered_rate_per_s, request_rate_per_s, goodput_per_s,
                                                output_tokens_per_s, ttft_p50_ms, ttft_p99_ms, tpot_p50_ms,
                                                tpot_p99_ms, e2e_p50_ms, e2e_p99_ms, mean_prompt_tokens,
                                                mean_output_tokens, generator_limited, p99_bounded, terms,
                                                short_ttft_p99_ms, long_ttft_p99_ms, short_count, long_count)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PhaseResult, phase, round, steps, error, simulated, emulated,
                                                unequal_work)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbeFinding, code, severity, message, judgement, breaks,
                                                accepted_reason, known_limit, evidence)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GateCell, constraint, status, reason, evidence)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbeSummary, ran, skipped_reason, disqualified, verdicts, findings,
                                                cold_start_s, drain_s, path, gate_cells)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CapacitySummary::Point, rate_per_s, passed, marginal, why_not,
                                                attainment, attainment_lower, attainment_upper, availability, trials)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CapacitySummary, ran, skipped_reason, error, bracket, capacity_per_s,
                                                first_failing_per_s, notes, stopped_reason, points, simulated,
                                                emulated, path)

StepFigures FiguresOf(const analyze::StepAnalysis& s, std::string records) {
  StepFigures f;
  f.label = s.label;
  f.records = std::move(records);
  f.measured = s.measured_requests;
  f.ok = s.ok_requests;
  f.good = s.good_requests;
  f.attainment = s.slo_attainment;
  f.offered_rate_per_s = s.offered_rate_per_s;
  f.request_rate_per_s = s.request_rate_per_s;
  f.goodput_per_s = s.goodput_per_s;
  f.output_tokens_per_s = s.output_tokens_per_s;
  f.ttft_p50_ms = s.ttft_ms.p50.value;
  f.ttft_p99_ms = s.ttft_ms.p99.value;
  f.tpot_p50_ms = s.tpot_ms.p50.value;
  f.tpot_p99_ms = s.tpot_ms.p99.value;
  f.e2e_p50_ms = s.e2e_ms.p50.value;
  f.e2e_p99_ms = s.e2e_ms.p99.value;
  f.mean_prompt_tokens = s.prompt_tokens.mean;
  f.mean_output_tokens = s.output_tokens.mean;
  f.generator_limited = s.generator_limited;
  f.p99_bounded = s.ttft_ms.p99.bounded;
  for (const analyze::SloResult& r : s.slo) {
    f.terms.push_back({r.term.text, r.observed_ms, r.term.threshold_ms, r.met});
  }
  return f;
}

const CapacitySummary::Point* CapacitySummary::AtCapacity() const {
  if (capacity_per_s < 0) return nullptr;
  for (const Point& p : points) {
    if (p.rate_per_s == capacity_per_s) return &p;
  }
  return nullptr;
}

CapacitySummary SummarizeCapacity(const analyze::CapacityResult& r,
                                  const std::vector<std::vector<StepFigures>>& trials_per_point) {
  CapacitySummary c;
  c.ran = true;
  c.bracket = analyze::BracketName(r.bracket);
  c.capacity_per_s = r.capacity_per_s.value_or(-1);
  c.first_failing_per_s = r.first_failing_per_s.value_or(-1);
  c.notes = r.notes;
  c.stopped_reason = r.stopped_reason;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const analyze::RatePoint& p = r.points[i];
    CapacitySummary::Point point{p.rate_per_s,
                                 p.passed,
                                 p.marginal,
                                 p.why_not,
                                 p.attainment.value,
                                 p.attainment.lower,
                                 p.attainment.upper,
                                 p.availability.value,
                                 i < trials_per_point.size() ? trials_per_point[i] : std::vector<StepFigures>{}};
    c.points.push_back(std::move(point));
  }
  return c;
}

nlohmann::json ToJson(const StepFigures& f) { return f; }
StepFigures StepFiguresFromJson(const nlohmann::json& j) { return j.get<StepFigures>(); }
nlohmann::json ToJson(const PhaseResult& p) { return p; }
PhaseResult PhaseResultFromJson(const nlohmann::json& j) { return j.get<PhaseResult>(); }
nlohmann::json ToJson(const ProbeSummary& p) { return p; }
ProbeSummary ProbeSummaryFromJson(const nlohmann::json& j) { return j.get<ProbeSummary>(); }
nlohmann::json ToJson(const CapacitySummary& c) { return c; }
CapacitySummary CapacitySummaryFromJson(const nlohmann::json& j) { return j.get<CapacitySummary>(); }
nlohmann::json ToJson(const GateCell& c) { return c; }
GateCell GateCellFromJson(const nlohmann::json& j) { return j.get<GateCell>(); }

GateTable GateTableFromJson(const nlohmann::json& j) {
  GateTable table;
  for (const nlohmann::json& row : j.at("candidates")) {
    GateRow r;
    r.candidate = row.at("candidate").get<std::string>();
    r.catalog_entry = row.at("catalog_entry").get<std::string>();
    r.cells = row.at("cells").get<std::vector<GateCell>>();
    table.rows.push_back(std::move(r));
  }
  return table;
}

WorkloadFigures WorkloadFiguresOf(const workload::Fingerprint& fp, const Study& study) {
  WorkloadFigures w;
  const TrafficSpec& t = study.traffic;
  w.synthesized = t.source != TrafficSource::kTrace;
  const std::filesystem::path relative = study.file.empty() ? t.file : t.file.lexically_relative(study.file.parent_path());
  constexpr const char* kKinds[] = {"trace", "fingerprint", "shape"};
  w.source = fmt::format("{} {}{}", kKinds[static_cast<int>(t.source)], relative.string(),
                         w.synthesized ? fmt::format(", synthesized with seed {}", t.seed) : "");
  w.requests = fp.requests;
  w.rate_per_s = fp.mean_rps;
  w.prefix_reuse = fp.prefix_reuse.value_or(-1);
  w.output_input_ratio = fp.output_input_ratio;
  for (const workload::RateWindow& r : fp.rate_windows) {
    if (r.window_s == 1) w.peak_to_mean_1s = r.peak_to_mean;
  }
  w.input_tokens_mean = fp.input.summary.mean;
  w.output_tokens_mean = fp.output.summary.mean;
  w.lengths_fixed = fp.input.summary.min == fp.input.summary.max && fp.output.summary.min == fp.output.summary.max;
  for (const workload::ClassLabel& c : fp.classification) w.classification += (w.classification.empty() ? "" : ", ") + c.label;
  return w;
}

}  // namespace bakeoff::study
