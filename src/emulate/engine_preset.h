// emulate/engine_preset.h
//
// Owns: engine preset files: small YAML documents (examples/engines/*.yaml) whose keys mirror the
// EngineConfig fields (engine_config.h) one to one, plus two free-text fields (description,
// hardware) kept beside the config; reading them with errors that name the file, the line and
// the key ("engine.yaml:7: kv.num_blocks: expected a whole number, got '1.5'"); finding a preset
// by name in a presets folder; and writing a preset back as YAML. docs/engine-presets.md
// describes the format, every key, and the shipped presets.
// Does not own: what the settings mean or which combinations are valid (engine_config.h:
// ValidateEngineConfig, whose message a loaded preset reports prefixed with the file and, when the
// named key is in the file, its line); where the CLI looks for the presets folder (cli/).
//
// Format rules (strict, so a typo cannot silently fall back to a default):
// - the document is one YAML mapping; `kv` and `cost` are nested mappings; a key absent from the
//   file takes EngineConfig's default (except `name`, see LoadEnginePreset);
// - unknown keys, a key given twice, and more than one YAML document are errors; a top-level
//   `calibration` mapping (what bakeoff calibrate measured, run/calibrate.h) is read past;
// - integers are plain decimal literals (no fraction, exponent, quotes), none negative;
//   `seed` is any integer in [0, 2^64); real numbers are finite and not negative; booleans are
//   true/false; `policy` and `kv.prefix_caching` take the names engine_config.h defines.
// Every parse or validation error is ErrorCode::kInvalidInput with the message
// "FILE:LINE: KEY: what is wrong" (KEY as the file spells it, nested keys dotted: kv.num_blocks),
// or "FILE: message" for a validation failure whose key is not in the file.
//
// Thread-safety: pure functions; Load/Resolve/List read the file system.
// Units: as EngineConfig: token counts; cost coefficients in milliseconds.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "emulate/engine_config.h"

namespace bakeoff::emulate {

struct EnginePreset {
  EngineConfig config;      // validated by the loaders (ValidateEngineConfig passed)
  std::string description;  // free text: what the preset imitates; empty when absent
  std::string hardware;  // free text: the hardware/model class its numbers suit; empty when absent
  std::filesystem::path file;  // the file it was read from; empty for ParseEnginePreset
};

// Every key a preset file may contain, dotted for nested ones ("kv.num_blocks"), in the order
// RenderEnginePreset writes them. The sections themselves ("kv", "cost") are not listed.
std::span<const std::string_view> EnginePresetKeys();

// Parses the text of a preset file and validates the result. `source_name` is the file name used
// in error messages. An absent `name` keeps EngineConfig's default ("default").
Result<EnginePreset> ParseEnginePreset(std::string_view yaml_text, std::string_view source_name);

// Reads and parses `file` (ParseEnginePreset with the path as the source name) and sets
// EnginePreset::file. An absent `name` becomes the file's stem ("continuous-paged" for
// continuous-paged.yaml). A file that cannot be read is ErrorCode::kIo.
Result<EnginePreset> LoadEnginePreset(const std::filesystem::path& file);

// Names of the presets in `presets_dir` (the stems of its *.yaml files), sorted; empty when the
// folder does not exist or cannot be read.
std::vector<std::string> ListEnginePresets(const std::filesystem::path& presets_dir);

// Turns a --engine style value into a preset file. A value containing '/' or ending in ".yaml"
// or ".yml" is a path, returned as given when it names a regular file. Anything else is a preset
// name, resolved to presets_dir/<name>.yaml. Errors (kInvalidInput): an empty value, a path that
// is not a file, an unknown name (the message lists the available names and suggests the closest
// one).
Result<std::filesystem::path> ResolveEnginePreset(std::string_view name_or_path,
                                                  const std::filesystem::path& presets_dir);

// The preset as a YAML document with every key (defaults included), numbers written so that they
// read back exactly: ParseEnginePreset(RenderEnginePreset(p), ...) gives p's config, description
// and hardware. For logs and run summaries that record the engine used.
std::string RenderEnginePreset(const EnginePreset& preset);

}  // namespace bakeoff::emulate
