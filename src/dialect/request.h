// dialect/request.h
//
// Owns: what a generation request is, independent of any engine's wire format, and what its
// answer says once decoded: the API routes bakeoff can speak (the OpenAI ones and the engines'
// native ones), what each route can do (stream, force an output length, report usage), the
// request, the decoded stream chunk and the decoded whole response. The codecs are in
// dialect/openai.h and dialect/native.h; dialect/codec.h picks one by route.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bakeoff::dialect {

// A route and its wire format (../shared/reference/engine-interfaces.md, sections in brackets).
enum class Api {
  kCompletions,     // OpenAI /v1/completions
  kChat,            // OpenAI /v1/chat/completions
  kOllamaGenerate,  // Ollama /api/generate, NDJSON stream [6.1-6.4]
  kOllamaChat,      // Ollama /api/chat, NDJSON stream [6.1-6.4]
  kTgiGenerate,     // TGI /generate and /generate_stream (SSE, no [DONE]) [7.1-7.5]
  kTritonGenerate,  // Triton /v2/models/{m}/generate and /generate_stream (SSE, ends at close) [4.2]
  kKserveInfer,     // Open Inference Protocol (KServe V2) /v2/models/{m}/infer, whole answers [4.1, 9.1]
  kEmbeddings,      // OpenAI /v1/embeddings: `input` texts, whole answers (dialect/pooling.h)
  kRerank,          // /v1/rerank (vLLM, TEI, Infinity, Jina shape): `query` and `documents`
};

// "chat", "completions", "ollama-generate", "ollama-chat", "tgi-generate", "triton-generate",
// "kserve-infer", "embeddings", "rerank": what --api takes.
const char* ApiName(Api api);
std::optional<Api> ParseApiName(std::string_view name);
std::string ApiNames();  // "chat, completions, ..." for messages

// The OpenAI generation routes (chat, completions).
bool IsOpenAiApi(Api api);
// Whether the route generates text (embeddings and rerank answer with vectors and scores).
bool ApiGenerates(Api api);
// Whether the route takes messages (roles); the others take one text.
bool ApiTakesMessages(Api api);
// Whether answers can stream on this route (the V2 infer route answers whole).
bool ApiStreams(Api api);
// How a stream is framed: SSE `data:` events, or newline-delimited JSON (Ollama).
enum class Framing { kSse, kNdjson };
Framing StreamFraming(Api api);
// Whether a complete stream says so (OpenAI [DONE] or a finish_reason; Ollama's "done": true;
// TGI's final event with details). Triton's generate_stream has no such marker: it ends when the
// server closes the body, so only a clean end of the HTTP body tells a complete answer.
bool StreamHasEndMarker(Api api);
// Whether the route has request fields that make every answer max_tokens long (ignore_eos,
// min_tokens). None of the native routes has them (Ollama: no ignore_eos or min_tokens [6.4];
// TGI: ignore_eos hard-coded false [7.5]; Triton generate and V2 infer: model-specific inputs).
bool ApiCanForceLength(Api api);
// Whether the route reports the prompt's token count (Ollama's prompt_eval_count, OpenAI usage);
// TGI's stream reports generated tokens only, Triton and V2 infer report neither.
bool ApiReportsPromptTokens(Api api);
bool ApiReportsOutputTokens(Api api);

// The path of a request for `model` on `api`: native routes name the model or the streaming
// variant in the path.
std::string RequestPath(Api api, std::string_view model, bool stream);
// OpenAI routes only: "/v1/completions" or "/v1/chat/completions". REQUIRES: IsOpenAiApi(api).
const char* ApiPath(Api api);

// Where an engine takes a regex constraint [1.5, 2.5, 7.5]: vLLM's `structured_outputs.regex`
// (v0.12 on), SGLang's top-level `regex`, TGI's `response_format` {"type": "regex", "value"}.
enum class RegexField { kStructuredOutputs, kTopLevel, kResponseFormatValue };

// A constraint on the answer's form.
struct OutputConstraint {
  enum class Kind { kJsonSchema, kChoice, kRegex, kTool };
  Kind kind = Kind::kJsonSchema;
  // kJsonSchema, kTool: a JSON schema (the tool's parameters); kChoice: a JSON array of strings;
  // kRegex: the pattern.
  std::string spec;
  RegexField regex_field = RegexField::kStructuredOutputs;  // kRegex: the engine's field (its adapter's)
};

struct GenerationRequest {
  Api api = Api::kChat;
  std::string model;
  std::string prompt;  // completions: the prompt; chat: one user message
  std::string system;  // chat only: optional system message ("" = none)
  // Chat only: earlier turns of a conversation, (role, content) in order, sent between the system
  // message and `prompt` (the new user turn).
  std::vector<std::pair<std::string, std::string>> history;
  std::uint32_t max_tokens = 128;
  bool stream = true;
  bool include_usage = true;       // stream_options.include_usage (only sent when stream)
  bool continuous_usage = false;   // stream_options.continuous_usage_stats (vLLM): usage per chunk
  bool ignore_eos = false;         // vLLM/SGLang extension; sent only when true
  std::optional<std::uint32_t> min_tokens;
  // The name min_tokens is sent under: "min_tokens" (vLLM, SGLang, TensorRT-LLM, Triton) or
  // "min_new_tokens" (LMDeploy); the engine adapter (target/adapters.h) says which.
  const char* min_tokens_field = "min_tokens";
  std::optional<double> temperature;
  std::optional<std::uint64_t> seed;
  // Structured output (OpenAI routes): the answer is constrained to this (dialect/openai.h says
  // how each kind is sent).
  std::optional<OutputConstraint> constraint;
  // Embeddings: the texts (`prompt` unused); rerank: the documents, `prompt` the query.
  std::vector<std::string> inputs;
};

struct Usage {
  std::uint64_t prompt_tokens = 0;  // 0 with prompt_known false: the answer did not say
  std::uint64_t completion_tokens = 0;
  std::optional<std::uint64_t> cached_tokens;  // prompt_tokens_details.cached_tokens
  bool prompt_known = true;  // false: only the output was counted (TGI's details)
  bool operator==(const Usage&) const = default;
};

// What one stream payload (an SSE `data:` or an NDJSON line) said. Views point into a parse
// buffer shared by every decoder on the calling thread and are valid until the next Decode call
// on that thread. Only the choice with `index` 0 (or the first choice without an `index`) is
// read; bakeoff never asks for n > 1, and other choices' text is ignored.
struct StreamChunk {
  bool done = false;               // the stream says it is complete: OpenAI's literal [DONE], Ollama's
                                   // "done": true, TGI's final event (with what else it carries)
  bool has_choices = false;        // it carried a generation step (OpenAI: a non-empty choices array)
  std::string_view content;        // generated text in this chunk (text or delta.content)
  std::string_view reasoning;      // delta.reasoning_content or delta.reasoning
  std::string_view tool_arguments;  // delta.tool_calls[0].function.arguments: a tool call's text
  std::uint32_t token_count = 0;   // tokens this chunk carries when the server says so; 0 = unknown.
                                   // From logprobs entries (chat `logprobs.content`, completions
                                   // `logprobs.tokens`) when present, else from continuous usage:
                                   // the rise of usage.completion_tokens over the previous chunk
                                   // with usage. A first usage seen on a chunk that also finishes
                                   // (SGLang/llama.cpp final usage) or has no choices is a total,
                                   // not a per-chunk count, and gives 0. TGI: 1 per token event.
  std::optional<Usage> usage;
  std::string_view finish_reason;  // "" when absent or null; native reasons in OpenAI's words
  std::optional<std::string> error;  // message of an {"error": ...} object in the stream
                                     // (at most 1024 bytes, longer messages are cut)
  bool invalid_utf8 = false;  // the payload had bytes that are not UTF-8; they read as '?'
};

// A non-streaming response body, decoded.
struct CompletionResponse {
  std::string content;
  std::string reasoning;
  std::string tool_arguments;  // message.tool_calls[0].function.arguments
  std::string finish_reason;
  std::optional<Usage> usage;
  bool invalid_utf8 = false;  // the body had bytes that are not UTF-8; they read as '?'
  std::uint64_t items = 0;    // embeddings: vectors returned; rerank: scored documents
};

}  // namespace bakeoff::dialect
