// `bakeoff detect` and the --engine flag of bench and probe, on loopback: the emulated engine is
// named as such with the vLLM adapter; `detect --list` shows every adapter's verified status;
// fixtures replayed by a scripted server are named with their version; an unreachable URL exits
// 1; an unknown --engine is a usage error; bench sends the detected (or named) engine's
// forced-length fields, and none to an engine that has none.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/engine_fixture.h"
#include "support/scripted_server.h"
#include "target/detection.h"
#include "support/scratch.h"
#include "instant_emulator.h"

namespace bakeoff {
namespace {

using bakeoff::testing::FreshScratchDir;

using bakeoff::testing::LoopbackUrl;

using namespace std::chrono_literals;
using nlohmann::json;
namespace t = testing;

TEST(DetectTest, TheEmulatorIsNamedAsTheEmulatedEngineWithTheVllmAdapter) {
  auto server = InstantEmulator();
  ASSERT_NE(server, nullptr);
  Result<net::Endpoint> endpoint = net::ParseEndpoint(LoopbackUrl(server->port()));
  ASSERT_TRUE(endpoint.ok());
  Result<target::Detection> d = target::DetectEngine(endpoint.value());
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_TRUE(d->emulated);
  EXPECT_EQ(d->engine, "bakeoff emulated engine");
  ASSERT_NE(d->adapter, nullptr);
  EXPECT_EQ(d->adapter->name, "vllm");
  EXPECT_EQ(d->confidence, "high");
  // Its metrics page carries vLLM's names, which is evidence too.
  bool metric_evidence = false;
  for (const std::string& line : d->evidence) {
    metric_evidence = metric_evidence || line.find("vllm:") != std::string::npos;
  }
  EXPECT_TRUE(metric_evidence);

  const t::Finished run = t::RunBakeoff({"detect", LoopbackUrl(server->port()), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json j = json::parse(run.output.substr(run.output.find('{')));
  EXPECT_EQ(j["adapter"], "vllm");
  EXPECT_EQ(j["emulated"], true);
  EXPECT_EQ(j["health_path"], "/health");
  EXPECT_EQ(j["metrics_path"], "/metrics");
}

TEST(DetectTest, ListShowsEveryAdapterAndWhichWasVerifiedLive) {
  const t::Finished run = t::RunBakeoff({"detect", "--list"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const target::EngineAdapter& adapter : target::AllAdapters()) {
    EXPECT_NE(run.output.find(std::string(adapter.name) + " "), std::string::npos) << adapter.name;
  }
  EXPECT_NE(run.output.find("llama.cpp verified live: b4748"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("fixtures only"), std::string::npos);
}

TEST(DetectTest, AFixtureIsNamedWithItsVersionAndEvidence) {
  t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir("llama.cpp")));
  const t::Finished run = t::RunBakeoff({"detect", server.url()});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("engine      llama.cpp"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("b4748-c392e5094 (GET /props build_info)"), std::string::npos);
  EXPECT_NE(run.output.find("verified live"), std::string::npos);
  EXPECT_NE(run.output.find("+30 Server: \"llama.cpp\""), std::string::npos) << run.output;
}

TEST(DetectTest, UnknownEngineWarnsAndUnreachableExits1) {
  t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir("generic-openai")));
  const t::Finished generic = t::RunBakeoff({"detect", server.url()});
  EXPECT_EQ(generic.exit_code, 0) << generic.output;
  EXPECT_NE(generic.output.find("warning: nothing identifies the engine; using generic-openai"),
            std::string::npos)
      << generic.output;
  std::uint16_t port = 0;
  {
    t::ScriptedServer gone(t::Script{});
    port = gone.port();
  }
  const t::Finished unreachable = t::RunBakeoff({"detect", LoopbackUrl(port)});
  EXPECT_EQ(unreachable.exit_code, 1) << unreachable.output;
  EXPECT_EQ(t::RunBakeoff({"detect"}).exit_code, 2);
}

TEST(DetectTest, UnknownEngineFlagIsAUsageError) {
  const t::Finished probe =
      t::RunBakeoff({"probe", "--url", "http://127.0.0.1:9", "--engine", "nosuch"});
  EXPECT_EQ(probe.exit_code, 2) << probe.output;
  EXPECT_NE(probe.output.find("--engine: unknown engine 'nosuch'"), std::string::npos);
  const t::Finished bench = t::RunBakeoff(
      {"bench", "--url", "http://127.0.0.1:9", "--engine", "nosuch", "--requests", "1"});
  EXPECT_EQ(bench.exit_code, 2) << bench.output;
}

TEST(DetectTest, ProbeUsesTheDetectedAdaptersPaths) {
  t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir("triton")));
  const auto out = FreshScratchDir("probe_triton");
  // Only the readiness probe's setup matters here: the paths chosen are logged first.
  const t::Finished run = t::RunBakeoff({"probe", "--url", server.url(), "--only", "readiness",
                                         "--ready-timeout", "3s", "--out", out.string()});
  EXPECT_NE(run.output.find("engine adapter triton: health /health/ready, metrics /metrics"),
            std::string::npos)
      << run.output;
  bool asked_ready = false;
  for (const t::CapturedRequest& r : server.requests()) {
    asked_ready = asked_ready || r.target == "/health/ready";
  }
  EXPECT_TRUE(asked_ready);
}

TEST(DetectTest, ANamedEnginesColdStartPhasesStandInForPhaseFlags) {
  std::uint16_t port = 0;
  {
    t::ScriptedServer gone(t::Script{});
    port = gone.port();
  }
  const auto out = FreshScratchDir("probe_phases");
  // The command never listens; only the setup's choices matter here.
  const t::Finished run = t::RunBakeoff(
      {"probe", "--launch", "sleep 30", "--port", std::to_string(port), "--engine", "llama.cpp",
       "--only", "readiness", "--ready-timeout", "1s", "--grace", "1s", "--out", out.string()});
  EXPECT_NE(run.output.find("engine adapter llama.cpp: health /health, metrics /metrics"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("cold-start phases from the llama.cpp adapter: load, listen"),
            std::string::npos)
      << run.output;
  const t::Finished own =
      t::RunBakeoff({"probe", "--launch", "sleep 30", "--port", std::to_string(port), "--engine",
                     "llama.cpp", "--phase", "up=listening", "--only", "readiness",
                     "--ready-timeout", "1s", "--grace", "1s", "--out", out.string()});
  EXPECT_EQ(own.output.find("cold-start phases from"), std::string::npos) << own.output;
}

// A scripted engine: the fixture's routes plus a short chat stream with usage.
t::ScriptedServer::Responder WithChat(const std::string& engine) {
  auto fixture = t::EngineFixtureResponder(t::EngineFixtureDir(engine));
  return [fixture](const t::CapturedRequest& r) -> t::Script {
    if (r.target != "/v1/chat/completions") return fixture(r);
    return t::SseScript(
        {R"({"choices":[{"index":0,"delta":{"content":"hi there"},"finish_reason":null}]})",
         R"({"choices":[{"index":0,"delta":{"content":" friend"},"finish_reason":"length"}]})",
         R"({"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}})"});
  };
}

std::string ChatBody(const t::ScriptedServer& server) {
  for (const t::CapturedRequest& r : server.requests()) {
    if (r.target == "/v1/chat/completions") return r.body;
  }
  return "";
}

TEST(DetectTest, BenchSendsTheEnginesForcedLengthFields) {
  const std::vector<std::string> common = {"--requests",      "1",
                                           "--concurrency",   "1",
                                           "--prompt-tokens", "16",
                                           "--output-tokens", "4",
                                           "--ignore-eos",    "--no-calibrate"};
  auto bench = [&](const std::string& url, const std::string& name,
                   std::vector<std::string> extra) {
    std::vector<std::string> args = {"bench", "--url", url, "--out", FreshScratchDir(name).string()};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return t::RunBakeoff(args);
  };
  {  // detected LMDeploy: min_new_tokens
    t::ScriptedServer server(WithChat("lmdeploy"));
    const t::Finished run = bench(server.url(), "lmdeploy", {});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const std::string body = ChatBody(server);
    EXPECT_NE(body.find("\"ignore_eos\":true"), std::string::npos) << body;
    EXPECT_NE(body.find("\"min_new_tokens\":4"), std::string::npos) << body;
    EXPECT_EQ(body.find("\"min_tokens\""), std::string::npos) << body;
    EXPECT_NE(run.output.find("engine: LMDeploy"), std::string::npos) << run.output;
  }
  {  // named TGI: neither field, and said so
    t::ScriptedServer server(WithChat("lmdeploy"));
    const t::Finished run = bench(server.url(), "tgi", {"--engine", "tgi"});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const std::string body = ChatBody(server);
    EXPECT_EQ(body.find("ignore_eos"), std::string::npos) << body;
    EXPECT_EQ(body.find("min_"), std::string::npos) << body;
    EXPECT_NE(run.output.find("TGI cannot force an output length"), std::string::npos)
        << run.output;
  }
  {  // unidentified: today's defaults (ignore_eos and min_tokens)
    t::ScriptedServer server(WithChat("generic-openai"));
    const t::Finished run = bench(server.url(), "generic", {});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const std::string body = ChatBody(server);
    EXPECT_NE(body.find("\"ignore_eos\":true"), std::string::npos) << body;
    EXPECT_NE(body.find("\"min_tokens\":4"), std::string::npos) << body;
  }
}

}  // namespace
}  // namespace bakeoff
