// tests/fuzz/trace_import_fuzz.cc
//
// Owns: the libFuzzer harness for the trace importers (workload/importers.h). The first input byte
// picks the format (auto or one of the seven) and whether malformed rows are skipped; the rest is
// the file. Invariants checked: an import either fails with a message or yields at least one row;
// with the formats' fast paths off (ImportOptions::fast_paths) it gives the same rows and messages;
// skipped rows are counted; every row's fields are sane; the rows written as canonical JSONL read
// back with the same lengths, ids and names; the fingerprint of the rows computes without crashing.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "workload/fingerprint.h"
#include "workload/importers.h"
#include "workload/trace_jsonl.h"

namespace {

using bakeoff::workload::ImportOptions;
using bakeoff::workload::ImportReport;
using bakeoff::workload::TraceFormat;
using bakeoff::workload::TraceRequest;

constexpr TraceFormat kFormats[] = {TraceFormat::kAuto,      TraceFormat::kTrace,       TraceFormat::kMooncake,
                                    TraceFormat::kAzureCsv,  TraceFormat::kBurstGptCsv, TraceFormat::kShareGpt,
                                    TraceFormat::kCsv,       TraceFormat::kOpenAiLog};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  ImportOptions options;
  options.format = kFormats[data[0] % 8];
  options.skip_invalid = (data[0] & 8) != 0;
  options.block_tokens = (data[0] & 16) != 0 ? 4 : 0;
  options.columns.time = "t";
  options.columns.input = "i";
  options.columns.output = "o";
  const std::string_view content(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<TraceRequest> rows;
  std::vector<std::uint32_t> blocks;
  bakeoff::Result<ImportReport> report =
      bakeoff::workload::ImportTraceBuffer(content, "fuzz", options, [&](const TraceRequest& r, std::uint32_t b) {
        rows.push_back(r);
        blocks.push_back(b);
      });
  // The formats' fast paths read every input exactly as the general parser does: the same rows,
  // the same skips, the same messages.
  {
    ImportOptions general = options;
    general.fast_paths = false;
    std::vector<TraceRequest> slow_rows;
    bakeoff::Result<ImportReport> slow = bakeoff::workload::ImportTraceBuffer(
        content, "fuzz", general, [&](const TraceRequest& r, std::uint32_t) { slow_rows.push_back(r); });
    BAKEOFF_CHECK(slow.ok() == report.ok());
    if (!report.ok()) {
      BAKEOFF_CHECK(slow.error().message == report.error().message) << slow.error().message << " | " << report.error().message;
    } else {
      BAKEOFF_CHECK(slow->SkippedSummary() == report->SkippedSummary()) << slow->SkippedSummary();
      BAKEOFF_CHECK(slow->notes == report->notes);
      BAKEOFF_CHECK(slow->origin_unix_ns == report->origin_unix_ns);
    }
    BAKEOFF_CHECK(slow_rows == rows);
  }
  if (!report.ok()) {
    BAKEOFF_CHECK(!report.error().message.empty());
    return 0;
  }
  BAKEOFF_CHECK(!rows.empty());
  BAKEOFF_CHECK(report->rows == rows.size());
  if (!options.skip_invalid) BAKEOFF_CHECK(report->SkippedTotal() == 0);
  double first = rows.front().arrival_s;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    BAKEOFF_CHECK(std::isfinite(rows[i].arrival_s));
    BAKEOFF_CHECK(rows[i].prefix_hashes.empty() || blocks[i] > 0);
    first = std::min(first, rows[i].arrival_s);
  }

  // Round trip through the canonical form.
  bakeoff::workload::Trace trace;
  trace.source = "fuzz";
  trace.block_tokens = report->block_tokens;
  trace.arrivals_known = report->arrivals_known;
  std::string text = bakeoff::workload::FormatTraceHeader(trace) + "\n";
  for (TraceRequest r : rows) {
    r.arrival_s -= first;
    bakeoff::workload::AppendTraceLine(text, r);
    text += '\n';
  }
  std::vector<TraceRequest> again;
  ImportOptions canonical;
  canonical.format = TraceFormat::kTrace;
  bakeoff::Result<ImportReport> reread = bakeoff::workload::ImportTraceBuffer(
      text, "fuzz.jsonl", canonical, [&](const TraceRequest& r, std::uint32_t) { again.push_back(r); });
  BAKEOFF_CHECK(reread.ok()) << reread.error().message;
  BAKEOFF_CHECK(again.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    BAKEOFF_CHECK(again[i].input_tokens == rows[i].input_tokens);
    BAKEOFF_CHECK(again[i].output_tokens == rows[i].output_tokens);
    BAKEOFF_CHECK(again[i].prefix_hashes == rows[i].prefix_hashes);
    BAKEOFF_CHECK(again[i].session_id == rows[i].session_id);
    BAKEOFF_CHECK(again[i].model == rows[i].model);
  }

  bakeoff::workload::FingerprintBuilder builder;
  for (std::size_t i = 0; i < rows.size(); ++i) builder.Add(rows[i], blocks[i]);
  const bakeoff::workload::Fingerprint f = builder.Finish(*report);
  BAKEOFF_CHECK(f.requests == rows.size());
  (void)bakeoff::workload::FingerprintJson(f);
  return 0;
}
