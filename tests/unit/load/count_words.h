// tests/unit/load/count_words.h
//
// Owns: counting the whitespace-separated words of a generated prompt, as the prompt tests check
// their lengths.
#pragma once

#include <cstddef>
#include <sstream>
#include <string>

namespace bakeoff::load {

inline std::size_t CountWords(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string word; in >> word;) ++n;
  return n;
}

}  // namespace bakeoff::load
