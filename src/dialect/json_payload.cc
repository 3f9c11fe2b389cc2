// dialect/json_payload.cc: helpers shared by the dialects' decoders (json_payload.h).
#include "dialect/json_payload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/json_text.h"

namespace bakeoff::dialect::internal {
namespace {

constexpr std::size_t kExcerptBytes = 200;  // payload bytes quoted in a protocol error

// At most kExcerptBytes of an arbitrary payload, safe to put in a message that is later written
// as JSON: invalid UTF-8 bytes become '?', control characters become ' ', never longer than the
// input prefix it quotes.
std::string Excerpt(std::string_view data) {
  const std::string_view head = Utf8Prefix(data, kExcerptBytes);
  std::string out;
  out.reserve(head.size() + 4);
  for (std::size_t i = 0; i < head.size();) {
    const std::size_t n = Utf8SequenceLength(head, i);
    if (n == 0) {
      out.push_back('?');
      ++i;
    } else if (n == 1 && static_cast<unsigned char>(head[i]) < 0x20) {
      out.push_back(' ');
      ++i;
    } else {
      out.append(head.substr(i, n));
      i += n;
    }
  }
  if (head.size() < data.size()) out.append("...");
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Replaces every byte that is not part of a valid UTF-8 sequence by '?', in place (same size).
void ReplaceInvalidUtf8(char* data, std::size_t size) {
  const std::string_view text(data, size);
  for (std::size_t i = 0; i < size;) {
    const std::size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      data[i++] = '?';
    } else {
      i += length;
    }
  }
}

}  // namespace

char* ParseScratch::PaddedBuffer(std::size_t size) {
  const std::size_t needed = size + simdjson::SIMDJSON_PADDING;
  if (needed > padded_capacity) {
    padded_capacity = std::max(needed, 2 * padded_capacity);
    padded = std::make_unique<char[]>(padded_capacity);
  }
  return padded.get();
}

ParseScratch& ThreadParseScratch() {
  thread_local ParseScratch scratch;
  return scratch;
}

Reason ParseObject(dom::parser& parser, std::string_view data, char* padded, dom::object& root,
                   bool* invalid_utf8) {
  if (!data.empty()) std::memcpy(padded, data.data(), data.size());
  std::memset(padded + data.size(), 0, simdjson::SIMDJSON_PADDING);
  dom::element element;
  simdjson::error_code parsed = parser.parse(padded, data.size(), /*realloc_if_needed=*/false).get(element);
  if (parsed == simdjson::UTF8_ERROR) {
    ReplaceInvalidUtf8(padded, data.size());
    if (invalid_utf8 != nullptr) *invalid_utf8 = true;
    parsed = parser.parse(padded, data.size(), /*realloc_if_needed=*/false).get(element);
  }
  if (parsed == simdjson::DEPTH_ERROR) return "JSON nested deeper than the parser's limit";
  if (parsed != simdjson::SUCCESS) return "not valid JSON";
  if (element.get_object().get(root) != simdjson::SUCCESS) return "not a JSON object";
  return nullptr;
}

Error PayloadError(std::string_view label, std::string_view what, std::string_view payload) {
  std::string message(label);
  message.append(": ");
  message.append(what);
  message.append(" (");
  message.append(std::to_string(payload.size()));
  message.append(" bytes: ");
  message.append(Excerpt(payload));
  message.append(")");
  return MakeError(ErrorCode::kProtocol, std::move(message));
}

std::string CapMessage(std::string_view message) {
  std::string out(Utf8Prefix(message, kMaxErrorMessageBytes));
  if (out.size() < message.size()) out.append("...");
  return out;
}

bool ReadOptionalString(dom::element value, std::string_view& out) {
  if (value.is_null()) {
    out = {};
    return true;
  }
  return value.get_string().get(out) == simdjson::SUCCESS;
}

bool ReadCount(dom::element value, std::uint64_t& out) {
  if (value.is_null()) {
    out = 0;
    return true;
  }
  return value.get_uint64().get(out) == simdjson::SUCCESS;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

void AppendUnsigned(std::string& out, std::uint64_t value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  BAKEOFF_CHECK(ec == std::errc()) << "to_chars failed";
  out.append(buf, end);
}

void AppendDouble(std::string& out, double value) {
  BAKEOFF_CHECK(std::isfinite(value)) << "JSON has no NaN or infinity: " << value;
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  BAKEOFF_CHECK(ec == std::errc()) << "to_chars failed";
  out.append(buf, end);
}

}  // namespace bakeoff::dialect::internal
