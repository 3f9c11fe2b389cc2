// `bakeoff run` as a user runs it, on loopback only: the demo study end to end (emulated first,
// a choice and a rollback, one candidate eliminated at the gate and one disqualified by a probe);
// resume after a SIGKILL at each phase, with the same decision as an uninterrupted run; a
// candidate that dies mid-study recorded as failed while the others go on; a spent budget named;
// candidates serving another model refused before any load; a wrong study refused with every
// mistake at once.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "core/json_text.h"
#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/timing.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Finished;
using testing::ProcessOptions;
using testing::RunBakeoff;

ProcessOptions KillAfter(std::chrono::nanoseconds limit) {
  ProcessOptions o;
  o.kill_after = limit;
  return o;
}

std::string Source(const std::string& relative) { return (fs::path(BAKEOFF_SOURCE_DIR) / relative).string(); }

json ReadJson(const fs::path& path) {
  Result<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << path;
  return text.ok() ? json::parse(text.value(), nullptr, false) : json();
}

class StudyRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = bakeoff::testing::ScratchRoot() / ("bakeoff_study_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A study in the test's folder, next to a copy of the demo's workload and catalog.
  std::string WriteStudy(const std::string& body) {
    fs::copy_file(Source("examples/demo/workload.yaml"), dir_ / "workload.yaml", fs::copy_options::overwrite_existing);
    fs::copy_file(Source("examples/demo/catalog.yaml"), dir_ / "catalog.yaml", fs::copy_options::overwrite_existing);
    const fs::path path = dir_ / "study.yaml";
    std::ofstream(path) << body;
    return path.string();
  }

  fs::path dir_;
};

// Two emulated candidates, every phase, small sizes: about 10 s.
const std::string kTwoCandidates = R"(name: two emulated candidates
model: {name: m, architecture: LlamaForCausalLM, quantization: bf16, max_context: 8192}
hardware: {accelerator: nvidia, gpu: H100, gpus: 1, price_per_hour: 4}
traffic: {shape: workload.yaml, seed: 3, requests: 600}
slo:
  latency: {ttft_p99: 1s, tpot_p99: 60ms}
  attainment: 0.95
catalog: catalog.yaml
candidates:
  - {name: a, catalog: emulated-radix, emulated: {preset: radix-lpm}}
  - {name: b, catalog: emulated-paged, emulated: {preset: continuous-paged}}
plan:
  probes: [readiness]
  single_requests: 5
  concurrency: [1, 8]
  step_requests: 120
  repeats: 2
  replay: {requests: 150}
  capacity: {min_per_s: 1, max_per_s: 200, precision: 0.15}
budget: 5min
)";

// The two longest study runs (about 30 s each in release, 70 s under ASan) run in release only:
// the runner's code runs under the sanitizers in the golden test (tests/unit/report) and the
// shorter studies below.
TEST_F(StudyRunTest, TheDemoStudyChoosesKeepsARollbackAndSaysEmulatedFirst) {
  if (testing::kSanitizedBuild) GTEST_SKIP() << "release only: see above";
  const fs::path out = dir_ / "bundle";
  const Finished run = RunBakeoff({"run", Source("examples/demo/study.yaml"), "--out", out.string()},
                                  KillAfter(std::chrono::minutes(4)));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.rfind("EMULATED", 0), 0u) << "the first line says emulated:\n" << run.output.substr(0, 300);
  const json verdict = ReadJson(out / "verdict.json");
  EXPECT_TRUE(verdict["emulated"].get<bool>());
  ASSERT_TRUE(verdict["choice"].is_string()) << verdict.dump(2);
  ASSERT_TRUE(verdict["rollback"].is_string()) << verdict.dump(2);
  std::map<std::string, std::string> status;
  for (const json& c : verdict["candidates"]) status[c["name"]] = c["status"];
  EXPECT_EQ(status["static"], "eliminated");
  EXPECT_EQ(status["paged-lying"], "disqualified");
  EXPECT_EQ(status[verdict["choice"]], "meets_slo");
  for (const json& s : verdict["rationale"]) EXPECT_FALSE(s["pointers"].empty()) << s.dump();
  const json gate = ReadJson(out / "gate.json");
  for (const json& row : gate["candidates"]) {
    if (row["candidate"] == "static") {
      EXPECT_TRUE(row["eliminated"].get<bool>());
    }
  }
  // The eliminated candidate was never started: no folder of its own.
  EXPECT_FALSE(fs::exists(out / "candidates" / "static"));
  const json manifest = ReadJson(out / "manifest.json");
  EXPECT_EQ(manifest["schema_version"], 1);
  EXPECT_EQ(manifest["study_sha256"].get<std::string>().size(), 64u);
  EXPECT_TRUE(manifest["emulated"].get<bool>());
  for (const char* file : {"study.yaml", "catalog.yaml", "fingerprint.json", "workload/trace.jsonl", "report.md",
                           "candidates/paged-lying/probes/probes.json"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  Result<std::string> report = ReadFile(out / "report.md");
  ASSERT_TRUE(report.ok());
  EXPECT_NE(report->find("EMULATED"), std::string::npos);
  EXPECT_NE(report->find("## Hard-constraint gate"), std::string::npos);
}

// Runs bakeoff with `args`, SIGKILLs it the moment its output shows `when`, and says whether that
// happened (false: it finished first); `seen` gets what it printed until then.
bool RunAndKillAt(const std::vector<std::string>& args, const std::string& when, std::string& seen) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    std::vector<char*> argv = {const_cast<char*>(BAKEOFF_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(BAKEOFF_BINARY, argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  seen.clear();
  bool killed = false;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) {
    seen.append(buffer, static_cast<std::size_t>(n));
    if (seen.find(when) != std::string::npos) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return killed;
}

std::map<std::string, double> Capacities(const json& verdict) {
  std::map<std::string, double> out;
  for (const json& c : verdict["candidates"]) out[c["name"]] = c["capacity_per_s"].is_number() ? c["capacity_per_s"].get<double>() : -1;
  return out;
}

// A pooling study of two emulated candidates and one that does not serve the route; small sizes.
std::string PoolingStudy(const std::string& task) {
  return "name: pooling\ntask: " + task + R"(
model: {name: m, architecture: BertModel, quantization: fp16, max_context: 512}
hardware: {accelerator: cpu, price_per_hour: 1}
traffic: {shape: workload.yaml, inputs_per_request: 4, seed: 3, requests: 300}
slo:
  latency: {e2e_p99: 300ms}
  attainment: 0.95
  cold_start_max: 30s
catalog: catalog.yaml
candidates:
  - {name: a, catalog: emulated-radix, emulated: {preset: radix-lpm}}
  - {name: b, catalog: emulated-paged, emulated: {preset: continuous-paged}}
  - {name: nopool, catalog: emulated-paged, emulated: {preset: continuous-paged, flags: [--no-pooling]}}
plan:
  probes: [readiness, compatibility]
  single_requests: 5
  concurrency: [1, 8]
  step_requests: 100
  repeats: 1
  replay: {requests: 100}
  capacity: {min_per_s: 1, max_per_s: 200, precision: 0.2}
budget: 5min
)";
}

TEST_F(StudyRunTest,
       EmbeddingAndRerankStudiesEndInAVerdictAndEliminateTheCandidateWithoutTheRoute) {
  for (const std::string task : {"embedding", "rerank"}) {
    SCOPED_TRACE(task);
    fs::copy_file(Source("examples/pooling/workload.yaml"), dir_ / "workload.yaml",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(Source("examples/pooling/catalog.yaml"), dir_ / "catalog.yaml",
                  fs::copy_options::overwrite_existing);
    std::ofstream(dir_ / "study.yaml") << PoolingStudy(task);
    const fs::path out = dir_ / ("bundle_" + task);
    const Finished run = RunBakeoff({"run", (dir_ / "study.yaml").string(), "--out", out.string()},
                                    KillAfter(std::chrono::minutes(3)));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const json verdict = ReadJson(out / "verdict.json");
    ASSERT_TRUE(verdict["choice"].is_string()) << verdict.dump(2);
    ASSERT_TRUE(verdict["rollback"].is_string()) << verdict.dump(2);
    const std::string route = task == "embedding" ? "POST /v1/embeddings" : "POST /v1/rerank";
    for (const json& c : verdict["candidates"]) {
      if (c["name"] == "nopool") {
        // At the gate, by the route check: eliminated, not disqualified by a probe.
        EXPECT_EQ(c["status"], "eliminated") << c.dump(2);
        EXPECT_NE(c["reasons"][0].get<std::string>().find(route + " answered HTTP 404"),
                  std::string::npos)
            << c.dump(2);
        EXPECT_NE(
            c["reasons"][0].get<std::string>().find("route check: candidates/nopool/route.json"),
            std::string::npos);
        continue;
      }
      EXPECT_EQ(c["status"], "meets_slo") << c.dump(2);
      // Its own figures: E2E and inputs per second (4 per request), no TTFT.
      EXPECT_TRUE(c["ttft_p99_ms"].is_null()) << c.dump(2);
      EXPECT_GT(c["e2e_p99_ms"].get<double>(), 0);
      EXPECT_NEAR(c["inputs_per_s"].get<double>(), 4 * c["capacity_per_s"].get<double>(),
                  0.05 * 4 * c["capacity_per_s"].get<double>());
      for (const char* phase : {"single-r0", "sweep-r0", "replay-r0", "capacity"}) {
        EXPECT_TRUE(
            fs::exists(out / "candidates" / c["name"].get<std::string>() / phase / "result.json"))
            << phase;
      }
    }
    const json route_check = ReadJson(out / "candidates" / "nopool" / "route.json");
    EXPECT_EQ(route_check["status"], 404);
    EXPECT_TRUE(route_check["route_missing"].get<bool>());
    // The eliminated candidate was never probed or loaded.
    EXPECT_FALSE(fs::exists(out / "candidates" / "nopool" / "probes"));
    const json probes = ReadJson(out / "candidates" / "a" / "probes" / "probes.json");
    for (const json& p : probes["probes"]) EXPECT_NE(p["verdict"], "fail") << p.dump(2);
    Result<std::string> report = ReadFile(out / "report.md");
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->find("TTFT"), std::string::npos);
    EXPECT_EQ(report->find("TPOT"), std::string::npos);
    EXPECT_NE(report->find("E2E p99 at capacity"), std::string::npos);
    EXPECT_NE(report->find("inputs/s"), std::string::npos);
    EXPECT_NE(run.output.find("E2E p99"), std::string::npos) << run.output;
  }
}

TEST_F(StudyRunTest, ResumesAfterAKillAtEachPhaseWithTheSameDecision) {
  if (testing::kSanitizedBuild) GTEST_SKIP() << "release only: see the demo test";
  // Six runs must reach the same decision, so the probe is one without a wall-clock threshold:
  // on a loaded machine the readiness probe's health-under-load limit (1 s) can fail one run's
  // candidate and not another's.
  std::string body = kTwoCandidates;
  const std::string readiness = "probes: [readiness]";
  body.replace(body.find(readiness), readiness.size(), "probes: [compatibility]");
  const std::string study = WriteStudy(body);
  const fs::path reference = dir_ / "reference";
  const Finished straight = RunBakeoff({"run", study, "--out", reference.string()});
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const json expected = ReadJson(reference / "verdict.json");

  for (const std::string when : {"b: probes", "a: sweep (1)", "b: replay (2)", "a: capacity search", "b:   "}) {
    SCOPED_TRACE(when);
    const fs::path out = dir_ / ("killed-" + std::to_string(std::hash<std::string>{}(when)));
    std::string seen;
    ASSERT_TRUE(RunAndKillAt({"run", study, "--out", out.string()}, when, seen))
        << "the run ended before " << when << ":\n"
        << seen;
    const Finished resumed = RunBakeoff({"run", study, "--out", out.string()});
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming the bundle"), std::string::npos);
    const json verdict = ReadJson(out / "verdict.json");
    EXPECT_EQ(verdict["choice"], expected["choice"]);
    EXPECT_EQ(verdict["rollback"], expected["rollback"]);
    EXPECT_EQ(Capacities(verdict), Capacities(expected));
    const json manifest = ReadJson(out / "manifest.json");
    EXPECT_FALSE(manifest["resumed"].empty()) << "something finished before the kill was read back";
  }
}

TEST_F(StudyRunTest, AnotherStudysBundleIsNotOverwritten) {
  const std::string study = WriteStudy(kTwoCandidates);
  const fs::path out = dir_ / "bundle";
  fs::create_directories(out);
  std::ofstream(out / "manifest.json") << R"({"study_sha256": "0000"})";
  const Finished run = RunBakeoff({"run", study, "--out", out.string()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("holds the bundle of another experiment (the study file differs)"), std::string::npos)
      << run.output;
  // --fresh replaces a bundle, but never a folder that holds something else.
  const fs::path other = dir_ / "my-notes";
  fs::create_directories(other);
  std::ofstream(other / "notes.txt") << "precious";
  const Finished fresh = RunBakeoff({"run", study, "--out", other.string(), "--fresh"});
  EXPECT_EQ(fresh.exit_code, 2) << fresh.output;
  EXPECT_NE(fresh.output.find("is not a study bundle"), std::string::npos) << fresh.output;
  EXPECT_TRUE(fs::exists(other / "notes.txt"));
}

TEST_F(StudyRunTest, ACandidateThatDiesMidStudyIsRecordedAndTheOthersGoOn) {
  // The second candidate is a real process on loopback that crashes after 30 requests.
  const std::string study = WriteStudy(std::string(R"(name: one dies
model: {name: m, architecture: LlamaForCausalLM, quantization: bf16, max_context: 8192}
hardware: {accelerator: nvidia, gpu: H100, gpus: 1}
traffic: {shape: workload.yaml, seed: 3, requests: 300}
slo:
  latency: {ttft_p99: 5s}
  attainment: 0.9
candidates:
  - {name: steady, emulated: {preset: continuous-paged}}
  - name: crashes
    launch:
      command: ")") + BAKEOFF_BINARY + R"( emulate --instant --host 127.0.0.1 --port 18471 --model m --fault-crash-after 30"
      port: 18471
plan:
  phases: [single, sweep, replay]
  single_requests: 10
  concurrency: [4]
  step_requests: 100
  repeats: 1
  replay: {requests: 60}
budget: 3min
)");
  const fs::path out = dir_ / "bundle";
  const Finished run = RunBakeoff({"run", study, "--out", out.string()}, KillAfter(std::chrono::minutes(3)));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json verdict = ReadJson(out / "verdict.json");
  EXPECT_EQ(verdict["choice"], "steady") << verdict.dump(2);
  for (const json& c : verdict["candidates"]) {
    if (c["name"] != "crashes") continue;
    EXPECT_EQ(c["status"], "failed");
    ASSERT_FALSE(c["reasons"].empty());
    EXPECT_NE(c["reasons"][0].get<std::string>().find("sweep"), std::string::npos) << c.dump(2);
  }
  EXPECT_TRUE(fs::exists(out / "candidates/crashes/logs"));
}

// Every file the run writes is UTF-8 when a server's text is not: a launched emulator that cuts
// every streamed token, error message and an extra /v1/models id inside multibyte characters.
TEST_F(StudyRunTest, AServerThatCutsCharactersLeavesEveryFileUtf8) {
  const std::string study = WriteStudy(std::string(R"(name: cut characters
model: {name: m, architecture: LlamaForCausalLM, quantization: bf16, max_context: 8192}
hardware: {accelerator: nvidia, gpu: H100, gpus: 1}
traffic: {shape: workload.yaml, seed: 3, requests: 100}
slo:
  latency: {ttft_p99: 5s}
  attainment: 0.9
candidates:
  - name: cuts
    launch:
      command: ")") + BAKEOFF_BINARY + R"( emulate --instant --host 127.0.0.1 --port 18473 --model m --fault-cut-utf8"
      port: 18473
plan:
  phases: [probes, single, sweep]
  probes: [readiness, compatibility, bad_input]
  single_requests: 5
  concurrency: [4]
  step_requests: 40
  repeats: 1
budget: 30min
)");
  const fs::path out = dir_ / "bundle";
  const Finished run = RunBakeoff({"run", study, "--out", out.string()}, KillAfter(std::chrono::minutes(3)));
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 3) << run.output;
  std::size_t checked = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(out)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    Result<std::string> text = ReadFile(entry.path());
    ASSERT_TRUE(text.ok()) << entry.path();
    if (ext == ".json") {
      // nlohmann's parser refuses a string that is not UTF-8.
      EXPECT_FALSE(json::parse(text.value(), nullptr, false).is_discarded()) << entry.path();
      ++checked;
    } else if (ext == ".jsonl") {
      std::size_t from = 0;
      while (from < text->size()) {
        const std::size_t end = std::min(text->find('\n', from), text->size());
        EXPECT_FALSE(json::parse(text->substr(from, end - from), nullptr, false).is_discarded())
            << entry.path() << " at byte " << from;
        from = end + 1;
      }
      ++checked;
    } else if (ext == ".md" || ext == ".html" || ext == ".yaml") {
      std::size_t replaced = 0;
      (void)ValidUtf8(text.value(), &replaced);
      EXPECT_EQ(replaced, 0u) << entry.path();
      ++checked;
    }
  }
  EXPECT_GT(checked, 10u);
  // The answers were kept as evidence, their cut bytes replaced (U+FFFD), not dropped.
  std::size_t with_replacements = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(out / "candidates/cuts/probes/evidence")) {
    Result<std::string> text = ReadFile(entry.path());
    if (text.ok() && text->find("\xEF\xBF\xBD") != std::string::npos) ++with_replacements;
  }
  EXPECT_GT(with_replacements, 0u);
  // The model list was read although one of its ids is cut: no compatibility finding about it.
  EXPECT_EQ(ReadJson(out / "candidates/cuts/probes/probes.json").dump().find("models_failed"), std::string::npos);
}

// A probe whose worst case (readiness: the start-up budget and its waits) does not fit its
// candidate's share of the budget is not started, for either candidate, and the run and the
// decision record say so; the load phases (on the virtual clock) still run.
TEST_F(StudyRunTest, AProbeThatDoesNotFitTheBudgetIsSkippedAndSaidSo) {
  const std::string study = WriteStudy(kTwoCandidates);
  const fs::path out = dir_ / "bundle";
  const Finished run = RunBakeoff({"run", study, "--out", out.string(), "--budget", "1s"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("a/probes: readiness (worst case"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("b/probes: readiness (worst case"), std::string::npos) << run.output;
  Result<std::string> report = ReadFile(out / "report.md");
  ASSERT_TRUE(report.ok());
  EXPECT_NE(report->find("## Budget"), std::string::npos) << *report;
  EXPECT_NE(report->find("readiness (worst case"), std::string::npos) << *report;
  const json probes = ReadJson(out / "candidates/a/probes/probes.json");
  ASSERT_EQ(probes["probes"].size(), 1u) << probes.dump(2);
  EXPECT_EQ(probes["probes"][0]["verdict"], "not_run");
  EXPECT_NE(probes["probes"][0]["not_run_reason"].get<std::string>().find("skipped for the budget"), std::string::npos);
}

TEST_F(StudyRunTest, CandidatesServingAnotherModelAreRefusedBeforeAnyLoad) {
  emulate::EmulatorConfig config;
  config.port = 0;
  config.instant = true;
  config.served_model_name = "some-other-model";
  auto server = emulate::EmulatorServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::string study = WriteStudy(R"(name: mismatch
model: {name: m, architecture: llama, quantization: bf16, max_context: 4096}
hardware: {accelerator: cpu}
traffic: {shape: workload.yaml, requests: 50}
slo: {latency: {ttft_p99: 1s}}
candidates:
  - {name: elsewhere, url: "http://127.0.0.1:)" + std::to_string(server.value()->port()) + R"("}
)");
  const Finished run = RunBakeoff({"run", study, "--out", (dir_ / "bundle").string()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("cannot be compared"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("serves some-other-model, not the study's model m"), std::string::npos) << run.output;
  const emulate::EmulatorStats stats = server.value()->stats();
  EXPECT_EQ(stats.finished + stats.aborted + stats.running + stats.waiting, 0u) << "no generation was sent";
}

TEST_F(StudyRunTest, AWrongStudyNamesEveryMistakeAndCreatesNothing) {
  const std::string study = WriteStudy(R"(name: wrong
model: {name: m, architecture: llama, quantization: bf16}
hardware: {accelerator: cpu}
traffic: {shape: workload.yaml}
slo: {latency: {ttft_p99: soon}}
candidates:
  - {name: a, emulated: {preset: no-such-preset}}
)");
  const fs::path out = dir_ / "bundle";
  const Finished run = RunBakeoff({"run", study, "--out", out.string()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("study.yaml:2: model.max_context: missing"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("study.yaml:5: slo.latency.ttft_p99"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace bakeoff
