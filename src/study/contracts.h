// study/contracts.h
//
// Owns: what each probe finding breaks, and how a study judges it. A probe reports what it saw
// with a severity of its own; whether that eliminates a candidate is the study's call. A finding
// disqualifies only when it breaks something the study states: a required feature
// (requires.features), an SLO clause the study sets (slo.cold_start_max, slo.drain_max;
// availability is always set), a contract it lists (requires.contracts), or when the candidate
// cannot be measured at all (it never served). Anything else is a risk that the decision record
// lists with its evidence, or a note; a study can accept a risk by code, with a reason, and the
// acceptance is recorded beside it. Also owns the vocabulary of contracts a study can state, with
// one line of meaning each and the probe that tests it (docs/formats/study.md, "Contracts").
// Does not own: running probes or their findings' wording (qualify/), the gate cells (gate.h).
//
// Thread-safety: constant data and pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "study/features.h"

namespace bakeoff::qualify {
struct Finding;
}  // namespace bakeoff::qualify

namespace bakeoff::study {

struct Study;

// The behaviours a study can require by name (requires.contracts) that the probes test.
enum class Contract {
  kGracefulShutdown,     // SIGTERM: streams in flight finish or end with an error, then exit 0
  kBoundedQueue,         // overload is shed (429/503) and the server serves again once it ends
  kRejectsUnknownModel,  // a request for a model the server does not serve is refused
  kNoSilentTruncation,   // a prompt over the context is refused, never cut and answered
  kHonestHealth,         // health says ready only when serving, and answers while busy
  kRejectsBadInput,      // malformed or oversized requests get a prompt 4xx, not a hang or a 5xx
  kExposesMetrics,       // a Prometheus page with the signals operators alert on
  kOutputQuality,        // the quality probe's score is at or above its threshold
};

std::span<const Contract> AllContracts();
std::string_view ContractName(Contract contract);     // "graceful_shutdown", ...
std::string_view ContractMeaning(Contract contract);  // one line
std::string_view ContractProbe(Contract contract);    // the probe that tests it
std::optional<Contract> ParseContract(std::string_view name);
// "'x' is not a contract; did you mean graceful_shutdown?" or the list of contracts.
std::string UnknownContractMessage(std::string_view name);

// What a finding breaks.
enum class Breaks {
  kServing,       // the candidate could not be measured (never started, never served, lost the model)
  kAvailability,  // it died or stopped answering health: the availability clause, always set
  kColdStartMax,  // slo.cold_start_max
  kDrainMax,      // slo.drain_max
  kFeature,       // a feature, disqualifying when requires.features has it
  kContract,      // a contract, disqualifying when requires.contracts has it
  kNothing,       // nothing a study states: a risk or a note
};

struct FindingRule {
  std::string_view code;  // "<probe>.<what>"; one '*' stands for any name (a probe, an API, a signal)
  Breaks breaks = Breaks::kNothing;
  Feature feature = Feature::kStreaming;       // with kFeature
  Contract contract = Contract::kHonestHealth;  // with kContract
};

std::span<const FindingRule> FindingRules();
// Whether `code` is `pattern`, or matches it with its one '*' standing for a non-empty name.
bool CodeMatches(std::string_view pattern, std::string_view code);
// The first rule whose code matches `code`, or is `code` (a pattern as written in the table);
// null for a code no rule knows.
const FindingRule* RuleFor(std::string_view code);
// "'x' is no probe finding; did you mean cancellation.keeps_generating_after_prefill_cancel?".
std::string UnknownFindingMessage(std::string_view code);
// What the rule breaks as the record writes it: "serving", "slo:availability",
// "slo:cold_start_max", "feature:streaming_cancel", "contract:graceful_shutdown", or "".
std::string BrokenName(const FindingRule& rule);
// Whether `study` states what the rule breaks (kServing and kAvailability: always).
bool StudyStates(const Study& study, const FindingRule& rule);

enum class Judgement { kDisqualifies, kRisk, kAcceptedRisk, kNote };
std::string_view JudgementName(Judgement judgement);  // "disqualifies", "risk", "accepted_risk", "note"
std::optional<Judgement> ParseJudgement(std::string_view name);

struct JudgedFinding {
  Judgement judgement = Judgement::kRisk;
  std::string breaks;           // BrokenName, or "" for a code without a rule
  std::string accepted_reason;  // kAcceptedRisk: the study's reason
};

// A stated contract is broken by any finding but an info one; without a rule a finding keeps its
// probe's severity (a code added to qualify/ and not here still disqualifies, never slips by).
JudgedFinding JudgeFinding(const Study& study, const qualify::Finding& finding);

}  // namespace bakeoff::study
