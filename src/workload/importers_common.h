// workload/importers_common.h
//
// Owns: what every trace importer shares, internal to the importers (workload/importers*.cc):
// small parsing helpers, timestamps as the source wrote them (TimeValue) and date-times, the
// Import class (skip accounting, arrivals and their units, ordering, delivery of rows), the line
// reader (ForEachLine) and the JSON field helpers; and the entry point of each format family's
// importer (importers_jsonl.cc, importers_csv.cc, importers_sharegpt.cc).
// Does not own: the public API (workload/importers.h), format detection and the dispatch
// (importers.cc).
//
// JSON rows are parsed with the simdjson DOM parser rather than On Demand, for the reason given in
// dialect/openai.cc: the DOM parser dispatches at run time to the best SIMD kernel. Each line is
// parsed in place: the read buffer keeps SIMDJSON_PADDING spare bytes after its end.
//
// Thread-safety: one Import per import, used by one thread; the functions are reentrant.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "core/result.h"
#include "workload/importers.h"
#include "workload/trace.h"

namespace bakeoff::workload::importers_internal {

namespace dom = simdjson::dom;

constexpr std::size_t kInitialBufferBytes = std::size_t{1} << 22;
constexpr std::uint32_t kDefaultTextBlockTokens = 16;

// ---------------------------------------------------------------------------------------------
// Small parsing helpers.

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
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
std::string Shown(std::string_view value);

inline bool ParseU64(std::string_view s, std::uint64_t* out) {
  s = Trim(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

inline bool ParseDouble(std::string_view s, double* out) {
  s = Trim(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*out);
}

// "YYYY-MM-DD HH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM|+HHMM]" (a 'T' may replace the space), as Unix
// nanoseconds. Azure's 2023 trace writes 7 fractional digits and no zone (read as UTC); the 2024
// trace appends "+00:00".
std::optional<std::int64_t> ParseWallClock(std::string_view s);

// ---------------------------------------------------------------------------------------------
// Timestamps.

inline double UnitSeconds(TimeUnit unit) {
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

const char* UnitName(TimeUnit unit);

// For a value of 1e8 or more read as a Unix epoch time: 0 seconds, 1 ms, 2 us, 3 ns.
inline int EpochClass(double raw) {
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

const char* ProblemName(Problem p);

// ---------------------------------------------------------------------------------------------
// One import: skip accounting, timestamps, ordering and delivery of rows. Its members are defined
// here, in the class, so that each format's row loop inlines them although it is in a file of
// its own.

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

// Reads up to n bytes into dst; returns how many (0 at the end), or size_t(-1) when reading failed.
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
                     std::uint64_t* out);

// A timestamp: a date-time string, a number written as a string, or a number. `text_storage`
// holds the text `out->text` points into.
std::string JsonTime(dom::element value, std::string_view field, TimeUnit unit, TimeValue* out,
                     std::string* text_storage);

// Reads [{"role", "content"}...] into messages (when kept) and counts their bytes.
std::string JsonMessages(dom::element value, bool keep, std::vector<ChatMessage>* messages,
                         std::size_t* bytes, std::string* joined);

// Parses `line` as a JSON object; on failure rejects the row. Returns true when `obj` is usable.
bool ParseLineObject(Import& im, std::string_view line, std::uint64_t number, dom::object* obj,
                     bool* stop);

// Tokens per block of ids derived from text: the option's, or kDefaultTextBlockTokens.
inline std::uint32_t TextBlockTokens(const ImportOptions& options) {
  return options.block_tokens != 0 ? options.block_tokens : kDefaultTextBlockTokens;
}

// ---------------------------------------------------------------------------------------------
// CSV. RFC 4180 fields on one line: quoted fields may hold commas and doubled quotes, not line
// breaks. Format detection splits the header with it too.

class CsvSplitter {
 public:
  // Returns false on an unterminated quote.
  bool Split(std::string_view line, std::vector<std::string_view>* fields);

 private:
  std::string& Storage();
  // A deque, not a vector: growing it must not move the strings earlier fields point into (short
  // strings keep their bytes inline, so moving one moves its bytes).
  std::deque<std::string> storage_;
  std::size_t storage_used_ = 0;
};

// The index of the header column named `name` (case and surrounding blanks ignored), or -1.
int FindColumn(const std::vector<std::string_view>& header, std::string_view name);

// ---------------------------------------------------------------------------------------------
// The importers, one per format family. Each reads the whole input into `im`; a malformed row or
// a read failure is recorded in `im` (im.failed()), and the caller finishes the report.

// JSONL, one row a line: bakeoff's canonical trace (kTrace), Mooncake (kMooncake, with its fast
// path for plain rows) and OpenAI request logs (kOpenAiLog). importers_jsonl.cc.
void JsonlImport(Import& im, TraceFormat format, const ReadFn& read);

// CSV with a header: Azure (kAzureCsv), BurstGPT (kBurstGptCsv) and the generic CSV mapped by
// ImportOptions::columns (kCsv). Returns !im.failed(). importers_csv.cc.
bool CsvImport(Import& im, TraceFormat format, const ReadFn& read);

// ShareGPT, one JSON array of conversations held whole in `content` (ShareGptArrayImport; returns
// !im.failed()) or one conversation a line (ShareGptLinesImport). importers_sharegpt.cc.
bool ShareGptArrayImport(Import& im, std::string_view content);
void ShareGptLinesImport(Import& im, const ReadFn& read);

}  // namespace bakeoff::workload::importers_internal
