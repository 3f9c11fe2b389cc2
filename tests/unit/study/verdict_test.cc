// The verdict on constructed results: passing, failing TTFT p99, failing a cold-start limit,
// eliminated, disqualified; ranking, rollback, rationale pointers and the method's mistakes.
#include "study/verdict.h"

#include <gtest/gtest.h>

namespace bakeoff::study {
namespace {

Study TheStudy(const std::string& extra = "") {
  Result<Study> s = ParseStudy(R"(name: v
model: {name: m, architecture: llama, quantization: bf16, max_context: 4096}
hardware: {accelerator: nvidia, gpu: H100, gpus: 1, price_per_hour: 4}
traffic: {shape: s.yaml}
slo:
  latency: {ttft_p99: 1s, tpot_p99: 50ms}
  cold_start_max: 60s
candidates:
  - {name: fast, url: 'http://127.0.0.1:1'}
  - {name: steady, url: 'http://127.0.0.1:2'}
  - {name: slow, url: 'http://127.0.0.1:3'}
  - {name: sluggish-start, url: 'http://127.0.0.1:4'}
  - {name: gone, url: 'http://127.0.0.1:5'}
)" + extra,
                               "v.yaml");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.value();
}

StepFigures Trial(double ttft_p99, double tpot_p99, double goodput, bool met = true) {
  StepFigures f;
  f.measured = 400;
  f.ok = 400;
  f.good = met ? 398 : 100;
  f.attainment = f.good / 400.0;
  f.goodput_per_s = goodput;
  f.output_tokens_per_s = goodput * 200;
  f.mean_output_tokens = 200;
  f.ttft_p99_ms = ttft_p99;
  f.tpot_p99_ms = tpot_p99;
  f.terms = {{"ttft_p99=1s", ttft_p99, 1000, ttft_p99 <= 1000}, {"tpot_p99=50ms", tpot_p99, 50, tpot_p99 <= 50}};
  return f;
}

CandidateResult Measured(const std::string& name, double capacity, double goodput, double cold_start_s = 5) {
  CandidateResult c;
  c.name = name;
  c.kind = CandidateKind::kUrl;
  c.engine = "vllm";
  c.version = "0.6.3";
  c.probes.ran = true;
  c.probes.cold_start_s = cold_start_s;
  c.capacity.ran = true;
  c.capacity.bracket = "bracketed";
  c.capacity.capacity_per_s = capacity;
  c.capacity.first_failing_per_s = capacity * 1.08;
  c.capacity.path = "candidates/" + name + "/capacity/result.json";
  CapacitySummary::Point low{capacity / 2, true, false, "", 1, 0.99, 1, 1, {Trial(300, 20, goodput / 2)}};
  CapacitySummary::Point at{capacity, true, false, "", 0.995, 0.985, 0.999, 1, {Trial(800, 40, goodput), Trial(850, 41, goodput)}};
  CapacitySummary::Point above{capacity * 1.08, false, false, "SLO attainment 90% < target 99%", 0.9, 0.87, 0.92, 1,
                               {Trial(1400, 45, goodput, false)}};
  c.capacity.points = {low, at, above};
  return c;
}

struct Fixture {
  Study study = TheStudy();
  GateTable gate;
  std::vector<CandidateResult> results;
  Fixture() {
    for (const CandidateSpec& c : study.candidates) gate.rows.push_back({c.name, "", {}});
    gate.Find("gone")->cells.push_back({"quantization", CellStatus::kFail, "no bf16 kernels on nvidia (has fp8)", "cat.yaml:9"});
    results.push_back(Measured("fast", 12, 11));
    results.push_back(Measured("steady", 10, 9.5));
    CandidateResult slow = Measured("slow", 0, 0);
    slow.capacity.bracket = "below_range";
    slow.capacity.capacity_per_s = -1;
    slow.capacity.points = {{0.5, false, false, "a percentile term of the SLO failed (repeat 0)", 0.5, 0.4, 0.6, 1,
                             {Trial(2500, 40, 0.2, false)}}};
    results.push_back(slow);
    results.push_back(Measured("sluggish-start", 20, 19, 95));
    CandidateResult gone;
    gone.name = "gone";
    gone.eliminated = true;
    results.push_back(gone);
  }
};

const CandidateVerdict& Named(const Verdict& v, const std::string& name) {
  for (const CandidateVerdict& c : v.candidates) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no " << name;
  return v.candidates.front();
}

TEST(VerdictTest, KeepsTheBestCandidateThatMeetsTheSloAndRollsBackToTheNext) {
  Fixture f;
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  EXPECT_EQ(v.choice, "fast");
  EXPECT_EQ(v.rollback, "steady");
  EXPECT_EQ(Named(v, "fast").status, CandidateStatus::kMeetsSlo);
  EXPECT_EQ(Named(v, "fast").rank, 1);
  EXPECT_EQ(Named(v, "steady").rank, 2);
  // The TTFT p99 evidence is the worst repeat at the capacity, pointing at that point.
  const EvidenceItem& ttft = Named(v, "fast").evidence.at(0);
  EXPECT_EQ(ttft.clause, "ttft_p99=1s");
  EXPECT_DOUBLE_EQ(ttft.observed, 850);
  EXPECT_EQ(ttft.pointer, "candidates/fast/capacity/result.json#/points/1");
}

TEST(VerdictTest, ObjectivesWithinTheSearchPrecisionAreATieDecidedByTtftP99) {
  Fixture f;
  CandidateResult& steady = f.results[1];
  steady.capacity.capacity_per_s = 11.5;  // within 10% of fast's 12
  steady.capacity.points[1].rate_per_s = 11.5;
  for (StepFigures& t : steady.capacity.points[1].trials) t.ttft_p99_ms = 500;
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  EXPECT_TRUE(v.tied);
  EXPECT_EQ(v.choice, "steady");
  EXPECT_EQ(v.rollback, "fast");
  bool said = false;
  for (const Sentence& s : v.rationale) said = said || s.text.find("within the capacity search's precision") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(VerdictTest, FailingTtftP99AtEveryRateFailsTheSlo) {
  Fixture f;
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  const CandidateVerdict& slow = Named(v, "slow");
  EXPECT_EQ(slow.status, CandidateStatus::kFailsSlo);
  EXPECT_EQ(slow.evidence.at(0).status, CellStatus::kFail);
  EXPECT_EQ(slow.rank, 0);
}

TEST(VerdictTest, ACandidateTooSlowToStartFailsEvenWithTheMostCapacity) {
  Fixture f;
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  const CandidateVerdict& c = Named(v, "sluggish-start");
  EXPECT_EQ(c.status, CandidateStatus::kFailsSlo);
  bool found = false;
  for (const EvidenceItem& e : c.evidence) {
    if (e.clause == "cold_start") {
      found = true;
      EXPECT_EQ(e.status, CellStatus::kFail);
      EXPECT_DOUBLE_EQ(e.observed, 95);
    }
  }
  EXPECT_TRUE(found);
}

TEST(VerdictTest, EliminatedCandidatesAreNamedWithTheirReason) {
  Fixture f;
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  EXPECT_EQ(Named(v, "gone").status, CandidateStatus::kEliminated);
  bool said = false;
  for (const Sentence& s : v.rationale) said = said || s.text.find("gone was eliminated at the gate: quantization") != std::string::npos;
  EXPECT_TRUE(said);
  for (const Sentence& s : v.rationale) EXPECT_FALSE(s.pointers.empty()) << s.text;
}

TEST(VerdictTest, ADisqualifyingProbeFindingIsADisqualification) {
  Fixture f;
  f.gate.Find("steady")->cells.push_back(
      {"probes", CellStatus::kFail, "disqualified by readiness.ready_before_serving", "probes: candidates/steady/probes/probes.json"});
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  EXPECT_EQ(Named(v, "steady").status, CandidateStatus::kDisqualified);
  EXPECT_EQ(v.rollback, "");  // no second candidate meets the SLO now
}

TEST(VerdictTest, RevisitConditionsComeFromTheWorkload) {
  Fixture f;
  WorkloadFigures w;
  w.prefix_reuse = 0.62;
  w.output_input_ratio = 0.2;
  w.rate_per_s = 4;
  const Verdict v = Decide(f.study, w, f.gate, f.results);
  std::string all;
  for (const std::string& r : v.revisit) all += r + "\n";
  EXPECT_NE(all.find("prefix reuse falls below 30% (now 62%"), std::string::npos) << all;
  EXPECT_NE(all.find("output/input tokens rises above 0.5 (now 0.20)"), std::string::npos) << all;
  EXPECT_NE(all.find("a new version of fast"), std::string::npos) << all;
}

TEST(VerdictTest, TheStudysOwnMistakesAreFound) {
  Fixture f;
  f.study = TheStudy();
  f.study.slo.latency = analyze::ParseSlo("ttft_p50=1s").value();
  f.study.candidates[0].settings = {"--max-num-seqs 512"};
  f.study.plan.repeats = 1;
  f.results[1].version.clear();
  WorkloadFigures w;
  w.lengths_fixed = true;
  const Verdict v = Decide(f.study, w, f.gate, f.results);
  std::vector<std::string> codes;
  for (const Mistake& m : v.mistakes) codes.push_back(m.code);
  for (const char* code : {"fixed_length_traffic", "no_tail_percentile", "version_not_recorded", "uneven_tuning", "single_repeat"}) {
    EXPECT_NE(std::find(codes.begin(), codes.end(), code), codes.end()) << code;
  }
}

TEST(VerdictTest, UnequalWorkTheRunsMeasuredIsNamedOncePerKindWithItsPhase) {
  Fixture f;
  f.results[0].unequal_work = {"TGI cannot force an output length (no ignore_eos)"};  // what the adapter expects
  PhaseResult sweep;
  sweep.phase = Phase::kSweep;
  sweep.unequal_work = {"forced output length sent, yet 12 of 40 answers ended before max_tokens: the engine did not honour it"};
  PhaseResult replay = sweep;
  replay.phase = Phase::kReplay;
  replay.unequal_work = {"forced output length sent, yet 3 of 90 answers ended before max_tokens: the engine did not honour it",
                         "90 of 90 answers came without the server's output token count: their tokens were counted by the client"};
  f.results[0].phases = {sweep, replay};
  f.results[1].unequal_work = {"Ollama cannot force an output length (no ignore_eos)"};
  const Verdict v = Decide(f.study, WorkloadFigures{}, f.gate, f.results);
  std::vector<std::string> fast, steady;
  for (const Mistake& m : v.mistakes) {
    if (m.code != "unequal_work") continue;
    (m.message.starts_with("fast: ") ? fast : steady).push_back(m.message);
  }
  // The measured findings replace the expectation; the same finding in a later phase is not repeated.
  ASSERT_EQ(fast.size(), 2u);
  EXPECT_NE(fast[0].find("sweep phase: forced output length sent, yet 12 of 40"), std::string::npos) << fast[0];
  EXPECT_NE(fast[1].find("replay phase: 90 of 90 answers came without"), std::string::npos) << fast[1];
  ASSERT_EQ(steady.size(), 1u);  // nothing measured: the adapter's expectation stands
  EXPECT_NE(steady[0].find("Ollama cannot force"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::study
