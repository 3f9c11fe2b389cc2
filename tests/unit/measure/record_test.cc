#include "measure/record.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace bakeoff::measure {
namespace {

using std::chrono::milliseconds;

TEST(RecordTest, JsonLineRoundTripsInstantsRelativeToT0) {
  const MonoTime t0{std::chrono::seconds(50)};
  RequestRecord r;
  r.id = 7;
  r.step = 1;
  r.intended_send = t0 + milliseconds(10);
  r.send_start = t0 + milliseconds(11);
  r.first_token = t0 + milliseconds(100);
  r.token_events = {{t0 + milliseconds(100), 1, false, true}, {t0 + milliseconds(125), 1, false, true}};
  r.counted_tokens = 2;
  r.finished = t0 + milliseconds(130);
  r.outcome = Outcome::kStreamError;
  r.error = "request #7: \"quoted\"\nand a newline";
  const std::string line = RecordToJsonLine(r, t0);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["id"], 7);
  EXPECT_EQ(j["outcome"], "stream_error");
  EXPECT_EQ(j["intended_send_ns"], 10'000'000);
  EXPECT_EQ(j["send_start_ns"], 11'000'000);
  EXPECT_FALSE(j.contains("headers_ns"));  // did not happen: absent, not zero
  EXPECT_EQ(j["token_event_ns"], nlohmann::json::array({0, 25'000'000}));
  EXPECT_FALSE(j.contains("token_event_tokens"));
  EXPECT_EQ(j["error"], r.error);
  EXPECT_EQ(j["output_tokens"], 2);
  EXPECT_TRUE(j["output_tokens_estimated"].get<bool>());
  EXPECT_FALSE(j.contains("stale_retry_ns"));  // no retry: neither field
  EXPECT_FALSE(j.contains("stale_retry_reason"));
}

TEST(RecordTest, StaleRetryIsWrittenOnlyWhenItHappened) {
  const MonoTime t0{std::chrono::seconds(50)};
  RequestRecord r;
  r.intended_send = t0;
  r.send_start = t0 + milliseconds(1);
  r.stale_retry_at = t0 + milliseconds(3);
  r.stale_retry_reason = "the server closed the kept-alive connection before responding";
  r.connected = t0 + milliseconds(4);
  r.outcome = Outcome::kOk;
  const auto j = nlohmann::json::parse(RecordToJsonLine(r, t0));
  EXPECT_EQ(j["send_start_ns"], 1'000'000);
  EXPECT_EQ(j["stale_retry_ns"], 3'000'000);
  EXPECT_EQ(j["stale_retry_reason"], r.stale_retry_reason);
  EXPECT_EQ(j["connected_ns"], 4'000'000);
  EXPECT_FALSE(j["connection_reused"].get<bool>());
  EXPECT_FALSE(j.contains("error"));
}

TEST(RecordTest, MultiTokenAndReasoningEventsKeepTheirCounts) {
  const MonoTime t0{};
  RequestRecord r;
  r.token_events = {{t0, 1, true, true}, {t0 + milliseconds(5), 3, false, false}};
  r.usage_completion_tokens = 4;
  const auto j = nlohmann::json::parse(RecordToJsonLine(r, t0));
  EXPECT_EQ(j["token_event_tokens"], nlohmann::json::array({1, 3}));
  EXPECT_EQ(j["token_event_flags"], "rA");
  EXPECT_EQ(j["output_tokens"], 4);
  EXPECT_FALSE(j["output_tokens_estimated"].get<bool>());
}

TEST(RecordTest, EveryOutcomeHasAName) {
  for (int i = 0; i < kOutcomeCount; ++i) {
    EXPECT_STRNE(OutcomeName(static_cast<Outcome>(i)), "unknown") << i;
  }
}

}  // namespace
}  // namespace bakeoff::measure
