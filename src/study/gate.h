// study/gate.h
//
// Owns: the hard-constraint gate: every candidate against every constraint the study fixes
// (catalog entry, layer, architecture, weight format, quantization on the study's accelerator,
// hardware, context length, API protocol, each required feature, sunset), each cell pass, fail or
// unknown with its reason and the source of its evidence (a catalog line, a probe result, the
// study itself). Cells are answered from the catalog first; what the catalog does not know is
// answered by the qualification probes where a probe can tell (ApplyProbeEvidence). A candidate
// with a failing cell is eliminated and never benchmarked; unknown cells are its risks.
// Candidates on a different layer than the others (a weight format, a local model platform or a
// serving platform next to engines) are refused with that reason: they are not alternatives.
// Does not own: the catalog's format (study/catalog.h), running probes (qualify/).
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qualify/probe.h"
#include "study/catalog.h"
#include "study/study.h"

namespace bakeoff::study {

enum class CellStatus { kPass, kFail, kUnknown };
std::string_view CellStatusName(CellStatus status);

struct GateCell {
  std::string constraint;  // "quantization", "feature:prefix_caching", ...
  CellStatus status = CellStatus::kUnknown;
  std::string reason;    // one sentence with the values compared
  std::string evidence;  // "examples/catalog.yaml:14", "probe compatibility: candidates/x/probes/probes.json"
};

struct GateRow {
  std::string candidate;
  std::string catalog_entry;  // the entry's id, empty when the candidate names none
  std::vector<GateCell> cells;
  bool Eliminated() const;
  // The failing cells' reasons, and the unknown cells (risks), as "constraint: reason".
  std::vector<std::string> Failures() const;
  std::vector<std::string> Risks() const;
  GateCell* Find(std::string_view constraint);
};

struct GateTable {
  std::vector<GateRow> rows;  // in the study's candidate order
  GateRow* Find(std::string_view candidate);
  const GateRow* Find(std::string_view candidate) const;
};

// The catalog's answer for every candidate; `catalog` may be null (every catalog cell unknown).
GateTable GateOnCatalog(const Study& study, const Catalog* catalog);

// Resolves a row's unknown feature cells from what the probes saw, and judges every finding
// against the study (study/contracts.h): one that breaks a required feature or a stated contract
// fails that cell (`feature:X`, `contract:X`, even where the catalog said pass), one that breaks
// serving or an SLO clause the study sets fails the `probes` cell (added), and the others are
// left to the verdict as risks. A stated contract whose probe ran and found nothing passes.
// `probes_json` is the path of probes.json relative to the bundle, for evidence.
void ApplyProbeEvidence(GateRow& row, const Study& study, const qualify::ProbeRun& run,
                        const std::string& probes_json);

// What one request to the study's route (a pooling task's /v1/embeddings or /v1/rerank) found
// before any probe: `served` when it was answered; otherwise the server said it does not serve
// the route (target::GenerationAnswer::route_missing), with `detail` its words. Sets the row's
// `api` cell: a route not served fails it (whatever the catalog said), a served one passes an
// unknown cell. `evidence` names the file kept ("route check: candidates/x/route.json").
void ApplyRouteCheck(GateRow& row, const Study& study, bool served, const std::string& detail,
                     const std::string& evidence);

nlohmann::json ToJson(const GateTable& table);

}  // namespace bakeoff::study
