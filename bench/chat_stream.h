// bench/chat_stream.h
//
// Owns: the synthetic input the micro-benchmarks parse: an OpenAI chat-completions SSE stream in
// the shapes vLLM (and `bakeoff emulate`) send (a role chunk, one content chunk per token, a
// finish chunk, a usage chunk, [DONE]), plus the counts a correct parser must find in it.
// Does not own: timing or checking (the *_bench.cc files do both).
//
// Units: sizes in bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::bench {

struct ChatStream {
  std::string wire;                  // the whole response body, `data: ...\n\n` events
  std::vector<std::string> payloads;  // each event's data, in order (what the framer must yield)
  std::size_t events = 0;             // SSE events in `wire` (== payloads.size())
  std::size_t token_events = 0;       // events whose delta carries non-empty content
  std::size_t content_bytes = 0;      // total bytes of generated text
  std::size_t lines = 0;              // '\n' bytes in `wire` (the memchr baseline's answer)
};

// One stream with `tokens` content events. Deterministic: the same `tokens` gives the same bytes.
// REQUIRES: tokens >= 1.
ChatStream MakeChatStream(std::size_t tokens);

// `wire` cut into consecutive reads of at most `read_bytes` (the last may be shorter), the way a
// socket hands a long stream to the client.
// REQUIRES: read_bytes >= 1.
std::vector<std::string_view> SplitIntoReads(std::string_view wire, std::size_t read_bytes);

}  // namespace bakeoff::bench
