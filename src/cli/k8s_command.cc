// cli/k8s_command.cc
//
// Owns: `bakeoff k8s lint FILES... [--bundle DIR [--candidate NAME]]`: the deployment checklist on
// Kubernetes manifests (deploy/manifest_lint.h), one line per finding with file, line and object,
// skipped kinds listed; with a study bundle, the candidate's measured cold start and drain (default:
// the verdict's choice) are checked against the startup probe and the grace period. Exit codes: 0 no
// finding; 1 findings; 2 usage, a file that cannot be read or is not YAML, or a bundle without
// that candidate's measurements.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/file.h"
#include "deploy/manifest_lint.h"
#include "study/bundle_reader.h"

namespace bakeoff::cli {
namespace {

struct K8sLintFlags {
  std::vector<std::string> files;
  std::string bundle;
  std::string candidate;
};

Result<deploy::MeasuredLifecycle> MeasuredFrom(const K8sLintFlags& f) {
  deploy::MeasuredLifecycle measured;
  if (f.bundle.empty()) {
    if (!f.candidate.empty()) return MakeError(ErrorCode::kInvalidInput, "--candidate: needs --bundle");
    return measured;
  }
  Result<study::StudyResults> results = study::ReadBundle(f.bundle);
  if (!results.ok()) return MakeError(ErrorCode::kInvalidInput, "--bundle: " + results.error().message);
  const std::string name = f.candidate.empty() ? results->verdict.choice : f.candidate;
  if (name.empty()) {
    return MakeError(ErrorCode::kInvalidInput, "--bundle: the study chose no candidate; name one with --candidate");
  }
  for (const study::CandidateResult& c : results->candidates) {
    if (c.name != name) continue;
    if (c.probes.cold_start_s >= 0) measured.cold_start_s = c.probes.cold_start_s;
    if (c.probes.drain_s >= 0) measured.drain_s = c.probes.drain_s;
    measured.source = fmt::format("{}/{}", f.bundle, c.probes.path.empty() ? "candidates/" + name + "/probes" : c.probes.path);
    return measured;
  }
  return MakeError(ErrorCode::kInvalidInput, fmt::format("--candidate: {} is not a candidate of {}", name, f.bundle));
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

}  // namespace

void AddK8sCommand(CLI::App& app, int* exit_code) {
  CLI::App* k8s = app.add_subcommand("k8s", "Kubernetes: check manifests against the method's deployment checklist");
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
}

}  // namespace bakeoff::cli
