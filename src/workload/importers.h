// workload/importers.h
//
// Owns: reading request traces, the canonical JSONL (docs/formats/trace.md) and the public formats
// people already have (Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV, ShareGPT JSON, a
// generic CSV with a column mapping, JSONL logs of OpenAI request bodies), into TraceRequest rows.
// Import streams: rows go to a callback one at a time, so a caller that keeps only a few numbers
// per row (the fingerprint) never holds the whole trace. Malformed rows are reported as
// `file:line: what is wrong`; by default the first one stops the import, with skip_invalid they
// are counted by kind. Nothing is dropped silently.
// Does not own: what is computed from the rows (workload/fingerprint.h) or writing the canonical
// form (workload/trace_jsonl.h).
//
// Thread-safety: functions are reentrant; a callback runs on the calling thread.
// Units: arrival_s in seconds relative to the first row of the file in file order (negative for a
// row earlier than the first one when the file is unsorted); token counts as integers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "workload/trace.h"

namespace bakeoff::workload {

enum class TraceFormat {
  kAuto,         // detect from the first line (DetectTraceFormat)
  kTrace,        // bakeoff's canonical JSONL
  kMooncake,     // {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}
  kAzureCsv,     // TIMESTAMP,ContextTokens,GeneratedTokens
  kBurstGptCsv,  // Timestamp,[Session ID,Elapsed time,]Model,Request tokens,Response tokens,...
  kShareGpt,     // JSON array of {"id", "conversations": [{"from", "value"}, ...]}
  kCsv,          // any CSV with a header, mapped by ImportOptions::columns
  kOpenAiLog,    // JSONL: a timestamp and an OpenAI request body (and optionally its usage)
};

// "trace", "mooncake", "azure-csv", "burstgpt-csv", "sharegpt", "csv", "openai-log", "auto".
const char* TraceFormatName(TraceFormat format);
Result<TraceFormat> ParseTraceFormat(std::string_view name);

// Unit of numeric timestamps in the generic CSV and OpenAI logs. kAuto: values of 1e8 or more are
// Unix epoch times whose unit follows from their magnitude (s, ms, us, ns); smaller values are
// seconds since some start.
enum class TimeUnit { kAuto, kSeconds, kMillis, kMicros, kNanos };
Result<TimeUnit> ParseTimeUnit(std::string_view name);  // "auto", "s", "ms", "us", "ns"

// Column names of a generic CSV. time, input and output are required; the others are optional.
struct CsvColumns {
  std::string time, input, output, session, turn, model, priority, group, structured;
};
// Parses "time=ts,input=prompt_tokens,output=completion_tokens[,session=..][,turn=..][,model=..]
// [,priority=..][,group=..][,structured=..]".
Result<CsvColumns> ParseCsvColumns(std::string_view spec);

struct ImportOptions {
  TraceFormat format = TraceFormat::kAuto;
  bool skip_invalid = false;      // count malformed rows by kind and go on, instead of stopping
  std::uint32_t block_tokens = 0;  // 0: the source's own (Mooncake 512) or 16 for text-derived ids
  TimeUnit time_unit = TimeUnit::kAuto;
  CsvColumns columns;              // for kCsv
  bool keep_text = true;           // false: prompt and messages are not filled (saves memory)
  // false: every JSON row goes through the general parser, never a format's fast path for its
  // plain rows. The rows and messages are the same either way; tests and the fuzzer compare them.
  bool fast_paths = true;
};

struct SkippedRows {
  std::string kind;           // e.g. "bad number", "bad JSON", "mixed time units"
  std::uint64_t count = 0;
  std::string first_message;  // "file:line: what is wrong" of the first such row
};

struct ImportReport {
  std::string source;  // the file name as given
  TraceFormat format = TraceFormat::kAuto;  // the format actually read
  std::uint32_t block_tokens = 0;  // tokens per prefix id block; 0 when rows carry no ids
  bool arrivals_known = true;      // false when the source has no timestamps (ShareGPT)
  std::optional<std::int64_t> origin_unix_ns;  // wall-clock time of the first row, when known
  std::uint64_t lines = 0;          // lines (or conversations, for ShareGPT) read
  std::uint64_t rows = 0;           // rows handed to the callback
  std::uint64_t rows_out_of_order = 0;   // rows earlier than the row before them
  std::string first_out_of_order;        // "file:line" of the first such row
  std::uint64_t rows_tokens_estimated = 0;  // lengths estimated from text (bytes / 4)
  std::vector<SkippedRows> skipped;      // by kind, in order of first appearance
  std::vector<std::string> notes;        // other facts a user should know, one sentence each

  std::uint64_t SkippedTotal() const;
  // "skipped 3 rows: 2 bad number (first: f:4: ...), 1 bad JSON (first: ...)"; empty when none.
  std::string SkippedSummary() const;
};

// Receives each row and the size in tokens of its prefix blocks (0 when the source has none).
using RowCallback = std::function<void(const TraceRequest& row, std::uint32_t block_tokens)>;

// Reads the first line(s) of `head` and names the format, or says why it cannot.
Result<TraceFormat> DetectTraceFormat(std::string_view head, std::string_view name);

// Streams the file `path` row by row into `on_row`. Errors: kIo when the file cannot be read;
// kInvalidInput naming `file:line` for a malformed row (unless skip_invalid), mixed time units,
// an undetectable format, or a file with no usable rows.
Result<ImportReport> ImportTraceFile(const std::filesystem::path& path, const ImportOptions& options,
                                     const RowCallback& on_row);

// The same over bytes in memory; `name` stands for the file name in messages.
Result<ImportReport> ImportTraceBuffer(std::string_view content, std::string_view name,
                                       const ImportOptions& options, const RowCallback& on_row);

// Imports a whole file into a Trace: rows sorted by arrival (stable), shifted so the earliest is at
// 0. `report`, when given, receives the import report.
Result<Trace> LoadTrace(const std::filesystem::path& path, const ImportOptions& options,
                        ImportReport* report = nullptr);

// Ids of the prompt's blocks derived from text, for sources that have text but no ids: the text
// (chat messages joined as "role\ncontent\n") is cut into blocks of block_tokens * 4 bytes (the
// bytes-per-token estimate used throughout), the last block possibly partial; each id hashes its
// block's bytes. REQUIRES: block_tokens > 0.
std::vector<std::uint64_t> TextBlockIds(std::string_view text, std::uint32_t block_tokens);

// ceil(bytes / 4): the token estimate for text without a tokenizer.
std::uint32_t EstimateTokens(std::size_t bytes);

}  // namespace bakeoff::workload
