// qualify/probe_report.cc
#include "qualify/probe_report.h"

#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"
#include "core/json_text.h"

namespace bakeoff::qualify {
namespace {

using Json = nlohmann::ordered_json;

Json FindingJson(const Finding& finding) {
  return {{"severity", SeverityName(finding.severity)},
          {"code", finding.code},
          {"message", finding.message},
          {"evidence", finding.evidence}};
}

}  // namespace

std::string ProbesJson(const ProbeRun& run, const ProbedTarget& target) {
  Json j;
  j["schema_version"] = kProbesSchemaVersion;
  j["tool"] = std::string("bakeoff ") + BAKEOFF_VERSION;
  j["date"] = UtcNowIso();
  j["target"] = {
      {"url", target.url}, {"mode", target.mode}, {"model", run.model}, {"emulated", run.emulated}};
  if (!target.command.empty()) j["target"]["command"] = target.command;
  j["disqualified"] = run.Disqualified();
  j["interrupted"] = run.interrupted;
  j["took_s"] = std::chrono::duration<double>(run.took).count();
  j["answer_within_s"] = std::chrono::duration<double>(run.answer_within).count();
  j["answer_within_source"] = run.answer_within_source;
  j["skipped_for_budget"] = run.skipped_for_budget;
  j["probes"] = Json::array();
  for (const ProbeResult& r : run.results) {
    Json probe = {{"name", r.name},
                  {"verdict", VerdictName(r.verdict)},
                  {"took_s", std::chrono::duration<double>(r.took).count()},
                  {"worst_case_s", std::chrono::duration<double>(r.worst_case).count()}};
    if (!r.not_run_reason.empty()) probe["not_run_reason"] = r.not_run_reason;
    probe["findings"] = Json::array();
    for (const Finding& f : r.findings) probe["findings"].push_back(FindingJson(f));
    probe["measurements"] = Json::object();
    for (const Measurement& m : r.measurements)
      probe["measurements"][m.name] = {{"value", m.value}, {"unit", m.unit}};
    probe["checks"] = Json::array();
    for (const Check& c : r.checks) {
      probe["checks"].push_back({{"name", c.name},
                                 {"status", CheckStatusName(c.status)},
                                 {"detail", c.detail},
                                 {"evidence", c.evidence}});
    }
    j["probes"].push_back(std::move(probe));
  }
  return DumpJson(j, 2);
}

std::string FormatProbeTable(const ProbeRun& run, const ProbedTarget& target) {
  std::string out =
      fmt::format("probes of {} ({}{}){}\n", target.url, target.mode,
                  run.model.empty() ? "" : ", model " + run.model,
                  run.emulated ? " [emulated engine: not an engine performance result]" : "");
  out += fmt::format("{:<15} {:<8} {:>7}  {}\n", "probe", "verdict", "time", "findings");
  for (const ProbeResult& r : run.results) {
    std::string first = r.not_run_reason;
    if (first.empty() && !r.findings.empty())
      first = r.findings.front().code + ": " + r.findings.front().message;
    if (first.size() > 110) first = std::string(Utf8Prefix(first, 107)) + "...";
    out += fmt::format("{:<15} {:<8} {:>6.1f}s  {}\n", r.name, VerdictName(r.verdict),
                       std::chrono::duration<double>(r.took).count(), first);
    for (std::size_t i = 1; i < r.findings.size(); ++i) {
      std::string more = r.findings[i].code + ": " + r.findings[i].message;
      if (more.size() > 110) more = std::string(Utf8Prefix(more, 107)) + "...";
      out += fmt::format("{:<33} {}\n", "", more);
    }
  }
  if (!run.answer_within_source.empty()) {
    out += fmt::format("waited up to {:.0f} s for one answer ({})\n",
                       std::chrono::duration<double>(run.answer_within).count(),
                       run.answer_within_source);
  }
  out += run.Disqualified() ? "verdict: DISQUALIFIED (a probe found a disqualifying problem)\n"
                            : "verdict: nothing disqualifying found\n";
  return out;
}

}  // namespace bakeoff::qualify
