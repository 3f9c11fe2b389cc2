// study/runner_prepare.cc: what the study runner does before anything is created (runner.h,
// steps 1 and 3, and the comparability check of step 4): the catalog, the emulated candidates'
// presets and the workload loaded (every mistake at once), the workload kept in the bundle, and
// attached servers checked to serve the study's model before any load. Declarations in
// runner_impl.h.
#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "core/file.h"
#include "core/yaml_doc.h"
#include "net/http_client.h"
#include "study/runner_impl.h"
#include "target/detection.h"
#include "target/discovery.h"
#include "workload/fingerprint.h"
#include "workload/importers.h"
#include "workload/synthesis.h"
#include "workload/trace_jsonl.h"

namespace bakeoff::study::runner_internal {

namespace fs = std::filesystem;

Status StudyRunner::Prepare() {
  std::vector<std::string> mistakes;
  if (!study_.catalog.empty()) {
    Result<Catalog> catalog = LoadCatalog(study_.catalog);
    if (!catalog.ok()) {
      mistakes.push_back(catalog.error().message);
    } else {
      catalog_ = std::move(catalog.value());
      LintOptions lint;
      lint.today = UtcTodayIso();
      lint_ = LintCatalog(*catalog_, lint);
      catalog_->source = "catalog.yaml";  // gate evidence points at the bundle's copy
    }
  }
  for (const CandidateSpec& c : study_.candidates) {
    if (c.kind != CandidateKind::kEmulated) continue;
    Result<fs::path> file = emulate::ResolveEnginePreset(c.preset, options_.presets_dir);
    if (!file.ok()) {
      mistakes.push_back(fmt::format("{}:{}: candidates[{}].emulated.preset: {}", study_.file.string(), c.line,
                                     &c - study_.candidates.data(), file.error().message));
      continue;
    }
    Result<emulate::EnginePreset> preset = emulate::LoadEnginePreset(file.value());
    if (!preset.ok()) {
      mistakes.push_back(preset.error().message);
      continue;
    }
    presets_[c.name] = std::move(preset.value());
  }
  if (Status st = LoadWorkload(); !st.ok()) mistakes.push_back(st.error().message);
  if (!mistakes.empty()) {
    std::string all;
    for (const std::string& m : mistakes) all += (all.empty() ? "" : "\n") + m;
    return Invalid(all);
  }
  return Ok{};
}

Status StudyRunner::LoadWorkload() {
  const TrafficSpec& t = study_.traffic;
  workload::SynthesisOptions synth;
  synth.seed = t.seed;
  if (t.requests > 0) synth.requests = t.requests;
  else if (t.duration_s > 0) synth.duration_s = t.duration_s;
  Result<workload::Trace> trace = Invalid("no traffic");
  switch (t.source) {
    case TrafficSource::kTrace: {
      workload::ImportOptions import;
      Result<workload::TraceFormat> format = workload::ParseTraceFormat(t.format);
      if (!format.ok()) return Invalid(fmt::format("{}: traffic.format: {}", study_.file.string(), format.error().message));
      import.format = format.value();
      trace = workload::LoadTrace(t.file, import);
      if (trace.ok() && t.requests > 0 && trace->requests.size() > t.requests) trace->requests.resize(t.requests);
      break;
    }
    case TrafficSource::kFingerprint: {
      Result<std::string> text = ReadFile(t.file);
      if (!text.ok()) return text.error();
      Result<workload::Fingerprint> fp = workload::ParseFingerprintJson(text.value());
      if (!fp.ok()) return Invalid(fmt::format("{}: {}", t.file.string(), fp.error().message));
      trace = workload::SynthesizeFromFingerprint(fp.value(), synth);
      break;
    }
    case TrafficSource::kShape: {
      Result<workload::WorkloadShape> shape = workload::LoadWorkloadShape(t.file);
      if (!shape.ok()) return shape.error();
      trace = workload::SynthesizeFromShape(shape.value(), synth);
      break;
    }
  }
  if (!trace.ok()) return trace.error();
  if (trace->requests.empty()) return Invalid(fmt::format("{}: the traffic has no requests", t.file.string()));
  // Lengths the study's context cannot hold are cut to it, and answers to the plan's cap.
  const std::uint32_t context = study_.model.max_context;
  for (workload::TraceRequest& r : trace->requests) {
    if (study_.plan.output_tokens_cap > 0) r.output_tokens = std::min(r.output_tokens, study_.plan.output_tokens_cap);
    r.output_tokens = std::max<std::uint32_t>(1, std::min(r.output_tokens, context / 2));
    if (r.input_tokens + r.output_tokens > context) {
      r.input_tokens = context - r.output_tokens;
      r.prompt.reset();
      r.messages.clear();
      r.prefix_hashes.resize(std::min<std::size_t>(
          r.prefix_hashes.size(), trace->block_tokens ? r.input_tokens / trace->block_tokens : 0));
    }
  }
  trace_ = std::make_shared<workload::Trace>(std::move(trace.value()));
  return Ok{};
}

Status StudyRunner::KeepWorkload() {
  const fs::path dir = options_.out_dir / "workload";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (Status st = workload::WriteTraceJsonl(*trace_, dir / "trace.jsonl"); !st.ok()) return st;
  const workload::Fingerprint fp = workload::FingerprintTrace(*trace_);
  if (Status st = WriteFileAtomically(options_.out_dir / "fingerprint.json", workload::FingerprintJson(fp)); !st.ok()) {
    return st;
  }
  results_.workload = WorkloadFiguresOf(fp, study_);
  log_(fmt::format("workload: {} requests at {:.3g} req/s, prompts {:.0f} tokens and answers {:.0f} on average{}",
                   results_.workload.requests, results_.workload.rate_per_s, results_.workload.input_tokens_mean,
                   results_.workload.output_tokens_mean,
                   results_.workload.prefix_reuse >= 0
                       ? fmt::format(", prefix reuse {:.0f}%", 100 * results_.workload.prefix_reuse)
                       : ""));
  return Ok{};
}

Status StudyRunner::CheckComparable() {
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < study_.candidates.size(); ++i) {
    const CandidateSpec& spec = study_.candidates[i];
    if (spec.kind != CandidateKind::kUrl || results_.candidates[i].eliminated) continue;
    Result<net::Endpoint> endpoint = net::ParseEndpoint(spec.url);
    if (!endpoint.ok()) {
      problems.push_back(fmt::format("{}: url: {}", spec.name, endpoint.error().message));
      continue;
    }
    target::StripApiVersionSuffix(endpoint.value());
    Result<target::TargetFacts> facts = target::Discover(endpoint.value(), net::ClientOptions{}, study_.model.name);
    if (!facts.ok()) {
      problems.push_back(fmt::format("{}: {}", spec.name, facts.error().message));
      continue;
    }
    const auto& listed = facts->listed_models;
    if (!listed.empty() && std::find(listed.begin(), listed.end(), study_.model.name) == listed.end()) {
      problems.push_back(fmt::format("{} serves {}, not the study's model {}: the candidates would not run the same "
                                     "model",
                                     spec.name, yaml::JoinNames(std::span<const std::string>(listed)),
                                     study_.model.name));
    }
    if (facts->max_context_tokens && *facts->max_context_tokens < study_.model.max_context) {
      problems.push_back(fmt::format("{} accepts {} tokens of context ({}), the study needs {}", spec.name,
                                     *facts->max_context_tokens, facts->max_context_source, study_.model.max_context));
    }
    Result<target::Detection> detection = target::DetectEngine(endpoint.value());
    if (detection.ok() && results_.candidates[i].engine.empty() && detection->adapter != nullptr) {
      results_.candidates[i].engine = std::string(detection->adapter->name);
    }
    if (detection.ok() && !detection->version.empty()) {
      results_.candidates[i].version = detection->version;
      results_.candidates[i].version_source = "discovered (" + detection->version_source + ")";
    }
  }
  if (problems.empty()) return Ok{};
  std::string all = "the candidates cannot be compared, so no load was sent:";
  for (const std::string& p : problems) all += "\n  " + p;
  return Invalid(all);
}

}  // namespace bakeoff::study::runner_internal
