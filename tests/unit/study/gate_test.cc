// The hard-constraint gate on constructed cases: eliminated by quantization support, by layer, by
// a probe's finding; unknowns kept as risks; a probe answering what the catalog did not know.
#include "study/gate.h"

#include <gtest/gtest.h>

namespace bakeoff::study {
namespace {

const char* kCatalog = R"(runtimes:
  - id: fast-bf16
    engine: vllm
    version: 0.6.3
    layer: engine
    architectures: [LlamaForCausalLM]
    quantizations: {nvidia: [bf16, fp8]}
    hardware: [nvidia]
    features: [streaming, openai_chat, prefix_caching]
    max_context: 32768
  - id: fp8-only
    engine: trtllm
    version: 1.0.0
    layer: engine
    architectures: [LlamaForCausalLM]
    quantizations: {nvidia: [fp8]}
    hardware: [nvidia]
    features: [streaming, openai_chat, prefix_caching]
    max_context: 32768
  - id: gguf-file
    engine: llamacpp
    version: b4748
    layer: weight-format
    architectures: [LlamaForCausalLM]
    quantizations: {nvidia: [bf16]}
    hardware: [nvidia]
    features: [streaming, openai_chat, prefix_caching]
    max_context: 32768
  - id: vague
    engine: sglang
    version: 0.4.0
    layer: engine
    architectures: [LlamaForCausalLM]
    quantizations: {nvidia: [bf16]}
    hardware: [nvidia]
    features: [streaming, openai_chat, prefix_caching]
)";

Study StudyWith(const std::vector<std::pair<std::string, std::string>>& candidates, const std::string& extra = "") {
  std::string text = R"(name: gate
model: {name: m, architecture: LlamaForCausalLM, quantization: bf16, max_context: 8192}
hardware: {accelerator: nvidia, gpu: H100, gpus: 1}
traffic: {shape: s.yaml}
slo: {latency: {ttft_p99: 1s}}
catalog: catalog.yaml
)" + extra + "candidates:\n";
  for (const auto& [name, entry] : candidates) {
    text += "  - {name: " + name + ", catalog: " + entry + ", url: 'http://127.0.0.1:1'}\n";
  }
  Result<Study> s = ParseStudy(text, "gate.yaml");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? s.value() : Study{};
}

Catalog TestCatalog() {
  Result<Catalog> c = ParseCatalog(kCatalog, "cat.yaml");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? c.value() : Catalog{};
}

TEST(GateTest, EliminatesACandidateWithoutKernelsForTheStudysPrecision) {
  const Catalog catalog = TestCatalog();
  const GateTable t = GateOnCatalog(StudyWith({{"a", "fast-bf16"}, {"b", "fp8-only"}}), &catalog);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_FALSE(t.rows[0].Eliminated()) << t.rows[0].Failures().size();
  ASSERT_TRUE(t.rows[1].Eliminated());
  const GateCell* q = const_cast<GateRow&>(t.rows[1]).Find("quantization");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->status, CellStatus::kFail);
  EXPECT_NE(q->reason.find("no bf16 kernels on nvidia (has fp8)"), std::string::npos) << q->reason;
  EXPECT_EQ(q->evidence, "cat.yaml:16");  // the line of fp8-only's quantizations
}

TEST(GateTest, RefusesACandidateOnAnotherLayer) {
  const Catalog catalog = TestCatalog();
  const GateTable t =
      GateOnCatalog(StudyWith({{"a", "fast-bf16"}, {"b", "fp8-only"}, {"c", "gguf-file"}}), &catalog);
  ASSERT_TRUE(t.rows[2].Eliminated());
  EXPECT_NE(t.rows[2].Failures().at(0).find("is a weight-format, the other candidates are engines"),
            std::string::npos)
      << t.rows[2].Failures().at(0);
}

TEST(GateTest, WhatTheCatalogDoesNotSayIsARiskNotAFailure) {
  const Catalog catalog = TestCatalog();
  const GateTable t = GateOnCatalog(StudyWith({{"v", "vague"}}), &catalog);
  EXPECT_FALSE(t.rows[0].Eliminated());
  ASSERT_EQ(t.rows[0].Risks().size(), 1u);
  EXPECT_NE(t.rows[0].Risks()[0].find("max_context"), std::string::npos);
}

TEST(GateTest, AMissingEntryOrFeatureFails) {
  const Catalog catalog = TestCatalog();
  GateTable t = GateOnCatalog(StudyWith({{"x", "no-such-entry"}}), &catalog);
  EXPECT_TRUE(t.rows[0].Eliminated());
  t = GateOnCatalog(StudyWith({{"a", "fast-bf16"}}, "requires: {features: [multi_lora]}\n"), &catalog);
  ASSERT_TRUE(t.rows[0].Eliminated());
  EXPECT_NE(t.rows[0].Failures()[0].find("feature:multi_lora"), std::string::npos);
}

Study ProbedStudy(const std::string& extra) {
  Result<Study> s = ParseStudy(R"(name: p
model: {name: m, architecture: llama, quantization: bf16, max_context: 4096}
hardware: {accelerator: cpu}
traffic: {shape: s.yaml}
slo: {latency: {ttft_p99: 1s}}
candidates:
  - {name: a, url: 'http://127.0.0.1:1'}
)" + extra,
                               "p.yaml");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? s.value() : Study{};
}

qualify::ProbeResult ProbeWith(const std::string& name, qualify::Severity severity, const std::string& code) {
  qualify::ProbeResult r;
  r.name = name;
  if (!code.empty()) r.Find(severity, code, "what the probe saw");
  r.Conclude();
  return r;
}

TEST(GateTest, ProbesAnswerUnknownsAndARequiredFeatureTheyBreakEliminates) {
  // No catalog entry: every catalog cell is unknown, and structured output is a required feature.
  const Study study = ProbedStudy("requires: {features: [structured_output, streaming_cancel]}\n");
  GateTable t = GateOnCatalog(study, nullptr);
  GateRow& row = t.rows[0];
  EXPECT_FALSE(row.Eliminated());
  EXPECT_EQ(row.Find("feature:structured_output")->status, CellStatus::kUnknown);

  qualify::ProbeRun run;
  qualify::ProbeResult compat = ProbeWith("compatibility", qualify::Severity::kInfo, "");
  compat.AddCheck("json_schema", qualify::CheckStatus::kPass, "valid against the schema");
  run.results = {compat, ProbeWith("cancellation", qualify::Severity::kDisqualifying,
                                   "keeps_generating_after_decode_cancel")};
  ApplyProbeEvidence(row, study, run, "candidates/a/probes/probes.json");
  EXPECT_EQ(row.Find("feature:structured_output")->status, CellStatus::kPass);
  // The feature's own cell says which finding broke it; nothing else in the probes did.
  const GateCell* cancel = row.Find("feature:streaming_cancel");
  EXPECT_EQ(cancel->status, CellStatus::kFail);
  EXPECT_NE(cancel->reason.find("cancellation.keeps_generating_after_decode_cancel"), std::string::npos);
  EXPECT_EQ(cancel->evidence, "probe cancellation: candidates/a/probes/probes.json");
  EXPECT_EQ(row.Find("probes")->status, CellStatus::kPass);
  EXPECT_TRUE(row.Eliminated());
  const nlohmann::json j = ToJson(t);
  EXPECT_EQ(j["candidates"][0]["eliminated"], true);
}

TEST(GateTest, AFindingThatBreaksNothingTheStudyStatesIsNoVeto) {
  // llama.cpp's findings in a study that asks only for streaming: risks, not eliminations.
  const Study study = ProbedStudy("requires: {features: [streaming]}\n");
  GateTable t = GateOnCatalog(study, nullptr);
  GateRow& row = t.rows[0];
  qualify::ProbeRun run;
  run.results = {ProbeWith("cancellation", qualify::Severity::kDisqualifying, "keeps_generating_after_prefill_cancel"),
                 ProbeWith("sigterm_drain", qualify::Severity::kDisqualifying, "streams_cut_silently"),
                 ProbeWith("readiness", qualify::Severity::kDisqualifying, "health_blocks_when_busy"),
                 ProbeWith("overload", qualify::Severity::kDisqualifying, "no_recovery"),
                 ProbeWith("bad_input", qualify::Severity::kDisqualifying, "hang")};
  ApplyProbeEvidence(row, study, run, "probes.json");
  EXPECT_FALSE(row.Eliminated()) << row.Failures()[0];
  EXPECT_EQ(row.Find("probes")->status, CellStatus::kPass);
}

TEST(GateTest, AStatedContractIsTestedByItsProbe) {
  const Study study = ProbedStudy("requires: {contracts: [graceful_shutdown, bounded_queue, honest_health]}\n");
  GateTable t = GateOnCatalog(study, nullptr);
  GateRow& row = t.rows[0];
  EXPECT_EQ(row.Find("contract:graceful_shutdown")->status, CellStatus::kUnknown);
  qualify::ProbeRun run;
  run.results = {ProbeWith("sigterm_drain", qualify::Severity::kDisqualifying, "crashed_on_sigterm"),
                 ProbeWith("overload", qualify::Severity::kWarning, "queues_without_bound")};
  ApplyProbeEvidence(row, study, run, "probes.json");
  EXPECT_EQ(row.Find("contract:graceful_shutdown")->status, CellStatus::kFail);
  // A warning breaks a stated contract too: the study, not the probe, decides what matters.
  EXPECT_EQ(row.Find("contract:bounded_queue")->status, CellStatus::kFail);
  EXPECT_NE(row.Find("contract:bounded_queue")->reason.find("overload.queues_without_bound"), std::string::npos);
  // The readiness probe did not run: not tested, a risk rather than a pass.
  EXPECT_EQ(row.Find("contract:honest_health")->status, CellStatus::kUnknown);
  EXPECT_NE(row.Find("contract:honest_health")->reason.find("did not run"), std::string::npos);
  run.results.push_back(ProbeWith("readiness", qualify::Severity::kInfo, ""));
  ApplyProbeEvidence(row, study, run, "probes.json");
  EXPECT_EQ(row.Find("contract:honest_health")->status, CellStatus::kPass);
}

TEST(GateTest, ACandidateThatNeverServedOrDiedIsOutWhateverTheStudySays) {
  const Study study = ProbedStudy("");
  for (const auto& [probe, code] : {std::pair{"cold_start", "never_ready"}, std::pair{"bad_input", "died"},
                                    std::pair{"compatibility", "chat_streaming_failed"}}) {
    GateTable t = GateOnCatalog(study, nullptr);
    GateRow& row = t.rows[0];
    qualify::ProbeRun run;
    run.results = {ProbeWith(probe, qualify::Severity::kDisqualifying, code)};
    ApplyProbeEvidence(row, study, run, "probes.json");
    EXPECT_EQ(row.Find("probes")->status, CellStatus::kFail) << code;
    EXPECT_NE(row.Find("probes")->reason.find(code), std::string::npos);
  }
}

TEST(GateTest, APoolingStudyGatesOnItsRouteAndTheRouteCheckHasTheLastWord) {
  const Catalog catalog = TestCatalog();
  Study study = StudyWith({{"a", "fast-bf16"}, {"b", "fast-bf16"}, {"c", "fast-bf16"}});
  study.task = Task::kEmbedding;
  GateTable t = GateOnCatalog(study, &catalog);
  // The entry offers no embeddings: failed from the catalog, before anything runs.
  ASSERT_NE(t.Find("a")->Find("api"), nullptr);
  EXPECT_EQ(t.Find("a")->Find("api")->status, CellStatus::kFail);
  EXPECT_NE(t.Find("a")->Find("api")->reason.find("does not offer embeddings"), std::string::npos);
  // A catalog that claims it, and a server that answers 404: the live answer fails the cell.
  GateRow& b = *t.Find("b");
  *b.Find("api") = {"api", CellStatus::kPass, "offers embeddings", "features"};
  ApplyRouteCheck(b, study, false, "POST /v1/embeddings answered HTTP 404 (Not Found)",
                  "route check: r.json");
  EXPECT_TRUE(b.Eliminated());
  EXPECT_EQ(b.Find("api")->reason,
            "the catalog says it offers embeddings, but POST /v1/embeddings answered HTTP 404 (Not "
            "Found)");
  EXPECT_EQ(b.Find("api")->evidence, "route check: r.json");
  // What the catalog did not know, a served route answers.
  GateRow& c = *t.Find("c");
  *c.Find("api") = {"api", CellStatus::kUnknown, "", ""};
  ApplyRouteCheck(c, study, true, "POST /v1/embeddings answered HTTP 200 with 1 answer",
                  "route check: c.json");
  EXPECT_EQ(c.Find("api")->status, CellStatus::kPass);
  EXPECT_EQ(c.Find("api")->reason,
            "serves embeddings: POST /v1/embeddings answered HTTP 200 with 1 answer");
}

}  // namespace
}  // namespace bakeoff::study
