// workload/importers_common.cc
//
// Owns: the out-of-line part of what every trace importer shares (workload/importers_common.h):
// quoting values for messages, date-times, the names of time units and problems, and the JSON
// field helpers.
#include "workload/importers_common.h"

#include "core/json_text.h"

namespace bakeoff::workload::importers_internal {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse, computed with
// 400-year eras so it is exact for every year).
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, std::size_t pos, std::size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// Text of an OpenAI message "content": a string, or an array of parts whose "text" is joined.
bool ContentText(dom::element content, std::string* out) {
  std::string_view s;
  if (content.get_string().get(s) == simdjson::SUCCESS) {
    out->append(s);
    return true;
  }
  if (content.is_null()) return true;
  dom::array parts;
  if (content.get_array().get(parts) != simdjson::SUCCESS) return false;
  for (dom::element part : parts) {
    std::string_view text;
    if (part.get_string().get(text) == simdjson::SUCCESS ||
        part["text"].get_string().get(text) == simdjson::SUCCESS) {
      out->append(text);
    }
  }
  return true;
}

}  // namespace

std::string Shown(std::string_view value) {
  std::string out = "\"";
  for (char c : ValidUtf8(Utf8Prefix(value, 40)))
    out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (value.size() > 40) out += "...";
  return out + "\"";
}

std::optional<std::int64_t> ParseWallClock(std::string_view s) {
  s = Trim(s);
  int year, month, day, hour, minute, second;
  if (s.size() < 19 || !Digits(s, 0, 4, &year) || s[4] != '-' || !Digits(s, 5, 2, &month) ||
      s[7] != '-' || !Digits(s, 8, 2, &day) || (s[10] != ' ' && s[10] != 'T') ||
      !Digits(s, 11, 2, &hour) || s[13] != ':' || !Digits(s, 14, 2, &minute) || s[16] != ':' ||
      !Digits(s, 17, 2, &second)) {
    return std::nullopt;
  }
  // Years outside 1900..2200 are rejected: nanoseconds since 1970 in 64 bits end in 2262.
  if (year < 1900 || year > 2200 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
      minute > 59 || second > 60) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  std::int64_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 9) nanos = nanos * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 9; ++i) nanos *= 10;
  }
  std::int64_t offset_s = 0;
  if (pos < s.size()) {
    if (s[pos] == 'Z' && pos + 1 == s.size()) {
      pos = s.size();
    } else if (s[pos] == '+' || s[pos] == '-') {
      const int sign = s[pos] == '-' ? -1 : 1;
      int oh, om;
      if (!Digits(s, pos + 1, 2, &oh)) return std::nullopt;
      std::size_t mpos = pos + 3;
      if (mpos < s.size() && s[mpos] == ':') ++mpos;
      if (!Digits(s, mpos, 2, &om) || mpos + 2 != s.size()) return std::nullopt;
      offset_s = sign * (oh * 3600 + om * 60);
      pos = s.size();
    } else {
      return std::nullopt;
    }
  }
  const std::int64_t days =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return seconds * 1'000'000'000 + nanos;
}

const char* UnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kAuto:
      return "auto";
    case TimeUnit::kSeconds:
      return "seconds";
    case TimeUnit::kMillis:
      return "milliseconds";
    case TimeUnit::kMicros:
      return "microseconds";
    case TimeUnit::kNanos:
      return "nanoseconds";
  }
  return "?";
}

const char* ProblemName(Problem p) {
  switch (p) {
    case Problem::kBadJson:
      return "bad JSON";
    case Problem::kMissingField:
      return "missing field";
    case Problem::kBadNumber:
      return "bad number";
    case Problem::kBadTimestamp:
      return "bad timestamp";
    case Problem::kMixedUnits:
      return "mixed time units";
    case Problem::kColumns:
      return "wrong column count";
    case Problem::kBadValue:
      return "bad value";
  }
  return "?";
}

std::string JsonUint(dom::element value, std::string_view field, std::uint64_t max,
                     std::uint64_t* out) {
  std::uint64_t u;
  std::int64_t i;
  double d;
  if (value.get_uint64().get(u) == simdjson::SUCCESS) {
    *out = u;
  } else if (value.get_int64().get(i) == simdjson::SUCCESS) {
    return fmt::format("field \"{}\" is negative ({})", field, i);
  } else if (value.get_double().get(d) == simdjson::SUCCESS) {
    if (!(d >= 0) || d != std::floor(d) || d > 1.8e19) {
      return fmt::format("field \"{}\" is not a non-negative integer ({})", field, d);
    }
    *out = static_cast<std::uint64_t>(d);
  } else {
    return fmt::format("field \"{}\" is not a number", field);
  }
  if (*out > max) return fmt::format("field \"{}\" is too large ({} > {})", field, *out, max);
  return {};
}

std::string JsonTime(dom::element value, std::string_view field, TimeUnit unit, TimeValue* out,
                     std::string* text_storage) {
  out->unit = unit;
  std::string_view s;
  double d;
  if (value.get_string().get(s) == simdjson::SUCCESS) {
    *text_storage = std::string(s);
    out->text = *text_storage;
    if (auto ns = ParseWallClock(s)) {
      out->wall = true;
      out->wall_ns = *ns;
      return {};
    }
    if (ParseDouble(s, &d)) {
      out->number = d;
      return {};
    }
    return fmt::format("field \"{}\" is not a date-time or a number ({})", field, Shown(s));
  }
  if (value.get_double().get(d) == simdjson::SUCCESS) {
    out->number = d;
    *text_storage = fmt::format("{}", d);
    out->text = *text_storage;
    return {};
  }
  return fmt::format("field \"{}\" is not a timestamp", field);
}

std::string JsonMessages(dom::element value, bool keep, std::vector<ChatMessage>* messages,
                         std::size_t* bytes, std::string* joined) {
  dom::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS)
    return "field \"messages\" is not an array";
  for (dom::element m : array) {
    dom::object obj;
    if (m.get_object().get(obj) != simdjson::SUCCESS) return "a message is not an object";
    std::string_view role;
    if (obj["role"].get_string().get(role) != simdjson::SUCCESS)
      return "a message has no string \"role\"";
    std::string content;
    dom::element c;
    if (obj["content"].get(c) == simdjson::SUCCESS && !ContentText(c, &content)) {
      return "a message \"content\" is neither a string nor an array of parts";
    }
    *bytes += content.size();
    joined->append(role).append("\n").append(content).append("\n");
    if (keep) messages->push_back(ChatMessage{std::string(role), std::move(content)});
  }
  return {};
}

bool ParseLineObject(Import& im, std::string_view line, std::uint64_t number, dom::object* obj,
                     bool* stop) {
  dom::element root;
  if (im.parser().parse(line.data(), line.size(), false).get(root) != simdjson::SUCCESS) {
    *stop = !im.Reject(number, Problem::kBadJson, "not valid JSON");
    return false;
  }
  if (root.get_object().get(*obj) != simdjson::SUCCESS) {
    *stop = !im.Reject(number, Problem::kBadJson, "not a JSON object");
    return false;
  }
  return true;
}

}  // namespace bakeoff::workload::importers_internal
