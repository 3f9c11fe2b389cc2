// study/catalog.h
//
// Owns: the runtime catalog: a YAML file (docs/formats/catalog.md) that pins each runtime a study
// may name as a candidate (engine, version, image and digest, driver/CUDA/ROCm) and states the
// facts a decision needs (model architectures, weight formats, quantizations per accelerator
// kind, hardware, features, context limit, known limits, earlier result bundles, when and against
// what it was last verified, its sunset date); reading it strictly, with every mistake reported at
// once as "FILE:LINE: FIELD: what is wrong"; and the lint that says what in a parsed catalog makes
// it a weak basis for a decision (unpinned images, stale or missing verification, sunsets,
// missing facts), as findings with a severity, a code and the entry.
// Does not own: comparing entries with a study's requirements (the gate), probing a runtime
// (qualify/), or the feature names (study/features.h).
//
// Format rules (strict, so a typo cannot silently drop a fact): the document is one mapping with
// one key, `runtimes`, a list of mappings; unknown keys (with the nearest known key suggested),
// keys given twice, duplicate ids, unknown engines, features, layers and accelerator kinds are
// errors. Model revisions are not part of an entry (an entry names no model); a study pins its
// model's revision, so there is no `unpinned_revision` lint here.
//
// Thread-safety: pure functions on values; LoadCatalog reads the file; LintCatalog checks
// whether bundle paths exist when the catalog has a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "study/features.h"

namespace bakeoff::study {

// What kind of runtime an entry is. Names: engine, serving-platform, local-platform,
// weight-format.
enum class Layer { kEngine, kServingPlatform, kLocalPlatform, kWeightFormat };
std::string_view LayerName(Layer layer);
std::optional<Layer> ParseLayer(std::string_view name);

// The engine name of bakeoff's built-in emulated engine, and its image.
inline constexpr std::string_view kEmulatedEngine = "emulated";
inline constexpr std::string_view kBuiltinImage = "builtin";

// The accelerator kinds `quantizations` is keyed by: nvidia, amd, intel, gaudi, neuron, tpu,
// apple, cpu.
std::span<const std::string_view> AcceleratorKinds();

struct CatalogEntry {
  std::string id;            // what a study's candidate names: "vllm-0.6.3-cuda12.4"
  std::string engine;        // an adapter name (target/adapters.h; aliases become the name) or "emulated"
  std::string version;
  Layer layer = Layer::kEngine;
  std::string image;         // "vllm/vllm-openai:v0.6.3"; "builtin" for emulated
  std::string image_digest;  // "sha256:<64 hex>" (also taken from an image written name@sha256:...)
  std::string driver, cuda, rocm;
  std::vector<std::string> architectures;   // model architectures (HF "architectures" names or families)
  std::vector<std::string> weight_formats;  // safetensors, gguf, ...
  // accelerator kind (AcceleratorKinds) -> precisions/kernels (bf16, fp16, fp8, awq, gptq, ...)
  std::map<std::string, std::vector<std::string>> quantizations;
  std::vector<std::string> hardware;        // accelerator kinds or GPU models it runs on
  std::vector<Feature> features;            // what it offers; an absent feature is not offered
  std::uint32_t max_context = 0;            // tokens; 0: unknown
  // A limit the catalog's author knows of; `finding` names the probe finding that shows it (a code
  // or a pattern of study/contracts.h), so the decision record shows the two side by side.
  struct KnownLimit {
    std::string text;
    std::string finding;
    bool operator==(const KnownLimit&) const = default;
  };
  std::vector<KnownLimit> known_limits;
  std::vector<std::string> bundles;         // paths of earlier result bundles (relative: to the file)
  std::string last_verified_version, last_verified_date;  // date YYYY-MM-DD
  std::string verified_against;             // free text: "live llama.cpp b4748 on CPU", "fixtures only"
  std::string sunset;                       // YYYY-MM-DD or empty
  std::string emulated_preset;              // engine == emulated: the preset name (examples/engines)
  int line = 0;                             // the entry's line in the file
  // The line of every key the entry sets, by its name in the file ("image", "max_context",
  // "last_verified_date"); quantizations also per kind ("quantizations.nvidia"). A fact whose
  // key is absent is unknown; a key present with an empty list says "none".
  std::map<std::string, int, std::less<>> field_lines;

  bool emulated() const { return engine == kEmulatedEngine; }
  bool HasFeature(Feature feature) const;
  // The line of `field` when the entry sets it, else the entry's line.
  int LineOf(std::string_view field) const;
};

struct Catalog {
  std::filesystem::path file;  // empty for ParseCatalog
  std::string source;          // the name in messages and findings: the file's path, or ParseCatalog's source
  std::vector<CatalogEntry> entries;  // in file order; ids are unique
  // The entry with this id; nullptr when none.
  const CatalogEntry* Find(std::string_view id) const;
};

// Parses a catalog. `source` names the file in messages. Every mistake is reported at once:
// ErrorCode::kInvalidInput whose message has one "SOURCE:LINE: FIELD: what is wrong" line per
// mistake, in line order.
Result<Catalog> ParseCatalog(std::string_view text, std::string_view source);
// Reads and parses `file` (its path as the source) and sets Catalog::file. A file that cannot
// be read is ErrorCode::kIo.
Result<Catalog> LoadCatalog(const std::filesystem::path& file);

struct LintOptions {
  std::string today;  // YYYY-MM-DD
  int max_verification_age_days = 180;
};

enum class LintSeverity { kError, kWarning };
// "error" or "warning".
std::string_view LintSeverityName(LintSeverity severity);

struct LintFinding {
  LintSeverity severity;
  std::string source;   // the catalog's file (or the ParseCatalog source)
  int line;
  std::string entry;    // the entry's id
  std::string code;     // latest_tag, missing_digest, ... (docs/formats/catalog.md)
  std::string message;
};

// The findings for every entry, in line order. Codes (severity):
//   latest_tag (error)             the image's tag is `latest`, or it has none
//   missing_digest (error)         the image is not pinned by image_digest
//   missing_field (error)          a fact a decision needs is absent (one finding per field)
//   sunset_passed (error)          today is on or after the sunset date
//   verified_in_future (error)     last_verified_date is after today
//   sunset_soon (warning)          the sunset is within 30 days
//   verification_stale (warning)   last verified more than max_verification_age_days ago
//   never_verified (warning)       no last_verified_date
//   verified_other_version (warning) last_verified_version is not the entry's version
//   bundle_not_found (warning)     a bundle path does not exist (only for a catalog with a file)
// Emulated entries (image "builtin") are exempt from the image checks and need no architectures,
// weight formats, quantizations or hardware (the emulator runs no weights); local-platform and
// weight-format entries need no image.
// REQUIRES: options.today is a YYYY-MM-DD date; options.max_verification_age_days >= 0.
std::vector<LintFinding> LintCatalog(const Catalog& catalog, const LintOptions& options);

// "FILE:LINE: [entry] code: message" for an error, "FILE:LINE: [entry] code: warning: message"
// for a warning; always one line (line breaks in the message are written as \n).
std::string FormatLintFinding(const LintFinding& finding);
// Whether any finding is an error.
bool HasLintErrors(std::span<const LintFinding> findings);

}  // namespace bakeoff::study
