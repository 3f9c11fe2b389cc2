// report/html_page.h
//
// Owns: report.html and compare.html as files: one self-contained page holding its data (a JSON
// block), the page code that draws it (web/report.js, web/report.css) and the charting library
// from npm (uPlot, embedded at build time: docs/DEPENDENCIES.md), so it opens offline from a
// file:// URL. Its Content-Security-Policy allows no network request of any kind.
// Does not own: what the data says (report/run_data.h, report/study_data.h, report/compare.h).
//
// Thread-safety: pure functions; WriteHtmlPage writes one file atomically.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace bakeoff::report {

// The page for `data`, whose "kind" ("run", "study" or "compare") the page code draws.
std::string HtmlPage(std::string_view title, const nlohmann::json& data);

Status WriteHtmlPage(const std::filesystem::path& file, std::string_view title, const nlohmann::json& data);

}  // namespace bakeoff::report
