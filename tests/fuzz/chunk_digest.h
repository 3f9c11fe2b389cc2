// tests/fuzz/chunk_digest.h
//
// Owns: what the dialect fuzz harnesses (openai_stream_fuzz.cc, native_stream_fuzz.cc) check on
// every decoded stream chunk: a failure is kProtocol with a short, valid-UTF-8 message; every
// byte a chunk's views point at is read (so a dangling view faults under ASan) into a digest that
// shows whether decoding is deterministic; an error message is at most 1024 bytes (+ "...").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <simdjson.h>

#include "core/check.h"
#include "dialect/request.h"

namespace bakeoff::fuzz {

inline constexpr std::size_t kMaxProtocolMessageBytes = 200 + 100;  // excerpt + fixed wording
inline constexpr std::size_t kMaxErrorBytes = 1024 + 3;

inline bool ValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

inline std::uint64_t Digest(const Result<dialect::StreamChunk>& result) {
  if (!result.ok()) {
    BAKEOFF_CHECK(result.error().code == ErrorCode::kProtocol) << result.error().message;
    BAKEOFF_CHECK(result.error().message.size() <= kMaxProtocolMessageBytes) << result.error().message;
    BAKEOFF_CHECK(ValidUtf8(result.error().message)) << "protocol message is not UTF-8";
    return 1;
  }
  const dialect::StreamChunk& chunk = *result;
  std::uint64_t digest = 0x9E3779B97F4A7C15ull;
  for (const std::string_view view : {chunk.content, chunk.reasoning, chunk.tool_arguments, chunk.finish_reason}) {
    for (const char c : view) digest = digest * 31 + static_cast<unsigned char>(c);
    digest = digest * 31 + view.size();
  }
  digest = digest * 31 + chunk.token_count + (chunk.done ? 7 : 0) + (chunk.has_choices ? 11 : 0);
  if (chunk.usage) digest = digest * 31 + chunk.usage->prompt_tokens * 3 + chunk.usage->completion_tokens;
  if (chunk.error) {
    BAKEOFF_CHECK(chunk.error->size() <= kMaxErrorBytes) << chunk.error->size();
    BAKEOFF_CHECK(ValidUtf8(*chunk.error)) << "error message is not UTF-8";
    digest = digest * 31 + chunk.error->size();
  }
  return digest;
}

}  // namespace bakeoff::fuzz
