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

// Every field the writer writes reads back: written again from another t0, the line is the same.
TEST(RecordTest, ReaderGivesBackTheRecordTheWriterWrote) {
  const MonoTime t0{std::chrono::seconds(50)};
  RequestRecord r;
  r.id = 123456789012ULL;
  r.step = 2;
  r.worker = 5;
  r.phase = Phase::kWarmup;
  r.intended_send = t0 + milliseconds(10);
  r.send_start = t0 + milliseconds(11);
  r.stale_retry_at = t0 + milliseconds(12);
  r.stale_retry_reason = "closed \"early\"";
  r.connected = t0 + milliseconds(13);
  r.request_written = t0 + milliseconds(14);
  r.headers_received = t0 + milliseconds(20);
  r.first_chunk = t0 + milliseconds(30);
  r.first_token = t0 + milliseconds(31);
  r.first_answer_token = t0 + milliseconds(40);
  r.last_token = t0 + milliseconds(40);
  r.finished = t0 + milliseconds(41);
  r.token_events = {{t0 + milliseconds(31), 3, true, true}, {t0 + milliseconds(40), 2, false, false}};
  r.connection_reused = true;
  r.invalid_utf8 = true;
  r.prompt_tokens_planned = 512;
  r.max_tokens = 64;
  r.usage_prompt_tokens = 510;
  r.usage_completion_tokens = 6;
  r.usage_cached_tokens = 256;
  r.counted_tokens = 5;
  r.http_status = 200;
  r.outcome = Outcome::kTruncated;
  r.finish_reason = "length";
  r.error = "request #123456789012: ended without [DONE]\n";
  const std::string line = RecordToJsonLine(r, t0);

  RecordLineReader reader;
  const MonoTime other{std::chrono::seconds(7)};
  Result<RequestRecord> read = reader.Read(line, other);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(RecordToJsonLine(read.value(), other), line);
  EXPECT_EQ(read->first_answer_token, other + milliseconds(40));
  ASSERT_EQ(read->token_events.size(), 2u);
  EXPECT_EQ(read->token_events[1].at, other + milliseconds(40));
  EXPECT_EQ(read->token_events[0].tokens, 3u);
  EXPECT_TRUE(read->token_events[0].reasoning);
  EXPECT_FALSE(read->token_events[1].counted);
  EXPECT_EQ(read->phase, Phase::kWarmup);
  EXPECT_EQ(read->outcome, Outcome::kTruncated);

  // A plain record (no optional field at all) reads back too.
  RequestRecord plain;
  plain.intended_send = t0;
  plain.outcome = Outcome::kConnectFailed;
  const std::string plain_line = RecordToJsonLine(plain, t0);
  Result<RequestRecord> plain_read = reader.Read(plain_line, t0);
  ASSERT_TRUE(plain_read.ok()) << plain_read.error().message;
  EXPECT_EQ(RecordToJsonLine(plain_read.value(), t0), plain_line);
  EXPECT_FALSE(plain_read->send_start.has_value());
}

TEST(RecordTest, ReaderNamesTheFieldThatIsWrong) {
  const std::string good =
      R"({"id":1,"step":0,"worker":0,"phase":"measure","outcome":"ok","http_status":200,"intended_send_ns":0,"send_start_ns":1)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"id\":1,", "not a JSON object"},
      {"[1,2]", "not a JSON object"},
      {R"({"step":0,"phase":"measure","outcome":"ok","intended_send_ns":0})", "\"id\" is missing"},
      {R"({"id":1,"phase":"measure","outcome":"ok"})", "\"intended_send_ns\" is missing"},
      {R"({"id":-1,"phase":"measure","outcome":"ok","intended_send_ns":0})", "\"id\" is not a count"},
      {R"({"id":1,"phase":"later","outcome":"ok","intended_send_ns":0})", "\"phase\" is neither"},
      {R"({"id":1,"phase":"measure","outcome":"fine","intended_send_ns":0})", "'fine' is not an outcome"},
      {R"({"id":1,"phase":"measure","outcome":"ok","intended_send_ns":"0"})", "\"intended_send_ns\" is not an integer"},
      {R"({"id":1,"phase":"measure","outcome":"ok","intended_send_ns":9000000000000000000})", "not an instant of a run"},
      {R"({"id":1,"phase":"measure","outcome":"ok","intended_send_ns":0})", "\"send_start_ns\" is missing from an ok request"},
      {R"({"id":1,"step":4294967296,"phase":"measure","outcome":"ok","intended_send_ns":0})", "\"step\" is not a count"},
      {R"({"id":1,"phase":"measure","outcome":"ok","http_status":1000,"intended_send_ns":0})", "not an HTTP status"},
      {good + R"(,"token_event_ns":[0,5]})", "\"first_token_ns\" is missing"},
      {good + R"(,"first_token_ns":9,"token_event_ns":[3,5]})", "holds 3, not an offset"},
      {good + R"(,"first_token_ns":9,"token_event_ns":[0,-5]})", "holds -5"},
      {good + R"(,"first_token_ns":9,"token_event_ns":[0,5],"token_event_tokens":[1]})", "token_event_flags"},
      {good + R"(,"first_token_ns":9,"token_event_ns":[0,5],"token_event_tokens":[1],"token_event_flags":"a"})",
       "one entry per event (2)"},
      {good + R"(,"first_token_ns":9,"token_event_ns":[0],"token_event_tokens":[1],"token_event_flags":"x"})",
       "'x', not one of"},
      {good + R"(,"connection_reused":1})", "\"connection_reused\" is not true or false"},
  };
  RecordLineReader reader;
  for (const auto& [line, expected] : cases) {
    Result<RequestRecord> read = reader.Read(line, MonoTime{});
    ASSERT_FALSE(read.ok()) << line;
    EXPECT_NE(read.error().message.find(expected), std::string::npos) << line << " -> " << read.error().message;
  }
  EXPECT_TRUE(reader.Read(good + "}", MonoTime{}).ok());
  EXPECT_TRUE(reader.Read(good + R"(,"from_a_newer_writer":[1]})", MonoTime{}).ok());
}

TEST(RecordTest, EveryOutcomeHasAName) {
  for (int i = 0; i < kOutcomeCount; ++i) {
    EXPECT_STRNE(OutcomeName(static_cast<Outcome>(i)), "unknown") << i;
  }
}

}  // namespace
}  // namespace bakeoff::measure
