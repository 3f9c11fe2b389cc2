// tests/unit/deploy/manifest_render_test.cc
//
// Owns: tests of the deployment baseline written from measurements (deploy/manifest_render.h): the
// golden Deployment of a measured vLLM candidate (tests/testdata/k8s/rendered-vllm.yaml); what every
// engine with a serve command renders passes the deployment checklist (manifest_lint.h) with the
// same measurements, KServe's variant included; what was not measured is a commented default and
// listed; the emulated engine and engines without an adapter are refused. (tests/k8s/schema_test.sh
// checks the same renderings against the Kubernetes API schemas.)
#include "deploy/manifest_render.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/file.h"
#include "deploy/manifest_lint.h"

namespace bakeoff::deploy {
namespace {

DeploymentInputs Measured(std::string engine, std::string image) {
  DeploymentInputs in;
  in.name = "vLLM tuned";
  in.namespace_name = "serving";
  in.engine = std::move(engine);
  in.image = std::move(image);
  in.image_digest = "sha256:" + std::string(64, 'a');
  in.model = "meta-llama/Llama-3.1-8B-Instruct";
  in.model_revision = "0e9e39f249a16976918f6564b8830bc894c89659";
  in.max_context = 8192;
  in.settings = {"--max-num-seqs", "256"};
  in.accelerator = "nvidia";
  in.gpus = 2;
  in.cold_start_s = 94.2;
  in.drain_s = 31.5;
  in.capacity_per_s = 5.2;
  in.workload_rate_per_s = 12;
  in.source = "out/study";
  in.probes_file = "candidates/vllm-tuned/probes/probes.json";
  in.capacity_file = "candidates/vllm-tuned/capacity/result.json";
  return in;
}

LintReport Lint(const DeploymentInputs& in, const RenderedManifests& rendered) {
  MeasuredLifecycle measured{in.cold_start_s, in.drain_s, "out/study"};
  return LintManifests({{"rendered.yaml", rendered.yaml}}, measured);
}

TEST(ManifestRenderTest, AMeasuredCandidateRendersTheGoldenDeployment) {
  Result<RenderedManifests> rendered = RenderDeployment(Measured("vllm", "vllm/vllm-openai:v0.11.0"));
  ASSERT_TRUE(rendered.ok()) << rendered.error().message;
  EXPECT_TRUE(rendered->defaults.empty());
  const std::string golden_file = std::string(BAKEOFF_TESTDATA_DIR) + "/k8s/rendered-vllm.yaml";
  Result<std::string> golden = ReadFile(golden_file);
  ASSERT_TRUE(golden.ok()) << golden_file;
  EXPECT_EQ(rendered->yaml, *golden) << "the rendering changed; if on purpose, write it to " << golden_file;
}

TEST(ManifestRenderTest, EveryEngineWithAServeCommandPassesTheChecklist) {
  const std::vector<std::pair<std::string, std::string>> engines = {
      {"vllm", "vllm/vllm-openai:v0.11.0"}, {"sglang", "lmsysorg/sglang:v0.4.6"},
      {"trtllm", "nvcr.io/nvidia/tensorrt-llm/release:0.20.0"}, {"llama.cpp", "ghcr.io/ggml-org/llama.cpp:server-b6000"},
      {"tgi", "ghcr.io/huggingface/text-generation-inference:3.3.0"}, {"lmdeploy", "openmmlab/lmdeploy:v0.9.0"},
      {"triton", "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3"}, {"ollama", "ollama/ollama:0.9.0"}};
  for (bool kserve : {false, true}) {
    for (const auto& [engine, image] : engines) {
      DeploymentInputs in = Measured(engine, image);
      in.kserve = kserve;
      Result<RenderedManifests> rendered = RenderDeployment(in);
      ASSERT_TRUE(rendered.ok()) << engine << ": " << rendered.error().message;
      // Past the command itself, every word is a flag or the value after one: no adapter prose.
      const std::string& yaml = rendered->yaml;
      if (size_t at = yaml.find("command: ["); at != std::string::npos) {
        const std::string line = yaml.substr(at, yaml.find('\n', at) - at);
        for (const char* prose : {"YAML", "config", "model.json", "(", "return_perf"}) {
          EXPECT_EQ(line.find(prose), std::string::npos) << engine << ": " << line;
        }
        if (engine == "sglang" || engine == "trtllm") {
          EXPECT_NE(line.find("\"--host\", \"0.0.0.0\""), std::string::npos) << line;
        }
      }
      // tests/k8s/schema_test.sh validates these against the Kubernetes API schemas.
      if (const char* dir = std::getenv("BAKEOFF_K8S_RENDER_DIR")) {
        ASSERT_TRUE(WriteFileAtomically(std::string(dir) + "/" + DnsLabel(engine) + (kserve ? "-kserve" : "") + ".yaml",
                                        rendered->yaml).ok());
      }
      LintReport report = Lint(in, *rendered);
      EXPECT_EQ(report.objects_checked, kserve ? 2 : 1) << engine;
      for (const LintFinding& finding : report.findings) {
        // Triton and Ollama keep their images' entrypoints (a model repository, a pull): no command
        // names the model, so the lint sees no revision.
        if (finding.code == "model_revision_not_pinned" && (engine == "triton" || engine == "ollama")) continue;
        ADD_FAILURE() << engine << (kserve ? " (kserve)" : "") << ": " << finding.Text();
      }
      EXPECT_TRUE(report.unreadable.empty()) << report.unreadable.front();
    }
  }
}

TEST(ManifestRenderTest, WhatWasNotMeasuredIsACommentedDefaultAndSaid) {
  DeploymentInputs in = Measured("sglang", "lmsysorg/sglang:v0.4.6");
  in.cold_start_s.reset();
  in.drain_s.reset();
  in.capacity_per_s.reset();
  in.image_digest.clear();
  in.model_revision.clear();
  Result<RenderedManifests> rendered = RenderDeployment(in);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(rendered->defaults.size(), 5u);
  EXPECT_NE(rendered->yaml.find("# cold start not measured: a default of 600 s"), std::string::npos);
  EXPECT_NE(rendered->yaml.find("terminationGracePeriodSeconds: 120  # drain not measured"), std::string::npos);
  EXPECT_NE(rendered->yaml.find("NOT PINNED: the catalog entry has no image_digest"), std::string::npos);
  // SGLang's /health generates, so liveness asks another route and readiness polls gently.
  EXPECT_EQ(rendered->yaml.find("livenessProbe:  # /health "), std::string::npos);
  EXPECT_NE(rendered->yaml.find("periodSeconds: 15  # this route runs a generation"), std::string::npos);
  std::set<std::string> codes;
  for (const LintFinding& f : LintManifests({{"r.yaml", rendered->yaml}}).findings) codes.insert(f.code);
  EXPECT_EQ(codes, (std::set<std::string>{"image_not_pinned", "model_revision_not_pinned"}));
}

TEST(ManifestRenderTest, TheEmulatedEngineAndUnknownEnginesAreRefused) {
  Result<RenderedManifests> emulated = RenderDeployment(Measured("emulated", "builtin"));
  ASSERT_FALSE(emulated.ok());
  EXPECT_EQ(emulated.error().message, "candidate vLLM tuned is bakeoff's emulated engine: there is nothing to deploy");
  Result<RenderedManifests> unknown = RenderDeployment(Measured("mystery", "x:1"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("engine 'mystery' has no adapter"), std::string::npos);
  DeploymentInputs no_image = Measured("vllm", "");
  EXPECT_FALSE(RenderDeployment(no_image).ok());
}

TEST(ManifestRenderTest, NamesAreDnsLabels) {
  EXPECT_EQ(DnsLabel("vLLM_0.6 tuned"), "vllm-0-6-tuned");
  EXPECT_EQ(DnsLabel("--x--"), "x");
  EXPECT_EQ(DnsLabel("***"), "candidate");
  EXPECT_EQ(DnsLabel("8b-vllm"), "c-8b-vllm");
  EXPECT_EQ(DnsLabel(std::string(100, 'a')).size(), 63u);
}

}  // namespace
}  // namespace bakeoff::deploy
