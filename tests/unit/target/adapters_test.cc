// The engine adapters against hand-written wire fixtures (tests/testdata/engines/): one
// conformance suite over every adapter (its fixture is detected as that engine with its version,
// its readiness route answers 200, its metric mapping finds exactly the signals the reference's
// table 10.2 says the engine has), the generic fallback, and detection's bounds.
#include "target/adapters.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "support/engine_fixture.h"
#include "support/scripted_server.h"
#include "target/detection.h"
#include "target/metric_names.h"

namespace bakeoff::target {
namespace {

using namespace std::chrono_literals;
using S = Signal;
namespace t = testing;

// What each engine exposes, written from engine-interfaces.md table 10.2 (not from adapters.cc).
const std::set<Signal> kAll = {
    S::kTtft,         S::kInterTokenLatency, S::kE2eLatency, S::kQueueTime,
    S::kRunning,      S::kWaiting,           S::kKvUsage,    S::kPrefixCacheHits,
    S::kPromptTokens, S::kGenerationTokens,  S::kPreemptions};

struct EngineCase {
  std::string fixture;  // folder under tests/testdata/engines
  std::string adapter;  // the adapter it must be detected as
  std::string version;  // the version detection must read ("" = none published)
  std::set<Signal> signals;
};

std::set<Signal> AllBut(std::set<Signal> except) {
  std::set<Signal> out;
  for (Signal s : kAll)
    if (!except.count(s)) out.insert(s);
  return out;
}

std::vector<EngineCase> Cases() {
  return {
      {"vllm", "vllm", "0.11.0", kAll},
      {"sglang", "sglang", "0.4.6.post1", kAll},
      {"trtllm", "trtllm", "1.2.0rc1", AllBut({S::kPreemptions})},
      {"triton",
       "triton",
       "",
       {S::kTtft, S::kE2eLatency, S::kQueueTime, S::kRunning, S::kWaiting, S::kKvUsage}},
      {"triton-core", "triton", "2.73.0dev", {}},
      {"llama.cpp",
       "llama.cpp",
       "b4748-c392e5094",
       {S::kRunning, S::kWaiting, S::kKvUsage, S::kPromptTokens, S::kGenerationTokens}},
      {"ollama", "ollama", "0.12.3", {}},
      {"tgi",
       "tgi",
       "3.3.6-dev0",
       {S::kInterTokenLatency, S::kE2eLatency, S::kQueueTime, S::kRunning, S::kWaiting,
        S::kPromptTokens, S::kGenerationTokens}},
      {"lmdeploy", "lmdeploy", "", AllBut({S::kPreemptions})},
      {"kserve", "kserve", "0.16.0", {}},
  };
}

std::string Body(const std::filesystem::path& file) {
  const std::string raw = t::EngineFixtureResponse(file);
  const std::size_t split = raw.find("\r\n\r\n");
  return split == std::string::npos ? std::string() : raw.substr(split + 4);
}

const char* SignalName(Signal signal) {
  for (const SignalInfo& info : CanonicalSignals())
    if (info.signal == signal) return info.name.data();
  return "?";
}

Detection Detect(const std::string& url) {
  Result<net::Endpoint> endpoint = net::ParseEndpoint(url);
  EXPECT_TRUE(endpoint.ok());
  Result<Detection> detection = DetectEngine(endpoint.value());
  EXPECT_TRUE(detection.ok()) << (detection.ok() ? "" : detection.error().message);
  return detection.ok() ? detection.value() : Detection{};
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "\n  " + line;
  return out;
}

TEST(AdapterConformanceTest, EveryFixtureIsDetectedAsItsEngineWithItsVersion) {
  for (const EngineCase& c : Cases()) {
    SCOPED_TRACE(c.fixture);
    ASSERT_TRUE(std::filesystem::is_directory(t::EngineFixtureDir(c.fixture)));
    t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir(c.fixture)));
    const Detection d = Detect(server.url());
    ASSERT_NE(d.adapter, nullptr);
    EXPECT_EQ(d.adapter->name, c.adapter) << Lines(d.evidence) << Lines(d.warnings);
    EXPECT_EQ(d.version, c.version);
    EXPECT_FALSE(d.emulated);
    EXPECT_TRUE(d.confidence == "high" || d.confidence == "medium")
        << d.confidence << " score " << d.score << Lines(d.evidence);
    // Every point is explained by an evidence line.
    int explained = 0;
    for (const std::string& line : d.evidence) explained += std::stoi(line.substr(1));
    EXPECT_EQ(explained, d.score);
    if (c.version.empty()) {
      EXPECT_FALSE(d.warnings.empty()) << "an unknown version is said";
    }
  }
}

TEST(AdapterConformanceTest, EveryEngineHasAFixtureWhoseReadinessRouteAnswers200) {
  std::set<std::string> covered;
  for (const EngineCase& c : Cases()) covered.insert(c.adapter);
  for (const EngineAdapter& adapter : AllAdapters()) {
    SCOPED_TRACE(std::string(adapter.name));
    ASSERT_FALSE(adapter.health.empty());
    if (&adapter == &GenericOpenAiAdapter()) continue;
    EXPECT_TRUE(covered.count(std::string(adapter.name))) << "no fixture detected as it";
    const std::string raw =
        t::EngineFixtureResponse(t::EngineFixtureDir(std::string(adapter.name)) /
                                 t::EngineFixtureFile(std::string(adapter.ReadinessRoute().path)));
    EXPECT_TRUE(raw.starts_with("HTTP/1.1 200")) << adapter.ReadinessRoute().path;
  }
}

TEST(AdapterConformanceTest, MetricMappingFindsExactlyTheSignalsTheEngineHas) {
  for (const EngineCase& c : Cases()) {
    SCOPED_TRACE(c.fixture);
    const EngineAdapter* adapter = FindAdapter(c.adapter);
    ASSERT_NE(adapter, nullptr);
    const std::filesystem::path dir = t::EngineFixtureDir(c.fixture);
    // No metrics page in these fixtures: Triton core's is on :8002 (the triton fixture has it),
    // KServe's engine signals are its backend's.
    if (c.fixture == "triton-core" || c.fixture == "kserve") {
      EXPECT_TRUE(c.signals.empty());
      continue;
    }
    if (adapter->metrics_path.empty()) {  // Ollama: no Prometheus page at all
      EXPECT_TRUE(adapter->metrics.empty());
      EXPECT_TRUE(c.signals.empty());
      continue;
    }
    const std::string body = Body(dir / t::EngineFixtureFile(std::string(adapter->metrics_path)));
    Result<MetricsPage> page = ParsePrometheusText(body, {.strict = true});
    ASSERT_TRUE(page.ok()) << page.error().message;
    for (Signal signal : kAll) {
      const SignalMetric* metric = FindAdapterSignal(*adapter, *page, signal);
      EXPECT_EQ(metric != nullptr, c.signals.count(signal) == 1) << SignalName(signal);
      // The engine-independent view (qualify's observability probe) agrees: no other engine's
      // name gives a signal this engine lacks.
      bool any = false;
      for (const SignalInfo& info : CanonicalSignals()) {
        if (info.signal != signal) continue;
        for (const MetricFamilyName& family : info.families) {
          any = any || SignalValue(*page, SignalMetric{signal, family.family, family.kind, "", ""});
        }
      }
      EXPECT_EQ(any, c.signals.count(signal) == 1) << SignalName(signal) << " (any engine's name)";
    }
  }
}

TEST(AdapterConformanceTest, SelectorPicksOneSeries) {
  const EngineAdapter* triton = FindAdapter("triton");
  ASSERT_NE(triton, nullptr);
  Result<MetricsPage> page =
      ParsePrometheusText(Body(t::EngineFixtureDir("triton") / "metrics.http"), {.strict = true});
  ASSERT_TRUE(page.ok());
  const SignalMetric* running = FindAdapterSignal(*triton, *page, S::kRunning);
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(SignalValue(*page, *running), 1.0);  // active only, not max (64) + scheduled + ...
  const SignalMetric* kv = FindAdapterSignal(*triton, *page, S::kKvUsage);
  ASSERT_NE(kv, nullptr);
  EXPECT_DOUBLE_EQ(*SignalValue(*page, *kv), 0.0161);
  EXPECT_EQ(kv->unit, "fraction");
}

TEST(AdapterTest, CanonicalSignalsAreBuiltFromTheAdapters) {
  const std::vector<SignalInfo>& signals = CanonicalSignals();
  ASSERT_EQ(signals.size(), kAll.size());
  EXPECT_EQ(signals.front().name, "ttft");
  ASSERT_FALSE(signals.front().families.empty());
  EXPECT_EQ(signals.front().families.front().engine, "vLLM");
  EXPECT_EQ(signals.front().families.front().family, "vllm:time_to_first_token_seconds");
  std::size_t mapped = 0;
  for (const EngineAdapter& adapter : AllAdapters()) mapped += adapter.metrics.size();
  std::size_t gathered = 0;
  for (const SignalInfo& info : signals) gathered += info.families.size();
  EXPECT_EQ(gathered, mapped);
}

TEST(AdapterTest, NamesAliasesAndVerifiedStatus) {
  EXPECT_EQ(AllAdapters().size(), 10u);
  EXPECT_EQ(FindAdapter("vLLM")->name, "vllm");
  EXPECT_EQ(FindAdapter("trtllm-serve")->name, "trtllm");
  EXPECT_EQ(FindAdapter("llamacpp")->name, "llama.cpp");
  EXPECT_EQ(FindAdapter("generic")->name, "generic-openai");
  EXPECT_EQ(FindAdapter("no-such-engine"), nullptr);
  EXPECT_EQ(GenericOpenAiAdapter().name, "generic-openai");
  for (const EngineAdapter& adapter : AllAdapters()) {
    SCOPED_TRACE(std::string(adapter.name));
    // Only llama.cpp was run live (docs/engines/llama.cpp.md).
    EXPECT_EQ(adapter.verified == Verified::kLive, adapter.name == "llama.cpp");
    EXPECT_EQ(adapter.verified == Verified::kLive, !adapter.verified_note.empty());
    for (const LogPhase& phase : adapter.cold_start)
      EXPECT_NO_THROW(std::regex(phase.pattern.data()));
    // Forcing a length needs ignore_eos at least.
    if (adapter.request.forced_length) {
      EXPECT_FALSE(adapter.request.ignore_eos.empty());
    }
  }
  // Table 10.8: TGI and Ollama have neither field; llama.cpp has ignore_eos, which fixed the
  // length live; KServe depends on its backend.
  EXPECT_FALSE(FindAdapter("tgi")->request.forced_length);
  EXPECT_FALSE(FindAdapter("ollama")->request.forced_length);
  EXPECT_TRUE(FindAdapter("llama.cpp")->request.forced_length);
  EXPECT_FALSE(FindAdapter("kserve")->request.forced_length);
  EXPECT_EQ(FindAdapter("lmdeploy")->request.min_tokens, "min_new_tokens");
  EXPECT_TRUE(FindAdapter("tgi")->request.ignore_eos.empty());
  EXPECT_TRUE(FindAdapter("ollama")->request.ignore_eos.empty());
  EXPECT_EQ(FindAdapter("trtllm")->metrics_path, "/prometheus/metrics");
  EXPECT_EQ(FindAdapter("triton")->metrics_port, "8002");
}

TEST(AdapterTest, ReadVersionNeedsTheEngineShape) {
  const VersionSource tgi{"/info", VersionRead::kJsonField, "version", {"model_id"}, ""};
  EXPECT_EQ(ReadVersion(tgi, R"({"model_id":"m","version":"3.0"})"), "3.0");
  EXPECT_EQ(ReadVersion(tgi, R"({"version":"3.0"})"), std::nullopt);
  EXPECT_EQ(ReadVersion(tgi, R"({"model_id":"m","version":3})"), std::nullopt);
  EXPECT_EQ(ReadVersion(tgi, "not json"), std::nullopt);
  const VersionSource v2{"/v2", VersionRead::kJsonField, "version", {"extensions"}, "triton"};
  EXPECT_EQ(ReadVersion(v2, R"({"name":"triton","version":"2.1","extensions":[]})"), "2.1");
  EXPECT_EQ(ReadVersion(v2, R"({"name":"kserve","version":"0.1","extensions":[]})"), std::nullopt);
}

TEST(DetectionTest, UnknownServerFallsBackToGenericWithAWarning) {
  t::ScriptedServer server(t::EngineFixtureResponder(t::EngineFixtureDir("generic-openai")));
  const Detection d = Detect(server.url());
  ASSERT_NE(d.adapter, nullptr);
  EXPECT_EQ(d.adapter, &GenericOpenAiAdapter());
  EXPECT_EQ(d.confidence, "none");
  ASSERT_FALSE(d.warnings.empty());
  EXPECT_NE(d.warnings.front().find("generic-openai"), std::string::npos);
  EXPECT_NE(DetectionJson(d).find("\"adapter\": \"generic-openai\""), std::string::npos);
}

TEST(DetectionTest, AlikeEnginesAreATieWithAWarning) {
  // A bare {"version"} at /version and nothing else: vLLM and TensorRT-LLM both answer so.
  t::ScriptedServer server([](const t::CapturedRequest& r) -> t::Script {
    if (r.target == "/version") return {t::Send(t::FullResponse(200, R"({"version":"1.0"})"))};
    return {t::Send(t::FullResponse(404, "Not Found", "text/plain"))};
  });
  const Detection d = Detect(server.url());
  EXPECT_EQ(d.adapter, &GenericOpenAiAdapter()) << "20 points each is not enough to name one";
  ASSERT_EQ(d.scores.size(), 2u);
  EXPECT_EQ(d.scores[0].score, d.scores[1].score);
}

TEST(DetectionTest, NothingListeningIsAnError) {
  std::uint16_t port = 0;
  {
    t::ScriptedServer server(t::Script{});
    port = server.port();
  }
  Result<net::Endpoint> endpoint = net::ParseEndpoint("http://127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(endpoint.ok());
  Result<Detection> d = DetectEngine(endpoint.value());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::kUnavailable);
}

TEST(DetectionTest, EveryRequestIsBounded) {
  t::ScriptedServer server(t::Script{t::Hang()});
  Result<net::Endpoint> endpoint = net::ParseEndpoint(server.url());
  ASSERT_TRUE(endpoint.ok());
  DetectOptions options;
  options.per_request = 100ms;
  options.budget = 500ms;
  const auto start = std::chrono::steady_clock::now();
  Result<Detection> d = DetectEngine(endpoint.value(), options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->adapter, &GenericOpenAiAdapter());
  EXPECT_LT(took, 3s);
}

}  // namespace
}  // namespace bakeoff::target
