// net/ndjson.h
//
// Owns: incremental framing of newline-delimited JSON (Ollama's native streaming API,
// application/x-ndjson): each LF- or CRLF-terminated non-blank line is one record. Does not parse
// the JSON (dialect/ does).
//
// Thread-safety: one decoder per stream, used by one thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace bakeoff::net {

class NdjsonDecoder {
 public:
  static constexpr std::size_t kDefaultMaxLineBytes = 16 * 1024 * 1024;

  explicit NdjsonDecoder(std::size_t max_line_bytes = kDefaultMaxLineBytes)
      : max_line_bytes_(max_line_bytes) {}

  // Appends complete lines (without the terminator; blank lines skipped) to `out`.
  // Returns a kProtocol error when one line exceeds max_line_bytes.
  Status Feed(std::string_view bytes, std::vector<std::string>* out);

  // Ends the stream; a final line without a terminator is delivered (many servers omit it).
  void Finish(std::vector<std::string>* out);

 private:
  std::size_t max_line_bytes_;
  std::string line_;
  bool failed_ = false;
};

}  // namespace bakeoff::net
