// tests/fuzz/writers_fuzz.cc
//
// Owns: the libFuzzer harness for the writers that quote foreign text (a server's answers and
// error bodies, a log line, a trace field): probes.json and the probe table (qualify/
// probe_report.h), gate.json and verdict.json (study/), report.md and report.html's data
// (report/). The input is cut at NUL bytes into the texts a probe finding, a gate cell and a
// verdict carry, with every byte value possible. Invariants: no writer throws or aborts, every
// JSON written parses (nlohmann's parser refuses a string that is not UTF-8) and reads back the
// same, and report.md as written is UTF-8.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/json_dump.h"
#include "core/json_text.h"
#include "qualify/probe_report.h"
#include "report/html_page.h"
#include "report/study_report.h"
#include "study/verdict.h"

namespace {

std::vector<std::string> Texts(std::string_view input) {
  std::vector<std::string> texts;
  std::size_t start = 0;
  while (texts.size() < 8) {
    const std::size_t end = input.find('\0', start);
    texts.emplace_back(input.substr(start, end == std::string_view::npos ? input.size() - start : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  while (texts.size() < 8) texts.push_back(texts.back());
  return texts;
}

void CheckJson(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  BAKEOFF_CHECK(!doc.is_discarded()) << "not JSON (or not UTF-8): " << bakeoff::ValidUtf8(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bakeoff;
  const std::vector<std::string> t = Texts(std::string_view(reinterpret_cast<const char*>(data), size));

  // A probe run as a misbehaving server leaves it: its texts straight into the results.
  qualify::ProbeRun run;
  run.model = t[0];
  run.unavailable = t[7];
  qualify::ProbeResult& r = run.results.emplace_back();
  r.name = t[1];
  r.not_run_reason = t[2];
  r.findings.push_back({qualify::Severity::kWarning, t[3], t[4], {t[5]}});
  r.Find(qualify::Severity::kDisqualifying, t[6], t[4]);
  r.AddCheck(t[5], qualify::CheckStatus::kFail, t[6], {t[7]});
  r.Measure(t[2], 1.5, t[3]);
  const qualify::ProbedTarget target{t[0], "launch", t[1]};
  CheckJson(qualify::ProbesJson(run, target));
  (void)qualify::FormatProbeTable(run, target);

  // The study's gate and verdict with the same texts in every sentence.
  study::StudyResults results;
  study::GateRow& row = results.gate.rows.emplace_back();
  row.candidate = t[0];
  row.cells.push_back({t[1], study::CellStatus::kFail, t[2], t[3]});
  study::CandidateResult& c = results.candidates.emplace_back();
  c.name = t[0];
  c.failed = t[4];
  c.probes.findings.push_back({t[3], "warning", t[4], "risk", t[5], t[6], t[7], {t[1]}});
  c.known_limits.push_back(t[2]);
  study::CandidateVerdict& v = results.verdict.candidates.emplace_back();
  v.name = t[0];
  v.reasons = {t[1], t[2]};
  v.risks = {t[3], t[4]};
  v.findings = {t[5]};
  v.evidence.push_back({t[6], study::CellStatus::kUnknown, 0, 0, t[7], t[1], t[2]});
  results.verdict.choice = t[0];
  results.verdict.rationale.push_back({t[6], {t[7]}});
  results.verdict.mistakes.push_back({t[1], t[2]});
  const std::string gate = DumpJson(study::ToJson(results.gate), 2);
  CheckJson(gate);
  const std::string verdict = DumpJson(study::ToJson(results.verdict), 2);
  CheckJson(verdict);
  const study::Verdict back = study::VerdictFromJson(nlohmann::json::parse(verdict));
  BAKEOFF_CHECK(back.candidates.size() == 1 && back.candidates[0].risks.size() == 2);
  CheckJson(DumpJson(study::ToJson(c.probes), -1));

  // report.md and the terminal summary render whatever the texts are (run and report write
  // report.md through ValidUtf8); report.html, title and embedded data included, is UTF-8.
  (void)report::StudyMarkdown(results);
  (void)report::StudySummaryText(results);
  const std::string page = report::HtmlPage(t[0], nlohmann::json{{"verdict", study::ToJson(results.verdict)}, {"title", t[1]}});
  std::size_t replaced = 0;
  (void)ValidUtf8(page, &replaced);
  BAKEOFF_CHECK(replaced == 0);
  return 0;
}
