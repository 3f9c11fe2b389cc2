// emulate/openai_render.cc: ResponseRenderer's prerendered templates and the OpenAI wire's
// response bodies and SSE events in vLLM's shapes (choices, tool calls, logprobs, usage, the
// stream's end), and the /v1/models card (contract in openai_api.h). The native wires' shapes are
// openai_render_native.cc's, the error events openai_errors.cc's.
#include "emulate/openai_api.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulate/openai_render_internal.h"

namespace bakeoff::emulate {

namespace {

using nlohmann::json;

std::string Quote(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<ChoiceText> WordChoices(const GenerationSpec& spec) {
  std::vector<ChoiceText> choices;
  for (std::int64_t c = 0; c < spec.n; ++c) {
    choices.push_back(ChoiceText::Words(spec.seed + static_cast<std::uint64_t>(c)));
  }
  return choices;
}

// `"usage":{...}` in vLLM's field order.
void AppendUsage(std::string& out, std::int64_t prompt_tokens, std::int64_t completion_tokens,
                 std::optional<std::int64_t> cached_tokens) {
  fmt::format_to(std::back_inserter(out),
                 R"("usage":{{"prompt_tokens":{},"total_tokens":{},"completion_tokens":{})",
                 prompt_tokens, prompt_tokens + completion_tokens, completion_tokens);
  if (cached_tokens) {
    fmt::format_to(std::back_inserter(out), R"(,"prompt_tokens_details":{{"cached_tokens":{}}})",
                   *cached_tokens);
  }
  out += '}';
}

// `[b1,b2,...]`: a token's UTF-8 bytes (OpenAI's `bytes`).
void AppendBytes(std::string& out, std::string_view piece) {
  out += '[';
  for (std::size_t i = 0; i < piece.size(); ++i) {
    if (i > 0) out += ',';
    fmt::format_to(std::back_inserter(out), "{}", static_cast<unsigned char>(piece[i]));
  }
  out += ']';
}

// `{"token":"..","logprob":x,"bytes":[..]` (left open for top_logprobs).
void AppendChatLogprobHead(std::string& out, std::string_view piece, double logprob) {
  out += R"({"token":")";
  out += JsonEscape(piece);
  fmt::format_to(std::back_inserter(out), R"(","logprob":{},"bytes":)", logprob);
  AppendBytes(out, piece);
}

}  // namespace

std::string RenderModelsResponse(const ServedModel& served, std::int64_t created_unix_s) {
  json card = {{"id", served.name},
               {"object", "model"},
               {"created", created_unix_s},
               {"owned_by", "bakeoff-emulated"},
               {"root", served.name},
               {"parent", nullptr},
               {"max_model_len", served.max_model_len},
               {"permission", json::array()}};
  json body = {{"object", "list"}, {"data", json::array({card})}};
  for (const std::string& adapter : served.lora_adapters) {
    json lora = card;
    lora["id"] = adapter;
    lora["parent"] = served.name;
    body["data"].push_back(std::move(lora));
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kLength:
      break;
  }
  return "length";
}

// Event layout (vLLM, engine-interfaces.md 1.2):
//   chat:        data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,
//                 "choices":[{"index":0,"delta":{"content":"<word> "},"logprobs":null,
//                 "finish_reason":null}]}
//   completions: data: {"id":..,"object":"text_completion","created":..,"model":..,
//                 "choices":[{"index":0,"text":"<word> ","logprobs":null,"finish_reason":null,
//                 "stop_reason":null}]}
//   tool calls:  "delta":{"tool_calls":[{"index":0,"function":{"arguments":"<piece>"}}]}, the
//                first one preceded by an event with id, type and function name.
ResponseRenderer::ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                                   std::uint64_t request_number, std::int64_t created_unix_s)
    : ResponseRenderer(spec, served, request_number, created_unix_s, WordChoices(spec)) {}

ResponseRenderer::ResponseRenderer(const GenerationSpec& spec, const ServedModel& served,
                                   std::uint64_t request_number, std::int64_t created_unix_s,
                                   std::vector<ChoiceText> choices)
    : spec_(spec),
      choices_(std::move(choices)),
      model_json_(Quote(served.name)),
      created_(created_unix_s) {
  const bool chat = spec.endpoint == Endpoint::kChat;
  id_ = fmt::format("{}{:016x}", chat ? "chatcmpl-" : "cmpl-", request_number);
  for (const ChoiceText& text : choices_) {
    const auto natural = text.natural_tokens();
    const bool natural_end = natural && *natural <= spec_.max_tokens;
    end_tokens_.push_back(natural_end ? *natural : spec_.max_tokens);
    end_reasons_.push_back(natural_end ? text.natural_finish() : FinishReason::kLength);
  }
  if (spec_.wire != Wire::kOpenAi) {
    head_ = render_internal::NativeHead(spec_.wire, model_json_, created_);
    return;
  }
  head_ = fmt::format(R"(data: {{"id":"{}","object":"{}","created":{},"model":{},"choices":)", id_,
                      chat ? "chat.completion.chunk" : "text_completion", created_, model_json_);
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    if (!chat) {
      token_prefix_.push_back(head_ + fmt::format(R"([{{"index":{},"text":")", c));
    } else if (spec_.tool_call) {
      token_prefix_.push_back(
          head_ +
          fmt::format(
              R"([{{"index":{},"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":")",
              c));
    } else {
      token_prefix_.push_back(head_ + fmt::format(R"([{{"index":{},"delta":{{"content":")", c));
    }
  }
}

std::int64_t ResponseRenderer::end_tokens(std::int64_t choice) const {
  return end_tokens_[static_cast<std::size_t>(choice)];
}

FinishReason ResponseRenderer::end_reason(std::int64_t choice) const {
  return end_reasons_[static_cast<std::size_t>(choice)];
}

std::int64_t ResponseRenderer::engine_tokens() const {
  std::int64_t longest = 1;
  for (std::int64_t c = 0; c < num_choices(); ++c) longest = std::max(longest, end_tokens(c));
  return longest;
}

std::int64_t ResponseRenderer::CompletionTokens(std::int64_t emitted) const {
  std::int64_t total = 0;
  for (std::int64_t c = 0; c < num_choices(); ++c) total += std::min(emitted, end_tokens(c));
  return total;
}

std::optional<FinishReason> ResponseRenderer::ChoiceFinish(
    std::int64_t choice, std::int64_t emitted, std::optional<FinishReason> engine_finish) const {
  if (emitted >= end_tokens(choice)) return end_reason(choice);
  return engine_finish;
}

std::string ResponseRenderer::ToolCallId(std::int64_t choice) const {
  return fmt::format("chatcmpl-tool-{}-{}", id_.substr(id_.find('-') + 1), choice);
}

void ResponseRenderer::AppendRoleEvent(std::string& out) const {
  if (spec_.endpoint != Endpoint::kChat || spec_.wire != Wire::kOpenAi) return;
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    out += head_;
    fmt::format_to(
        std::back_inserter(out),
        R"([{{"index":{},"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}})",
        c);
    out += "\n\n";
  }
}

void ResponseRenderer::AppendTokenEvent(std::string& out, std::int64_t index,
                                        std::optional<FinishReason> finish) const {
  AppendTokensEvent(out, index, 1, finish);
}

void ResponseRenderer::AppendTokensEvent(std::string& out, std::int64_t first, std::int64_t count,
                                         std::optional<FinishReason> finish) const {
  std::int64_t offset = 0;
  if (spec_.logprobs && spec_.endpoint == Endpoint::kCompletions) {
    for (std::int64_t i = 0; i < first; ++i) {
      offset += static_cast<std::int64_t>(choices_[0].Piece(i).size());
    }
  }
  AppendChoiceEvent(out, 0, first, count, finish, offset);
}

// Chat: {"content":[{"token","logprob","bytes","top_logprobs":[...]}...]}; completions:
// {"text_offset":[..],"token_logprobs":[..],"tokens":[..],"top_logprobs":[{token: logprob}..]}.
// The sampled token is the most likely one; its alternatives are other words.
void ResponseRenderer::AppendLogprobs(std::string& out, std::int64_t choice, std::int64_t first,
                                      std::int64_t count, std::int64_t text_offset) const {
  const ChoiceText& text = choices_[static_cast<std::size_t>(choice)];
  const std::uint64_t seed = spec_.seed + static_cast<std::uint64_t>(choice);
  const std::int64_t k = *spec_.logprobs;
  if (spec_.endpoint == Endpoint::kChat) {
    out += R"({"content":[)";
    for (std::int64_t i = first; i < first + count; ++i) {
      if (i > first) out += ',';
      const std::string_view piece = text.Piece(i);
      AppendChatLogprobHead(out, piece, TokenLogprob(seed, i));
      out += R"(,"top_logprobs":[)";
      for (std::int64_t j = 0; j < k; ++j) {
        if (j > 0) out += ',';
        if (j == 0) {
          AppendChatLogprobHead(out, piece, TokenLogprob(seed, i));
        } else {
          AppendChatLogprobHead(out, AlternativePiece(piece, seed, i, j),
                                AlternativeLogprob(seed, i, j));
        }
        out += '}';
      }
      out += "]}";
    }
    out += "]}";
    return;
  }
  std::string offsets, values, tokens, tops;
  std::int64_t offset = text_offset;
  for (std::int64_t i = first; i < first + count; ++i) {
    const char* sep = i > first ? "," : "";
    const std::string_view piece = text.Piece(i);
    fmt::format_to(std::back_inserter(offsets), "{}{}", sep, offset);
    fmt::format_to(std::back_inserter(values), "{}{}", sep, TokenLogprob(seed, i));
    fmt::format_to(std::back_inserter(tokens), "{}\"{}\"", sep, text.JsonPiece(i));
    fmt::format_to(std::back_inserter(tops), "{}{{\"{}\":{}", sep, text.JsonPiece(i),
                   TokenLogprob(seed, i));
    for (std::int64_t j = 1; j < k; ++j) {
      fmt::format_to(std::back_inserter(tops), ",\"{}\":{}",
                     JsonEscape(AlternativePiece(piece, seed, i, j)),
                     AlternativeLogprob(seed, i, j));
    }
    tops += '}';
    offset += static_cast<std::int64_t>(piece.size());
  }
  fmt::format_to(
      std::back_inserter(out),
      R"({{"text_offset":[{}],"token_logprobs":[{}],"tokens":[{}],"top_logprobs":[{}]}})", offsets,
      values, tokens, tops);
}

void ResponseRenderer::AppendChoiceEvent(std::string& out, std::int64_t choice, std::int64_t first,
                                         std::int64_t count, std::optional<FinishReason> finish,
                                         std::int64_t text_offset) const {
  static constexpr std::string_view kChatSuffix[3] = {
      "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
      "\"},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
      "\"},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n"};
  static constexpr std::string_view kTextSuffix[3] = {
      "\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}\n\n",
      "\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n",
      "\",\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n"};
  if (spec_.wire != Wire::kOpenAi) return AppendNativeEvent(out, first, count, finish);
  const bool chat = spec_.endpoint == Endpoint::kChat;
  const ChoiceText& text = choices_[static_cast<std::size_t>(choice)];
  if (spec_.tool_call && chat && first == 0) {
    out += head_;
    fmt::format_to(
        std::back_inserter(out),
        R"([{{"index":{},"delta":{{"tool_calls":[{{"index":0,"id":"{}","type":"function","function":{{"name":"{}","arguments":""}}}}]}},"logprobs":null,"finish_reason":null}}]}})",
        choice, ToolCallId(choice), JsonEscape(spec_.tool_call->name));
    out += "\n\n";
  }
  out += token_prefix_[static_cast<std::size_t>(choice)];
  for (std::int64_t i = first; i < first + count; ++i) out += text.JsonPiece(i);
  if (!spec_.logprobs && !spec_.tool_call && (!finish || *finish != FinishReason::kToolCalls)) {
    const int which = !finish ? 0 : (*finish == FinishReason::kLength ? 1 : 2);
    out += chat ? kChatSuffix[which] : kTextSuffix[which];
    return;
  }
  out += chat ? (spec_.tool_call ? "\"}}]}," : "\"},") : "\",";
  out += "\"logprobs\":";
  if (spec_.logprobs && count > 0) {
    AppendLogprobs(out, choice, first, count, text_offset);
  } else {
    out += "null";
  }
  out += ",\"finish_reason\":";
  if (finish) {
    fmt::format_to(std::back_inserter(out), "\"{}\"", FinishReasonName(*finish));
  } else {
    out += "null";
  }
  out += chat ? "}]}\n\n" : ",\"stop_reason\":null}]}\n\n";
}

bool ResponseRenderer::AppendProgress(std::string& out, std::vector<ChoiceProgress>& progress,
                                      std::int64_t emitted,
                                      std::optional<FinishReason> engine_finish,
                                      std::int64_t per_event, bool flush) const {
  bool all_done = true;
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    ChoiceProgress& p = progress[static_cast<std::size_t>(c)];
    if (p.done) continue;
    const std::int64_t available = std::min(emitted, end_tokens(c));
    const std::optional<FinishReason> finish = ChoiceFinish(c, emitted, engine_finish);
    const std::int64_t fresh = available - p.sent;
    if (finish || (fresh > 0 && (flush || fresh >= per_event))) {
      AppendChoiceEvent(out, c, p.sent, fresh, finish, p.sent_bytes);
      if (spec_.logprobs && spec_.endpoint == Endpoint::kCompletions) {
        const ChoiceText& text = choices_[static_cast<std::size_t>(c)];
        for (std::int64_t i = p.sent; i < available; ++i) {
          p.sent_bytes += static_cast<std::int64_t>(text.Piece(i).size());
        }
      }
      p.sent = available;
      p.done = finish.has_value();
    }
    all_done = all_done && p.done;
  }
  return all_done;
}

void ResponseRenderer::AppendUsageEvent(std::string& out, std::int64_t completion_tokens,
                                        std::optional<std::int64_t> cached_tokens) const {
  if (spec_.wire == Wire::kOllamaGenerate || spec_.wire == Wire::kOllamaChat) {
    // The counts close the stream; an answer shorter than its end came from an EOS draw.
    const FinishReason finish = completion_tokens >= end_tokens(0) ? end_reason(0) : FinishReason::kStop;
    out += head_;
    out += spec_.wire == Wire::kOllamaChat ? R"("message":{"role":"assistant","content":""},)" : R"("response":"",)";
    fmt::format_to(std::back_inserter(out),
                   R"("done":true,"done_reason":"{}","prompt_eval_count":{},"eval_count":{}}})" "\n",
                   FinishReasonName(finish), spec_.prompt_tokens, completion_tokens);
    return;
  }
  if (spec_.wire != Wire::kOpenAi) return;
  out += head_;
  out += "[],";
  AppendUsage(out, spec_.prompt_tokens, completion_tokens, cached_tokens);
  out += "}\n\n";
}

void ResponseRenderer::AppendDone(std::string& out) { out += "data: [DONE]\n\n"; }

void ResponseRenderer::AppendStreamEnd(std::string& out) const {
  if (spec_.wire == Wire::kOpenAi) AppendDone(out);
}

std::string ResponseRenderer::RenderFullBody(std::int64_t emitted, FinishReason engine_finish,
                                             std::optional<std::int64_t> cached_tokens) const {
  if (spec_.wire != Wire::kOpenAi) return RenderNativeBody(emitted, engine_finish);
  const bool chat = spec_.endpoint == Endpoint::kChat;
  std::string body = fmt::format(R"({{"id":"{}","object":"{}","created":{},"model":{},"choices":[)",
                                 id_, chat ? "chat.completion" : "text_completion", created_,
                                 model_json_);
  for (std::int64_t c = 0; c < num_choices(); ++c) {
    const ChoiceText& choice = choices_[static_cast<std::size_t>(c)];
    const std::int64_t tokens = std::min(emitted, end_tokens(c));
    const FinishReason finish = ChoiceFinish(c, emitted, engine_finish).value_or(engine_finish);
    std::string text;
    for (std::int64_t i = 0; i < tokens; ++i) text += choice.JsonPiece(i);
    if (c > 0) body += ',';
    if (chat && spec_.tool_call) {
      fmt::format_to(
          std::back_inserter(body),
          R"({{"index":{},"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"{}","type":"function","function":{{"name":"{}","arguments":"{}"}}}}]}})",
          c, ToolCallId(c), JsonEscape(spec_.tool_call->name), text);
    } else if (chat) {
      fmt::format_to(std::back_inserter(body),
                     R"({{"index":{},"message":{{"role":"assistant","content":"{}"}})", c, text);
    } else {
      fmt::format_to(std::back_inserter(body), R"({{"index":{},"text":"{}")", c, text);
    }
    body += ",\"logprobs\":";
    if (spec_.logprobs && tokens > 0) {
      AppendLogprobs(body, c, 0, tokens, 0);
    } else {
      body += "null";
    }
    fmt::format_to(std::back_inserter(body), R"(,"finish_reason":"{}")", FinishReasonName(finish));
    body += chat ? "}" : ",\"stop_reason\":null}";
  }
  body += "],";
  AppendUsage(body, spec_.prompt_tokens, CompletionTokens(emitted), cached_tokens);
  body += '}';
  return body;
}

}  // namespace bakeoff::emulate
