// `bakeoff merge` on real shards: three `bakeoff bench --shard I/3` processes run one schedule
// together against the emulated engine on 127.0.0.1 from one --start-at instant; merged, they are
// the one-process run of that schedule (the same requests at the same intended instants, every
// percentile from the union of their records), and a set that is not every shard of one load is
// refused by name. The latency agreement, being wall-clock, is a *TimingTest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/file.h"
#include "emulate/server.h"
#include "stats/quantile.h"
#include "support/bakeoff_process.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Finished;
using testing::RunBakeoff;

json Summary(const fs::path& dir) { return json::parse(ReadFile(dir / "summary.json").value()); }

// id -> the record, for every line of a records.jsonl.
std::map<std::uint64_t, json> RecordsById(const fs::path& dir) {
  std::map<std::uint64_t, json> records;
  std::ifstream in(dir / "records.jsonl");
  for (std::string line; std::getline(in, line);) {
    json r = json::parse(line);
    const auto id = r["id"].get<std::uint64_t>();
    records[id] = std::move(r);
  }
  return records;
}

// An instant `ahead` from now as RFC 3339 UTC with milliseconds, for --start-at.
std::string InstantIn(std::chrono::milliseconds ahead) {
  const auto at = std::chrono::system_clock::now() + ahead;
  const std::time_t seconds = std::chrono::system_clock::to_time_t(at);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return std::string(text) + "." + std::to_string(1000 + millis).substr(1) + "Z";
}

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emulate::EmulatorConfig emulator;
    emulator.port = 0;
    auto started = emulate::EmulatorServer::Start(emulator);
    ASSERT_TRUE(started.ok()) << started.error().message;
    server_ = std::move(started.value());
    root_ = bakeoff::testing::ScratchRoot() / ("bakeoff_merge_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<std::string> Load(const fs::path& out, int requests = 90, int warmup = 6) const {
    return {"bench", "--url", "http://127.0.0.1:" + std::to_string(server_->port()), "--rate", "150", "--arrival",
            "poisson", "--requests", std::to_string(requests), "--warmup-requests", std::to_string(warmup),
            "--prompt-tokens", "32", "--output-tokens", "8", "--seed", "5", "--metrics-interval", "0",
            "--out", out.string()};
  }

  // Three shards of Load() at once, from one instant; their folders.
  std::vector<fs::path> RunShards() const {
    const std::string start = InstantIn(std::chrono::milliseconds(4000));
    std::vector<fs::path> dirs;
    std::vector<Finished> finished(3);
    std::vector<std::thread> shards;
    for (int i = 0; i < 3; ++i) {
      dirs.push_back(root_ / ("shard-" + std::to_string(i)));
      std::vector<std::string> args = Load(dirs.back());
      args.insert(args.end(), {"--shard", std::to_string(i) + "/3", "--start-at", start});
      shards.emplace_back([args, &finished, i] { finished[i] = RunBakeoff(args); });
    }
    for (std::thread& t : shards) t.join();
    for (const Finished& f : finished) EXPECT_EQ(f.exit_code, 0) << f.output;
    return dirs;
  }

  Finished Merge(const std::vector<fs::path>& dirs, const fs::path& out) const {
    std::vector<std::string> args = {"merge"};
    for (const fs::path& dir : dirs) args.push_back(dir.string());
    args.insert(args.end(), {"--out", out.string()});
    return RunBakeoff(args);
  }

  std::unique_ptr<emulate::EmulatorServer> server_;
  fs::path root_;
};

// The nearest-rank q-quantile of TTFT (ms) over the measured ok records.
double TtftQuantile(const std::map<std::uint64_t, json>& records, double q) {
  std::vector<double> ttft;
  for (const auto& [id, r] : records) {
    if (r["phase"] != "measure" || r["outcome"] != "ok") continue;
    ttft.push_back(static_cast<double>(r["first_token_ns"].get<std::int64_t>() - r["send_start_ns"].get<std::int64_t>()) /
                   1e6);
  }
  std::sort(ttft.begin(), ttft.end());
  return stats::NearestRank(ttft, q);
}

TEST_F(MergeTest, ShardsMergeIntoTheOneProcessRunOfTheirSchedule) {
  const std::vector<fs::path> shards = RunShards();
  const Finished whole = RunBakeoff(Load(root_ / "one"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const Finished merged = Merge({shards[2], shards[0], shards[1]}, root_ / "merged");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_NE(merged.output.find("EMULATED"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("clock: the target's clock is"), std::string::npos) << merged.output;

  const json one = Summary(root_ / "one")["steps"][0];
  const json summary = Summary(root_ / "merged");
  const json step = summary["steps"][0];
  EXPECT_EQ(step["requests"]["planned"], one["requests"]["planned"]);
  EXPECT_EQ(step["requests"]["measured"], 90);
  EXPECT_EQ(step["requests"]["warmup"], 6);
  EXPECT_EQ(summary["schedule"]["sha256"], Summary(root_ / "one")["schedule"]["sha256"]);
  EXPECT_TRUE(summary["target"]["emulated"].get<bool>());
  ASSERT_EQ(summary["merged"]["shards"].size(), 3u);
  ASSERT_EQ(summary["clock"]["shards"].size(), 3u);
  EXPECT_TRUE(summary["clock"]["spread_ms"].is_number()) << summary["clock"].dump();
  EXPECT_TRUE(fs::exists(root_ / "merged" / "report.html"));

  // The same requests at the same intended instants as one process sending the whole schedule.
  const std::map<std::uint64_t, json> records = RecordsById(root_ / "merged");
  const std::map<std::uint64_t, json> alone = RecordsById(root_ / "one");
  ASSERT_EQ(records.size(), alone.size());
  for (const auto& [id, r] : alone) {
    ASSERT_TRUE(records.count(id)) << "request " << id << " is missing from the merged records";
    EXPECT_EQ(records.at(id)["intended_send_ns"], r["intended_send_ns"]) << "request " << id;
    EXPECT_EQ(records.at(id)["phase"], r["phase"]) << "request " << id;
  }
  // Percentiles of the union, not of any shard: p50 and p99 are the union's nearest ranks.
  for (const auto& [q, key] : {std::pair{0.5, "p50"}, std::pair{0.99, "p99"}}) {
    EXPECT_DOUBLE_EQ(step["latency"]["ttft_ms"][key]["value"].get<double>(), TtftQuantile(records, q)) << key;
  }

  // Not the whole load, or not one load: refused, naming what is wrong.
  const auto refused = [&](const std::vector<fs::path>& dirs, const std::string& expected) {
    const Finished f = Merge(dirs, root_ / "refused");
    EXPECT_EQ(f.exit_code, 2) << f.output;
    EXPECT_NE(f.output.find(expected), std::string::npos) << f.output;
  };
  refused({shards[0], shards[2]}, "shard 1 of 3 is missing (given: 0, 2)");
  refused({shards[0], shards[1], shards[1], shards[2]}, "shard 1 of 3 is given twice");
  refused({shards[0], root_ / "one", shards[2]}, "is shard 0 of 1");
  refused({shards[0], shards[1], root_ / "merged"}, "is a merged run");
  const Finished into_shard = Merge(shards, shards[0]);
  EXPECT_EQ(into_shard.exit_code, 2) << into_shard.output;
  EXPECT_NE(into_shard.output.find("is one of the shards"), std::string::npos) << into_shard.output;
  // A shard of another schedule (its seed edited, and so its schedule's digest).
  const auto copy_of = [&](const fs::path& shard, const std::string& name) {
    fs::copy(shard, root_ / name, fs::copy_options::recursive);
    return root_ / name;
  };
  const fs::path foreign = copy_of(shards[1], "foreign");
  json edited = Summary(foreign);
  edited["config"]["seed"] = 6;
  edited["schedule"]["sha256"] = "another";
  ASSERT_TRUE(WriteFileAtomically(foreign / "summary.json", edited.dump()).ok());
  refused({shards[0], foreign, shards[2]}, "its schedule differs (config.seed 5 against 6)");

  // A record cut by a killed shard is its last line: left out, and said.
  const fs::path cut = copy_of(shards[2], "cut");
  std::string text = ReadFile(cut / "records.jsonl").value();
  ASSERT_TRUE(WriteFileAtomically(cut / "records.jsonl", text.substr(0, text.size() - 12)).ok());
  const Finished with_cut = Merge({shards[0], shards[1], cut}, root_ / "with-cut");
  EXPECT_EQ(with_cut.exit_code, 0) << with_cut.output;
  EXPECT_NE(with_cut.output.find("records.jsonl:" + std::to_string(std::count(text.begin(), text.end(), '\n')) +
                                 ": the last line was cut"),
            std::string::npos)
      << with_cut.output;
  const json cut_step = Summary(root_ / "with-cut")["steps"][0]["requests"];
  EXPECT_EQ(cut_step["measured"].get<int>() + cut_step["warmup"].get<int>(), 95);
  // Anywhere else an unreadable line is damage: refused at its line.
  const fs::path damaged = copy_of(shards[2], "damaged");
  ASSERT_TRUE(WriteFileAtomically(damaged / "records.jsonl", text.substr(0, text.find('\n') + 1) + "{\"id\":\n" +
                                                                  text.substr(text.find('\n') + 1))
                  .ok());
  refused({shards[0], shards[1], damaged}, "records.jsonl:2: not a JSON object");
}

TEST_F(MergeTest, TheOnlyShardOfAOneShardLoadMergesToItself) {
  const fs::path alone = root_ / "alone";
  ASSERT_EQ(RunBakeoff(Load(alone, 20, 0)).exit_code, 0);
  const Finished merged = Merge({alone}, root_ / "merged");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(merged.output.find("clock:"), std::string::npos) << merged.output;  // one shard: no skew to report
  EXPECT_EQ(Summary(root_ / "merged")["steps"][0]["latency"]["ttft_ms"], Summary(alone)["steps"][0]["latency"]["ttft_ms"]);
}

// Wall-clock: the merged shards' latencies are the one process's, within the noise of two runs.
class MergeTimingTest : public MergeTest {};

TEST_F(MergeTimingTest, MergedLatencyPercentilesAgreeWithOneProcess) {
  const std::vector<fs::path> shards = RunShards();
  ASSERT_EQ(RunBakeoff(Load(root_ / "one")).exit_code, 0);
  ASSERT_EQ(Merge(shards, root_ / "merged").exit_code, 0);
  const json one = Summary(root_ / "one")["steps"][0]["latency"];
  const json merged = Summary(root_ / "merged")["steps"][0]["latency"];
  for (const char* metric : {"ttft_ms", "tpot_ms", "e2e_ms"}) {
    const double a = one[metric]["p50"]["value"].get<double>(), b = merged[metric]["p50"]["value"].get<double>();
    EXPECT_NEAR(b, a, 0.25 * a + 2) << metric << " p50: one process " << a << " ms, merged shards " << b << " ms";
  }
}

}  // namespace
}  // namespace bakeoff
