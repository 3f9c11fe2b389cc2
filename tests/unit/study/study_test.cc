// The study file: the demo study reads whole; every mistake of a wrong one is named at once.
#include "study/study.h"

#include <string>

#include <gtest/gtest.h>

#include "dialect/request.h"

namespace bakeoff::study {
namespace {

const std::string kMinimal = R"(name: minimal
model: {name: m, architecture: llama, quantization: bf16, max_context: 4096}
hardware: {accelerator: cpu}
traffic: {shape: shape.yaml}
slo:
  latency: {ttft_p99: 2s}
candidates:
  - name: a
    url: http://127.0.0.1:8000
)";

TEST(StudyTest, TheDemoStudyReadsWhole) {
  Result<Study> s = LoadStudy(std::string(BAKEOFF_SOURCE_DIR) + "/examples/demo/study.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->candidates.size(), 5u);
  EXPECT_EQ(s->model.max_context, 8192u);
  EXPECT_EQ(s->slo.latency.terms.size(), 2u);
  EXPECT_EQ(s->required_features.size(), 3u);
  EXPECT_EQ(s->objective, Objective::kMaxGoodputPerCost);
  EXPECT_EQ(s->budget, std::chrono::minutes(10));
  EXPECT_EQ(s->traffic.source, TrafficSource::kShape);
  EXPECT_EQ(s->traffic.file.filename(), "workload.yaml");
  EXPECT_EQ(s->catalog.filename(), "catalog.yaml");
  // A preset given as a file is the study's; a bare name is the presets folder's.
  EXPECT_EQ(s->candidates[2].preset, (std::filesystem::path(BAKEOFF_SOURCE_DIR) / "examples/demo/paged-no-cache.yaml").string());
  EXPECT_EQ(s->candidates[0].preset, "radix-lpm");
  EXPECT_EQ(s->candidates[3].emulator_flags, (std::vector<std::string>{"--startup-load", "2", "--fault-health-lies"}));
  EXPECT_TRUE(s->Runs(Phase::kCapacity));
}

TEST(StudyTest, AMinimalStudyTakesTheDefaults) {
  Result<Study> s = ParseStudy(kMinimal, "minimal.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->candidates.at(0).kind, CandidateKind::kUrl);
  EXPECT_EQ(s->plan.phases.size(), AllPhases().size());
  EXPECT_EQ(s->api, "chat");
  EXPECT_DOUBLE_EQ(s->slo.attainment, 0.99);
}

TEST(StudyTest, EveryMistakeIsNamedAtOnceWithItsLine) {
  const std::string wrong = R"(name: wrong
task: chatt
model: {name: m, architecture: llama, quantization: bf16, max_context: -4}
hardware: {accelerator: cpu}
traffic: {shape: shape.yaml, trace: t.jsonl}
slo:
  latency: {ttft_p99: 2parsecs, tpot_p42: 10ms}
  attainment: 2
requires: {features: [streaming, telepathy]}
candidates:
  - name: a
    url: http://127.0.0.1:8000
    emulated: {preset: radix-lpm}
  - name: a
    launch: {command: "server --port 9"}
plan:
  phases: [probes, warp]
  probes: [readyness]
objective: fastest
budgett: 10min
)";
  Result<Study> s = ParseStudy(wrong, "wrong.yaml");
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  for (const char* expected :
       {"wrong.yaml:2: task:", "wrong.yaml:3: model.max_context:", "wrong.yaml:5: traffic", "only one of trace",
        "wrong.yaml:7: slo.latency.ttft_p99:", "slo.latency.tpot_p42", "wrong.yaml:8: slo.attainment:",
        "telepathy", "only one of url, launch or emulated", "'a' is already a candidate's name",
        "candidates[1].launch.port: missing", "unknown phase 'warp'", "did you mean readiness?",
        "wrong.yaml:19: objective:", "wrong.yaml:20: budgett: unknown key; did you mean budget?"}) {
    EXPECT_NE(m.find(expected), std::string::npos) << "missing: " << expected << "\n" << m;
  }
}

const std::string kPooling = R"(name: pool
task: embedding
model: {name: m, architecture: bert, quantization: f16, max_context: 512}
hardware: {accelerator: cpu}
traffic: {shape: shape.yaml, inputs_per_request: 8}
slo:
  latency: {e2e_p99: 300ms}
candidates:
  - name: a
    url: http://127.0.0.1:8000
)";

TEST(StudyTest, APoolingStudyReadsWithItsOwnRoute) {
  Result<Study> s = ParseStudy(kPooling, "pool.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->task, Task::kEmbedding);
  EXPECT_EQ(s->traffic.inputs_per_request, 8u);
  EXPECT_EQ(StudyApi(*s), dialect::Api::kEmbeddings);
  ASSERT_EQ(s->slo.latency.terms.size(), 1u);
  Result<Study> example =
      LoadStudy(std::string(BAKEOFF_SOURCE_DIR) + "/examples/pooling/study.yaml");
  ASSERT_TRUE(example.ok()) << example.error().message;
  Study study;
  study.task = Task::kEmbedding;
  EXPECT_EQ(StudyApi(study), dialect::Api::kEmbeddings);
  EXPECT_EQ(ApiFeature(study), Feature::kEmbeddings);
  study.task = Task::kRerank;
  EXPECT_EQ(StudyApi(study), dialect::Api::kRerank);
  EXPECT_EQ(ApiFeature(study), Feature::kRerank);
  study.task = Task::kCompletion;
  study.api = "completions";
  EXPECT_EQ(StudyApi(study), dialect::Api::kCompletions);
  EXPECT_FALSE(IsPoolingTask(Task::kChat));
  EXPECT_TRUE(IsPoolingTask(Task::kRerank));
}

TEST(StudyTest, APoolingStudyRefusesWhatHasNoMeaningForIt) {
  const std::string wrong = R"(name: pool
task: rerank
model: {name: m, architecture: bert, quantization: f16, max_context: 512}
hardware: {accelerator: cpu}
traffic: {shape: shape.yaml, inputs_per_request: 5000}
slo:
  latency: {ttft_p99: 2s, e2e_p99: 300ms}
requires: {api: chat, features: [prefix_caching, streaming], contracts: [output_quality]}
accept_risks:
  - {finding: cancellation.keeps_generating, reason: x}
candidates:
  - name: a
    url: http://127.0.0.1:8000
plan:
  probes: [readiness, cancellation]
  output_tokens_cap: 64
objective: min_ttft_p99
)";
  Result<Study> s = ParseStudy(wrong, "pool.yaml");
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  for (const char* expected :
       {"pool.yaml:5: traffic.inputs_per_request:",
        "pool.yaml:7: slo.latency.ttft_p99: a rerank study's answers are whole",
        "pool.yaml:8: requires.api: the task fixes the route",
        "requires.features[1]: 'streaming' is a generation feature",
        "requires.contracts[0]: the quality probe scores generated text",
        "pool.yaml:10: accept_risks[0].finding: cancellation.keeps_generating: the cancellation "
        "probe does not run",
        "plan.probes[1]: 'cancellation' watches or scores generated text",
        "plan.output_tokens_cap: answers are vectors or scores",
        "objective: a rerank study has no TTFT"}) {
    EXPECT_NE(m.find(expected), std::string::npos) << expected << "\n" << m;
  }
  EXPECT_EQ(m.find("slo.latency.e2e_p99"), std::string::npos) << m;
  EXPECT_EQ(m.find("features[0]"), std::string::npos) << m;
}

TEST(StudyTest, InputsPerRequestIsOnlyForPoolingTasks) {
  std::string chat = kPooling;
  chat.replace(chat.find("task: embedding"), 15, "task: chat");
  Result<Study> s = ParseStudy(chat, "chat.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(
                "chat.yaml:5: traffic.inputs_per_request: only for task embedding or rerank"),
            std::string::npos)
      << s.error().message;
}

TEST(StudyTest, CrossFieldRulesNameTheFieldToChange) {
  std::string text = kMinimal + "objective: min_cost_per_token\n";
  Result<Study> s = ParseStudy(text, "cost.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("hardware.price_per_hour"), std::string::npos) << s.error().message;
  text = kMinimal + "    catalog: vllm-0.6\n";
  s = ParseStudy(text, "catalog.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("needs `catalog: FILE`"), std::string::npos) << s.error().message;
}

TEST(StudyTest, NamesAndRangesAreCheckedWhenTheStudyIsRead) {
  const std::string wrong = R"(name: checks
model: {name: m, architecture: llama, quantization: bf16, max_context: 4096}
hardware: {accelerator: nvidai}
traffic: {shape: s.yaml}
slo:
  latency: {ttft_p99: 2, tpot_p99: 1min}
candidates:
  - {name: a, url: "http://127.0.0.1:1", engine: vllmm}
plan:
  probes: []
  capacity: {start_per_s: 900, min_per_s: 1, max_per_s: 100}
)";
  Result<Study> s = ParseStudy(wrong, "checks.yaml");
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  for (const char* expected : {"checks.yaml:3: hardware.accelerator:", "nvidia",
                               "checks.yaml:6: slo.latency.ttft_p99: '2' has no unit",
                               "slo.latency.tpot_p99: '1min': latency thresholds take ms or s",
                               "candidates[0].engine: unknown engine 'vllmm'", "plan.probes: names no probe",
                               "plan.capacity.start_per_s: 900 is outside"}) {
    EXPECT_NE(m.find(expected), std::string::npos) << "missing: " << expected << "\n" << m;
  }
  // An engine named by an alias is kept under its adapter's name.
  Result<Study> ok = ParseStudy(kMinimal + "    engine: vLLM\n", "alias.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->candidates[0].engine, "vllm");
}

TEST(StudyTest, AnEmptyOrNonMappingFileIsRefusedPlainly) {
  EXPECT_NE(ParseStudy("", "e.yaml").error().message.find("e.yaml:1: empty study"), std::string::npos);
  EXPECT_NE(ParseStudy("- a\n- b\n", "l.yaml").error().message.find("expected a mapping"), std::string::npos);
  EXPECT_FALSE(ParseStudy(",", "comma.yaml").ok());  // yaml-cpp 0.7 would never return on this
}

}  // namespace
}  // namespace bakeoff::study
