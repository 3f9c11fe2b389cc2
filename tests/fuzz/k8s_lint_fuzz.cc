// tests/fuzz/k8s_lint_fuzz.cc
//
// Owns: the libFuzzer harness for the Kubernetes manifest lint (deploy/manifest_lint.h).
// Invariants: any bytes are linted without a crash or a hang (yaml-cpp's bound is checked
// first); every finding names the file and a line, is one line of text, and has a code; an input
// that is not YAML is reported as unreadable, naming the file; a second run finds the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "deploy/manifest_lint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bakeoff;
  const std::string text(reinterpret_cast<const char*>(data), size);
  deploy::MeasuredLifecycle measured;
  measured.cold_start_s = 120;
  measured.drain_s = 45;
  measured.source = "bundle";
  const deploy::LintReport report = deploy::LintManifests({{"fuzz.yaml", text}}, measured);
  for (const deploy::LintFinding& f : report.findings) {
    const std::string line = f.Text();
    BAKEOFF_CHECK(line.rfind("fuzz.yaml:", 0) == 0 && f.line >= 1 && !f.code.empty()) << line;
  }
  for (const std::string& u : report.unreadable) BAKEOFF_CHECK(u.rfind("fuzz.yaml", 0) == 0) << u;
  for (const std::string& s : report.skipped) BAKEOFF_CHECK(s.rfind("fuzz.yaml:", 0) == 0) << s;
  const deploy::LintReport again = deploy::LintManifests({{"fuzz.yaml", text}}, measured);
  BAKEOFF_CHECK(again.findings.size() == report.findings.size() && again.skipped == report.skipped);
  return 0;
}
