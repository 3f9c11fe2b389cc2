// tests/support/fixture_engine.cc: a fake engine's counting routes (contract in the header).
#include "support/fixture_engine.h"

#include <nlohmann/json.hpp>

namespace bakeoff::testing {
namespace {

using nlohmann::json;

Script Answer(int status, const json& body) { return {Send(FullResponse(status, body.dump()))}; }

json Ids(std::uint64_t n) {
  json ids = json::array();
  for (std::uint64_t i = 0; i < n; ++i) ids.push_back(100 + i);
  return ids;
}

// The tokenize route of `dialect` for `request`, answered as that engine answers.
Script Tokenize(dialect::TokenizeDialect dialect, const json& request) {
  const char* field = "prompt";
  switch (dialect) {
    case dialect::TokenizeDialect::kLlamaCpp:
      field = "content";
      break;
    case dialect::TokenizeDialect::kTgi:
      field = "inputs";
      break;
    case dialect::TokenizeDialect::kLmdeploy:
      field = "input";
      break;
    case dialect::TokenizeDialect::kVllm:
    case dialect::TokenizeDialect::kTrtLlm:
      break;
  }
  if (!request.is_object() || !request.contains(field) || !request[field].is_string()) {
    // llama.cpp answers an empty token list to a body without `content`; the others refuse.
    if (dialect == dialect::TokenizeDialect::kLlamaCpp)
      return Answer(200, {{"tokens", json::array()}});
    return Answer(dialect == dialect::TokenizeDialect::kTgi ? 422 : 400,
                  {{"error", std::string("missing field ") + field}});
  }
  const std::uint64_t n = FixtureTokens(request[field].get<std::string>());
  switch (dialect) {
    case dialect::TokenizeDialect::kVllm:
      return Answer(200, {{"count", n}, {"max_model_len", 8192}, {"tokens", Ids(n)}});
    case dialect::TokenizeDialect::kLlamaCpp:
      return Answer(200, {{"tokens", Ids(n)}});
    case dialect::TokenizeDialect::kTgi: {
      json tokens = json::array();
      for (std::uint64_t i = 0; i < n; ++i) {
        tokens.push_back({{"id", 100 + i}, {"text", "x"}, {"start", i}, {"stop", i + 1}});
      }
      return Answer(200, tokens);
    }
    case dialect::TokenizeDialect::kTrtLlm:
      return Answer(200, {{"count", n}, {"tokens", Ids(n)}});
    case dialect::TokenizeDialect::kLmdeploy:
      return Answer(200, {{"input_ids", Ids(n)}, {"length", n}});
  }
  return Answer(500, {});
}

Script Generate(const FixtureEngine& engine, bool chat, const json& request) {
  std::uint64_t prompt_tokens = engine.bos_tokens;
  if (chat) {
    if (!request.contains("messages") || !request["messages"].is_array()) {
      return Answer(400, {{"error", {{"message", "messages required"}}}});
    }
    prompt_tokens += engine.template_tokens;
    for (const json& message : request["messages"]) {
      prompt_tokens += engine.tokens_per_message + FixtureTokens(message.value("content", ""));
    }
  } else {
    prompt_tokens += FixtureTokens(request.value("prompt", ""));
  }
  if (engine.fixed_usage) prompt_tokens = *engine.fixed_usage;
  json choice = {{"index", 0}, {"finish_reason", "length"}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", "word"}};
  } else {
    choice["text"] = "word";
  }
  const json usage = {{"prompt_tokens", prompt_tokens},
                      {"completion_tokens", 1},
                      {"total_tokens", prompt_tokens + 1}};
  if (request.value("stream", false)) {
    // One token, then usage on the finishing chunk (as llama.cpp sends it), then [DONE].
    json delta = chat ? json{{"index", 0}, {"delta", {{"content", "word"}}}}
                      : json{{"index", 0}, {"text", "word"}};
    json last = chat ? json{{"index", 0}, {"delta", json::object()}, {"finish_reason", "length"}}
                     : json{{"index", 0}, {"text", ""}, {"finish_reason", "length"}};
    json final_chunk = {{"choices", json::array({last})}};
    if (engine.reports_usage) final_chunk["usage"] = usage;
    return SseScript({json{{"choices", json::array({delta})}}.dump(), final_chunk.dump()});
  }
  json body = {{"id", "fixture"},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"choices", json::array({choice})}};
  if (engine.reports_usage) body["usage"] = usage;
  return Answer(200, body);
}

}  // namespace

std::uint64_t FixtureTokens(std::string_view text) {
  std::uint64_t tokens = 0;
  std::size_t word = 0;
  auto end_word = [&] {
    if (word > 0) tokens += 1 + (word - 1) / 4;
    word = 0;
  };
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      end_word();
    } else {
      ++word;
    }
  }
  end_word();
  return tokens;
}

std::uint64_t FixtureChatPromptTokens(const FixtureEngine& engine, std::string_view user_message) {
  if (engine.fixed_usage) return *engine.fixed_usage;
  return engine.bos_tokens + engine.template_tokens + engine.tokens_per_message +
         FixtureTokens(user_message);
}

ScriptedServer::Responder FixtureResponder(FixtureEngine engine) {
  return [engine](const CapturedRequest& request) -> Script {
    if (request.method == "GET" && request.target == "/v1/models") {
      return Answer(200, {{"object", "list"},
                          {"data", json::array({{{"id", "fixture-model"},
                                                 {"object", "model"},
                                                 {"max_model_len", engine.max_model_len}}})}});
    }
    if (request.method == "GET" && request.target == "/props" && engine.total_slots) {
      return Answer(200, {{"total_slots", *engine.total_slots},
                          {"default_generation_settings", {{"n_ctx", engine.max_model_len}}}});
    }
    const json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (request.method == "POST" && engine.tokenize &&
        request.target == dialect::TokenizePath(*engine.tokenize)) {
      return Tokenize(*engine.tokenize, body);
    }
    if (request.method == "POST" && request.target == "/v1/chat/completions")
      return Generate(engine, true, body);
    if (request.method == "POST" && request.target == "/v1/completions")
      return Generate(engine, false, body);
    return Answer(404, {{"detail", "Not Found"}});
  };
}

}  // namespace bakeoff::testing
