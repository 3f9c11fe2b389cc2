// Tests for emulate/server.h's shutdown modes and its fault and quirk knobs, over loopback
// (127.0.0.1 only, every wait bounded; timing is only asserted as lower bounds that a slow
// machine cannot break).
#include "emulate/server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulate/tokenizer.h"
#include "test_http_client.h"

namespace bakeoff::emulate {
namespace {

using nlohmann::json;
using testing::ChatBody;
using testing::Fetch;
using testing::FormatRequest;
using testing::HttpResponse;
using testing::SseData;
using testing::StartOrDie;
using testing::TestConnection;
using testing::WaitFor;

// The servers these tests start: fast steps and an 8,192-token context.
EmulatorConfig FaultsConfig() {
  EmulatorConfig config = testing::FastConfig();
  config.engine.max_model_len = 8192;
  return config;
}

std::string ChatRequest(int max_tokens, bool stream, bool usage = false) {
  return FormatRequest("POST", "/v1/chat/completions", ChatBody(max_tokens, stream, usage));
}

// The content text of each chat chunk that has one (the role chunk's "" included).
std::vector<std::string> Contents(const std::vector<std::string>& events) {
  std::vector<std::string> contents;
  for (const std::string& event : events) {
    if (event == "[DONE]") continue;
    json chunk = json::parse(event);
    if (chunk.contains("choices") && !chunk["choices"].empty() &&
        chunk["choices"][0]["delta"].contains("content")) {
      contents.push_back(chunk["choices"][0]["delta"]["content"]);
    }
  }
  return contents;
}

double Metric(std::uint16_t port, const std::string& series) {
  return testing::PrometheusValue(Fetch(port, "GET", "/metrics").body, series);
}

bool Refused(std::uint16_t port) { return !TestConnection(port, 1000).connected(); }

// --- shutdown ---

TEST(EmulatorShutdownTest, DrainFinishesInFlightAndRefusesNewWork) {
  auto server = StartOrDie(FaultsConfig());
  ASSERT_TRUE(server);
  const std::uint16_t port = server->port();
  TestConnection keep_alive(port);  // an idle keep-alive connection, open before the drain
  ASSERT_TRUE(keep_alive.Send(FormatRequest("GET", "/health", "", true)));
  ASSERT_EQ(keep_alive.ReadResponse().status, 200);
  TestConnection prober(port);  // another connection, idle since before the drain
  ASSERT_TRUE(prober.Send(FormatRequest("GET", "/health", "", true)));
  ASSERT_EQ(prober.ReadResponse().status, 200);
  TestConnection streaming(port);
  ASSERT_TRUE(streaming.Send(ChatRequest(1500, true)));  // >= 1.5 s at 1 ms per step
  std::string head;
  ASSERT_TRUE(streaming.ReadUntil(head, R"("content":")"));
  server->BeginDrain(std::chrono::seconds(20));
  EXPECT_TRUE(WaitFor([&] { return Refused(port); }));  // no new connections
  // /health says 503 while draining.
  ASSERT_TRUE(prober.Send(FormatRequest("GET", "/health", "", true)));
  HttpResponse draining_health = prober.ReadResponse();
  EXPECT_EQ(draining_health.status, 503) << draining_health.raw;
  // A new request on a connection opened before: 503, and the connection closes.
  ASSERT_TRUE(keep_alive.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(2, true), true)));
  HttpResponse refused = keep_alive.ReadResponse();
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_EQ(refused.headers["connection"], "close");
  EXPECT_EQ(json::parse(refused.body)["error"]["code"], 503);
  // The stream in flight completes.
  std::string rest = streaming.ReadToEnd();
  const std::string all = head + rest;
  EXPECT_NE(all.find("data: [DONE]"), std::string::npos);
  EXPECT_NE(all.find(R"("finish_reason":"length")"), std::string::npos);
  auto report = server->WaitShutdown(std::chrono::seconds(10));
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->finished, 1u);
  EXPECT_EQ(report->cut, 0u);
  EXPECT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
}

TEST(EmulatorShutdownTest, DrainWithNothingInFlightCompletesAtOnce) {
  auto server = StartOrDie(FaultsConfig());
  ASSERT_TRUE(server);
  server->BeginDrain(std::chrono::seconds(30));
  auto report = server->WaitShutdown(std::chrono::seconds(5));
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->finished, 0u);
  EXPECT_EQ(report->cut, 0u);
  EXPECT_TRUE(Refused(server->port()));
}

TEST(EmulatorShutdownTest, DrainTimeoutCutsWhatIsLeft) {
  auto server = StartOrDie(FaultsConfig());
  ASSERT_TRUE(server);
  TestConnection streaming(server->port());
  ASSERT_TRUE(streaming.Send(ChatRequest(100000 / 16, true)));
  std::string got;
  ASSERT_TRUE(streaming.ReadUntil(got, R"("content":")"));
  server->BeginDrain(std::chrono::milliseconds(100));
  bool closed = false;
  got += streaming.ReadToEnd(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  auto report = server->WaitShutdown(std::chrono::seconds(10));
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->finished, 0u);
  EXPECT_EQ(report->cut, 1u);
  EXPECT_EQ(server->stats().aborted, 1u);
}

TEST(EmulatorShutdownTest, AbortAllEndsStreamsWithAnErrorEvent) {
  auto server = StartOrDie(FaultsConfig());
  ASSERT_TRUE(server);
  TestConnection streaming(server->port());
  ASSERT_TRUE(streaming.Send(ChatRequest(5000, true)));
  TestConnection whole(server->port());
  ASSERT_TRUE(whole.Send(ChatRequest(5000, false)));
  ASSERT_TRUE(WaitFor([&] { return server->stats().running == 2 && server->stats().steps > 2; }));
  server->AbortAll();
  HttpResponse stream = streaming.ReadResponse();
  ASSERT_EQ(stream.status, 200);
  std::vector<std::string> events = SseData(stream.body);
  ASSERT_FALSE(events.empty());
  json last = json::parse(events.back());
  EXPECT_EQ(last["error"]["code"], 503) << events.back();
  EXPECT_EQ(stream.body.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(streaming.WaitForClose());
  HttpResponse body = whole.ReadResponse();
  EXPECT_EQ(body.status, 503);
  EXPECT_EQ(json::parse(body.body)["error"]["code"], 503);
  auto report = server->WaitShutdown(std::chrono::seconds(10));
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->finished, 0u);
  EXPECT_EQ(report->cut, 2u);
  EXPECT_EQ(server->stats().running, 0u);
  EXPECT_TRUE(Refused(server->port()));
}

// --- faults ---

TEST(EmulatorFaultTest, CrashAfterNRequestsStopsHard) {
  std::atomic<int> crashes{0};
  EmulatorConfig config = FaultsConfig();
  config.faults.crash_after = 3;
  config.on_crash = [&crashes] { crashes.fetch_add(1); };
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  const std::uint16_t port = server->port();
  TestConnection first(port);  // request 1: a long stream, cut by the crash
  ASSERT_TRUE(first.Send(ChatRequest(100000 / 16, true)));
  std::string got;
  ASSERT_TRUE(first.ReadUntil(got, R"("content":")"));
  EXPECT_EQ(Fetch(port, "POST", "/v1/chat/completions", ChatBody(2, false)).status, 200);  // 2
  EXPECT_EQ(Fetch(port, "GET", "/health").status, 200);  // not a generation request
  HttpResponse third = Fetch(port, "POST", "/v1/chat/completions", ChatBody(2, false));
  EXPECT_EQ(third.status, 0);  // never answered
  bool closed = false;
  got += first.ReadToEnd(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(WaitFor([&] { return crashes.load() == 1; }));
  EXPECT_TRUE(server->stats().crashed);
  EXPECT_TRUE(Refused(port));
}

TEST(EmulatorFaultTest, ErrorRateFailsRequestsBeforeStreamingReproducibly) {
  EmulatorConfig config = FaultsConfig();
  config.faults.error_rate = 1.0;
  auto always = StartOrDie(config);
  ASSERT_TRUE(always);
  HttpResponse failed = Fetch(always->port(), "POST", "/v1/chat/completions", ChatBody(3, true));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.headers["content-type"], "application/json");
  json error = json::parse(failed.body)["error"];
  EXPECT_EQ(error["code"], 500);
  EXPECT_EQ(error["type"], "InternalServerError");
  EXPECT_EQ(Metric(always->port(), R"(bakeoff_emulate_injected_faults_total{model_name="emulated-model",kind="error"})"), 1.0);

  config.faults.error_rate = 0.5;
  config.faults.seed = 42;
  auto statuses = [&] {
    auto server = StartOrDie(config);
    std::vector<int> result;
    for (int i = 0; i < 40 && server; ++i) {
      result.push_back(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(1, false)).status);
    }
    return result;
  };
  std::vector<int> a = statuses();
  std::vector<int> b = statuses();
  EXPECT_EQ(a, b);  // same seed, same failures
  const auto errors = std::count(a.begin(), a.end(), 500);
  EXPECT_EQ(std::count(a.begin(), a.end(), 200) + errors, 40);
  EXPECT_GE(errors, 5);
  EXPECT_LE(errors, 35);
}

TEST(EmulatorFaultTest, StreamErrorInsideA200Stream) {
  for (bool instant : {false, true}) {
    EmulatorConfig config = FaultsConfig();
    config.instant = instant;
    config.faults.stream_error_rate = 1.0;
    auto server = StartOrDie(config);
    ASSERT_TRUE(server);
    HttpResponse response = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(10, true, true));
    ASSERT_EQ(response.status, 200) << response.raw;
    std::vector<std::string> events = SseData(response.body);
    ASSERT_GE(events.size(), 2u) << response.body;
    // Half of max_tokens, then the error event and [DONE] (vLLM's shape); no usage chunk.
    std::vector<std::string> contents = Contents(events);
    ASSERT_EQ(contents.size(), 6u) << response.body;  // role chunk + 5 tokens
    json error = json::parse(events[events.size() - 2]);
    EXPECT_EQ(error["error"]["code"], 500) << response.body;
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_EQ(response.body.find("\"usage\""), std::string::npos);
    EXPECT_TRUE(WaitFor([&] { return server->stats().aborted == 1 && server->stats().running == 0; }))
        << "instant=" << instant;
  }
}

TEST(EmulatorFaultTest, StallPausesTheStreamMidway) {
  EmulatorConfig config = FaultsConfig();
  config.faults.stall_rate = 1.0;
  config.faults.stall = std::chrono::milliseconds(300);
  for (bool instant : {false, true}) {
    config.instant = instant;
    auto server = StartOrDie(config);
    ASSERT_TRUE(server);
    const auto start = std::chrono::steady_clock::now();
    HttpResponse response = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(10, true));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ASSERT_EQ(response.status, 200);
    std::vector<std::string> events = SseData(response.body);
    EXPECT_EQ(Contents(events).size(), 11u);  // nothing lost
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_GE(elapsed, std::chrono::milliseconds(300)) << "instant=" << instant;
    EXPECT_EQ(Metric(server->port(), R"(bakeoff_emulate_injected_faults_total{model_name="emulated-model",kind="stall"})"), 1.0);
  }
}

TEST(EmulatorFaultTest, HealthLiesDuringStartup) {
  EmulatorConfig config = FaultsConfig();
  config.startup.load = std::chrono::seconds(30);
  config.faults.health_lies = true;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  EXPECT_EQ(Fetch(server->port(), "GET", "/health").status, 200);
  HttpResponse generation = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, false));
  EXPECT_EQ(generation.status, 503);
  EXPECT_FALSE(server->stats().ready);
  EXPECT_EQ(Metric(server->port(), R"(bakeoff_emulate_rejected_requests_total{model_name="emulated-model",reason="not_ready"})"), 1.0);
}

TEST(EmulatorFaultTest, NoDoneEndsStreamsWithoutTheSentinel) {
  EmulatorConfig config = FaultsConfig();
  config.faults.no_done = true;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  HttpResponse response = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(3, true, true));
  ASSERT_EQ(response.status, 200);
  std::vector<std::string> events = SseData(response.body);
  ASSERT_EQ(events.size(), 1u + 3u + 1u) << response.body;  // role, tokens, usage
  EXPECT_EQ(response.body.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(json::parse(events.back()).contains("usage"));
}

TEST(EmulatorQuirkTest, UsageAlwaysAddsTheUsageChunk) {
  EmulatorConfig config = FaultsConfig();
  auto plain = StartOrDie(config);
  ASSERT_TRUE(plain);
  HttpResponse without = Fetch(plain->port(), "POST", "/v1/chat/completions", ChatBody(2, true));
  EXPECT_EQ(without.body.find("\"usage\""), std::string::npos);  // vLLM: only when asked
  config.usage_always = true;
  auto forced = StartOrDie(config);
  ASSERT_TRUE(forced);
  HttpResponse with = Fetch(forced->port(), "POST", "/v1/chat/completions", ChatBody(2, true));
  std::vector<std::string> events = SseData(with.body);
  ASSERT_EQ(events.size(), 1u + 2u + 1u + 1u) << with.body;
  json usage = json::parse(events[3]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(EmulatorQuirkTest, SeveralTokensPerEvent) {
  for (bool instant : {false, true}) {
    EmulatorConfig config = FaultsConfig();
    config.instant = instant;
    config.tokens_per_event = 3;
    auto server = StartOrDie(config);
    ASSERT_TRUE(server);
    HttpResponse response = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(7, true, true));
    ASSERT_EQ(response.status, 200);
    std::vector<std::string> events = SseData(response.body);
    std::vector<std::string> contents = Contents(events);
    ASSERT_EQ(contents.size(), 1u + 3u) << response.body;  // role, then 3 + 3 + 1 tokens
    EXPECT_EQ(CountTokens(contents[1]), 3u);
    EXPECT_EQ(CountTokens(contents[2]), 3u);
    EXPECT_EQ(CountTokens(contents[3]), 1u);
    std::string text = contents[1] + contents[2] + contents[3];
    std::string expected;
    for (int i = 0; i < 7; ++i) expected += OutputPiece(0, i);
    EXPECT_EQ(text, expected);
    EXPECT_EQ(json::parse(events[3])["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(json::parse(events[4])["usage"]["completion_tokens"], 7);
    EXPECT_EQ(events.back(), "[DONE]");
  }
}

TEST(EmulatorQuirkTest, KeepAliveCommentsWhileQueued) {
  EmulatorConfig config = FaultsConfig();
  config.engine.max_num_seqs = 1;
  config.keepalive_comments = std::chrono::milliseconds(50);
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  TestConnection first(server->port());
  ASSERT_TRUE(first.Send(ChatRequest(400, true)));  // holds the only slot for >= 400 ms
  ASSERT_TRUE(WaitFor([&] { return server->stats().running == 1; }));
  TestConnection queued(server->port());
  ASSERT_TRUE(queued.Send(ChatRequest(2, true)));
  HttpResponse response = queued.ReadResponse();
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(response.body.rfind(": keep-alive\n\n", 0), 0u) << response.body.substr(0, 200);
  std::vector<std::string> events = SseData(response.body);  // comments are not events
  EXPECT_EQ(Contents(events).size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(first.ReadResponse().status, 200);
}

// --- probe faults ---

std::string Series(const std::string& name, const std::string& extra = "") {
  return name + "{model_name=\"emulated-model\"" + (extra.empty() ? "" : "," + extra) + "}";
}

TEST(EmulatorFaultTest, IgnoreDisconnectKeepsTheSequenceRunning) {
  EmulatorConfig config = FaultsConfig();
  config.faults.ignore_disconnect = true;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  const std::uint16_t port = server->port();
  {
    TestConnection connection(port);
    ASSERT_TRUE(connection.Send(ChatRequest(300, true)));
    std::string got;
    ASSERT_TRUE(connection.ReadUntil(got, R"("content":")"));
  }  // gone mid-stream
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
  // Still running, still generating, not counted as aborted.
  const double tokens_then = Metric(port, Series("vllm:generation_tokens_total"));
  EXPECT_EQ(Metric(port, Series("vllm:num_requests_running")), 1.0);
  EXPECT_TRUE(
      WaitFor([&] { return Metric(port, Series("vllm:generation_tokens_total")) > tokens_then; }));
  EXPECT_EQ(server->stats().aborted, 0u);
  // It runs to its end: all 300 tokens, finished "length".
  ASSERT_TRUE(WaitFor([&] { return server->stats().finished == 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(Metric(port, Series("vllm:generation_tokens_total")), 300.0);
  EXPECT_EQ(Metric(port, Series("vllm:num_requests_running")), 0.0);
  EXPECT_EQ(Metric(port, Series("vllm:request_success_total", R"(finished_reason="abort")")), 0.0);
}

TEST(EmulatorFaultTest, HealthBlocksWhileBusy) {
  EmulatorConfig config = FaultsConfig();
  config.faults.health_busy_delay = std::chrono::milliseconds(400);
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  const std::uint16_t port = server->port();
  auto timed_health = [&] {
    const auto start = std::chrono::steady_clock::now();
    const int status = Fetch(port, "GET", "/health").status;
    EXPECT_EQ(status, 200);
    return std::chrono::steady_clock::now() - start;
  };
  EXPECT_LT(timed_health(), std::chrono::milliseconds(300));  // idle: at once
  TestConnection busy(port);
  ASSERT_TRUE(busy.Send(ChatRequest(5000, true)));
  std::string got;
  ASSERT_TRUE(busy.ReadUntil(got, R"("content":")"));
  EXPECT_GE(timed_health(), std::chrono::milliseconds(400));  // busy: the whole delay
  // The engine going idle answers a waiting /health at once.
  TestConnection health(port);
  ASSERT_TRUE(health.Send(FormatRequest("GET", "/health", "")));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto closed_at = std::chrono::steady_clock::now();
  busy.Close();  // aborts the only sequence: the engine is idle
  EXPECT_EQ(health.ReadResponse().status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - closed_at, std::chrono::milliseconds(350));
}

TEST(EmulatorFaultTest, NotReadyStatusAndBody) {
  EmulatorConfig config = FaultsConfig();
  config.startup.load = std::chrono::seconds(30);
  config.not_ready_status = 200;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  HttpResponse health = Fetch(server->port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body)["status"], "loading");
  EXPECT_EQ(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, false)).status, 503);
  config.not_ready_status = 500;
  auto other = StartOrDie(config);
  ASSERT_TRUE(other);
  EXPECT_EQ(Fetch(other->port(), "GET", "/health").status, 500);
  config.not_ready_status = 99;
  EXPECT_FALSE(ValidateEmulatorConfig(config).ok());
}

TEST(EmulatorFaultTest, HealthLateSaysReadyAfterTheApiServes) {
  EmulatorConfig config = FaultsConfig();
  config.faults.health_late = std::chrono::milliseconds(600);
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  EXPECT_EQ(Fetch(server->port(), "GET", "/health").status, 503);
  EXPECT_EQ(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, false)).status, 200);
  EXPECT_TRUE(WaitFor([&] { return Fetch(server->port(), "GET", "/health").status == 200; }));
}

TEST(EmulatorFaultTest, BadInputGets500) {
  EmulatorConfig config = FaultsConfig();
  config.faults.bad_input_500 = true;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  for (const std::string& body :
       {std::string("{not json"), std::string(R"({"messages":"hi"})"),
        std::string(R"({"messages":[{"role":"user","content":"a"}],"max_tokens":"x"})")}) {
    HttpResponse response = Fetch(server->port(), "POST", "/v1/chat/completions", body);
    EXPECT_EQ(response.status, 500) << body;
    EXPECT_EQ(json::parse(response.body)["error"]["type"], "InternalServerError");
  }
  EXPECT_EQ(Fetch(server->port(), "POST", "/tokenize", "[").status, 500);
  // Unknown models are still 404, valid requests still 200.
  EXPECT_EQ(
      Fetch(server->port(), "POST", "/v1/completions", R"({"model":"x","prompt":"a"})").status,
      404);
  EXPECT_EQ(
      Fetch(server->port(), "POST", "/v1/completions", R"({"prompt":"a","max_tokens":2})").status,
      200);
}

TEST(EmulatorFaultTest, TruncatePromptsServesOverLongPrompts) {
  EmulatorConfig config = FaultsConfig();  // max_model_len 8192
  config.faults.truncate_prompts = true;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  std::string prompt;
  for (int i = 0; i < 9000; ++i) prompt += "w ";
  HttpResponse response = Fetch(server->port(), "POST", "/v1/completions",
                                json({{"prompt", prompt}, {"max_tokens", 4}}).dump());
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(json::parse(response.body)["usage"]["prompt_tokens"], 8192 - 4);
  config.faults.truncate_prompts = false;
  auto strict = StartOrDie(config);
  ASSERT_TRUE(strict);
  EXPECT_EQ(Fetch(strict->port(), "POST", "/v1/completions",
                  json({{"prompt", prompt}, {"max_tokens", 4}}).dump())
                .status,
            400);
}

TEST(EmulatorFaultTest, NoMetricsAnswers404) {
  EmulatorConfig config = FaultsConfig();
  config.no_metrics = true;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  EXPECT_EQ(Fetch(server->port(), "GET", "/metrics").status, 404);
  EXPECT_EQ(Fetch(server->port(), "GET", "/health").status, 200);
}

// An engine without pooling routes: every one of them is 404 (as for any path it does not serve),
// while generation still answers; without the flag the same requests are served.
TEST(EmulatorFaultTest, NoPoolingAnswers404OnEveryPoolingRoute) {
  const std::string embed = R"({"input":["one text","another"]})";
  const std::string rerank = R"({"query":"which","documents":["a text","b text"]})";
  for (bool no_pooling : {true, false}) {
    EmulatorConfig config = FaultsConfig();
    config.no_pooling = no_pooling;
    auto server = StartOrDie(config);
    ASSERT_TRUE(server);
    const int expected = no_pooling ? 404 : 200;
    EXPECT_EQ(Fetch(server->port(), "POST", "/v1/embeddings", embed).status, expected) << no_pooling;
    EXPECT_EQ(Fetch(server->port(), "POST", "/v1/rerank", rerank).status, expected) << no_pooling;
    EXPECT_EQ(Fetch(server->port(), "POST", "/rerank", rerank).status, expected) << no_pooling;
    EXPECT_EQ(Fetch(server->port(), "POST", "/v1/completions", R"({"prompt":"hi","max_tokens":2})").status, 200);
  }
}

std::string CompletionText(std::uint16_t port, const std::string& body) {
  HttpResponse response = Fetch(port, "POST", "/v1/completions", body);
  EXPECT_EQ(response.status, 200) << response.body;
  json doc = json::parse(response.body, nullptr, false);
  return doc.is_object() ? doc["choices"][0]["text"].get<std::string>() : "";
}

TEST(EmulatorFaultTest, NondeterministicVariesTheTextPerRequest) {
  for (bool instant : {false, true}) {
    EmulatorConfig config = FaultsConfig();
    config.instant = instant;
    auto steady = StartOrDie(config);
    config.faults.nondeterministic = true;
    auto varying = StartOrDie(config);
    ASSERT_TRUE(steady && varying);
    const std::string body = R"({"prompt":"same prompt","max_tokens":12,"seed":7,"temperature":0})";
    EXPECT_EQ(CompletionText(steady->port(), body), CompletionText(steady->port(), body));
    EXPECT_NE(CompletionText(varying->port(), body), CompletionText(varying->port(), body));
  }
}

TEST(EmulatorFaultTest, IgnoreStopOutputsPastTheStopString) {
  EmulatorConfig config = FaultsConfig();
  auto server = StartOrDie(config);
  config.faults.ignore_stop = true;
  auto ignoring = StartOrDie(config);
  ASSERT_TRUE(server && ignoring);
  const std::string plain = CompletionText(server->port(), R"({"prompt":"p","max_tokens":20})");
  const std::vector<std::string> words = [&] {
    std::vector<std::string> out;
    for (auto piece : TokenPieces(plain)) out.emplace_back(piece);
    return out;
  }();
  ASSERT_EQ(words.size(), 20u);
  const std::string stop = words[10] + " " + words[11];
  json body = {{"prompt", "p"}, {"max_tokens", 20}, {"stop", stop}};
  HttpResponse stopped = Fetch(server->port(), "POST", "/v1/completions", body.dump());
  json doc = json::parse(stopped.body);
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(doc["choices"][0]["text"].get<std::string>().find(stop), std::string::npos);
  HttpResponse ignored = Fetch(ignoring->port(), "POST", "/v1/completions", body.dump());
  json ignored_doc = json::parse(ignored.body);
  EXPECT_EQ(ignored_doc["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ignored_doc["choices"][0]["text"], plain);
}

}  // namespace
}  // namespace bakeoff::emulate
