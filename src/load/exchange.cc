#include "load/exchange.h"

#include <fmt/format.h>

#include "core/check.h"

namespace bakeoff::load {
namespace {

using measure::Outcome;

// An error body is kept only up to this size (enough for any engine's error message).
constexpr std::size_t kMaxErrorBodyBytes = 4096;

Outcome OutcomeForTransport(net::TransportEnd end) {
  switch (end) {
    case net::TransportEnd::kComplete: return Outcome::kOk;
    case net::TransportEnd::kConnectFailed: return Outcome::kConnectFailed;
    case net::TransportEnd::kReset: return Outcome::kReset;
    case net::TransportEnd::kTimeoutConnect:
    case net::TransportEnd::kTimeoutFirstByte:
    case net::TransportEnd::kTimeoutIdle:
    case net::TransportEnd::kTimeoutTotal: return Outcome::kTimeout;
    case net::TransportEnd::kCancelled: return Outcome::kCancelled;
    case net::TransportEnd::kProtocolError:
    case net::TransportEnd::kTooLarge:
    case net::TransportEnd::kHandlerAborted: return Outcome::kMalformedStream;
  }
  return Outcome::kMalformedStream;
}

// Runs of non-whitespace in `text`.
std::uint64_t CountWords(std::string_view text) {
  std::uint64_t words = 0;
  bool in_word = false;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// What a complete stream of `api` ends with, for the message when it is missing.
const char* EndMarker(dialect::Api api) {
  switch (api) {
    case dialect::Api::kOllamaGenerate:
    case dialect::Api::kOllamaChat: return "a \"done\": true line";
    case dialect::Api::kTgiGenerate: return "its final event (generated_text and details)";
    default: return "[DONE] or a finish_reason";
  }
}

}  // namespace

Exchange::Exchange(dialect::Api api, bool streaming, std::string secret, DoneCallback done)
    : api_(api),
      streaming_(streaming && dialect::ApiStreams(api)),
      secret_(std::move(secret)),
      done_(std::move(done)),
      decoder_(dialect::ApiStreams(api) ? api : dialect::Api::kChat) {}

void Exchange::Begin(measure::RequestRecord record, bool keep_answer_text) {
  record_ = std::move(record);
  keep_answer_text_ = keep_answer_text;
  answer_text_.clear();
  sse_ = net::SseDecoder();
  ndjson_ = net::NdjsonDecoder();
  decoder_.Reset();
  body_.clear();
  success_status_ = false;
  saw_done_ = false;
  stream_error_.clear();
}

void Exchange::OnConnected(MonoTime at, bool reused) {
  record_.connected = at;
  record_.connection_reused = reused;
}

void Exchange::OnRequestWritten(MonoTime at) { record_.request_written = at; }

void Exchange::OnStaleConnectionRetry(MonoTime at, std::string_view reason) {
  BAKEOFF_CHECK(record_.connection_reused && !record_.stale_retry_at)
      << "request #" << record_.id << ": the client retries only a first try on a reused connection";
  record_.stale_retry_at = at;
  record_.stale_retry_reason = reason;
  // The first try's connection instants no longer describe the request; intended_send and
  // send_start stay, so send lag and response time still count from the plan and the first try.
  record_.connected.reset();
  record_.request_written.reset();
  record_.connection_reused = false;
}

void Exchange::OnHeaders(MonoTime at, const net::ResponseHead& head) {
  record_.headers_received = at;
  record_.http_status = head.status;
  success_status_ = head.status >= 200 && head.status < 300;
}

Status Exchange::OnBody(MonoTime at, std::string_view bytes) {
  if (!success_status_) {
    // Keep the start of an error body for the record; the rest is read and dropped.
    body_.append(bytes.substr(0, kMaxErrorBodyBytes - std::min(body_.size(), kMaxErrorBodyBytes)));
    return Ok{};
  }
  if (!streaming_) {
    body_.append(bytes);
    return Ok{};
  }
  if (dialect::StreamFraming(api_) == dialect::Framing::kNdjson) {
    lines_.clear();
    Status fed = ndjson_.Feed(bytes, &lines_);
    for (const std::string& line : lines_) {
      if (Status handled = OnPayload(at, line); !handled.ok()) return handled;
    }
    return fed;
  }
  // Events are handled inside the framer's callback, in its reused buffer; the first one the
  // decoder rejects stops the rest of this read.
  Status handled = Ok{};
  Status fed = sse_.FeedEach(bytes, [&](net::SseEvent& event) {
    if (handled.ok()) handled = OnSseEvent(at, event);
  });
  if (!handled.ok()) return handled;
  return fed;
}

Status Exchange::OnSseEvent(MonoTime at, const net::SseEvent& event) {
  for (const auto& [name, value] : event.unknown_fields) {
    // llama.cpp reports in-stream errors as an `error:` field rather than `data:`.
    if (name == "error" && stream_error_.empty()) {
      const std::string redacted = net::RedactSecret(value, secret_);
      stream_error_ = dialect::DecodeErrorMessage(redacted).value_or(redacted);
    }
  }
  if (event.data.empty()) return Ok{};
  return OnPayload(at, event.data);
}

Status Exchange::OnPayload(MonoTime at, std::string_view payload) {
  Result<dialect::StreamChunk> decoded = decoder_.Decode(payload);
  if (!decoded.ok()) return decoded.error();
  const dialect::StreamChunk& chunk = decoded.value();
  if (chunk.done) saw_done_ = true;
  if (chunk.error && stream_error_.empty()) stream_error_ = *chunk.error;
  if (chunk.invalid_utf8) record_.invalid_utf8 = true;
  if (chunk.has_choices && !record_.first_chunk) record_.first_chunk = at;
  if (keep_answer_text_) answer_text_.append(chunk.content);
  if (!chunk.content.empty() || !chunk.reasoning.empty() || !chunk.tool_arguments.empty()) {
    measure::TokenEvent token_event;
    token_event.at = at;
    // A tool call's arguments are its answer text.
    token_event.reasoning = chunk.content.empty() && chunk.tool_arguments.empty();
    token_event.counted = chunk.token_count > 0;
    token_event.tokens = chunk.token_count > 0 ? chunk.token_count : 1;
    record_.token_events.push_back(token_event);
    record_.counted_tokens += token_event.tokens;
    if (!record_.first_token) record_.first_token = at;
    if (!token_event.reasoning && !record_.first_answer_token) record_.first_answer_token = at;
    record_.last_token = at;
  }
  if (!chunk.finish_reason.empty()) record_.finish_reason = chunk.finish_reason;
  if (chunk.usage) KeepUsage(*chunk.usage);
  return Ok{};
}

void Exchange::KeepUsage(const dialect::Usage& usage) {
  if (usage.prompt_known) record_.usage_prompt_tokens = usage.prompt_tokens;
  record_.usage_completion_tokens = usage.completion_tokens;
  record_.usage_cached_tokens = usage.cached_tokens;
}

void Exchange::OnEnd(MonoTime at, net::TransportEnd end, std::string_view detail) {
  record_.finished = at;
  // Formatted only on the way to a failure: most requests end well.
  const auto where = [this] { return fmt::format("request #{}", record_.id); };
  if (end != net::TransportEnd::kComplete) {
    // Everything a stream promises had arrived; a reset after [DONE] loses nothing.
    if (end == net::TransportEnd::kReset && saw_done_ && stream_error_.empty()) {
      return Finish(Outcome::kOk, "");
    }
    return Finish(OutcomeForTransport(end),
                  fmt::format("{}: {}: {}", where(), net::TransportEndName(end), detail));
  }
  if (!success_status_) {
    // Redacted before decoding: the message is cut to a length, which could split the secret.
    const std::string body = net::RedactSecret(body_, secret_);
    const std::string message = dialect::DecodeErrorMessage(body).value_or(body);
    return Finish(Outcome::kHttpError,
                  fmt::format("{}: HTTP {}: {}", where(), record_.http_status, message));
  }
  if (!streaming_) {
    Result<dialect::CompletionResponse> response = dialect::DecodeResponse(api_, body_);
    if (!response.ok()) {
      return Finish(Outcome::kMalformedStream, where() + ": " + response.error().message);
    }
    const dialect::CompletionResponse& r = response.value();
    record_.first_token = record_.last_token = at;
    if (!r.content.empty() || !r.tool_arguments.empty()) record_.first_answer_token = at;
    if (keep_answer_text_) answer_text_ = r.content;
    record_.finish_reason = r.finish_reason;
    record_.invalid_utf8 = r.invalid_utf8;
    if (r.usage) KeepUsage(*r.usage);
    // A whole answer without the server's count: one token per word, an estimate (said so by
    // output_tokens_estimated; real tokenizers give about 1.3 tokens per English word).
    if (!r.usage) {
      record_.counted_tokens = CountWords(r.content) + CountWords(r.reasoning) + CountWords(r.tool_arguments);
    }
    return Finish(Outcome::kOk, "");
  }
  if (dialect::StreamFraming(api_) == dialect::Framing::kNdjson) {
    lines_.clear();
    ndjson_.Finish(&lines_);  // a last line without its LF
    for (const std::string& line : lines_) {
      if (Status handled = OnPayload(at, line); !handled.ok()) {
        return Finish(Outcome::kMalformedStream, where() + ": " + handled.error().message);
      }
    }
  } else if (sse_.Finish() && !saw_done_) {
    return Finish(Outcome::kTruncated, where() + ": stream ended in the middle of an event");
  }
  if (!stream_error_.empty()) {
    return Finish(Outcome::kStreamError, where() + ": error inside the stream: " + stream_error_);
  }
  // A route without an end marker (Triton's generate_stream) is complete when its body is.
  if (dialect::StreamHasEndMarker(api_) && !saw_done_ && record_.finish_reason.empty()) {
    return Finish(Outcome::kTruncated, fmt::format("{}: stream ended without {}", where(), EndMarker(api_)));
  }
  Finish(Outcome::kOk, "");
}

void Exchange::Finish(measure::Outcome outcome, std::string error) {
  record_.outcome = outcome;
  // Servers echo credentials in error bodies; none reaches records.jsonl, summary.json or stdout.
  record_.error = net::RedactSecret(std::move(error), secret_);
  done_(*this);
}

}  // namespace bakeoff::load
