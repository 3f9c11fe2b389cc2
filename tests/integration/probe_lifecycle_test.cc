// `bakeoff probe` against `bakeoff emulate`, launched by the probe itself: the lifecycle and load
// probes pass on a well-behaved emulator, and each fault knob flips its probe to the finding it
// should raise. Every test checks that no process is left behind (the port is free again).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/scripted_server.h"
#include "target/launcher.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using namespace std::chrono_literals;
using testing::Finished;
using testing::ProcessOptions;
using testing::RunBakeoff;

std::uint16_t FreePort() { return testing::UnusedLoopbackPort(); }

std::filesystem::path OutDir() {
  const auto dir = bakeoff::testing::ScratchRoot() /
                   ("bakeoff_probe_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  return dir;
}

struct ProbeOutcome {
  Finished process;
  nlohmann::json probes;  // probes.json
  std::uint16_t port = 0;

  const nlohmann::json* Probe(const std::string& name) const {
    for (const auto& p : probes["probes"]) {
      if (p["name"] == name) return &p;
    }
    return nullptr;
  }
  std::string Verdict(const std::string& name) const {
    const nlohmann::json* p = Probe(name);
    return p != nullptr ? p->at("verdict").get<std::string>() : "absent";
  }
  bool HasFinding(const std::string& code, const std::string& severity) const {
    for (const auto& p : probes["probes"]) {
      for (const auto& f : p["findings"]) {
        if (f["code"] == code && f["severity"] == severity) return true;
      }
    }
    return false;
  }
};

// Runs `bakeoff probe --launch "bakeoff emulate --port P <emulate_flags>" --port P <probe_flags>`.
ProbeOutcome ProbeEmulator(const std::string& emulate_flags, std::vector<std::string> probe_flags,
                           const ProcessOptions& options = {}) {
  ProbeOutcome outcome;
  outcome.port = FreePort();
  const auto out = OutDir();
  std::vector<std::string> args = {"probe",
                                   "--launch",
                                   std::string(BAKEOFF_BINARY) + " emulate --port " +
                                       std::to_string(outcome.port) + " " + emulate_flags,
                                   "--port",
                                   std::to_string(outcome.port),
                                   "--out",
                                   out.string()};
  if (std::find(probe_flags.begin(), probe_flags.end(), "--grace") == probe_flags.end()) {
    probe_flags.insert(probe_flags.end(), {"--grace", "10s"});
  }
  args.insert(args.end(), probe_flags.begin(), probe_flags.end());
  outcome.process = RunBakeoff(args, options);
  std::ifstream in(out / "probes.json");
  if (in) outcome.probes = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(target::PortAcceptsConnections("127.0.0.1", outcome.port))
      << "a launched emulator outlived the probe";
  return outcome;
}

TEST(ProbeLifecycleTest, WellBehavedEmulatorPassesEveryLifecycleAndLoadProbe) {
  const ProbeOutcome o = ProbeEmulator(
      "--startup-load 0.5 --max-waiting 16",
      {"--only", "cold_start,readiness,observability,cancellation,overload,sigterm_drain,restart"});
  ASSERT_EQ(o.process.exit_code, 0) << o.process.output;
  ASSERT_TRUE(o.probes.is_object()) << o.process.output;
  EXPECT_EQ(o.probes["target"]["emulated"], true);
  EXPECT_EQ(o.probes["disqualified"], false);
  for (const char* name :
       {"cold_start", "readiness", "observability", "cancellation", "sigterm_drain", "restart"}) {
    EXPECT_EQ(o.Verdict(name), "pass") << name << "\n" << o.probes.dump(2);
  }
  // Shedding without Retry-After is only informational.
  EXPECT_NE(o.Verdict("overload"), "fail") << o.probes.dump(2);
  const auto& cold = o.Probe("cold_start")->at("measurements");
  EXPECT_GE(cold["health_ready"]["value"].get<double>(), 0.5);
  EXPECT_LT(cold["port_open"]["value"].get<double>(), cold["health_ready"]["value"].get<double>());
  const auto& drain = o.Probe("sigterm_drain")->at("measurements");
  EXPECT_EQ(drain["streams_completed"]["value"], 8);
  EXPECT_NE(o.process.output.find("emulated"), std::string::npos)
      << "the table labels an emulated target";
}

TEST(ProbeLifecycleTest, APoolingCandidateRunsEveryProbeThatMeansSomethingForIt) {
  for (const char* api : {"embeddings", "rerank"}) {
    SCOPED_TRACE(api);
    const ProbeOutcome o = ProbeEmulator("--startup-load 0.5 --max-waiting 16", {"--api", api});
    ASSERT_EQ(o.process.exit_code, 0) << o.process.output;
    ASSERT_TRUE(o.probes.is_object()) << o.process.output;
    EXPECT_EQ(o.probes["disqualified"], false) << o.probes.dump(2);
    for (const char* name :
         {"cold_start", "readiness", "compatibility", "bad_input", "observability", "restart"}) {
      EXPECT_EQ(o.Verdict(name), "pass") << name << "\n" << o.probes.dump(2);
    }
    // A whole request counts as in flight once written: one the server had not read yet at SIGTERM
    // is refused (a visible end, a warning), which a slow (sanitized) emulator sometimes shows.
    for (const char* name : {"overload", "sigterm_drain"})
      EXPECT_NE(o.Verdict(name), "fail") << o.probes.dump(2);
    // Nothing is generated: no stream to cancel, no text to score.
    for (const char* name : {"cancellation", "quality"}) {
      EXPECT_EQ(o.Verdict(name), "not_run") << name;
      EXPECT_EQ(o.Probe(name)->at("not_run_reason"), std::string("the ") + api + " route generates nothing");
    }
    std::map<std::string, std::string> checks;
    for (const auto& check : o.Probe("compatibility")->at("checks")) checks[check["name"]] = check["status"];
    EXPECT_EQ(checks, (std::map<std::string, std::string>{{"models", "pass"},
                                                          {std::string(api) + "_non_streaming", "pass"},
                                                          {"batch_consistency", "pass"},
                                                          {"unknown_model", "pass"},
                                                          {"over_context", "pass"}}));
    // The requests in flight at SIGTERM were whole pooling requests: each answered, refused, or
    // (one the server had not read) reset before any answer; none cut.
    const auto& drain = o.Probe("sigterm_drain")->at("measurements");
    EXPECT_EQ(drain["streams_cut"]["value"], 0);
    EXPECT_EQ(drain["streams_completed"]["value"].get<double>() +
                  drain["streams_errored"]["value"].get<double>() +
                  drain["requests_reset_unanswered"]["value"].get<double>(),
              8);
  }
}

TEST(ProbeLifecycleTest, APoolingRouteTheServerDoesNotServeIsSaidAtOnce) {
  const auto started = std::chrono::steady_clock::now();
  const ProbeOutcome o = ProbeEmulator("--no-pooling", {"--api", "embeddings", "--only", "compatibility,bad_input"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
  EXPECT_EQ(o.process.exit_code, 1) << o.process.output;
  ASSERT_TRUE(o.probes.is_object()) << o.process.output;
  for (const auto& p : o.probes["probes"]) {
    EXPECT_EQ(p["verdict"], "not_run") << p.dump(2);
    EXPECT_NE(p["not_run_reason"].get<std::string>().find("POST /v1/embeddings answered HTTP 404"), std::string::npos)
        << p.dump(2);
  }
}

TEST(ProbeLifecycleTest, ObservabilityNamesEachSignalAndWhenItMoves) {
  const ProbeOutcome o = ProbeEmulator("", {"--only", "observability"});
  ASSERT_EQ(o.process.exit_code, 0) << o.process.output;
  std::map<std::string, std::string> details;
  for (const auto& check : o.Probe("observability")->at("checks")) {
    EXPECT_EQ(check["status"], "pass") << check.dump();
    details[check["name"]] = check["detail"];
  }
  EXPECT_NE(details["generation_tokens"].find("vllm:generation_tokens"), std::string::npos);
  EXPECT_NE(details["generation_tokens"].find("during the request"), std::string::npos)
      << details["generation_tokens"];
  EXPECT_NE(details["e2e"].find("at request end"), std::string::npos) << details["e2e"];
  EXPECT_NE(details["running"].find("1 during the stream"), std::string::npos)
      << details["running"];

  const ProbeOutcome blind =
      ProbeEmulator("", {"--only", "observability", "--metrics", "/no-such-page"});
  EXPECT_EQ(blind.process.exit_code, 3) << blind.process.output;
  EXPECT_TRUE(blind.HasFinding("observability.no_metrics", "disqualifying"))
      << blind.probes.dump(2);
}

TEST(ProbeLifecycleTest, SlowColdStartIsOverTheBudget) {
  const ProbeOutcome o =
      ProbeEmulator("--startup-load 3", {"--only", "cold_start", "--ready-timeout", "1s"});
  EXPECT_EQ(o.process.exit_code, 3) << o.process.output;
  EXPECT_TRUE(o.HasFinding("cold_start.not_ready", "disqualifying")) << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, LyingHealthIsReadyBeforeServing) {
  const ProbeOutcome o =
      ProbeEmulator("--startup-load 2 --fault-health-lies", {"--only", "readiness"});
  EXPECT_EQ(o.process.exit_code, 3) << o.process.output;
  EXPECT_TRUE(o.HasFinding("readiness.ready_before_serving", "disqualifying")) << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, ExitingAtSigtermCutsStreamsSilently) {
  const ProbeOutcome o = ProbeEmulator("--on-sigterm exit", {"--only", "sigterm_drain"});
  EXPECT_EQ(o.process.exit_code, 3) << o.process.output;
  EXPECT_TRUE(o.HasFinding("sigterm_drain.streams_cut_silently", "disqualifying"))
      << o.probes.dump(2);
  EXPECT_TRUE(o.HasFinding("sigterm_drain.nonzero_exit", "warning")) << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, AbortingStreamsAtSigtermEndsThemWithAnError) {
  const ProbeOutcome o = ProbeEmulator("--on-sigterm abort", {"--only", "sigterm_drain"});
  EXPECT_EQ(o.process.exit_code, 0) << o.process.output;
  EXPECT_EQ(o.Verdict("sigterm_drain"), "warn") << o.probes.dump(2);
  EXPECT_TRUE(o.HasFinding("sigterm_drain.streams_ended_with_error", "warning"))
      << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, HealthThatBlocksWhenBusyIsFound) {
  const ProbeOutcome o = ProbeEmulator("--fault-health-busy-delay-ms 1500",
                                       {"--only", "readiness", "--saturation", "8"});
  EXPECT_EQ(o.process.exit_code, 3) << o.process.output;
  EXPECT_TRUE(o.HasFinding("readiness.health_blocks_when_busy", "disqualifying"))
      << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, OddNotReadyStatusAndLateHealthAreWarnings) {
  const ProbeOutcome o =
      ProbeEmulator("--startup-load 0.5 --not-ready-status 500 --fault-health-late-ms 6000",
                    {"--only", "readiness"});
  EXPECT_EQ(o.process.exit_code, 0) << o.process.output;
  EXPECT_EQ(o.Verdict("readiness"), "warn") << o.probes.dump(2);
  EXPECT_TRUE(o.HasFinding("readiness.nonstandard_not_ready_status", "warning"))
      << o.probes.dump(2);
  EXPECT_TRUE(o.HasFinding("readiness.serves_long_before_ready", "warning")) << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, AnEngineThatIgnoresDisconnectsKeepsGenerating) {
  // Its running gauge stays up and its generation counter keeps rising after the cancel.
  const ProbeOutcome o = ProbeEmulator("--fault-ignore-disconnect",
                                       {"--only", "cancellation", "--output-tokens", "128"});
  EXPECT_EQ(o.process.exit_code, 3) << o.process.output;
  EXPECT_TRUE(o.HasFinding("cancellation.keeps_generating_after_decode_cancel", "disqualifying"))
      << o.probes.dump(2);
  EXPECT_TRUE(o.HasFinding("cancellation.keeps_generating_after_prefill_cancel", "disqualifying"))
      << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, EverySigtermFaultFlipsTheDrainProbe) {
  const ProbeOutcome cut = ProbeEmulator("--on-sigterm cut", {"--only", "sigterm_drain"});
  EXPECT_EQ(cut.process.exit_code, 3) << cut.process.output;
  EXPECT_TRUE(cut.HasFinding("sigterm_drain.streams_cut_silently", "disqualifying"))
      << cut.probes.dump(2);

  const ProbeOutcome crash = ProbeEmulator("--on-sigterm crash", {"--only", "sigterm_drain"});
  EXPECT_EQ(crash.process.exit_code, 3) << crash.process.output;
  EXPECT_TRUE(crash.HasFinding("sigterm_drain.crashed_on_sigterm", "disqualifying"))
      << crash.probes.dump(2);

  const ProbeOutcome ignore =
      ProbeEmulator("--on-sigterm ignore", {"--only", "sigterm_drain", "--grace", "2s"});
  EXPECT_EQ(ignore.process.exit_code, 3) << ignore.process.output;
  EXPECT_TRUE(ignore.HasFinding("sigterm_drain.ignores_sigterm", "disqualifying"))
      << ignore.probes.dump(2);
}

TEST(ProbeLifecycleTest, NoMetricsIsDisqualifying) {
  const ProbeOutcome o = ProbeEmulator("--no-metrics", {"--only", "observability"});
  EXPECT_EQ(o.process.exit_code, 3) << o.process.output;
  EXPECT_TRUE(o.HasFinding("observability.no_metrics", "disqualifying")) << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, UnboundedQueueIsFoundUnderOverload) {
  const ProbeOutcome o = ProbeEmulator(
      "--max-num-seqs 4", {"--only", "overload", "--saturation", "8", "--overload-duration", "2s"});
  EXPECT_EQ(o.process.exit_code, 0) << o.process.output;
  EXPECT_TRUE(o.HasFinding("overload.queues_without_bound", "warning")) << o.probes.dump(2);
}

TEST(ProbeLifecycleTest, ACandidateThatCannotComeBackFailsRestart) {
  // The first launch serves; every later launch exits at once.
  const auto marker = OutDir().string() + ".launched";
  std::filesystem::remove(marker);
  const std::uint16_t port = FreePort();
  const std::string script = "if [ -e " + marker + " ]; then exit 1; fi; touch " + marker +
                             "; exec " + BAKEOFF_BINARY + " emulate --port " + std::to_string(port);
  const auto out = OutDir();
  const Finished f =
      RunBakeoff({"probe", "--launch", "sh -c '" + script + "'", "--port", std::to_string(port),
                  "--only", "restart", "--ready-timeout", "5s", "--out", out.string()});
  EXPECT_EQ(f.exit_code, 3) << f.output;
  std::ifstream in(out / "probes.json");
  const nlohmann::json probes = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(probes.is_object()) << f.output;
  EXPECT_EQ(probes["probes"][0]["findings"][0]["code"], "restart.not_back") << probes.dump(2);
  EXPECT_FALSE(target::PortAcceptsConnections("127.0.0.1", port));
}

TEST(ProbeLifecycleTest, AttachModeRunsWhatItCanAndSaysWhatItCannot) {
  emulate::EmulatorConfig emulator;
  emulator.port = 0;
  emulator.max_waiting = 16;
  auto server = emulate::EmulatorServer::Start(emulator);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const auto out = OutDir();
  const Finished f =
      RunBakeoff({"probe", "--url", "http://127.0.0.1:" + std::to_string(server.value()->port()),
                  "--only", "cold_start,readiness,sigterm_drain,restart", "--out", out.string()});
  EXPECT_EQ(f.exit_code, 0) << f.output;
  std::ifstream in(out / "probes.json");
  const nlohmann::json probes = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(probes.is_object()) << f.output;
  EXPECT_EQ(probes["target"]["mode"], "attach");
  for (const auto& p : probes["probes"]) {
    if (p["name"] == "readiness") {
      EXPECT_EQ(p["verdict"], "pass") << p.dump(2);
    } else {
      EXPECT_EQ(p["verdict"], "not_run") << p.dump(2);
      EXPECT_NE(p["not_run_reason"].get<std::string>().find("attach mode"), std::string::npos);
    }
  }
}

TEST(ProbeLifecycleTest, AServerThatIsNotThereIsSaidOnceAndTheOtherProbesDoNotWait) {
  const auto out = OutDir();
  const auto started = std::chrono::steady_clock::now();
  const Finished f =
      RunBakeoff({"probe", "--url", "http://127.0.0.1:" + std::to_string(FreePort()), "--only",
                  "compatibility,bad_input,overload", "--out", out.string()});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s) << "each probe waited again";
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_NE(f.output.find("no probe could run"), std::string::npos) << f.output;
  std::ifstream in(out / "probes.json");
  const nlohmann::json probes = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(probes.is_object()) << f.output;
  ASSERT_EQ(probes["probes"].size(), 3u);
  for (const auto& p : probes["probes"]) {
    EXPECT_EQ(p["verdict"], "not_run") << p.dump(2);
    EXPECT_NE(p["not_run_reason"].get<std::string>().find("not up (found before compatibility)"),
              std::string::npos)
        << p.dump(2);
  }
}

TEST(ProbeLifecycleTest, InterruptedProbeLeavesNoProcessAndWritesWhatRan) {
  ProcessOptions options;
  options.signal_after = 1500ms;
  options.signal = SIGINT;
  const ProbeOutcome o =
      ProbeEmulator("--startup-load 30", {"--only", "cold_start,readiness"}, options);
  EXPECT_EQ(o.process.exit_code, 130) << o.process.output;
  ASSERT_TRUE(o.probes.is_object()) << o.process.output;
  EXPECT_EQ(o.probes["interrupted"], true);
}

TEST(ProbeLifecycleTest, UsageErrorsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"probe"}, "--url"},
      {{"probe", "--launch", "x"}, "--port"},
      {{"probe", "--url", "http://127.0.0.1:1", "--only", "speed"}, "unknown probe \"speed\""},
      {{"probe", "--launch", "a 'b", "--port", "1"}, "--launch"},
      {{"probe", "--url", "http://127.0.0.1:1", "--phase", "load"}, "--phase"},
      {{"probe", "--url", "http://127.0.0.1:1", "--phase", "load=("}, "--phase load"},
  };
  for (const auto& [args, flag] : cases) {
    const Finished f = RunBakeoff(args);
    EXPECT_EQ(f.exit_code, 2) << f.output;
    EXPECT_NE(f.output.find(flag), std::string::npos) << f.output;
  }
}

}  // namespace
}  // namespace bakeoff
