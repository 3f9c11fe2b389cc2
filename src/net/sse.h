// net/sse.h
//
// Owns: incremental framing of a Server-Sent Events stream into events, per the WHATWG HTML
// Living Standard, section "Server-sent events" (9.2.6 "Interpreting an event stream"): lines end
// in CRLF, LF or CR; a leading UTF-8 BOM is skipped; one optional space after the colon is
// removed; comment lines (leading ':') are counted, not delivered as events; several data lines
// join with '\n'; a blank line dispatches. Unlike a browser, fields the spec does not know (for
// example llama.cpp's `error:` line) are kept on the event in `unknown_fields`, never dropped, and
// an event with no data but with unknown fields is still dispatched. Also unlike a browser, `id`
// and `retry` belong to the event that carries them (a browser keeps the last event ID and the
// reconnection time for the whole connection); bakeoff never reconnects, so per-event is simpler.
// Does not own: what the data means (dialect/), or the HTTP body (net/http_client.h).
//
// Thread-safety: one decoder per stream, used by one thread.
// Units: sizes in bytes; retry_ms in milliseconds, as sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  std::string id;     // the last `id:` field without a NUL seen in this event, if any
  std::optional<std::int64_t> retry_ms;  // the last all-digit `retry:` that fits in int64
  std::vector<std::pair<std::string, std::string>> unknown_fields;  // (name, value) in order

  bool operator==(const SseEvent&) const = default;
};

class SseDecoder {
 public:
  static constexpr std::size_t kDefaultMaxEventBytes = 16 * 1024 * 1024;

  explicit SseDecoder(std::size_t max_event_bytes = kDefaultMaxEventBytes)
      : max_event_bytes_(max_event_bytes) {}

  // Appends the bytes of one network read and appends every event they complete to `out`.
  // Bytes after the last complete line are kept for the next call; complete lines are parsed in
  // place, never copied. Returns a kProtocol error if the pending event's fields plus the current
  // line (terminated or not) would exceed max_event_bytes, so buffered memory stays below the
  // limit and no event's fields (data, event, id, unknown names and values) total more than it;
  // events completed before that line are still appended. After an error every Feed
  // returns an error. How `bytes` is split across calls never changes the events or the error.
  // REQUIRES: Finish() has not been called; out != nullptr.
  Status Feed(std::string_view bytes, std::vector<SseEvent>* out);

  // The same, handing each completed event to `on_event` instead of a vector. The event is the
  // decoder's own buffer: valid during the call only, and its buffers are reused for the next
  // event, so a steady stream allocates nothing per event (the load generator's hot path).
  using EventHandler = std::function<void(SseEvent&)>;
  Status FeedEach(std::string_view bytes, const EventHandler& on_event);

  // Ends the stream. Per the spec an incomplete event at end of stream is discarded; this returns
  // true if such trailing bytes were pending (an unterminated line, or field lines not yet
  // followed by a blank line) so the caller can report "stream cut mid-event".
  // REQUIRES: Finish() has not been called.
  bool Finish();

  // Comment lines (": keep-alive") seen so far.
  std::uint64_t comment_count() const { return comment_count_; }

 private:
  // Consumes a partial UTF-8 BOM at the start of the stream; returns the bytes left to parse
  // (empty while the first three bytes are still a BOM prefix).
  std::string_view SkipBom(std::string_view bytes);
  // Fails the decoder if a line of `line_bytes` on top of the pending event would pass the limit.
  Status CheckLimit(std::size_t line_bytes);
  void ProcessLine(std::string_view line, const EventHandler& on_event);
  void Dispatch(const EventHandler& on_event);
  std::size_t PendingBytes() const {
    return pending_.data.size() + pending_.event.size() + pending_.id.size() + unknown_bytes_;
  }

  std::size_t max_event_bytes_;
  std::string line_;               // the current unterminated line (or a partial BOM)
  SseEvent pending_;               // fields of the event being built
  std::size_t unknown_bytes_ = 0;  // name + value bytes in pending_.unknown_fields
  bool has_pending_ = false;       // any field line seen since the last blank line
  bool data_seen_ = false;         // at least one data line in pending_
  bool last_was_cr_ = false;       // previous chunk ended in CR (a following LF belongs to it)
  bool bom_checked_ = false;
  std::uint64_t comment_count_ = 0;
  bool failed_ = false;
  bool finished_ = false;
};

}  // namespace bakeoff::net
