// The compatibility, bad_input and quality probes, run by the built binary (`bakeoff probe
// --url ... --only <probe>`) against the in-process emulated engine (well-behaved, then with a
// fault knob: truncated prompts, ignored stop, nondeterminism, 500 on bad input, right and wrong
// answers) and against scripted servers that misbehave in ways the emulator does not: one that
// answers everything with the same completion, one that answers bad input with 500, one that
// never answers bad input. Each test asserts the exit code, the probe's verdict, its checks and
// the finding codes in probes.json.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/file.h"
#include "emulate/output_text.h"
#include "emulate/server.h"
#include "qualify/quality_set.h"
#include "support/bakeoff_process.h"
#include "support/scripted_server.h"
#include "support/scratch.h"
#include "instant_emulator.h"

namespace bakeoff {
namespace {

using bakeoff::testing::LoopbackUrl;

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Finished;
using testing::RunBakeoff;
namespace t = testing;

struct ProbeRunResult {
  Finished finished;
  json probe;  // the one probe's object in probes.json (null when not written)
  std::filesystem::path out;
};

ProbeRunResult RunProbe(const std::string& url, const std::string& probe, const std::string& name,
                        std::vector<std::string> extra = {}) {
  ProbeRunResult run;
  run.out = bakeoff::testing::FreshScratchDir("bakeoff_probe_api_" + name);
  std::vector<std::string> args = {"probe", "--url",         url, "--only", probe,
                                   "--out", run.out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  t::ProcessOptions options;
  options.kill_after = 170s;
  run.finished = RunBakeoff(args, options);
  Result<std::string> text = ReadFile(run.out / "probes.json");
  if (text.ok()) {
    const json doc = json::parse(text.value());
    for (const json& p : doc["probes"])
      if (p["name"] == probe) run.probe = p;
  }
  return run;
}

std::set<std::string> FindingCodes(const json& probe) {
  std::set<std::string> codes;
  for (const json& f : probe["findings"]) codes.insert(f["code"].get<std::string>());
  return codes;
}

std::string CheckStatus(const json& probe, const std::string& check) {
  for (const json& c : probe["checks"])
    if (c["name"] == check) return c["status"].get<std::string>();
  return "absent";
}

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// ---- the command line ----

TEST(ProbeApiTest, MalformedQualitySetIsAUsageErrorNamingFileAndLine) {
  const auto set = bakeoff::testing::FreshScratchDir("bakeoff_probe_api_bad_set_file");
  WriteText(set,
            "{\"id\": \"a\", \"prompt\": \"x\", \"reference\": \"y\", \"scorer\": \"exact\"}\n"
            "\n{\"id\": \"b\", \"prompt\": \"x\", \"reference\": \"y\"}\n");
  const Finished f =
      RunBakeoff({"probe", "--url", "http://127.0.0.1:1", "--quality-set", set.string()});
  EXPECT_EQ(f.exit_code, 2) << f.output;
  EXPECT_NE(f.output.find(set.string() + ":3: field \"scorer\" is missing"), std::string::npos)
      << f.output;
  const Finished score =
      RunBakeoff({"probe", "--url", "http://127.0.0.1:1", "--quality-min-score", "1.5"});
  EXPECT_EQ(score.exit_code, 2) << score.output;
  EXPECT_NE(score.output.find("--quality-min-score"), std::string::npos) << score.output;
  std::filesystem::remove(set);
}

// ---- against the emulated engine ----

TEST(ProbeApiTest, CompatibilityPassesAgainstTheEmulator) {
  auto server = InstantEmulator();
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "compatibility", "compat_ok");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "pass") << run.probe.dump(2);
  EXPECT_TRUE(run.probe["findings"].empty()) << run.probe.dump(2);
  for (const char* check :
       {"models", "chat_non_streaming", "chat_streaming", "completions_non_streaming",
        "completions_streaming", "stream_usage", "max_tokens", "fixed_length", "determinism",
        "stop", "logprobs", "n", "json_schema", "tools", "unknown_model", "over_context"}) {
    EXPECT_EQ(CheckStatus(run.probe, check), "pass") << check << "\n" << run.probe.dump(2);
  }
  // Each check keeps its exchange.
  EXPECT_TRUE(std::filesystem::exists(run.out / "evidence/compatibility/over_context.json"));
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, CompatibilityOnTheCompletionsApi) {
  auto server = InstantEmulator();
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "compatibility", "compat_completions",
                                      {"--api", "completions"});
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "pass") << run.probe.dump(2);
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, CompatibilityFindsSilentPromptTruncation) {
  emulate::EmulatorConfig config;
  config.faults.truncate_prompts = true;
  auto server = InstantEmulator(config);
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "compatibility", "compat_truncate");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 3) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "fail");
  EXPECT_EQ(FindingCodes(run.probe), std::set<std::string>{"compatibility.over_context_truncated"})
      << run.probe.dump(2);
  EXPECT_EQ(CheckStatus(run.probe, "over_context"), "fail");
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, CompatibilityFindsAnIgnoredStopSequence) {
  emulate::EmulatorConfig config;
  config.faults.ignore_stop = true;
  auto server = InstantEmulator(config);
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "compatibility", "compat_stop");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;  // a warning, not disqualifying
  EXPECT_EQ(run.probe["verdict"], "warn");
  EXPECT_EQ(FindingCodes(run.probe), std::set<std::string>{"compatibility.stop_ignored"})
      << run.probe.dump(2);
  EXPECT_EQ(CheckStatus(run.probe, "stop"), "fail");
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, CompatibilityFindsNondeterminism) {
  emulate::EmulatorConfig config;
  config.faults.nondeterministic = true;
  auto server = InstantEmulator(config);
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "compatibility", "compat_nondet");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "warn");
  EXPECT_TRUE(FindingCodes(run.probe).count("compatibility.determinism_failed"))
      << run.probe.dump(2);
  // Stop is honoured but cannot be shown on a different answer: not a finding.
  EXPECT_FALSE(FindingCodes(run.probe).count("compatibility.stop_failed")) << run.probe.dump(2);
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, BadInputPassesAgainstTheEmulator) {
  auto server = InstantEmulator();
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "bad_input", "bad_input_ok");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "pass") << run.probe.dump(2);
  EXPECT_EQ(run.probe["checks"].size(), 10u) << run.probe.dump(2);
  for (const json& check : run.probe["checks"]) EXPECT_EQ(check["status"], "pass") << check.dump();
  EXPECT_EQ(CheckStatus(run.probe, "oversized_body"), "pass");
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, QualityBuiltInSetFailsAgainstFillerWords) {
  auto server = InstantEmulator();
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "quality", "quality_builtin");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 3) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "fail");
  EXPECT_TRUE(FindingCodes(run.probe).count("quality.score_below_threshold")) << run.probe.dump(2);
  EXPECT_EQ(run.probe["measurements"]["score"]["value"], 0.0);
  // One output line per item, with the fields a later comparison reads.
  std::ifstream outputs(run.out / "evidence/quality/outputs.jsonl");
  std::string line;
  std::size_t lines = 0;
  while (std::getline(outputs, line)) {
    const json item = json::parse(line);
    EXPECT_TRUE(item.contains("id") && item.contains("output") && item.contains("why"));
    EXPECT_FALSE(item["passed"].get<bool>());
    EXPECT_FALSE(item["output"].get<std::string>().empty());
    ++lines;
  }
  EXPECT_EQ(lines, run.probe["checks"].size());
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, QualityOwnSetAndThreshold) {
  auto server = InstantEmulator();
  ASSERT_NE(server, nullptr);
  const auto set = bakeoff::testing::FreshScratchDir("bakeoff_probe_api_own_set_file");
  // Any word passes the first two; the emulator never writes digits, so the third fails.
  WriteText(set,
            "{\"id\": \"word\", \"prompt\": \"Say a word.\", \"reference\": \"[a-z]+\", "
            "\"scorer\": \"regex\"}\n"
            "{\"id\": \"chat\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
            "\"reference\": \"\\\\w\", \"scorer\": \"regex\", \"max_tokens\": 4}\n"
            "{\"id\": \"digit\", \"prompt\": \"A digit?\", \"reference\": \"[0-9]\", \"scorer\": "
            "\"regex\"}\n");
  const ProbeRunResult low =
      RunProbe(LoopbackUrl(server->port()), "quality", "quality_own_low",
               {"--quality-set", set.string(), "--quality-min-score", "0.6"});
  EXPECT_EQ(low.finished.exit_code, 0) << low.finished.output;
  EXPECT_EQ(low.probe["verdict"], "pass") << low.probe.dump(2);
  EXPECT_NEAR(low.probe["measurements"]["score"]["value"].get<double>(), 2.0 / 3.0, 1e-9);
  EXPECT_EQ(CheckStatus(low.probe, "digit"), "fail");
  const ProbeRunResult high =
      RunProbe(LoopbackUrl(server->port()), "quality", "quality_own_high", {"--quality-set", set.string()});
  EXPECT_EQ(high.finished.exit_code, 3) << high.finished.output;
  EXPECT_TRUE(FindingCodes(high.probe).count("quality.score_below_threshold"));
  std::filesystem::remove(set);
  std::filesystem::remove_all(low.out);
  std::filesystem::remove_all(high.out);
}

TEST(ProbeApiTest, BadInputAnswered500ByTheEmulatorIsAWarning) {
  emulate::EmulatorConfig config;
  config.faults.bad_input_500 = true;
  auto server = InstantEmulator(config);
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "bad_input", "bad_input_emu_500");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "warn") << run.probe.dump(2);
  EXPECT_EQ(FindingCodes(run.probe), std::set<std::string>{"bad_input.server_error"});
  EXPECT_EQ(CheckStatus(run.probe, "negative_max_tokens"), "fail");
  EXPECT_EQ(CheckStatus(run.probe, "unknown_fields"), "pass");
  std::filesystem::remove_all(run.out);
}

// What a model that knows the built-in set's answers says, by item id.
const std::map<std::string, std::string> kRightAnswers = {
    {"add", "42"},
    {"multiply", "144"},
    {"subtract", "999"},
    {"week", "7"},
    {"capital_france", "Paris"},
    {"capital_japan", "Tokyo"},
    {"capital_italy", "Rome"},
    {"war_end", "1945"},
    {"json_person", R"({"name": "Ada", "age": 36})"},
    {"json_colors", R"(["red", "yellow", "blue"])"}};

// The emulator's --answers table for the built-in set: the key is the completions prompt or the
// chat's last user message (emulate/openai_api.h GenerationSpec::answer_key).
emulate::AnswerTable BuiltInAnswers(bool right) {
  Result<std::vector<qualify::QualityItem>> set = qualify::LoadQualitySet("");
  EXPECT_TRUE(set.ok());
  emulate::AnswerTable answers;
  for (const qualify::QualityItem& item : set.value()) {
    EXPECT_TRUE(kRightAnswers.count(item.id)) << item.id;
    const std::string answer = right ? kRightAnswers.at(item.id) : "I do not know.";
    // On the completions API a messages item is sent as its contents joined (PromptText).
    answers[qualify::PromptText(item)] = answer;
    if (!item.messages.empty())
      answers[item.messages.back()["content"].get<std::string>()] = answer;
  }
  return answers;
}

TEST(ProbeApiTest, QualityBuiltInSetPassesWithRightAnswers) {
  emulate::EmulatorConfig config;
  config.answers = BuiltInAnswers(true);
  auto server = InstantEmulator(config);
  ASSERT_NE(server, nullptr);
  for (const char* api : {"chat", "completions"}) {
    const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "quality",
                                        std::string("quality_right_") + api, {"--api", api});
    ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
    EXPECT_EQ(run.finished.exit_code, 0) << api << "\n" << run.finished.output;
    EXPECT_EQ(run.probe["verdict"], "pass") << api << "\n" << run.probe.dump(2);
    EXPECT_EQ(run.probe["measurements"]["score"]["value"], 1.0);
    std::filesystem::remove_all(run.out);
  }
}

TEST(ProbeApiTest, QualityBuiltInSetFailsWithWrongAnswers) {
  emulate::EmulatorConfig config;
  config.answers = BuiltInAnswers(false);
  auto server = InstantEmulator(config);
  ASSERT_NE(server, nullptr);
  const ProbeRunResult run = RunProbe(LoopbackUrl(server->port()), "quality", "quality_wrong");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 3) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "fail");
  EXPECT_TRUE(FindingCodes(run.probe).count("quality.score_below_threshold"));
  std::ifstream outputs(run.out / "evidence/quality/outputs.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(outputs, line));
  EXPECT_EQ(json::parse(line)["output"], "I do not know.");
  std::filesystem::remove_all(run.out);
}

// ---- against scripted servers ----

const char* kModels =
    R"({"object":"list","data":[{"id":"m","object":"model","max_model_len":1000}]})";

// Serves /health and /v1/models; generation requests go to `generate`.
t::ScriptedServer::Responder Engine(std::function<t::Script(const t::CapturedRequest&)> generate) {
  return [generate](const t::CapturedRequest& request) -> t::Script {
    if (request.target == "/health") return {t::Send(t::FullResponse(200, "{}"))};
    if (request.target == "/v1/models") return {t::Send(t::FullResponse(200, kModels))};
    if (request.method == "POST") return generate(request);
    return {t::Send(t::FullResponse(404, R"({"error":{"message":"not found"}})"))};
  };
}

// A chat completion of five words, whatever was asked.
t::Script SameAnswer() {
  return {t::Send(t::FullResponse(
      200,
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":"one two three four five"},)"
      R"("finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5}})"))};
}

// A request a well-behaved server would serve: JSON with a non-empty message list of objects,
// a positive integer max_tokens, and nothing huge.
bool Valid(const t::CapturedRequest& request) {
  const json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return false;
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty() ||
      !body["messages"][0].is_object())
    return false;
  return body.contains("max_tokens") && body["max_tokens"].is_number_integer() &&
         body["max_tokens"].get<std::int64_t>() > 0 &&
         body["max_tokens"].get<std::int64_t>() < 100000;
}

TEST(ProbeApiTest, CompatibilityDisqualifiesAServerThatAnswersAnything) {
  t::ScriptedServer server(Engine([](const t::CapturedRequest&) { return SameAnswer(); }));
  const ProbeRunResult run = RunProbe(server.url(), "compatibility", "compat_sloppy");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 3) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "fail");
  const std::set<std::string> codes = FindingCodes(run.probe);
  // A prompt of 1,256 words over a 1,000-token context, answered with prompt_tokens 5.
  EXPECT_TRUE(codes.count("compatibility.over_context_truncated")) << run.probe.dump(2);
  EXPECT_TRUE(codes.count("compatibility.unknown_model_served"));
  // A JSON body where SSE was asked for.
  EXPECT_TRUE(codes.count("compatibility.chat_streaming_failed"));
  EXPECT_TRUE(codes.count("compatibility.stream_usage_failed"));
  // Five tokens for ignore_eos + min_tokens 24.
  EXPECT_TRUE(codes.count("compatibility.fixed_length_failed"));
  // The same text for `stop` of one of its words.
  EXPECT_TRUE(codes.count("compatibility.stop_ignored"));
  EXPECT_EQ(CheckStatus(run.probe, "determinism"), "pass");
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, BadInputAnswered500IsAWarning) {
  t::ScriptedServer server(Engine([](const t::CapturedRequest& request) -> t::Script {
    if (Valid(request)) return SameAnswer();
    return {t::Send(t::FullResponse(500, R"({"error":{"message":"internal error"}})"))};
  }));
  const ProbeRunResult run = RunProbe(server.url(), "bad_input", "bad_input_500");
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 0) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "warn") << run.probe.dump(2);
  EXPECT_TRUE(FindingCodes(run.probe).count("bad_input.server_error"));
  EXPECT_EQ(CheckStatus(run.probe, "malformed_json"), "fail");
  EXPECT_EQ(CheckStatus(run.probe, "unknown_fields"), "pass");  // served: either answer passes
  std::filesystem::remove_all(run.out);
}

TEST(ProbeApiTest, BadInputThatIsNeverAnsweredIsAHang) {
  t::ServerOptions options;
  options.hang_limit = 60s;
  // Only the first case (malformed JSON) hangs, so the test takes one case deadline (3 s).
  t::ScriptedServer server(
      Engine([](const t::CapturedRequest& request) -> t::Script {
        if (request.body.find("\"hi\"}") != std::string::npos &&
            json::parse(request.body, nullptr, false).is_discarded())
          return {t::Hang()};
        if (Valid(request)) return SameAnswer();
        return {t::Send(t::FullResponse(400, R"({"error":{"message":"bad request"}})"))};
      }),
      options);
  const ProbeRunResult run =
      RunProbe(server.url(), "bad_input", "bad_input_hang", {"--answer-within", "3s"});
  ASSERT_FALSE(run.probe.is_null()) << run.finished.output;
  EXPECT_EQ(run.finished.exit_code, 3) << run.finished.output;
  EXPECT_EQ(run.probe["verdict"], "fail");
  EXPECT_TRUE(FindingCodes(run.probe).count("bad_input.hang")) << run.probe.dump(2);
  // The server read the request whole and held it: the message says so, since that is the
  // engine's doing and not an upload bakeoff could not finish.
  for (const json& f : run.probe["findings"]) {
    if (f["code"] == "bad_input.hang") {
      EXPECT_NE(f["message"].get<std::string>().find("so the server held it"), std::string::npos) << f;
    }
  }
  EXPECT_EQ(CheckStatus(run.probe, "malformed_json"), "fail");
  std::filesystem::remove_all(run.out);
}

}  // namespace
}  // namespace bakeoff
