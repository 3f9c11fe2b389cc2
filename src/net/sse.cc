// net/sse.cc
//
// Owns: the SseDecoder state machine. Wire format: WHATWG HTML Living Standard, "Server-sent
// events", section "Interpreting an event stream". Hot path of the load generator: complete lines
// are parsed where they lie in the caller's buffer; only a line cut by a read boundary is copied.
#include "net/sse.h"

#include <cstring>
#include <limits>
#include <string>

namespace bakeoff::net {
namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// Position of the first `c` in bytes[from, size), or size when there is none. memchr is
// vectorised in glibc, which matters at a million events per second.
std::size_t FindByte(std::string_view bytes, std::size_t from, char c) {
  const void* hit = std::memchr(bytes.data() + from, c, bytes.size() - from);
  return hit == nullptr ? bytes.size()
                        : static_cast<std::size_t>(static_cast<const char*>(hit) - bytes.data());
}

// The spec's "consists of only ASCII digits", read as base ten. Empty values and values that do
// not fit in int64 are ignored (the spec has no upper bound; a browser clamps, we drop).
std::optional<std::int64_t> ParseRetry(std::string_view value) {
  if (value.empty()) return std::nullopt;
  std::int64_t result = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (result > (std::numeric_limits<std::int64_t>::max() - digit) / 10) return std::nullopt;
    result = result * 10 + digit;
  }
  return result;
}

}  // namespace

std::string_view SseDecoder::SkipBom(std::string_view bytes) {
  // The partial BOM waits in line_. EF and BB are not line terminators, so on a mismatch the
  // bytes already in line_ are simply the start of the first line.
  while (!bytes.empty() && line_.size() < kBom.size()) {
    if (bytes.front() != kBom[line_.size()]) {
      bom_checked_ = true;
      return bytes;
    }
    line_.push_back(bytes.front());
    bytes.remove_prefix(1);
  }
  if (line_.size() == kBom.size()) {
    line_.clear();
    bom_checked_ = true;
  }
  return bytes;
}

Status SseDecoder::CheckLimit(std::size_t line_bytes) {
  // Every line that can grow the event passed this check, so the pending bytes never exceed the
  // limit (a field line adds at most its own length); the subtraction cannot wrap.
  const std::size_t pending = PendingBytes();
  BAKEOFF_CHECK(pending <= max_event_bytes_) << pending << " bytes pending";
  if (line_bytes <= max_event_bytes_ - pending) return Ok{};
  failed_ = true;
  return MakeError(ErrorCode::kProtocol, "SSE event exceeds max_event_bytes (" +
                                             std::to_string(max_event_bytes_) +
                                             " bytes): " + std::to_string(pending) +
                                             " bytes pending and a line of at least " +
                                             std::to_string(line_bytes) + " bytes");
}

Status SseDecoder::Feed(std::string_view bytes, std::vector<SseEvent>* out) {
  BAKEOFF_CHECK(out != nullptr);
  return FeedEach(bytes, [out](SseEvent& event) { out->push_back(std::move(event)); });
}

Status SseDecoder::FeedEach(std::string_view bytes, const EventHandler& on_event) {
  BAKEOFF_CHECK(!finished_) << "SseDecoder::Feed after Finish";
  if (failed_) {
    return MakeError(ErrorCode::kProtocol, "SSE decoder already failed (max_event_bytes " +
                                               std::to_string(max_event_bytes_) + " bytes)");
  }
  if (!bom_checked_) {
    bytes = SkipBom(bytes);
    if (!bom_checked_) return Ok{};
  }
  // A CR that ended the previous read ended its line; an LF that starts this read is the other
  // half of that CRLF, not a blank line.
  if (last_was_cr_ && !bytes.empty()) {
    last_was_cr_ = false;
    if (bytes.front() == '\n') bytes.remove_prefix(1);
  }

  // The next LF and next CR at or after `pos`, each found once per occurrence, so a read with
  // only one kind of line end is still scanned in linear time.
  std::size_t pos = 0;
  std::size_t next_lf = 0;
  std::size_t next_cr = 0;
  bool lf_known = false;
  bool cr_known = false;
  const std::size_t size = bytes.size();
  while (pos < size) {
    if (!lf_known || next_lf < pos) {
      next_lf = FindByte(bytes, pos, '\n');
      lf_known = true;
    }
    if (!cr_known || next_cr < pos) {
      next_cr = FindByte(bytes, pos, '\r');
      cr_known = true;
    }
    const std::size_t eol = next_lf < next_cr ? next_lf : next_cr;
    if (eol == size) break;  // no terminator left: the tail waits for the next read

    const std::string_view piece = bytes.substr(pos, eol - pos);
    std::size_t next = eol + 1;
    if (bytes[eol] == '\r') {
      if (next == size) {
        last_was_cr_ = true;
      } else if (bytes[next] == '\n') {
        ++next;
      }
    }
    if (line_.empty()) {
      if (!piece.empty()) {
        if (Status s = CheckLimit(piece.size()); !s.ok()) return s;
      }
      ProcessLine(piece, on_event);
    } else {
      if (Status s = CheckLimit(line_.size() + piece.size()); !s.ok()) return s;
      line_.append(piece);
      ProcessLine(line_, on_event);
      line_.clear();
    }
    pos = next;
  }
  if (pos < size) {
    // Checked before appending, so a body with no line end never buffers more than the limit.
    if (Status s = CheckLimit(line_.size() + (size - pos)); !s.ok()) return s;
    line_.append(bytes.substr(pos));
  }
  return Ok{};
}

void SseDecoder::ProcessLine(std::string_view line, const EventHandler& on_event) {
  if (line.empty()) {
    Dispatch(on_event);
    return;
  }
  if (line.front() == ':') {
    ++comment_count_;
    return;
  }
  has_pending_ = true;
  std::string_view field = line;
  std::string_view value;
  if (const void* colon = std::memchr(line.data(), ':', line.size()); colon != nullptr) {
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(colon) - line.data());
    field = line.substr(0, at);
    value = line.substr(at + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  // `data` first: it is nearly every line of an LLM stream.
  if (field == "data") {
    if (data_seen_) pending_.data.push_back('\n');
    pending_.data.append(value);
    data_seen_ = true;
  } else if (field == "event") {
    pending_.event.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) pending_.id.assign(value);
  } else if (field == "retry") {
    if (std::optional<std::int64_t> retry = ParseRetry(value)) pending_.retry_ms = retry;
  } else {
    unknown_bytes_ += field.size() + value.size();
    pending_.unknown_fields.emplace_back(std::string(field), std::string(value));
  }
}

void SseDecoder::Dispatch(const EventHandler& on_event) {
  // Not dispatched when the data buffer is empty (the spec) and no unknown field was seen.
  if (data_seen_ || !pending_.unknown_fields.empty()) on_event(pending_);
  // clear() keeps the buffers' capacity, so a steady stream allocates nothing per event.
  pending_.event.clear();
  pending_.data.clear();
  pending_.id.clear();
  pending_.retry_ms.reset();
  pending_.unknown_fields.clear();
  unknown_bytes_ = 0;
  has_pending_ = false;
  data_seen_ = false;
}

bool SseDecoder::Finish() {
  BAKEOFF_CHECK(!finished_) << "SseDecoder::Finish called twice";
  finished_ = true;
  const bool cut_mid_event = !line_.empty() || has_pending_;
  line_.clear();
  pending_ = SseEvent{};
  unknown_bytes_ = 0;
  has_pending_ = false;
  data_seen_ = false;
  return cut_mid_event;
}

}  // namespace bakeoff::net
