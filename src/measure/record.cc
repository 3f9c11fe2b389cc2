#include "measure/record.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>
#include <simdjson.h>

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

namespace {

// An instant past 10^17 ns (three years) from the run's start is not one a run had.
constexpr std::int64_t kLargestOffsetNs = 100'000'000'000'000'000;

Error BadField(std::string_view key, std::string_view what) {
  return MakeError(ErrorCode::kInvalidInput, fmt::format("\"{}\" {}", key, what));
}

Result<std::int64_t> Instant(simdjson::dom::element value, std::string_view key) {
  std::int64_t ns = 0;
  if (value.get_int64().get(ns) != simdjson::SUCCESS) return BadField(key, "is not an integer of nanoseconds");
  if (ns < -kLargestOffsetNs || ns > kLargestOffsetNs) return BadField(key, fmt::format("{} is not an instant of a run", ns));
  return ns;
}

template <typename T>
Result<T> Count(simdjson::dom::element value, std::string_view key) {
  std::uint64_t n = 0;
  if (value.get_uint64().get(n) != simdjson::SUCCESS || n > std::numeric_limits<T>::max()) {
    return BadField(key, "is not a count");
  }
  return static_cast<T>(n);
}

std::optional<Outcome> OutcomeNamed(std::string_view name) {
  for (int i = 0; i < kOutcomeCount; ++i) {
    if (name == OutcomeName(static_cast<Outcome>(i))) return static_cast<Outcome>(i);
  }
  return std::nullopt;
}

}  // namespace

struct RecordLineReader::Parser {
  simdjson::dom::parser json;
};

RecordLineReader::RecordLineReader() : parser_(std::make_unique<Parser>()) {}
RecordLineReader::~RecordLineReader() = default;

Result<RequestRecord> RecordLineReader::Read(std::string_view line, MonoTime t0) {
  simdjson::dom::object o;
  if (parser_->json.parse(line.data(), line.size()).get_object().get(o) != simdjson::SUCCESS) {
    return MakeError(ErrorCode::kInvalidInput, "not a JSON object");
  }
  RequestRecord r;
  std::optional<std::int64_t> first_token_ns;
  simdjson::dom::array event_ns, event_tokens;
  std::string_view event_flags;
  bool has_event_ns = false, has_event_tokens = false, has_event_flags = false;
  bool has_id = false, has_intended = false, has_phase = false, has_outcome = false;
  const auto at = [&](std::int64_t ns) { return t0 + Nanos(ns); };
  for (const simdjson::dom::key_value_pair field : o) {
    const std::string_view key = field.key;  // plain names: lambdas below capture them (clang 14)
    const simdjson::dom::element value = field.value;
    // Each field in turn; an unknown one (a newer writer's) is skipped.
    const auto instant = [&](std::optional<MonoTime>& into) -> Status {
      Result<std::int64_t> ns = Instant(value, key);
      if (!ns.ok()) return ns.error();
      into = at(ns.value());
      return Ok{};
    };
    const auto text = [&](std::string& into) -> Status {
      std::string_view v;
      if (value.get_string().get(v) != simdjson::SUCCESS) return BadField(key, "is not a string");
      into = std::string(v);
      return Ok{};
    };
    const auto flag = [&](bool& into) -> Status {
      if (value.get_bool().get(into) != simdjson::SUCCESS) return BadField(key, "is not true or false");
      return Ok{};
    };
    const auto count = [&](auto& into) -> Status {
      using T = std::remove_reference_t<decltype(into)>;
      Result<T> n = Count<T>(value, key);
      if (!n.ok()) return n.error();
      into = n.value();
      return Ok{};
    };
    const auto optional_count = [&](std::optional<std::uint64_t>& into) -> Status {
      std::uint64_t n = 0;
      Status read = count(n);
      if (read.ok()) into = n;
      return read;
    };
    Status read = Ok{};
    if (key == "id") {
      read = count(r.id);
      has_id = true;
    } else if (key == "step") {
      read = count(r.step);
    } else if (key == "worker") {
      read = count(r.worker);
    } else if (key == "phase") {
      std::string phase;
      read = text(phase);
      if (read.ok() && phase != "warmup" && phase != "measure") read = BadField(key, "is neither warmup nor measure");
      r.phase = phase == "warmup" ? Phase::kWarmup : Phase::kMeasure;
      has_phase = true;
    } else if (key == "outcome") {
      std::string name;
      read = text(name);
      const std::optional<Outcome> outcome = OutcomeNamed(name);
      if (read.ok() && !outcome) read = BadField(key, fmt::format("'{}' is not an outcome", name));
      if (outcome) r.outcome = *outcome;
      has_outcome = true;
    } else if (key == "http_status") {
      std::int64_t status = 0;
      if (value.get_int64().get(status) != simdjson::SUCCESS || status < 0 || status > 999) {
        read = BadField(key, "is not an HTTP status");
      }
      r.http_status = static_cast<int>(status);
    } else if (key == "intended_send_ns") {
      std::optional<MonoTime> intended;
      read = instant(intended);
      if (intended) r.intended_send = *intended;
      has_intended = true;
    } else if (key == "send_start_ns") {
      read = instant(r.send_start);
    } else if (key == "stale_retry_ns") {
      read = instant(r.stale_retry_at);
    } else if (key == "connected_ns") {
      read = instant(r.connected);
    } else if (key == "request_written_ns") {
      read = instant(r.request_written);
    } else if (key == "headers_ns") {
      read = instant(r.headers_received);
    } else if (key == "first_chunk_ns") {
      read = instant(r.first_chunk);
    } else if (key == "first_token_ns") {
      read = instant(r.first_token);
      if (read.ok()) first_token_ns = (*r.first_token - t0).count();
    } else if (key == "first_answer_token_ns") {
      read = instant(r.first_answer_token);
    } else if (key == "last_token_ns") {
      read = instant(r.last_token);
    } else if (key == "finished_ns") {
      read = instant(r.finished);
    } else if (key == "connection_reused") {
      read = flag(r.connection_reused);
    } else if (key == "invalid_utf8") {
      read = flag(r.invalid_utf8);
    } else if (key == "prompt_tokens_planned") {
      read = count(r.prompt_tokens_planned);
    } else if (key == "max_tokens") {
      read = count(r.max_tokens);
    } else if (key == "usage_prompt_tokens") {
      read = optional_count(r.usage_prompt_tokens);
    } else if (key == "usage_completion_tokens") {
      read = optional_count(r.usage_completion_tokens);
    } else if (key == "usage_cached_tokens") {
      read = optional_count(r.usage_cached_tokens);
    } else if (key == "counted_tokens") {
      read = count(r.counted_tokens);
    } else if (key == "stale_retry_reason") {
      read = text(r.stale_retry_reason);
    } else if (key == "finish_reason") {
      read = text(r.finish_reason);
    } else if (key == "error") {
      read = text(r.error);
    } else if (key == "token_event_ns") {
      if (value.get_array().get(event_ns) != simdjson::SUCCESS) read = BadField(key, "is not an array");
      has_event_ns = true;
    } else if (key == "token_event_tokens") {
      if (value.get_array().get(event_tokens) != simdjson::SUCCESS) read = BadField(key, "is not an array");
      has_event_tokens = true;
    } else if (key == "token_event_flags") {
      if (value.get_string().get(event_flags) != simdjson::SUCCESS) read = BadField(key, "is not a string");
      has_event_flags = true;
    }
    if (!read.ok()) return read.error();
  }
  for (const auto& [present, key] : {std::pair{has_id, "id"}, std::pair{has_phase, "phase"},
                                     std::pair{has_outcome, "outcome"}, std::pair{has_intended, "intended_send_ns"}}) {
    if (!present) return BadField(key, "is missing");
  }
  if (r.outcome == Outcome::kOk && !r.send_start) return BadField("send_start_ns", "is missing from an ok request");
  if (!has_event_ns) {
    if (has_event_tokens || has_event_flags) return BadField("token_event_ns", "is missing beside token_event_tokens");
    return r;
  }
  if (!first_token_ns) return BadField("first_token_ns", "is missing beside token_event_ns");
  if (has_event_tokens != has_event_flags) {
    return BadField(has_event_tokens ? "token_event_flags" : "token_event_tokens", "is missing beside the other");
  }
  const std::size_t events = event_ns.size();
  if (has_event_tokens && (event_tokens.size() != events || event_flags.size() != events)) {
    return BadField("token_event_tokens", fmt::format("and token_event_flags do not hold one entry per event ({})", events));
  }
  r.token_events.reserve(events);
  for (simdjson::dom::element e : event_ns) {
    Result<std::int64_t> offset = Instant(e, "token_event_ns");
    if (!offset.ok()) return offset.error();
    if (offset.value() < 0 || offset.value() > kLargestOffsetNs - *first_token_ns ||
        (r.token_events.empty() && offset.value() != 0)) {
      return BadField("token_event_ns", fmt::format("holds {}, not an offset from the first event", offset.value()));
    }
    r.token_events.push_back({at(*first_token_ns + offset.value()), 1, false, true});
  }
  if (has_event_tokens) {
    std::size_t i = 0;
    for (simdjson::dom::element e : event_tokens) {
      Result<std::uint32_t> tokens = Count<std::uint32_t>(e, "token_event_tokens");
      if (!tokens.ok()) return tokens.error();
      TokenEvent& event = r.token_events[i];
      const char letter = event_flags[i++];
      if (letter != 'a' && letter != 'r' && letter != 'A' && letter != 'R') {
        return BadField("token_event_flags", fmt::format("holds '{}', not one of a, r, A, R", letter));
      }
      event.tokens = tokens.value();
      event.reasoning = letter == 'r' || letter == 'R';
      event.counted = letter == 'a' || letter == 'r';
    }
  }
  return r;
}

}  // namespace bakeoff::measure
