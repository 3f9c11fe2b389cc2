// One conformance suite over every engine adapter: for each route an adapter lists (its OpenAI
// chat route and its native ones), `bakeoff bench` runs against that engine's hand-written wire
// fixture (tests/testdata/engines/, README there), replayed on loopback, and must read the same
// answer from each dialect: three tokens "Paris is lovely", finished at max_tokens, with the
// server's counts exactly where the route reports them and the client's count (said so) where it
// does not. The emulator's native routes are then loaded through the same codecs and must agree
// with the emulator's own counters.
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "dialect/request.h"
#include "emulate/server.h"
#include "support/bakeoff_process.h"
#include "support/engine_fixture.h"
#include "support/scripted_server.h"
#include "target/adapters.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

using bakeoff::testing::FreshScratchDir;

using nlohmann::json;
namespace t = testing;

struct RouteCase {
  const target::EngineAdapter* adapter;
  dialect::Api api;
  bool stream;
};

std::string CaseName(const RouteCase& c) {
  std::string name = std::string(c.adapter->name) + "_" + dialect::ApiName(c.api) + (c.stream ? "" : "_whole");
  for (char& ch : name) {
    if (ch == '.' || ch == '-') ch = '_';
  }
  return name;
}

// The routes on an engine's own endpoint rather than its OpenAI ones (Triton's core, not its
// OpenAI frontend; KServe's /v2 rather than /openai).
bool OnCoreEndpoint(dialect::Api api) {
  return api == dialect::Api::kTritonGenerate || api == dialect::Api::kKserveInfer;
}

// Where an adapter's fixtures are.
std::string FixtureDir(const RouteCase& c) {
  const std::string name(c.adapter->name);
  return name == "triton" && OnCoreEndpoint(c.api) ? "triton-core" : name;
}

// The model each fixture folder serves (its /v1/models, or the model in its /v2 paths).
std::string FixtureModel(const std::string& dir) {
  if (dir == "triton-core") return "ensemble";
  std::ifstream in(t::EngineFixtureDir(dir) / (dir == "kserve" ? "openai_v1_models.http" : "v1_models.http"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json listing = json::parse(text.substr(text.find("\n\n") + 2));
  return listing["data"][0]["id"];
}

std::vector<RouteCase> AllRouteCases() {
  std::vector<RouteCase> cases;
  for (const target::EngineAdapter& adapter : target::AllAdapters()) {
    for (const dialect::Api api : adapter.apis) {
      if (api == dialect::Api::kCompletions) continue;  // chat stands for the OpenAI routes
      if (dialect::ApiStreams(api)) cases.push_back({&adapter, api, true});
      // The whole-answer variants of the native routes that have one on another path.
      if (api == dialect::Api::kTgiGenerate || api == dialect::Api::kTritonGenerate ||
          api == dialect::Api::kKserveInfer || !dialect::ApiGenerates(api)) {
        cases.push_back({&adapter, api, false});
      }
    }
  }
  return cases;
}

std::vector<json> Records(const std::filesystem::path& dir) {
  std::vector<json> records;
  std::ifstream in(dir / "records.jsonl");
  for (std::string line; std::getline(in, line);) records.push_back(json::parse(line));
  return records;
}

void PrintTo(const RouteCase& c, std::ostream* os) { *os << CaseName(c); }

class AdapterConformanceTest : public ::testing::TestWithParam<RouteCase> {};

TEST_P(AdapterConformanceTest, EveryRouteReadsTheSameAnswer) {
  const RouteCase& c = GetParam();
  const std::string dir = FixtureDir(c);
  t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir(dir)));
  const std::string base = server.url() + (dir == "kserve" && !OnCoreEndpoint(c.api) ? "/openai" : "");
  const std::filesystem::path out = FreshScratchDir(CaseName(c));
  std::vector<std::string> args = {"bench", "--url", base, "--engine", std::string(c.adapter->name),
                                   "--api", dialect::ApiName(c.api), "--model", FixtureModel(dir),
                                   "--requests", "2", "--concurrency", "1", "--prompt-tokens", "8",
                                   "--output-tokens", "3", "--no-calibrate", "--metrics-interval", "0",
                                   "--warmup", "0s", "--out", out.string()};
  if (!c.stream) args.push_back("--no-stream");
  if (!dialect::ApiGenerates(c.api)) {
    args.insert(args.end(), {"--batch", "2"});
    const t::Finished run = t::RunBakeoff(args);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    // Vectors and scores: no output tokens; the server's count of what it read.
    for (const json& r : Records(out)) {
      EXPECT_EQ(r["outcome"], "ok") << r.dump();
      EXPECT_EQ(r["output_tokens"], 0) << r.dump();
      EXPECT_EQ(r.value("usage_prompt_tokens", json()), c.api == dialect::Api::kRerank ? 40 : 16) << r.dump();
    }
    const json summary = json::parse(std::ifstream(out / "summary.json"));
    EXPECT_EQ(summary["pooling"]["steps"][0]["inputs_per_request"], 2);
    EXPECT_GT(summary["pooling"]["steps"][0]["inputs_per_s"], 0);
    const json body = json::parse(server.requests().back().body);
    EXPECT_EQ(body[c.api == dialect::Api::kRerank ? "documents" : "input"].size(), 2u) << body.dump();
    std::filesystem::remove_all(out);
    return;
  }
  const t::Finished run = t::RunBakeoff(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;

  const bool prompt_counted = dialect::ApiReportsPromptTokens(c.api) && dir != "generic-openai";
  const bool output_counted = (dialect::ApiReportsOutputTokens(c.api) && dir != "generic-openai") ||
                              c.api == dialect::Api::kTgiGenerate;
  const std::vector<json> records = Records(out);
  ASSERT_EQ(records.size(), 2u) << run.output;
  for (const json& r : records) {
    EXPECT_EQ(r["outcome"], "ok") << r.dump();
    EXPECT_EQ(r["output_tokens"], 3) << r.dump();
    EXPECT_EQ(r["output_tokens_estimated"], !output_counted) << r.dump();
    if (prompt_counted) {
      EXPECT_EQ(r.value("usage_prompt_tokens", json()), 12) << r.dump();
    } else {
      EXPECT_FALSE(r.contains("usage_prompt_tokens")) << r.dump();
    }
    // Triton's generate and the V2 infer route say nothing of why an answer ended.
    if (c.api != dialect::Api::kTritonGenerate && c.api != dialect::Api::kKserveInfer) {
      EXPECT_EQ(r.value("finish_reason", ""), "length") << r.dump();
    }
    if (c.stream) {
      EXPECT_TRUE(r.contains("first_token_ns")) << r.dump();
    }
  }
  const json summary = json::parse(std::ifstream(out / "summary.json"));
  const json& fairness = summary["fairness"];
  EXPECT_EQ(fairness["api"], dialect::ApiName(c.api));
  EXPECT_EQ(fairness["ok_answers"], 2);
  EXPECT_EQ(fairness["usage"]["answers_counted_by_server"], output_counted ? 2 : 0);
  // Every answer is 3 tokens: none ended early. An uncounted route is flagged, a counted one not.
  EXPECT_EQ(fairness["forced_length"]["answers_before_max_tokens"], 0);
  EXPECT_EQ(fairness["unequal_work"].size(), output_counted ? 0u : 1u) << fairness.dump();
  // The request went to the route, in its shape.
  const std::vector<t::CapturedRequest> requests = server.requests();
  bool sent = false;
  for (const t::CapturedRequest& request : requests) {
    if (request.method != "POST") continue;
    sent = true;
    EXPECT_EQ(request.target.find("/v1/") != std::string::npos, !OnCoreEndpoint(c.api) && dialect::IsOpenAiApi(c.api))
        << request.target;
    EXPECT_TRUE(json::accept(request.body)) << request.body;
  }
  EXPECT_TRUE(sent);
  std::filesystem::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(AllAdapters, AdapterConformanceTest, ::testing::ValuesIn(AllRouteCases()),
                         [](const ::testing::TestParamInfo<RouteCase>& param) { return CaseName(param.param); });

// The emulator serves every native route; a bench over each reads what the engine model
// generated, and --ignore-eos, which no native route can send, is recorded as unequal work.
TEST(NativeRoutesTest, ABenchOverEachNativeRouteOfTheEmulatorAgreesWithItsCounters) {
  for (const dialect::Api api : {dialect::Api::kOllamaGenerate, dialect::Api::kOllamaChat, dialect::Api::kTgiGenerate,
                                 dialect::Api::kTritonGenerate, dialect::Api::kKserveInfer}) {
    SCOPED_TRACE(dialect::ApiName(api));
    emulate::EmulatorConfig config;
    config.port = 0;
    config.instant = true;
    auto emulator = emulate::EmulatorServer::Start(config);
    ASSERT_TRUE(emulator.ok()) << emulator.error().message;
    const std::filesystem::path out = FreshScratchDir(std::string("emulated_") + dialect::ApiName(api));
    std::vector<std::string> args = {"bench", "--url", "http://127.0.0.1:" + std::to_string(emulator.value()->port()),
                                     "--api", dialect::ApiName(api), "--requests", "12", "--concurrency", "3",
                                     "--prompt-tokens", "40", "--output-tokens", "9", "--ignore-eos",
                                     "--metrics-interval", "0", "--out", out.string()};
    if (!dialect::ApiStreams(api)) args.push_back("--no-stream");
    const t::Finished run = t::RunBakeoff(args);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::vector<json> records = Records(out);
    for (const json& r : records) {
      EXPECT_EQ(r["outcome"], "ok") << r.dump();
      EXPECT_GE(r["output_tokens"], 1) << r.dump();
      EXPECT_LE(r["output_tokens"], 9) << r.dump();
    }
    const json summary = json::parse(std::ifstream(out / "summary.json"));
    EXPECT_EQ(summary["fairness"]["forced_length"]["sent"], false);
    EXPECT_FALSE(summary["fairness"]["unequal_work"].empty());
    EXPECT_NE(run.output.find("no field that forces an output length"), std::string::npos) << run.output;
    // Each measured request (and any warm-up) was a whole generation for the engine model.
    const emulate::EmulatorStats stats = emulator.value()->stats();
    EXPECT_EQ(records.size(), 12u);
    EXPECT_GE(stats.finished, records.size());
    EXPECT_EQ(stats.aborted, 0u);
    std::filesystem::remove_all(out);
  }
}

}  // namespace
}  // namespace bakeoff

namespace bakeoff {
namespace {

// Loads beyond plain chat against the emulator (docs/emulator.md "Pooling routes", "Structured
// output and LoRA costs"): each variant step replays its baseline's arrivals and prompts with
// one change, and the modelled cost of that change shows in the comparison.
struct EmulatedRun {
  std::unique_ptr<emulate::EmulatorServer> server;
  std::string url;
};

EmulatedRun StartModelled(const std::function<void(emulate::EmulatorConfig&)>& tune) {
  emulate::EmulatorConfig config;
  config.port = 0;
  tune(config);
  auto server = emulate::EmulatorServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.error().message;
  if (!server.ok()) return {};
  const std::string url = "http://127.0.0.1:" + std::to_string(server.value()->port());
  return {std::move(server.value()), url};
}

json BenchSummary(const std::string& name, std::vector<std::string> args) {
  const std::filesystem::path out = FreshScratchDir(name);
  args.insert(args.begin(), "bench");
  args.insert(args.end(), {"--metrics-interval", "0", "--out", out.string()});
  const t::Finished run = t::RunBakeoff(args);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  json summary = json::parse(std::ifstream(out / "summary.json"));
  for (const json& r : Records(out)) EXPECT_EQ(r["outcome"], "ok") << r.dump();
  summary["bench_output"] = run.output;
  std::filesystem::remove_all(out);
  return summary;
}

TEST(LoadKindsTest, EmbeddingsAndRerankCountInputsAndPromptTokens) {
  EmulatedRun emulator = StartModelled([](emulate::EmulatorConfig& c) { c.instant = true; });
  ASSERT_TRUE(emulator.server);
  for (const char* api : {"embeddings", "rerank"}) {
    SCOPED_TRACE(api);
    const json summary = BenchSummary(std::string("pool_") + api, {"--url", emulator.url, "--api", api, "--no-stream", "--batch", "4",
                                                                   "--requests", "10", "--concurrency", "2",
                                                                   "--prompt-tokens", "32"});
    const json& step = summary["steps"][0];
    EXPECT_EQ(step["requests"]["outcomes"]["ok"], 10);
    EXPECT_TRUE(step["throughput"]["input_tokens_from_server"]);
    EXPECT_DOUBLE_EQ(summary["pooling"]["steps"][0]["inputs_per_s"].get<double>(),
                     4 * step["throughput"]["requests_per_s"].get<double>());
    EXPECT_TRUE(summary["fairness"]["unequal_work"].empty());
    // The plan counts every input (a rerank's query once per document), as the server does.
    const json& length = step["tokens"]["prompt_length"];
    EXPECT_DOUBLE_EQ(length["planned_mean"].get<double>(), std::string(api) == "embeddings" ? 4 * 32 : 2 * 4 * 32);
    EXPECT_LT(std::abs(length["deviation"].get<double>()), 0.1) << length.dump();
  }
}

TEST(LoadKindsTest, TheSimulatorPrefillsAPoolingRequestsInputsAsOneSequence) {
  for (const char* api : {"embeddings", "rerank"}) {
    SCOPED_TRACE(api);
    const std::filesystem::path out = FreshScratchDir(std::string("sim_pool_") + api);
    const t::Finished simulate =
        t::RunBakeoff({"simulate", "--api", api, "--no-stream", "--batch", "4", "--requests", "10",
                       "--concurrency", "2", "--prompt-tokens", "32", "--out", out.string()});
    ASSERT_EQ(simulate.exit_code, 0) << simulate.output;
    const json summary = json::parse(std::ifstream(out / "summary.json"));
    const json& step = summary["steps"][0];
    EXPECT_EQ(step["requests"]["outcomes"]["ok"], 10);
    EXPECT_DOUBLE_EQ(summary["pooling"]["steps"][0]["inputs_per_s"].get<double>(),
                     4 * step["throughput"]["requests_per_s"].get<double>());
    // Every input's tokens, a rerank's query before each document, and no output.
    const json& length = step["tokens"]["prompt_length"];
    EXPECT_DOUBLE_EQ(length["planned_mean"].get<double>(),
                     std::string(api) == "embeddings" ? 4 * 32 : 2 * 4 * 32);
    EXPECT_LT(std::abs(length["deviation"].get<double>()), 0.1) << length.dump();
    EXPECT_EQ(step["tokens"]["output"]["max"], 0) << step["tokens"].dump();
    EXPECT_EQ(simulate.output.find("counted by the client"), std::string::npos) << simulate.output;
  }
}

TEST(LoadKindsTimingTest, AGrammarAndAdapterSwapsCostWhatTheEngineModelSays) {
  // A grammar cost of a third of a decode step, and one adapter slot for three adapters.
  EmulatedRun emulator = StartModelled([](emulate::EmulatorConfig& c) {
    c.engine.cost.grammar_ms_per_token = 2.0;
    c.engine.cost.lora_load_ms = 30;
    c.engine.max_loras = 1;
    c.lora_adapters = {"a", "b", "c"};
  });
  ASSERT_TRUE(emulator.server);
  const json structured = BenchSummary("structured", {"--url", emulator.url, "--structured", "json_schema", "--requests",
                                                      "24", "--concurrency", "4", "--prompt-tokens", "64",
                                                      "--output-tokens", "32"});
  ASSERT_EQ(structured["steps"].size(), 2u);
  EXPECT_EQ(structured["steps"][1]["label"], "concurrency=4 json_schema");
  // The same prompts: the server counted the same prompt tokens in both steps.
  EXPECT_EQ(structured["steps"][0]["tokens"]["prompt"]["mean"], structured["steps"][1]["tokens"]["prompt"]["mean"]);
  const json& change = structured["variants"][0];
  // The schema's record is shorter than 32 tokens: said so, and TPOT carries the grammar's cost
  // (6 ms base + 2 ms grammar on each decode step of about 6.4 ms).
  EXPECT_FALSE(change["same_answer_length"].get<bool>());
  EXPECT_GT(change["tpot_p50_ms"]["ratio"].get<double>(), 1.15) << change.dump();
  EXPECT_NE(structured["bench_output"].get<std::string>().find("TPOT and TTFT compare the same work"), std::string::npos);

  const json lora = BenchSummary("lora", {"--url", emulator.url, "--lora-adapters", "a,b,c", "--requests", "24",
                                          "--concurrency", "6", "--prompt-tokens", "64", "--output-tokens", "16"});
  ASSERT_EQ(lora["steps"].size(), 2u);
  // Three adapters through one slot: requests wait for theirs, and every switch loads one.
  EXPECT_GT(lora["variants"][0]["ttft_p50_ms"]["ratio"].get<double>(), 1.5) << lora["variants"][0].dump();
  EXPECT_TRUE(lora["variants"][0]["same_answer_length"].get<bool>());
}

}  // namespace
}  // namespace bakeoff

namespace bakeoff {
namespace {

// A regex goes in each engine's own field, and an engine that documents none is refused.
TEST(LoadKindsTest, ARegexGoesInTheEnginesOwnFieldOrIsRefused) {
  for (const auto& [engine, field] : std::vector<std::pair<std::string, std::string>>{
           {"sglang", "regex"}, {"vllm", "structured_outputs"}, {"tgi", "response_format"}}) {
    SCOPED_TRACE(engine);
    t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir(engine)));
    const std::filesystem::path out = FreshScratchDir("regex_" + engine);
    const t::Finished run = t::RunBakeoff({"bench", "--url", server.url(), "--engine", engine, "--structured", "regex",
                                           "--requests", "1", "--concurrency", "1", "--output-tokens", "3",
                                           "--no-calibrate", "--metrics-interval", "0", "--warmup", "0s", "--out",
                                           out.string()});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::vector<json> bodies;
    for (const t::CapturedRequest& request : server.requests()) {
      if (request.method == "POST") bodies.push_back(json::parse(request.body));
    }
    ASSERT_EQ(bodies.size(), 2u);  // the plain step, then the constrained one
    EXPECT_FALSE(bodies[0].contains(field)) << bodies[0].dump();
    ASSERT_TRUE(bodies[1].contains(field)) << bodies[1].dump();
    EXPECT_EQ(bodies[1].dump().find("[A-Z]{3}-[0-9]{4}") != std::string::npos, true) << bodies[1].dump();
    std::filesystem::remove_all(out);
  }
  t::ScriptedServer llama(t::EngineFixtureResponder(t::EngineFixtureDir("llama.cpp")));
  const t::Finished refused = t::RunBakeoff({"bench", "--url", llama.url(), "--engine", "llama.cpp", "--structured",
                                             "regex", "--requests", "1", "--no-calibrate"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("llama.cpp documents no regex constraint"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace bakeoff
