// emulate/openai_render_internal.h (internal to emulate/openai_render*.cc)
//
// Owns: what ResponseRenderer's OpenAI templates (openai_render.cc) take from its native wires'
// rendering (openai_render_native.cc).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "emulate/openai_api.h"

namespace bakeoff::emulate::render_internal {

// What every line (Ollama) or event (Triton) of a native stream starts with; "" for TGI, whose
// events differ from the first byte on, and for the OpenAI and pooling wires.
std::string NativeHead(Wire wire, const std::string& model_json, std::int64_t created);

}  // namespace bakeoff::emulate::render_internal
