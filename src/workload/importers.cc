// workload/importers.cc
//
// Owns: the line reader, the per-format row parsers and the checks every format shares
// (timestamps and their units, ordering, skip accounting). Column names follow the public
// datasets' documentation (Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md,
// HPMLL/BurstGPT, kvcache-ai/Mooncake FAST25-release/traces); docs/formats/trace.md lists them.
//
// JSON rows are parsed with the simdjson DOM parser rather than On Demand, for the reason given in
// dialect/openai.cc: the DOM parser dispatches at run time to the best SIMD kernel. Each line is
// parsed in place: the read buffer keeps SIMDJSON_PADDING spare bytes after its end. Mooncake
// rows of the plain shape take a hand-written fast path first (PlainMooncakeRow), which accepts
// only rows the DOM path reads to the same values and hands every other line to it.
#include "workload/importers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "core/file.h"
#include "core/json_text.h"
#include "workload/trace_input.h"

namespace bakeoff::workload {

namespace dom = simdjson::dom;

namespace {

constexpr std::size_t kInitialBufferBytes = std::size_t{1} << 22;
constexpr std::uint32_t kMooncakeBlockTokens = 512;
constexpr std::uint32_t kDefaultTextBlockTokens = 16;

// ---------------------------------------------------------------------------------------------
// Small parsing helpers.

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Quotes a value for a message, cut to 40 bytes so a corrupt line cannot flood the terminal.
std::string Shown(std::string_view value) {
  std::string out = "\"";
  for (char c : ValidUtf8(Utf8Prefix(value, 40))) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (value.size() > 40) out += "...";
  return out + "\"";
}

bool ParseU64(std::string_view s, std::uint64_t* out) {
  s = Trim(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* out) {
  s = Trim(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*out);
}

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

// "YYYY-MM-DD HH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM|+HHMM]" (a 'T' may replace the space), as Unix
// nanoseconds. Azure's 2023 trace writes 7 fractional digits and no zone (read as UTC); the 2024
// trace appends "+00:00".
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

double UnitSeconds(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMillis:
      return 1e-3;
    case TimeUnit::kMicros:
      return 1e-6;
    case TimeUnit::kNanos:
      return 1e-9;
    default:
      return 1.0;
  }
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

// For a value of 1e8 or more read as a Unix epoch time: 0 seconds, 1 ms, 2 us, 3 ns.
int EpochClass(double raw) {
  if (raw < 1e11) return 0;
  if (raw < 1e14) return 1;
  if (raw < 1e17) return 2;
  return 3;
}

constexpr double kEpochThreshold = 1e8;

// One timestamp as the source wrote it.
struct TimeValue {
  bool wall = false;         // a date-time string
  std::int64_t wall_ns = 0;  // when wall
  double number = 0;         // when !wall, in `unit`
  TimeUnit unit = TimeUnit::kAuto;
  bool since_start = false;  // the format defines numbers as time since the trace's start: no
                             // epoch guessing and no unit-change heuristics
  std::string_view text;     // for messages
};

enum class Problem {
  kBadJson,
  kMissingField,
  kBadNumber,
  kBadTimestamp,
  kMixedUnits,
  kColumns,
  kBadValue
};

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

// ---------------------------------------------------------------------------------------------
// One import: skip accounting, timestamps, ordering and delivery of rows.

class Import {
 public:
  Import(std::string_view name, const ImportOptions& options, const RowCallback& on_row,
         ImportReport& report)
      : name_(name), options_(options), on_row_(on_row), report_(report) {}

  const std::string& name() const { return name_; }
  const ImportOptions& options() const { return options_; }
  ImportReport& report() { return report_; }
  bool failed() const { return error_.has_value(); }
  Error TakeError() { return std::move(*error_); }

  std::string Where(std::uint64_t line) const { return fmt::format("{}:{}", name_, line); }

  // Records a malformed row. Returns false when the import must stop.
  bool Reject(std::uint64_t line, Problem problem, std::string_view what) {
    return RejectAt(Where(line), problem, what);
  }
  bool RejectAt(const std::string& where, Problem problem, std::string_view what) {
    std::string message = fmt::format("{}: {}", where, what);
    if (!options_.skip_invalid) {
      error_ = MakeError(ErrorCode::kInvalidInput, std::move(message));
      return false;
    }
    const std::string_view kind = ProblemName(problem);
    for (SkippedRows& s : report_.skipped) {
      if (s.kind == kind) {
        ++s.count;
        return true;
      }
    }
    report_.skipped.push_back(SkippedRows{std::string(kind), 1, std::move(message)});
    return true;
  }

  // Stops the import with an error that is not about one row.
  void Fail(ErrorCode code, std::string message) { error_ = MakeError(code, std::move(message)); }

  // Turns a timestamp into seconds since the first row's, checking that units do not change.
  // Returns false (after Reject) when the row is unusable.
  bool Arrival(std::uint64_t line, const TimeValue& t, double* arrival_s, bool* stop) {
    *stop = false;
    auto reject = [&](Problem p, std::string what) {
      *stop = !Reject(line, p, what);
      return false;
    };
    if (!t.wall && (!std::isfinite(t.number) || t.number < 0)) {
      return reject(Problem::kBadTimestamp,
                    fmt::format("timestamp {} is negative or not finite", Shown(t.text)));
    }
    if (!have_origin_) {
      have_origin_ = true;
      origin_line_ = line;
      origin_text_ = std::string(t.text);
      wall_ = t.wall;
      if (t.wall) {
        origin_ns_ = t.wall_ns;
        report_.origin_unix_ns = t.wall_ns;
      } else {
        unit_ = t.unit;
        since_start_ = t.since_start;
        epoch_class_ = !t.since_start && t.number >= kEpochThreshold ? EpochClass(t.number) : -1;
        if (unit_ == TimeUnit::kAuto) {
          unit_ = epoch_class_ < 0 ? TimeUnit::kSeconds : static_cast<TimeUnit>(epoch_class_ + 1);
          if (epoch_class_ >= 0) {
            report_.notes.push_back(
                fmt::format("timestamps read as Unix epoch {} (first: {} at {})", UnitName(unit_),
                            Shown(t.text), Where(line)));
          }
        }
        origin_seconds_ = t.number * UnitSeconds(unit_);
        if (!since_start_ && origin_seconds_ >= kEpochThreshold) {
          report_.origin_unix_ns = static_cast<std::int64_t>(origin_seconds_ * 1e9);
        } else if (since_start_ && start_unix_ns_) {
          report_.origin_unix_ns =
              *start_unix_ns_ + static_cast<std::int64_t>(std::llround(origin_seconds_ * 1e9));
        }
      }
      previous_number_ = t.number;
      *arrival_s = 0;
      previous_arrival_ = 0;
      return true;
    }
    if (t.wall != wall_) {
      return reject(
          Problem::kMixedUnits,
          fmt::format("timestamp {} is {} but the first row's ({} at {}) is {}", Shown(t.text),
                      t.wall ? "a date-time" : "a number", Shown(origin_text_), Where(origin_line_),
                      wall_ ? "a date-time" : "a number"));
    }
    double arrival;
    if (t.wall) {
      arrival = static_cast<double>(t.wall_ns - origin_ns_) * 1e-9;
    } else {
      const int cls = t.number >= kEpochThreshold ? EpochClass(t.number) : -1;
      const bool epoch_mismatch = !since_start_ && epoch_class_ >= 0 && cls != epoch_class_;
      // A relative clock that suddenly jumps by 1000x into epoch range changed units or origin.
      const bool jump = !since_start_ && epoch_class_ < 0 && t.number >= 1e9 &&
                        t.number >= 1000 * std::max(previous_number_, 1.0);
      if (epoch_mismatch || jump) {
        return reject(
            Problem::kMixedUnits,
            fmt::format("timestamp {} has a different unit or origin than the first row's "
                        "({} at {}, read as {}{})",
                        Shown(t.text), Shown(origin_text_), Where(origin_line_),
                        epoch_class_ >= 0 ? "Unix epoch " : "", UnitName(unit_)));
      }
      arrival = t.number * UnitSeconds(unit_) - origin_seconds_;
      previous_number_ = t.number;
    }
    if (arrival < previous_arrival_) {
      if (report_.rows_out_of_order++ == 0) report_.first_out_of_order = Where(line);
    }
    previous_arrival_ = arrival;
    *arrival_s = arrival;
    return true;
  }

  // True for a blank line, empty or holding only spaces and tabs, which every format ignores (a
  // line of other whitespace is a malformed row); counted for a note, so none goes unmentioned.
  bool Blank(std::string_view line, std::uint64_t number) {
    if (!Trim(line).empty()) return false;
    if (blank_lines_++ == 0) first_blank_line_ = number;
    return true;
  }
  void NoteBlankLines() {
    if (blank_lines_ == 0) return;
    report_.notes.push_back(
        fmt::format("{} blank {} (empty or only spaces and tabs) ignored (first: {})", blank_lines_,
                    blank_lines_ == 1 ? "line" : "lines", Where(first_blank_line_)));
  }

  void Emit(TraceRequest& request, std::uint64_t line) {
    request.source_line = line;
    if (request.tokens_estimated) ++report_.rows_tokens_estimated;
    ++report_.rows;
    on_row_(request, request.prefix_hashes.empty() ? 0 : report_.block_tokens);
  }

  dom::parser& parser() { return parser_; }
  // The wall-clock time at which a since-start clock reads 0 (a canonical trace's origin_utc).
  void set_start_unix_ns(std::int64_t ns) { start_unix_ns_ = ns; }

 private:
  std::string name_;
  const ImportOptions& options_;
  const RowCallback& on_row_;
  ImportReport& report_;
  std::optional<Error> error_;
  dom::parser parser_;

  bool have_origin_ = false;
  bool wall_ = false;
  std::int64_t origin_ns_ = 0;
  double origin_seconds_ = 0;
  std::uint64_t origin_line_ = 0;
  std::string origin_text_;
  TimeUnit unit_ = TimeUnit::kSeconds;
  int epoch_class_ = -1;
  bool since_start_ = false;
  std::optional<std::int64_t> start_unix_ns_;
  double previous_number_ = 0;
  double previous_arrival_ = 0;
  std::uint64_t blank_lines_ = 0;
  std::uint64_t first_blank_line_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Lines. The reader fills a buffer that always has SIMDJSON_PADDING bytes allocated past its
// data, so a JSON line can be parsed where it lies.

using ReadFn = std::function<std::size_t(char*, std::size_t)>;

// Calls on_line(line, number, terminated) for each line (without its LF, CR stripped, numbered
// from 1; terminated: a LF ended it, false only for a last line that the end of the input cut);
// stops when it returns false. Returns false when reading failed.
template <typename OnLine>
bool ForEachLine(const ReadFn& read, OnLine&& on_line) {
  std::size_t capacity = kInitialBufferBytes;
  auto buffer = std::make_unique<char[]>(capacity + simdjson::SIMDJSON_PADDING);
  std::size_t begin = 0, end = 0, scan = 0;
  std::uint64_t number = 0;
  bool eof = false;
  for (;;) {
    const char* nl = static_cast<const char*>(std::memchr(buffer.get() + scan, '\n', end - scan));
    if (nl == nullptr && !eof) {
      if (begin > 0) {
        std::memmove(buffer.get(), buffer.get() + begin, end - begin);
        end -= begin;
        begin = 0;
      }
      if (end == capacity) {  // one line longer than the buffer: grow it
        const std::size_t grown = capacity * 2;
        auto bigger = std::make_unique<char[]>(grown + simdjson::SIMDJSON_PADDING);
        std::memcpy(bigger.get(), buffer.get(), end);
        buffer = std::move(bigger);
        capacity = grown;
      }
      scan = end;
      const std::size_t got = read(buffer.get() + end, capacity - end);
      if (got == static_cast<std::size_t>(-1)) return false;
      if (got == 0) eof = true;
      end += got;
      std::memset(buffer.get() + end, 0, simdjson::SIMDJSON_PADDING);
      continue;
    }
    const std::size_t stop = nl != nullptr ? static_cast<std::size_t>(nl - buffer.get()) : end;
    if (nl == nullptr && begin == end) return true;  // eof and nothing left
    std::string_view line(buffer.get() + begin, stop - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (number == 0 && line.size() >= 3 && std::memcmp(line.data(), "\xEF\xBB\xBF", 3) == 0) {
      line.remove_prefix(3);  // UTF-8 byte order mark
    }
    ++number;
    if (!on_line(line, number, nl != nullptr)) return true;
    begin = scan = (nl != nullptr) ? stop + 1 : end;
    if (nl == nullptr) return true;
  }
}

// ---------------------------------------------------------------------------------------------
// JSON field helpers. Each returns an empty string on success or what is wrong.

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

// Reads [{"role", "content"}...] into messages (when kept) and counts their bytes.
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

std::uint32_t TextBlockTokens(const ImportOptions& options) {
  return options.block_tokens != 0 ? options.block_tokens : kDefaultTextBlockTokens;
}

// ---------------------------------------------------------------------------------------------
// JSONL formats.

struct JsonlState {
  TraceRequest request;
  std::string time_text;
  std::string joined;
  bool header_seen = false;
  bool trace_has_blocks = false;
};

// Parses `line` as a JSON object; on failure rejects the row. Returns true when `obj` is usable.
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

// Resets a Mooncake row for the next line, keeping the prefix id vector's capacity (no allocation
// a row). Only the fields a Mooncake row sets are reset: an import reads one format, and nothing
// else writes this row.
void ResetMooncakeRow(TraceRequest& r) {
  r.arrival_s = 0;
  r.input_tokens = 0;
  r.output_tokens = 0;
  r.prefix_hashes.clear();
}

// The fast path for the plain Mooncake row that real traces and most tools write: one object
// with the keys timestamp, input_length, output_length and optionally hash_ids, each once, in any
// order, whose values are non-negative integers written as plain digits (an array of them for
// hash_ids), with JSON whitespace anywhere between tokens. It accepts only what the DOM path
// below reads to the same row, and declines (returns false; the caller resets the row) anything
// else: another key, a duplicate, an escape, a sign, a fraction or exponent, a leading zero, a
// timestamp of more than 15 digits (beyond them the DOM path's text of the value would differ), a
// length above UINT32_MAX, an id of more than 19 digits, trailing bytes. The DOM path then reads
// the line and reports what is wrong, if anything, exactly as before; importers_test and the fuzzer
// compare the two paths. `timestamp_text` receives the timestamp's digits.
bool PlainMooncakeRow(std::string_view line, TraceRequest& r, double* timestamp_ms,
                      std::string_view* timestamp_text) {
  const char* p = line.data();
  const char* const end = p + line.size();
  auto skip_ws = [&] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  };
  // Plain digits: at least one, no leading zero, at most max_digits. Leaves p after them.
  auto digits = [&](int max_digits, std::uint64_t* out) {
    const char* start = p;
    std::uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(*p - '0');
      ++p;
      if (p - start > max_digits) return false;
    }
    if (p == start || (*start == '0' && p - start > 1)) return false;
    *out = v;
    return true;
  };
  enum : unsigned { kTime = 1, kIn = 2, kOut = 4, kIds = 8 };
  unsigned seen = 0;
  skip_ws();
  if (p == end || *p != '{') return false;
  ++p;
  for (;;) {
    skip_ws();
    if (p == end || *p != '"') return false;
    ++p;
    // The key with its closing quote, compared in place.
    auto key_is = [&](std::string_view quoted) {
      if (static_cast<std::size_t>(end - p) < quoted.size() ||
          std::memcmp(p, quoted.data(), quoted.size()) != 0) {
        return false;
      }
      p += quoted.size();
      return true;
    };
    unsigned key;
    if (key_is("timestamp\""))
      key = kTime;
    else if (key_is("input_length\""))
      key = kIn;
    else if (key_is("output_length\""))
      key = kOut;
    else if (key_is("hash_ids\""))
      key = kIds;
    else
      return false;
    if ((seen & key) != 0) return false;
    seen |= key;
    skip_ws();
    if (p == end || *p != ':') return false;
    ++p;
    skip_ws();
    std::uint64_t v = 0;
    if (key == kIds) {
      if (p == end || *p != '[') return false;
      ++p;
      skip_ws();
      if (p < end && *p == ']') {
        ++p;
      } else {
        for (;;) {
          if (!digits(19, &v)) return false;
          r.prefix_hashes.push_back(v);
          skip_ws();
          if (p == end) return false;
          if (*p == ']') {
            ++p;
            break;
          }
          if (*p != ',') return false;
          ++p;
          skip_ws();
        }
      }
    } else if (key == kTime) {
      const char* start = p;
      if (!digits(15, &v)) return false;
      *timestamp_ms = static_cast<double>(v);
      *timestamp_text = std::string_view(start, static_cast<std::size_t>(p - start));
    } else {
      if (!digits(10, &v) || v > UINT32_MAX) return false;
      (key == kIn ? r.input_tokens : r.output_tokens) = static_cast<std::uint32_t>(v);
    }
    skip_ws();
    if (p == end) return false;
    if (*p == '}') break;
    if (*p != ',') return false;
    ++p;
  }
  ++p;
  skip_ws();
  return p == end && (seen & (kTime | kIn | kOut)) == (kTime | kIn | kOut);
}

// Mooncake: {"timestamp": ms since start, "input_length", "output_length", "hash_ids": [...]}.
bool MooncakeRow(Import& im, JsonlState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  TraceRequest& r = st.request;
  ResetMooncakeRow(r);
  TimeValue t;
  t.unit = TimeUnit::kMillis;
  t.since_start = true;
  if (im.options().fast_paths && PlainMooncakeRow(line, r, &t.number, &t.text)) {
    if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
    im.Emit(r, number);
    return true;
  }
  ResetMooncakeRow(r);
  t = TimeValue{};
  dom::object obj;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  bool have_time = false, have_in = false, have_out = false;
  std::string problem;
  Problem kind = Problem::kBadNumber;
  for (const auto field : obj) {
    const std::string_view key = field.key;
    std::uint64_t v = 0;
    if (key == "timestamp") {
      problem = JsonTime(field.value, key, TimeUnit::kMillis, &t, &st.time_text);
      t.since_start = true;
      if (!problem.empty() || t.wall) {
        if (problem.empty()) problem = "field \"timestamp\" must be milliseconds since the start";
        kind = Problem::kBadTimestamp;
        break;
      }
      have_time = true;
    } else if (key == "input_length") {
      if (!(problem = JsonUint(field.value, key, UINT32_MAX, &v)).empty()) break;
      r.input_tokens = static_cast<std::uint32_t>(v);
      have_in = true;
    } else if (key == "output_length") {
      if (!(problem = JsonUint(field.value, key, UINT32_MAX, &v)).empty()) break;
      r.output_tokens = static_cast<std::uint32_t>(v);
      have_out = true;
    } else if (key == "hash_ids") {
      dom::array ids;
      if (field.value.get_array().get(ids) != simdjson::SUCCESS) {
        problem = "field \"hash_ids\" is not an array";
        break;
      }
      for (dom::element id : ids) {
        if (!(problem = JsonUint(id, "hash_ids", UINT64_MAX, &v)).empty()) break;
        r.prefix_hashes.push_back(v);
      }
      if (!problem.empty()) break;
    }
  }
  if (problem.empty() && !(have_time && have_in && have_out)) {
    kind = Problem::kMissingField;
    problem = fmt::format("missing field \"{}\"", !have_time ? "timestamp"
                                                  : !have_in ? "input_length"
                                                             : "output_length");
  }
  if (!problem.empty()) return im.Reject(number, kind, problem);
  if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
  im.Emit(r, number);
  return true;
}

// bakeoff's canonical JSONL (docs/formats/trace.md): an optional header line, then one request a
// line. Unknown fields are ignored, so newer files stay readable.
bool TraceRow(Import& im, JsonlState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  dom::object obj;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  std::string_view format;
  if (obj["format"].get_string().get(format) == simdjson::SUCCESS) {
    if (format != "bakeoff-trace") {
      return im.Reject(number, Problem::kBadValue,
                       fmt::format("unknown trace format {}", Shown(format)));
    }
    if (st.header_seen || im.report().rows > 0) {
      return im.Reject(number, Problem::kBadValue, "a header line after the first line");
    }
    st.header_seen = true;
    std::uint64_t block = 0;
    dom::element b;
    if (obj["block_tokens"].get(b) == simdjson::SUCCESS) {
      std::string problem = JsonUint(b, "block_tokens", UINT32_MAX, &block);
      if (!problem.empty()) return im.Reject(number, Problem::kBadNumber, problem);
      if (block > 0) {
        im.report().block_tokens = static_cast<std::uint32_t>(block);
        st.trace_has_blocks = true;
      }
    }
    bool known = true;
    if (obj["arrivals_known"].get_bool().get(known) == simdjson::SUCCESS)
      im.report().arrivals_known = known;
    dom::element o;
    if (obj["origin_utc"].get(o) == simdjson::SUCCESS) {
      std::string_view text;
      std::optional<std::int64_t> ns;
      if (o.get_string().get(text) == simdjson::SUCCESS) ns = ParseWallClock(text);
      if (!ns) {
        return im.Reject(number, Problem::kBadTimestamp,
                         "field \"origin_utc\" is not a date-time like \"2023-11-16T18:15:46Z\"");
      }
      im.set_start_unix_ns(*ns);
    }
    return true;
  }
  TraceRequest& r = st.request;
  r = TraceRequest{};
  TimeValue t;
  t.unit = TimeUnit::kSeconds;
  t.since_start = true;
  bool have_time = false, have_in = false, have_out = false;
  std::string problem;
  Problem kind = Problem::kBadValue;
  st.joined.clear();
  std::size_t text_bytes = 0;
  for (const auto field : obj) {
    const std::string_view key = field.key;
    const dom::element value = field.value;
    std::uint64_t v = 0;
    std::string_view s;
    if (key == "arrival_s") {
      double d;
      if (value.get_double().get(d) != simdjson::SUCCESS) {
        kind = Problem::kBadTimestamp;
        problem = "field \"arrival_s\" is not a number";
        break;
      }
      t.number = d;
      st.time_text = fmt::format("{}", d);
      t.text = st.time_text;
      have_time = true;
    } else if (key == "input_tokens" || key == "output_tokens" || key == "turn") {
      if (!(problem = JsonUint(value, key, UINT32_MAX, &v)).empty()) {
        kind = Problem::kBadNumber;
        break;
      }
      const auto u = static_cast<std::uint32_t>(v);
      if (key == "input_tokens")
        r.input_tokens = u, have_in = true;
      else if (key == "output_tokens")
        r.output_tokens = u, have_out = true;
      else
        r.turn = u;
    } else if (key == "priority") {
      std::int64_t p;
      if (value.get_int64().get(p) != simdjson::SUCCESS || p < INT32_MIN || p > INT32_MAX) {
        problem = "field \"priority\" is not a 32-bit integer";
        break;
      }
      r.priority = static_cast<std::int32_t>(p);
    } else if (key == "think_time_s") {
      double d;
      if (value.get_double().get(d) != simdjson::SUCCESS || !(d >= 0)) {
        problem = "field \"think_time_s\" is not a number >= 0";
        break;
      }
      r.think_time_s = d;
    } else if (key == "structured_output") {
      if (value.get_bool().get(r.structured_output) != simdjson::SUCCESS) {
        problem = "field \"structured_output\" is not a boolean";
        break;
      }
    } else if (key == "tokens_estimated") {
      if (value.get_bool().get(r.tokens_estimated) != simdjson::SUCCESS) {
        problem = "field \"tokens_estimated\" is not a boolean";
        break;
      }
    } else if (key == "prompt" || key == "prefix_group" || key == "session_id" || key == "model") {
      if (value.get_string().get(s) != simdjson::SUCCESS) {
        problem = fmt::format("field \"{}\" is not a string", key);
        break;
      }
      if (key == "prompt") {
        text_bytes += s.size();
        st.joined.append(s);
        if (im.options().keep_text) r.prompt = std::string(s);
      } else if (key == "prefix_group") {
        r.prefix_group = std::string(s);
      } else if (key == "session_id") {
        r.session_id = std::string(s);
      } else {
        r.model = std::string(s);
      }
    } else if (key == "messages") {
      if (!(problem =
                JsonMessages(value, im.options().keep_text, &r.messages, &text_bytes, &st.joined))
               .empty())
        break;
    } else if (key == "prefix_hashes") {
      dom::array ids;
      if (value.get_array().get(ids) != simdjson::SUCCESS) {
        problem = "field \"prefix_hashes\" is not an array";
        break;
      }
      for (dom::element id : ids) {
        if (!(problem = JsonUint(id, "prefix_hashes", UINT64_MAX, &v)).empty()) break;
        r.prefix_hashes.push_back(v);
      }
      if (!problem.empty()) {
        kind = Problem::kBadNumber;
        break;
      }
    }
  }
  if (problem.empty() && !(have_time && have_in && have_out)) {
    kind = Problem::kMissingField;
    problem = fmt::format("missing field \"{}\"", !have_time ? "arrival_s"
                                                  : !have_in ? "input_tokens"
                                                             : "output_tokens");
  }
  if (!problem.empty()) return im.Reject(number, kind, problem);
  if (!r.prefix_hashes.empty() && !st.trace_has_blocks) {
    return im.Reject(number, Problem::kBadValue,
                     "field \"prefix_hashes\" needs \"block_tokens\" in the header line");
  }
  if (!st.trace_has_blocks && !st.joined.empty()) {
    im.report().block_tokens = TextBlockTokens(im.options());
    r.prefix_hashes = TextBlockIds(st.joined, im.report().block_tokens);
  }
  if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
  im.Emit(r, number);
  return true;
}

// JSONL log of OpenAI requests: {"timestamp"|"time": ..., "body"|"request": {...},
// "usage"|"response":
// {"usage": ...}, "session_id", "turn"}; a line without "body"/"request" is itself the body.
bool OpenAiLogRow(Import& im, JsonlState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  dom::object obj;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  TraceRequest& r = st.request;
  r = TraceRequest{};
  TimeValue t;
  std::string problem;
  dom::element time_value;
  std::string_view time_key = "timestamp";
  if (obj["timestamp"].get(time_value) != simdjson::SUCCESS) {
    time_key = "time";
    if (obj["time"].get(time_value) != simdjson::SUCCESS) {
      return im.Reject(number, Problem::kMissingField, "missing field \"timestamp\" (or \"time\")");
    }
  }
  problem = JsonTime(time_value, time_key, im.options().time_unit, &t, &st.time_text);
  if (!problem.empty()) return im.Reject(number, Problem::kBadTimestamp, problem);

  dom::object body = obj;
  dom::element b;
  if (obj["body"].get(b) == simdjson::SUCCESS || obj["request"].get(b) == simdjson::SUCCESS) {
    if (b.get_object().get(body) != simdjson::SUCCESS) {
      return im.Reject(number, Problem::kBadValue, "the request body is not an object");
    }
  }
  st.joined.clear();
  std::size_t text_bytes = 0;
  dom::element value;
  bool have_text = false;
  if (body["messages"].get(value) == simdjson::SUCCESS) {
    problem = JsonMessages(value, im.options().keep_text, &r.messages, &text_bytes, &st.joined);
    if (!problem.empty()) return im.Reject(number, Problem::kBadValue, problem);
    have_text = true;
  } else if (body["prompt"].get(value) == simdjson::SUCCESS) {
    std::string_view s;
    if (value.get_string().get(s) != simdjson::SUCCESS) {
      return im.Reject(number, Problem::kBadValue, "field \"prompt\" is not a string");
    }
    text_bytes = s.size();
    st.joined.assign(s);
    if (im.options().keep_text) r.prompt = std::string(s);
    have_text = true;
  }
  std::string_view s;
  if (body["model"].get_string().get(s) == simdjson::SUCCESS) r.model = std::string(s);
  std::int64_t priority;
  if (body["priority"].get_int64().get(priority) == simdjson::SUCCESS && priority >= INT32_MIN &&
      priority <= INT32_MAX) {
    r.priority = static_cast<std::int32_t>(priority);
  }
  // Structured output: OpenAI's response_format json_object / json_schema, or the guided_*
  // extensions of vLLM-style servers.
  std::string_view rf_type;
  if (body["response_format"]["type"].get_string().get(rf_type) == simdjson::SUCCESS) {
    r.structured_output = rf_type == "json_object" || rf_type == "json_schema";
  }
  for (const char* k : {"guided_json", "guided_regex", "guided_grammar", "guided_choice"}) {
    if (body[k].get(value) == simdjson::SUCCESS && !value.is_null()) r.structured_output = true;
  }
  if (obj["session_id"].get_string().get(s) == simdjson::SUCCESS) r.session_id = std::string(s);
  std::uint64_t v;
  if (obj["turn"].get(value) == simdjson::SUCCESS) {
    if (!(problem = JsonUint(value, "turn", UINT32_MAX, &v)).empty())
      return im.Reject(number, Problem::kBadNumber, problem);
    r.turn = static_cast<std::uint32_t>(v);
  }

  dom::element usage;
  const bool have_usage = obj["usage"].get(usage) == simdjson::SUCCESS ||
                          obj["response"]["usage"].get(usage) == simdjson::SUCCESS;
  bool have_in = false, have_out = false;
  if (have_usage) {
    if (usage["prompt_tokens"].get(value) == simdjson::SUCCESS) {
      if (!(problem = JsonUint(value, "usage.prompt_tokens", UINT32_MAX, &v)).empty())
        return im.Reject(number, Problem::kBadNumber, problem);
      r.input_tokens = static_cast<std::uint32_t>(v);
      have_in = true;
    }
    if (usage["completion_tokens"].get(value) == simdjson::SUCCESS) {
      if (!(problem = JsonUint(value, "usage.completion_tokens", UINT32_MAX, &v)).empty())
        return im.Reject(number, Problem::kBadNumber, problem);
      r.output_tokens = static_cast<std::uint32_t>(v);
      have_out = true;
    }
  }
  if (!have_in) {
    if (!have_text) {
      return im.Reject(number, Problem::kMissingField,
                       "no usage.prompt_tokens and no \"messages\" or \"prompt\" to estimate from");
    }
    r.input_tokens = EstimateTokens(text_bytes);
    r.tokens_estimated = true;
  }
  if (!have_out) {
    if (body["max_completion_tokens"].get(value) != simdjson::SUCCESS &&
        body["max_tokens"].get(value) != simdjson::SUCCESS) {
      return im.Reject(
          number, Problem::kMissingField,
          "no usage.completion_tokens and no \"max_tokens\" or \"max_completion_tokens\"");
    }
    if (!(problem = JsonUint(value, "max_tokens", UINT32_MAX, &v)).empty())
      return im.Reject(number, Problem::kBadNumber, problem);
    r.output_tokens = static_cast<std::uint32_t>(v);
    r.tokens_estimated = true;
  }
  if (!st.joined.empty()) {
    im.report().block_tokens = TextBlockTokens(im.options());
    r.prefix_hashes = TextBlockIds(st.joined, im.report().block_tokens);
  }
  if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
  im.Emit(r, number);
  return true;
}

// ---------------------------------------------------------------------------------------------
// CSV. RFC 4180 fields on one line: quoted fields may hold commas and doubled quotes, not line
// breaks.

class CsvSplitter {
 public:
  // Returns false on an unterminated quote.
  bool Split(std::string_view line, std::vector<std::string_view>* fields) {
    fields->clear();
    storage_used_ = 0;
    std::size_t i = 0;
    for (;;) {
      if (i < line.size() && line[i] == '"') {
        std::string& out = Storage();
        ++i;
        for (;;) {
          if (i >= line.size()) return false;
          if (line[i] == '"') {
            if (i + 1 < line.size() && line[i + 1] == '"') {
              out += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          out += line[i++];
        }
        // Anything between the closing quote and the comma is kept, as most readers do.
        const std::size_t comma = line.find(',', i);
        out.append(
            line.substr(i, comma == std::string_view::npos ? std::string_view::npos : comma - i));
        fields->push_back(out);
        if (comma == std::string_view::npos) return true;
        i = comma + 1;
      } else {
        const std::size_t comma = line.find(',', i);
        if (comma == std::string_view::npos) {
          fields->push_back(line.substr(i));
          return true;
        }
        fields->push_back(line.substr(i, comma - i));
        i = comma + 1;
      }
    }
  }

 private:
  std::string& Storage() {
    if (storage_used_ == storage_.size()) storage_.emplace_back();
    std::string& s = storage_[storage_used_++];
    s.clear();
    return s;
  }
  // A deque, not a vector: growing it must not move the strings earlier fields point into (short
  // strings keep their bytes inline, so moving one moves its bytes).
  std::deque<std::string> storage_;
  std::size_t storage_used_ = 0;
};

struct CsvLayout {
  int time = -1, input = -1, output = -1, session = -1, turn = -1, model = -1, priority = -1,
      group = -1, structured = -1;
  int total = -1, log_type = -1;  // BurstGPT's "Total tokens" and "Log Type", when present
  std::size_t columns = 0;
  TimeUnit unit = TimeUnit::kAuto;
  bool burstgpt = false;
  std::vector<std::string> names;  // header names, for messages
};

int FindColumn(const std::vector<std::string_view>& header, std::string_view name) {
  if (name.empty()) return -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (EqualsIgnoreCase(Trim(header[i]), name)) return static_cast<int>(i);
  }
  return -1;
}

// Maps the header to a layout, or says which column is missing.
std::string CsvHeader(TraceFormat format, const ImportOptions& options,
                      const std::vector<std::string_view>& header, CsvLayout* layout) {
  layout->columns = header.size();
  for (const std::string_view h : header) layout->names.emplace_back(Trim(h));
  auto require = [&](int* slot, std::string_view name) -> std::string {
    *slot = FindColumn(header, name);
    if (*slot < 0) return fmt::format("no column \"{}\" in the header", name);
    return {};
  };
  std::string problem;
  switch (format) {
    case TraceFormat::kAzureCsv:
      layout->unit = TimeUnit::kSeconds;
      if (!(problem = require(&layout->time, "TIMESTAMP")).empty()) return problem;
      if (!(problem = require(&layout->input, "ContextTokens")).empty()) return problem;
      return require(&layout->output, "GeneratedTokens");
    case TraceFormat::kBurstGptCsv:
      layout->unit = TimeUnit::kSeconds;  // seconds since the trace's start
      layout->burstgpt = true;
      if (!(problem = require(&layout->time, "Timestamp")).empty()) return problem;
      if (!(problem = require(&layout->input, "Request tokens")).empty()) return problem;
      if (!(problem = require(&layout->output, "Response tokens")).empty()) return problem;
      layout->model = FindColumn(header, "Model");
      layout->session = FindColumn(header, "Session ID");
      layout->total = FindColumn(header, "Total tokens");
      layout->log_type = FindColumn(header, "Log Type");
      return {};
    default: {
      const CsvColumns& c = options.columns;
      layout->unit = options.time_unit;
      if (c.time.empty() || c.input.empty() || c.output.empty()) {
        return "the generic CSV format needs a column mapping with time, input and output "
               "(--columns time=COL,input=COL,output=COL)";
      }
      if (!(problem = require(&layout->time, c.time)).empty()) return problem;
      if (!(problem = require(&layout->input, c.input)).empty()) return problem;
      if (!(problem = require(&layout->output, c.output)).empty()) return problem;
      const std::pair<int*, const std::string*> optional[] = {
          {&layout->session, &c.session}, {&layout->turn, &c.turn},
          {&layout->model, &c.model},     {&layout->priority, &c.priority},
          {&layout->group, &c.group},     {&layout->structured, &c.structured}};
      for (const auto& [slot, name] : optional) {
        if (name->empty()) continue;
        if (!(problem = require(slot, *name)).empty()) return problem;
      }
      return {};
    }
  }
}

// A file cut short ends inside its last row, which still has every column when the cut falls in
// the last one. So the last row of a BurstGPT file without a final line end is held to what a
// whole row holds: "Total tokens" is "Request tokens" + "Response tokens", and "Log Type" is
// "Conversation log" or "API log". Returns what is wrong, or an empty string.
std::string CutBurstGptRow(const CsvLayout& layout, const std::vector<std::string_view>& fields,
                           const TraceRequest& r) {
  if (layout.total >= 0) {
    const std::string_view text = fields[static_cast<std::size_t>(layout.total)];
    std::uint64_t total = 0;
    const std::uint64_t sum = std::uint64_t{r.input_tokens} + r.output_tokens;
    if (!ParseU64(text, &total) || total != sum) {
      return fmt::format(
          "the last row ends without a line end and its \"Total tokens\" {} is not Request + "
          "Response tokens ({}): the file looks cut short",
          Shown(text), sum);
    }
  }
  if (layout.log_type >= 0) {
    const std::string_view text = Trim(fields[static_cast<std::size_t>(layout.log_type)]);
    if (!EqualsIgnoreCase(text, "Conversation log") && !EqualsIgnoreCase(text, "API log")) {
      return fmt::format(
          "the last row ends without a line end and its \"Log Type\" {} is not \"Conversation "
          "log\" "
          "or \"API log\": the file looks cut short",
          Shown(text));
    }
  }
  return {};
}

bool ParseBool(std::string_view s, bool* out) {
  s = Trim(s);
  if (s == "1" || EqualsIgnoreCase(s, "true") || EqualsIgnoreCase(s, "yes"))
    return *out = true, true;
  if (s.empty() || s == "0" || EqualsIgnoreCase(s, "false") || EqualsIgnoreCase(s, "no"))
    return *out = false, true;
  return false;
}

bool CsvImport(Import& im, TraceFormat format, const ReadFn& read) {
  CsvSplitter splitter;
  std::vector<std::string_view> fields;
  CsvLayout layout;
  bool have_header = false;
  TraceRequest r;
  std::unordered_map<std::string, std::uint32_t> turns;  // BurstGPT sessions: next turn index
  std::uint64_t zero_output_rows = 0;
  const bool ok = ForEachLine(read, [&](std::string_view line, std::uint64_t number,
                                        bool terminated) {
    ++im.report().lines;
    if (im.Blank(line, number)) return true;
    if (!splitter.Split(line, &fields)) {
      if (!have_header) {
        im.Fail(ErrorCode::kInvalidInput,
                im.Where(number) + ": the header has an unterminated quote");
        return false;
      }
      return im.Reject(number, Problem::kColumns, "unterminated quoted field");
    }
    if (!have_header) {
      have_header = true;
      std::string problem = CsvHeader(format, im.options(), fields, &layout);
      if (!problem.empty()) {
        im.Fail(ErrorCode::kInvalidInput, im.Where(number) + ": " + problem);
        return false;
      }
      return true;
    }
    if (fields.size() != layout.columns) {
      return im.Reject(number, Problem::kColumns,
                       fmt::format("expected {} fields as in the header, found {}", layout.columns,
                                   fields.size()));
    }
    r = TraceRequest{};
    std::uint64_t v;
    const std::pair<int, std::uint32_t*> counts[] = {{layout.input, &r.input_tokens},
                                                     {layout.output, &r.output_tokens}};
    for (const auto& [column, slot] : counts) {
      const std::string_view text = fields[static_cast<std::size_t>(column)];
      if (!ParseU64(text, &v)) {
        double d;
        // Some exports write counts as "472.0".
        if (!ParseDouble(text, &d) || d < 0 || d != std::floor(d) || d > UINT32_MAX) {
          return im.Reject(
              number, Problem::kBadNumber,
              fmt::format("column \"{}\" is not a non-negative integer ({})",
                          layout.names[static_cast<std::size_t>(column)], Shown(text)));
        }
        v = static_cast<std::uint64_t>(d);
      }
      if (v > UINT32_MAX) {
        return im.Reject(number, Problem::kBadNumber,
                         fmt::format("token count {} is too large", Shown(text)));
      }
      *slot = static_cast<std::uint32_t>(v);
    }
    if (layout.burstgpt && !terminated) {
      if (std::string cut = CutBurstGptRow(layout, fields, r); !cut.empty()) {
        return im.Reject(number, Problem::kColumns, cut);
      }
    }
    TimeValue t;
    t.unit = layout.unit;
    t.since_start = layout.burstgpt;
    t.text = Trim(fields[static_cast<std::size_t>(layout.time)]);
    if (auto ns = ParseWallClock(t.text)) {
      t.wall = true;
      t.wall_ns = *ns;
    } else if (!ParseDouble(t.text, &t.number)) {
      return im.Reject(
          number, Problem::kBadTimestamp,
          fmt::format("timestamp {} is not a date-time (YYYY-MM-DD HH:MM:SS[.fffffff]) or a number",
                      Shown(t.text)));
    }
    auto optional_text = [&](int column) -> std::optional<std::string> {
      if (column < 0) return std::nullopt;
      const std::string_view s = Trim(fields[static_cast<std::size_t>(column)]);
      if (s.empty()) return std::nullopt;
      return std::string(s);
    };
    r.model = optional_text(layout.model);
    r.session_id = optional_text(layout.session);
    r.prefix_group = optional_text(layout.group);
    // Names are written to JSON later; bytes that are not UTF-8 would not survive that.
    for (const std::optional<std::string>* name : {&r.model, &r.session_id, &r.prefix_group}) {
      if (*name && !simdjson::validate_utf8((*name)->data(), (*name)->size())) {
        return im.Reject(number, Problem::kBadValue,
                         fmt::format("name {} is not UTF-8", Shown(**name)));
      }
    }
    if (layout.turn >= 0) {
      const std::string_view s = fields[static_cast<std::size_t>(layout.turn)];
      if (!Trim(s).empty()) {
        if (!ParseU64(s, &v) || v > UINT32_MAX)
          return im.Reject(number, Problem::kBadNumber,
                           fmt::format("turn {} is not a non-negative integer", Shown(s)));
        r.turn = static_cast<std::uint32_t>(v);
      }
    }
    if (layout.priority >= 0) {
      const std::string_view s = Trim(fields[static_cast<std::size_t>(layout.priority)]);
      if (!s.empty()) {
        std::int64_t p = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), p);
        if (ec != std::errc() || end != s.data() + s.size() || p < INT32_MIN || p > INT32_MAX) {
          return im.Reject(number, Problem::kBadNumber,
                           fmt::format("priority {} is not an integer", Shown(s)));
        }
        r.priority = static_cast<std::int32_t>(p);
      }
    }
    if (layout.structured >= 0 &&
        !ParseBool(fields[static_cast<std::size_t>(layout.structured)], &r.structured_output)) {
      return im.Reject(number, Problem::kBadValue,
                       fmt::format("structured flag {} is not true/false/1/0",
                                   Shown(fields[static_cast<std::size_t>(layout.structured)])));
    }
    bool stop = false;
    if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
    if (layout.burstgpt && r.session_id && !r.turn) r.turn = turns[*r.session_id]++;
    if (layout.burstgpt && r.output_tokens == 0) ++zero_output_rows;
    im.Emit(r, number);
    return true;
  });
  if (!ok) {
    im.Fail(ErrorCode::kIo, im.name() + ": read failed");
    return false;
  }
  if (!have_header && !im.failed()) {
    im.Fail(ErrorCode::kInvalidInput, im.name() + ": empty file (no CSV header)");
  }
  if (zero_output_rows > 0) {
    im.report().notes.push_back(fmt::format(
        "{} rows have 0 response tokens (failed requests in BurstGPT); they are kept with output 0",
        zero_output_rows));
  }
  return !im.failed();
}

// ---------------------------------------------------------------------------------------------
// ShareGPT: a JSON array of conversations, or one conversation per line (JSONL). There are no
// timestamps (every request arrives at 0, arrivals_known = false) and no token counts (estimated
// from text). Each human turn followed by a model reply becomes one request whose prompt is the
// conversation so far.

struct ShareGptState {
  std::uint64_t index = 0;     // conversations seen
  std::uint64_t trailing = 0;  // user turns without a reply
  std::string joined;
};

void StartShareGpt(Import& im) {
  ImportReport& report = im.report();
  report.arrivals_known = false;
  report.block_tokens = TextBlockTokens(im.options());
  report.notes.push_back(
      "ShareGPT has no timestamps: every request arrives at 0 (arrivals unknown)");
  report.notes.push_back("ShareGPT has no token counts: lengths are estimated as ceil(bytes / 4)");
}

void FinishShareGpt(Import& im, const ShareGptState& st) {
  if (st.trailing > 0) {
    im.report().notes.push_back(fmt::format(
        "{} user turns have no model reply after them and are not requests", st.trailing));
  }
}

// One conversation object. `where` names it in messages ("f.json: conversation 3" or "f.jsonl:3");
// its rows carry `line` as their source line. Returns false when the import must stop.
bool ShareGptConversation(Import& im, ShareGptState& st, dom::object obj, const std::string& where,
                          std::uint64_t line) {
  ImportReport& report = im.report();
  std::string id = std::to_string(st.index);
  std::string_view s;
  std::uint64_t n;
  if (obj["id"].get_string().get(s) == simdjson::SUCCESS)
    id = std::string(s);
  else if (obj["id"].get_uint64().get(n) == simdjson::SUCCESS)
    id = std::to_string(n);
  const std::string named = where + " (id " + Shown(id) + ")";
  dom::array turns;
  if (obj["conversations"].get_array().get(turns) != simdjson::SUCCESS &&
      obj["messages"].get_array().get(turns) != simdjson::SUCCESS) {
    return im.RejectAt(named, Problem::kMissingField,
                       "no \"conversations\" (or \"messages\") array");
  }
  // Validate first, so a bad turn rejects the whole conversation and emits nothing of it.
  std::vector<std::pair<std::string_view, std::string_view>> messages;  // role, text
  std::string problem;
  for (dom::element turn : turns) {
    std::string_view from, value;
    if ((turn["from"].get_string().get(from) != simdjson::SUCCESS &&
         turn["role"].get_string().get(from) != simdjson::SUCCESS) ||
        (turn["value"].get_string().get(value) != simdjson::SUCCESS &&
         turn["content"].get_string().get(value) != simdjson::SUCCESS)) {
      problem = fmt::format("turn {} has no string \"from\" and \"value\"", messages.size());
      break;
    }
    messages.emplace_back(from, value);
  }
  if (!problem.empty()) return im.RejectAt(named, Problem::kBadValue, problem);
  auto role_of = [](std::string_view from) -> std::string_view {
    if (from == "human" || from == "user") return "user";
    if (from == "system") return "system";
    return "assistant";  // gpt, chatgpt, bard, bing, assistant, ...
  };
  st.joined.clear();
  std::size_t bytes = 0;
  std::uint32_t turn_index = 0;
  TraceRequest r;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string_view role = role_of(messages[i].first);
    st.joined.append(role).append("\n").append(messages[i].second).append("\n");
    bytes += messages[i].second.size();
    if (im.options().keep_text)
      r.messages.push_back(ChatMessage{std::string(role), std::string(messages[i].second)});
    if (role != "user") continue;
    if (i + 1 >= messages.size() || role_of(messages[i + 1].first) != "assistant") {
      ++st.trailing;
      continue;
    }
    TraceRequest out;
    out.arrival_s = 0;
    out.input_tokens = EstimateTokens(bytes);
    out.output_tokens = EstimateTokens(messages[i + 1].second.size());
    out.tokens_estimated = true;
    out.session_id = id;
    out.turn = turn_index++;
    if (im.options().keep_text) out.messages = r.messages;
    out.prefix_hashes = TextBlockIds(st.joined, report.block_tokens);
    im.Emit(out, line);
  }
  return true;
}

// One line of ShareGPT JSONL: one conversation object.
bool ShareGptLine(Import& im, ShareGptState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  dom::object obj;
  ++st.index;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  return ShareGptConversation(im, st, obj, im.Where(number), number);
}

// Where a JSON document stops being valid, for a message: "line L, column C (byte B): what", and
// whether the document simply ends too early (a truncated file). The fast parser does not say
// where; this runs only after it failed, so its cost does not matter.
std::string JsonErrorPosition(std::string_view content, bool* truncated) {
  *truncated = false;
  try {
    const nlohmann::json parsed = nlohmann::json::parse(content.begin(), content.end());
    static_cast<void>(parsed);
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t byte =
        std::min<std::size_t>(e.byte, content.size());  // 1-based: the byte that failed
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i + 1 < byte; ++i) {
      if (content[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    if (const std::size_t colon = what.find(": "); colon != std::string::npos)
      what = what.substr(colon + 2);
    *truncated =
        byte >= content.size() || what.find("unexpected end of input") != std::string::npos;
    return fmt::format("line {}, column {} (byte {}): {}", line, column, byte, what);
  } catch (const nlohmann::json::exception&) {
  }
  return {};
}

bool ShareGptImport(Import& im, std::string_view content) {
  StartShareGpt(im);
  if (content.size() >= 3 && content.substr(0, 3) == "\xEF\xBB\xBF")
    content.remove_prefix(3);  // byte order mark
  simdjson::padded_string padded(content);
  dom::element root;
  if (const simdjson::error_code code = im.parser().parse(padded).get(root);
      code != simdjson::SUCCESS) {
    bool truncated = false;
    const std::string where = JsonErrorPosition(content, &truncated);
    im.Fail(
        ErrorCode::kInvalidInput,
        where.empty()
            ? fmt::format(
                  "{}: not valid JSON ({}; ShareGPT is one JSON array, or one conversation a line)",
                  im.name(), simdjson::error_message(code))
            : fmt::format("{}: not valid JSON at {}{}", im.name(), where,
                          truncated ? " (the file ends there: truncated?)" : ""));
    return false;
  }
  dom::array conversations;
  if (root.get_array().get(conversations) != simdjson::SUCCESS) {
    im.Fail(ErrorCode::kInvalidInput,
            im.name() + ": the top level is not an array of conversations");
    return false;
  }
  ShareGptState st;
  for (dom::element conversation : conversations) {
    ++st.index;
    ++im.report().lines;
    const std::string where = fmt::format("{}: conversation {}", im.name(), st.index);
    dom::object obj;
    if (conversation.get_object().get(obj) != simdjson::SUCCESS) {
      if (!im.RejectAt(where, Problem::kBadValue, "not an object")) return false;
      continue;
    }
    if (!ShareGptConversation(im, st, obj, where, st.index)) return false;
  }
  FinishShareGpt(im, st);
  return true;
}

// True when the content (after a byte order mark and white space) starts a JSON array.
bool IsJsonArray(std::string_view head) {
  if (head.size() >= 3 && head.substr(0, 3) == "\xEF\xBB\xBF") head.remove_prefix(3);
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && head[first] == '[';
}

// ---------------------------------------------------------------------------------------------

// How many bytes of the input format detection looks at: enough for the first line of any
// row-per-line format; a longer first line is judged on its first bytes.
constexpr std::size_t kHeadBytes = std::size_t{1} << 16;

Result<ImportReport> Run(const ImportOptions& options, const RowCallback& on_row,
                         TraceInput& input) {
  const std::string_view name = input.name();
  ImportReport report;
  report.source = std::string(name);
  Result<std::string_view> head = input.Head(kHeadBytes);
  if (!head.ok()) return head.error();
  TraceFormat format = options.format;
  if (format == TraceFormat::kAuto) {
    Result<TraceFormat> detected = DetectTraceFormat(*head, name);
    if (!detected.ok()) return detected.error();
    format = *detected;
    if (format == TraceFormat::kCsv && options.columns.time.empty()) {
      return MakeError(
          ErrorCode::kInvalidInput,
          fmt::format("{}: the CSV header is not Azure's or BurstGPT's; pass --format csv "
                      "--columns time=COL,input=COL,output=COL",
                      name));
    }
  }
  if (input.compression() != Compression::kNone) {
    report.notes.push_back(
        fmt::format("read {}-compressed input", CompressionName(input.compression())));
  }
  std::optional<Error> read_error;
  const ReadFn read = [&input, &read_error](char* dst, std::size_t n) -> std::size_t {
    Result<std::size_t> got = input.Read(dst, n);
    if (got.ok()) return *got;
    read_error = got.error();
    return static_cast<std::size_t>(-1);
  };
  report.format = format;
  if (format == TraceFormat::kMooncake) {
    report.block_tokens = options.block_tokens != 0 ? options.block_tokens : kMooncakeBlockTokens;
  }
  Import im(name, options, on_row, report);
  switch (format) {
    case TraceFormat::kAzureCsv:
    case TraceFormat::kBurstGptCsv:
    case TraceFormat::kCsv:
      CsvImport(im, format, read);
      break;
    case TraceFormat::kShareGpt: {
      if (IsJsonArray(*head)) {
        Result<std::string> all = input.ReadAll();
        if (!all.ok()) return all.error();
        ShareGptImport(im, *all);
        break;
      }
      // One conversation per line (JSONL).
      ShareGptState st;
      StartShareGpt(im);
      const bool ok = ForEachLine(read, [&](std::string_view line, std::uint64_t number, bool) {
        ++report.lines;
        if (im.Blank(line, number)) return true;
        return ShareGptLine(im, st, line, number);
      });
      if (!ok && !im.failed()) im.Fail(ErrorCode::kIo, std::string(name) + ": read failed");
      if (!im.failed()) FinishShareGpt(im, st);
      break;
    }
    default: {
      JsonlState st;
      const bool ok = ForEachLine(read, [&](std::string_view line, std::uint64_t number, bool) {
        ++report.lines;
        if (im.Blank(line, number)) return true;
        if (format == TraceFormat::kMooncake) return MooncakeRow(im, st, line, number);
        if (format == TraceFormat::kTrace) return TraceRow(im, st, line, number);
        return OpenAiLogRow(im, st, line, number);
      });
      if (!ok && !im.failed()) im.Fail(ErrorCode::kIo, std::string(name) + ": read failed");
      break;
    }
  }
  if (read_error) return *read_error;  // a read or decompression error explains a stop best
  if (im.failed()) return im.TakeError();
  im.NoteBlankLines();
  if (report.rows == 0) {
    std::string why =
        report.lines == 0 ? "the file is empty" : fmt::format("{} lines read", report.lines);
    if (report.SkippedTotal() > 0) why += ", " + report.SkippedSummary();
    return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: no usable rows ({})", name, why));
  }
  if (report.rows_out_of_order > 0) {
    report.notes.push_back(fmt::format(
        "timestamps are not sorted: {} rows arrive before the row above them (first at {}); "
        "rows are ordered by arrival time",
        report.rows_out_of_order, report.first_out_of_order));
  }
  return report;
}

}  // namespace

const char* TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAuto:
      return "auto";
    case TraceFormat::kTrace:
      return "trace";
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kAzureCsv:
      return "azure-csv";
    case TraceFormat::kBurstGptCsv:
      return "burstgpt-csv";
    case TraceFormat::kShareGpt:
      return "sharegpt";
    case TraceFormat::kCsv:
      return "csv";
    case TraceFormat::kOpenAiLog:
      return "openai-log";
  }
  return "?";
}

Result<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (TraceFormat f : {TraceFormat::kAuto, TraceFormat::kTrace, TraceFormat::kMooncake,
                        TraceFormat::kAzureCsv, TraceFormat::kBurstGptCsv, TraceFormat::kShareGpt,
                        TraceFormat::kCsv, TraceFormat::kOpenAiLog}) {
    if (name == TraceFormatName(f)) return f;
  }
  return MakeError(ErrorCode::kInvalidInput,
                   fmt::format("unknown trace format {} (one of: auto, trace, mooncake, azure-csv, "
                               "burstgpt-csv, sharegpt, csv, openai-log)",
                               Shown(name)));
}

Result<TimeUnit> ParseTimeUnit(std::string_view name) {
  if (name == "auto") return TimeUnit::kAuto;
  if (name == "s") return TimeUnit::kSeconds;
  if (name == "ms") return TimeUnit::kMillis;
  if (name == "us") return TimeUnit::kMicros;
  if (name == "ns") return TimeUnit::kNanos;
  return MakeError(ErrorCode::kInvalidInput,
                   fmt::format("unknown time unit {} (one of: auto, s, ms, us, ns)", Shown(name)));
}

Result<CsvColumns> ParseCsvColumns(std::string_view spec) {
  CsvColumns c;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("column mapping {} is not ROLE=COLUMN", Shown(item)));
    }
    const std::string_view role = Trim(item.substr(0, eq));
    const std::string column(Trim(item.substr(eq + 1)));
    std::string* slot = role == "time"         ? &c.time
                        : role == "input"      ? &c.input
                        : role == "output"     ? &c.output
                        : role == "session"    ? &c.session
                        : role == "turn"       ? &c.turn
                        : role == "model"      ? &c.model
                        : role == "priority"   ? &c.priority
                        : role == "group"      ? &c.group
                        : role == "structured" ? &c.structured
                                               : nullptr;
    if (slot == nullptr) {
      return MakeError(
          ErrorCode::kInvalidInput,
          fmt::format("unknown column role {} (one of: time, input, output, session, turn, "
                      "model, priority, group, structured)",
                      Shown(role)));
    }
    *slot = column;
  }
  if (c.time.empty() || c.input.empty() || c.output.empty()) {
    return MakeError(ErrorCode::kInvalidInput, "the column mapping needs time, input and output");
  }
  return c;
}

std::uint64_t ImportReport::SkippedTotal() const {
  std::uint64_t total = 0;
  for (const SkippedRows& s : skipped) total += s.count;
  return total;
}

std::string ImportReport::SkippedSummary() const {
  if (skipped.empty()) return {};
  std::string out = fmt::format("skipped {} rows:", SkippedTotal());
  for (std::size_t i = 0; i < skipped.size(); ++i) {
    out += fmt::format("{} {} {} (first: {})", i == 0 ? "" : ",", skipped[i].count, skipped[i].kind,
                       skipped[i].first_message);
  }
  return out;
}

Result<TraceFormat> DetectTraceFormat(std::string_view head, std::string_view name) {
  if (head.size() >= 3 && head.substr(0, 3) == "\xEF\xBB\xBF") head.remove_prefix(3);
  // The first non-blank line.
  std::string_view line;
  while (!head.empty()) {
    const std::size_t nl = head.find('\n');
    line = Trim(head.substr(0, nl));
    if (!line.empty() || nl == std::string_view::npos) break;
    head.remove_prefix(nl + 1);
  }
  if (line.empty())
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: no usable rows (the file is empty)", name));
  if (line.front() == '[') return TraceFormat::kShareGpt;
  if (line.front() == '{') {
    // The first line's top-level keys when it parses whole; else (a first line longer than the
    // head, or broken) the keys it mentions anywhere.
    std::function<bool(std::string_view)> has = [line](std::string_view key) {
      return line.find(fmt::format("\"{}\"", key)) != std::string_view::npos;
    };
    dom::parser parser;
    dom::object obj;
    if (parser.parse(line.data(), line.size()).get_object().get(obj) == simdjson::SUCCESS) {
      has = [obj](std::string_view key) { return obj.at_key(key).error() == simdjson::SUCCESS; };
      std::string_view format;
      if (obj["format"].get_string().get(format) == simdjson::SUCCESS &&
          format == "bakeoff-trace") {
        return TraceFormat::kTrace;
      }
    } else if (has("bakeoff-trace")) {
      return TraceFormat::kTrace;
    }
    if (has("arrival_s")) return TraceFormat::kTrace;
    if (has("hash_ids") || (has("input_length") && has("output_length")))
      return TraceFormat::kMooncake;
    const bool timed = has("timestamp") || has("time");
    // ShareGPT rows, one conversation a line: "conversations" (ShareGPT's own key), or chat
    // "messages" with no timestamp, which an OpenAI log row would have.
    if (has("conversations") || (has("messages") && !timed)) return TraceFormat::kShareGpt;
    if (has("messages") || has("prompt") || has("body") || has("request"))
      return TraceFormat::kOpenAiLog;
    return MakeError(
        ErrorCode::kInvalidInput,
        fmt::format("{}:1: cannot tell the JSON format from the first line; pass --format", name));
  }
  CsvSplitter splitter;
  std::vector<std::string_view> header;
  if (splitter.Split(line, &header) && header.size() >= 2) {
    if (FindColumn(header, "ContextTokens") >= 0 && FindColumn(header, "GeneratedTokens") >= 0)
      return TraceFormat::kAzureCsv;
    if (FindColumn(header, "Request tokens") >= 0 && FindColumn(header, "Response tokens") >= 0)
      return TraceFormat::kBurstGptCsv;
    return TraceFormat::kCsv;
  }
  return MakeError(ErrorCode::kInvalidInput,
                   fmt::format("{}:1: cannot tell the format from the first line {}; pass --format",
                               name, Shown(line)));
}

Result<ImportReport> ImportTraceFile(const std::filesystem::path& path,
                                     const ImportOptions& options, const RowCallback& on_row) {
  Result<std::unique_ptr<TraceInput>> input = TraceInput::Open(path);
  if (!input.ok()) return input.error();
  return Run(options, on_row, **input);
}

Result<ImportReport> ImportTraceBuffer(std::string_view content, std::string_view name,
                                       const ImportOptions& options, const RowCallback& on_row) {
  Result<std::unique_ptr<TraceInput>> input = TraceInput::FromBuffer(content, name);
  if (!input.ok()) return input.error();
  return Run(options, on_row, **input);
}

Result<Trace> LoadTrace(const std::filesystem::path& path, const ImportOptions& options,
                        ImportReport* report) {
  Trace trace;
  Result<ImportReport> imported = ImportTraceFile(
      path, options,
      [&trace](const TraceRequest& r, std::uint32_t) { trace.requests.push_back(r); });
  if (!imported.ok()) return imported.error();
  std::stable_sort(
      trace.requests.begin(), trace.requests.end(),
      [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  const double first = trace.requests.front().arrival_s;
  for (TraceRequest& r : trace.requests) r.arrival_s -= first;
  trace.source = fmt::format("{} ({})", TraceInputName(path), TraceFormatName(imported->format));
  trace.block_tokens = imported->block_tokens;
  trace.arrivals_known = imported->arrivals_known;
  if (imported->origin_unix_ns) {
    // The import's origin is the first row in file order; arrivals now start at the earliest.
    trace.origin_unix_ns =
        *imported->origin_unix_ns + static_cast<std::int64_t>(std::llround(first * 1e9));
  }
  if (report != nullptr) *report = std::move(*imported);
  return trace;
}

std::uint32_t EstimateTokens(std::size_t bytes) {
  const std::size_t tokens = (bytes + 3) / 4;
  return tokens > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(tokens);
}

std::vector<std::uint64_t> TextBlockIds(std::string_view text, std::uint32_t block_tokens) {
  BAKEOFF_CHECK(block_tokens > 0);
  const std::size_t block_bytes = std::size_t{block_tokens} * 4;
  std::vector<std::uint64_t> ids;
  ids.reserve((text.size() + block_bytes - 1) / block_bytes);
  for (std::size_t at = 0; at < text.size(); at += block_bytes) {
    // FNV-1a, 64-bit: ids only need to be equal for equal blocks and rarely equal otherwise.
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : text.substr(at, block_bytes)) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ULL;
    }
    ids.push_back(h);
  }
  return ids;
}

}  // namespace bakeoff::workload
