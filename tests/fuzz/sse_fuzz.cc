// tests/fuzz/sse_fuzz.cc
//
// Owns: the libFuzzer harness for net::SseDecoder. The first input byte picks the size limit and
// a split point; the rest is the stream. Invariants checked: the stream fed whole, in two pieces
// and byte by byte gives the same events, the same error verdict and the same comment count; no
// event is larger than the limit; no event carries an `id` with a NUL.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "net/sse.h"

namespace {

using bakeoff::Status;
using bakeoff::net::SseDecoder;
using bakeoff::net::SseEvent;

struct Decoded {
  std::vector<SseEvent> events;
  bool ok = true;
  bool cut_mid_event = false;
  std::uint64_t comments = 0;
};

Decoded DecodePieces(const std::vector<std::string_view>& pieces, std::size_t max_event_bytes) {
  SseDecoder decoder(max_event_bytes);
  Decoded result;
  for (const std::string_view piece : pieces) {
    const Status status = decoder.Feed(piece, &result.events);
    if (!status.ok()) {
      BAKEOFF_CHECK(status.error().code == bakeoff::ErrorCode::kProtocol);
      result.ok = false;
      break;
    }
  }
  result.cut_mid_event = decoder.Finish();
  result.comments = decoder.comment_count();
  return result;
}

std::size_t EventBytes(const SseEvent& e) {
  std::size_t bytes = e.data.size() + e.event.size() + e.id.size();
  for (const auto& [name, value] : e.unknown_fields) bytes += name.size() + value.size();
  return bytes;
}

void ExpectSame(const Decoded& a, const Decoded& b, const char* how) {
  BAKEOFF_CHECK(a.ok == b.ok) << how << ": error verdict differs";
  BAKEOFF_CHECK(a.events == b.events) << how << ": events differ";
  BAKEOFF_CHECK(a.comments == b.comments) << how << ": comment counts differ";
  // After an error a split feed may hold part of a line the whole feed never buffered.
  if (a.ok) BAKEOFF_CHECK(a.cut_mid_event == b.cut_mid_event) << how << ": Finish() differs";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t control = data[0];
  const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  // Low bit: a small limit (reachable by short inputs) or the default one.
  const std::size_t limit = (control & 1) ? 48 : SseDecoder::kDefaultMaxEventBytes;
  const std::size_t cut = wire.size() * (control >> 1) / 127;

  const Decoded whole = DecodePieces({wire}, limit);
  for (const SseEvent& e : whole.events) {
    BAKEOFF_CHECK(EventBytes(e) <= limit) << "event of " << EventBytes(e) << " bytes";
    BAKEOFF_CHECK(e.id.find('\0') == std::string::npos);
    BAKEOFF_CHECK(!e.retry_ms || *e.retry_ms >= 0);
  }
  ExpectSame(whole, DecodePieces({wire.substr(0, cut), wire.substr(cut)}, limit), "two pieces");

  std::vector<std::string_view> bytes;
  bytes.reserve(wire.size());
  for (std::size_t i = 0; i < wire.size(); ++i) bytes.push_back(wire.substr(i, 1));
  ExpectSame(whole, DecodePieces(bytes, limit), "byte by byte");
  return 0;
}
