#include "measure/record.h"

#include <charconv>

#include <fmt/format.h>

#include "core/json_text.h"

namespace bakeoff::measure {

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kHttpError: return "http_error";
    case Outcome::kConnectFailed: return "connect_failed";
    case Outcome::kReset: return "reset";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kMalformedStream: return "malformed_stream";
    case Outcome::kStreamError: return "stream_error";
    case Outcome::kTruncated: return "truncated";
    case Outcome::kCancelled: return "cancelled";
  }
  return "unknown";
}

const char* PhaseName(Phase phase) { return phase == Phase::kWarmup ? "warmup" : "measure"; }

namespace {

void AppendInstant(std::string& out, const char* key, const std::optional<MonoTime>& at,
                   MonoTime t0) {
  if (!at) return;
  fmt::format_to(std::back_inserter(out), ",\"{}\":{}", key, (*at - t0).count());
}

// The token-event arrays can hold tens of thousands of integers: std::to_chars is several times
// faster than fmt here (docs/BENCHMARKS.md, RecordToJsonLine).
void AppendInteger(std::string& out, std::int64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

template <typename T>
void AppendOptional(std::string& out, const char* key, const std::optional<T>& value) {
  if (value) fmt::format_to(std::back_inserter(out), ",\"{}\":{}", key, *value);
}

}  // namespace

std::string RecordToJsonLine(const RequestRecord& r, MonoTime t0) {
  std::string out;
  out.reserve(256 + r.token_events.size() * 12);
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{{\"id\":{},\"step\":{},\"worker\":{},\"phase\":\"{}\",\"outcome\":\"{}\"",
                 r.id, r.step, r.worker, PhaseName(r.phase), OutcomeName(r.outcome));
  fmt::format_to(it, ",\"http_status\":{},\"intended_send_ns\":{}", r.http_status,
                 (r.intended_send - t0).count());
  AppendInstant(out, "send_start_ns", r.send_start, t0);
  AppendInstant(out, "stale_retry_ns", r.stale_retry_at, t0);
  AppendInstant(out, "connected_ns", r.connected, t0);
  AppendInstant(out, "request_written_ns", r.request_written, t0);
  AppendInstant(out, "headers_ns", r.headers_received, t0);
  AppendInstant(out, "first_chunk_ns", r.first_chunk, t0);
  AppendInstant(out, "first_token_ns", r.first_token, t0);
  AppendInstant(out, "first_answer_token_ns", r.first_answer_token, t0);
  AppendInstant(out, "last_token_ns", r.last_token, t0);
  AppendInstant(out, "finished_ns", r.finished, t0);
  fmt::format_to(it, ",\"connection_reused\":{},\"prompt_tokens_planned\":{},\"max_tokens\":{}",
                 r.connection_reused, r.prompt_tokens_planned, r.max_tokens);
  AppendOptional(out, "usage_prompt_tokens", r.usage_prompt_tokens);
  AppendOptional(out, "usage_completion_tokens", r.usage_completion_tokens);
  AppendOptional(out, "usage_cached_tokens", r.usage_cached_tokens);
  fmt::format_to(it, ",\"counted_tokens\":{},\"output_tokens\":{},\"output_tokens_estimated\":{}",
                 r.counted_tokens, r.OutputTokens(), r.OutputTokensEstimated());
  if (r.invalid_utf8) out.append(",\"invalid_utf8\":true");
  if (r.stale_retry_at) {
    out.append(",\"stale_retry_reason\":");
    AppendJsonString(out, r.stale_retry_reason);
  }
  if (!r.finish_reason.empty()) {
    out.append(",\"finish_reason\":");
    AppendJsonString(out, r.finish_reason);
  }
  if (!r.error.empty()) {
    out.append(",\"error\":");
    AppendJsonString(out, r.error);
  }
  // Token events, compactly: offsets from the first token event in ns, and the per-event token
  // counts and flags only when any differs from the common case (1 counted answer token).
  if (!r.token_events.empty()) {
    const MonoTime base = r.token_events.front().at;
    out.append(",\"token_event_ns\":[");
    bool plain = true;
    for (std::size_t i = 0; i < r.token_events.size(); ++i) {
      const TokenEvent& e = r.token_events[i];
      if (i > 0) out.push_back(',');
      AppendInteger(out, (e.at - base).count());
      plain = plain && e.tokens == 1 && !e.reasoning && e.counted;
    }
    out.push_back(']');
    if (!plain) {
      out.append(",\"token_event_tokens\":[");
      for (std::size_t i = 0; i < r.token_events.size(); ++i) {
        if (i > 0) out.push_back(',');
        AppendInteger(out, r.token_events[i].tokens);
      }
      out.append("],\"token_event_flags\":\"");
      // One letter per event: a = answer, r = reasoning; upper case = token count estimated.
      for (const TokenEvent& e : r.token_events) {
        const char letter = e.reasoning ? 'r' : 'a';
        out.push_back(e.counted ? letter : static_cast<char>(letter - 'a' + 'A'));
      }
      out.push_back('"');
    }
  }
  out.push_back('}');
  return out;
}

}  // namespace bakeoff::measure
