// target::Candidate on a pooling route of the emulated server: its readiness check sends one text
// and is satisfied by a vector or a score, and a healthy server that does not serve the route
// (`emulate --no-pooling`, as an engine serving a generative model) stops the wait at once with
// the route named, rather than polling until the readiness timeout.
#include <chrono>

#include <gtest/gtest.h>

#include "emulate/server.h"
#include "target/candidate.h"

namespace bakeoff {
namespace {

using namespace std::chrono_literals;

struct Served {
  std::unique_ptr<emulate::EmulatorServer> server;
  target::Candidate candidate;
};

std::optional<Served> Serve(dialect::Api api, bool no_pooling) {
  emulate::EmulatorConfig config;
  config.port = 0;
  config.instant = true;
  config.no_pooling = no_pooling;
  auto server = emulate::EmulatorServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.error().message;
  if (!server.ok()) return std::nullopt;
  target::CandidateSpec spec;
  spec.url = "http://127.0.0.1:" + std::to_string(server.value()->port());
  spec.api = api;
  auto candidate = target::Candidate::Create(spec);
  EXPECT_TRUE(candidate.ok()) << candidate.error().message;
  if (!candidate.ok()) return std::nullopt;
  return Served{std::move(server.value()), std::move(candidate.value())};
}

TEST(CandidateRouteTest, APoolingCandidateIsReadyWhenItAnswersOneText) {
  for (dialect::Api api : {dialect::Api::kEmbeddings, dialect::Api::kRerank}) {
    SCOPED_TRACE(dialect::ApiName(api));
    std::optional<Served> served = Serve(api, false);
    ASSERT_TRUE(served);
    const target::GenerationAnswer answer = served->candidate.Generate("Hello", 1);
    EXPECT_TRUE(answer.ok) << answer.error;
    EXPECT_EQ(answer.items, 1u);
    EXPECT_GT(answer.prompt_tokens.value_or(0), 0u);
    Result<MonoTime> ready = served->candidate.WaitReady(10s);
    EXPECT_TRUE(ready.ok()) << ready.error().message;
  }
}

TEST(CandidateRouteTest, AHealthyServerWithoutTheRouteStopsTheWaitAndNamesIt) {
  for (dialect::Api api : {dialect::Api::kEmbeddings, dialect::Api::kRerank}) {
    SCOPED_TRACE(dialect::ApiName(api));
    std::optional<Served> served = Serve(api, true);
    ASSERT_TRUE(served);
    const auto start = std::chrono::steady_clock::now();
    Result<MonoTime> ready = served->candidate.WaitReady(60s);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    ASSERT_FALSE(ready.ok());
    EXPECT_EQ(ready.error().code, ErrorCode::kUnavailable);
    const std::string& message = ready.error().message;
    EXPECT_NE(message.find(std::string("POST ") + dialect::RequestPath(api, "", false) +
                           " answered HTTP 404"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("while GET /v1/models lists 'emulated-model'"), std::string::npos)
        << message;
    EXPECT_NE(message.find(std::string("does not serve the ") + dialect::ApiName(api) + " route"),
              std::string::npos)
        << message;
  }
}

TEST(CandidateRouteTest, AnUnknownModelIsNotAMissingRoute) {
  std::optional<Served> served = Serve(dialect::Api::kEmbeddings, false);
  ASSERT_TRUE(served);
  target::CandidateSpec spec = served->candidate.spec();
  spec.model = "not-served";
  auto candidate = target::Candidate::Create(spec);
  ASSERT_TRUE(candidate.ok());
  const target::GenerationAnswer answer = candidate->Generate("Hello", 1);
  EXPECT_EQ(answer.status, 404);
  EXPECT_FALSE(answer.route_missing) << answer.error;
}

}  // namespace
}  // namespace bakeoff
