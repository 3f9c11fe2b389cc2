// core/json_text.h
//
// Owns: writing text into JSON string literals (RFC 8259 section 7) for the hot paths that write
// JSON directly instead of building a document (request bodies, raw records, traces), the UTF-8
// sequence check they share, and the two functions every quote of foreign text (a server's
// output or error body, a log line, a trace field) goes through before bakeoff writes it:
// ValidUtf8 and Utf8Prefix.
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

// `text` with every byte that does not belong to a valid UTF-8 sequence replaced by U+FFFD; the
// number replaced is added to `*replaced` when given. Valid text is returned unchanged.
std::string ValidUtf8(std::string_view text, std::size_t* replaced = nullptr);

// The longest prefix of `text` of at most `max_bytes` that does not end inside a UTF-8 sequence,
// so a quote cut for length never splits a character.
std::string_view Utf8Prefix(std::string_view text, std::size_t max_bytes);

}  // namespace bakeoff
