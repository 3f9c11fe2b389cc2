// deploy/manifest_lint.h
//
// Owns: `bakeoff k8s lint`: the method's deployment checklist applied to Kubernetes manifests
// people already have (Deployment, StatefulSet, LeaderWorkerSet, KServe InferenceService and
// ServingRuntime), one finding per problem with its file, line and object:
//   image_latest / image_untagged / image_not_pinned  the image is `latest`, has no tag, or is not
//                                  pinned by an @sha256: digest (a rollout could change the engine)
//   no_readiness / readiness_port_only  no readinessProbe, or one that only checks the port is open
//                                  (tcpSocket) or GETs `/`: it says ready before the model can serve
//   no_startup_probe               a model server without a startupProbe: liveness kills it while
//                                  the weights load; startup_shorter_than_cold_start when a bundle's
//                                  measured cold start is longer than the probe allows
//   liveness_generates             the livenessProbe asks for a generation (a completions route, or
//                                  an engine health route that generates, from target/adapters.h):
//                                  a busy engine fails it and is restarted under load
//   grace_shorter_than_drain       terminationGracePeriodSeconds (default 30) is shorter than the
//                                  bundle's measured drain: in-flight streams are cut at every rollout
//   no_dev_shm                     no memory-backed emptyDir at /dev/shm (tensor-parallel workers
//                                  share memory through it; the default 64 MiB crashes them)
//   no_pdb                         no PodDisruptionBudget among the files selects the workload
//   gpu_request_without_limit      a GPU request without the same limit (extended resources need both)
//   model_revision_not_pinned      the model is named (--model, a model path, a storage URI) without
//                                  a revision, so a re-download may serve other weights
// Kinds it does not check are listed as skipped, never failed. A bundle (read by the caller, cli)
// gives the measured cold start and drain; without one those two checks are not made.
// Does not own: reading YAML strictly (core/yaml_doc.h's bound on yaml-cpp), rendering manifests.
//
// Thread-safety: pure functions over text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::deploy {

struct LintFinding {
  std::string file;
  int line = 0;
  std::string object;  // "Deployment/vllm", "InferenceService/llama"
  std::string code;    // "image_latest", ... (above)
  std::string message;
  std::string Text() const;  // "FILE:LINE: OBJECT: CODE: MESSAGE"
};

struct LintInput {
  std::string file;  // as given, for the findings
  std::string text;
};

// Measurements a bundle gives the checks; absent: those checks are not made.
struct MeasuredLifecycle {
  std::optional<double> cold_start_s;  // spawn to first answer
  std::optional<double> drain_s;       // SIGTERM to exit
  std::string source;                  // "BUNDLE/candidates/X/probes/result.json", quoted in findings
};

struct LintReport {
  std::vector<LintFinding> findings;    // in file and line order
  std::vector<std::string> skipped;     // "FILE:LINE: KIND/NAME: skipped (not a workload this lint checks)"
  std::vector<std::string> unreadable;  // "FILE:LINE: not valid YAML: ..." (the other files are still linted)
  int objects_checked = 0;
};

LintReport LintManifests(const std::vector<LintInput>& inputs, const MeasuredLifecycle& measured = {});

}  // namespace bakeoff::deploy
