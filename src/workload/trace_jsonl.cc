// workload/trace_jsonl.cc
//
// Owns: the canonical JSONL writer. Written by hand (not through a JSON document) because a trace
// can hold millions of rows; numbers use fmt's shortest round-trip form, so reading a written
// trace gives back the same doubles.
#include "workload/trace_jsonl.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <system_error>

#include <fmt/format.h>

#include "core/json_text.h"

namespace bakeoff::workload {

namespace {

// "2023-11-16T18:15:46Z", with the fraction of the second (up to 9 digits) when there is one.
std::string UtcText(std::int64_t unix_ns) {
  std::int64_t seconds = unix_ns / 1'000'000'000;
  std::int64_t nanos = unix_ns % 1'000'000'000;
  if (nanos < 0) nanos += 1'000'000'000, --seconds;
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = date;
  if (nanos > 0) {
    std::string fraction = fmt::format(".{:09d}", nanos);
    while (fraction.back() == '0') fraction.pop_back();
    out += fraction;
  }
  return out + "Z";
}

}  // namespace

std::string FormatTraceHeader(const Trace& trace) {
  std::string out = "{\"format\":\"bakeoff-trace\",\"version\":1";
  out += fmt::format(",\"block_tokens\":{},\"arrivals_known\":{}", trace.block_tokens,
                     trace.arrivals_known ? "true" : "false");
  if (trace.origin_unix_ns) out += fmt::format(",\"origin_utc\":\"{}\"", UtcText(*trace.origin_unix_ns));
  out += ",\"source\":";
  AppendJsonString(out, trace.source);
  out += '}';
  return out;
}

void AppendTraceLine(std::string& out, const TraceRequest& r) {
  fmt::format_to(std::back_inserter(out), "{{\"arrival_s\":{},\"input_tokens\":{},\"output_tokens\":{}",
                 r.arrival_s, r.input_tokens, r.output_tokens);
  auto text = [&out](const char* key, const std::optional<std::string>& value) {
    if (!value) return;
    fmt::format_to(std::back_inserter(out), ",\"{}\":", key);
    AppendJsonString(out, *value);
  };
  text("prompt", r.prompt);
  if (!r.messages.empty()) {
    out += ",\"messages\":[";
    for (std::size_t i = 0; i < r.messages.size(); ++i) {
      out += i == 0 ? "{\"role\":" : ",{\"role\":";
      AppendJsonString(out, r.messages[i].role);
      out += ",\"content\":";
      AppendJsonString(out, r.messages[i].content);
      out += '}';
    }
    out += ']';
  }
  if (!r.prefix_hashes.empty()) {
    out += ",\"prefix_hashes\":[";
    for (std::size_t i = 0; i < r.prefix_hashes.size(); ++i) {
      fmt::format_to(std::back_inserter(out), "{}{}", i == 0 ? "" : ",", r.prefix_hashes[i]);
    }
    out += ']';
  }
  text("prefix_group", r.prefix_group);
  text("session_id", r.session_id);
  if (r.turn) fmt::format_to(std::back_inserter(out), ",\"turn\":{}", *r.turn);
  if (r.think_time_s) fmt::format_to(std::back_inserter(out), ",\"think_time_s\":{}", *r.think_time_s);
  if (r.structured_output) out += ",\"structured_output\":true";
  text("model", r.model);
  if (r.priority) fmt::format_to(std::back_inserter(out), ",\"priority\":{}", *r.priority);
  if (r.tokens_estimated) out += ",\"tokens_estimated\":true";
  out += '}';
}

Status WriteTraceJsonl(const Trace& trace, const std::filesystem::path& path) {
  const std::filesystem::path temp = path.string() + ".tmp";
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) {
    return MakeError(ErrorCode::kIo, fmt::format("{}: cannot create: {}", temp.string(), std::strerror(errno)));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(file, &std::fclose);
  std::string buffer = FormatTraceHeader(trace);
  buffer += '\n';
  bool ok = true;
  for (const TraceRequest& r : trace.requests) {
    AppendTraceLine(buffer, r);
    buffer += '\n';
    if (buffer.size() >= (1u << 20)) {
      ok = ok && std::fwrite(buffer.data(), 1, buffer.size(), file) == buffer.size();
      buffer.clear();
    }
  }
  ok = ok && std::fwrite(buffer.data(), 1, buffer.size(), file) == buffer.size();
  ok = (std::fclose(closer.release()) == 0) && ok;
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(temp, ec);
    return MakeError(ErrorCode::kIo, fmt::format("{}: write failed", temp.string()));
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(temp, ec);
    return MakeError(ErrorCode::kIo, fmt::format("{}: cannot write there: {}", path.string(), why));
  }
  return Ok{};
}

}  // namespace bakeoff::workload
