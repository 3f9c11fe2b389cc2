#include "study/contracts.h"

#include <gtest/gtest.h>

#include <string>

#include "qualify/probe.h"
#include "study/study.h"

namespace bakeoff::study {
namespace {

Result<Study> Parse(const std::string& extra, const std::string& slo = "{latency: {ttft_p99: 1s}}") {
  return ParseStudy(R"(name: c
model: {name: m, architecture: llama, quantization: f16, max_context: 4096}
hardware: {accelerator: cpu}
traffic: {shape: s.yaml}
candidates:
  - {name: a, url: 'http://127.0.0.1:1'}
slo: )" + slo + "\n" + extra,
                    "c.yaml");
}

Study Parsed(const std::string& extra, const std::string& slo = "{latency: {ttft_p99: 1s}}") {
  Result<Study> s = Parse(extra, slo);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? s.value() : Study{};
}

JudgedFinding Judge(const Study& s, const char* code, qualify::Severity severity) {
  return JudgeFinding(s, qualify::Finding{severity, code, "", {}});
}

std::string Mistakes(const std::string& extra) {
  Result<Study> s = Parse(extra);
  return s.ok() ? "" : s.error().message;
}

TEST(ContractsTest, EveryFindingTheRealEngineStudyRaisedHasARule) {
  for (const char* code :
       {"readiness.health_blocks_when_busy", "compatibility.unknown_model_served", "compatibility.over_context_truncated",
        "bad_input.hang", "cancellation.keeps_generating_after_prefill_cancel", "overload.no_recovery",
        "sigterm_drain.streams_cut_silently", "sigterm_drain.crashed_on_sigterm", "observability.queue_never_moves",
        "compatibility.completions_non_streaming_failed", "cold_start.time_bound"}) {
    EXPECT_NE(RuleFor(code), nullptr) << code;
  }
  EXPECT_EQ(RuleFor("cancellation.keeps_generating_after__cancel"), nullptr);  // '*' stands for a name
  EXPECT_EQ(RuleFor("nonsense"), nullptr);
  EXPECT_EQ(BrokenName(*RuleFor("cancellation.keeps_generating_after_decode_cancel")), "feature:streaming_cancel");
  EXPECT_EQ(BrokenName(*RuleFor("sigterm_drain.streams_cut_silently")), "contract:graceful_shutdown");
  EXPECT_EQ(BrokenName(*RuleFor("cold_start.slower_than_budget")), "slo:cold_start_max");
  EXPECT_EQ(BrokenName(*RuleFor("bad_input.died")), "slo:availability");
  EXPECT_EQ(BrokenName(*RuleFor("readiness.never_ready")), "serving");
  EXPECT_EQ(BrokenName(*RuleFor("overload.shed_without_retry_after")), "");
  // Patterns are found as written, so accept_risks and known_limits may name them.
  EXPECT_EQ(RuleFor("cancellation.keeps_generating_after_*_cancel"),
            RuleFor("cancellation.keeps_generating_after_prefill_cancel"));
}

TEST(ContractsTest, ContractNamesRoundTripAndTypoesAreSuggested) {
  for (Contract c : AllContracts()) {
    EXPECT_EQ(ParseContract(ContractName(c)), c);
    EXPECT_FALSE(ContractMeaning(c).empty());
    EXPECT_FALSE(ContractProbe(c).empty());
  }
  EXPECT_EQ(UnknownContractMessage("graceful_shutdwn"), "'graceful_shutdwn' is not a contract; did you mean graceful_shutdown?");
}

TEST(ContractsTest, AFindingDisqualifiesOnlyWhenItBreaksWhatTheStudyStates) {
  const Study plain = Parsed("requires: {features: [streaming, usage_in_stream]}\n");
  const auto judge = [](const Study& s, const char* code, bool disqualifying = true) {
    return Judge(s, code, disqualifying ? qualify::Severity::kDisqualifying : qualify::Severity::kWarning);
  };
  EXPECT_EQ(judge(plain, "cancellation.keeps_generating_after_prefill_cancel").judgement, Judgement::kRisk);
  EXPECT_EQ(judge(plain, "sigterm_drain.streams_cut_silently").judgement, Judgement::kRisk);
  EXPECT_EQ(judge(plain, "cold_start.slower_than_budget").judgement, Judgement::kRisk);
  EXPECT_EQ(judge(plain, "readiness.never_ready").judgement, Judgement::kDisqualifies);
  EXPECT_EQ(judge(plain, "readiness.never_ready", false).judgement, Judgement::kRisk);
  EXPECT_EQ(judge(plain, "overload.died").judgement, Judgement::kDisqualifies);  // availability is always set
  EXPECT_EQ(Judge(plain, "bad_input.accepted", qualify::Severity::kInfo).judgement, Judgement::kNote);
  // A code no rule knows keeps its probe's severity: a new probe never slips through silently.
  EXPECT_EQ(judge(plain, "future.probe_code").judgement, Judgement::kDisqualifies);
  EXPECT_EQ(judge(plain, "future.probe_code", false).judgement, Judgement::kRisk);

  const Study strict = Parsed("requires: {features: [streaming_cancel], contracts: [bounded_queue]}\n",
                              "{latency: {ttft_p99: 1s}, cold_start_max: 2min, drain_max: 30s}");
  EXPECT_EQ(judge(strict, "cancellation.keeps_generating_after_prefill_cancel").judgement, Judgement::kDisqualifies);
  EXPECT_EQ(judge(strict, "overload.queues_without_bound", false).judgement, Judgement::kDisqualifies);
  EXPECT_EQ(judge(strict, "cold_start.slower_than_budget").judgement, Judgement::kDisqualifies);
  // A drain limit is a graceful shutdown with a deadline.
  EXPECT_EQ(judge(strict, "sigterm_drain.streams_cut_silently").judgement, Judgement::kDisqualifies);
  EXPECT_EQ(judge(strict, "sigterm_drain.streams_cut_silently").breaks, "contract:graceful_shutdown");
}

TEST(ContractsTest, AcceptedRisksAreRecordedWithTheirReason) {
  const Study s = Parsed(
      "accept_risks:\n"
      "  - {finding: 'cancellation.keeps_generating_after_*_cancel', reason: clients never disconnect mid-stream}\n"
      "  - {finding: overload.no_recovery, reason: the gateway sheds load before the engine}\n");
  ASSERT_EQ(s.accepted_risks.size(), 2u);
  const JudgedFinding judged = Judge(s, "cancellation.keeps_generating_after_decode_cancel", qualify::Severity::kDisqualifying);
  EXPECT_EQ(judged.judgement, Judgement::kAcceptedRisk);
  EXPECT_EQ(judged.accepted_reason, "clients never disconnect mid-stream");
  EXPECT_EQ(Judge(s, "overload.queues_without_bound", qualify::Severity::kWarning).judgement, Judgement::kRisk);
}

TEST(ContractsTest, AcceptingWhatTheStudyRequiresOrAnUnknownCodeIsAMistake) {
  EXPECT_NE(Mistakes("requires: {features: [streaming_cancel]}\n"
                     "accept_risks: [{finding: cancellation.keeps_generating_after_decode_cancel, reason: r}]\n")
                .find("breaks feature:streaming_cancel, which this study requires"),
            std::string::npos);
  EXPECT_NE(Mistakes("accept_risks: [{finding: overload.no_recovry, reason: r}]\n").find("did you mean overload.no_recovery?"),
            std::string::npos);
  EXPECT_NE(Mistakes("accept_risks: [{finding: readiness.never_ready, reason: r}]\n").find("cannot be accepted"),
            std::string::npos);
  EXPECT_NE(Mistakes("accept_risks: [{finding: overload.no_recovery}]\n").find("reason"), std::string::npos);
  EXPECT_NE(Mistakes("requires: {contracts: [bounded_queues]}\n").find("did you mean bounded_queue?"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::study
