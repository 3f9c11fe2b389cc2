// core/json_text.h
//
// Owns: escaping a string as a JSON string literal (RFC 8259 section 7), for the few hot paths
// that write JSON text directly instead of building a document.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace bakeoff {

// Appends `"text"` with quotes, backslashes and control characters escaped. Bytes >= 0x80 are
// copied as they are (the input is assumed UTF-8; invalid UTF-8 is replaced by U+FFFD).
void AppendJsonString(std::string& out, std::string_view text);

}  // namespace bakeoff
