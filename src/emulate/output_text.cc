// emulate/output_text.cc: output pieces, stop strings, minimal JSON instances, logprob figures
// and the --answers file (contract in output_text.h).
#include "emulate/output_text.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"

namespace bakeoff::emulate {

namespace {

using nlohmann::json;

// "café naïve € 😀 " cut into pieces at byte boundaries inside each multibyte character.
constexpr std::string_view kCutPieces[] = {"caf\xC3", "\xA9 na\xC3", "\xAFve \xE2\x82", "\xAC \xF0\x9F", "\x98\x80 "};

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// SplitMix64 finaliser, for the logprob figures.
std::uint64_t Hash(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

ChoiceText ChoiceText::Words(std::uint64_t seed) {
  ChoiceText text;
  text.seed_ = seed;
  return text;
}

ChoiceText ChoiceText::CutUtf8() {
  ChoiceText text;
  text.cut_utf8_ = true;
  return text;
}

ChoiceText ChoiceText::Fixed(std::string_view text, FinishReason finish) {
  // Piece boundaries: the start of every token but the first, moved past UTF-8 continuation
  // bytes so that each piece is valid UTF-8 when the text is.
  std::vector<std::size_t> starts = {0};
  const std::vector<std::string_view> tokens = TokenPieces(text);
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    std::size_t at = static_cast<std::size_t>(tokens[t].data() - text.data());
    while (at < text.size() && IsUtf8Continuation(text[at])) ++at;
    starts.push_back(std::max(at, starts.back()));
  }
  std::vector<std::string> pieces;
  pieces.reserve(starts.size());
  for (std::size_t t = 0; t < starts.size(); ++t) {
    const std::size_t end = t + 1 < starts.size() ? starts[t + 1] : text.size();
    pieces.emplace_back(text.substr(starts[t], end - starts[t]));
  }
  ChoiceText out;
  out.SetPieces(std::move(pieces), finish);
  return out;
}

void ChoiceText::SetPieces(std::vector<std::string> pieces, FinishReason finish) {
  pieces_ = std::move(pieces);
  json_pieces_.clear();
  json_pieces_.reserve(pieces_.size());
  for (const std::string& piece : pieces_) json_pieces_.push_back(JsonEscape(piece));
  finish_ = finish;
}

std::string_view ChoiceText::Piece(std::int64_t index) const {
  if (cut_utf8_) return kCutPieces[static_cast<std::size_t>(index) % std::size(kCutPieces)];
  if (pieces_.empty()) return OutputPiece(seed_, static_cast<std::uint64_t>(index));
  return pieces_[static_cast<std::size_t>(index)];
}

std::string_view ChoiceText::JsonPiece(std::int64_t index) const {
  if (cut_utf8_) return Piece(index);  // nothing to escape, and the cut bytes go out raw
  if (pieces_.empty()) return OutputPiece(seed_, static_cast<std::uint64_t>(index));
  return json_pieces_[static_cast<std::size_t>(index)];
}

std::optional<std::int64_t> ChoiceText::natural_tokens() const {
  if (pieces_.empty()) return std::nullopt;
  return static_cast<std::int64_t>(pieces_.size());
}

void ChoiceText::ApplyStop(const std::vector<std::string>& stop, std::int64_t max_tokens) {
  std::size_t longest = 0;
  for (const std::string& s : stop) longest = std::max(longest, s.size());
  if (longest == 0) return;
  std::int64_t limit = max_tokens;
  if (auto natural = natural_tokens()) limit = std::min(limit, *natural);
  // Grow the text a token at a time and look for a match that ends in the newest piece (the
  // search starts early enough to catch one that began in earlier pieces).
  std::string text;
  std::vector<std::size_t> ends;  // text.size() after each piece
  for (std::int64_t i = 0; i < limit; ++i) {
    const std::size_t before = text.size();
    text += Piece(i);
    ends.push_back(text.size());
    const std::size_t from = before >= longest ? before - longest + 1 : 0;
    std::size_t match = std::string::npos;
    for (const std::string& s : stop) {
      if (s.empty()) continue;
      const std::size_t at = text.find(s, from);
      if (at != std::string::npos && at + s.size() <= text.size()) match = std::min(match, at);
    }
    if (match == std::string::npos) continue;
    // Output ends at token i (the one that completed the match); pieces clipped at `match`.
    std::vector<std::string> pieces;
    pieces.reserve(static_cast<std::size_t>(i + 1));
    std::size_t start = 0;
    for (std::int64_t t = 0; t <= i; ++t) {
      const std::size_t end = ends[static_cast<std::size_t>(t)];
      const std::size_t clip_end = std::min(end, match);
      pieces.push_back(clip_end > start ? text.substr(start, clip_end - start) : std::string());
      start = end;
    }
    SetPieces(std::move(pieces), FinishReason::kStop);
    return;
  }
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

json MinimalJsonInstance(const json& schema) {
  if (!schema.is_object()) return json::object();
  if (auto it = schema.find("const"); it != schema.end()) return *it;
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array() && !it->empty()) {
    return (*it)[0];
  }
  for (const char* branch : {"anyOf", "oneOf", "allOf"}) {
    if (auto it = schema.find(branch); it != schema.end() && it->is_array() && !it->empty()) {
      return MinimalJsonInstance((*it)[0]);
    }
  }
  std::string type;
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) {
      type = it->get<std::string>();
    } else if (it->is_array() && !it->empty() && (*it)[0].is_string()) {
      type = (*it)[0].get<std::string>();
    }
  }
  if (type.empty()) {
    if (schema.contains("properties")) type = "object";
    if (schema.contains("items")) type = "array";
  }
  auto number_at_least = [&](bool integer) -> json {
    double value = 0;
    bool exclusive = false;
    if (auto it = schema.find("minimum"); it != schema.end() && it->is_number()) {
      value = it->get<double>();
    }
    if (auto it = schema.find("exclusiveMinimum"); it != schema.end() && it->is_number()) {
      value = it->get<double>();
      exclusive = true;
    }
    if (integer) {
      std::int64_t v = static_cast<std::int64_t>(std::ceil(value));
      if (exclusive && static_cast<double>(v) <= value) ++v;
      return v;
    }
    return exclusive ? value + 1 : value;
  };
  if (type == "object") {
    json out = json::object();
    auto properties = schema.find("properties");
    auto required = schema.find("required");
    if (properties != schema.end() && properties->is_object()) {
      for (const auto& [name, sub] : properties->items()) {
        const bool wanted =
            required == schema.end() || !required->is_array() ||
            std::find(required->begin(), required->end(), json(name)) != required->end();
        if (wanted) out[name] = MinimalJsonInstance(sub);
      }
    }
    // A required name without a property schema still has to be present.
    if (required != schema.end() && required->is_array()) {
      for (const json& name : *required) {
        if (name.is_string() && !out.contains(name.get<std::string>()))
          out[name.get<std::string>()] = "";
      }
    }
    return out;
  }
  if (type == "array") {
    json out = json::array();
    std::int64_t count = 0;
    if (auto it = schema.find("minItems"); it != schema.end() && it->is_number_integer()) {
      count = it->get<std::int64_t>();
    }
    const json items = schema.contains("items") ? schema["items"] : json::object();
    for (std::int64_t i = 0; i < std::min<std::int64_t>(count, 1000); ++i) {
      out.push_back(MinimalJsonInstance(items));
    }
    return out;
  }
  if (type == "string") {
    std::size_t length = 4;
    if (auto it = schema.find("minLength"); it != schema.end() && it->is_number_integer()) {
      length = std::max<std::size_t>(length, it->get<std::size_t>());
    }
    if (auto it = schema.find("maxLength"); it != schema.end() && it->is_number_integer()) {
      length = std::min<std::size_t>(length, it->get<std::size_t>());
    }
    std::string text = "text";
    text.resize(std::min<std::size_t>(length, 100000), 'a');
    return text;
  }
  if (type == "integer") return number_at_least(true);
  if (type == "number") return number_at_least(false);
  if (type == "boolean") return true;
  if (type == "null") return nullptr;
  return json::object();
}

double TokenLogprob(std::uint64_t seed, std::int64_t index) {
  const std::uint64_t h = Hash(seed * 0x100000001b3ULL + static_cast<std::uint64_t>(index) + 17);
  // (0, 2.5): four decimals so renderings are short and exact.
  return -static_cast<double>(1 + h % 25000) / 10000.0;
}

double AlternativeLogprob(std::uint64_t seed, std::int64_t index, std::int64_t k) {
  return TokenLogprob(seed, index) - 0.5 * static_cast<double>(k);
}

std::string_view AlternativePiece(std::string_view piece, std::uint64_t seed, std::int64_t index,
                                  std::int64_t k) {
  for (std::uint64_t salt = static_cast<std::uint64_t>(k);; salt += 1000003) {
    std::string_view word = OutputPiece(seed ^ Hash(salt), static_cast<std::uint64_t>(index));
    if (word != piece) return word;
  }
}

Result<AnswerTable> LoadAnswers(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kIo, fmt::format("{}: cannot be read", path));
  AnswerTable answers;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](std::string_view why) {
      return MakeError(ErrorCode::kInvalidInput, fmt::format("{}:{}: {}", path, number, why));
    };
    if (doc.is_discarded()) return bad("not valid JSON");
    if (!doc.is_object()) return bad("not a JSON object");
    auto prompt = doc.find("prompt");
    auto answer = doc.find("answer");
    if (prompt == doc.end() || !prompt->is_string())
      return bad("field \"prompt\" must be a string");
    if (answer == doc.end() || !answer->is_string())
      return bad("field \"answer\" must be a string");
    answers[prompt->get<std::string>()] = answer->get<std::string>();
  }
  if (in.bad()) return MakeError(ErrorCode::kIo, fmt::format("{}: read error", path));
  return answers;
}

}  // namespace bakeoff::emulate
