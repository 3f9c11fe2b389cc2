// core/ascii.h
//
// Owns: ASCII case folding for protocol words (header and metric names, engine and feature
// names), which compare case-insensitively whatever the locale.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace bakeoff {

// `text` with A-Z lowered; every other byte (UTF-8 included) unchanged.
inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace bakeoff
