// study/contracts.cc: what each probe finding breaks (contracts.h).
#include "study/contracts.h"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/yaml_doc.h"
#include "qualify/probe.h"
#include "study/study.h"

namespace bakeoff::study {
namespace {

struct ContractSpec {
  Contract contract;
  std::string_view name;
  std::string_view probe;
  std::string_view meaning;
};

// In enum order.
constexpr ContractSpec kContracts[] = {
    {Contract::kGracefulShutdown, "graceful_shutdown", "sigterm_drain",
     "on SIGTERM, streams in flight finish (or end with an error event) and the process exits 0"},
    {Contract::kBoundedQueue, "bounded_queue", "overload",
     "past its capacity the server refuses the excess (429/503) instead of queueing without bound, "
     "and serves normally again within 30 s of the overload ending"},
    {Contract::kRejectsUnknownModel, "rejects_unknown_model", "compatibility",
     "a request naming a model the server does not serve is refused, not answered by another model"},
    {Contract::kNoSilentTruncation, "no_silent_truncation", "compatibility",
     "a prompt longer than the context is refused, never cut and answered as if whole"},
    {Contract::kHonestHealth, "honest_health", "readiness",
     "the health route says ready only when requests are served, and keeps answering while busy"},
    {Contract::kRejectsBadInput, "rejects_bad_input", "bad_input",
     "malformed, oversized or invalid requests get a prompt 4xx, never a hang or a 5xx"},
    {Contract::kExposesMetrics, "exposes_metrics", "observability",
     "a Prometheus page with the signals an operator alerts on (queue, running, tokens, KV use)"},
    {Contract::kOutputQuality, "output_quality", "quality",
     "the quality probe's reference answers score at or above its threshold"},
};

constexpr std::size_t kContractCount = std::size(kContracts);

constexpr std::array<Contract, kContractCount> kAllContracts = [] {
  std::array<Contract, kContractCount> all{};
  for (std::size_t i = 0; i < kContractCount; ++i) all[i] = kContracts[i].contract;
  return all;
}();

constexpr std::array<std::string_view, kContractCount> kContractNames = [] {
  std::array<std::string_view, kContractCount> names{};
  for (std::size_t i = 0; i < kContractCount; ++i) names[i] = kContracts[i].name;
  return names;
}();

const ContractSpec& SpecOf(Contract contract) {
  const auto index = static_cast<std::size_t>(contract);
  BAKEOFF_CHECK(index < kContractCount && kContracts[index].contract == contract)
      << "contract table out of enum order at " << index;
  return kContracts[index];
}

constexpr FindingRule Serving(std::string_view code) { return {code, Breaks::kServing}; }
constexpr FindingRule Available(std::string_view code) { return {code, Breaks::kAvailability}; }
constexpr FindingRule Needs(std::string_view code, Feature f) { return {code, Breaks::kFeature, f}; }
constexpr FindingRule Breaking(std::string_view code, Contract c) {
  return {code, Breaks::kContract, Feature::kStreaming, c};
}
constexpr FindingRule Nothing(std::string_view code) { return {code, Breaks::kNothing}; }

// Every finding code qualify/ writes. The first match wins, so specific codes come before the
// patterns that would also match them.
constexpr FindingRule kRules[] = {
    // The candidate could not be measured at all.
    Serving("*.launch_failed"),
    Serving("*.died_during_start"),
    Serving("*.never_ready"),
    Serving("*.not_ready"),
    Serving("*.not_serving"),
    Serving("*.no_model"),
    Serving("restart.relaunch_failed"),
    Serving("restart.not_back"),
    Serving("compatibility.*_non_streaming_failed"),
    Serving("compatibility.*_streaming_failed"),
    Serving("compatibility.max_tokens_failed"),
    Serving("compatibility.fixed_length_failed"),
    // It died, or stopped answering its health route, under what a client can send.
    Available("*.died"),
    Available("bad_input.health_lost"),
    Available("overload.crash_on_oversized_prompt"),
    // SLO clauses.
    {"cold_start.slower_than_budget", Breaks::kColdStartMax},
    {"restart.slower_than_budget", Breaks::kColdStartMax},
    // Features.
    Needs("compatibility.stream_usage_failed", Feature::kUsageInStream),
    Needs("compatibility.json_schema_failed", Feature::kStructuredOutput),
    Needs("compatibility.tools_failed", Feature::kToolCalls),
    Needs("compatibility.logprobs_failed", Feature::kLogprobs),
    Needs("compatibility.determinism_failed", Feature::kSeed),
    Needs("cancellation.keeps_generating_after_*_cancel", Feature::kStreamingCancel),
    Needs("cancellation.slow_to_stop_after_*_cancel", Feature::kStreamingCancel),
    Needs("cancellation.capacity_not_back_after_*_cancel", Feature::kStreamingCancel),
    // Contracts a study may state.
    Breaking("sigterm_drain.streams_cut_silently", Contract::kGracefulShutdown),
    Breaking("sigterm_drain.crashed_on_sigterm", Contract::kGracefulShutdown),
    Breaking("sigterm_drain.ignores_sigterm", Contract::kGracefulShutdown),
    Breaking("sigterm_drain.nonzero_exit", Contract::kGracefulShutdown),
    Breaking("sigterm_drain.health_ready_during_drain", Contract::kHonestHealth),
    Breaking("readiness.ready_before_serving", Contract::kHonestHealth),
    Breaking("readiness.health_blocks_when_busy", Contract::kHonestHealth),
    Breaking("overload.queues_without_bound", Contract::kBoundedQueue),
    Breaking("overload.no_recovery", Contract::kBoundedQueue),
    Breaking("compatibility.unknown_model_served", Contract::kRejectsUnknownModel),
    Breaking("compatibility.over_context_truncated", Contract::kNoSilentTruncation),
    Breaking("overload.oversized_prompt_accepted", Contract::kNoSilentTruncation),
    Breaking("bad_input.hang", Contract::kRejectsBadInput),
    Breaking("bad_input.server_error", Contract::kRejectsBadInput),
    Breaking("overload.hang_on_oversized_prompt", Contract::kRejectsBadInput),
    Breaking("overload.server_error_on_oversized_prompt", Contract::kRejectsBadInput),
    Breaking("observability.no_metrics", Contract::kExposesMetrics),
    Breaking("observability.missing_signals", Contract::kExposesMetrics),
    Breaking("observability.running_gauge_blind", Contract::kExposesMetrics),
    Breaking("observability.*_never_moves", Contract::kExposesMetrics),
    Breaking("quality.score_below_threshold", Contract::kOutputQuality),
    // Worth knowing, breaking nothing a study states.
    Nothing("*.time_bound"),
    Nothing("*.interrupted"),
    Nothing("bad_input.no_answer"),
    Nothing("bad_input.accepted"),
    Nothing("bad_input.no_error_body"),
    Nothing("compatibility.models_failed"),
    Nothing("compatibility.batch_inconsistent"),
    Nothing("sigterm_drain.requests_reset_unanswered"),
    Nothing("compatibility.n_failed"),
    Nothing("compatibility.stop_failed"),
    Nothing("compatibility.stop_ignored"),
    Nothing("compatibility.unknown_model_unclear_error"),
    Nothing("compatibility.over_context_accepted"),
    Nothing("compatibility.over_context_unclear_error"),
    Nothing("readiness.serves_long_before_ready"),
    Nothing("readiness.nonstandard_not_ready_status"),
    Nothing("sigterm_drain.streams_ended_with_error"),
    Nothing("overload.shed_without_retry_after"),
    Nothing("overload.errors_under_overload"),
    Nothing("observability.unparsable_lines"),
};

}  // namespace

std::span<const Contract> AllContracts() { return kAllContracts; }
std::string_view ContractName(Contract contract) { return SpecOf(contract).name; }
std::string_view ContractMeaning(Contract contract) { return SpecOf(contract).meaning; }
std::string_view ContractProbe(Contract contract) { return SpecOf(contract).probe; }

std::optional<Contract> ParseContract(std::string_view name) {
  for (const ContractSpec& spec : kContracts) {
    if (spec.name == name) return spec.contract;
  }
  return std::nullopt;
}

std::string UnknownContractMessage(std::string_view name) {
  if (std::optional<std::string> near = yaml::NearestName(name, kContractNames)) {
    return fmt::format("'{}' is not a contract; did you mean {}?", name, *near);
  }
  return fmt::format("'{}' is not a contract (contracts: {})", name, yaml::JoinNames(kContractNames));
}

bool CodeMatches(std::string_view pattern, std::string_view code) {
  const std::size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == code;
  const std::string_view head = pattern.substr(0, star);
  const std::string_view tail = pattern.substr(star + 1);
  return code.size() > head.size() + tail.size() && code.substr(0, head.size()) == head &&
         code.substr(code.size() - tail.size()) == tail;
}

std::span<const FindingRule> FindingRules() { return kRules; }

const FindingRule* RuleFor(std::string_view code) {
  for (const FindingRule& rule : kRules) {
    if (CodeMatches(rule.code, code)) return &rule;
  }
  return nullptr;
}

std::string UnknownFindingMessage(std::string_view code) {
  std::vector<std::string_view> codes;
  for (const FindingRule& rule : kRules) codes.push_back(rule.code);
  if (std::optional<std::string> near = yaml::NearestName(code, codes)) {
    return fmt::format("'{}' is no probe finding; did you mean {}?", code, *near);
  }
  return fmt::format("'{}' is no probe finding (docs/formats/probes.md lists them)", code);
}

std::string BrokenName(const FindingRule& rule) {
  switch (rule.breaks) {
    case Breaks::kServing: return "serving";
    case Breaks::kAvailability: return "slo:availability";
    case Breaks::kColdStartMax: return "slo:cold_start_max";
    case Breaks::kDrainMax: return "slo:drain_max";
    case Breaks::kFeature: return fmt::format("feature:{}", FeatureName(rule.feature));
    case Breaks::kContract: return fmt::format("contract:{}", ContractName(rule.contract));
    case Breaks::kNothing: return "";
  }
  return "";
}

bool StudyStates(const Study& study, const FindingRule& rule) {
  auto has = [](const auto& list, auto value) { return std::find(list.begin(), list.end(), value) != list.end(); };
  switch (rule.breaks) {
    case Breaks::kServing:
    case Breaks::kAvailability: return true;
    case Breaks::kColdStartMax: return study.slo.cold_start_max.has_value();
    case Breaks::kDrainMax: return study.slo.drain_max.has_value();
    case Breaks::kFeature: return has(study.required_features, rule.feature);
    case Breaks::kContract:
      // A drain limit is a graceful shutdown with a deadline.
      return has(study.required_contracts, rule.contract) ||
             (rule.contract == Contract::kGracefulShutdown && study.slo.drain_max.has_value());
    case Breaks::kNothing: return false;
  }
  return false;
}

std::string_view JudgementName(Judgement judgement) {
  switch (judgement) {
    case Judgement::kDisqualifies: return "disqualifies";
    case Judgement::kRisk: return "risk";
    case Judgement::kAcceptedRisk: return "accepted_risk";
    case Judgement::kNote: return "note";
  }
  return "?";
}

std::optional<Judgement> ParseJudgement(std::string_view name) {
  for (Judgement j : {Judgement::kDisqualifies, Judgement::kRisk, Judgement::kAcceptedRisk, Judgement::kNote}) {
    if (JudgementName(j) == name) return j;
  }
  return std::nullopt;
}

JudgedFinding JudgeFinding(const Study& study, const qualify::Finding& finding) {
  const std::string_view code = finding.code;
  const bool disqualifying = finding.severity == qualify::Severity::kDisqualifying;
  const bool info = finding.severity == qualify::Severity::kInfo;
  JudgedFinding judged;
  const FindingRule* rule = RuleFor(code);
  if (rule != nullptr) judged.breaks = BrokenName(*rule);
  bool breaks_stated = false;
  if (rule == nullptr) {
    breaks_stated = disqualifying;
  } else if (rule->breaks == Breaks::kServing) {
    breaks_stated = disqualifying;  // a core route failing on the API the study does not use is a risk
  } else {
    breaks_stated = !info && StudyStates(study, *rule);
  }
  if (breaks_stated) {
    judged.judgement = Judgement::kDisqualifies;
    return judged;
  }
  for (const AcceptedRisk& accepted : study.accepted_risks) {
    if (CodeMatches(accepted.finding, code)) {
      judged.judgement = Judgement::kAcceptedRisk;
      judged.accepted_reason = accepted.reason;
      return judged;
    }
  }
  judged.judgement = info ? Judgement::kNote : Judgement::kRisk;
  return judged;
}

}  // namespace bakeoff::study
