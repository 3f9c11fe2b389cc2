// `bakeoff catalog lint` as a user runs it: the demo catalog is clean (exit 0); the starter
// catalog has error findings, one line each as FILE:LINE: [entry] code: message (exit 1); warnings
// alone exit 0; a file that does not parse prints every mistake and exits 2 while the other files
// are still linted; --json carries the same findings; bad flags exit 2.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/bakeoff_process.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;
using testing::Finished;
using testing::RunBakeoff;

std::string Source(const std::string& relative) {
  return (fs::path(BAKEOFF_SOURCE_DIR) / relative).string();
}

// A catalog file in a fresh temporary folder, removed by the fixture.
class CatalogLintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = bakeoff::testing::ScratchRoot() / ("bakeoff_catalog_lint_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(CatalogLintTest, TheDemoCatalogIsClean) {
  const Finished f =
      RunBakeoff({"catalog", "lint", Source("examples/demo/catalog.yaml"), "--today", "2026-12-01"});
  EXPECT_EQ(f.exit_code, 0) << f.output;
  EXPECT_EQ(f.output.rfind("catalog lint: 1 file, ", 0), 0u) << f.output;
  EXPECT_NE(f.output.find(" entries: clean\n"), std::string::npos) << f.output;
}

TEST_F(CatalogLintTest, TheStarterCatalogHasErrorFindingsOneLineEach) {
  const std::string file = Source("examples/catalog.yaml");
  const Finished f = RunBakeoff({"catalog", "lint", file, "--today", "2026-12-01"});
  EXPECT_EQ(f.exit_code, 1) << f.output;
  // No digest is invented: every engine and serving platform is flagged.
  EXPECT_EQ(Count(f.output, "] missing_digest: "), 8u) << f.output;
  EXPECT_NE(f.output.find(file + ":"), std::string::npos);
  EXPECT_NE(f.output.find("[vllm-snapshot-2026] missing_field: version is not given"),
            std::string::npos)
      << f.output;
  EXPECT_NE(f.output.find("[tgi-3.3.6-dev0] never_verified: warning: "), std::string::npos);
  // llama.cpp was verified live on that date, so it is not never_verified.
  EXPECT_EQ(f.output.find("[llamacpp-b4748] never_verified"), std::string::npos);
}

TEST_F(CatalogLintTest, WarningsAloneExitZeroAndTheAgeIsAFlag) {
  const std::string file = Write("c.yaml",
                                 "runtimes:\n"
                                 "  - id: emulated-paged\n"
                                 "    engine: emulated\n"
                                 "    emulated_preset: continuous-paged\n"
                                 "    version: 0.1.0\n"
                                 "    features: [streaming]\n"
                                 "    max_context: 32768\n"
                                 "    last_verified_version: 0.1.0\n"
                                 "    last_verified_date: 2026-01-01\n"
                                 "    verified_against: bakeoff's own emulator tests\n"
                                 "    sunset: 2026-12-20\n");
  const Finished f = RunBakeoff({"catalog", "lint", file, "--today", "2026-12-01"});
  EXPECT_EQ(f.exit_code, 0) << f.output;
  EXPECT_NE(f.output.find(file + ":11: [emulated-paged] sunset_soon: warning: sunset on 2026-12-20, "
                                 "in 19 days"),
            std::string::npos)
      << f.output;
  EXPECT_NE(f.output.find(file + ":9: [emulated-paged] verification_stale: warning: "),
            std::string::npos)
      << f.output;
  EXPECT_NE(f.output.find("0 errors, 2 warnings"), std::string::npos) << f.output;
  const Finished young =
      RunBakeoff({"catalog", "lint", file, "--today", "2026-12-01", "--max-age", "365"});
  EXPECT_EQ(young.output.find("verification_stale"), std::string::npos) << young.output;
  // Past the sunset it is an error.
  const Finished late = RunBakeoff({"catalog", "lint", file, "--today", "2026-12-20"});
  EXPECT_EQ(late.exit_code, 1) << late.output;
  EXPECT_NE(late.output.find("] sunset_passed: sunset is today"), std::string::npos) << late.output;
}

TEST_F(CatalogLintTest, AFileThatDoesNotParsePrintsEveryMistakeAndExitsTwo) {
  const std::string bad = Write("bad.yaml",
                                "runtimes:\n"
                                "  - id: a\n"
                                "    engine: vlm\n"
                                "    featurs: [streaming]\n"
                                "  - id: a\n"
                                "    engine: tgi\n"
                                "    max_context: lots\n");
  const Finished f = RunBakeoff(
      {"catalog", "lint", bad, Source("examples/demo/catalog.yaml"), "--today", "2026-12-01"});
  EXPECT_EQ(f.exit_code, 2) << f.output;
  for (const std::string& line :
       {bad + ":3: runtimes[0].engine: 'vlm' is no engine adapter; did you mean vllm?",
        bad + ":4: runtimes[0].featurs: unknown key; did you mean features?",
        bad + ":5: runtimes[1].id: 'a' is given twice (first on line 2)",
        bad + ":7: runtimes[1].max_context: expected a whole number, got 'lots'"}) {
    EXPECT_NE(f.output.find(line), std::string::npos) << line << "\n" << f.output;
  }
  // The other file is still linted.
  EXPECT_NE(f.output.find("catalog lint: 2 files, "), std::string::npos) << f.output;
  EXPECT_NE(f.output.find(" entries: clean (some files did not parse)"), std::string::npos)
      << f.output;
  const Finished missing = RunBakeoff({"catalog", "lint", (dir_ / "none.yaml").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("none.yaml"), std::string::npos) << missing.output;
}

TEST_F(CatalogLintTest, JsonCarriesTheFindings) {
  const Finished f = RunBakeoff(
      {"catalog", "lint", Source("examples/catalog.yaml"), "--today", "2026-12-01", "--json"});
  EXPECT_EQ(f.exit_code, 1) << f.output;
  const nlohmann::json j = nlohmann::json::parse(f.output);
  EXPECT_EQ(j["today"], "2026-12-01");
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["files"].size(), 1u);
  EXPECT_EQ(j["files"][0]["entries"], 9);
  EXPECT_GT(j["errors"].get<int>(), 0);
  bool digest = false;
  for (const nlohmann::json& finding : j["findings"]) {
    EXPECT_TRUE(finding.contains("line") && finding.contains("entry") && finding.contains("code"));
    digest = digest || (finding["code"] == "missing_digest" && finding["severity"] == "error");
  }
  EXPECT_TRUE(digest);
}

TEST_F(CatalogLintTest, BadFlagsExitTwo) {
  const std::string demo = Source("examples/demo/catalog.yaml");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"catalog", "lint"},
           {"catalog"},
           {"catalog", "lint", demo, "--today", "2026-02-30"},
           {"catalog", "lint", demo, "--max-age", "-1"},
           {"catalog", "lint", demo, "--max-age", "old"},
       }) {
    const Finished f = RunBakeoff(args);
    EXPECT_EQ(f.exit_code, 2) << args.back() << "\n" << f.output;
  }
}

}  // namespace
}  // namespace bakeoff
