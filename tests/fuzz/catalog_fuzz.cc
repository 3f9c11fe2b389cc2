// tests/fuzz/catalog_fuzz.cc
//
// Owns: the libFuzzer harness for runtime catalogs (study/catalog.h). Invariants: a parse either
// fails with kInvalidInput whose every line starts with "fuzz.yaml" (FILE:LINE: ... lines, all
// mistakes at once), or yields entries with unique, non-empty ids that Find returns, each with
// a line; the lint of a parsed catalog never crashes, names only the catalog's entries and lines
// at or after the entry's, formats each finding on one line, and is the same on a second run.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "core/check.h"
#include "study/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bakeoff;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<study::Catalog> catalog = study::ParseCatalog(text, "fuzz.yaml");
  if (!catalog.ok()) {
    BAKEOFF_CHECK(catalog.error().code == ErrorCode::kInvalidInput) << catalog.error().message;
    const std::string& message = catalog.error().message;
    for (std::size_t start = 0; start < message.size();) {
      std::size_t end = message.find('\n', start);
      if (end == std::string::npos) end = message.size();
      BAKEOFF_CHECK(message.compare(start, 9, "fuzz.yaml") == 0) << message;
      start = end + 1;
    }
    return 0;
  }
  std::set<std::string> ids;
  for (const study::CatalogEntry& entry : catalog->entries) {
    BAKEOFF_CHECK(!entry.id.empty());
    BAKEOFF_CHECK(ids.insert(entry.id).second) << entry.id;
    BAKEOFF_CHECK(catalog->Find(entry.id) == &entry);
    BAKEOFF_CHECK(entry.line >= 1);
    BAKEOFF_CHECK(!entry.engine.empty());
    BAKEOFF_CHECK(!entry.emulated() || entry.image == study::kBuiltinImage);
  }
  study::LintOptions options;
  options.today = "2026-12-01";
  const std::vector<study::LintFinding> findings = study::LintCatalog(catalog.value(), options);
  for (const study::LintFinding& finding : findings) {
    const study::CatalogEntry* entry = catalog->Find(finding.entry);
    BAKEOFF_CHECK(entry != nullptr) << finding.entry;
    BAKEOFF_CHECK(finding.line >= entry->line) << finding.line;
    BAKEOFF_CHECK(!finding.code.empty() && !finding.message.empty());
    BAKEOFF_CHECK(study::FormatLintFinding(finding).find('\n') == std::string::npos);
  }
  BAKEOFF_CHECK(study::LintCatalog(catalog.value(), options).size() == findings.size());
  return 0;
}
