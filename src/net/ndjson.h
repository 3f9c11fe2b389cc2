// net/ndjson.h
//
// Owns: incremental framing of newline-delimited JSON (Ollama's native streaming API,
// application/x-ndjson): each LF- or CRLF-terminated non-blank line is one record. A line is blank
// if it holds only spaces, tabs and CRs. A lone CR is not a line end (NDJSON uses LF). Does not
// parse the JSON (dialect/ does).
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

  // Appends complete lines (without the LF or CRLF; blank lines skipped) to `out`.
  // Returns a kProtocol error when one line (its bytes before the LF, terminated or not) exceeds
  // max_line_bytes, so buffered memory stays below the limit; lines completed before it are still
  // appended. After an error every Feed returns an error. How `bytes` is split across calls never
  // changes the lines or the error.
  // REQUIRES: Finish() has not been called; out != nullptr.
  Status Feed(std::string_view bytes, std::vector<std::string>* out);

  // Ends the stream; a final non-blank line without a terminator is delivered (many servers omit
  // it), minus one trailing CR. Delivers nothing after a Feed error.
  // REQUIRES: Finish() has not been called; out != nullptr.
  void Finish(std::vector<std::string>* out);

 private:
  Status LimitError() const;
  // Appends `line` (terminator already removed, except a CR before the LF) unless it is blank.
  static void Emit(std::string_view line, std::vector<std::string>* out);

  std::size_t max_line_bytes_;
  std::string line_;  // the current unterminated line
  bool failed_ = false;
  bool finished_ = false;
};

}  // namespace bakeoff::net
