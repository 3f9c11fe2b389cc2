// workload/importers.cc
//
// Owns: the public entry points of the trace importers (workload/importers.h): format, unit and
// column-mapping names, format detection, the dispatch of an import to its format family's
// importer and the checks after it (no usable rows, order), LoadTrace, and the text-derived
// prefix ids and token estimate. The importers themselves: importers_jsonl.cc (canonical trace,
// Mooncake, OpenAI logs), importers_csv.cc (Azure, BurstGPT, generic CSV) and
// importers_sharegpt.cc; what they share (the line reader, the Import bookkeeping, timestamps,
// JSON field helpers): importers_common.h. Column names follow the public datasets'
// documentation; docs/formats/trace.md lists them.
#include "workload/importers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <simdjson.h>

#include "core/check.h"
#include "workload/importers_common.h"
#include "workload/trace_input.h"

namespace bakeoff::workload {

namespace dom = simdjson::dom;

namespace imp = importers_internal;
using importers_internal::CsvSplitter;
using importers_internal::FindColumn;
using importers_internal::Shown;
using importers_internal::Trim;

namespace {

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
  const imp::ReadFn read = [&input, &read_error](char* dst, std::size_t n) -> std::size_t {
    Result<std::size_t> got = input.Read(dst, n);
    if (got.ok()) return *got;
    read_error = got.error();
    return static_cast<std::size_t>(-1);
  };
  report.format = format;
  imp::Import im(name, options, on_row, report);
  switch (format) {
    case TraceFormat::kAzureCsv:
    case TraceFormat::kBurstGptCsv:
    case TraceFormat::kCsv:
      imp::CsvImport(im, format, read);
      break;
    case TraceFormat::kShareGpt:
      if (IsJsonArray(*head)) {
        Result<std::string> all = input.ReadAll();
        if (!all.ok()) return all.error();
        imp::ShareGptArrayImport(im, *all);
      } else {
        imp::ShareGptLinesImport(im, read);  // one conversation per line (JSONL)
      }
      break;
    default:
      imp::JsonlImport(im, format, read);
      break;
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
