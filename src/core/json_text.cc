#include "core/json_text.h"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace bakeoff {
namespace {

// Bytes that cannot appear raw inside a JSON string.
constexpr std::array<bool, 256> kNeedsEscape = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = true;
  table['"'] = true;
  table['\\'] = true;
  return table;
}();

void AppendEscapedByte(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out.append("\\\""); return;
    case '\\': out.append("\\\\"); return;
    case '\n': out.append("\\n"); return;
    case '\r': out.append("\\r"); return;
    case '\t': out.append("\\t"); return;
    case '\b': out.append("\\b"); return;
    case '\f': out.append("\\f"); return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out.append(u, sizeof u);
    }
  }
}

// A mask with the high bit set in each of the 8 bytes of `word` (little-endian) that needs a
// closer look: below 0x20, '"', '\\', or >= 0x80 (the start or middle of a UTF-8 sequence). The
// SWAR "byte less than n" and "byte equal to zero" tests can only mark bytes above a true hit
// through a borrow, so the lowest set bit is always exact.
constexpr std::uint64_t SpecialMask(std::uint64_t word) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  constexpr std::uint64_t kHighs = 0x8080808080808080ull;
  const auto zero_bytes = [](std::uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  const std::uint64_t below_space = (word - kOnes * 0x20) & ~word & kHighs;
  return below_space | zero_bytes(word ^ (kOnes * '"')) | zero_bytes(word ^ (kOnes * '\\')) |
         (word & kHighs);
}

static_assert(SpecialMask(0x6867666564636261ull) == 0);             // "abcdefgh"
static_assert(SpecialMask(0x68676665640a6261ull) >> 16 == 0x80);    // "ab\ndefgh": byte 2 first
static_assert(SpecialMask(0x2267666564636261ull) == 0x80ull << 56);  // "abcdefg\""
static_assert(SpecialMask(0x5c67666564636261ull) == 0x80ull << 56);  // "abcdefg\\"
static_assert(SpecialMask(0x68676665a4c36261ull) >> 16 == 0x8080);   // "ab\u00e4efgh"

}  // namespace

std::size_t Utf8SequenceLength(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  const auto cont = [&](std::size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

std::string ValidUtf8(std::string_view text, std::size_t* replaced) {
  std::string out;
  out.reserve(text.size());
  std::size_t count = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (const std::size_t n = Utf8SequenceLength(text, i); n != 0) {
      out.append(text.data() + i, n);
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      ++count;
      ++i;
    }
  }
  if (replaced != nullptr) *replaced += count;
  return out;
}

std::string_view Utf8Prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t cut = max_bytes;
  // Back off over continuation bytes (10xxxxxx) to the start of the character the cut lands in;
  // a sequence is at most 4 bytes, so more than 3 of them in a row are not one character.
  for (int step = 0; step < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++step) --cut;
  if ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut = max_bytes;  // not UTF-8 anyway
  return text.substr(0, cut);
}

void AppendJsonString(std::string& out, std::string_view text) {
  out.push_back('"');
  const char* data = text.data();
  const std::size_t size = text.size();
  std::size_t run_start = 0;  // start of the bytes not yet copied
  std::size_t i = 0;
  while (i < size) {
    if (i + 8 <= size) {
      std::uint64_t word;
      std::memcpy(&word, data + i, sizeof word);
      if constexpr (std::endian::native == std::endian::little) {
        const std::uint64_t mask = SpecialMask(word);
        if (mask == 0) {
          i += 8;
          continue;
        }
        i += static_cast<std::size_t>(std::countr_zero(mask)) / 8;  // the first special byte
      } else if (SpecialMask(word) == 0) {
        i += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(data[i]);
    if (kNeedsEscape[c]) {
      out.append(data + run_start, i - run_start);
      AppendEscapedByte(out, c);
      run_start = ++i;
    } else if (c < 0x80) {
      ++i;
    } else if (const std::size_t n = Utf8SequenceLength(text, i); n != 0) {
      i += n;
    } else {
      out.append(data + run_start, i - run_start);
      out.append("\xEF\xBF\xBD");
      run_start = ++i;
    }
  }
  out.append(data + run_start, size - run_start);
  out.push_back('"');
}

}  // namespace bakeoff
