// tests/unit/deploy/manifest_lint_test.cc
//
// Owns: tests of the deployment checklist (deploy/manifest_lint.h) on hand-written manifests
// (tests/testdata/k8s): a manifest set that follows it has no finding; every mistake of bad.yaml
// is found once, on its own line and object; a LeaderWorkerSet with its budget and a KServe
// InferenceService are read; kinds the lint does not check are skipped, not failed; a bundle's
// measured cold start and drain are checked against the startup probe and the grace period; a
// file that is not YAML is named with its line and the others are still linted.
#include "deploy/manifest_lint.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "core/file.h"

namespace bakeoff::deploy {
namespace {

const std::string kDir = std::string(BAKEOFF_TESTDATA_DIR) + "/k8s/";

LintInput Input(const std::string& name) {
  Result<std::string> text = ReadFile(kDir + name);
  EXPECT_TRUE(text.ok()) << name;
  return {name, text.ok() ? text.value() : ""};
}

using Found = std::tuple<int, std::string, std::string>;  // line, object, code

std::set<Found> Codes(const LintReport& report) {
  std::set<Found> out;
  for (const LintFinding& f : report.findings) out.insert({f.line, f.object, f.code});
  return out;
}

TEST(ManifestLintTest, AManifestSetThatFollowsTheChecklistHasNoFinding) {
  const LintReport report = LintManifests({Input("good.yaml")});
  EXPECT_TRUE(report.findings.empty()) << report.findings.front().Text();
  EXPECT_EQ(report.objects_checked, 1);
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0], "good.yaml:50: Service/vllm: skipped (not a workload this lint checks)");
  EXPECT_TRUE(report.unreadable.empty());
}

TEST(ManifestLintTest, EveryMistakeIsFoundOnItsLineAndObject) {
  const LintReport report = LintManifests({Input("bad.yaml")});
  const std::set<Found> expected = {
      {3, "Deployment/sglang", "no_pdb"},
      {15, "Deployment/sglang", "no_startup_probe"},
      {15, "Deployment/sglang", "no_dev_shm"},
      {15, "Deployment/sglang", "model_revision_not_pinned"},
      {16, "Deployment/sglang", "image_latest"},
      {19, "Deployment/sglang", "readiness_port_only"},
      {21, "Deployment/sglang", "liveness_generates"},  // SGLang's /health generates a token
      {23, "Deployment/sglang", "gpu_request_without_limit"},
      {25, "Deployment/sglang", "image_untagged"},
      {27, "StatefulSet/tgi", "no_pdb"},
      {41, "StatefulSet/tgi", "no_dev_shm"},
      {41, "StatefulSet/tgi", "model_revision_not_pinned"},
      {42, "StatefulSet/tgi", "image_not_pinned"},
      {46, "StatefulSet/tgi", "readiness_port_only"},
      {50, "StatefulSet/tgi", "liveness_generates"},
  };
  EXPECT_EQ(Codes(report), expected);
  EXPECT_EQ(report.findings.size(), expected.size()) << "each mistake once";
  for (const LintFinding& f : report.findings) {
    EXPECT_EQ(f.Text().find('\n'), std::string::npos);
    EXPECT_EQ(f.Text().rfind("bad.yaml:", 0), 0u) << f.Text();
  }
  // The sidecar is not taken for a model server: its image is checked, nothing else.
  for (const LintFinding& f : report.findings) EXPECT_EQ(f.message.find("container proxy: no"), std::string::npos);
}

TEST(ManifestLintTest, ALeaderWorkerSetAndAnInferenceServiceAreRead) {
  const LintReport report = LintManifests({Input("lws.yaml")});
  const std::set<Found> expected = {{46, "InferenceService/llama", "model_revision_not_pinned"}};
  EXPECT_EQ(Codes(report), expected) << "the LWS's budget selects it by its name label";
  EXPECT_EQ(report.objects_checked, 2);
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_NE(report.skipped[0].find("ConfigMap/settings: skipped"), std::string::npos);
}

TEST(ManifestLintTest, TheMeasuredColdStartAndDrainAreChecked) {
  MeasuredLifecycle measured;
  measured.cold_start_s = 700;
  measured.drain_s = 45;
  measured.source = "bundle/candidates/vllm/probes/probes.json";
  const LintReport good = LintManifests({Input("good.yaml")}, measured);
  ASSERT_EQ(good.findings.size(), 1u);
  EXPECT_EQ(good.findings[0].code, "startup_shorter_than_cold_start");
  EXPECT_NE(good.findings[0].message.find("allows 600 s"), std::string::npos) << good.findings[0].message;
  EXPECT_NE(good.findings[0].message.find("bundle/candidates/vllm/probes/probes.json"), std::string::npos);
  const LintReport bad = LintManifests({Input("bad.yaml")}, measured);
  int grace = 0;
  for (const LintFinding& f : bad.findings) {
    if (f.code != "grace_shorter_than_drain") continue;
    ++grace;
    if (f.object == "StatefulSet/tgi") {
      EXPECT_EQ(f.line, 39);
      EXPECT_NE(f.message.find("is 10 s,"), std::string::npos) << f.message;
    } else {
      EXPECT_NE(f.message.find("30 s (the default)"), std::string::npos) << f.message;
    }
  }
  EXPECT_EQ(grace, 2);
}

TEST(ManifestLintTest, AFileThatIsNotYamlIsNamedAndTheOthersAreStillLinted) {
  const LintReport report = LintManifests({{"broken.yaml", "kind: Deployment\nspec: [a, b\n"}, Input("bad.yaml"),
                                           {"comma.yaml", ","}});
  ASSERT_EQ(report.unreadable.size(), 2u);
  EXPECT_EQ(report.unreadable[0].rfind("broken.yaml:", 0), 0u) << report.unreadable[0];
  EXPECT_NE(report.unreadable[0].find("not valid YAML"), std::string::npos);
  EXPECT_EQ(report.unreadable[1].rfind("comma.yaml:", 0), 0u) << report.unreadable[1];
  EXPECT_FALSE(report.findings.empty());
}

// KServe merges a model spec into its runtime's container: the runtime's probes count for every
// InferenceService that names it, and the grace period is the predictor's.
TEST(ManifestLintTest, AKServeModelSpecHasItsRuntimesProbes) {
  const std::string runtime = R"(apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: vllm-runtime}
spec:
  supportedModelFormats: [{name: vllm}]
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.11.0@sha256:0000000000000000000000000000000000000000000000000000000000000000
      command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct, --revision, 0e9e39f249a16976918f6564b8830bc894c89659]
      readinessProbe: {httpGet: {path: /health, port: 8000}}
      startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: 60}
      livenessProbe: {httpGet: {path: /health, port: 8000}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes: [{name: dshm, emptyDir: {medium: Memory}}]
)";
  std::string services;
  for (const char* name : {"first", "second"}) {
    services += std::string("---\napiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: ") + name +
                "}\nspec:\n  predictor:\n    terminationGracePeriodSeconds: 90\n    model:\n      modelFormat: {name: vllm}\n"
                "      runtime: vllm-runtime\n";
  }
  const LintReport report = LintManifests({{"kserve.yaml", runtime + services}}, MeasuredLifecycle{100.0, 60.0, "b"});
  for (const LintFinding& f : report.findings) ADD_FAILURE() << f.Text();
  EXPECT_EQ(report.objects_checked, 3);

  // Without the runtime among the files, the model spec alone has no probes.
  const LintReport alone = LintManifests({{"kserve.yaml", services}});
  std::set<std::string> codes;
  for (const LintFinding& f : alone.findings) codes.insert(f.code);
  EXPECT_TRUE(codes.contains("no_readiness"));
}

}  // namespace
}  // namespace bakeoff::deploy
