// report/report_folder.cc: a results folder's pages (contract in report_folder.h).
#include "report/report_folder.h"

#include <fmt/format.h>

#include "report/html_page.h"
#include "report/run_data.h"
#include "report/study_data.h"
#include "report/study_report.h"
#include "core/file.h"
#include "core/json_text.h"
#include "study/bundle_reader.h"

namespace bakeoff::report {

namespace fs = std::filesystem;

Result<fs::path> WriteRunReport(const fs::path& dir) {
  Result<nlohmann::json> data = ReadRunData(dir);
  if (!data) return data.error();
  const fs::path file = dir / "report.html";
  const bool simulated = data->value("simulated", false);
  const std::string title =
      fmt::format("bakeoff {} report{}", simulated ? "simulate" : "bench",
                  data->value("emulated", false) ? (simulated ? " (simulated, emulated engine)" : " (emulated engine)") : "");
  if (Status written = WriteHtmlPage(file, title, data.value()); !written) return written.error();
  return file;
}

Result<fs::path> WriteStudyReport(const fs::path& bundle) {
  Result<nlohmann::json> data = ReadStudyData(bundle);
  if (!data) return data.error();
  const fs::path file = bundle / "report.html";
  const nlohmann::json& study = data->at("manifest")["study"];
  const std::string title = fmt::format("bakeoff study: {}{}", study.is_string() ? study.get<std::string>() : "",
                                        data->value("emulated", false) ? " (emulated)" : "");
  if (Status written = WriteHtmlPage(file, title, data.value()); !written) return written.error();
  return file;
}

Result<fs::path> WriteComparePage(const Comparison& comparison, const fs::path& file) {
  nlohmann::json data = {{"kind", "compare"}, {"comparison", ToJson(comparison)}, {"notes", nlohmann::json::array()}};
  for (const auto& [key, dir] : {std::pair{"old_run", comparison.old_dir}, std::pair{"new_run", comparison.new_dir}}) {
    // A run's curves per step; a bundle's per candidate, from its workload replay.
    Result<nlohmann::json> run = fs::exists(dir / "manifest.json") ? ReadStudyData(dir) : ReadRunData(dir);
    if (!run) {
      data["notes"].push_back(run.error().message);
      continue;
    }
    nlohmann::json curves = run->value("curves", nlohmann::json::object());
    for (const nlohmann::json& c : run->value("candidates", nlohmann::json::array())) {
      if (!c.contains("replay")) continue;
      for (const auto& [metric, values] : c["replay"].items()) {
        curves[metric].push_back({{"step", c.value("name", "") + " replay"}, {"values", values}});
      }
    }
    data[key] = {{"emulated", run->at("emulated")}, {"simulated", run->at("simulated")},
                 {"curve_nines", run->at("curve_nines")}, {"curves", curves}};
    for (const nlohmann::json& note : run->at("notes")) data["notes"].push_back(fmt::format("{}: {}", dir.string(), note.get<std::string>()));
  }
  if (Status written = WriteHtmlPage(file, "bakeoff compare", data); !written) return written.error();
  return file;
}

Result<std::vector<fs::path>> RenderResultsFolder(const fs::path& dir) {
  if (!fs::is_directory(dir)) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: not a folder", dir.string()));
  }
  if (fs::exists(dir / "manifest.json")) {
    // The decision record from the results model read back, as `bakeoff run` rendered it.
    Result<study::StudyResults> results = study::ReadBundle(dir);
    if (!results) return results.error();
    const fs::path record = dir / "report.md";
    if (Status written = WriteFileAtomically(record, ValidUtf8(StudyMarkdown(results.value()))); !written) return written.error();
    Result<fs::path> page = WriteStudyReport(dir);
    if (!page) return page.error();
    return std::vector<fs::path>{record, page.value()};
  }
  if (!fs::exists(dir / "summary.json")) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: not a bakeoff results folder (no summary.json of a bench or simulate run, no "
                                 "manifest.json of a study bundle)",
                                 dir.string()));
  }
  Result<fs::path> page = WriteRunReport(dir);
  if (!page) return page.error();
  return std::vector<fs::path>{page.value()};
}

}  // namespace bakeoff::report
