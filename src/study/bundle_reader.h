// study/bundle_reader.h
//
// Owns: reading a results bundle (docs/formats/bundle.md) back into the results model, the inverse
// of what the runner writes: the study (its copy in the bundle), the gate (gate.json), every
// candidate's finished parts (each result.json: probes, load phases round by round, capacity), the
// workload figures (fingerprint.json), the verdict as it was decided (verdict.json, not decided
// again), and what the manifest says was skipped or resumed. So `bakeoff report BUNDLE` renders
// report.md from the same model `bakeoff run` rendered it from. A phase without its result.json
// (cut, or never run) is simply not there, as in the run that wrote the bundle.
// Does not own: writing bundles (study/runner.h), the JSON forms (study/results.h, verdict.h).
//
// Thread-safety: reads files; pure otherwise.
#pragma once

#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "study/runner.h"

namespace bakeoff::study {

// kInvalidInput, one line naming the file: not a bundle, another schema_version, or a file of the
// bundle that does not read back.
Result<StudyResults> ReadBundle(const std::filesystem::path& bundle);

// BUNDLE/manifest.json, checked to be a bakeoff bundle's of this schema_version (kInvalidInput,
// one line naming the file, otherwise).
Result<nlohmann::json> ReadBundleManifest(const std::filesystem::path& bundle);

// The folder of the highest round of `phase` ("sweep", "replay") that finished (holds its
// result.json) under a candidate's folder; empty when none did.
std::filesystem::path LastFinishedRound(const std::filesystem::path& candidate_dir, std::string_view phase);

}  // namespace bakeoff::study
