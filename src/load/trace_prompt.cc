#include "load/trace_prompt.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"

namespace bakeoff::load {
namespace {

// A block's text depends only on the chain of ids up to and including it (the trace's prefix
// semantics: an id means the same tokens only after the same earlier ids), and lives apart from
// per-request seeds.
std::uint64_t ChainSeed(std::uint64_t previous, std::uint64_t hash_id) {
  return Rng(previous ^ (hash_id * 0x9e3779b97f4a7c15ULL) ^ 0x5eedb10c5eedb10cULL).Next();
}

void AppendWords(std::string& out, const PromptText& text, std::uint32_t tokens,
                 double words_per_token, std::uint64_t seed) {
  if (tokens == 0) return;
  if (!out.empty()) out.push_back(' ');
  out.append(text.Build(WordsForTokens(tokens, words_per_token), seed));
}

}  // namespace

TracePrompt BuildTracePrompt(const PromptText& text, const workload::TraceRequest& request,
                             std::uint32_t block_tokens, const PromptSizing& sizing, std::uint64_t seed) {
  const double words_per_token = sizing.words_per_token;
  TracePrompt out;
  if (!request.messages.empty()) {
    // The last user message is the new turn; everything before it is history.
    std::size_t last_user = request.messages.size();
    for (std::size_t i = request.messages.size(); i-- > 0;) {
      if (request.messages[i].role == "user") {
        last_user = i;
        break;
      }
    }
    for (std::size_t i = 0; i < request.messages.size(); ++i) {
      const workload::ChatMessage& m = request.messages[i];
      if (i == last_user) continue;
      if (m.role == "system" && i == 0) out.system = m.content;
      else out.history.emplace_back(m.role, m.content);
    }
    if (last_user < request.messages.size()) out.prompt = request.messages[last_user].content;
    return out;
  }
  if (request.prompt) {
    out.prompt = *request.prompt;
    return out;
  }
  std::uint32_t remaining = request.input_tokens;
  if (block_tokens > 0) {
    std::uint64_t chain = 0;
    for (std::uint64_t hash_id : request.prefix_hashes) {
      if (remaining == 0) break;
      chain = ChainSeed(chain, hash_id);
      const std::uint32_t tokens = std::min(block_tokens, remaining);
      AppendWords(out.prompt, text, tokens, words_per_token, chain);
      remaining -= tokens;
    }
  }
  // The server's own tokens (chat template, BOS) come off the part that is not a shared prefix.
  const auto overhead = static_cast<std::uint32_t>(std::max(0.0, std::round(sizing.overhead_tokens)));
  AppendWords(out.prompt, text, remaining > overhead ? remaining - overhead : std::min(remaining, 1u),
              words_per_token, seed);
  if (out.prompt.empty()) out.prompt = text.Build(1, seed);
  return out;
}

}  // namespace bakeoff::load
