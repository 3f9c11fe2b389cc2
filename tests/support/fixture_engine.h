// tests/support/fixture_engine.h
//
// Owns: a fake engine for calibration tests, served by ScriptedServer: GET /v1/models, one
// token-counting route in one engine's dialect (or none), and /v1/chat/completions and
// /v1/completions answers whose usage counts the prompt the way a real engine does: its own
// tokenizer plus a chat template and BOS. Written from the engines' documented shapes
// (dialect/tokenize.h lists them).
//
// The fixture tokenizer is deliberately unlike bakeoff's corpus words: each whitespace-separated
// word is 1 + (bytes - 1) / 4 tokens, so "a" is 1, "because" 2, "conversations" 4.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "dialect/tokenize.h"
#include "support/scripted_server.h"

namespace bakeoff::testing {

struct FixtureEngine {
  std::optional<dialect::TokenizeDialect> tokenize;  // the route it serves; none: every one 404s
  bool reports_usage = true;
  std::uint64_t bos_tokens = 1;              // added to every prompt (not by the tokenize route)
  std::uint64_t template_tokens = 3;         // chat: once per request
  std::uint64_t tokens_per_message = 4;      // chat: per message (role markers)
  std::optional<std::uint64_t> fixed_usage;  // a broken engine: usage always says this
  std::uint64_t max_model_len = 8192;
  // Set: it serves llama.cpp's GET /props with this total_slots and max_model_len as n_ctx.
  std::optional<std::uint64_t> total_slots;
};

std::uint64_t FixtureTokens(std::string_view text);
// What the fixture's usage.prompt_tokens says for a chat request with one user message.
std::uint64_t FixtureChatPromptTokens(const FixtureEngine& engine, std::string_view user_message);

ScriptedServer::Responder FixtureResponder(FixtureEngine engine);

}  // namespace bakeoff::testing
