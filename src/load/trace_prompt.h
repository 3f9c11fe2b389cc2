// load/trace_prompt.h
//
// Owns: the text sent for one replayed trace request. A request that carries its own text (a
// prompt, or chat messages) is sent as it is. Otherwise corpus text of its input length is made so
// that the trace's prefix sharing becomes real shared text: every prefix block reached through the
// same chain of hash ids gets the same words, so a server's prefix cache hits exactly where the
// trace says the production cache could have.
// Does not own: sessions' history (load/runner.cc carries real answers from turn to turn).
//
// Thread-safety: pure functions over immutable inputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "load/prompt_text.h"
#include "workload/trace.h"

namespace bakeoff::load {

struct TracePrompt {
  std::string prompt;                                         // the new user turn
  std::vector<std::pair<std::string, std::string>> history;   // earlier (role, content) messages
  std::string system;
};

// `seed` makes the non-shared part of the text unique per request.
TracePrompt BuildTracePrompt(const PromptText& text, const workload::TraceRequest& request,
                             std::uint32_t block_tokens, const PromptSizing& sizing, std::uint64_t seed);

}  // namespace bakeoff::load
