// bench/chat_stream.cc: builds the benchmarks' OpenAI chat SSE stream (see chat_stream.h).
#include "chat_stream.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace bakeoff::bench {
namespace {

// Short English-like pieces, the sizes real tokenizers produce (1 to 8 bytes).
constexpr std::array<std::string_view, 16> kPieces = {
    "the ", "of ", "and", " model", " to", " in", "ference", " is",
    " a",   ",",   " batch", " token", "s", " cache", ".", " latency"};

constexpr std::string_view kHead =
    R"({"id":"chatcmpl-6f1d0b9a2c000001","object":"chat.completion.chunk","created":1717000000,)"
    R"("model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{)";

}  // namespace

ChatStream MakeChatStream(std::size_t tokens) {
  ChatStream s;
  auto add = [&s](std::string payload) {
    s.wire.append("data: ").append(payload).append("\n\n");
    s.payloads.push_back(std::move(payload));
  };
  add(fmt::format(R"({}"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}})",
                  kHead));
  for (std::size_t i = 0; i < tokens; ++i) {
    const std::string_view piece = kPieces[(i * 7 + i / 16) % kPieces.size()];
    const bool last = i + 1 == tokens;
    add(fmt::format(R"({}"content":"{}"}},"logprobs":null,"finish_reason":{}}}]}})", kHead, piece,
                    last ? R"("length")" : "null"));
    s.content_bytes += piece.size();
  }
  add(fmt::format(
      R"({{"id":"chatcmpl-6f1d0b9a2c000001","object":"chat.completion.chunk","created":1717000000,)"
      R"("model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{{"prompt_tokens":128,)"
      R"("total_tokens":{},"completion_tokens":{}}}}})",
      128 + tokens, tokens));
  add("[DONE]");
  s.events = s.payloads.size();
  s.token_events = tokens;
  s.lines = static_cast<std::size_t>(std::count(s.wire.begin(), s.wire.end(), '\n'));
  return s;
}

std::vector<std::string_view> SplitIntoReads(std::string_view wire, std::size_t read_bytes) {
  std::vector<std::string_view> reads;
  for (std::size_t at = 0; at < wire.size(); at += read_bytes) {
    reads.push_back(wire.substr(at, std::min(read_bytes, wire.size() - at)));
  }
  return reads;
}

}  // namespace bakeoff::bench
