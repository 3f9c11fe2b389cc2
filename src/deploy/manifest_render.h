// deploy/manifest_render.h
//
// Owns: `bakeoff k8s render`: the method's deployment baseline for one candidate, written from what
// a study measured: a Deployment (image by digest, the engine's serve command with the study's
// model, revision, context and settings, GPU requests equal to limits, /dev/shm in memory, a
// hardened security context: no privilege escalation, every capability dropped, the runtime's
// seccomp profile; runAsNonRoot is left to the image, as most engine images run as root), a Service
// and a PodDisruptionBudget; or with `kserve`, a KServe ServingRuntime and an InferenceService in
// RawDeployment mode. Its probes are the engine's own: the startupProbe covers the
// measured cold start with margin, the readinessProbe is the route the engine adapter says means
// "ready" (with its not-ready codes in a comment), the livenessProbe never generates (a
// non-generating health route, else the port); the grace period covers the measured drain with
// margin plus a preStop delay for endpoint removal. Every number carries a comment naming the
// measurement (or the default) it came from. What was not measured is rendered as a commented
// default and listed in `defaults`, so the caller can say so.
// Does not own: reading the bundle (cli), the checklist (manifest_lint.h checks what this writes).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace bakeoff::deploy {

// What the rendering needs, gathered from a study bundle by the caller.
struct DeploymentInputs {
  std::string name;       // the candidate's name (made a DNS label here)
  std::string namespace_name;  // empty: none written
  std::string engine;     // an adapter name (target/adapters.h)
  std::string image;      // as the catalog has it, tag included
  std::string image_digest;  // "sha256:..."; empty: not pinned (said in a comment)
  std::string model;      // the study's model
  std::string model_revision;  // empty: not pinned
  std::uint32_t max_context = 0;
  std::vector<std::string> settings;  // flags the study applied, as words (target::SplitCommandLine)
  std::string accelerator;  // nvidia, amd, cpu
  std::uint32_t gpus = 0;   // per pod
  std::optional<double> cold_start_s;  // spawn to first answer
  std::optional<double> drain_s;       // SIGTERM to exit
  std::optional<double> capacity_per_s;  // at the study's SLO, one replica
  double workload_rate_per_s = 0;        // the workload's mean arrival rate; 0: unknown
  std::string source;  // "BUNDLE" as the comments name it
  std::string probes_file;    // relative to the bundle: where cold start and drain come from
  std::string capacity_file;  // relative to the bundle
  bool kserve = false;
};

struct RenderedManifests {
  std::string yaml;  // several documents, commented
  std::vector<std::string> defaults;  // "drain: not measured, terminationGracePeriodSeconds 120 is a default"
};

// Errors (kInvalidInput): an engine without an adapter, an emulated engine, no image.
Result<RenderedManifests> RenderDeployment(const DeploymentInputs& inputs);

// A Kubernetes object name: lower case letters, digits and '-', at most 63, starting and ending
// with an alphanumeric ("vLLM_0.6 tuned" -> "vllm-0-6-tuned").
std::string DnsLabel(std::string_view text);

}  // namespace bakeoff::deploy
