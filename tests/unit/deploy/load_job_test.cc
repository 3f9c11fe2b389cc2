// tests/unit/deploy/load_job_test.cc
//
// Owns: tests of the Indexed Job of a sharded load (deploy/load_job.h): its shape (indexed, every
// shard at once, never retried, the index from the downward API into --shard), the two ways results
// come back, and the flags it refuses. tests/k8s/schema_test.sh validates what it writes against the
// Kubernetes API schema, and tests/k8s/load_job_test.sh runs its script and its collect commands.
#include "deploy/load_job.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/file.h"

namespace bakeoff::deploy {
namespace {

LoadJobInputs Inputs() {
  LoadJobInputs in;
  in.image = "registry.example/bakeoff:0.1.0";
  in.shards = 4;
  in.start_at = "2026-12-01T22:00:00Z";
  in.bench_args = {"--url", "http://vllm.serving:80", "--rate", "400", "--duration", "10min", "--model", "it's"};
  return in;
}

TEST(LoadJobTest, TheJobRunsEveryShardOnceAtTheSameInstant) {
  Result<std::string> yaml = RenderLoadJob(Inputs());
  ASSERT_TRUE(yaml.ok()) << yaml.error().message;
  for (const char* expected :
       {"kind: Job", "completionMode: Indexed", "completions: 4", "parallelism: 4", "backoffLimit: 0",
        "restartPolicy: Never", "batch.kubernetes.io/job-completion-index", "--shard \\\"$JOB_COMPLETION_INDEX/4\\\"",
        "--start-at '2026-12-01T22:00:00Z'", "'it'\\\\''s'", "BAKEOFF-RESULTS-BEGIN", "base64 -d | tar -xz",
        "podAntiAffinity"}) {
    EXPECT_NE(yaml->find(expected), std::string::npos) << expected << "\n" << *yaml;
  }
  if (const char* dir = std::getenv("BAKEOFF_K8S_RENDER_DIR")) {
    ASSERT_TRUE(WriteFileAtomically(std::string(dir) + "/load-job.yaml", *yaml).ok());
  }
}

TEST(LoadJobTest, ResultsGoToAClaimWhenOneIsNamed) {
  LoadJobInputs in = Inputs();
  in.claim = "load-results";
  Result<std::string> yaml = RenderLoadJob(in);
  ASSERT_TRUE(yaml.ok());
  EXPECT_NE(yaml->find("persistentVolumeClaim: {claimName: load-results}"), std::string::npos);
  EXPECT_EQ(yaml->find(kResultsBegin), std::string::npos) << "a claimed Job prints no tarball";
  if (const char* dir = std::getenv("BAKEOFF_K8S_RENDER_DIR")) {
    ASSERT_TRUE(WriteFileAtomically(std::string(dir) + "/load-job-claim.yaml", *yaml).ok());
  }
}

TEST(LoadJobTest, FlagsTheJobSetsAndMissingOnesAreRefused) {
  for (const char* flag : {"--shard", "--start-at", "--out=/x"}) {
    LoadJobInputs in = Inputs();
    in.bench_args.push_back(flag);
    in.bench_args.push_back("1/2");
    Result<std::string> yaml = RenderLoadJob(in);
    ASSERT_FALSE(yaml.ok()) << flag;
    EXPECT_NE(yaml.error().message.find("the Job sets it"), std::string::npos) << yaml.error().message;
  }
  LoadJobInputs no_url = Inputs();
  no_url.bench_args = {"--rate", "4"};
  EXPECT_FALSE(RenderLoadJob(no_url).ok());
  LoadJobInputs no_image = Inputs();
  no_image.image.clear();
  EXPECT_FALSE(RenderLoadJob(no_image).ok());
  LoadJobInputs zero = Inputs();
  zero.shards = 0;
  EXPECT_FALSE(RenderLoadJob(zero).ok());
}

}  // namespace
}  // namespace bakeoff::deploy
