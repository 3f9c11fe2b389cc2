// target/clock_offset.h
//
// Owns: how far this machine's wall clock is from the target's, read from its HTTP Date headers
// (RFC 9110 5.6.7), for the shards of one load (bench --shard --start-at): each shard starts at an
// instant of its own clock, so their skew against the one server they load is what matters. A Date
// header has a resolution of one second, so GETs are sent back to back until its value turns over:
// the server's clock read D+1 s at the turn, which fell after the send of the last answer still
// dated D and before the receipt of the first dated D+1; the offset is D+1 s minus the middle of
// that window, give or take half its width.
// Does not own: the HTTP exchange (net::Fetch), what a run does with the offset (run/bench.cc).
//
// Thread-safety: MeasureClockOffset blocks its caller; ParseHttpDate is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/result.h"
#include "net/http_client.h"

namespace bakeoff::target {

// "Sun, 06 Nov 1994 08:49:37 GMT" as nanoseconds since 1970 (UTC); nullopt for anything else.
std::optional<std::int64_t> ParseHttpDate(std::string_view text);

struct ClockOffset {
  double offset_ms = 0;       // the target's clock minus this machine's
  double uncertainty_ms = 0;  // half the window the turn of the second fell in
  int requests = 0;
  std::string path;
};

// Errors: kUnavailable when the target sends no Date header, or its second did not turn within
// `budget`; the transport's errors otherwise.
Result<ClockOffset> MeasureClockOffset(const net::Endpoint& endpoint, const net::ClientOptions& client,
                                       std::string path = "/v1/models", Nanos budget = std::chrono::seconds(3));

}  // namespace bakeoff::target
