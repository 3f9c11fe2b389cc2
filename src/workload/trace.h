// workload/trace.h
//
// Owns: the canonical request trace, bakeoff's one in-memory and on-disk form of a workload
// (docs/formats/trace.md): one TraceRequest per request, in arrival order. Importers
// (workload/importers.h) turn public formats into it; the fingerprint, synthesis and replay read
// only this. Prompt text is optional: most production traces carry lengths and prefix hashes only.
//
// Thread-safety: plain values.
// Units: seconds (double) since the trace's first arrival; token counts as integers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bakeoff::workload {

struct ChatMessage {
  std::string role;
  std::string content;
  bool operator==(const ChatMessage&) const = default;
};

struct TraceRequest {
  double arrival_s = 0;             // since the trace's start (first request at 0 after import)
  std::uint32_t input_tokens = 0;   // prompt length as the source counted it
  std::uint32_t output_tokens = 0;  // generated length
  std::optional<std::string> prompt;          // completion-style text, when the source has it
  std::vector<ChatMessage> messages;          // chat history, when the source has it
  // One id per block of Trace::block_tokens prompt tokens, in prompt order; the last block may be
  // partial (Mooncake's traces hash ceil(input_tokens / block) blocks). Equal ids at the same
  // position after an equal chain of ids mean reusable KV blocks (docs/formats/trace.md).
  std::vector<std::uint64_t> prefix_hashes;
  std::optional<std::string> prefix_group;    // requests sharing a named prefix (e.g. a system prompt)
  std::optional<std::string> session_id;      // multi-turn conversation this request belongs to
  std::optional<std::uint32_t> turn;          // 0-based turn index within the session
  std::optional<double> think_time_s;         // user pause before this turn, after the previous answer
  bool structured_output = false;             // asked for JSON/schema-constrained output
  std::optional<std::string> model;           // model or LoRA adapter name
  std::optional<std::int32_t> priority;
  std::uint64_t source_line = 0;              // line in the source file, for messages
  bool tokens_estimated = false;              // lengths estimated from text (bytes / 4), not counted

  bool operator==(const TraceRequest&) const = default;
};

struct Trace {
  std::string source;             // file it came from, and its format
  std::uint32_t block_tokens = 0;  // tokens per prefix hash block; 0 when there are no hashes
  bool arrivals_known = true;      // false for sources without timestamps (ShareGPT): all at 0
  std::optional<std::int64_t> origin_unix_ns;  // wall-clock time (Unix ns) of arrival_s 0, when known
  std::vector<TraceRequest> requests;  // sorted by arrival_s
};

}  // namespace bakeoff::workload
