// study/verdict.cc: statuses, evidence, ranking, rationale, revisit conditions and the method's
// common mistakes (verdict.h).
#include "study/verdict.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <iterator>
#include <set>

#include <fmt/format.h>

namespace bakeoff::study {
namespace {

double MeanOver(const std::vector<StepFigures>& trials, double StepFigures::*field) {
  if (trials.empty()) return 0;
  double sum = 0;
  for (const StepFigures& t : trials) sum += t.*field;
  return sum / static_cast<double>(trials.size());
}

std::string Ms(double ms) { return ms >= 1000 ? fmt::format("{:.2f} s", ms / 1000) : fmt::format("{:.1f} ms", ms); }

// Higher is better for every objective once turned by this.
bool HigherIsBetter(Objective o) { return o == Objective::kMaxGoodput || o == Objective::kMaxGoodputPerCost; }

class CandidateJudge {
 public:
  CandidateJudge(const Study& study, const GateTable& gate, const CandidateResult& c)
      : study_(study), gate_(gate), c_(c) {}

  CandidateVerdict Judge() {
    v_.name = c_.name;
    v_.engine = c_.engine;
    v_.version = c_.version;
    v_.emulated = c_.emulated;
    const GateRow* row = gate_.Find(c_.name);
    if (row != nullptr) {
      for (const std::string& r : row->Risks()) v_.risks.push_back("gate " + r);
    }
    for (const std::string& f : c_.catalog_findings) v_.risks.push_back("catalog " + f);
    ProbeRisks();
    const std::string probes_cell = "probes";
    if (row != nullptr && row->Eliminated()) {
      bool by_probes = false;
      for (const GateCell& cell : row->cells) {
        if (cell.status != CellStatus::kFail) continue;
        by_probes = by_probes || cell.constraint == probes_cell || cell.evidence.rfind("probe", 0) == 0;
        v_.reasons.push_back(fmt::format("{}: {} ({})", cell.constraint, cell.reason, cell.evidence));
      }
      v_.status = by_probes ? CandidateStatus::kDisqualified : CandidateStatus::kEliminated;
      return v_;
    }
    if (!c_.failed.empty()) {
      v_.status = CandidateStatus::kFailed;
      v_.reasons.push_back(c_.failed);
    }
    LatencyEvidence();
    HeadOfLine();
    ProbeEvidence();
    CostEvidence();
    if (v_.status == CandidateStatus::kFailed) return v_;
    const bool any_fail = std::any_of(v_.evidence.begin(), v_.evidence.end(),
                                      [](const EvidenceItem& e) { return e.status == CellStatus::kFail; });
    const bool measured = capacity_point_ != nullptr || replay_ != nullptr ||
                          (c_.capacity.ran && c_.capacity.bracket == "below_range");
    for (const EvidenceItem& e : v_.evidence) {
      if (e.status == CellStatus::kUnknown) v_.risks.push_back(e.clause + ": " + e.text);
    }
    if (any_fail) {
      v_.status = CandidateStatus::kFailsSlo;
    } else if (!measured) {
      v_.status = CandidateStatus::kNotMeasured;
      v_.reasons.push_back(c_.capacity.skipped_reason.empty() ? "no load phase measured it"
                                                              : "capacity not measured: " + c_.capacity.skipped_reason);
    } else {
      v_.status = CandidateStatus::kMeetsSlo;
    }
    SetObjective();
    if (IsPoolingTask(study_.task)) {
      v_.e2e_p99_ms = e2e_p99_ms_ > 0 ? e2e_p99_ms_ : -1;
      v_.inputs_per_s =
          requests_per_s_ > 0 ? requests_per_s_ * study_.traffic.inputs_per_request : -1;
    } else {
      v_.ttft_p99_ms = ttft_p99_ms_ > 0 ? ttft_p99_ms_ : -1;
    }
    return v_;
  }

 private:
  void Add(EvidenceItem item) { v_.evidence.push_back(std::move(item)); }

  // The probe findings that break nothing the study states (study/contracts.h): risks with their
  // evidence, accepted risks with the study's reason, and notes; the catalog's known limits
  // beside the finding that shows them, the others on their own. A finding that disqualifies is
  // in the gate row (the reasons), not here.
  void ProbeRisks() {
    const std::string folder = c_.probes.path.substr(0, c_.probes.path.rfind('/') + 1);
    std::vector<std::string> shown_limits;
    for (const ProbeFinding& f : c_.probes.findings) {
      std::string text = fmt::format("{}: {}", f.code, f.message);
      if (!f.breaks.empty() && f.judgement != "disqualifies") {
        text += fmt::format(" [would break {}; this study does not require it]", f.breaks);
      }
      if (!f.known_limit.empty()) {
        text += fmt::format(" [catalog known limit: {}]", f.known_limit);
        shown_limits.push_back(f.known_limit);
      }
      text += fmt::format(" ({})", f.evidence.empty() ? c_.probes.path : folder + f.evidence.front());
      if (f.judgement == "risk") v_.risks.push_back("probe " + text);
      if (f.judgement == "accepted_risk") v_.risks.push_back(fmt::format("accepted probe {}; accepted because: {}", text, f.accepted_reason));
      if (f.judgement == "note") v_.findings.push_back("probe note " + text);
    }
    for (const std::string& limit : c_.known_limits) {
      if (std::find(shown_limits.begin(), shown_limits.end(), limit) == shown_limits.end()) {
        v_.risks.push_back("catalog known limit: " + limit);
      }
    }
  }

  // The SLO's latency terms, availability and minimum goodput: at the capacity found, else on
  // the replay of the workload at its own rate.
  void LatencyEvidence() {
    const CapacitySummary& cap = c_.capacity;
    if (cap.ran) capacity_point_ = cap.AtCapacity();
    for (const PhaseResult& p : c_.phases) {
      if (p.phase == Phase::kReplay && !p.steps.empty() && p.error.empty()) replay_ = &p.steps.front();
    }
    const SloSpec& slo = study_.slo;
    if (capacity_point_ != nullptr) {
      const std::size_t index = static_cast<std::size_t>(capacity_point_ - cap.points.data());
      const std::string pointer = fmt::format("{}#/points/{}", cap.path, index);
      for (const analyze::SloTerm& term : slo.latency.terms) {
        double worst = 0;
        bool met = true;
        for (const StepFigures& t : capacity_point_->trials) {
          for (const TermFigure& f : t.terms) {
            if (f.text != term.text) continue;
            worst = std::max(worst, f.observed_ms);
            met = met && f.met;
          }
        }
        Add({term.text, met ? CellStatus::kPass : CellStatus::kFail, worst, term.threshold_ms, "ms",
             fmt::format("{} at {:.3g} req/s (worst of {} repeats) against {}", Ms(worst), capacity_point_->rate_per_s,
                         capacity_point_->trials.size(), Ms(term.threshold_ms)),
             pointer});
      }
      Add({"attainment", capacity_point_->attainment >= slo.attainment ? CellStatus::kPass : CellStatus::kFail,
           capacity_point_->attainment, slo.attainment, "share",
           fmt::format("{:.2f}% of requests met every threshold at {:.3g} req/s (95% interval {:.2f}-{:.2f}%){}",
                       100 * capacity_point_->attainment, capacity_point_->rate_per_s,
                       100 * capacity_point_->attainment_lower, 100 * capacity_point_->attainment_upper,
                       capacity_point_->marginal ? ", marginal" : ""),
           pointer});
      Add({"availability", capacity_point_->availability >= slo.availability ? CellStatus::kPass : CellStatus::kFail,
           capacity_point_->availability, slo.availability, "share",
           fmt::format("{:.2f}% of requests completed at {:.3g} req/s", 100 * capacity_point_->availability,
                       capacity_point_->rate_per_s),
           pointer});
      // Sustained goodput: the offered rate times the share of requests that met the SLO. (Good
      // requests over a short step's wall time would count its drain as if it were load.)
      const double goodput = capacity_point_->rate_per_s * capacity_point_->attainment;
      v_.capacity_per_s = cap.capacity_per_s;
      v_.goodput_per_s = goodput;
      // Output tokens per second sustained at that rate, by the same reasoning.
      // (A pooling study's tokens are its inputs': it generates none.)
      output_tokens_per_s_ =
          capacity_point_->rate_per_s * capacity_point_->availability *
          MeanOver(capacity_point_->trials, IsPoolingTask(study_.task)
                                                ? &StepFigures::mean_prompt_tokens
                                                : &StepFigures::mean_output_tokens);
      ttft_p99_ms_ = e2e_p99_ms_ = 0;
      for (const StepFigures& t : capacity_point_->trials) {
        ttft_p99_ms_ = std::max(ttft_p99_ms_, t.ttft_p99_ms);
        e2e_p99_ms_ = std::max(e2e_p99_ms_, t.e2e_p99_ms);
      }
      requests_per_s_ = capacity_point_->rate_per_s * capacity_point_->availability;
      objective_pointer_ = pointer;
      if (slo.min_goodput_per_s > 0) {
        Add({"min_goodput", goodput >= slo.min_goodput_per_s ? CellStatus::kPass : CellStatus::kFail, goodput,
             slo.min_goodput_per_s, "req/s",
             fmt::format("goodput {:.3g} req/s at capacity (offered rate x attainment) against a floor of {:.3g}",
                         goodput, slo.min_goodput_per_s),
             pointer});
      }
      return;
    }
    if (cap.ran && cap.bracket == "below_range") {
      const std::string why = cap.points.empty() ? "" : cap.points.back().why_not;
      for (const analyze::SloTerm& term : slo.latency.terms) {
        Add({term.text, CellStatus::kFail, 0, term.threshold_ms, "ms",
             fmt::format("no rate down to {:.3g} req/s met the SLO ({})", cap.points.empty() ? 0.0 : cap.points.back().rate_per_s, why),
             cap.path});
      }
      v_.capacity_per_s = 0;
      return;
    }
    if (replay_ != nullptr) {
      for (const TermFigure& f : replay_->terms) {
        Add({f.text, f.met ? CellStatus::kPass : CellStatus::kFail, f.observed_ms, f.threshold_ms, "ms",
             fmt::format("{} on the workload replayed at its own rate, against {}", Ms(f.observed_ms), Ms(f.threshold_ms)),
             replay_->records});
      }
      const double availability = replay_->measured > 0 ? static_cast<double>(replay_->ok) / replay_->measured : 0;
      Add({"attainment", replay_->attainment >= slo.attainment ? CellStatus::kPass : CellStatus::kFail,
           replay_->attainment, slo.attainment, "share",
           fmt::format("{:.2f}% of {} replayed requests met every threshold", 100 * replay_->attainment, replay_->measured),
           replay_->records});
      Add({"availability", availability >= slo.availability ? CellStatus::kPass : CellStatus::kFail, availability,
           slo.availability, "share",
           fmt::format("{:.2f}% of {} replayed requests completed", 100 * availability, replay_->measured),
           replay_->records});
      ttft_p99_ms_ = replay_->ttft_p99_ms;
      e2e_p99_ms_ = replay_->e2e_p99_ms;
      requests_per_s_ = replay_->request_rate_per_s;
      output_tokens_per_s_ = IsPoolingTask(study_.task)
                                 ? replay_->request_rate_per_s * replay_->mean_prompt_tokens
                                 : replay_->output_tokens_per_s;
      v_.goodput_per_s = replay_->goodput_per_s;
      objective_pointer_ = replay_->records;
      figures_from_ = "on the replay";
      return;
    }
    for (const analyze::SloTerm& term : slo.latency.terms) {
      Add({term.text, CellStatus::kUnknown, 0, term.threshold_ms, "ms",
           cap.skipped_reason.empty() ? "not measured" : "not measured: " + cap.skipped_reason, ""});
    }
  }

  // Short prompts behind long ones: in the replay, the shortest quarter's TTFT tail against the
  // longest quarter's and against a request alone.
  void HeadOfLine() {
    if (replay_ == nullptr || replay_->short_count == 0 || replay_->long_ttft_p99_ms <= 0) return;
    // A whole (pooling) answer's first token is its end: the quarters' figures are E2E there.
    const bool pooling = IsPoolingTask(study_.task);
    double alone_ms = 0;
    for (const PhaseResult& p : c_.phases) {
      if (p.phase == Phase::kSingle && !p.steps.empty()) alone_ms = p.steps.front().ttft_p50_ms;
    }
    const std::string figures = fmt::format(
        "{} p99 of the shortest quarter of {} {} ({} requests) next to {} for the longest quarter "
        "({}){}",
        pooling ? "E2E" : "TTFT", pooling ? "inputs" : "prompts", Ms(replay_->short_ttft_p99_ms),
        replay_->short_count, Ms(replay_->long_ttft_p99_ms), replay_->long_count,
        alone_ms > 0 ? fmt::format("; a request alone: {} (p50)", Ms(alone_ms)) : "");
    const bool blocked = alone_ms > 0 && replay_->short_ttft_p99_ms > 5 * alone_ms &&
                         replay_->short_ttft_p99_ms >= 0.5 * replay_->long_ttft_p99_ms;
    v_.findings.push_back((blocked ? "head_of_line_blocking: short requests wait behind long ones: " : "short_vs_long: ") +
                          figures + fmt::format(" ({})", replay_->records));
  }

  void ProbeEvidence() {
    const SloSpec& slo = study_.slo;
    struct Limit {
      const char* clause;
      const std::optional<Nanos>& max;
      double observed;
      const char* what;
    };
    for (const Limit& l : {Limit{"cold_start", slo.cold_start_max, c_.probes.cold_start_s, "spawn to first answer"},
                           Limit{"drain", slo.drain_max, c_.probes.drain_s, "SIGTERM to exit"}}) {
      if (!l.max) continue;
      const double limit_s = ToSeconds(*l.max);
      if (l.observed < 0) {
        Add({l.clause, CellStatus::kUnknown, 0, limit_s, "s",
             fmt::format("{} not measured ({})", l.what,
                         c_.kind == CandidateKind::kUrl ? "an attached server cannot be started or stopped by bakeoff"
                                                        : "its probe did not run"),
             c_.probes.path});
        continue;
      }
      Add({l.clause, l.observed <= limit_s ? CellStatus::kPass : CellStatus::kFail, l.observed, limit_s, "s",
           fmt::format("{} took {:.2f} s against a limit of {:.2f} s", l.what, l.observed, limit_s), c_.probes.path});
    }
  }

  void CostEvidence() {
    const double price = study_.hardware.price_per_hour;
    if (price <= 0 || output_tokens_per_s_ <= 0) return;
    v_.cost_per_million_tokens = price / (output_tokens_per_s_ * 3600) * 1e6;
    if (!study_.slo.cost_per_million_tokens_max) return;
    const double ceiling = *study_.slo.cost_per_million_tokens_max;
    Add({"cost", v_.cost_per_million_tokens <= ceiling ? CellStatus::kPass : CellStatus::kFail,
         v_.cost_per_million_tokens, ceiling, study_.hardware.currency + "/Mtok",
         fmt::format("{:.3g} {} per million {} tokens {} ({:.0f} tokens/s at {:.2f} {}/h)",
                     v_.cost_per_million_tokens, study_.hardware.currency,
                     IsPoolingTask(study_.task) ? "input" : "output", figures_from_,
                     output_tokens_per_s_, price, study_.hardware.currency),
         objective_pointer_});
  }

  void SetObjective() {
    const double price = study_.hardware.price_per_hour;
    switch (study_.objective) {
      case Objective::kMaxGoodput:
        v_.has_objective = v_.goodput_per_s >= 0;
        v_.objective = v_.goodput_per_s;
        v_.objective_unit = "req/s within SLO";
        break;
      case Objective::kMaxGoodputPerCost:
        v_.has_objective = v_.goodput_per_s >= 0 && price > 0;
        v_.objective = price > 0 ? v_.goodput_per_s / price : 0;
        v_.objective_unit = fmt::format("req/s within SLO per {}/h", study_.hardware.currency);
        break;
      case Objective::kMinCostPerToken:
        v_.has_objective = v_.cost_per_million_tokens >= 0;
        v_.objective = v_.cost_per_million_tokens;
        v_.objective_unit = study_.hardware.currency + "/Mtok";
        break;
      case Objective::kMinTtftP99:
        v_.has_objective = ttft_p99_ms_ > 0;
        v_.objective = ttft_p99_ms_;
        v_.objective_unit = "ms TTFT p99";
        break;
    }
  }

  const Study& study_;
  const GateTable& gate_;
  const CandidateResult& c_;
  CandidateVerdict v_;
  const CapacitySummary::Point* capacity_point_ = nullptr;
  const StepFigures* replay_ = nullptr;
  double output_tokens_per_s_ = 0;
  double ttft_p99_ms_ = 0;
  double e2e_p99_ms_ = 0;
  double requests_per_s_ = 0;  // completed requests per second where the figures come from
  std::string objective_pointer_;
  std::string figures_from_ = "at capacity";
};

void Rank(const Study& study, Verdict& verdict) {
  std::vector<CandidateVerdict*> ranked;
  for (CandidateVerdict& c : verdict.candidates) {
    if (c.status == CandidateStatus::kMeetsSlo && c.has_objective) ranked.push_back(&c);
  }
  const bool higher = HigherIsBetter(study.objective);
  // Objective values closer than the capacity search's precision are a tie: the search cannot
  // tell them apart, so the lower TTFT p99 (a pooling study: E2E p99) decides.
  const double precision = study.plan.capacity_precision;
  auto tied = [&](const CandidateVerdict* a, const CandidateVerdict* b) {
    const double scale = std::max(std::abs(a->objective), std::abs(b->objective));
    return scale == 0 || std::abs(a->objective - b->objective) <= precision * scale;
  };
  std::stable_sort(ranked.begin(), ranked.end(), [&](const CandidateVerdict* a, const CandidateVerdict* b) {
    return higher ? a->objective > b->objective : a->objective < b->objective;
  });
  // Within each run of ties with the leader, the lower TTFT p99 first.
  if (ranked.size() > 1 && tied(ranked[0], ranked[1])) {
    std::size_t end = 1;
    while (end < ranked.size() && tied(ranked[0], ranked[end])) ++end;
    std::stable_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(end),
                     [](const CandidateVerdict* a, const CandidateVerdict* b) {
                       const double ta = a->TailLatencyMs() < 0 ? 1e300 : a->TailLatencyMs();
                       const double tb = b->TailLatencyMs() < 0 ? 1e300 : b->TailLatencyMs();
                       return ta < tb;
                     });
    verdict.tied = true;
  }
  for (std::size_t i = 0; i < ranked.size(); ++i) ranked[i]->rank = static_cast<int>(i + 1);
  if (!ranked.empty()) verdict.choice = ranked[0]->name;
  if (ranked.size() > 1) verdict.rollback = ranked[1]->name;
}

const CandidateVerdict* Named(const Verdict& v, const std::string& name) {
  for (const CandidateVerdict& c : v.candidates) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string ObjectiveText(const CandidateVerdict& c) { return fmt::format("{:.4g} {}", c.objective, c.objective_unit); }

const EvidenceItem* FirstFailure(const CandidateVerdict& c) {
  for (const EvidenceItem& e : c.evidence) {
    if (e.status == CellStatus::kFail) return &e;
  }
  return nullptr;
}

std::vector<std::string> Pointers(const CandidateVerdict& c) {
  std::vector<std::string> out;
  for (const EvidenceItem& e : c.evidence) {
    if (!e.pointer.empty() && std::find(out.begin(), out.end(), e.pointer) == out.end()) out.push_back(e.pointer);
  }
  return out;
}

void WriteRationale(const Study& study, Verdict& v) {
  if (v.emulated) {
    v.rationale.push_back({"Every figure below comes from bakeoff's emulated engine (emulated): it exercises the "
                           "method and is no conclusion about any real engine's performance.",
                           {"manifest.json#/emulated"}});
  }
  int meeting = 0;
  for (const CandidateVerdict& c : v.candidates) meeting += c.status == CandidateStatus::kMeetsSlo ? 1 : 0;
  if (const CandidateVerdict* choice = Named(v, v.choice)) {
    v.rationale.push_back(
        {fmt::format("Keep {}: it meets every SLO clause and has the best {} of the {} candidate{} that do ({}{}).",
                     choice->name, ObjectiveName(study.objective), meeting, meeting == 1 ? "" : "s", ObjectiveText(*choice),
                     choice->capacity_per_s > 0 ? fmt::format(", capacity {:.3g} req/s", choice->capacity_per_s) : ""),
         Pointers(*choice)});
  } else {
    v.rationale.push_back({"No candidate meets every SLO clause: keep what runs today, or relax the SLO knowingly.",
                           {"verdict.json#/candidates"}});
  }
  if (const CandidateVerdict* rollback = Named(v, v.rollback); rollback != nullptr && v.tied) {
    const CandidateVerdict* choice = Named(v, v.choice);
    v.rationale.push_back(
        {fmt::format("{} and {} are within the capacity search's precision ({:.0f}%) of each other "
                     "on {}; the lower {} p99 at capacity decided ({} against {}).",
                     choice->name, rollback->name, 100 * study.plan.capacity_precision,
                     ObjectiveName(study.objective), IsPoolingTask(study.task) ? "E2E" : "TTFT",
                     Ms(choice->TailLatencyMs()), Ms(rollback->TailLatencyMs())),
         {Pointers(*choice).empty() ? "" : Pointers(*choice)[0],
          Pointers(*rollback).empty() ? "" : Pointers(*rollback)[0]}});
  }
  if (const CandidateVerdict* rollback = Named(v, v.rollback)) {
    v.rationale.push_back({fmt::format("Roll back to {}: it also meets the SLO ({}).", rollback->name, ObjectiveText(*rollback)),
                           Pointers(*rollback)});
  } else if (!v.choice.empty()) {
    v.rationale.push_back({"There is no rollback candidate: no second candidate meets the SLO.", {"verdict.json#/candidates"}});
  }
  for (const CandidateVerdict& c : v.candidates) {
    if (c.name == v.choice || c.name == v.rollback) continue;
    switch (c.status) {
      case CandidateStatus::kEliminated:
        v.rationale.push_back({fmt::format("{} was eliminated at the gate: {}.", c.name, c.reasons.empty() ? "" : c.reasons[0]),
                               {"gate.json"}});
        break;
      case CandidateStatus::kDisqualified:
        v.rationale.push_back({fmt::format("{} was disqualified: {}.", c.name, c.reasons.empty() ? "" : c.reasons[0]),
                               {fmt::format("candidates/{}/probes/probes.json", c.name), "gate.json"}});
        break;
      case CandidateStatus::kFailed:
        v.rationale.push_back({fmt::format("{} failed during the study: {}.", c.name, c.reasons.empty() ? "" : c.reasons[0]),
                               {fmt::format("candidates/{}", c.name)}});
        break;
      case CandidateStatus::kNotMeasured:
        v.rationale.push_back({fmt::format("{} was not measured: {}.", c.name, c.reasons.empty() ? "" : c.reasons[0]),
                               {fmt::format("candidates/{}", c.name)}});
        break;
      case CandidateStatus::kFailsSlo: {
        const EvidenceItem* e = FirstFailure(c);
        v.rationale.push_back({fmt::format("{} does not meet the SLO: {} {}.", c.name, e ? e->clause : "", e ? e->text : ""),
                               {e ? e->pointer : ""}});
        break;
      }
      case CandidateStatus::kMeetsSlo:
        v.rationale.push_back({fmt::format("{} meets the SLO but ranks {} ({}).", c.name, c.rank, ObjectiveText(c)), Pointers(c)});
        break;
    }
  }
}

void WriteRevisit(const Study& study, const WorkloadFigures& w, Verdict& v) {
  for (const std::string& name : {v.choice, v.rollback}) {
    const CandidateVerdict* c = Named(v, name);
    if (c == nullptr) continue;
    v.revisit.push_back(fmt::format("a new version of {} ({}{}): rerun this study against it and compare the bundles",
                                    c->name, c->engine, c->version.empty() ? "" : " " + c->version));
  }
  if (w.prefix_reuse >= 0.3) {
    v.revisit.push_back(fmt::format("prefix reuse falls below 30% (now {:.0f}% of prompt tokens): the choice may rest on "
                                    "prefix caching",
                                    100 * w.prefix_reuse));
  } else if (w.prefix_reuse >= 0) {
    v.revisit.push_back(fmt::format("prefix reuse rises above 30% (now {:.0f}%): engines with prefix caching would gain",
                                    100 * w.prefix_reuse));
  }
  if (w.output_input_ratio > 0) {
    v.revisit.push_back(w.output_input_ratio < 0.5
                            ? fmt::format("output/input tokens rises above 0.5 (now {:.2f}): decode would dominate", w.output_input_ratio)
                            : fmt::format("output/input tokens falls below 0.5 (now {:.2f}): prefill would dominate", w.output_input_ratio));
  }
  if (w.peak_to_mean_1s > 0) {
    v.revisit.push_back(fmt::format("bursts grow: 1 s peak-to-mean above {:.1f} (now {:.1f})",
                                    std::max(2.0, 1.5 * w.peak_to_mean_1s), w.peak_to_mean_1s));
  }
  if (const CandidateVerdict* c = Named(v, v.choice); c != nullptr && c->capacity_per_s > 0 && w.rate_per_s > 0) {
    v.revisit.push_back(fmt::format("traffic per replica nears {:.3g} req/s (the capacity found; the workload averages "
                                    "{:.3g} req/s)",
                                    c->capacity_per_s, w.rate_per_s));
  }
  if (study.model.max_context > 0) {
    v.revisit.push_back(fmt::format("the model, its precision ({}) or its context ({} tokens) changes", study.model.quantization,
                                    study.model.max_context));
  }
}

void CheckMistakes(const Study& study, const WorkloadFigures& w, const GateTable& gate,
                   const std::vector<CandidateResult>& candidates, Verdict& v) {
  if (w.lengths_fixed) {
    v.mistakes.push_back({"fixed_length_traffic",
                          "every request has the same prompt and answer length: real traffic mixes lengths, and "
                          "engines differ most on the mix"});
  }
  const bool tail = std::any_of(study.slo.latency.terms.begin(), study.slo.latency.terms.end(),
                                [](const analyze::SloTerm& t) { return t.quantile >= 0.99; });
  if (!tail) {
    v.mistakes.push_back({"no_tail_percentile", "the SLO has no p99 (or higher) term: throughput without the tail hides "
                                                "what users feel at peak"});
  }
  for (const CandidateVerdict& c : v.candidates) {
    if (c.version.empty() && c.status != CandidateStatus::kEliminated) {
      v.mistakes.push_back({"version_not_recorded", fmt::format("{}: no engine version was discovered or catalogued, so "
                                                                "this result cannot be tied to a build",
                                                                c.name)});
    }
  }
  for (const CandidateResult& c : candidates) {
    if (c.eliminated) continue;  // it was never measured, so no unequal work was compared
    // What the runs measured says more than what the adapter expects; each kind once (the same
    // sentence with other counts in a later phase is the same finding).
    std::vector<std::string> notes;
    std::set<std::string> kinds;
    for (const PhaseResult& phase : c.phases) {
      for (const std::string& note : phase.unequal_work) {
        std::string kind;
        std::copy_if(note.begin(), note.end(), std::back_inserter(kind), [](char ch) { return !std::isdigit(static_cast<unsigned char>(ch)); });
        if (kinds.insert(kind).second) notes.push_back(fmt::format("{} phase: {}", PhaseName(phase.phase), note));
      }
    }
    if (notes.empty()) notes = c.unequal_work;
    for (const std::string& note : notes) v.mistakes.push_back({"unequal_work", c.name + ": " + note});
  }
  for (const GateRow& row : gate.rows) {
    for (const GateCell& cell : row.cells) {
      if (cell.constraint == "layer" && cell.status == CellStatus::kFail) {
        v.mistakes.push_back({"mixed_layers", fmt::format("{} {}", row.candidate, cell.reason)});
      }
    }
  }
  std::vector<std::string> tuned, untuned;
  for (const CandidateSpec& c : study.candidates) (c.settings.empty() ? untuned : tuned).push_back(c.name);
  if (!tuned.empty() && !untuned.empty()) {
    v.mistakes.push_back({"uneven_tuning", fmt::format("{} {} tuned (settings given) while {} {} on defaults: tune every "
                                                       "candidate or none",
                                                       fmt::join(tuned, ", "), tuned.size() == 1 ? "is" : "are",
                                                       fmt::join(untuned, ", "), untuned.size() == 1 ? "runs" : "run")});
  }
  if (study.model.revision.empty()) {
    v.mistakes.push_back({"unpinned_model_revision", "model.revision is not pinned: a later rerun may load other weights "
                                                     "under the same name"});
  }
  if (study.plan.repeats < 2 && study.Runs(Phase::kCapacity)) {
    v.mistakes.push_back({"single_repeat", "one measurement per rate: nothing shows how much a repeat would differ"});
  }
}

}  // namespace

std::string_view CandidateStatusName(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kEliminated: return "eliminated";
    case CandidateStatus::kDisqualified: return "disqualified";
    case CandidateStatus::kFailed: return "failed";
    case CandidateStatus::kNotMeasured: return "not_measured";
    case CandidateStatus::kFailsSlo: return "fails_slo";
    case CandidateStatus::kMeetsSlo: return "meets_slo";
  }
  return "?";
}

Verdict Decide(const Study& study, const WorkloadFigures& workload, const GateTable& gate,
               const std::vector<CandidateResult>& candidates) {
  Verdict v;
  v.objective = std::string(ObjectiveName(study.objective));
  for (const CandidateResult& c : candidates) {
    v.candidates.push_back(CandidateJudge(study, gate, c).Judge());
    v.emulated = v.emulated || c.emulated;
    v.simulated = v.simulated || c.capacity.simulated ||
                  std::any_of(c.phases.begin(), c.phases.end(), [](const PhaseResult& p) { return p.simulated; });
  }
  Rank(study, v);
  WriteRationale(study, v);
  WriteRevisit(study, workload, v);
  CheckMistakes(study, workload, gate, candidates, v);
  return v;
}

nlohmann::json ToJson(const Verdict& v) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const CandidateVerdict& c : v.candidates) {
    nlohmann::json evidence = nlohmann::json::array();
    for (const EvidenceItem& e : c.evidence) {
      evidence.push_back({{"clause", e.clause},
                          {"status", CellStatusName(e.status)},
                          {"observed", e.observed},
                          {"threshold", e.threshold},
                          {"unit", e.unit},
                          {"text", e.text},
                          {"pointer", e.pointer}});
    }
    nlohmann::json candidate = {
        {"name", c.name},
        {"findings", c.findings},
        {"status", CandidateStatusName(c.status)},
        {"engine", c.engine},
        {"version", c.version},
        {"emulated", c.emulated},
        {"rank", c.rank},
        {"objective", c.has_objective ? nlohmann::json(c.objective) : nlohmann::json()},
        {"objective_unit", c.objective_unit},
        {"capacity_per_s",
         c.capacity_per_s >= 0 ? nlohmann::json(c.capacity_per_s) : nlohmann::json()},
        {"goodput_per_s",
         c.goodput_per_s >= 0 ? nlohmann::json(c.goodput_per_s) : nlohmann::json()},
        {"ttft_p99_ms", c.ttft_p99_ms >= 0 ? nlohmann::json(c.ttft_p99_ms) : nlohmann::json()},
        {"cost_per_million_tokens", c.cost_per_million_tokens >= 0
                                        ? nlohmann::json(c.cost_per_million_tokens)
                                        : nlohmann::json()},
        {"reasons", c.reasons},
        {"risks", c.risks},
        {"evidence", evidence}};
    // A pooling study's own figures; absent from every other study's verdict.json.
    if (c.e2e_p99_ms >= 0) candidate["e2e_p99_ms"] = c.e2e_p99_ms;
    if (c.inputs_per_s >= 0) candidate["inputs_per_s"] = c.inputs_per_s;
    candidates.push_back(std::move(candidate));
  }
  nlohmann::json rationale = nlohmann::json::array();
  for (const Sentence& s : v.rationale) rationale.push_back({{"text", s.text}, {"pointers", s.pointers}});
  nlohmann::json mistakes = nlohmann::json::array();
  for (const Mistake& m : v.mistakes) mistakes.push_back({{"code", m.code}, {"message", m.message}});
  return {{"schema_version", 1},
          {"emulated", v.emulated},
          {"simulated", v.simulated},
          {"objective", v.objective},
          {"choice", v.choice.empty() ? nlohmann::json() : nlohmann::json(v.choice)},
          {"rollback", v.rollback.empty() ? nlohmann::json() : nlohmann::json(v.rollback)},
          {"tied", v.tied},
          {"rationale", rationale},
          {"revisit_when", v.revisit},
          {"mistakes", mistakes},
          {"candidates", candidates}};
}

Verdict VerdictFromJson(const nlohmann::json& j) {
  const auto number_or = [](const nlohmann::json& v, double absent) { return v.is_number() ? v.get<double>() : absent; };
  const auto text_or_empty = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : std::string(); };
  Verdict v;
  v.emulated = j.at("emulated").get<bool>();
  v.simulated = j.at("simulated").get<bool>();
  v.objective = j.at("objective").get<std::string>();
  v.choice = text_or_empty(j.at("choice"));
  v.rollback = text_or_empty(j.at("rollback"));
  v.tied = j.at("tied").get<bool>();
  for (const nlohmann::json& s : j.at("rationale")) {
    v.rationale.push_back({s.at("text").get<std::string>(), s.at("pointers").get<std::vector<std::string>>()});
  }
  v.revisit = j.at("revisit_when").get<std::vector<std::string>>();
  for (const nlohmann::json& m : j.at("mistakes")) {
    v.mistakes.push_back({m.at("code").get<std::string>(), m.at("message").get<std::string>()});
  }
  for (const nlohmann::json& c : j.at("candidates")) {
    CandidateVerdict cv;
    cv.name = c.at("name").get<std::string>();
    cv.findings = c.at("findings").get<std::vector<std::string>>();
    const std::string status = c.at("status").get<std::string>();
    for (CandidateStatus s : {CandidateStatus::kEliminated, CandidateStatus::kDisqualified, CandidateStatus::kFailed,
                              CandidateStatus::kNotMeasured, CandidateStatus::kFailsSlo, CandidateStatus::kMeetsSlo}) {
      if (CandidateStatusName(s) == status) cv.status = s;
    }
    cv.engine = c.at("engine").get<std::string>();
    cv.version = c.at("version").get<std::string>();
    cv.emulated = c.at("emulated").get<bool>();
    cv.rank = c.at("rank").get<int>();
    cv.has_objective = c.at("objective").is_number();
    cv.objective = number_or(c.at("objective"), 0);
    cv.objective_unit = c.at("objective_unit").get<std::string>();
    cv.capacity_per_s = number_or(c.at("capacity_per_s"), -1);
    cv.goodput_per_s = number_or(c.at("goodput_per_s"), -1);
    cv.ttft_p99_ms = number_or(c.at("ttft_p99_ms"), -1);
    cv.e2e_p99_ms = c.contains("e2e_p99_ms") ? number_or(c.at("e2e_p99_ms"), -1) : -1;
    cv.inputs_per_s = c.contains("inputs_per_s") ? number_or(c.at("inputs_per_s"), -1) : -1;
    cv.cost_per_million_tokens = number_or(c.at("cost_per_million_tokens"), -1);
    cv.reasons = c.at("reasons").get<std::vector<std::string>>();
    cv.risks = c.at("risks").get<std::vector<std::string>>();
    for (const nlohmann::json& e : c.at("evidence")) {
      EvidenceItem item;
      item.clause = e.at("clause").get<std::string>();
      const std::string cell = e.at("status").get<std::string>();
      item.status = cell == "pass" ? CellStatus::kPass : cell == "fail" ? CellStatus::kFail : CellStatus::kUnknown;
      // An unmeasured figure is NaN, which JSON writes as null.
      item.observed = number_or(e.at("observed"), std::numeric_limits<double>::quiet_NaN());
      item.threshold = number_or(e.at("threshold"), std::numeric_limits<double>::quiet_NaN());
      item.unit = e.at("unit").get<std::string>();
      item.text = e.at("text").get<std::string>();
      item.pointer = e.at("pointer").get<std::string>();
      cv.evidence.push_back(std::move(item));
    }
    v.candidates.push_back(std::move(cv));
  }
  return v;
}

}  // namespace bakeoff::study
