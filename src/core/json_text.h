// core/json_text.h
//
// Owns: writing text into JSON string literals (RFC 8259 section 7) for the hot paths that write
// JSON directly instead of building a document (request bodies, raw records, traces), and the
// UTF-8 sequence check they share.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bakeoff {

// Appends `"text"`: quotes, backslashes and control characters below 0x20 escaped, everything
// else copied. Invalid UTF-8 is replaced byte by byte with U+FFFD, so the result is always valid
// JSON (every server's decoder would reject the raw bytes). ASCII without escapes is scanned 8
// bytes at a time, so a 300 KB prompt costs well under a millisecond.
void AppendJsonString(std::string& out, std::string_view text);

// Length of the valid UTF-8 sequence starting at text[i], or 0 if the bytes there are not one
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). REQUIRES: i < text.size().
std::size_t Utf8SequenceLength(std::string_view text, std::size_t i);

}  // namespace bakeoff
