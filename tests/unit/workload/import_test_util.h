// tests/unit/workload/import_test_util.h
//
// Owns: what the trace-import tests share: the path of a checked-in trace and an import that keeps
// every row with its block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workload/importers.h"

namespace bakeoff::workload {

// tests/testdata/traces/`name`.
inline std::string TraceData(const std::string& name) { return std::string(BAKEOFF_TESTDATA_DIR) + "/traces/" + name; }

struct Imported {
  Result<ImportReport> report = MakeError(ErrorCode::kInternal, "not run");
  std::vector<TraceRequest> rows;
  std::vector<std::uint32_t> blocks;
};

inline Imported ImportPath(const std::string& path, const ImportOptions& options = {}) {
  Imported out;
  out.report = ImportTraceFile(path, options, [&out](const TraceRequest& r, std::uint32_t block) {
    out.rows.push_back(r);
    out.blocks.push_back(block);
  });
  return out;
}

}  // namespace bakeoff::workload
