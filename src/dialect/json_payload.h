// dialect/json_payload.h (internal to dialect/)
//
// Owns: what every dialect's decoder shares: one simdjson DOM parser and padded buffer per
// thread, parsing a payload into an object (invalid UTF-8 read as '?', and said so), reading
// optional strings and counts, error messages capped and quoted safely, and the integer and
// double writers of the hand-written request encoders.
//
// Thread-safety: the scratch is thread-local; everything else is pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "core/result.h"

namespace bakeoff::dialect::internal {

namespace dom = simdjson::dom;

// A reason for rejecting a payload, or nullptr when it was read.
using Reason = const char*;

inline constexpr std::size_t kMaxErrorMessageBytes = 1024;  // engines may echo the whole prompt

// One parser and padded buffer per thread, shared by every decoder on it. A load worker decodes
// one payload at a time on its thread, and a parser keeps about 13 KiB, which kept per stream
// would dominate the client's memory at 10,000 open streams (docs/BENCHMARKS.md).
struct ParseScratch {
  dom::parser parser;
  std::unique_ptr<char[]> padded;  // copy of the payload + SIMDJSON_PADDING, grown as needed
  std::size_t padded_capacity = 0;
  char* PaddedBuffer(std::size_t size);
};
ParseScratch& ThreadParseScratch();

// Parses `data` as a JSON object into a padded copy at `padded` (size + SIMDJSON_PADDING bytes),
// or says why not. Text that is not valid UTF-8 (an engine can cut a multi-byte character between
// two tokens) is parsed with the bad bytes replaced by '?', and `invalid_utf8` says so.
Reason ParseObject(dom::parser& parser, std::string_view data, char* padded, dom::object& root,
                   bool* invalid_utf8 = nullptr);

// `label: what (N bytes: <at most 200 bytes of the payload, made safe>)`, kProtocol.
Error PayloadError(std::string_view label, std::string_view what, std::string_view payload);

// `message` cut at a character boundary to kMaxErrorMessageBytes, "..." when cut.
std::string CapMessage(std::string_view message);

// string or null -> view ("" for null); anything else is malformed.
bool ReadOptionalString(dom::element value, std::string_view& out);
// non-negative integer or null (-> 0).
bool ReadCount(dom::element value, std::uint64_t& out);

std::string_view TrimSpace(std::string_view s);

void AppendUnsigned(std::string& out, std::uint64_t value);
// Shortest text that reads back as the same double. REQUIRES: finite.
void AppendDouble(std::string& out, double value);

}  // namespace bakeoff::dialect::internal
