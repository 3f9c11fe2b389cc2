// tests/unit/report/run_data_test.cc
//
// Owns: tests of reading a run folder into page data (report/run_data.h) and of the page around it
// (report/html_page.h, report/report_folder.h), on folders written here: the curves are the
// records' own order statistics; a records.jsonl cut by a killed run still renders and says how
// many lines were unreadable and which came first; a folder that is not a result, or a summary of
// another schema, gets one line; the page data stays the same size however many requests ran; the
// embedded data cannot end its script element.
#include "report/run_data.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

#include "core/file.h"
#include "analyze/step_analysis.h"
#include "report/html_page.h"
#include "report/report_folder.h"
#include "support/scratch.h"

namespace bakeoff::report {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class RunDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = bakeoff::testing::ScratchRoot() /
           fmt::format("bakeoff_run_data_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A summary of `steps` rate steps (the figures the page copies; the curves come from records).
  void WriteSummary(int steps, int schema = 1) {
    json s = {{"schema_version", schema}, {"tool", {{"name", "bakeoff"}, {"version", "test"}}},
              {"target", {{"url", "http://127.0.0.1:1"}, {"model", "m"}, {"emulated", true}}},
              {"records_file", "records.jsonl"}, {"metrics_file", nullptr}, {"config", {{"rates", json::array()}}},
              {"steps", json::array()}};
    for (int i = 0; i < steps; ++i) {
      s["config"]["rates"].push_back(2 * (i + 1));
      s["steps"].push_back({{"label", fmt::format("rate={}/s", 2 * (i + 1))},
                            {"requests", {{"planned", 1000}, {"measured", 1000}}},
                            {"latency", {{"ttft_ms", {{"count", 1}, {"p99", {{"value", 5.0}, {"bounded", false}}}}}}}});
    }
    ASSERT_TRUE(WriteFileAtomically(dir_ / "summary.json", s.dump()).ok());
  }

  // A request of `step` sent at `at_ms`, first token after `ttft_ms`, `tokens` tokens 10 ms apart.
  static std::string Record(int id, int step, double at_ms, double ttft_ms, int tokens) {
    const auto ns = [](double ms) { return static_cast<std::int64_t>(ms * 1e6); };
    json events = json::array();
    for (int t = 0; t < tokens; ++t) events.push_back(ns(10.0 * t));
    return json{{"id", id}, {"step", step}, {"phase", "measure"}, {"outcome", "ok"},
                {"intended_send_ns", ns(at_ms)}, {"send_start_ns", ns(at_ms)},
                {"first_token_ns", ns(at_ms + ttft_ms)}, {"last_token_ns", ns(at_ms + ttft_ms + 10.0 * (tokens - 1))},
                {"finished_ns", ns(at_ms + ttft_ms + 10.0 * (tokens - 1))}, {"prompt_tokens_planned", 100},
                {"usage_prompt_tokens", 100 + id % 7}, {"output_tokens", tokens}, {"token_event_ns", events}}
        .dump();
  }

  fs::path dir_;
};

TEST_F(RunDataTest, CurvesAreTheRecordsOwnOrderStatistics) {
  WriteSummary(2);
  std::ofstream records(dir_ / "records.jsonl");
  for (int i = 0; i < 100; ++i) records << Record(i, 0, 10.0 * i, 1 + i, 5) << "\n";  // TTFT 1..100 ms
  for (int i = 0; i < 100; ++i) records << Record(i, 1, 10.0 * i, 200, 3) << "\n";
  records.close();
  Result<json> data = ReadRunData(dir_);
  ASSERT_TRUE(data.ok()) << data.error().message;
  const json& ttft = (*data)["curves"]["ttft_ms"];
  ASSERT_EQ(ttft.size(), 2u);
  const std::vector<double> nines = analyze::LatencyCurveNines();
  ASSERT_EQ(ttft[0]["values"].size(), nines.size());
  EXPECT_NEAR(ttft[0]["values"].front().get<double>(), 1, 1e-6) << "q=0 is the smallest";
  EXPECT_NEAR(ttft[0]["values"].back().get<double>(), 100, 1e-6) << "q=99.99% of 100 is the largest";
  EXPECT_NEAR(ttft[0]["values"][40].get<double>(), 90, 1e-6) << "one nine (q=90%) is the 90th of 100";
  EXPECT_NEAR(ttft[1]["values"][80].get<double>(), 200, 1e-6);
  EXPECT_NEAR((*data)["curves"]["tpot_ms"][0]["values"][0].get<double>(), 10, 1e-6);
  EXPECT_NEAR((*data)["curves"]["itl_token_ms"][1]["values"][0].get<double>(), 10, 1e-6);
  EXPECT_EQ((*data)["records"]["unreadable"], 0);
  EXPECT_TRUE((*data)["notes"].empty()) << (*data)["notes"].dump();
  EXPECT_EQ((*data)["load_axis"]["x"], json({2, 4}));
  EXPECT_EQ((*data)["timeline"]["step"], "rate=4/s") << "the timeline samples the last (busiest) step";
  EXPECT_FALSE((*data)["timeline"]["requests"].empty());
  // Step 1 starts where step 0 ended on the run's timeline (its last finish: 990 + 100 + 40 ms).
  EXPECT_NEAR((*data)["step_starts_s"][1].get<double>(), 1.130, 1e-6);
  EXPECT_EQ((*data)["prompt_tokens"]["counts"].get<std::vector<int>>().size(), 7u) << "server-counted 100..106";
}

TEST_F(RunDataTest, TheSummarysCurvesComeFirstAndNeedNoRecords) {
  WriteSummary(1);
  Result<std::string> text = ReadFile(dir_ / "summary.json");
  ASSERT_TRUE(text.ok());
  json s = json::parse(*text);
  const std::vector<double> nines = analyze::LatencyCurveNines();
  s["steps"][0]["latency_curves"] = {{"nines", nines}, {"ttft_ms", std::vector<double>(nines.size(), 7.0)}};
  s["steps"][0]["latency"]["ttft_ms"]["count"] = 1000;
  s["records_file"] = nullptr;  // simulate --keep summary
  ASSERT_TRUE(WriteFileAtomically(dir_ / "summary.json", s.dump()).ok());
  Result<json> data = ReadRunData(dir_);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_EQ((*data)["curves"]["ttft_ms"][0]["values"][100], 7.0);
  EXPECT_EQ((*data)["curves"]["ttft_ms"][0]["count"], 1000);
  EXPECT_TRUE((*data)["curves"]["tpot_ms"][0]["values"].empty()) << "no curve in the summary, no records to read";
  ASSERT_EQ((*data)["notes"].size(), 1u);
  EXPECT_NE((*data)["notes"][0].get<std::string>().find("kept no records"), std::string::npos);
}

TEST_F(RunDataTest, ACutRecordsFileRendersWhatIsThereAndCountsTheRest) {
  WriteSummary(1);
  std::ofstream records(dir_ / "records.jsonl");
  for (int i = 0; i < 10; ++i) records << Record(i, 0, i, 5, 2) << "\n";
  records << "   \n";  // a line of spaces is a line that could not be read, not silently nothing
  const std::string last = Record(10, 0, 10, 5, 2);
  records << last.substr(0, last.size() / 2);  // killed while writing
  records.close();
  Result<json> data = ReadRunData(dir_);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_EQ((*data)["records"]["lines"], 12);
  EXPECT_EQ((*data)["records"]["unreadable"], 2);
  EXPECT_EQ((*data)["curves"]["ttft_ms"][0]["count"], 10);
  ASSERT_EQ((*data)["notes"].size(), 1u);
  EXPECT_NE((*data)["notes"][0].get<std::string>().find("2 of 12 lines of records.jsonl could not be read (the first is line 11)"),
            std::string::npos)
      << (*data)["notes"][0];
  Result<std::vector<fs::path>> pages = RenderResultsFolder(dir_);
  ASSERT_TRUE(pages.ok()) << pages.error().message;
  EXPECT_TRUE(fs::exists(dir_ / "report.html"));
}

TEST_F(RunDataTest, AFolderThatIsNoResultGetsOneLine) {
  Result<std::vector<fs::path>> pages = RenderResultsFolder(dir_);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(pages.error().message.find("not a bakeoff results folder"), std::string::npos) << pages.error().message;
  EXPECT_EQ(pages.error().message.find('\n'), std::string::npos);
  EXPECT_FALSE(RenderResultsFolder(dir_ / "absent").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ / "summary.json", "{\"steps\": 3}").ok());
  Result<json> data = ReadRunData(dir_);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.error().message.find("not a bakeoff bench or simulate summary"), std::string::npos);
}

TEST_F(RunDataTest, FieldsOfAnUnexpectedTypeAreOneLineNotACrash) {
  WriteSummary(1);
  Result<std::string> text = ReadFile(dir_ / "summary.json");
  ASSERT_TRUE(text.ok());
  const json good = json::parse(*text);
  for (const auto& edit : std::vector<std::function<void(json&)>>{
           [](json& s) { s["steps"] = {1}; }, [](json& s) { s["steps"][0]["label"] = nullptr; },
           [](json& s) { s["target"] = nullptr; }, [](json& s) { s["records_kept"] = nullptr; },
           [](json& s) { s["steps"][0]["requests"]["planned"] = nullptr; },
           [](json& s) { s["steps"][0]["latency"]["ttft_ms"]["p99"] = nullptr; }}) {
    json s = good;
    edit(s);
    ASSERT_TRUE(WriteFileAtomically(dir_ / "summary.json", s.dump()).ok());
    Result<json> data = ReadRunData(dir_);
    if (!data.ok()) {
      EXPECT_EQ(data.error().message.find('\n'), std::string::npos) << data.error().message;
    }
  }
  // An instant past any real run, and a metrics line of the wrong type, cost nothing.
  ASSERT_TRUE(WriteFileAtomically(dir_ / "summary.json", good.dump()).ok());
  std::ofstream records(dir_ / "records.jsonl");
  records << Record(0, 0, 0, 5, 2) << "\n";
  json bogus = json::parse(Record(1, 0, 0, 5, 2));
  bogus["intended_send_ns"] = std::int64_t{9'000'000'000'000'000'000};
  bogus["finished_ns"] = std::int64_t{-5};
  records << bogus.dump() << "\n";
  records.close();
  Result<json> data = ReadRunData(dir_);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_LE((*data)["arrivals"]["t_s"].size(), RunDataOptions{}.max_series_points);
}

TEST_F(RunDataTest, ASampledRunStillGetsAFullTimeline) {
  WriteSummary(1);
  Result<std::string> text = ReadFile(dir_ / "summary.json");
  ASSERT_TRUE(text.ok());
  json s = json::parse(*text);
  s["records_kept"] = {{"mode", "sample"}, {"steps", {{{"step", 0}, {"every", 10}, {"records", 100}}}}};
  ASSERT_TRUE(WriteFileAtomically(dir_ / "summary.json", s.dump()).ok());
  std::ofstream records(dir_ / "records.jsonl");
  for (int i = 0; i < 1000; i += 10) records << Record(i, 0, i, 5, 2) << "\n";  // planned 1000, every 10th kept
  records.close();
  Result<json> data = ReadRunData(dir_);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_GE((*data)["timeline"]["requests"].size(), 50u);
  double arrivals = 0;
  for (const json& v : (*data)["arrivals"]["values"]) arrivals += v.get<double>() * (*data)["arrivals"]["bin_s"].get<double>();
  EXPECT_NEAR(arrivals, 1000, 1e-6) << "each kept record stands for 10 arrivals";
}

TEST_F(RunDataTest, AnotherSchemaIsRefusedNamingBoth) {
  WriteSummary(1, /*schema=*/2);
  Result<json> data = ReadRunData(dir_);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.error().message.find("schema_version 2 is not one this bakeoff reads (1)"), std::string::npos)
      << data.error().message;
}

TEST_F(RunDataTest, PageDataStaysTheSameSizeHoweverManyRequestsRan) {
  WriteSummary(1);
  const auto size_with = [&](int requests) {
    std::ofstream records(dir_ / "records.jsonl", std::ios::trunc);
    for (int i = 0; i < requests; ++i) records << Record(i, 0, 0.5 * i, 5 + i % 50, 4) << "\n";
    records.close();
    Result<json> data = ReadRunData(dir_);
    EXPECT_TRUE(data.ok());
    EXPECT_LE((*data)["arrivals"]["t_s"].size(), RunDataOptions{}.max_series_points);
    EXPECT_LE((*data)["timeline"]["requests"].size(), RunDataOptions{}.timeline_requests);
    return data.ok() ? data->dump().size() : 0;
  };
  const std::size_t small = size_with(2'000);
  const std::size_t large = size_with(40'000);  // 20 s of arrivals, 20x the requests
  EXPECT_LT(large, 2 * small) << "the page embeds downsampled series, not records";
}

TEST(HtmlPageTest, TheDataCannotEndItsScriptAndNothingIsFetched) {
  const std::string page = HtmlPage("a <title>", {{"kind", "run"}, {"note", "</script><script>alert(1)</script>"}});
  EXPECT_EQ(page.find("</script><script>alert"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script>"), std::string::npos);
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(page.find("<title>a &lt;title&gt;</title>"), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::report
