// cli/catalog_command.cc
//
// Owns: `bakeoff catalog lint FILE... [--today YYYY-MM-DD] [--max-age DAYS] [--json]`: reads each
// runtime catalog (study/catalog.h), prints every mistake of a file that does not parse, and lints
// the rest: one line per finding, "FILE:LINE: [entry] code: message" ("code: warning: message"
// for a warning), then a summary line; --json prints the same as one JSON document.
// docs/formats/catalog.md describes the format, the codes and the exit codes.
// Exit codes: 0 every file parsed and no finding is an error (warnings allowed); 1 some finding
// is an error; 2 usage, or a file that cannot be read or parsed (its mistakes are all printed;
// the other files are still linted).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/yaml_doc.h"
#include "study/catalog.h"

namespace bakeoff::cli {
namespace {

struct CatalogLintFlags {
  std::vector<std::string> files;
  std::string today;  // empty: the real date (UTC)
  int max_age_days = 180;
  bool json = false;
};

// Today's date on the wall clock, in UTC.
std::string Today() {
  const auto days = std::chrono::floor<std::chrono::days>(RealClock().WallNow());
  return yaml::FormatIsoDate(days.time_since_epoch().count());
}

struct FileResult {
  std::string file;
  std::size_t entries = 0;
  std::string error;  // the parse or read error (every line), empty when it parsed
};

std::string Plural(std::size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

int RunCatalogLint(const CatalogLintFlags& f) {
  study::LintOptions options;
  options.today = f.today.empty() ? Today() : f.today;
  if (!yaml::ParseIsoDate(options.today)) {
    fmt::print(stderr, "bakeoff catalog lint: --today: '{}' is not a date (YYYY-MM-DD)\n",
               options.today);
    return kExitUsage;
  }
  if (f.max_age_days < 0 || f.max_age_days > 100000) {
    fmt::print(stderr, "bakeoff catalog lint: --max-age: {} is not a number of days in [0, 100000]\n",
               f.max_age_days);
    return kExitUsage;
  }
  options.max_verification_age_days = f.max_age_days;

  std::vector<FileResult> files;
  std::vector<study::LintFinding> findings;
  bool unreadable = false;
  for (const std::string& file : f.files) {
    FileResult result{file, 0, ""};
    Result<study::Catalog> catalog = study::LoadCatalog(file);
    if (!catalog.ok()) {
      unreadable = true;
      result.error = catalog.error().message;
      fmt::print(stderr, "{}\n", result.error);
    } else {
      result.entries = catalog->entries.size();
      std::vector<study::LintFinding> found = study::LintCatalog(catalog.value(), options);
      findings.insert(findings.end(), found.begin(), found.end());
    }
    files.push_back(std::move(result));
  }

  std::size_t errors = 0;
  std::size_t entries = 0;
  for (const study::LintFinding& finding : findings) {
    errors += finding.severity == study::LintSeverity::kError ? 1 : 0;
  }
  for (const FileResult& file : files) entries += file.entries;
  const std::size_t warnings = findings.size() - errors;
  const int exit_code = unreadable ? kExitUsage : errors > 0 ? kExitFailure : kExitOk;

  if (f.json) {
    nlohmann::json out;
    out["today"] = options.today;
    out["max_verification_age_days"] = options.max_verification_age_days;
    out["files"] = nlohmann::json::array();
    for (const FileResult& file : files) {
      nlohmann::json j{{"file", file.file}, {"parsed", file.error.empty()}, {"entries", file.entries}};
      if (!file.error.empty()) j["error"] = file.error;
      out["files"].push_back(std::move(j));
    }
    out["findings"] = nlohmann::json::array();
    for (const study::LintFinding& finding : findings) {
      out["findings"].push_back({{"severity", study::LintSeverityName(finding.severity)},
                                 {"file", finding.source},
                                 {"line", finding.line},
                                 {"entry", finding.entry},
                                 {"code", finding.code},
                                 {"message", finding.message}});
    }
    out["errors"] = errors;
    out["warnings"] = warnings;
    out["exit_code"] = exit_code;
    fmt::print("{}\n", out.dump(2));
    return exit_code;
  }

  for (const study::LintFinding& finding : findings) {
    fmt::print("{}\n", study::FormatLintFinding(finding));
  }
  std::string summary = fmt::format("catalog lint: {}, {}: ", Plural(files.size(), "file", "files"),
                                    Plural(entries, "entry", "entries"));
  if (findings.empty()) {
    summary += "clean";
  } else {
    summary += fmt::format("{}, {}", Plural(errors, "error", "errors"),
                           Plural(warnings, "warning", "warnings"));
  }
  if (unreadable) summary += " (some files did not parse)";
  fmt::print("{}\n", summary);
  return exit_code;
}

}  // namespace

void AddCatalogCommand(CLI::App& app, int* exit_code) {
  CLI::App* catalog = app.add_subcommand(
      "catalog", "Runtime catalogs: the pinned runtimes a study's candidates name "
                 "(docs/formats/catalog.md).");
  catalog->require_subcommand(1);
  auto flags = std::make_shared<CatalogLintFlags>();
  CLI::App* lint = catalog->add_subcommand(
      "lint",
      "Check runtime catalogs: every mistake of a file that does not parse, then what makes a "
      "parsed one a weak basis for a decision (unpinned images, stale or missing verification, "
      "sunsets, missing facts), one line per finding.\n"
      "Exit: 0 clean or warnings only, 1 an error finding, 2 usage or a file that does not parse.");
  lint->add_option("files", flags->files, "Catalog files (YAML)")->required();
  lint->add_option("--today", flags->today,
                   "The date to lint against, YYYY-MM-DD (default: today, UTC)");
  lint->add_option("--max-age", flags->max_age_days,
                   "Days after which a verification is stale")
      ->capture_default_str();
  lint->add_flag("--json", flags->json, "Print the findings as JSON");
  lint->callback([flags, exit_code] { *exit_code = RunCatalogLint(*flags); });
}

}  // namespace bakeoff::cli
