// cli/k8s_command.cc
//
// Owns: `bakeoff k8s lint FILES... [--bundle DIR [--candidate NAME]]`: the deployment checklist on
// Kubernetes manifests (deploy/manifest_lint.h), one line per finding with file, line and object,
// skipped kinds listed; with a study bundle, the candidate's measured cold start and drain (default:
// the verdict's choice) are checked against the startup probe and the grace period. Exit codes: 0 no
// finding; 1 findings; 2 usage, a file that cannot be read or is not YAML, or a bundle without
// that candidate's measurements.
// And `bakeoff k8s render BUNDLE [--candidate NAME] [--namespace NS] [--kserve] [--out FILE]`: the
// deployment baseline from the bundle's measurements (deploy/manifest_render.h), on stdout or in
// FILE; what had to be a default is said on stderr. Exit codes: 0 written; 2 usage, a bundle that
// does not read, an unknown or emulated candidate.
// And `bakeoff k8s load-job --image I --shards N --start-at T -- BENCH FLAGS`: the Indexed Job of a
// sharded load (deploy/load_job.h). Exit codes: 0 written; 2 usage.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/file.h"
#include "cli/load_flags.h"
#include "deploy/load_job.h"
#include "deploy/manifest_lint.h"
#include "deploy/manifest_render.h"
#include "study/bundle_reader.h"
#include "study/catalog.h"
#include "target/launcher.h"

namespace bakeoff::cli {
namespace {

struct K8sLintFlags {
  std::vector<std::string> files;
  std::string bundle;
  std::string candidate;
};

// The candidate `requested` names, else the study's choice: its results as the bundle holds them
// (every candidate of the study has an entry, measured or not).
Result<const study::CandidateResult*> ChosenCandidate(const study::StudyResults& results, const std::string& requested,
                                                      const std::string& bundle) {
  const std::string& name = requested.empty() ? results.verdict.choice : requested;
  if (name.empty()) return MakeError(ErrorCode::kInvalidInput, "the study chose no candidate; name one with --candidate");
  for (const study::CandidateResult& c : results.candidates) {
    if (c.name == name) return &c;
  }
  return MakeError(ErrorCode::kInvalidInput, fmt::format("--candidate: {} is not a candidate of {}", name, bundle));
}

Result<deploy::MeasuredLifecycle> MeasuredFrom(const K8sLintFlags& f) {
  deploy::MeasuredLifecycle measured;
  if (f.bundle.empty()) {
    if (!f.candidate.empty()) return MakeError(ErrorCode::kInvalidInput, "--candidate: needs --bundle");
    return measured;
  }
  Result<study::StudyResults> results = study::ReadBundle(f.bundle);
  if (!results.ok()) return MakeError(ErrorCode::kInvalidInput, "--bundle: " + results.error().message);
  Result<const study::CandidateResult*> chosen = ChosenCandidate(*results, f.candidate, f.bundle);
  if (!chosen.ok()) return chosen.error();
  const study::CandidateResult& c = **chosen;
  if (c.probes.cold_start_s >= 0) measured.cold_start_s = c.probes.cold_start_s;
  if (c.probes.drain_s >= 0) measured.drain_s = c.probes.drain_s;
  measured.source = fmt::format("{}/{}", f.bundle, c.probes.path.empty() ? "candidates/" + c.name + "/probes" : c.probes.path);
  return measured;
}

int RunK8sLint(const K8sLintFlags& f) {
  Result<deploy::MeasuredLifecycle> measured = MeasuredFrom(f);
  if (!measured.ok()) {
    fmt::print(stderr, "bakeoff k8s lint: {}\n", measured.error().message);
    return kExitUsage;
  }
  if (!f.bundle.empty()) {
    fmt::print(stderr, "bakeoff k8s lint: measured in {}: cold start {}, drain {}\n", measured->source,
               measured->cold_start_s ? fmt::format("{:.1f} s", *measured->cold_start_s) : "not measured",
               measured->drain_s ? fmt::format("{:.1f} s", *measured->drain_s) : "not measured");
  }
  std::vector<deploy::LintInput> inputs;
  bool unreadable = false;
  for (const std::string& file : f.files) {
    Result<std::string> text = ReadFile(file);
    if (!text.ok()) {
      fmt::print(stderr, "bakeoff k8s lint: {}\n", text.error().message);
      unreadable = true;
      continue;
    }
    inputs.push_back({file, std::move(text.value())});
  }
  const deploy::LintReport report = deploy::LintManifests(inputs, measured.value());
  for (const deploy::LintFinding& finding : report.findings) fmt::print("{}\n", finding.Text());
  for (const std::string& line : report.skipped) fmt::print("{}\n", line);
  for (const std::string& line : report.unreadable) fmt::print(stderr, "bakeoff k8s lint: {}\n", line);
  fmt::print(stderr, "bakeoff k8s lint: {} finding(s) in {} object(s) checked, {} skipped\n", report.findings.size(),
             report.objects_checked, report.skipped.size());
  if (unreadable || !report.unreadable.empty()) return kExitUsage;
  return report.findings.empty() ? kExitOk : kExitFailure;
}

struct K8sRenderFlags {
  std::string bundle;
  std::string candidate;
  std::string namespace_name;
  std::string out;
  bool kserve = false;
};

// The rendering's inputs from the bundle: the study (model, hardware, the candidate's settings),
// its catalog copy (image and digest), the candidate's probes and capacity, the workload's rate.
Result<deploy::DeploymentInputs> RenderInputs(const K8sRenderFlags& f) {
  Result<study::StudyResults> results = study::ReadBundle(f.bundle);
  if (!results.ok()) return results.error();
  Result<const study::CandidateResult*> chosen = ChosenCandidate(*results, f.candidate, f.bundle);
  if (!chosen.ok()) return chosen.error();
  const study::CandidateResult* measured = *chosen;
  const std::string& name = measured->name;
  const study::CandidateSpec* spec = nullptr;
  for (const study::CandidateSpec& c : results->study.candidates) {
    if (c.name == name) spec = &c;
  }
  if (spec == nullptr) return MakeError(ErrorCode::kInternal, "a bundle candidate without its study entry: " + name);
  deploy::DeploymentInputs in;
  in.name = name;
  in.namespace_name = f.namespace_name;
  in.kserve = f.kserve;
  in.source = f.bundle;
  in.model = results->study.model.name;
  in.model_revision = results->study.model.revision;
  in.max_context = results->study.model.max_context;
  in.accelerator = results->study.hardware.accelerator;
  in.gpus = results->study.hardware.gpus;
  for (const std::string& setting : spec->settings) {
    Result<std::vector<std::string>> words = target::SplitCommandLine(setting);
    if (!words.ok()) return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: setting '{}': {}", name, setting, words.error().message));
    for (std::string& word : *words) in.settings.push_back(std::move(word));
  }
  in.engine = spec->engine;
  const std::filesystem::path catalog_file = std::filesystem::path(f.bundle) / "catalog.yaml";
  if (!spec->catalog.empty() && std::filesystem::exists(catalog_file)) {
    Result<study::Catalog> catalog = study::LoadCatalog(catalog_file);
    if (!catalog.ok()) return catalog.error();
    if (const study::CatalogEntry* entry = catalog->Find(spec->catalog)) {
      in.image = entry->image;
      in.image_digest = entry->image_digest;
      if (in.engine.empty()) in.engine = entry->engine;
    }
  }
  if (measured->emulated) in.engine = "emulated";  // what answered was bakeoff's emulated engine
  if (in.engine.empty()) in.engine = measured->engine;
  if (measured->probes.cold_start_s >= 0) in.cold_start_s = measured->probes.cold_start_s;
  if (measured->probes.drain_s >= 0) in.drain_s = measured->probes.drain_s;
  in.probes_file = measured->probes.path.empty() ? "candidates/" + name + "/probes/probes.json" : measured->probes.path;
  if (measured->capacity.capacity_per_s > 0) in.capacity_per_s = measured->capacity.capacity_per_s;
  in.capacity_file = "candidates/" + name + "/capacity/result.json";
  in.workload_rate_per_s = results->workload.rate_per_s;
  if (in.image.empty() && in.engine != "emulated") {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("candidate {} has no catalog entry with an image in {}", name, catalog_file.string()));
  }
  return in;
}

int RunK8sRender(const K8sRenderFlags& f) {
  Result<deploy::DeploymentInputs> inputs = RenderInputs(f);
  Result<deploy::RenderedManifests> rendered = inputs.ok() ? deploy::RenderDeployment(*inputs)
                                                           : Result<deploy::RenderedManifests>(inputs.error());
  if (!rendered.ok()) {
    fmt::print(stderr, "bakeoff k8s render: {}\n", rendered.error().message);
    return kExitUsage;
  }
  for (const std::string& line : rendered->defaults) fmt::print(stderr, "bakeoff k8s render: {}\n", line);
  if (f.out.empty() || f.out == "-") {
    fmt::print("{}", rendered->yaml);
    return kExitOk;
  }
  if (Status written = WriteFileAtomically(f.out, rendered->yaml); !written.ok()) {
    fmt::print(stderr, "bakeoff k8s render: {}\n", written.error().message);
    return kExitUsage;
  }
  fmt::print(stderr, "bakeoff k8s render: wrote {}\n", f.out);
  return kExitOk;
}

int RunK8sLoadJob(const deploy::LoadJobInputs& in, const std::string& out) {
  Result<std::string> yaml = !ParseInstant(in.start_at)
                                 ? Result<std::string>(MakeError(ErrorCode::kInvalidInput,
                                       fmt::format("--start-at: '{}' is not 2026-12-01T22:00:00Z (UTC) or Unix seconds", in.start_at)))
                                 : deploy::RenderLoadJob(in);
  if (!yaml.ok()) {
    fmt::print(stderr, "bakeoff k8s load-job: {}\n", yaml.error().message);
    return kExitUsage;
  }
  if (out.empty() || out == "-") {
    fmt::print("{}", *yaml);
    return kExitOk;
  }
  if (Status written = WriteFileAtomically(out, *yaml); !written.ok()) {
    fmt::print(stderr, "bakeoff k8s load-job: {}\n", written.error().message);
    return kExitUsage;
  }
  fmt::print(stderr, "bakeoff k8s load-job: wrote {}\n", out);
  return kExitOk;
}

}  // namespace

void AddK8sCommand(CLI::App& app, int* exit_code) {
  CLI::App* k8s = app.add_subcommand("k8s", "Kubernetes: render the deployment baseline from a study, check manifests against the method's checklist, run one load from many pods");
  k8s->require_subcommand(1);
  auto flags = std::make_shared<K8sLintFlags>();
  CLI::App* lint = k8s->add_subcommand(
      "lint",
      "Check Deployment, StatefulSet, LeaderWorkerSet and KServe manifests: pinned images, probes that mean what "
      "they say, /dev/shm, a disruption budget, GPU limits, a pinned model revision; with --bundle, the startup "
      "probe and grace period against the measured cold start and drain (docs/kubernetes.md).\n"
      "Exit: 0 no finding, 1 findings, 2 unreadable or usage.");
  lint->add_option("files", flags->files, "Manifest files (YAML, any number of documents each)")->required();
  lint->add_option("--bundle", flags->bundle, "A study bundle whose measured cold start and drain the probes must cover");
  lint->add_option("--candidate", flags->candidate, "The bundle's candidate these manifests deploy (default: its choice)");
  lint->callback([flags, exit_code] { *exit_code = RunK8sLint(*flags); });

  auto render_flags = std::make_shared<K8sRenderFlags>();
  CLI::App* render = k8s->add_subcommand(
      "render",
      "Write the deployment baseline for a study's candidate: Deployment, Service and PodDisruptionBudget (or a "
      "KServe ServingRuntime and InferenceService), with the startup probe and grace period sized from the measured "
      "cold start and drain, readiness on the engine's ready route, a liveness probe that never generates, the "
      "image by digest; every number commented with its source (docs/kubernetes.md).\n"
      "Exit: 0 written, 2 unreadable bundle, unknown or emulated candidate, or usage.");
  render->add_option("bundle", render_flags->bundle, "A study bundle (bakeoff run --out)")->required();
  render->add_option("--candidate", render_flags->candidate, "The candidate to deploy (default: the study's choice)");
  render->add_option("--namespace", render_flags->namespace_name, "The objects' namespace (default: none written)");
  render->add_flag("--kserve", render_flags->kserve, "A KServe ServingRuntime and InferenceService instead");
  render->add_option("--out", render_flags->out, "Write the manifests to this file (default: stdout)");
  render->callback([render_flags, exit_code] { *exit_code = RunK8sRender(*render_flags); });

  auto job = std::make_shared<deploy::LoadJobInputs>();
  auto job_out = std::make_shared<std::string>();
  CLI::App* load_job = k8s->add_subcommand(
      "load-job",
      "Write the Indexed Job that runs one load from many pods: pod I runs `bakeoff bench --shard I/N --start-at T` "
      "with the bench flags given after --, spread over nodes, never retried; results as a tarball in each pod's log "
      "(or on --claim), with the commands that collect them (docs/kubernetes.md).\n"
      "Exit: 0 written, 2 usage.");
  load_job->add_option("--image", job->image, "An image with the bakeoff binary, sh, tar and base64")->required();
  load_job->add_option("--shards", job->shards, "Pods, one shard each")->required();
  load_job->add_option("--start-at", job->start_at, "When every shard starts: 2026-12-01T22:00:00Z (UTC) or Unix seconds")->required();
  load_job->add_option("--name", job->name, "The Job's name")->capture_default_str();
  load_job->add_option("--namespace", job->namespace_name, "The Job's namespace (default: none written)");
  load_job->add_option("--claim", job->claim, "A PersistentVolumeClaim (ReadWriteMany) for the results instead of the logs");
  load_job->add_option("--cpu", job->cpu, "CPU per shard, requested and limited")->capture_default_str();
  load_job->add_option("--memory", job->memory, "Memory per shard, requested and limited")->capture_default_str();
  load_job->add_option("--out", *job_out, "Write the Job to this file (default: stdout)");
  load_job->add_option("bench_flags", job->bench_args, "After --: the bench flags every shard runs with (--url ...)");
  load_job->callback([job, job_out, exit_code] { *exit_code = RunK8sLoadJob(*job, *job_out); });
}

}  // namespace bakeoff::cli
