// tests/fuzz/ndjson_fuzz.cc
//
// Owns: the libFuzzer harness for net::NdjsonDecoder. The first input byte picks the size limit
// and a split point; the rest is the stream. Invariants checked: the stream fed whole, in two
// pieces and byte by byte gives the same lines and the same error verdict; no line is larger
// than the limit, holds an LF, or is blank.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "net/ndjson.h"

namespace {

using bakeoff::Status;
using bakeoff::net::NdjsonDecoder;

struct Decoded {
  std::vector<std::string> lines;
  bool ok = true;
};

Decoded DecodePieces(const std::vector<std::string_view>& pieces, std::size_t max_line_bytes) {
  NdjsonDecoder decoder(max_line_bytes);
  Decoded result;
  for (const std::string_view piece : pieces) {
    const Status status = decoder.Feed(piece, &result.lines);
    if (!status.ok()) {
      BAKEOFF_CHECK(status.error().code == bakeoff::ErrorCode::kProtocol);
      result.ok = false;
      break;
    }
  }
  decoder.Finish(&result.lines);
  return result;
}

void ExpectSame(const Decoded& a, const Decoded& b, const char* how) {
  BAKEOFF_CHECK(a.ok == b.ok) << how << ": error verdict differs";
  BAKEOFF_CHECK(a.lines == b.lines) << how << ": lines differ";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t control = data[0];
  const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t limit = (control & 1) ? 48 : NdjsonDecoder::kDefaultMaxLineBytes;
  const std::size_t cut = wire.size() * (control >> 1) / 127;

  const Decoded whole = DecodePieces({wire}, limit);
  for (const std::string& line : whole.lines) {
    BAKEOFF_CHECK(line.size() <= limit) << "line of " << line.size() << " bytes";
    BAKEOFF_CHECK(line.find('\n') == std::string::npos);
    BAKEOFF_CHECK(line.find_first_not_of(" \t\r") != std::string::npos) << "blank line delivered";
  }
  ExpectSame(whole, DecodePieces({wire.substr(0, cut), wire.substr(cut)}, limit), "two pieces");

  std::vector<std::string_view> bytes;
  bytes.reserve(wire.size());
  for (std::size_t i = 0; i < wire.size(); ++i) bytes.push_back(wire.substr(i, 1));
  ExpectSame(whole, DecodePieces(bytes, limit), "byte by byte");
  return 0;
}
