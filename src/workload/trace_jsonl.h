// workload/trace_jsonl.h
//
// Owns: writing the canonical trace as JSONL (docs/formats/trace.md): a header line naming the
// format, its block size and whether arrival times are known, then one request a line. Reading it
// back is an importer like any other (workload/importers.h, TraceFormat::kTrace).
//
// Thread-safety: pure functions.
// Units: arrival_s and think_time_s in seconds; token counts as integers.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/result.h"
#include "workload/trace.h"

namespace bakeoff::workload {

// The header line (without '\n').
std::string FormatTraceHeader(const Trace& trace);

// Appends one request's line (without '\n'). Fields that are unset are left out.
void AppendTraceLine(std::string& out, const TraceRequest& request);

// Writes header and rows to `path` through a temporary file and a rename.
Status WriteTraceJsonl(const Trace& trace, const std::filesystem::path& path);

}  // namespace bakeoff::workload
