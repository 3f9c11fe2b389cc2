// workload/importers_csv.cc
//
// Owns: the importers of the CSV formats, each a header line and one row a line: Azure's LLM
// inference traces (Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md), BurstGPT
// (HPMLL/BurstGPT) and a generic CSV whose columns ImportOptions::columns names; and the RFC 4180
// field splitter they and format detection share. docs/formats/trace.md lists the columns.
// Does not own: what the formats share (workload/importers_common.h) or choosing the format
// (importers.cc).
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "workload/importers.h"
#include "workload/importers_common.h"

namespace bakeoff::workload::importers_internal {

bool CsvSplitter::Split(std::string_view line, std::vector<std::string_view>* fields) {
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

std::string& CsvSplitter::Storage() {
  if (storage_used_ == storage_.size()) storage_.emplace_back();
  std::string& s = storage_[storage_used_++];
  s.clear();
  return s;
}

int FindColumn(const std::vector<std::string_view>& header, std::string_view name) {
  if (name.empty()) return -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (EqualsIgnoreCase(Trim(header[i]), name)) return static_cast<int>(i);
  }
  return -1;
}

namespace {

struct CsvLayout {
  int time = -1, input = -1, output = -1, session = -1, turn = -1, model = -1, priority = -1,
      group = -1, structured = -1;
  int total = -1, log_type = -1;  // BurstGPT's "Total tokens" and "Log Type", when present
  std::size_t columns = 0;
  TimeUnit unit = TimeUnit::kAuto;
  bool burstgpt = false;
  std::vector<std::string> names;  // header names, for messages
};

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

}  // namespace

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

}  // namespace bakeoff::workload::importers_internal
