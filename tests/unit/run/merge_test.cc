// run::MergeShards on shard folders written here (summary.json and records.jsonl as bench writes
// them): the union's percentiles, not an average of the shards'; summaries of the wrong shape are
// refused or ignored field by field, never a crash; and run::ScheduleIdentity tells loads apart by
// what they send, not by how each process took part.
#include "run/merge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "measure/record.h"
#include "support/scratch.h"

namespace bakeoff::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;

class MergeShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = bakeoff::testing::ScratchRoot() / ("bakeoff_merge_unit_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static json Config(const std::string& shard) {
    return {{"shard", shard}, {"start_at", "2026-12-01T22:00:00Z"}, {"seed", 7}, {"rates", {10.0}}, {"slo", ""},
            {"url", "http://127.0.0.1:1"}, {"workers", 1}};
  }

  // A shard folder whose `requests` ok requests each took `ttft_ms` to their first token.
  fs::path WriteShard(std::uint32_t index, std::uint32_t count, int requests, int ttft_ms,
                      const std::function<void(json&)>& edit = nullptr) {
    const fs::path dir = root_ / ("shard-" + std::to_string(index));
    fs::create_directories(dir);
    json config = Config(fmt::format("{}/{}", index, count));
    json summary = {{"config", config},
                    {"seed", 7},
                    {"schedule", ScheduleIdentity(config, nullptr, std::nullopt)},
                    {"target", {{"url", "http://127.0.0.1:1"}, {"model", "m"}, {"emulated", true}}},
                    {"steps", json::array({{{"label", "rate=10/s"},
                                            {"requests", {{"planned", requests}, {"warmup", 0}, {"measured", requests}}},
                                            {"generator_limited", {{"limited", false}, {"busiest_worker_cpu", 0.1}}}}})}};
    if (edit) edit(summary);
    EXPECT_TRUE(WriteFileAtomically(dir / "summary.json", summary.dump()).ok());
    std::string lines;
    const MonoTime t0{};
    for (int i = 0; i < requests; ++i) {
      measure::RequestRecord r;
      r.id = static_cast<std::uint64_t>(i) * count + index;
      r.intended_send = t0 + milliseconds(100 * i);
      r.send_start = r.intended_send;
      r.first_token = r.first_chunk = r.first_answer_token = *r.send_start + milliseconds(ttft_ms);
      r.last_token = r.finished = *r.first_token + milliseconds(10);
      r.token_events = {{*r.first_token, 1, false, true}, {*r.last_token, 1, false, true}};
      r.counted_tokens = 2;
      r.outcome = measure::Outcome::kOk;
      r.http_status = 200;
      lines += measure::RecordToJsonLine(r, t0) + "\n";
    }
    EXPECT_TRUE(WriteFileAtomically(dir / "records.jsonl", lines).ok());
    return dir;
  }

  Result<BenchOutcome> Merge(const std::vector<fs::path>& dirs) {
    return MergeShards({dirs, root_ / "merged"}, [](const std::string&) {});
  }

  fs::path root_;
};

TEST_F(MergeShardsTest, PercentilesAreTheUnionsNotTheShardsAverage) {
  const fs::path fast = WriteShard(0, 2, 60, 10), slow = WriteShard(1, 2, 40, 100);
  Result<BenchOutcome> merged = Merge({slow, fast});
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  ASSERT_EQ(merged->steps.size(), 1u);
  const analyze::StepAnalysis& step = merged->steps[0];
  EXPECT_EQ(step.measured_requests, 100u);
  EXPECT_EQ(step.planned, 100u);
  // 60 requests at 10 ms and 40 at 100 ms: the 50th of 100 is 10 ms, the 90th 100 ms (the shards'
  // p50s average to 55 ms).
  EXPECT_DOUBLE_EQ(step.ttft_ms.p50.value, 10.0);
  EXPECT_DOUBLE_EQ(step.ttft_ms.p90.value, 100.0);
  EXPECT_TRUE(merged->emulated);
  const json summary = json::parse(ReadFile(root_ / "merged" / "summary.json").value());
  EXPECT_EQ(summary["merged"]["shards"].size(), 2u);
  EXPECT_EQ(summary["merged"]["shards"][1]["records"], 40);
  EXPECT_EQ(summary["config"]["shard"], "all 2");
}

TEST_F(MergeShardsTest, AShardThatWasGeneratorLimitedMakesTheLoadGeneratorLimited) {
  const fs::path a = WriteShard(0, 2, 10, 10), b = WriteShard(1, 2, 10, 10, [](json& s) {
    s["steps"][0]["generator_limited"] = {{"limited", true}, {"reasons", {"send lag p99 9 ms > 5 ms"}}};
  });
  Result<BenchOutcome> merged = Merge({a, b});
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  EXPECT_TRUE(merged->steps[0].generator_limited);
  ASSERT_EQ(merged->steps[0].generator_limited_reasons.size(), 1u);
  EXPECT_EQ(merged->steps[0].generator_limited_reasons[0], "shard 1: send lag p99 9 ms > 5 ms");
}

// Each edit of shard 1's summary, and what the refusal says (empty: it merges, the field ignored).
TEST_F(MergeShardsTest, SummariesOfTheWrongShapeAreRefusedOrIgnoredNeverACrash) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& s) { s["config"] = "x"; }, "not a bench run's folder"},
      {[](json& s) { s["config"]["shard"] = "1/-1"; }, "is not I/N"},
      {[](json& s) { s["config"]["shard"] = "1/4294967295"; }, "is not I/N"},
      {[](json& s) { s["config"]["shard"] = "1/3"; }, "is shard 1 of 3"},
      {[](json& s) { s["config"]["shard"] = "1/9999"; }, "is shard 1 of 9999"},
      {[](json& s) { s["steps"] = json::array({5}); }, "a shard holds one step"},
      {[](json& s) { s["steps"] = "x"; }, "a shard holds one step"},
      {[](json& s) { s["schedule"] = 3; }, "holds no schedule sha256"},
      {[](json& s) { s["schedule"]["sha256"] = "other"; }, "its schedule differs (the structured output spec"},
      {[](json& s) { s["target"]["model"] = "other"; }, "loaded the model 'other'"},
      {[](json& s) { s["config"]["start_at"] = "2026-12-01T22:00:01Z"; }, "shards of one load share --start-at"},
      {[](json& s) { s["config"]["start_at"] = "1796162400"; }, ""},  // the same instant in Unix seconds
      {[](json& s) { s["target"] = "x"; }, "loaded the model ''"},
      {[](json& s) { s["steps"][0]["server"] = "x"; }, ""},
      {[](json& s) { s["steps"][0]["requests"] = {{"planned", -5}, {"measured", "many"}}; }, ""},
      {[](json& s) { s["steps"][0]["connection_backoff"] = {{"waits", 1e300}, {"total_s", -1e300}}; }, ""},
      {[](json& s) { s["steps"][0]["generator_limited"] = {{"limited", true}, {"reasons", 7}}; }, ""},
      {[](json& s) { s["clock"] = {{"offset_ms", "soon"}}; }, ""},
      {[](json& s) { s["fairness"] = {{"ok_answers", "x"}, {"unequal_work", {1, "shard work"}}}; }, ""},
      {[](json& s) { s["pooling"] = {{"steps", 4}}; }, ""},
  };
  for (const auto& [edit, expected] : cases) {
    fs::remove_all(root_);
    fs::create_directories(root_);
    const fs::path a = WriteShard(0, 2, 5, 10), b = WriteShard(1, 2, 5, 10, edit);
    Result<BenchOutcome> merged = Merge({a, b});
    if (expected.empty()) {
      EXPECT_TRUE(merged.ok()) << merged.error().message;
    } else {
      ASSERT_FALSE(merged.ok()) << "expected: " << expected;
      EXPECT_NE(merged.error().message.find(expected), std::string::npos) << merged.error().message;
    }
  }
}

TEST_F(MergeShardsTest, AnOkRecordWithoutASendIsRefusedAtItsLine) {
  const fs::path a = WriteShard(0, 2, 5, 10), b = WriteShard(1, 2, 5, 10);
  std::string text = ReadFile(b / "records.jsonl").value();
  text.insert(0, R"({"id":99,"phase":"measure","outcome":"ok","intended_send_ns":0})" "\n");
  ASSERT_TRUE(WriteFileAtomically(b / "records.jsonl", text).ok());
  Result<BenchOutcome> merged = Merge({a, b});
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.error().message.find("records.jsonl:1: \"send_start_ns\" is missing"), std::string::npos)
      << merged.error().message;
}

TEST(ScheduleIdentityTest, ChangesWithWhatIsSentNotWithHowEachProcessTookPart) {
  const json base = {{"seed", 7},    {"rates", {10.0}},     {"url", "http://a:1"}, {"workers", 2},
                     {"shard", "0/4"}, {"start_at", "1796162400"}, {"trace", "/data/a.jsonl"},
                     {"trace_import", {{"file", "/data/a.jsonl"}, {"rows", 3}}}, {"structured_spec", "/a.json"}};
  workload::Trace trace;
  trace.requests.resize(2);
  trace.requests[0].input_tokens = 10;
  trace.requests[1].arrival_s = 1.5;
  trace.requests[1].input_tokens = 20;
  const auto digest = [&](const json& flags, const workload::Trace* t = nullptr,
                          const std::optional<dialect::OutputConstraint>& c = std::nullopt) {
    return ScheduleIdentity(flags, t, c)["sha256"].get<std::string>();
  };
  const std::string reference = digest(base, &trace);
  EXPECT_EQ(reference.size(), 64u);
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"url", "http://b:2"}, {"workers", 8}, {"shard", "3/4"}, {"start_at", "2026-12-01T22:00:00Z"},
           {"trace", "/mnt/copy.jsonl"}, {"structured_spec", "/b.json"}}) {
    json flags = base;
    flags[key] = value;
    EXPECT_EQ(digest(flags, &trace), reference) << key;
  }
  json moved = base;
  moved["trace_import"]["file"] = "/elsewhere.jsonl";
  EXPECT_EQ(digest(moved, &trace), reference);
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{{"seed", 8}, {"rates", {20.0}}}) {
    json flags = base;
    flags[key] = value;
    EXPECT_NE(digest(flags, &trace), reference) << key;
  }
  workload::Trace other = trace;
  other.requests[1].arrival_s = 1.25;
  EXPECT_NE(digest(base, &other), reference);
  other = trace;
  other.requests[0].prompt = "hello";
  EXPECT_NE(digest(base, &other), reference);
  EXPECT_NE(digest(base), reference);
  dialect::OutputConstraint schema;
  schema.spec = R"({"type":"object"})";
  const std::string with_schema = digest(base, &trace, schema);
  EXPECT_NE(with_schema, reference);
  schema.spec = R"({"type":"array"})";
  EXPECT_NE(digest(base, &trace, schema), with_schema);
}

}  // namespace
}  // namespace bakeoff::run
