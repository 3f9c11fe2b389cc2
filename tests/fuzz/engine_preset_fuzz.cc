// tests/fuzz/engine_preset_fuzz.cc
//
// Owns: the libFuzzer harness for engine preset files (emulate/engine_preset.h). Invariants: a
// parse either fails with a "source:LINE: ..." or "source: ..." message, or yields a config that
// ValidateEngineConfig accepts and that renders to YAML which parses back to the same rendering.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "emulate/engine_preset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto preset = bakeoff::emulate::ParseEnginePreset(text, "fuzz.yaml");
  if (!preset.ok()) {
    BAKEOFF_CHECK(preset.error().message.rfind("fuzz.yaml", 0) == 0) << preset.error().message;
    return 0;
  }
  BAKEOFF_CHECK(bakeoff::emulate::ValidateEngineConfig(preset->config).ok());
  const std::string rendered = bakeoff::emulate::RenderEnginePreset(preset.value());
  auto again = bakeoff::emulate::ParseEnginePreset(rendered, "rendered.yaml");
  BAKEOFF_CHECK(again.ok()) << again.error().message << "\n" << rendered;
  BAKEOFF_CHECK(bakeoff::emulate::RenderEnginePreset(again.value()) == rendered);
  return 0;
}
