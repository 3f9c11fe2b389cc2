// study/gate.cc: the hard-constraint gate (gate.h).
#include "study/gate.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/ascii.h"
#include "core/yaml_doc.h"
#include "study/contracts.h"

namespace bakeoff::study {
namespace {


bool ContainsNoCase(const std::vector<std::string>& list, std::string_view value) {
  const std::string v = AsciiLower(value);
  return std::any_of(list.begin(), list.end(), [&](const std::string& x) { return AsciiLower(x) == v || x == "any"; });
}

std::string List(const std::vector<std::string>& list) {
  return list.empty() ? "none" : yaml::JoinNames(std::span<const std::string>(list));
}

class RowBuilder {
 public:
  RowBuilder(GateRow& row, const Catalog* catalog, const CatalogEntry* entry)
      : row_(row), catalog_(catalog), entry_(entry) {}

  void Add(std::string constraint, CellStatus status, std::string reason, std::string_view field = {}) {
    std::string evidence = "study";
    if (entry_ != nullptr && catalog_ != nullptr) {
      evidence = fmt::format("{}:{}", catalog_->source, field.empty() ? entry_->line : entry_->LineOf(field));
    }
    row_.cells.push_back({std::move(constraint), status, std::move(reason), std::move(evidence)});
  }

 private:
  GateRow& row_;
  const Catalog* catalog_;
  const CatalogEntry* entry_;
};

// The features a probe can tell, and how.
struct ProbeAnswer {
  Feature feature;
  std::string_view probe;  // the probe that tells
  std::string_view check;  // its check (empty: the probe's verdict)
};
constexpr ProbeAnswer kProbeAnswers[] = {
    {Feature::kStructuredOutput, "compatibility", "json_schema"},
    {Feature::kToolCalls, "compatibility", "tools"},
    {Feature::kLogprobs, "compatibility", "logprobs"},
    {Feature::kSeed, "compatibility", "determinism"},
    {Feature::kUsageInStream, "compatibility", "stream_usage"},
    {Feature::kStreamingCancel, "cancellation", ""},
};

void GateOneCandidate(const Study& study, const Catalog* catalog, const CandidateSpec& candidate,
                      const std::map<Layer, int>& layers, GateRow& row) {
  row.candidate = candidate.name;
  row.catalog_entry = candidate.catalog;
  const CatalogEntry* entry = catalog != nullptr && !candidate.catalog.empty() ? catalog->Find(candidate.catalog) : nullptr;
  RowBuilder add(row, catalog, entry);
  if (candidate.catalog.empty()) {
    add.Add("catalog_entry", CellStatus::kUnknown, "the candidate names no catalog entry: nothing is known before probing");
  } else if (entry == nullptr) {
    add.Add("catalog_entry", CellStatus::kFail,
            fmt::format("'{}' is not in the catalog{}", candidate.catalog, catalog ? " (" + catalog->source + ")" : ""));
    return;
  } else {
    add.Add("catalog_entry", CellStatus::kPass, fmt::format("{} {} {}", entry->id, entry->engine, entry->version));
    // The entry must describe what the candidate runs: the emulator's entries only emulated
    // candidates, with the same preset.
    const bool emulated = candidate.kind == CandidateKind::kEmulated;
    // A preset file is named by its stem, a preset name as it is (names may hold dots).
    const bool file = candidate.preset.find('/') != std::string::npos || candidate.preset.ends_with(".yaml") ||
                      candidate.preset.ends_with(".yml");
    const std::string preset = file ? std::filesystem::path(candidate.preset).stem().string() : candidate.preset;
    if (emulated != entry->emulated()) {
      add.Add("kind", CellStatus::kFail,
              emulated ? fmt::format("an emulated candidate names {}, an entry for {}", entry->id, entry->engine)
                       : fmt::format("a {} candidate names {}, an entry for the emulated engine",
                                     CandidateKindName(candidate.kind), entry->id),
              "engine");
    } else if (emulated && !entry->emulated_preset.empty() && entry->emulated_preset != preset) {
      add.Add("kind", CellStatus::kFail,
              fmt::format("the entry describes preset {}, the candidate runs {}", entry->emulated_preset, preset),
              "emulated_preset");
    } else {
      add.Add("kind", CellStatus::kPass, std::string(CandidateKindName(candidate.kind)), "engine");
    }
  }
  auto unknown = [&](std::string constraint, std::string what) {
    add.Add(std::move(constraint), CellStatus::kUnknown,
            entry ? fmt::format("the catalog entry does not say {}", what) : "no catalog entry");
  };
  const ModelSpec& m = study.model;

  // Layer: like must be compared with like. The majority layer among the candidates is the study's.
  if (entry) {
    Layer majority = Layer::kEngine;
    int most = -1;
    for (const auto& [layer, count] : layers) {
      if (count > most) most = count, majority = layer;
    }
    if (entry->layer != majority) {
      add.Add("layer", CellStatus::kFail,
              fmt::format("is a {}, the other candidates are {}s: they are not alternatives to each other",
                          LayerName(entry->layer), LayerName(majority)),
              "layer");
    } else {
      add.Add("layer", CellStatus::kPass, std::string(LayerName(entry->layer)), "layer");
    }
  } else {
    unknown("layer", "its layer");
  }

  // The emulated engine runs no weights: any architecture, format and precision is "served".
  if (entry && entry->emulated()) {
    for (const char* constraint : {"architecture", "weight_format", "quantization", "hardware"}) {
      add.Add(constraint, CellStatus::kPass, "the emulated engine runs no weights: it serves any model by name");
    }
  } else if (!entry || entry->architectures.empty()) {
    unknown("architecture", "which architectures it serves");
  } else if (ContainsNoCase(entry->architectures, m.architecture)) {
    add.Add("architecture", CellStatus::kPass, fmt::format("serves {}", m.architecture), "architectures");
  } else {
    add.Add("architecture", CellStatus::kFail,
            fmt::format("does not serve {} (serves {})", m.architecture, List(entry->architectures)), "architectures");
  }

  if (!m.weight_format.empty() && !(entry && entry->emulated())) {
    if (!entry || entry->weight_formats.empty()) {
      unknown("weight_format", "which weight formats it loads");
    } else if (ContainsNoCase(entry->weight_formats, m.weight_format)) {
      add.Add("weight_format", CellStatus::kPass, fmt::format("loads {}", m.weight_format), "weight_formats");
    } else {
      add.Add("weight_format", CellStatus::kFail,
              fmt::format("does not load {} (loads {})", m.weight_format, List(entry->weight_formats)),
              "weight_formats");
    }
  }

  const std::string& accelerator = study.hardware.accelerator;
  if (entry && entry->emulated()) {
    // answered above
  } else if (!entry || entry->quantizations.empty()) {
    unknown("quantization", "which precisions it runs");
  } else if (auto it = entry->quantizations.find(accelerator); it == entry->quantizations.end()) {
    add.Add("quantization", CellStatus::kFail, fmt::format("has no kernels listed for {} at all", accelerator),
            "quantizations");
  } else if (ContainsNoCase(it->second, m.quantization)) {
    add.Add("quantization", CellStatus::kPass, fmt::format("{} on {}", m.quantization, accelerator), "quantizations");
  } else {
    add.Add("quantization", CellStatus::kFail,
            fmt::format("no {} kernels on {} (has {})", m.quantization, accelerator, List(it->second)), "quantizations");
  }

  if (entry && entry->emulated()) {
    // answered above
  } else if (!entry || entry->hardware.empty()) {
    unknown("hardware", "which hardware it runs on");
  } else if (ContainsNoCase(entry->hardware, accelerator) ||
             (!study.hardware.gpu.empty() && ContainsNoCase(entry->hardware, study.hardware.gpu))) {
    add.Add("hardware", CellStatus::kPass, fmt::format("runs on {}", study.hardware.gpu.empty() ? accelerator : study.hardware.gpu),
            "hardware");
  } else {
    add.Add("hardware", CellStatus::kFail,
            fmt::format("does not list {} (lists {})", study.hardware.gpu.empty() ? accelerator : study.hardware.gpu,
                        List(entry->hardware)),
            "hardware");
  }

  if (!entry || entry->max_context == 0) {
    unknown("max_context", "its longest context");
  } else if (entry->max_context >= m.max_context) {
    add.Add("max_context", CellStatus::kPass, fmt::format("{} >= {} tokens", entry->max_context, m.max_context),
            "max_context");
  } else {
    add.Add("max_context", CellStatus::kFail,
            fmt::format("{} tokens, the study needs {}", entry->max_context, m.max_context), "max_context");
  }

  const Feature api = ApiFeature(study);
  std::vector<Feature> features = {api};
  for (Feature f : study.required_features) {
    if (f != api) features.push_back(f);
  }
  for (Feature f : features) {
    const std::string constraint = f == api ? "api" : fmt::format("feature:{}", FeatureName(f));
    if (!entry || entry->features.empty()) {
      unknown(constraint, fmt::format("whether it offers {}", FeatureName(f)));
    } else if (entry->HasFeature(f)) {
      add.Add(constraint, CellStatus::kPass, fmt::format("offers {}", FeatureName(f)), "features");
    } else {
      add.Add(constraint, CellStatus::kFail, fmt::format("does not offer {} (not in its features)", FeatureName(f)),
              "features");
    }
  }

  // Contracts the study states: no catalog field says them; the probe that tests each answers.
  for (Contract c : study.required_contracts) {
    row.cells.push_back({fmt::format("contract:{}", ContractName(c)), CellStatus::kUnknown,
                         fmt::format("told by the {} probe, not by a catalog", ContractProbe(c)), "study"});
  }

  if (entry && !entry->sunset.empty()) {
    const std::string today = UtcTodayIso();
    if (entry->sunset <= today) {
      add.Add("sunset", CellStatus::kFail, fmt::format("sunset on {} (today {})", entry->sunset, today), "sunset");
    } else {
      add.Add("sunset", CellStatus::kPass, fmt::format("supported until {}", entry->sunset), "sunset");
    }
  }
}

}  // namespace

std::string_view CellStatusName(CellStatus status) {
  switch (status) {
    case CellStatus::kPass: return "pass";
    case CellStatus::kFail: return "fail";
    case CellStatus::kUnknown: return "unknown";
  }
  return "?";
}

bool GateRow::Eliminated() const {
  return std::any_of(cells.begin(), cells.end(), [](const GateCell& c) { return c.status == CellStatus::kFail; });
}

std::vector<std::string> GateRow::Failures() const {
  std::vector<std::string> out;
  for (const GateCell& c : cells) {
    if (c.status == CellStatus::kFail) out.push_back(c.constraint + ": " + c.reason);
  }
  return out;
}

std::vector<std::string> GateRow::Risks() const {
  std::vector<std::string> out;
  for (const GateCell& c : cells) {
    if (c.status == CellStatus::kUnknown) out.push_back(c.constraint + ": " + c.reason);
  }
  return out;
}

GateCell* GateRow::Find(std::string_view constraint) {
  for (GateCell& c : cells) {
    if (c.constraint == constraint) return &c;
  }
  return nullptr;
}

GateRow* GateTable::Find(std::string_view candidate) {
  for (GateRow& r : rows) {
    if (r.candidate == candidate) return &r;
  }
  return nullptr;
}

const GateRow* GateTable::Find(std::string_view candidate) const {
  return const_cast<GateTable*>(this)->Find(candidate);
}

GateTable GateOnCatalog(const Study& study, const Catalog* catalog) {
  std::map<Layer, int> layers;
  if (catalog != nullptr) {
    for (const CandidateSpec& c : study.candidates) {
      if (const CatalogEntry* e = catalog->Find(c.catalog)) ++layers[e->layer];
    }
  }
  GateTable table;
  for (const CandidateSpec& c : study.candidates) GateOneCandidate(study, catalog, c, layers, table.rows.emplace_back());
  return table;
}

void ApplyRouteCheck(GateRow& row, const Study& study, bool served, const std::string& detail,
                     const std::string& evidence) {
  GateCell* cell = row.Find("api");
  if (cell == nullptr) return;
  const std::string_view feature = FeatureName(ApiFeature(study));
  if (!served) {
    const std::string catalog_said =
        cell->status == CellStatus::kPass
            ? fmt::format("the catalog says it offers {}, but ", feature)
            : "";
    *cell = {cell->constraint, CellStatus::kFail, catalog_said + detail, evidence};
  } else if (cell->status == CellStatus::kUnknown) {
    *cell = {cell->constraint, CellStatus::kPass, fmt::format("serves {}: {}", feature, detail),
             evidence};
  }
}

void ApplyProbeEvidence(GateRow& row, const Study& study, const qualify::ProbeRun& run,
                        const std::string& probes_json) {
  auto result_of = [&](std::string_view probe) -> const qualify::ProbeResult* {
    for (const qualify::ProbeResult& r : run.results) {
      if (r.name == probe && r.verdict != qualify::Verdict::kNotRun) return &r;
    }
    return nullptr;
  };
  for (const ProbeAnswer& answer : kProbeAnswers) {
    GateCell* cell = row.Find(fmt::format("feature:{}", FeatureName(answer.feature)));
    if (cell == nullptr || cell->status != CellStatus::kUnknown) continue;
    const qualify::ProbeResult* r = result_of(answer.probe);
    if (r == nullptr) continue;
    const std::string evidence = fmt::format("probe {}: {}", answer.probe, probes_json);
    if (answer.check.empty()) {
      const bool ok = r->verdict != qualify::Verdict::kFail;
      *cell = {cell->constraint, ok ? CellStatus::kPass : CellStatus::kFail,
               fmt::format("the {} probe {}", answer.probe, ok ? "passed" : "failed"), evidence};
      continue;
    }
    for (const qualify::Check& check : r->checks) {
      if (check.name != answer.check) continue;
      const bool ok = check.status == qualify::CheckStatus::kPass;
      *cell = {cell->constraint, ok ? CellStatus::kPass : CellStatus::kFail,
               fmt::format("{} check {}{}", check.name, qualify::CheckStatusName(check.status),
                           check.detail.empty() ? "" : ": " + check.detail),
               evidence};
    }
  }
  // Every finding judged against what the study states: one that breaks a stated feature or
  // contract fails that cell (live evidence over the catalog's word), any other that disqualifies
  // fails the `probes` cell; the rest are the verdict's risks and notes.
  std::vector<std::string> disqualifying;
  for (const qualify::ProbeResult& r : run.results) {
    for (const qualify::Finding& f : r.findings) {
      const JudgedFinding judged = JudgeFinding(study, f);
      if (judged.judgement != Judgement::kDisqualifies) continue;
      const bool own_cell = judged.breaks.rfind("feature:", 0) == 0 || judged.breaks.rfind("contract:", 0) == 0;
      if (!own_cell) {
        disqualifying.push_back(judged.breaks.empty() ? f.code : fmt::format("{} ({})", f.code, judged.breaks));
        continue;
      }
      GateCell* cell = row.Find(judged.breaks);
      if (cell == nullptr) cell = &row.cells.emplace_back(GateCell{judged.breaks, CellStatus::kUnknown, "", ""});
      if (cell->status == CellStatus::kFail && cell->evidence.rfind("probe", 0) == 0) {
        cell->reason += "; also " + f.code;
        continue;
      }
      const std::string claimed = cell->status == CellStatus::kPass && cell->evidence.rfind("probe", 0) != 0
                                      ? "the catalog says it offers this, but "
                                      : "";
      *cell = {judged.breaks, CellStatus::kFail, fmt::format("{}{}: {}", claimed, f.code, f.message),
               fmt::format("probe {}: {}", r.name, probes_json)};
    }
  }
  for (Contract c : study.required_contracts) {
    GateCell* cell = row.Find(fmt::format("contract:{}", ContractName(c)));
    if (cell == nullptr || cell->status != CellStatus::kUnknown) continue;
    if (result_of(ContractProbe(c)) != nullptr) {
      *cell = {cell->constraint, CellStatus::kPass,
               fmt::format("the {} probe found nothing that breaks it", ContractProbe(c)),
               fmt::format("probe {}: {}", ContractProbe(c), probes_json)};
    } else {
      cell->reason = fmt::format("not tested: the {} probe did not run", ContractProbe(c));
    }
  }
  GateCell probes{"probes", CellStatus::kPass, "no probe finding breaks what the study states",
                  "probes: " + probes_json};
  if (!run.unavailable.empty()) {
    probes.status = CellStatus::kFail;
    probes.reason = "could not be brought up: " + run.unavailable;
  } else if (!disqualifying.empty()) {
    probes.status = CellStatus::kFail;
    probes.reason = "disqualified by " + yaml::JoinNames(std::span<const std::string>(disqualifying));
  } else if (run.NothingRan()) {
    probes.status = CellStatus::kUnknown;
    probes.reason = "no probe could run";
  }
  if (GateCell* existing = row.Find("probes")) {
    *existing = std::move(probes);
  } else {
    row.cells.push_back(std::move(probes));
  }
}

nlohmann::json ToJson(const GateTable& table) {
  nlohmann::json rows = nlohmann::json::array();
  for (const GateRow& r : table.rows) {
    nlohmann::json cells = nlohmann::json::array();
    for (const GateCell& c : r.cells) {
      cells.push_back({{"constraint", c.constraint},
                       {"status", CellStatusName(c.status)},
                       {"reason", c.reason},
                       {"evidence", c.evidence}});
    }
    rows.push_back({{"candidate", r.candidate},
                    {"catalog_entry", r.catalog_entry},
                    {"eliminated", r.Eliminated()},
                    {"failures", r.Failures()},
                    {"risks", r.Risks()},
                    {"cells", cells}});
  }
  return {{"schema_version", 1}, {"candidates", rows}};
}

}  // namespace bakeoff::study
