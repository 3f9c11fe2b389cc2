// Tests for emulate/server.h over loopback (127.0.0.1 only, every wait bounded).
#include "emulate/server.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "emulate/tokenizer.h"
#include "test_http_client.h"
#include "support/timing.h"

namespace bakeoff::emulate {
namespace {

using nlohmann::json;
using testing::Fetch;
using testing::FormatRequest;
using testing::HttpResponse;
using testing::SseData;
using testing::StartOrDie;
using testing::TestConnection;
using testing::WaitFor;
using testing::ChatBody;
using testing::FastConfig;

// Token events (chat content deltas) among raw, still-framed stream bytes.
std::size_t CountContentEvents(const std::string& raw) {
  std::size_t count = 0;
  for (std::size_t at = raw.find(R"("delta":{"content":")"); at != std::string::npos;
       at = raw.find(R"("delta":{"content":")", at + 1)) {
    ++count;
  }
  return count;
}

void ExpectApiError(const HttpResponse& response, int status) {
  EXPECT_EQ(response.status, status) << response.raw;
  EXPECT_EQ(response.headers.count("x-bakeoff-emulated"), 1u);
  json body = json::parse(response.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << response.body;
  ASSERT_TRUE(body["error"].is_object()) << response.body;
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"]["type"].is_string());
  EXPECT_TRUE(body["error"].contains("param"));
  EXPECT_EQ(body["error"]["code"], status);
}

TEST(EmulatorServerTest, StartsOnAnEphemeralPortAndStops) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  EXPECT_NE(server->port(), 0);
  server->Stop();
  server->Stop();  // idempotent
}

// The server's io_uring ring is made on its I/O thread (net/socket_batch.h). Made on the thread
// that starts the server, the kernel would interrupt that thread when the ring is torn down, and
// a blocking receive with a timeout there would fail with EINTR instead of waiting it out.
TEST(EmulatorServerTest, StoppingDoesNotInterruptTheStartingThreadsBlockingCalls) {
  for (int round = 0; round < 3; ++round) {
    auto server = StartOrDie(FastConfig());
    ASSERT_TRUE(server);
    server->Stop();
    server.reset();
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    const timeval wait{0, 300'000};
    ::setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char byte = 0;
    const ssize_t got = ::recv(fds[0], &byte, 1, 0);
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    EXPECT_EQ(got, -1);
    EXPECT_TRUE(error == EAGAIN || error == EWOULDBLOCK) << "round " << round << ": " << std::strerror(error);
  }
}

TEST(EmulatorServerTest, RejectsInvalidConfigAndBusyPort) {
  EmulatorConfig config = FastConfig();
  config.engine.max_num_seqs = 0;
  auto bad = EmulatorServer::Start(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidInput);
  EmulatorConfig no_writer = FastConfig();
  no_writer.write_threads = 0;
  auto unwritten = EmulatorServer::Start(no_writer);
  ASSERT_FALSE(unwritten.ok());
  EXPECT_NE(unwritten.error().message.find("write_threads"), std::string::npos);
  auto first = StartOrDie(FastConfig());
  ASSERT_TRUE(first);
  EmulatorConfig same = FastConfig();
  same.port = first->port();
  auto busy = EmulatorServer::Start(same);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, ErrorCode::kIo);
}

// Collects the server's start-up log lines (written by its I/O thread).
class LogLines {
 public:
  std::function<void(std::string_view)> Sink() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(line);
    };
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

double LoggedSeconds(const std::string& line) { return std::stod(line.substr(line.rfind("t=") + 2)); }

TEST(EmulatorServerTest, StagedStartupLogsEachStageAndAnswers503UntilReady) {
  LogLines log;
  EmulatorConfig config = FastConfig();
  config.startup.download = std::chrono::milliseconds(100);
  config.startup.load = std::chrono::milliseconds(100);
  config.startup.warmup = std::chrono::milliseconds(100);  // compile: 0, not logged
  config.log = log.Sink();
  const auto start = std::chrono::steady_clock::now();
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  HttpResponse loading = Fetch(server->port(), "GET", "/health");
  EXPECT_EQ(loading.status, 503);
  EXPECT_EQ(loading.headers["x-bakeoff-emulated"], "true");
  ExpectApiError(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, false, false)), 503);
  HttpResponse metrics = Fetch(server->port(), "GET", "/metrics");  // available during start-up
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("bakeoff_emulated 1\n"), std::string::npos);
  ASSERT_TRUE(WaitFor([&] { return Fetch(server->port(), "GET", "/health").status == 200; }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_TRUE(server->stats().ready);
  std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 4u);
  const std::regex stage(R"(bakeoff emulate: stage=(download|load|compile|warmup) state=start t=[0-9]+\.[0-9]{3})");
  const std::regex ready(R"(bakeoff emulate: ready t=[0-9]+\.[0-9]{3})");
  EXPECT_EQ(lines[0].rfind("bakeoff emulate: stage=download state=start t=", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("bakeoff emulate: stage=load state=start t=", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("bakeoff emulate: stage=warmup state=start t=", 0), 0u) << lines[2];
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::regex_match(lines[i], stage)) << lines[i];
  EXPECT_TRUE(std::regex_match(lines[3], ready)) << lines[3];
  // Each stage starts no earlier than its planned offset (timers never fire early).
  EXPECT_GE(LoggedSeconds(lines[1]), 0.1);
  EXPECT_GE(LoggedSeconds(lines[2]), 0.2);
  EXPECT_GE(LoggedSeconds(lines[3]), 0.3);
  ExpectApiError(Fetch(server->port(), "POST", "/v1/chat/completions", R"({"messages":1})"), 400);
}

TEST(EmulatorServerTest, WithoutStagesItIsReadyAtOnce) {
  LogLines log;
  EmulatorConfig config = FastConfig();
  config.log = log.Sink();
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  EXPECT_EQ(Fetch(server->port(), "GET", "/health").status, 200);
  ASSERT_TRUE(WaitFor([&] { return !log.lines().empty(); }));
  std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("bakeoff emulate: ready t=0.", 0), 0u) << lines[0];
}

TEST(EmulatorServerTest, ModelsListsTheServedModel) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  HttpResponse response = Fetch(server->port(), "GET", "/v1/models");
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["x-bakeoff-emulated"], "true");
  json body = json::parse(response.body);
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "emulated-model");
  EXPECT_EQ(body["data"][0]["owned_by"], "bakeoff-emulated");
  EXPECT_EQ(body["data"][0]["max_model_len"], 4096);
}

// Checks a chat stream: role chunk, n content chunks (last with finish_reason), usage, [DONE].
void ExpectChatStream(const HttpResponse& response, int n, int prompt_tokens, bool usage) {
  ASSERT_EQ(response.status, 200) << response.raw;
  EXPECT_EQ(response.headers.at("x-bakeoff-emulated"), "true");
  EXPECT_EQ(response.headers.at("transfer-encoding"), "chunked");
  EXPECT_EQ(response.headers.at("content-type").rfind("text/event-stream", 0), 0u);
  std::vector<std::string> events = SseData(response.body);
  ASSERT_EQ(events.size(), static_cast<std::size_t>(1 + n + (usage ? 1 : 0) + 1)) << response.body;
  json role = json::parse(events[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(role["choices"][0]["delta"]["content"], "");
  std::string text;
  for (int i = 0; i < n; ++i) {
    json chunk = json::parse(events[1 + i]);
    EXPECT_EQ(chunk["id"], role["id"]);
    text += chunk["choices"][0]["delta"]["content"].get<std::string>();
    if (i + 1 < n) {
      EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
    } else {
      EXPECT_EQ(chunk["choices"][0]["finish_reason"], "length");
    }
  }
  EXPECT_EQ(CountTokens(text), static_cast<std::size_t>(n));
  if (usage) {
    json last = json::parse(events[1 + n]);
    EXPECT_TRUE(last["choices"].is_array() && last["choices"].empty());
    EXPECT_EQ(last["usage"]["prompt_tokens"], prompt_tokens);
    EXPECT_EQ(last["usage"]["completion_tokens"], n);
    EXPECT_EQ(last["usage"]["total_tokens"], prompt_tokens + n);
  }
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST(EmulatorServerTest, StreamingChatHasVllmShape) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  ExpectChatStream(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(5, true, true)), 5,
                   3, true);
  ExpectChatStream(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(3, true, false)),
                   3, 3, false);
}

TEST(EmulatorServerTest, StreamingCompletions) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  HttpResponse response = Fetch(server->port(), "POST", "/v1/completions",
                                R"({"model":"emulated-model","prompt":"one two three four",)"
                                R"("max_tokens":4,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(response.status, 200);
  auto events = SseData(response.body);
  ASSERT_EQ(events.size(), 6u) << response.body;
  for (int i = 0; i < 4; ++i) {
    json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["choices"][0]["text"], std::string(OutputPiece(0, i)));
  }
  EXPECT_EQ(json::parse(events[3])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[4])["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(events[5], "[DONE]");
}

TEST(EmulatorServerTest, NonStreamingReturnsWholeBodyWithUsage) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  HttpResponse response =
      Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(6, false, false));
  ASSERT_EQ(response.status, 200) << response.raw;
  EXPECT_EQ(response.headers["x-bakeoff-emulated"], "true");
  json body = json::parse(response.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(CountTokens(body["choices"][0]["message"]["content"].get<std::string>()), 6u);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
  EXPECT_EQ(body["usage"]["total_tokens"], 9);
}

TEST(EmulatorServerTest, ErrorsAreOpenAiShaped) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  const std::uint16_t port = server->port();
  ExpectApiError(Fetch(port, "POST", "/v1/chat/completions", "{not json"), 400);
  ExpectApiError(Fetch(port, "POST", "/v1/chat/completions", R"({"model":"emulated-model"})"), 400);
  ExpectApiError(Fetch(port, "POST", "/v1/chat/completions", ChatBody(0, true, false)), 400);
  ExpectApiError(Fetch(port, "POST", "/v1/chat/completions", ChatBody(5000, true, false)), 400);
  HttpResponse unknown_model = Fetch(port, "POST", "/v1/completions", R"({"model":"gpt-9","prompt":"x"})");
  ExpectApiError(unknown_model, 404);
  EXPECT_EQ(json::parse(unknown_model.body)["error"]["message"], "The model `gpt-9` does not exist.");
  ExpectApiError(Fetch(port, "GET", "/v1/nothing-here"), 404);
  ExpectApiError(Fetch(port, "GET", "/v1/completions"), 405);
}

TEST(EmulatorServerTest, TokenizeCountMatchesTheTokenizer) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  const std::string prompt = "The emulated engine counts whitespace-separated words, extraordinarily.";
  HttpResponse response = Fetch(server->port(), "POST", "/tokenize",
                                json({{"model", "emulated-model"}, {"prompt", prompt}}).dump());
  ASSERT_EQ(response.status, 200);
  json body = json::parse(response.body);
  EXPECT_EQ(body["count"], CountTokens(prompt));
  EXPECT_EQ(body["max_model_len"], 4096);
  EXPECT_EQ(body["tokens"].get<std::vector<std::uint32_t>>(), TokenIds(prompt));
}

TEST(EmulatorServerTest, KeepAliveAndPipelinedRequestsShareAConnection) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  TestConnection connection(server->port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(2, true, true), true)));
  ExpectChatStream(connection.ReadResponse(), 2, 3, true);
  ASSERT_TRUE(connection.Send(FormatRequest("GET", "/health", "", true)));
  EXPECT_EQ(connection.ReadResponse().status, 200);
  // Two requests in one send: answered in order.
  ASSERT_TRUE(connection.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(3, true, false), true) +
                              FormatRequest("GET", "/v1/models", "", false)));
  ExpectChatStream(connection.ReadResponse(), 3, 3, false);
  HttpResponse models = connection.ReadResponse();
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.headers["connection"], "close");
  EXPECT_TRUE(connection.WaitForClose());
}

TEST(EmulatorServerTest, GarbageGets400AndTheConnectionCloses) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  for (const char* garbage : {"GARBAGE\r\n\r\n", "\x01\x02\x03 / HTTP/9.9\r\n\r\n",
                              "POST /v1/completions HTTP/1.1\r\ncontent-length: zz\r\n\r\n"}) {
    TestConnection connection(server->port());
    ASSERT_TRUE(connection.Send(garbage));
    HttpResponse response = connection.ReadResponse();
    EXPECT_EQ(response.status, 400) << garbage;
    EXPECT_EQ(response.headers["x-bakeoff-emulated"], "true");
    EXPECT_TRUE(connection.WaitForClose());
  }
  // Oversized headers.
  TestConnection big(server->port());
  ASSERT_TRUE(big.Send("GET /health HTTP/1.1\r\nx-big: " + std::string(64 * 1024, 'a') + "\r\n\r\n"));
  EXPECT_EQ(big.ReadResponse().status, 431);
  // Still serving.
  EXPECT_EQ(Fetch(server->port(), "GET", "/health").status, 200);
}

TEST(EmulatorServerTest, RandomBytesNeverBreakTheServer) {
  EmulatorConfig config = FastConfig();
  config.request_timeout = std::chrono::milliseconds(200);
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  Rng rng(20240601);
  const std::string valid = FormatRequest("POST", "/v1/chat/completions", ChatBody(3, true, true), true);
  for (int i = 0; i < 200; ++i) {
    TestConnection connection(server->port(), 50);
    ASSERT_TRUE(connection.connected());
    // A prefix of a valid request, then random bytes: exercises every parser state.
    std::string bytes = valid.substr(0, rng.Below(valid.size() + 1));
    const std::size_t noise = rng.Below(300);
    for (std::size_t k = 0; k < noise; ++k) bytes += static_cast<char>(rng.Below(256));
    connection.Send(bytes);
    if (i % 2 == 0) {
      std::string sink;
      connection.ReadSome(sink);  // whatever the server answers, or a timeout
    }
  }  // every connection closes abruptly
  EXPECT_EQ(Fetch(server->port(), "GET", "/health").status, 200);
  ExpectChatStream(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, true, true)), 2,
                   3, true);
  EXPECT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server->stats().running == 0 && server->stats().waiting == 0; }));
}

TEST(EmulatorServerTest, SlowlorisClientIsDisconnected) {
  EmulatorConfig config = FastConfig();
  config.request_timeout = std::chrono::milliseconds(200);
  config.idle_timeout = std::chrono::milliseconds(300);
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  TestConnection slow(server->port(), 3000);
  ASSERT_TRUE(slow.Send("GET /health HTTP/1.1\r\nhost: x\r\n"));  // never finishes its headers
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(slow.WaitForClose());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  TestConnection idle(server->port(), 3000);  // connects and sends nothing
  EXPECT_TRUE(idle.WaitForClose());
  EXPECT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
}

TEST(EmulatorServerTest, ClientDisconnectAbortsTheSequence) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  {
    TestConnection connection(server->port());
    ASSERT_TRUE(connection.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(3000, true, false))));
    std::string got;
    while (CountContentEvents(got) < 3) {
      ASSERT_GT(connection.ReadSome(got), 0);
    }
    EXPECT_EQ(server->stats().running, 1u);
  }  // closes mid-stream
  EXPECT_TRUE(WaitFor([&] { return server->stats().running == 0 && server->stats().aborted == 1; }));
  EXPECT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
  // Counted as vLLM counts it, and its KV is free again.
  const std::string metrics = Fetch(server->port(), "GET", "/metrics").body;
  EXPECT_EQ(testing::PrometheusValue(
                metrics, R"(vllm:request_success_total{model_name="emulated-model",finished_reason="abort"})"),
            1.0);
  EXPECT_EQ(testing::PrometheusValue(metrics, R"(vllm:kv_cache_usage_perc{model_name="emulated-model"})"), 0.0);
  EXPECT_EQ(testing::PrometheusValue(metrics, R"(vllm:num_requests_running{model_name="emulated-model"})"), 0.0);
}

TEST(EmulatorServerTest, DisconnectWhileQueuedAbortsToo) {
  EmulatorConfig config = FastConfig();
  config.engine.max_num_seqs = 1;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  TestConnection running(server->port());
  ASSERT_TRUE(running.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(3000, true, false))));
  ASSERT_TRUE(WaitFor([&] { return server->stats().running == 1; }));
  {
    TestConnection queued(server->port());
    ASSERT_TRUE(queued.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(5, false, false))));
    ASSERT_TRUE(WaitFor([&] { return server->stats().waiting == 1; }));
  }  // gone while waiting
  EXPECT_TRUE(WaitFor([&] { return server->stats().waiting == 0 && server->stats().aborted == 1; }));
  EXPECT_EQ(server->stats().running, 1u);
}

std::string MetricsBody(std::uint16_t port) {
  HttpResponse response = Fetch(port, "GET", "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response.headers["x-bakeoff-emulated"], "true");
  return response.body;
}

double Metric(const std::string& body, const std::string& name, const std::string& extra = "") {
  return testing::PrometheusValue(
      body, name + "{model_name=\"emulated-model\"" + (extra.empty() ? "" : "," + extra) + "}");
}

TEST(EmulatorServerTest, MetricsCountTokensRequestsAndLatencies) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  const std::string empty = MetricsBody(server->port());
  EXPECT_EQ(Metric(empty, "vllm:time_to_first_token_seconds_count"), 0.0);
  EXPECT_NE(empty.find("# TYPE vllm:e2e_request_latency_seconds histogram\n"), std::string::npos);
  ExpectChatStream(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(5, true, true)), 5,
                   3, true);
  HttpResponse whole = Fetch(server->port(), "POST", "/v1/completions",
                             R"({"prompt":"a b c d","max_tokens":4})");
  ASSERT_EQ(whole.status, 200);
  const std::string body = MetricsBody(server->port());
  EXPECT_EQ(Metric(body, "vllm:request_success_total", R"(finished_reason="length")"), 2.0);
  EXPECT_EQ(Metric(body, "vllm:request_success_total", R"(finished_reason="stop")"), 0.0);
  EXPECT_EQ(Metric(body, "vllm:request_success_total", R"(finished_reason="abort")"), 0.0);
  EXPECT_EQ(Metric(body, "vllm:prompt_tokens_total"), 7.0);
  EXPECT_EQ(Metric(body, "vllm:generation_tokens_total"), 9.0);
  EXPECT_EQ(Metric(body, "vllm:time_to_first_token_seconds_count"), 2.0);
  EXPECT_EQ(Metric(body, "vllm:time_to_first_token_seconds_bucket", R"(le="+Inf")"), 2.0);
  EXPECT_GT(Metric(body, "vllm:time_to_first_token_seconds_sum"), 0.0);
  EXPECT_EQ(Metric(body, "vllm:inter_token_latency_seconds_count"), 4.0 + 3.0);
  EXPECT_EQ(Metric(body, "vllm:e2e_request_latency_seconds_count"), 2.0);
  EXPECT_EQ(Metric(body, "vllm:request_queue_time_seconds_count"), 2.0);
  EXPECT_EQ(Metric(body, "vllm:num_requests_running"), 0.0);
  EXPECT_EQ(Metric(body, "vllm:num_requests_waiting"), 0.0);
  EXPECT_EQ(Metric(body, "vllm:num_preemptions_total"), 0.0);
  EXPECT_GE(Metric(body, "vllm:kv_cache_usage_perc"), 0.0);
  EXPECT_EQ(Metric(body, "vllm:gpu_cache_usage_perc"), Metric(body, "vllm:kv_cache_usage_perc"));
  EXPECT_GE(Metric(body, "vllm:prefix_cache_queries_total"), 0.0);
  EXPECT_GE(Metric(body, "vllm:prefix_cache_hits_total"), 0.0);
  EXPECT_EQ(testing::PrometheusValue(body, "bakeoff_emulated"), 1.0);
  EXPECT_EQ(server->stats().finished, 2u);
  // One step-lag and one wake-lag observation per engine step; tokens rendered ahead still never
  // leave before the step's planned end, so no step lag is negative.
  EXPECT_EQ(Metric(body, "bakeoff_emulate_step_lag_seconds_count"), static_cast<double>(server->stats().steps));
  EXPECT_EQ(Metric(body, "bakeoff_emulate_step_wake_lag_seconds_count"), static_cast<double>(server->stats().steps));
  EXPECT_GE(Metric(body, "bakeoff_emulate_step_lag_seconds_sum"), 0.0);
  EXPECT_GE(Metric(body, "bakeoff_emulate_step_wake_lag_seconds_sum"), 0.0);
  EXPECT_GT(server->stats().steps, 0u);
}

TEST(EmulatorServerTest, WaitingQueueLimitAnswers503) {
  EmulatorConfig config = FastConfig();
  config.engine.max_num_seqs = 1;
  config.max_waiting = 1;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  TestConnection running(server->port());
  ASSERT_TRUE(running.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(3000, true, false))));
  ASSERT_TRUE(WaitFor([&] { return server->stats().running == 1; }));
  TestConnection queued(server->port());
  ASSERT_TRUE(queued.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(2, false, false))));
  ASSERT_TRUE(WaitFor([&] { return server->stats().waiting == 1; }));
  const std::string during = MetricsBody(server->port());
  EXPECT_EQ(Metric(during, "vllm:num_requests_running"), 1.0);
  EXPECT_EQ(Metric(during, "vllm:num_requests_waiting"), 1.0);
  HttpResponse rejected = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, true, false));
  ExpectApiError(rejected, 503);
  EXPECT_EQ(json::parse(rejected.body)["error"]["message"], "The request queue is full.");
  EXPECT_EQ(rejected.headers["retry-after"], "1");  // well-behaved shedding
  EXPECT_EQ(server->stats().rejected, 1u);
  EXPECT_EQ(Metric(MetricsBody(server->port()), "bakeoff_emulate_rejected_requests_total",
                   R"(reason="queue_full")"),
            1.0);
  running.Close();  // the queued one runs now
  HttpResponse answered = queued.ReadResponse();
  EXPECT_EQ(answered.status, 200) << answered.raw;
}

TEST(EmulatorServerTest, PromptPlusMaxTokensOverTheContextIs400) {
  auto server = StartOrDie(FastConfig());  // max_model_len 4096
  ASSERT_TRUE(server);
  std::string prompt;
  for (int i = 0; i < 4000; ++i) prompt += "w ";
  auto request = [&](int max_tokens) {
    return Fetch(server->port(), "POST", "/v1/completions",
                 json({{"prompt", prompt}, {"max_tokens", max_tokens}}).dump());
  };
  HttpResponse over = request(97);  // 4000 + 97 > 4096
  ExpectApiError(over, 400);
  EXPECT_NE(json::parse(over.body)["error"]["message"].get<std::string>().find("(97 > 4096 - 4000)"),
            std::string::npos);
  EXPECT_EQ(request(96).status, 200);
  std::string huge = prompt;
  for (int i = 0; i < 96; ++i) huge += "w ";
  ExpectApiError(Fetch(server->port(), "POST", "/v1/completions",
                       json({{"prompt", huge}, {"max_tokens", 1}}).dump()),
                 400);
}

TEST(EmulatorServerTest, UsageReportsCachedPromptTokensWithPrefixCaching) {
  EmulatorConfig config = FastConfig();
  config.engine.kv.prefix_caching = PrefixCaching::kHashedBlocks;
  config.engine.kv.block_tokens = 16;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  std::string content;
  for (int i = 0; i < 64; ++i) content += "w" + std::to_string(i) + " ";
  HttpResponse first = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, false, false, content));
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(json::parse(first.body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  HttpResponse second = Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(2, true, true, content));
  ASSERT_EQ(second.status, 200) << second.raw;
  std::vector<std::string> events = SseData(second.body);
  ASSERT_GE(events.size(), 2u);
  json usage = json::parse(events[events.size() - 2])["usage"];
  EXPECT_EQ(usage["prompt_tokens"], 64);
  // Whole 16-token blocks, never the whole prompt: 3 of the 4 blocks.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 48);
  const std::string metrics = MetricsBody(server->port());
  EXPECT_EQ(Metric(metrics, "vllm:prefix_cache_queries_total"), 128.0);
  EXPECT_EQ(Metric(metrics, "vllm:prefix_cache_hits_total"), 48.0);
  // Without prefix caching there is no prompt_tokens_details (vLLM's shape).
  auto plain = StartOrDie(FastConfig());
  ASSERT_TRUE(plain);
  HttpResponse none = Fetch(plain->port(), "POST", "/v1/chat/completions", ChatBody(2, false, false, content));
  EXPECT_FALSE(json::parse(none.body)["usage"].contains("prompt_tokens_details"));
}

TEST(EmulatorServerTimingTest, ModelledTimingFollowsTheCostModel) {
  BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS();
  EmulatorConfig config = FastConfig();
  config.engine.cost = CostModel{20.0, 0.1, 0.0, 0.0};  // prefill of 100 tokens: 30 ms; decode: 20 ms
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  std::string content;
  for (int i = 0; i < 100; ++i) content += "word ";
  const int n = 8;
  TestConnection connection(server->port());
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(connection.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(n, true, false, content))));
  std::string got;
  std::vector<std::chrono::steady_clock::time_point> token_times;
  while (token_times.size() < static_cast<std::size_t>(n)) {
    ASSERT_GT(connection.ReadSome(got), 0);
    const auto now = std::chrono::steady_clock::now();
    while (token_times.size() < CountContentEvents(got)) token_times.push_back(now);
  }
  const SingleRequestTiming expected = ExpectedSingleRequest(config.engine, 100, n);
  const double ttft_ms = ToMillis(token_times.front() - sent);
  const double tpot_ms = ToMillis(token_times.back() - token_times.front()) / (n - 1);
  EXPECT_GE(ttft_ms, ToMillis(expected.ttft) * 0.99);
  EXPECT_LE(ttft_ms, ToMillis(expected.ttft) * 1.3);
  EXPECT_GE(tpot_ms, ToMillis(expected.tpot) * 0.95);
  EXPECT_LE(tpot_ms, ToMillis(expected.tpot) * 1.1);
}

TEST(EmulatorServerTest, InstantModeStreamsEveryTokenAsItsOwnEvent) {
  EmulatorConfig config = FastConfig();
  config.instant = true;
  config.engine.cost = CostModel{};  // ignored
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  ExpectChatStream(Fetch(server->port(), "POST", "/v1/chat/completions", ChatBody(3000, true, true)),
                   3000, 3, true);
  HttpResponse whole = Fetch(server->port(), "POST", "/v1/completions",
                             R"({"prompt":"a b","max_tokens":50})");
  ASSERT_EQ(whole.status, 200);
  EXPECT_EQ(json::parse(whole.body)["usage"]["completion_tokens"], 50);
}

TEST(EmulatorServerTest, HoldsManyConcurrentStreams) {
  EmulatorConfig config = FastConfig();
  config.engine.max_num_seqs = 64;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  constexpr int kStreams = 1000;
  std::vector<std::unique_ptr<TestConnection>> connections;
  const std::string request = FormatRequest("POST", "/v1/chat/completions", ChatBody(4, true, true));
  for (int i = 0; i < kStreams; ++i) {
    connections.push_back(std::make_unique<TestConnection>(server->port()));
    ASSERT_TRUE(connections.back()->connected()) << i;
    ASSERT_TRUE(connections.back()->Send(request)) << i;
  }
  for (auto& connection : connections) ExpectChatStream(connection->ReadResponse(), 4, 3, true);
  EXPECT_GE(server->stats().requests_total, static_cast<std::uint64_t>(kStreams));
  connections.clear();
  EXPECT_TRUE(WaitFor([&] { return server->stats().connections_open == 0; }));
}

// Every stream of a step is written by three threads (WriteFanout): each still gets its whole
// stream, in order.
TEST(EmulatorServerTest, StepsWrittenByThreeThreadsReachEveryStreamInOrder) {
  EmulatorConfig config = FastConfig();
  config.engine.max_num_seqs = 128;
  config.write_threads = 3;
  auto server = StartOrDie(config);
  ASSERT_TRUE(server);
  constexpr int kStreams = 128;
  constexpr int kTokens = 40;
  std::vector<std::unique_ptr<TestConnection>> connections;
  const std::string request = FormatRequest("POST", "/v1/chat/completions", ChatBody(kTokens, true, true));
  for (int i = 0; i < kStreams; ++i) {
    connections.push_back(std::make_unique<TestConnection>(server->port()));
    ASSERT_TRUE(connections.back()->connected()) << i;
  }
  // Sent together, so the streams share their steps (64 or more written at once).
  for (auto& connection : connections) ASSERT_TRUE(connection->Send(request));
  for (auto& connection : connections) ExpectChatStream(connection->ReadResponse(), kTokens, 3, true);
  // Most steps wrote 64 streams or more (WriteFanout::kMinConnections), so the helpers shared
  // them. Not all: on a loaded machine the 128 requests may reach the engine over several steps.
  EXPECT_GE(server->stats().steps_fanned_out, static_cast<std::uint64_t>(kTokens / 2)) << server->stats().steps;
}

TEST(EmulatorServerTest, StopEndsOpenStreams) {
  auto server = StartOrDie(FastConfig());
  ASSERT_TRUE(server);
  TestConnection connection(server->port());
  ASSERT_TRUE(connection.Send(FormatRequest("POST", "/v1/chat/completions", ChatBody(3000, true, false))));
  std::string got;
  ASSERT_GT(connection.ReadSome(got), 0);
  server->Stop();
  EXPECT_TRUE(connection.WaitForClose());
}

}  // namespace
}  // namespace bakeoff::emulate
