// emulate/openai_api.h
//
// Owns: the emulated engine's OpenAI-compatible surface, independent of transport: parsing and
// validating /v1/completions, /v1/chat/completions and /tokenize request bodies, and rendering
// every response body and SSE event in vLLM's shapes (../shared/reference/engine-interfaces.md
// 1.1-1.7). Streaming events are rendered from per-request prerendered templates: only the token
// text and the finish reason vary, so rendering an event is three appends and no JSON library.
// Does not own: sockets, HTTP framing or timing (emulate/server.h), tokenization rules
// (emulate/tokenizer.h).
//
// Prompt tokens: completions tokenize the prompt text with the emulator's tokenizer (a token-id
// array is used as is, each id taken modulo kVocabSize); chat tokenizes all message contents
// (string contents and the `text` of content parts) joined with "\n", so the count is the sum
// over messages (no chat template is applied and the role adds nothing). The ids feed the engine
// model's prefix cache (emulate/kv_cache.h).
//
// Thread-safety: pure functions; a ResponseRenderer is immutable after construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "emulate/output_text.h"
#include "emulate/scheduler.h"

namespace bakeoff::emulate {

enum class Endpoint : std::uint8_t { kCompletions, kChat };

// The wire format a request came in and is answered in: OpenAI (vLLM's shapes), or an engine's
// native route (emulate/native_api.h).
enum class Wire : std::uint8_t {
  kOpenAi, kOllamaGenerate, kOllamaChat, kTgi, kTriton, kKserve,
  kEmbeddings, kRerank,  // /v1/embeddings and /v1/rerank (emulate/pooling_api.h)
};

// An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string type = "BadRequestError";
  std::string message;
  std::string param;  // empty renders as null
};

ApiError BadRequest(std::string message, std::string param = {});
ApiError NotFound(std::string message, std::string param = {});

// {"error":{"message":...,"type":...,"param":...|null,"code":status}}
std::string RenderError(const ApiError& error);

// What the server is serving; requests are validated against it.
struct ServedModel {
  std::string name;                   // the base model's name
  std::int64_t max_model_len = 32768;
  // A prompt that does not leave room for max_tokens (16 when absent) is left-truncated to
  // max_model_len - max_tokens tokens (at least 1) instead of a 400 (--fault-truncate-prompts).
  bool truncate_prompts = false;
  // LoRA adapters served beside it (vLLM --lora-modules): a request naming one runs with it,
  // GenerationSpec::lora its 1-based index; /v1/models lists them with `root` = the base.
  std::vector<std::string> lora_adapters = {};
};

// The tool call a request answers with (tools + tool_choice decided it at parse time).
struct ToolCallSpec {
  std::string name;
  std::string arguments;  // a JSON text valid for the tool's parameters schema
};

// A validated generation request.
struct GenerationSpec {
  Endpoint endpoint = Endpoint::kChat;
  Wire wire = Wire::kOpenAi;
  std::uint32_t lora = 0;          // the LoRA adapter named by `model` (1-based), 0 = the base
  std::int64_t inputs = 1;         // embeddings: texts; rerank: documents (their tokens are `prompt`)
  std::vector<TokenId> prompt;     // the prompt's token ids (see above); may be empty in tests
  // Pooling: each input's own hash (a rerank's query and document), so that a text's vector or
  // score does not depend on the texts sent beside it.
  std::vector<std::uint64_t> input_seeds;
  std::int64_t prompt_tokens = 0;  // prompt.size() once parsed
  std::int64_t max_tokens = 16;
  std::int64_t min_tokens = 0;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::uint64_t seed = 0;      // selects the output words (tokenizer.h OutputPiece)
  std::int64_t n = 1;          // choices, in [1, kMaxChoices]
  std::vector<std::string> stop;  // stop strings (non-empty)
  // Log-probabilities: nullopt = none; otherwise the number of top alternatives per token
  // (chat: logprobs true + top_logprobs; completions: logprobs k), in [0, kMaxLogprobs].
  std::optional<std::int64_t> logprobs;
  // response_format json_object / json_schema: the JSON text the output is (output_text.h
  // MinimalJsonInstance; json_object gives {"text": ...}).
  std::optional<std::string> json_text;
  // structured_outputs.choice (vLLM): the choice the output is.
  std::optional<std::string> choice_text;
  // tools + tool_choice chose to call a tool (chat only).
  std::optional<ToolCallSpec> tool_call;
  // The text an --answers file is matched against: the completions prompt string, or the chat's
  // last user message (its string content, or its text parts joined with "\n").
  std::optional<std::string> answer_key;
};

inline constexpr std::int64_t kMaxChoices = 128;
inline constexpr std::int64_t kMaxLogprobs = 20;

// Parses and validates a request body. Errors: invalid JSON, wrong field types, missing
// prompt/messages, an empty prompt (no tokens), a negative token id, n outside [1, kMaxChoices],
// stop not a string or list of strings, logprobs / top_logprobs outside [0, kMaxLogprobs] (chat:
// top_logprobs without logprobs), a response_format other than text / json_object / json_schema
// (with an object `json_schema.schema`), malformed tools or tool_choice (a named function that
// is not among the tools, tool_choice without tools), stream_options without stream,
// max_tokens < 1, min_tokens > max_tokens, prompt or prompt + max_tokens over max_model_len
// (unless served.truncate_prompts) -> 400; a `model` other than served.name -> 404 ("The model
// `X` does not exist."). An absent `model` means the served one.
// Default max_tokens: 16 for completions, max_model_len - prompt_tokens for chat (as vLLM).
// Tools (chat): tool_choice "none" answers text; "required" calls the first tool; a named
// function calls it; "auto" (the default with tools) calls the first tool whose name the last
// user message contains, else answers text. The arguments are the minimal instance of the
// tool's `parameters` schema ({} without one).
std::variant<GenerationSpec, ApiError> ParseGenerationRequest(Endpoint endpoint,
                                                              std::string_view body,
                                                              const ServedModel& served);

// POST /tokenize: request {"model"?, "prompt"} or {"model"?, "messages"}; on success the
// response body {"count": N, "max_model_len": M, "tokens": [ids...]}.
std::variant<std::string, ApiError> RenderTokenizeResponse(std::string_view body,
                                                           const ServedModel& served);

// GET /v1/models: one card with owned_by "bakeoff-emulated" and max_model_len.
std::string RenderModelsResponse(const ServedModel& served, std::int64_t created_unix_s);

// How far a stream has rendered one choice (ResponseRenderer::AppendProgress).
struct ChoiceProgress {
  std::int64_t sent = 0;        // tokens rendered into events
  std::int64_t sent_bytes = 0;  // their text's length (completions logprobs text_offset)
  bool done = false;            // its finishing event was rendered
};

// Renders one request's responses. The id is "chatcmpl-<hex>" or "cmpl-<hex>" from
// request_number. The request has spec.n choices; choice c's output is choices[c]
// (output_text.h). Choice c ends after end_tokens(c) tokens with end_reason(c): its natural end
// when that comes within max_tokens (an answer, a JSON text or a tool call ends "stop" or
// "tool_calls", a stop string "stop"), else max_tokens with "length". The engine model runs one
// sequence for all choices, engine_tokens() long; an earlier engine finish (EOS) ends every
// unfinished choice with that reason.
class ResponseRenderer {
 public:
  // One choice per spec.n, each the word stream of spec.seed + its index.
  ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                   std::uint64_t request_number, std::int64_t created_unix_s);
  // REQUIRES: choices.size() == spec.n.
  ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                   std::uint64_t request_number, std::int64_t created_unix_s,
                   std::vector<ChoiceText> choices);

  std::int64_t num_choices() const { return static_cast<std::int64_t>(choices_.size()); }
  std::int64_t end_tokens(std::int64_t choice) const;
  FinishReason end_reason(std::int64_t choice) const;
  // The tokens the engine model generates: the longest choice.
  std::int64_t engine_tokens() const;
  // usage.completion_tokens after the engine produced `emitted` tokens: every choice's tokens.
  std::int64_t CompletionTokens(std::int64_t emitted) const;

  // Chat only: for each choice, `data: {... "delta":{"role":"assistant","content":""} ...}\n\n`;
  // no-op for completions.
  void AppendRoleEvent(std::string& out) const;
  // One SSE event carrying output token `index` of choice 0; `finish` set on the last token.
  void AppendTokenEvent(std::string& out, std::int64_t index,
                        std::optional<FinishReason> finish) const;
  // One SSE event carrying output tokens [first, first + count) of choice 0 as one text; `finish`
  // set when the last of them is the choice's last token.
  void AppendTokensEvent(std::string& out, std::int64_t first, std::int64_t count,
                         std::optional<FinishReason> finish) const;
  // The same for any choice. A tool-call choice's first event is preceded by one naming the
  // function (id, type, name, arguments ""). With logprobs, the event carries its tokens'.
  void AppendChoiceEvent(std::string& out, std::int64_t choice, std::int64_t first,
                         std::int64_t count, std::optional<FinishReason> finish,
                         std::int64_t text_offset) const;
  // Streams what the engine produced: after `emitted` engine tokens (and `engine_finish` when the
  // engine ended the sequence), renders, for each unfinished choice, its new tokens as one event
  // when they number at least `per_event`, when `flush`, or when the choice ends. Returns true
  // when every choice has ended. REQUIRES: progress.size() == num_choices().
  bool AppendProgress(std::string& out, std::vector<ChoiceProgress>& progress, std::int64_t emitted,
                      std::optional<FinishReason> engine_finish, std::int64_t per_event,
                      bool flush) const;
  // `data: {... "choices":[],"usage":{...}}\n\n`, for stream_options.include_usage (Ollama: its
  // last line, "done": true with done_reason and the counts; other native wires: nothing). With
  // `cached_tokens`, usage also carries "prompt_tokens_details":{"cached_tokens":N} (vLLM with
  // prefix caching and prompt-token details on).
  void AppendUsageEvent(std::string& out, std::int64_t completion_tokens,
                        std::optional<std::int64_t> cached_tokens = std::nullopt) const;
  // `data: [DONE]\n\n`.
  static void AppendDone(std::string& out);
  // `data: {"error":{...}}\n\n`: an error after the 200 header (vLLM's shape, RenderError).
  static void AppendErrorEvent(std::string& out, const ApiError& error);
  // The stream's terminator in this request's wire: [DONE] for OpenAI; nothing for the native
  // wires (their last message says it, or the body's end does).
  void AppendStreamEnd(std::string& out) const;
  // An error after the 200 header in this request's wire: OpenAI's event, Ollama's
  // {"error": ...} line, TGI's and Triton's {"error": ...} event.
  void AppendStreamError(std::string& out, const ApiError& error) const;
  // The non-streaming body after the engine produced `emitted` tokens and finished with
  // `engine_finish`: every choice's text (or tool call), finish_reason and logprobs, and usage
  // over all choices (with prompt_tokens_details as in AppendUsageEvent).
  std::string RenderFullBody(std::int64_t emitted, FinishReason engine_finish,
                             std::optional<std::int64_t> cached_tokens = std::nullopt) const;

  const GenerationSpec& spec() const { return spec_; }

 private:
  // The finish reason of `choice` once the engine produced `emitted` tokens, if it has ended.
  std::optional<FinishReason> ChoiceFinish(std::int64_t choice, std::int64_t emitted,
                                           std::optional<FinishReason> engine_finish) const;
  void AppendLogprobs(std::string& out, std::int64_t choice, std::int64_t first, std::int64_t count,
                      std::int64_t text_offset) const;
  std::string ToolCallId(std::int64_t choice) const;
  // A native wire's events for output tokens [first, first + count) of choice 0 (native_api.h).
  void AppendNativeEvent(std::string& out, std::int64_t first, std::int64_t count,
                         std::optional<FinishReason> finish) const;
  // The escaped text of choice 0's first `tokens` tokens.
  std::string JsonText(std::int64_t tokens) const;
  // A native wire's whole answer.
  std::string RenderNativeBody(std::int64_t emitted, FinishReason engine_finish) const;

  GenerationSpec spec_;
  std::vector<ChoiceText> choices_;
  std::string id_;          // "chatcmpl-..." / "cmpl-..."
  std::string model_json_;  // quoted, escaped
  std::int64_t created_ = 0;
  std::string head_;        // `data: {"id":...,"model":...,"choices":` shared by all events
                            // (native wires: the fields every line or event starts with)
  // Per choice: head_ + `[{"index":C,"delta":{"content":"` (or "text", or tool arguments).
  std::vector<std::string> token_prefix_;
  std::vector<std::int64_t> end_tokens_;   // per choice, end_tokens()
  std::vector<FinishReason> end_reasons_;  // per choice, end_reason()
};

const char* FinishReasonName(FinishReason reason);

}  // namespace bakeoff::emulate
