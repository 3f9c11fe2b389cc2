// study/bundle_reader.cc: a results bundle read back into the results model (bundle_reader.h).
#include "study/bundle_reader.h"

#include <fmt/format.h>

#include "core/file.h"
#include "study/verdict.h"

namespace bakeoff::study {
namespace {

namespace fs = std::filesystem;


// A JSON file of the bundle read with `read`; nullopt when absent, an error naming it when it
// does not parse or has another shape.
template <typename Read>
auto ReadPart(const fs::path& bundle, const fs::path& relative, Read read)
    -> Result<std::optional<decltype(read(nlohmann::json()))>> {
  const fs::path file = bundle / relative;
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::optional<decltype(read(nlohmann::json()))>();
  Result<std::string> text = ReadFile(file);
  if (!text.ok()) return text.error();
  nlohmann::json j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_discarded()) return InvalidInput(fmt::format("{}: not valid JSON", file.string()));
  try {
    return std::optional(read(j));
  } catch (const nlohmann::json::exception& e) {
    return InvalidInput(fmt::format("{}: does not read back as a bakeoff {} ({})", file.string(), relative.filename().string(), e.what()));
  }
}

}  // namespace

Result<nlohmann::json> ReadBundleManifest(const fs::path& bundle) {
  const fs::path file = bundle / "manifest.json";
  Result<std::optional<nlohmann::json>> manifest = ReadPart(bundle, "manifest.json", [](const nlohmann::json& j) { return j; });
  if (!manifest.ok()) return manifest.error();
  if (!manifest->has_value() || !(*manifest)->is_object() || !(**manifest)["tool"].is_string() ||
      (**manifest)["tool"] != "bakeoff") {
    return InvalidInput(fmt::format("{}: not a study bundle (no bakeoff manifest.json)", bundle.string()));
  }
  const nlohmann::json& version = (**manifest)["schema_version"];
  if (version != kBundleSchemaVersion) {
    return InvalidInput(fmt::format("{}: bundle schema_version {} is not one this bakeoff reads ({})", file.string(),
                               version.dump(), kBundleSchemaVersion));
  }
  return std::move(**manifest);
}

fs::path LastFinishedRound(const fs::path& candidate_dir, std::string_view phase) {
  fs::path found;
  std::error_code ec;
  for (int round = 0; round < 10'000; ++round) {
    const fs::path dir = candidate_dir / fmt::format("{}-r{}", phase, round);
    if (!fs::exists(dir, ec)) break;
    if (fs::exists(dir / "result.json", ec)) found = dir;
  }
  return found;
}

// ReadBundle's body; nlohmann throws on a manifest field of an unexpected type.
static Result<StudyResults> ReadBundleOrThrow(const fs::path& bundle) {
  StudyResults r;
  r.bundle = bundle;
  Result<nlohmann::json> manifest = ReadBundleManifest(bundle);
  if (!manifest.ok()) return manifest.error();
  r.manifest = std::move(manifest.value());
  Result<std::string> study_text = ReadFile(bundle / "study.yaml");
  if (!study_text.ok()) return study_text.error();
  // Parsed as the file it was run from, so paths in it mean what they meant then.
  Result<Study> study = ParseStudy(study_text.value(), (bundle / "study.yaml").string(),
                                   r.manifest.value("study_file", std::string()));
  if (!study.ok()) return study.error();
  r.study = std::move(study.value());
  r.study_hash = r.manifest.value("study_sha256", "");
  r.interrupted = r.manifest.value("interrupted", false);
  r.budget_spent = r.manifest.value("budget_spent", false);
  r.skipped = r.manifest.value("skipped", std::vector<std::string>());
  r.budget_plan = r.manifest.value("budget_plan", std::vector<std::string>());
  r.budget_cuts = r.manifest.value("budget_cuts", std::vector<std::string>());
  r.resumed = r.manifest.value("resumed", std::vector<std::string>());

  Result<std::optional<GateTable>> gate = ReadPart(bundle, "gate.json", GateTableFromJson);
  if (!gate.ok()) return gate.error();
  if (gate->has_value()) r.gate = std::move(**gate);
  Result<std::optional<Verdict>> verdict = ReadPart(bundle, "verdict.json", VerdictFromJson);
  if (!verdict.ok()) return verdict.error();
  if (!verdict->has_value()) return InvalidInput(fmt::format("{}: no verdict.json: the study did not finish", bundle.string()));
  r.verdict = std::move(**verdict);
  Result<std::optional<workload::Fingerprint>> fingerprint =
      ReadPart(bundle, "fingerprint.json", [](const nlohmann::json& j) {
        Result<workload::Fingerprint> fp = workload::ParseFingerprintJson(j.dump());
        if (!fp.ok()) throw nlohmann::json::other_error::create(0, fp.error().message, &j);
        return fp.value();
      });
  if (!fingerprint.ok()) return fingerprint.error();
  if (fingerprint->has_value()) r.workload = WorkloadFiguresOf(**fingerprint, r.study);

  const nlohmann::json engines = r.manifest.value("engines", nlohmann::json::array());
  for (const CandidateSpec& spec : r.study.candidates) {
    CandidateResult c;
    c.name = spec.name;
    c.kind = spec.kind;
    for (const nlohmann::json& e : engines) {
      if (e.value("candidate", "") != spec.name) continue;
      c.engine = e.value("engine", "");
      c.version = e.value("version", "");
      c.version_source = e.value("version_source", "");
      c.emulated = e.value("emulated", false);
    }
    const CandidateVerdict* decided = nullptr;
    for (const CandidateVerdict& v : r.verdict.candidates) decided = v.name == spec.name ? &v : decided;
    if (decided != nullptr) {
      c.eliminated = decided->status == CandidateStatus::kEliminated || decided->status == CandidateStatus::kDisqualified;
      if (decided->status == CandidateStatus::kFailed && !decided->reasons.empty()) c.failed = decided->reasons.front();
    }
    const fs::path dir = fs::path("candidates") / spec.name;
    Result<std::optional<ProbeSummary>> probes = ReadPart(bundle, dir / "probes" / "result.json", ProbeSummaryFromJson);
    if (!probes.ok()) return probes.error();
    if (probes->has_value()) c.probes = std::move(**probes);
    // Round by round, each round's phases in the order the runner runs them.
    for (std::uint32_t round = 0;; ++round) {
      bool any = false;
      for (Phase phase : {Phase::kSingle, Phase::kSweep, Phase::kReplay}) {
        const fs::path part = dir / fmt::format("{}-r{}", PhaseName(phase), round) / "result.json";
        Result<std::optional<PhaseResult>> result = ReadPart(bundle, part, PhaseResultFromJson);
        if (!result.ok()) return result.error();
        if (!result->has_value()) continue;
        any = true;
        for (const std::string& u : (*result)->unequal_work) {
          if (std::find(c.unequal_work.begin(), c.unequal_work.end(), u) == c.unequal_work.end()) c.unequal_work.push_back(u);
        }
        c.phases.push_back(std::move(**result));
      }
      if (!any) break;
    }
    Result<std::optional<CapacitySummary>> capacity = ReadPart(bundle, dir / "capacity" / "result.json", CapacitySummaryFromJson);
    if (!capacity.ok()) return capacity.error();
    if (capacity->has_value()) c.capacity = std::move(**capacity);
    // The manifest names the engine as launched; a phase that found the emulated engine behind it
    // (a launched or attached `bakeoff emulate`) says so, as the run itself did.
    c.emulated = c.emulated || c.capacity.emulated ||
                 std::any_of(c.phases.begin(), c.phases.end(), [](const PhaseResult& p) { return p.emulated; });
    r.candidates.push_back(std::move(c));
  }
  return r;
}

Result<StudyResults> ReadBundle(const fs::path& bundle) {
  try {
    return ReadBundleOrThrow(bundle);
  } catch (const nlohmann::json::exception& e) {
    return InvalidInput(fmt::format("{}: manifest.json has a field of an unexpected type ({})", (bundle / "manifest.json").string(),
                               e.what()));
  }
}

}  // namespace bakeoff::study
