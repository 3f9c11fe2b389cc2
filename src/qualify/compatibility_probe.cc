// qualify/compatibility_probe.cc
//
// Owns: the compatibility probe (docs/formats/probes.md, "compatibility"): does the candidate
// speak the OpenAI API the way a benchmark relies on it? One check per feature, each with its
// request and response kept:
// GET /v1/models; streaming and non-streaming on both APIs; usage in the stream when asked;
// max_tokens honoured; fixed-length output (ignore_eos + min_tokens); greedy determinism; stop
// sequences; logprobs; n > 1; JSON-schema structured output; tool calls; an unknown model; a
// prompt over the context limit. On a pooling route (embeddings, rerank): GET /v1/models; a
// request of two texts answered with two vectors or scores and usage; batch consistency (a text's
// vector alone and beside another, a rerank's indices); an unknown model; a text over the context.
// Severity: the items a benchmark's fairness rests on (streaming and non-streaming on the API
// under test, stream usage, max_tokens, fixed length, serving an unknown model, silent prompt
// truncation) are disqualifying, since without them two candidates would be doing unequal work
// or reporting it wrongly; optional features are warnings; a feature the server refuses with a
// 4xx is "unsupported", recorded, not a finding.
// Does not own: sending and recording one call (qualify/api_call.h), the schema subset
// (qualify/json_schema.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"
#include "core/json_text.h"
#include "qualify/api_call.h"
#include "qualify/json_schema.h"
#include "qualify/probes.h"

namespace bakeoff::qualify {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr std::string_view kStoryPrompt =
    "Write a long story about a lighthouse keeper who finds a message in a bottle.";
constexpr std::uint32_t kShortAnswer = 16;
constexpr std::uint32_t kCutAt = 8;          // max_tokens check
constexpr std::uint32_t kFixedLength = 24;   // ignore_eos + min_tokens check
constexpr std::uint32_t kGreedyLength = 24;  // determinism and stop checks
// Context limit assumed when the server does not say; the prompt is twice it.
constexpr std::uint64_t kAssumedContext = 32768;

std::optional<json> ParseJson(std::string_view text) {
  json doc = ParsePeerJson(text);
  if (doc.is_discarded()) return std::nullopt;
  return doc;
}

const json* FirstChoice(const json& doc) {
  if (!doc.is_object()) return nullptr;
  auto choices = doc.find("choices");
  if (choices == doc.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object())
    return nullptr;
  return &(*choices)[0];
}


class Compatibility {
 public:
  Compatibility(ProbeContext& context, ProbeResult& result)
      : context_(context), result_(result), api_(context.candidate.spec().api) {}

  void Run() {
    Result<target::TargetFacts> facts = context_.candidate.Facts();
    if (!facts.ok()) {
      result_.Find(Severity::kDisqualifying, "no_model",
                   "could not learn the model to request: " + facts.error().message);
      return;
    }
    model_ = facts->model;
    facts_ = facts.value();
    const std::vector<void (Compatibility::*)()> checks =
        dialect::ApiGenerates(api_)
            ? std::vector<void (Compatibility::*)()>{&Compatibility::Models,         &Compatibility::BothApis,
                                                     &Compatibility::StreamUsage,    &Compatibility::MaxTokens,
                                                     &Compatibility::FixedLength,    &Compatibility::Determinism,
                                                     &Compatibility::Stop,           &Compatibility::Logprobs,
                                                     &Compatibility::SeveralChoices, &Compatibility::JsonSchema,
                                                     &Compatibility::Tools,          &Compatibility::UnknownModel,
                                                     &Compatibility::OverContext}
            : std::vector<void (Compatibility::*)()>{&Compatibility::Models, &Compatibility::PoolingAnswers,
                                                     &Compatibility::BatchConsistency, &Compatibility::UnknownModel,
                                                     &Compatibility::OverContext};
    for (auto check : checks) {
      if (context_.Expired()) {
        result_.Find(Severity::kWarning, "time_bound",
                     "the probe's time bound passed before every check ran");
        return;
      }
      (this->*check)();
    }
  }

 private:
  static std::vector<std::string> Files(std::string evidence) {
    if (evidence.empty()) return {};
    return {std::move(evidence)};
  }
  void Pass(const std::string& name, std::string detail, std::string evidence) {
    result_.AddCheck(name, CheckStatus::kPass, std::move(detail), Files(std::move(evidence)));
  }
  void Unsupported(const std::string& name, std::string detail, std::string evidence) {
    result_.AddCheck(name, CheckStatus::kUnsupported, std::move(detail),
                     Files(std::move(evidence)));
  }
  // A failed check and its finding, coded "<code>" (the probe prefixes its name).
  void Fail(const std::string& name, Severity severity, const std::string& code,
            const std::string& detail, std::vector<std::string> evidence) {
    result_.AddCheck(name, CheckStatus::kFail, detail, evidence);
    result_.Find(severity, code, name + ": " + detail, std::move(evidence));
  }
  // The severity of a failed core item on `api`: disqualifying on the API under test, a warning
  // on the other one (the benchmark will not use it).
  Severity CoreOn(dialect::Api api) const {
    return api == api_ ? Severity::kDisqualifying : Severity::kWarning;
  }

  // A greedy generation, or on a pooling route the prompt as its one text.
  json Body(dialect::Api api, std::string_view prompt, std::uint32_t max_tokens) const {
    if (!dialect::ApiGenerates(api)) return PoolingBody(model_, api, {std::string(prompt)});
    return GreedyBody(model_, api, std::string(prompt), max_tokens);
  }
  ApiCall Send(const std::string& name, dialect::Api api, const json& body,
               int patience = 1) {  // times answer_within
    CallOptions options;
    options.timeout = context_.options.answer_within * patience;
    return SendApi(context_, name, dialect::RequestPath(api, model_, false), Dump(body), options);
  }

  void Models() {
    CallOptions options;
    options.method = "GET";
    options.timeout = seconds(10);
    const ApiCall call = SendApi(context_, "models", "/v1/models", "", options);
    const std::string name = "models";
    if (!call.Success()) {
      Fail(name, Severity::kWarning, "models_failed", "GET /v1/models: " + call.Describe(),
           {call.evidence});
      return;
    }
    const std::optional<json> doc = ParseJson(call.body);
    std::vector<std::string> ids;
    if (doc && doc->is_object() && doc->contains("data") && (*doc)["data"].is_array()) {
      for (const json& card : (*doc)["data"])
        if (card.is_object() && card.contains("id") && card["id"].is_string())
          ids.push_back(card["id"].get<std::string>());
    }
    if (std::find(ids.begin(), ids.end(), model_) != ids.end()) {
      Pass(name, fmt::format("lists \"{}\" ({} model(s))", model_, ids.size()), call.evidence);
    } else {
      Fail(name, Severity::kWarning, "models_failed",
           fmt::format("GET /v1/models does not list \"{}\" (data ids: {})", model_,
                       ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", "))),
           {call.evidence});
    }
  }

  void BothApis() {
    for (dialect::Api api :
         {api_, api_ == dialect::Api::kChat ? dialect::Api::kCompletions : dialect::Api::kChat}) {
      NonStreaming(api);
      Streaming(api);
    }
  }

  // A 404/405 on the API not under test means the server does not serve it: unsupported.
  bool NotServed(dialect::Api api, const ApiCall& call) const {
    return api != api_ && (call.status == 404 || call.status == 405);
  }

  void NonStreaming(dialect::Api api) {
    const std::string name = fmt::format("{}_non_streaming", dialect::ApiName(api));
    const ApiCall call = Send(name, api, Body(api, "Say hello.", kShortAnswer));
    if (NotServed(api, call)) {
      Unsupported(name, call.Describe(), call.evidence);
      return;
    }
    if (!call.Success()) {
      Fail(name, CoreOn(api), name + "_failed", call.Describe(), {call.evidence});
      return;
    }
    Result<dialect::CompletionResponse> decoded = dialect::DecodeCompletionResponse(call.body);
    if (!decoded.ok()) {
      Fail(name, CoreOn(api), name + "_failed", decoded.error().message, {call.evidence});
      return;
    }
    if (decoded->content.empty() && decoded->finish_reason.empty()) {
      Fail(name, CoreOn(api), name + "_failed", "neither text nor a finish reason",
           {call.evidence});
      return;
    }
    Pass(name,
         fmt::format("{} bytes of text, finish_reason \"{}\", usage {}", decoded->content.size(),
                     decoded->finish_reason, decoded->usage ? "present" : "absent"),
         call.evidence);
  }

  void Streaming(dialect::Api api) {
    const std::string name = fmt::format("{}_streaming", dialect::ApiName(api));
    json body = Body(api, "Say hello.", kShortAnswer);
    body["stream"] = true;
    const ApiCall call = Send(name, api, body);
    if (NotServed(api, call)) {
      Unsupported(name, call.Describe(), call.evidence);
      return;
    }
    if (!call.Success()) {
      Fail(name, CoreOn(api), name + "_failed", call.Describe(), {call.evidence});
      return;
    }
    const StreamedAnswer answer = ReadStream(call.body);
    std::string why;
    if (!answer.error.empty()) {
      why = answer.error;
    } else if (answer.chunks == 0) {
      why = fmt::format("no SSE data chunks (Content-Type \"{}\")", call.content_type);
    } else if (answer.text.empty() && answer.finish_reason.empty()) {
      why = "the chunks carried neither text nor a finish reason";
    }
    if (!why.empty()) {
      Fail(name, CoreOn(api), name + "_failed", why, {call.evidence});
      return;
    }
    Pass(name,
         fmt::format("{} chunks, {} bytes of text, finish_reason \"{}\", [DONE] {}", answer.chunks,
                     answer.text.size(), answer.finish_reason, answer.done ? "sent" : "not sent"),
         call.evidence);
  }

  void StreamUsage() {
    const std::string name = "stream_usage";
    json body = Body(api_, "Say hello.", kShortAnswer);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const ApiCall call = Send(name, api_, body);
    if (!call.Success()) {
      Fail(name, Severity::kDisqualifying, "stream_usage_failed", call.Describe(), {call.evidence});
      return;
    }
    const StreamedAnswer answer = ReadStream(call.body);
    if (!answer.usage) {
      Fail(name, Severity::kDisqualifying, "stream_usage_failed",
           "stream_options.include_usage was set but no chunk carried usage", {call.evidence});
      return;
    }
    if (answer.usage->prompt_tokens == 0 || answer.usage->completion_tokens == 0) {
      Fail(name, Severity::kDisqualifying, "stream_usage_failed",
           fmt::format("usage says prompt_tokens {} and completion_tokens {}",
                       answer.usage->prompt_tokens, answer.usage->completion_tokens),
           {call.evidence});
      return;
    }
    Pass(name,
         fmt::format("prompt_tokens {}, completion_tokens {}", answer.usage->prompt_tokens,
                     answer.usage->completion_tokens),
         call.evidence);
  }

  void MaxTokens() {
    const std::string name = "max_tokens";
    const ApiCall call = Send(name, api_, Body(api_, kStoryPrompt, kCutAt));
    Result<dialect::CompletionResponse> decoded =
        call.Success()
            ? dialect::DecodeCompletionResponse(call.body)
            : Result<dialect::CompletionResponse>(MakeError(ErrorCode::kProtocol, call.Describe()));
    if (!decoded.ok()) {
      Fail(name, Severity::kDisqualifying, "max_tokens_failed", decoded.error().message,
           {call.evidence});
      return;
    }
    if (!decoded->usage) {
      Fail(name, Severity::kDisqualifying, "max_tokens_failed",
           "the answer has no usage, so the output length cannot be checked", {call.evidence});
      return;
    }
    const std::uint64_t got = decoded->usage->completion_tokens;
    const std::string& finish = decoded->finish_reason;
    std::string why;
    if (got > kCutAt) {
      why = fmt::format("{} completion tokens for max_tokens {}", got, kCutAt);
    } else if (got == kCutAt && finish != "length") {
      why = fmt::format("cut at max_tokens {} but finish_reason \"{}\", not \"length\"", kCutAt,
                        finish);
    } else if (got < kCutAt && finish == "length") {
      why = fmt::format("finish_reason \"length\" after {} of {} tokens", got, kCutAt);
    }
    if (!why.empty()) {
      Fail(name, Severity::kDisqualifying, "max_tokens_failed", why, {call.evidence});
      return;
    }
    Pass(name, fmt::format("{} tokens, finish_reason \"{}\" (max_tokens {})", got, finish, kCutAt),
         call.evidence);
  }

  void FixedLength() {
    const std::string name = "fixed_length";
    json body = Body(api_, "Say hello.", kFixedLength);
    body["min_tokens"] = kFixedLength;
    body["ignore_eos"] = true;
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const ApiCall call = Send(name, api_, body);
    if (call.ClientError()) {
      Unsupported(name, "ignore_eos/min_tokens refused: " + call.Describe(), call.evidence);
      return;
    }
    if (!call.Success()) {
      Fail(name, Severity::kDisqualifying, "fixed_length_failed", call.Describe(), {call.evidence});
      return;
    }
    const StreamedAnswer answer = ReadStream(call.body);
    if (!answer.usage) {
      Fail(name, Severity::kDisqualifying, "fixed_length_failed",
           "no usage in the stream, so the output length cannot be checked", {call.evidence});
      return;
    }
    if (answer.usage->completion_tokens != kFixedLength) {
      Fail(name, Severity::kDisqualifying, "fixed_length_failed",
           fmt::format("asked for exactly {} tokens (ignore_eos, min_tokens = max_tokens), got {} "
                       "(finish_reason \"{}\"): output lengths cannot be equalised",
                       kFixedLength, answer.usage->completion_tokens, answer.finish_reason),
           {call.evidence});
      return;
    }
    Pass(name, fmt::format("exactly {} tokens", kFixedLength), call.evidence);
  }

  void Determinism() {
    const std::string name = "determinism";
    const json body = Body(api_, kStoryPrompt, kGreedyLength);
    const ApiCall first = Send("determinism_1", api_, body);
    const ApiCall second = Send("determinism_2", api_, body);
    std::vector<std::string> evidence = {first.evidence, second.evidence};
    std::optional<std::string> texts[2];
    for (int i = 0; i < 2; ++i) {
      const ApiCall& call = i == 0 ? first : second;
      if (!call.Success()) continue;
      if (Result<dialect::CompletionResponse> d = dialect::DecodeCompletionResponse(call.body);
          d.ok())
        texts[i] = d->content;
    }
    if (!texts[0] || !texts[1]) {
      Fail(name, Severity::kWarning, "determinism_failed",
           "a greedy request failed: " + (texts[0] ? second : first).Describe(), evidence);
      return;
    }
    greedy_answer_ = *texts[0];
    if (*texts[0] != *texts[1]) {
      std::size_t at = 0;
      while (at < texts[0]->size() && at < texts[1]->size() && (*texts[0])[at] == (*texts[1])[at])
        ++at;
      Fail(name, Severity::kWarning, "determinism_failed",
           fmt::format("the same greedy request (temperature 0, seed {}) gave two different "
                       "texts, first differing at byte {}",
                       kProbeSeed, at),
           evidence);
      return;
    }
    Pass(name,
         fmt::format("the same {} bytes twice (temperature 0, seed {})", texts[0]->size(),
                     kProbeSeed),
         evidence.front());
  }

  // A word of the greedy answer, not at its start, to ask for as a stop sequence.
  static std::optional<std::pair<std::string, std::size_t>> PickStopWord(const std::string& text) {
    std::vector<std::pair<std::string, std::size_t>> words;  // (word, offset)
    for (std::size_t i = 0; i < text.size();) {
      if (!std::isalnum(static_cast<unsigned char>(text[i]))) {
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end]))) ++end;
      words.emplace_back(text.substr(i, end - i), i);
      i = end;
    }
    // From the middle on, the first word of 3+ characters whose first occurrence is not at the
    // start (so the answer before it is non-empty).
    for (std::size_t k = words.size() / 2; k < words.size(); ++k) {
      const auto& [word, offset] = words[k];
      const std::size_t first = text.find(word);
      if (word.size() >= 3 && first > 0) return std::make_pair(word, first);
    }
    return std::nullopt;
  }

  void Stop() {
    const std::string name = "stop";
    if (!greedy_answer_) {
      Unsupported(name, "no greedy answer to take a stop word from (see determinism)", "");
      return;
    }
    const auto picked = PickStopWord(*greedy_answer_);
    if (!picked) {
      Unsupported(name,
                  fmt::format("the greedy answer ({} bytes) has no word to use as a stop sequence",
                              greedy_answer_->size()),
                  "");
      return;
    }
    const auto& [word, offset] = *picked;
    json body = Body(api_, kStoryPrompt, kGreedyLength);
    body["stop"] = json::array({word});
    const ApiCall call = Send(name, api_, body);
    if (call.ClientError()) {
      Unsupported(name, "stop refused: " + call.Describe(), call.evidence);
      return;
    }
    Result<dialect::CompletionResponse> decoded =
        call.Success()
            ? dialect::DecodeCompletionResponse(call.body)
            : Result<dialect::CompletionResponse>(MakeError(ErrorCode::kProtocol, call.Describe()));
    if (!decoded.ok()) {
      Fail(name, Severity::kWarning, "stop_failed", decoded.error().message, {call.evidence});
      return;
    }
    const std::string& text = decoded->content;
    if (const std::size_t at = text.find(word); at != std::string::npos) {
      Fail(name, Severity::kWarning, "stop_ignored",
           fmt::format("stop [\"{}\"] was sent, yet the output contains \"{}\" at byte {} "
                       "(finish_reason \"{}\")",
                       word, word, at, decoded->finish_reason),
           {call.evidence});
      return;
    }
    const bool prefix = greedy_answer_->compare(0, text.size(), text) == 0;
    if (decoded->finish_reason != "stop" && !prefix) {
      // A server whose greedy answers vary (see determinism) may simply not have written the
      // word this time: stop was not exercised, so nothing can be said about it.
      Unsupported(name,
                  fmt::format("inconclusive: stop [\"{}\"] never came up, because this answer "
                              "differs from the first greedy one (finish_reason \"{}\")",
                              word, decoded->finish_reason),
                  call.evidence);
      return;
    }
    if (decoded->finish_reason != "stop") {
      Fail(name, Severity::kWarning, "stop_failed",
           fmt::format("stop [\"{}\"] (at byte {} of the unstopped answer): the output does not "
                       "contain it, but finish_reason is \"{}\", not \"stop\"",
                       word, offset, decoded->finish_reason),
           {call.evidence});
      return;
    }
    Pass(name,
         fmt::format("stop [\"{}\"]: {} bytes, ended before it{}", word, text.size(),
                     prefix ? ", a prefix of the unstopped answer" : ""),
         call.evidence);
  }

  void Logprobs() {
    const std::string name = "logprobs";
    json body = Body(api_, "Say hello.", 4);
    if (api_ == dialect::Api::kChat) {
      body["logprobs"] = true;
      body["top_logprobs"] = 2;
    } else {
      body["logprobs"] = 2;
    }
    const ApiCall call = Send(name, api_, body);
    if (call.ClientError()) {
      Unsupported(name, "logprobs refused: " + call.Describe(), call.evidence);
      return;
    }
    const std::optional<json> doc = call.Success() ? ParseJson(call.body) : std::nullopt;
    const json* choice = doc ? FirstChoice(*doc) : nullptr;
    std::string why;
    std::size_t entries = 0;
    if (choice == nullptr) {
      why = call.Success() ? "the answer has no choices" : call.Describe();
    } else if (!choice->contains("logprobs") || !(*choice)["logprobs"].is_object()) {
      why = "logprobs were asked for; the choice has none";
    } else {
      const json& logprobs = (*choice)["logprobs"];
      const char* list = api_ == dialect::Api::kChat ? "content" : "token_logprobs";
      if (!logprobs.contains(list) || !logprobs[list].is_array() || logprobs[list].empty()) {
        why = fmt::format("logprobs.{} is missing or empty", list);
      } else {
        entries = logprobs[list].size();
        const json& first = logprobs[list][0];
        const bool number =
            api_ == dialect::Api::kChat
                ? first.is_object() && first.contains("logprob") && first["logprob"].is_number()
                : first.is_number();
        if (!number) why = fmt::format("logprobs.{}[0] carries no log probability", list);
      }
    }
    if (!why.empty()) {
      Fail(name, Severity::kWarning, "logprobs_failed", why, {call.evidence});
      return;
    }
    Pass(name, fmt::format("{} token entries with log probabilities", entries), call.evidence);
  }

  void SeveralChoices() {
    const std::string name = "n";
    json body = Body(api_, "Say hello.", 4);
    body["n"] = 2;
    const ApiCall call = Send(name, api_, body);
    if (call.ClientError()) {
      Unsupported(name, "n=2 refused: " + call.Describe(), call.evidence);
      return;
    }
    const std::optional<json> doc = call.Success() ? ParseJson(call.body) : std::nullopt;
    if (!doc || !FirstChoice(*doc)) {
      Fail(name, Severity::kWarning, "n_failed",
           call.Success() ? "the answer has no choices" : call.Describe(), {call.evidence});
      return;
    }
    const json& choices = (*doc)["choices"];
    std::vector<std::int64_t> indexes;
    for (const json& c : choices)
      if (c.is_object() && c.contains("index") && c["index"].is_number_integer())
        indexes.push_back(c["index"].get<std::int64_t>());
    std::sort(indexes.begin(), indexes.end());
    if (choices.size() != 2 || indexes != std::vector<std::int64_t>{0, 1}) {
      Fail(name, Severity::kWarning, "n_failed",
           fmt::format("asked for n=2; got {} choice(s) with indexes [{}]", choices.size(),
                       fmt::join(indexes, ", ")),
           {call.evidence});
      return;
    }
    Pass(name, "two choices, indexes 0 and 1", call.evidence);
  }

  void JsonSchema() {
    const std::string name = "json_schema";
    const json schema = {{"type", "object"},
                         {"properties",
                          {{"name", {{"type", "string"}}},
                           {"age", {{"type", "integer"}}},
                           {"kind", {{"type", "string"}, {"enum", {"cat", "dog", "bird"}}}},
                           {"toys", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                         {"required", {"name", "age", "kind", "toys"}}};
    json body = Body(api_, "Describe a pet as JSON: its name, age, kind and toys.", 200);
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "pet"}, {"schema", schema}, {"strict", true}}}};
    const ApiCall call = Send(name, api_, body, 2);
    if (call.ClientError()) {
      Unsupported(name, "response_format json_schema refused: " + call.Describe(), call.evidence);
      return;
    }
    Result<dialect::CompletionResponse> decoded =
        call.Success()
            ? dialect::DecodeCompletionResponse(call.body)
            : Result<dialect::CompletionResponse>(MakeError(ErrorCode::kProtocol, call.Describe()));
    if (!decoded.ok()) {
      Fail(name, Severity::kWarning, "json_schema_failed", decoded.error().message,
           {call.evidence});
      return;
    }
    const std::optional<json> doc = ParseJson(decoded->content);
    if (!doc) {
      Fail(name, Severity::kWarning, "json_schema_failed",
           fmt::format("the output is not JSON (finish_reason \"{}\"): {}", decoded->finish_reason,
                       Utf8Prefix(decoded->content, 120)),
           {call.evidence});
      return;
    }
    if (std::optional<std::string> violation = SchemaViolation(*doc, schema)) {
      Fail(name, Severity::kWarning, "json_schema_failed",
           "the output breaks the requested schema: " + *violation, {call.evidence});
      return;
    }
    Pass(name, "the output is JSON that conforms to the requested schema", call.evidence);
  }

  void Tools() {
    const std::string name = "tools";
    const json parameters = {{"type", "object"},
                             {"properties", {{"city", {{"type", "string"}}}}},
                             {"required", {"city"}}};
    json body = Body(dialect::Api::kChat, "What is the weather in Paris?", 64);
    body["tools"] = json::array({{{"type", "function"},
                                  {"function",
                                   {{"name", "get_weather"},
                                    {"description", "The current weather in a city"},
                                    {"parameters", parameters}}}}});
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    const ApiCall call = Send(name, dialect::Api::kChat, body, 2);
    if (call.ClientError()) {
      Unsupported(name, "tools refused: " + call.Describe(), call.evidence);
      return;
    }
    const std::optional<json> doc = call.Success() ? ParseJson(call.body) : std::nullopt;
    const json* choice = doc ? FirstChoice(*doc) : nullptr;
    std::string why;
    if (choice == nullptr) {
      why = call.Success() ? "the answer has no choices" : call.Describe();
    } else if (!choice->contains("message") || !(*choice)["message"].is_object() ||
               !(*choice)["message"].contains("tool_calls") ||
               !(*choice)["message"]["tool_calls"].is_array() ||
               (*choice)["message"]["tool_calls"].empty()) {
      why = "tool_choice named get_weather; the message has no tool_calls";
    } else {
      const json& call0 = (*choice)["message"]["tool_calls"][0];
      const json* function =
          call0.is_object() && call0.contains("function") && call0["function"].is_object()
              ? &call0["function"]
              : nullptr;
      if (function == nullptr || !function->contains("name") ||
          (*function)["name"] != "get_weather") {
        why = "tool_calls[0] does not name the function get_weather";
      } else if (!function->contains("arguments") || !(*function)["arguments"].is_string()) {
        why = "tool_calls[0].function.arguments is not a string of JSON";
      } else if (const std::optional<json> arguments =
                     ParseJson((*function)["arguments"].get<std::string>());
                 !arguments) {
        why = "tool_calls[0].function.arguments is not JSON";
      } else if (std::optional<std::string> violation = SchemaViolation(*arguments, parameters)) {
        why = "the arguments break the tool's parameter schema: " + *violation;
      }
    }
    if (!why.empty()) {
      Fail(name, Severity::kWarning, "tools_failed", why, {call.evidence});
      return;
    }
    Pass(name, "a get_weather tool call with JSON arguments that fit its parameters",
         call.evidence);
  }

  // Two texts on the pooling route: two vectors (of one dimension) or two scores, and the usage.
  void PoolingAnswers() {
    const std::string name = fmt::format("{}_non_streaming", dialect::ApiName(api_));
    const ApiCall call = Send(name, api_, PoolingBody(model_, api_, {"The sea is calm.", "A dog runs home."}));
    if (!call.Success()) {
      Fail(name, Severity::kDisqualifying, name + "_failed", call.Describe(), {call.evidence});
      return;
    }
    Result<dialect::CompletionResponse> decoded = dialect::DecodeResponse(api_, call.body);
    std::string wrong;
    if (!decoded.ok()) {
      wrong = decoded.error().message;
    } else if (decoded->items != 2) {
      wrong = fmt::format("two texts got {} {}", decoded->items, api_ == dialect::Api::kRerank ? "scores" : "vectors");
    } else if (api_ == dialect::Api::kEmbeddings && Vectors(call.body).size() == 2 &&
               Vectors(call.body)[0].size() != Vectors(call.body)[1].size()) {
      wrong = "the two vectors differ in dimension";
    }
    if (!wrong.empty()) {
      Fail(name, Severity::kDisqualifying, name + "_failed", wrong, {call.evidence});
      return;
    }
    const bool usage = decoded->usage && decoded->usage->prompt_known && decoded->usage->prompt_tokens > 0;
    Pass(name, fmt::format("2 {}, usage.prompt_tokens {}", api_ == dialect::Api::kRerank ? "scores" : "vectors",
                           usage ? std::to_string(decoded->usage->prompt_tokens) : "absent"),
         call.evidence);
  }

  // Embeddings by their `index` (empty when the body is not a list of vectors).
  static std::vector<std::vector<double>> Vectors(std::string_view body) {
    const std::optional<json> doc = ParseJson(body);
    std::vector<std::vector<double>> vectors;
    if (!doc || !doc->is_object() || !doc->contains("data") || !(*doc)["data"].is_array()) return {};
    const json& data = (*doc)["data"];
    vectors.resize(data.size());
    for (const json& item : data) {
      if (!item.is_object() || !item.contains("embedding") || !item["embedding"].is_array()) return {};
      const std::size_t index = item.value("index", std::size_t{0});
      if (index >= vectors.size()) return {};
      for (const json& x : item["embedding"]) {
        if (!x.is_number()) return {};
        vectors[index].push_back(x.get<double>());
      }
    }
    return vectors;
  }

  static double Cosine(const std::vector<double>& a, const std::vector<double>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      ab += a[i] * b[i];
      aa += a[i] * a[i];
      bb += b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
  }

  // A text's vector does not depend on the texts sent beside it (cosine >= kSameVector); a
  // rerank's results index each document once, and a document's score does not move with the
  // order of the others.
  void BatchConsistency() {
    static constexpr double kSameVector = 0.999;
    const std::string name = "batch_consistency";
    const std::string a = "The sea is calm tonight.", b = "A dog runs home across the field.";
    const ApiCall alone = Send(name + "_alone", api_, PoolingBody(model_, api_, {a}));
    const ApiCall together = Send(name, api_, PoolingBody(model_, api_, {b, a}));
    if (!alone.Success() || !together.Success()) {
      Unsupported(name, (alone.Success() ? together : alone).Describe(), together.evidence);
      return;
    }
    std::string wrong, detail;
    if (api_ == dialect::Api::kEmbeddings) {
      const std::vector<std::vector<double>> one = Vectors(alone.body), two = Vectors(together.body);
      if (one.size() != 1 || two.size() != 2) {
        wrong = "the answers are not lists of vectors by index";
      } else {
        const double cosine = Cosine(one[0], two[1]);
        detail = fmt::format("a text's vector alone and second of two: cosine {:.6f}", cosine);
        if (cosine < kSameVector) wrong = detail + fmt::format(" (below {})", kSameVector);
      }
    } else {
      const auto scores = [](std::string_view body) {
        std::map<std::int64_t, double> by_index;
        const std::optional<json> doc = ParseJson(body);
        if (!doc || !doc->is_object() || !doc->contains("results") || !(*doc)["results"].is_array()) return by_index;
        for (const json& r : (*doc)["results"]) {
          if (r.is_object() && r.contains("index") && r["index"].is_number_integer() && r.contains("relevance_score") &&
              r["relevance_score"].is_number()) {
            by_index[r["index"].get<std::int64_t>()] = r["relevance_score"].get<double>();
          }
        }
        return by_index;
      };
      const std::map<std::int64_t, double> one = scores(alone.body), two = scores(together.body);
      if (one.size() != 1 || !one.contains(0) || two.size() != 2 || !two.contains(0) || !two.contains(1)) {
        wrong = "the results do not index each document once";
      } else {
        detail = fmt::format("a document's score alone {:.6f}, second of two {:.6f}", one.at(0), two.at(1));
        if (std::abs(one.at(0) - two.at(1)) > 1e-3 * std::max(1.0, std::abs(one.at(0)))) wrong = detail;
      }
    }
    if (!wrong.empty()) {
      Fail(name, Severity::kWarning, "batch_inconsistent", wrong, {alone.evidence, together.evidence});
      return;
    }
    Pass(name, detail, together.evidence);
  }

  void UnknownModel() {
    const std::string name = "unknown_model";
    json body = Body(api_, "Say hello.", 4);
    body["model"] = "bakeoff-no-such-model";
    const ApiCall call = Send(name, api_, body);
    if (call.Success()) {
      Fail(name, Severity::kDisqualifying, "unknown_model_served",
           "a request for model \"bakeoff-no-such-model\" was answered (HTTP " +
               std::to_string(call.status) +
               "): a misspelt model name would be benchmarked as whatever the server serves",
           {call.evidence});
      return;
    }
    if (call.ClientError() && call.ErrorMessage()) {
      Pass(name, call.Describe(), call.evidence);
      return;
    }
    Fail(name, Severity::kWarning, "unknown_model_unclear_error",
         "expected a 4xx (404 or 400) with an error body; got " + call.Describe(), {call.evidence});
  }

  void OverContext() {
    static constexpr std::string_view kWords[] = {"river",  "stone",  "lantern", "harbor",
                                                  "meadow", "copper", "window",  "signal"};
    const std::string name = "over_context";
    const std::optional<std::uint64_t> limit = facts_.max_context_tokens;
    const std::uint64_t words =
        limit ? *limit + std::max<std::uint64_t>(*limit / 4, 256) : 2 * kAssumedContext;
    std::string prompt;
    prompt.reserve(words * 7);
    for (std::uint64_t i = 0; i < words; ++i) {
      if (i > 0) prompt += ' ';
      prompt += kWords[(i * 3 + i / 8) % 8];
    }
    const std::string limit_text =
        limit ? fmt::format("its declared context of {} tokens ({})", *limit,
                            facts_.max_context_source)
              : fmt::format("an assumed context of {} tokens (the server does not say)",
                            kAssumedContext);
    const ApiCall call = Send(name, api_, Body(api_, prompt, kCutAt), 4);
    const bool died = context_.candidate.launch_mode() && !context_.candidate.Running();
    if (call.Success()) {
      Result<dialect::CompletionResponse> decoded = dialect::DecodeResponse(api_, call.body);
      if (!decoded.ok() || !decoded->usage) {
        Fail(name, Severity::kDisqualifying, "over_context_truncated",
             fmt::format("a prompt of {} words, over {}, was answered with HTTP {} and no usage: "
                         "silent truncation cannot be ruled out",
                         words, limit_text, call.status),
             {call.evidence});
      } else if (decoded->usage->prompt_tokens < words) {
        Fail(name, Severity::kDisqualifying, "over_context_truncated",
             fmt::format("a prompt of {} words (at least {} tokens), over {}, was answered with "
                         "HTTP {} and usage.prompt_tokens {}: the prompt was cut silently and the "
                         "answer computed on what was left",
                         words, words, limit_text, call.status, decoded->usage->prompt_tokens),
             {call.evidence});
      } else if (limit) {
        Fail(name, Severity::kWarning, "over_context_accepted",
             fmt::format("a prompt of {} prompt tokens, over {}, was answered in full: the "
                         "declared limit is not the real one",
                         decoded->usage->prompt_tokens, limit_text),
             {call.evidence});
      } else {
        Pass(name,
             fmt::format("a prompt of {} tokens was answered in full: the context is at least "
                         "that long",
                         decoded->usage->prompt_tokens),
             call.evidence);
      }
    } else if (call.ClientError() && call.ErrorMessage()) {
      Pass(name, fmt::format("{} words, over {}: {}", words, limit_text, call.Describe()),
           call.evidence);
    } else {
      Fail(name, Severity::kWarning, "over_context_unclear_error",
           fmt::format("{} words, over {}: expected a 4xx with an error body; got {}", words,
                       limit_text, call.Describe()),
           {call.evidence});
    }
    if (died) {
      result_.Find(Severity::kDisqualifying, "died",
                   "the candidate died on a prompt over its context (" +
                       context_.candidate.process()->exit_status()->Describe() + ")",
                   {context_.candidate.process()->stderr_path().string(), call.evidence});
    }
  }

  ProbeContext& context_;
  ProbeResult& result_;
  dialect::Api api_;
  std::string model_;
  target::TargetFacts facts_;
  std::optional<std::string> greedy_answer_;
};

}  // namespace

void ProbeCompatibility(ProbeContext& context, ProbeResult& result) {
  Compatibility(context, result).Run();
}

}  // namespace bakeoff::qualify
