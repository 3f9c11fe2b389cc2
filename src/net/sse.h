// net/sse.h
//
// Owns: incremental framing of a Server-Sent Events stream into events, per the WHATWG HTML
// Living Standard, section "Server-sent events" (9.2.6 "Interpreting an event stream"): lines end
// in CRLF, LF or CR; a leading UTF-8 BOM is skipped; one optional space after the colon is
// removed; comment lines (leading ':') are counted, not delivered as events; several data lines
// join with '\n'; a blank line dispatches. Unlike a browser, fields the spec does not know (for
// example llama.cpp's `error:` line) are kept on the event in `unknown_fields`, never dropped, and
// an event with no data but with unknown fields is still dispatched.
// Does not own: what the data means (dialect/), or the HTTP body (net/http_client.h).
//
// Thread-safety: one decoder per stream, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace bakeoff::net {

struct SseEvent {
  std::string event;  // the `event:` field; empty means the default type "message"
  std::string data;   // all `data:` lines of the event joined with '\n'
  std::string id;     // the last `id:` field seen in this event, if any
  std::optional<std::int64_t> retry_ms;
  std::vector<std::pair<std::string, std::string>> unknown_fields;  // (name, value) in order

  bool operator==(const SseEvent&) const = default;
};

class SseDecoder {
 public:
  static constexpr std::size_t kDefaultMaxEventBytes = 16 * 1024 * 1024;

  explicit SseDecoder(std::size_t max_event_bytes = kDefaultMaxEventBytes)
      : max_event_bytes_(max_event_bytes) {}

  // Appends the bytes of one network read and appends every event they complete to `out`.
  // Bytes after the last complete line are kept for the next call. Returns a kProtocol error if
  // one event (or one unterminated line) would exceed max_event_bytes; the decoder is then
  // unusable.
  // REQUIRES: Finish() has not been called.
  Status Feed(std::string_view bytes, std::vector<SseEvent>* out);

  // Ends the stream. Per the spec an incomplete event at end of stream is discarded; this returns
  // true if such trailing bytes were pending so the caller can report "stream cut mid-event".
  bool Finish();

  // Comment lines (": keep-alive") seen so far.
  std::uint64_t comment_count() const { return comment_count_; }

 private:
  void ProcessLine(std::string_view line, std::vector<SseEvent>* out);

  std::size_t max_event_bytes_;
  std::string line_;         // the current unterminated line
  SseEvent pending_;         // fields of the event being built
  bool has_pending_ = false; // any field seen since the last dispatch
  bool data_seen_ = false;   // at least one data line in pending_
  bool last_was_cr_ = false; // previous chunk ended in CR (a following LF belongs to it)
  bool bom_checked_ = false;
  std::uint64_t comment_count_ = 0;
  bool failed_ = false;
  bool finished_ = false;
};

}  // namespace bakeoff::net
