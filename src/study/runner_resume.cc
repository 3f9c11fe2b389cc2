// study/runner_resume.cc: the study runner's resume bookkeeping (runner.h, step 2;
// docs/formats/bundle.md): the bundle opened new, or the same study's earlier one resumed (only
// what this very study, catalog and tool would measure again); a finished phase's result.json read
// back into the results instead of run again, and recorded as resumed; the manifest, written when
// the bundle opens and again when the study ends. Declarations in runner_impl.h.
#include <unistd.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/digest.h"
#include "core/file.h"
#include "core/json_dump.h"
#include "study/gate.h"
#include "study/runner_impl.h"

namespace bakeoff::study::runner_internal {

namespace fs = std::filesystem;

namespace {

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The host as the manifest records it: CPU model and count, memory, accelerators seen.
nlohmann::json HostJson() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string cpu;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string memory = FirstLine("/proc/meminfo");
  std::vector<std::string> gpus;
  std::error_code ec;
  if (fs::is_directory("/proc/driver/nvidia/gpus", ec)) {
    for (const auto& entry : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
      std::ifstream info(entry.path() / "information");
      std::string line;
      std::getline(info, line);
      gpus.push_back(line.empty() ? entry.path().filename().string() : line);
    }
  }
  return {{"hostname", name},
          {"cpu", cpu},
          {"cpus", std::thread::hardware_concurrency()},
          {"memory", memory},
          {"gpus", gpus},
          {"gpu_note", gpus.empty() ? "no GPU driver found (/proc/driver/nvidia/gpus)" : ""}};
}

}  // namespace

Status StudyRunner::OpenBundle() {
  const fs::path& out = options_.out_dir;
  Result<std::string> study_text = ReadFile(study_.file);
  results_.study_hash = Sha256Hex(study_text.ok() ? study_text.value() : "");
  if (catalog_) {
    if (Result<std::string> text = ReadFile(catalog_->file); text.ok()) catalog_hash_ = Sha256Hex(text.value());
  }
  started_at_ = UtcNowIso();
  std::error_code ec;
  if (fs::exists(out / "manifest.json", ec)) {
    Result<std::string> manifest = ReadFile(out / "manifest.json");
    nlohmann::json j = manifest.ok() ? nlohmann::json::parse(manifest.value(), nullptr, false) : nlohmann::json();
    auto field = [&](const char* key) {
      return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
    };
    // Resume only what this very study, catalog and tool would measure again: anything else is
    // another experiment, whose phases must not be mixed with these.
    std::string differs;
    if (field("study_sha256") != results_.study_hash) differs = "the study file differs";
    else if (field("catalog_sha256") != catalog_hash_) differs = "the catalog differs";
    else if (field("tool_version") != BAKEOFF_VERSION) differs = "it was written by bakeoff " + field("tool_version");
    else if (!j.contains("schema_version") || j["schema_version"] != kBundleSchemaVersion) differs = "its schema_version differs";
    if (options_.fresh) {
      fs::remove_all(out, ec);
    } else if (!differs.empty()) {
      return Invalid(fmt::format("{} holds the bundle of another experiment ({}); choose another --out, or pass "
                                 "--fresh to replace it",
                                 out.string(), differs));
    } else {
      resuming_ = true;
      if (std::string created = field("created_utc"); !created.empty()) started_at_ = created;
      log_(fmt::format("resuming the bundle in {}: finished phases are read back, not run again", out.string()));
    }
  } else if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    // --fresh replaces a bundle, never a folder that holds something else.
    return Invalid(fmt::format("{} exists, is not empty and is not a study bundle (no manifest.json); choose another "
                               "--out",
                               out.string()));
  }
  fs::create_directories(out / "candidates", ec);
  if (ec) return MakeError(ErrorCode::kIo, fmt::format("{}: {}", out.string(), ec.message()));
  if (Status st = WriteManifest(); !st.ok()) return st;
  if (study_text.ok()) {
    if (Status st = WriteFileAtomically(out / "study.yaml", study_text.value()); !st.ok()) return st;
  }
  if (catalog_) {
    if (Result<std::string> text = ReadFile(catalog_->file); text.ok()) {
      if (Status st = WriteFileAtomically(out / "catalog.yaml", text.value()); !st.ok()) return st;
    }
  }
  return Ok{};
}

template <typename Read>
auto StudyRunner::Saved(const fs::path& dir, Read read) const -> std::optional<decltype(read(nlohmann::json()))> {
  if (!resuming_) return std::nullopt;
  Result<std::string> text = ReadFile(dir / "result.json");
  if (!text.ok()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text.value(), nullptr, false);
  if (!j.is_discarded()) {
    try {
      return read(j);
    } catch (const nlohmann::json::exception& e) {
      log_(fmt::format("{}: cannot be read back ({}); measuring it again", Relative(dir / "result.json"), e.what()));
      return std::nullopt;
    }
  }
  log_(fmt::format("{}: not JSON; measuring it again", Relative(dir / "result.json")));
  return std::nullopt;
}

bool StudyRunner::ReadBackProbes(std::size_t i) {
  std::optional<ProbeSummary> saved = Saved(Dir(i, "probes"), ProbeSummaryFromJson);
  if (!saved) return false;
  const CandidateSpec& spec = study_.candidates[i];
  CandidateResult& c = results_.candidates[i];
  GateRow& row = *results_.gate.Find(spec.name);
  c.probes = std::move(*saved);
  row.cells = c.probes.gate_cells;
  c.eliminated = row.Eliminated();
  results_.resumed.push_back(spec.name + "/probes");
  return true;
}

bool StudyRunner::ReadBackLoadPhase(std::size_t i, const std::string& name) {
  std::optional<PhaseResult> saved = Saved(Dir(i, name), PhaseResultFromJson);
  if (!saved) return false;
  CandidateResult& c = results_.candidates[i];
  if (!saved->error.empty()) c.failed = saved->error;
  c.emulated = c.emulated || saved->emulated;
  c.phases.push_back(std::move(*saved));
  results_.resumed.push_back(study_.candidates[i].name + "/" + name);
  return true;
}

bool StudyRunner::ReadBackCapacity(std::size_t i) {
  std::optional<CapacitySummary> saved = Saved(Dir(i, "capacity"), CapacitySummaryFromJson);
  if (!saved) return false;
  CandidateResult& c = results_.candidates[i];
  c.capacity = std::move(*saved);
  c.emulated = c.emulated || c.capacity.emulated;
  results_.resumed.push_back(study_.candidates[i].name + "/capacity");
  return true;
}

nlohmann::json StudyRunner::Manifest() const {
  nlohmann::json engines = nlohmann::json::array();
  bool emulated = false;
  for (const CandidateResult& c : results_.candidates) {
    emulated = emulated || c.emulated;
    engines.push_back({{"candidate", c.name}, {"engine", c.engine}, {"version", c.version},
                       {"version_source", c.version_source}, {"emulated", c.emulated}});
  }
  return {{"schema_version", kBundleSchemaVersion},
          {"tool", "bakeoff"},
          {"tool_version", BAKEOFF_VERSION},
          {"created_utc", started_at_},
          {"finished_utc", UtcNowIso()},
          {"study", study_.name},
          {"study_file", study_.file.string()},
          {"study_sha256", results_.study_hash},
          {"catalog_sha256", catalog_hash_},
          {"seeds", {{"traffic", study_.traffic.seed}}},
          {"host", HostJson()},
          {"emulated", emulated},
          {"engines", engines},
          {"resumed", results_.resumed},
          {"skipped", results_.skipped},
          {"budget_plan", results_.budget_plan},
          {"budget_cuts", results_.budget_cuts},
          {"budget_s", ToSeconds(study_.budget)},
          {"budget_spent", !halt_.user_stopped() && halt_.budget_spent()},
          {"interrupted", halt_.user_stopped()}};
}

Status StudyRunner::WriteManifest() {
  results_.manifest = Manifest();
  return WriteFileAtomically(options_.out_dir / "manifest.json", DumpJson(results_.manifest, 2));
}

}  // namespace bakeoff::study::runner_internal
