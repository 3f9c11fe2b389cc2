// tests/unit/report/compare_bundle_test.cc
//
// Owns: tests of comparing two study bundles (report/compare.h LoadRunSummary on a bundle), the
// method's upgrade check, on bundles of the golden study made here on the virtual clock: the same
// bundle twice shows no change and matches every candidate's phases and capacity; a capacity that
// halves is worse and regresses with --gate-throughput; a bundle that replayed other requests is
// refused naming the workload; a bundle is never compared with a run. compare.html overlays the
// candidates' replay curves.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/file.h"
#include "report/compare.h"
#include "report/report_folder.h"
#include "study/bundle_reader.h"
#include "study/runner.h"
#include "support/scratch.h"

namespace bakeoff::report {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class CompareBundleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<study::Study> s = study::LoadStudy(fs::path(BAKEOFF_TESTDATA_DIR) / "golden" / "study" / "study.yaml");
    ASSERT_TRUE(s.ok()) << s.error().message;
    bundle_ = new fs::path(bakeoff::testing::ScratchRoot() / ("bakeoff_compare_bundle_" + std::to_string(::getpid())));
    fs::remove_all(*bundle_);
    study::StudyRunOptions options;
    options.out_dir = *bundle_;
    options.presets_dir = fs::path(BAKEOFF_SOURCE_DIR) / "examples" / "engines";
    const std::atomic<bool> stop{false};
    Result<study::StudyResults> results = study::RunStudy(s.value(), options, stop, [](const std::string&) {});
    ASSERT_TRUE(results.ok()) << results.error().message;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*bundle_);
    delete bundle_;
  }
  // A copy of the bundle to change.
  fs::path Copy(const std::string& name) {
    const fs::path copy = bundle_->string() + "_" + name;
    fs::remove_all(copy);
    fs::copy(*bundle_, copy, fs::copy_options::recursive);
    copies_.push_back(copy);
    return copy;
  }
  void TearDown() override {
    for (const fs::path& c : copies_) fs::remove_all(c);
  }
  static Comparison Compare(const fs::path& a, const fs::path& b, CompareOptions options = {}) {
    Result<json> old_run = LoadRunSummary(a);
    Result<json> new_run = LoadRunSummary(b);
    EXPECT_TRUE(old_run.ok() && new_run.ok());
    Result<Comparison> c = CompareRuns(old_run.value(), new_run.value(), options);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
    return c.ok() ? c.value() : Comparison{};
  }
  static const MetricChange* Find(const Comparison& c, const std::string& step, const std::string& metric) {
    for (const MetricChange& m : c.changes) {
      if (m.step == step && m.metric == metric) return &m;
    }
    return nullptr;
  }

  static fs::path* bundle_;
  std::vector<fs::path> copies_;
};
fs::path* CompareBundleTest::bundle_ = nullptr;

TEST_F(CompareBundleTest, TheSameBundleTwiceIsNoChangeOnEveryCandidatesPhasesAndCapacity) {
  const Comparison c = Compare(*bundle_, Copy("same"));
  EXPECT_FALSE(c.Regressed());
  EXPECT_TRUE(c.emulated);
  EXPECT_TRUE(c.unmatched_steps.empty());
  for (const char* step : {"radix single: single", "radix sweep: concurrency=8", "radix replay: replay", "paged replay: replay"}) {
    const MetricChange* m = Find(c, step, "TTFT p99 ms");
    ASSERT_NE(m, nullptr) << step;
    EXPECT_EQ(m->verdict, Verdict::kNoDetectableChange);
  }
  const MetricChange* capacity = Find(c, "radix capacity", "capacity req/s");
  ASSERT_NE(capacity, nullptr);
  EXPECT_GT(capacity->old_value, 0);
  EXPECT_EQ(Find(c, "static capacity", "capacity req/s"), nullptr) << "an eliminated candidate has no capacity";

  const fs::path page = *bundle_ / "compare.html";
  ASSERT_TRUE(WriteComparePage(c, page).ok());
  Result<std::string> html = ReadFile(page);
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("radix replay"), std::string::npos) << "the replay curves are overlaid";
}

TEST_F(CompareBundleTest, AHalvedCapacityIsWorseAndRegressesWhenThroughputGates) {
  const fs::path slower = Copy("slower");
  const fs::path file = slower / "candidates" / "radix" / "capacity" / "result.json";
  json capacity = json::parse(std::ifstream(file));
  capacity["capacity_per_s"] = capacity["capacity_per_s"].get<double>() / 2;
  std::ofstream(file, std::ios::trunc) << capacity.dump();
  const Comparison ungated = Compare(*bundle_, slower);
  const MetricChange* m = Find(ungated, "radix capacity", "capacity req/s");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->verdict, Verdict::kWorse);
  EXPECT_NEAR(m->relative, -0.5, 1e-9);
  EXPECT_FALSE(ungated.Regressed()) << "no bounds: it gates only when asked";
  CompareOptions gate;
  gate.gate_throughput = true;
  EXPECT_TRUE(Compare(*bundle_, slower, gate).Regressed());
}

// A term with no sample is NaN, written as null: such a bundle still reads back.
TEST_F(CompareBundleTest, AnUnmeasuredFigureWrittenAsNullReadsBack) {
  const fs::path copy = Copy("nan");
  const fs::path verdict_file = copy / "verdict.json";
  json verdict = json::parse(std::ifstream(verdict_file));
  verdict["candidates"][0]["evidence"][0]["observed"] = nullptr;
  std::ofstream(verdict_file, std::ios::trunc) << verdict.dump();
  const fs::path phase_file = copy / "candidates" / "radix" / "replay-r0" / "result.json";
  json phase = json::parse(std::ifstream(phase_file));
  phase["steps"][0]["terms"][0]["observed_ms"] = nullptr;
  std::ofstream(phase_file, std::ios::trunc) << phase.dump();
  Result<study::StudyResults> read = study::ReadBundle(copy);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_TRUE(std::isnan(read->verdict.candidates[0].evidence[0].observed));
}

TEST_F(CompareBundleTest, OtherRequestsAreRefusedAndABundleIsNeverComparedWithARun) {
  const fs::path other = Copy("other");
  const fs::path trace = other / "workload" / "trace.jsonl";
  Result<std::string> text = ReadFile(trace);
  ASSERT_TRUE(text.ok());
  std::ofstream(trace, std::ios::app) << "{\"arrival_s\": 99, \"input_tokens\": 5, \"output_tokens\": 5}\n";
  Result<json> a = LoadRunSummary(*bundle_);
  Result<json> b = LoadRunSummary(other);
  ASSERT_TRUE(a.ok() && b.ok());
  Result<Comparison> refused = CompareRuns(a.value(), b.value(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("trace: workload/trace.jsonl requests"), std::string::npos) << refused.error().message;

  Result<json> run = LoadRunSummary(*bundle_ / "candidates" / "radix" / "replay-r0");
  ASSERT_TRUE(run.ok()) << run.error().message;
  Result<Comparison> mixed = CompareRuns(a.value(), run.value(), {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("one is a study bundle and the other a bench or simulate run"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::report
