// Golden verdict.json and report.md from a fixed study on the virtual clock
// (tests/testdata/golden/study): the decision record must not drift without someone meaning it.
// BAKEOFF_UPDATE_GOLDEN=1 rewrites the golden files (then review the diff). A second run over the
// same bundle resumes every phase and must decide the same, byte for byte.
#include "report/study_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/file.h"
#include "study/bundle_reader.h"
#include "support/scratch.h"

namespace bakeoff::report {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(BAKEOFF_TESTDATA_DIR) / "golden" / "study";

std::string Read(const fs::path& path) {
  Result<std::string> text = ReadFile(path);
  return text.ok() ? text.value() : "(cannot read " + path.string() + ")";
}

void ExpectGolden(const std::string& actual, const std::string& name) {
  const fs::path golden = kGolden / name;
  if (const char* update = std::getenv("BAKEOFF_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    std::ofstream(golden) << actual;
    return;
  }
  EXPECT_EQ(actual, Read(golden)) << name << " differs from its golden file; if the change is meant, rerun with "
                                  << "BAKEOFF_UPDATE_GOLDEN=1 and review the diff";
}

TEST(StudyReportTest, VerdictAndReportMatchTheirGoldenFilesAndSurviveAResume) {
  Result<study::Study> s = study::LoadStudy(kGolden / "study.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const fs::path out = bakeoff::testing::ScratchRoot() / ("bakeoff_golden_" + std::to_string(::getpid()));
  fs::remove_all(out);
  study::StudyRunOptions options;
  options.out_dir = out;
  options.presets_dir = fs::path(BAKEOFF_SOURCE_DIR) / "examples" / "engines";
  const std::atomic<bool> stop{false};
  auto quiet = [](const std::string&) {};
  Result<study::StudyResults> first = study::RunStudy(s.value(), options, stop, quiet);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const std::string verdict = Read(out / "verdict.json");
  ExpectGolden(verdict, "verdict.json");
  ExpectGolden(StudyMarkdown(first.value()), "report.md");
  EXPECT_EQ(first->verdict.choice.empty(), false);
  // `bakeoff report` reads the bundle back into the same model: the same decision record.
  Result<study::StudyResults> read_back = study::ReadBundle(out);
  ASSERT_TRUE(read_back.ok()) << read_back.error().message;
  EXPECT_EQ(StudyMarkdown(read_back.value()), StudyMarkdown(first.value()));
  EXPECT_EQ(study::ToJson(read_back->verdict).dump(), study::ToJson(first->verdict).dump());
  EXPECT_EQ(study::ToJson(read_back->gate).dump(), study::ToJson(first->gate).dump());

  Result<study::StudyResults> again = study::RunStudy(s.value(), options, stop, quiet);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again->resumed.empty());
  EXPECT_EQ(Read(out / "verdict.json"), verdict) << "a resumed study decides the same";
  fs::remove_all(out);
}

// An exception escaping a phase (here thrown by the progress callback as the second candidate's
// sweep starts) ends the study with one error naming the candidate and the phase, not
// std::terminate; the phases finished before it are on disk, and the next run resumes them and
// decides exactly as a run that never failed.
TEST(StudyReportTest, AnExceptionInAPhaseNamesItAndTheNextRunResumes) {
  Result<study::Study> s = study::LoadStudy(kGolden / "study.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const fs::path out = bakeoff::testing::ScratchRoot() / ("bakeoff_guard_" + std::to_string(::getpid()));
  fs::remove_all(out);
  study::StudyRunOptions options;
  options.out_dir = out;
  options.presets_dir = fs::path(BAKEOFF_SOURCE_DIR) / "examples" / "engines";
  const std::atomic<bool> stop{false};
  auto throwing = [](const std::string& line) {
    if (line.rfind("paged: sweep", 0) == 0) throw std::runtime_error("incomplete UTF-8 string; last byte: 0xC2");
  };
  Result<study::StudyResults> failed = study::RunStudy(s.value(), options, stop, throwing);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kInternal);
  EXPECT_NE(failed.error().message.find("candidate paged, phase sweep: incomplete UTF-8 string"), std::string::npos)
      << failed.error().message;
  EXPECT_TRUE(fs::exists(out / "manifest.json"));
  EXPECT_TRUE(fs::exists(out / "candidates" / "radix" / "sweep-r0" / "result.json"));
  EXPECT_TRUE(fs::exists(out / "candidates" / "paged" / "single-r0" / "result.json"));

  auto quiet = [](const std::string&) {};
  Result<study::StudyResults> resumed = study::RunStudy(s.value(), options, stop, quiet);
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_NE(std::find(resumed->resumed.begin(), resumed->resumed.end(), "paged/single-r0"), resumed->resumed.end());
  EXPECT_EQ(Read(out / "verdict.json"), Read(kGolden / "verdict.json"));
  fs::remove_all(out);
}

TEST(StudyReportTest, TheSummarySaysEmulatedFirst) {
  study::StudyResults r;
  r.verdict.emulated = true;
  EXPECT_EQ(StudySummaryText(r).rfind("EMULATED", 0), 0u);
  EXPECT_NE(StudyMarkdown(r).find("EMULATED"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::report
