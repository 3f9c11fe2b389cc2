// tests/unit/net/sse_test.cc
//
// Owns: the tests of net/sse.h: named boundary cases of the WHATWG "Interpreting an event stream"
// rules, the size limit, and grind tests that split a recorded-style stream at every byte.
#include "net/sse.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"
#include "support/test_data.h"

namespace bakeoff::net {

// Readable failure output; internal linkage so no other test file can clash with it.
static void PrintTo(const SseEvent& e, std::ostream* os) {
  *os << "{event=\"" << e.event << "\" data=\"" << e.data << "\" id=\"" << e.id << "\"";
  if (e.retry_ms) *os << " retry_ms=" << *e.retry_ms;
  for (const auto& [name, value] : e.unknown_fields) *os << " " << name << "=\"" << value << "\"";
  *os << "}";
}

namespace {

using bakeoff::testing::ReadTestData;

struct Decoded {
  std::vector<SseEvent> events;
  bool ok = true;
  std::string error;
  bool cut_mid_event = false;
  std::uint64_t comments = 0;
};

// Feeds `pieces` in order, then Finish(); stops feeding at the first error as a caller would.
Decoded DecodePieces(const std::vector<std::string_view>& pieces,
                     std::size_t max_event_bytes = SseDecoder::kDefaultMaxEventBytes) {
  SseDecoder decoder(max_event_bytes);
  Decoded result;
  for (const std::string_view piece : pieces) {
    const Status status = decoder.Feed(piece, &result.events);
    if (!status.ok()) {
      result.ok = false;
      result.error = status.error().message;
      EXPECT_EQ(status.error().code, ErrorCode::kProtocol);
      break;
    }
  }
  result.cut_mid_event = decoder.Finish();
  result.comments = decoder.comment_count();
  return result;
}

Decoded Decode(std::string_view wire,
               std::size_t max_event_bytes = SseDecoder::kDefaultMaxEventBytes) {
  return DecodePieces({wire}, max_event_bytes);
}

SseEvent DataEvent(std::string data) {
  SseEvent e;
  e.data = std::move(data);
  return e;
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  std::string result;
  std::size_t start = 0;
  for (std::size_t at; (at = s.find(from, start)) != std::string::npos; start = at + from.size()) {
    result.append(s, start, at - start).append(to);
  }
  return result.append(s, start);
}

// --- Line ends -------------------------------------------------------------------------------

TEST(SseDecoderTest, EmptyStream) {
  const Decoded d = Decode("");
  EXPECT_TRUE(d.ok);
  EXPECT_TRUE(d.events.empty());
  EXPECT_FALSE(d.cut_mid_event);
  EXPECT_EQ(d.comments, 0u);
}

TEST(SseDecoderTest, SingleEvent) {
  const Decoded d = Decode("data: hello\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("hello")});
  EXPECT_FALSE(d.cut_mid_event);
}

TEST(SseDecoderTest, CrlfLineEnds) {
  const Decoded d = Decode("data: a\r\n\r\ndata: b\r\n\r\n");
  EXPECT_EQ(d.events, (std::vector<SseEvent>{DataEvent("a"), DataEvent("b")}));
  EXPECT_FALSE(d.cut_mid_event);
}

TEST(SseDecoderTest, CrOnlyLineEnds) {
  const Decoded d = Decode("data: a\rdata: b\r\rdata: c\r\r");
  EXPECT_EQ(d.events, (std::vector<SseEvent>{DataEvent("a\nb"), DataEvent("c")}));
  EXPECT_FALSE(d.cut_mid_event);
}

TEST(SseDecoderTest, MixedLineEnds) {
  const Decoded d = Decode("data: a\ndata: b\r\ndata: c\r\n\rdata: d\r\r\n");
  EXPECT_EQ(d.events, (std::vector<SseEvent>{DataEvent("a\nb\nc"), DataEvent("d")}));
}

TEST(SseDecoderTest, LfCrIsTwoLineEnds) {
  // "\n\r" is LF then CR: the CR is a blank line and dispatches.
  const Decoded d = Decode("data: a\n\r");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a")});
}

TEST(SseDecoderTest, CrLfSplitAcrossFeeds) {
  // The LF starting the second read completes the CRLF; it is not a blank line.
  Decoded d = DecodePieces({"data: a\r", "\ndata: b\r", "\n\r", "\n"});
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a\nb")});
  EXPECT_FALSE(d.cut_mid_event);

  d = DecodePieces({"data: a\r", "\n", "\r", "\n"});
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a")});
}

TEST(SseDecoderTest, CrAtEndThenCrNextFeedDispatches) {
  const Decoded d = DecodePieces({"data: a\r", "\r"});
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a")});
}

TEST(SseDecoderTest, EmptyFeedBetweenCrAndLfKeepsTheCrlf) {
  const Decoded d = DecodePieces({"data: a\r", "", "\n", "\r\n"});
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a")});
}

TEST(SseDecoderTest, EventSplitAcrossReads) {
  const Decoded d = DecodePieces({"da", "ta: hel", "lo\n", "\n"});
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("hello")});
}

// --- Fields ----------------------------------------------------------------------------------

TEST(SseDecoderTest, NoSpaceAfterColon) {  // TGI sends `data:{...}`
  const Decoded d = Decode("data:{\"token\":{\"text\":\"hi\"}}\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("{\"token\":{\"text\":\"hi\"}}")});
}

TEST(SseDecoderTest, OnlyOneSpaceAfterColonRemoved) {
  const Decoded d = Decode("data:  two spaces\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent(" two spaces")});
}

TEST(SseDecoderTest, ColonInValueKept) {
  const Decoded d = Decode("data: {\"a\":1}\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("{\"a\":1}")});
}

TEST(SseDecoderTest, MultiLineData) {
  const Decoded d = Decode("data: first\ndata: second\ndata:\ndata: fourth\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("first\nsecond\n\nfourth")});
}

TEST(SseDecoderTest, EmptyDataLineDispatchesEmptyData) {
  const Decoded d = Decode("data:\n\ndata\n\n");
  EXPECT_EQ(d.events, (std::vector<SseEvent>{DataEvent(""), DataEvent("")}));
}

TEST(SseDecoderTest, LineWithoutColonIsFieldWithEmptyValue) {
  const Decoded d = Decode("data: x\nevent\nfoo\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].data, "x");
  EXPECT_EQ(d.events[0].event, "");
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{{"foo", ""}}));
}

TEST(SseDecoderTest, EventTypeIdAndRetry) {
  const Decoded d = Decode("event: token\nid: 42\nretry: 3000\ndata: x\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].event, "token");
  EXPECT_EQ(d.events[0].id, "42");
  EXPECT_EQ(d.events[0].retry_ms, 3000);
  EXPECT_EQ(d.events[0].data, "x");
}

TEST(SseDecoderTest, LastEventFieldWins) {
  const Decoded d = Decode("event: a\nevent: b\nid: 1\nid: 2\ndata: x\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].event, "b");
  EXPECT_EQ(d.events[0].id, "2");
}

TEST(SseDecoderTest, FieldsDoNotCarryToTheNextEvent) {
  const Decoded d = Decode("event: a\nid: 1\nretry: 5\ndata: x\n\ndata: y\n\n");
  ASSERT_EQ(d.events.size(), 2u);
  EXPECT_EQ(d.events[1], DataEvent("y"));
}

TEST(SseDecoderTest, IdWithNulIgnored) {
  using namespace std::string_view_literals;
  const Decoded d = Decode("id: 7\nid: a\0b\ndata: x\n\n"sv);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].id, "7");
}

TEST(SseDecoderTest, RetryOnlyIfAllAsciiDigits) {
  for (const char* bad : {"retry: 30x0\n", "retry: -1\n", "retry: \n", "retry\n", "retry:  5\n",
                          "retry: 99999999999999999999\n"}) {
    const Decoded d = Decode(std::string(bad) + "data: x\n\n");
    ASSERT_EQ(d.events.size(), 1u) << bad;
    EXPECT_FALSE(d.events[0].retry_ms.has_value()) << bad;
  }
  const Decoded d = Decode("retry: 9223372036854775807\ndata: x\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].retry_ms, INT64_MAX);
}

TEST(SseDecoderTest, FieldNamesAreCaseSensitive) {
  const Decoded d = Decode("Data: x\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].data, "");
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{{"Data", "x"}}));
}

TEST(SseDecoderTest, UnknownFieldKept) {  // llama.cpp reports errors as `error: {...}`
  const Decoded d = Decode("error: {\"code\":500,\"message\":\"boom\"}\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].data, "");
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{
                {"error", "{\"code\":500,\"message\":\"boom\"}"}}));
}

TEST(SseDecoderTest, UnknownFieldsKeptInOrderBesideData) {
  const Decoded d = Decode("x: 1\ndata: d\ny:2\nx: 3\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].data, "d");
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{{"x", "1"}, {"y", "2"}, {"x", "3"}}));
}

TEST(SseDecoderTest, EventWithoutDataOrUnknownFieldsNotDispatched) {
  const Decoded d = Decode("event: ping\nid: 3\nretry: 10\n\ndata: x\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("x")});
}

TEST(SseDecoderTest, BlankLinesAloneDispatchNothing) {
  const Decoded d = Decode("\n\r\n\r\n\n");
  EXPECT_TRUE(d.events.empty());
  EXPECT_FALSE(d.cut_mid_event);
}

// --- Comments --------------------------------------------------------------------------------

TEST(SseDecoderTest, CommentOnlyEvent) {
  const Decoded d = Decode(": keep-alive\n\n");
  EXPECT_TRUE(d.events.empty());
  EXPECT_EQ(d.comments, 1u);
  EXPECT_FALSE(d.cut_mid_event);
}

TEST(SseDecoderTest, CommentsInsideAnEventAreSkippedAndCounted) {
  const Decoded d = Decode(":a\ndata: x\n:\n: b\ndata: y\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("x\ny")});
  EXPECT_EQ(d.comments, 3u);
}

// --- End of stream ---------------------------------------------------------------------------

TEST(SseDecoderTest, MissingFinalBlankLine) {
  const Decoded d = Decode("data: a\n\ndata: b\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a")});
  EXPECT_TRUE(d.cut_mid_event);
}

TEST(SseDecoderTest, UnterminatedLineAtEnd) {
  const Decoded d = Decode("data: a\n\ndata: b");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("a")});
  EXPECT_TRUE(d.cut_mid_event);
}

TEST(SseDecoderTest, TrailingCommentLineIsNotACutEvent) {
  EXPECT_FALSE(Decode("data: a\n\n: bye\n").cut_mid_event);
  EXPECT_TRUE(Decode("data: a\n\n: by").cut_mid_event);  // an unterminated line is still cut
}

// --- Byte order mark -------------------------------------------------------------------------

TEST(SseDecoderTest, BomSkipped) {
  const Decoded d = Decode("\xEF\xBB\xBF" "data: x\n\n");
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("x")});
}

TEST(SseDecoderTest, BomSplitAcrossFeeds) {
  const Decoded d = DecodePieces({"\xEF", "\xBB", "\xBF" "da", "ta: x\n\n"});
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("x")});
}

TEST(SseDecoderTest, OnlyOneLeadingBomSkipped) {
  const Decoded d = Decode("\xEF\xBB\xBF\xEF\xBB\xBF" "data: x\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].data, "");
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{{"\xEF\xBB\xBF" "data", "x"}}));
}

TEST(SseDecoderTest, PartialBomIsLineContent) {
  const Decoded d = DecodePieces({"\xEF\xBB", "data: x\n\n"});
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{{"\xEF\xBB" "data", "x"}}));
}

TEST(SseDecoderTest, PartialBomAtEndIsCut) {
  EXPECT_TRUE(Decode("\xEF\xBB").cut_mid_event);
  EXPECT_FALSE(Decode("\xEF\xBB\xBF").cut_mid_event);
}

TEST(SseDecoderTest, BlankLineRightAfterPartialBomPrefix) {
  // EF then LF: the EF is a one-byte line (an unknown field), then a blank line dispatches it.
  const Decoded d = Decode("\xEF\n\n");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].unknown_fields,
            (std::vector<std::pair<std::string, std::string>>{{"\xEF", ""}}));
}

// --- Size limit ------------------------------------------------------------------------------

TEST(SseDecoderTest, EventTooLarge) {
  const Decoded d = Decode("data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n", 32);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find("max_event_bytes (32 bytes)"), std::string::npos) << d.error;
  EXPECT_TRUE(d.events.empty());
}

TEST(SseDecoderTest, EventAtTheLimitAccepted) {
  // The limit is checked before each line: 10 data bytes pending plus the second 16-byte line.
  const std::string wire = "data: 0123456789\ndata: 0123456789\n\n";
  EXPECT_TRUE(Decode(wire, 26).ok);
  EXPECT_FALSE(Decode(wire, 25).ok);
}

TEST(SseDecoderTest, EventsBeforeTheOversizedLineStillDelivered) {
  const Decoded d = Decode("data: ok\n\ndata: " + std::string(100, 'x') + "\n\n", 64);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.events, std::vector<SseEvent>{DataEvent("ok")});
}

TEST(SseDecoderTest, UnknownFieldsCountTowardTheLimit) {
  std::string wire;
  for (int i = 0; i < 20; ++i) wire += "x: 0123456789\n";
  EXPECT_FALSE(Decode(wire + "\n", 128).ok);
}

TEST(SseDecoderTest, RepeatedReplacingFieldsDoNotAccumulate) {
  // event/id replace their value, comments are dropped: none of them grows the pending event.
  std::string wire;
  for (int i = 0; i < 1000; ++i) wire += "event: 0123456789\nid: 0123456789\n: comment 0123\n";
  EXPECT_TRUE(Decode(wire + "data: x\n\n", 64).ok);
}

TEST(SseDecoderTest, GarbageWithoutNewlineStopsAtTheLimit) {
  // A 1 GiB body with no line end, read in 1 MiB pieces: the error must come by the time the
  // buffered line would pass the limit, not after the gigabyte.
  constexpr std::size_t kLimit = 16 * 1024 * 1024;
  constexpr std::size_t kChunk = 1024 * 1024;
  const std::string chunk(kChunk, 'x');
  SseDecoder decoder(kLimit);
  std::vector<SseEvent> events;
  std::size_t fed = 0;
  Status status = Ok{};
  while (fed < (std::size_t{1} << 30)) {
    status = decoder.Feed(chunk, &events);
    if (!status.ok()) break;
    fed += kChunk;
  }
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kProtocol);
  EXPECT_NE(status.error().message.find("16777216"), std::string::npos) << status.error().message;
  EXPECT_EQ(fed, kLimit);  // every byte up to the limit was accepted, the next chunk was not
  EXPECT_TRUE(events.empty());
}

TEST(SseDecoderTest, FeedAfterErrorFails) {
  SseDecoder decoder(8);
  std::vector<SseEvent> events;
  EXPECT_FALSE(decoder.Feed("data: 0123456789\n", &events).ok());
  const Status again = decoder.Feed("data: x\n\n", &events);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kProtocol);
  EXPECT_TRUE(events.empty());
}

// --- Grind: the same events however the bytes are split --------------------------------------

void ExpectSameEventsForEverySplit(const std::string& wire) {
  const Decoded whole = Decode(wire);
  ASSERT_TRUE(whole.ok);
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    const std::string_view view(wire);
    const Decoded split = DecodePieces({view.substr(0, cut), view.substr(cut)});
    ASSERT_EQ(split.events, whole.events) << "split at byte " << cut;
    ASSERT_EQ(split.comments, whole.comments) << "split at byte " << cut;
    ASSERT_EQ(split.cut_mid_event, whole.cut_mid_event) << "split at byte " << cut;
  }
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < wire.size(); ++i) {
    bytes.push_back(std::string_view(wire).substr(i, 1));
  }
  const Decoded one_by_one = DecodePieces(bytes);
  EXPECT_EQ(one_by_one.events, whole.events);
  EXPECT_EQ(one_by_one.comments, whole.comments);
  EXPECT_EQ(one_by_one.cut_mid_event, whole.cut_mid_event);
}

TEST(SseDecoderTest, RecordedOpenAiStreamDecodes) {
  const std::string wire = ReadTestData("sse/openai_chat_stream.txt");
  const Decoded d = Decode(wire);
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.events.size(), 6u);
  EXPECT_NE(d.events[0].data.find("\"role\":\"assistant\""), std::string::npos);
  EXPECT_NE(d.events[1].data.find("\"content\":\"Hello\""), std::string::npos);
  EXPECT_NE(d.events[4].data.find("\"usage\""), std::string::npos);
  EXPECT_EQ(d.events[5], DataEvent("[DONE]"));
  EXPECT_EQ(d.comments, 1u);
  EXPECT_FALSE(d.cut_mid_event);
}

TEST(SseDecoderTest, SameEventsHoweverTheBytesAreSplit) {
  ExpectSameEventsForEverySplit(ReadTestData("sse/openai_chat_stream.txt"));
}

TEST(SseDecoderTest, SameEventsHoweverTheBytesAreSplitCrlf) {
  const std::string wire = ReplaceAll(ReadTestData("sse/openai_chat_stream.txt"), "\n", "\r\n");
  EXPECT_EQ(Decode(wire).events, Decode(ReadTestData("sse/openai_chat_stream.txt")).events);
  ExpectSameEventsForEverySplit(wire);
}

TEST(SseDecoderTest, SameEventsHoweverTheBytesAreSplitCrOnlyWithBom) {
  const std::string wire =
      "\xEF\xBB\xBF" + ReplaceAll(ReadTestData("sse/openai_chat_stream.txt"), "\n", "\r");
  EXPECT_EQ(Decode(wire).events, Decode(ReadTestData("sse/openai_chat_stream.txt")).events);
  ExpectSameEventsForEverySplit(wire);
}

TEST(SseDecoderTest, SameEventsHoweverTheBytesAreSplitWhenCutMidEvent) {
  const std::string full = ReadTestData("sse/openai_chat_stream.txt");
  const std::string wire = full.substr(0, full.size() - 10);  // ends inside `data: [DONE]`
  EXPECT_TRUE(Decode(wire).cut_mid_event);
  ExpectSameEventsForEverySplit(wire);
}

TEST(SseDecoderTest, SameErrorHoweverTheBytesAreSplit) {
  const std::string wire = ReadTestData("sse/openai_chat_stream.txt");
  // Larger than every line before the usage chunk's (215 bytes at most), smaller than it (235).
  constexpr std::size_t kLimit = 220;
  const Decoded whole = Decode(wire, kLimit);
  ASSERT_FALSE(whole.ok);
  ASSERT_EQ(whole.events.size(), 4u);
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    const std::string_view view(wire);
    const Decoded split = DecodePieces({view.substr(0, cut), view.substr(cut)}, kLimit);
    ASSERT_FALSE(split.ok) << "split at byte " << cut;
    ASSERT_EQ(split.events, whole.events) << "split at byte " << cut;
  }
}

TEST(SseDecoderTest, FeedEachHandsOutTheSameEventsInAReusedBuffer) {
  const std::string wire = ReadTestData("sse/openai_chat_stream.txt") + "event: x\ndata: tail\n\n";
  const auto expected = Decode(wire).events;
  for (std::size_t cut = 1; cut < wire.size(); cut += 7) {
    SseDecoder decoder;
    std::vector<SseEvent> copies;
    const auto keep = [&](SseEvent& event) { copies.push_back(event); };
    ASSERT_TRUE(decoder.FeedEach(std::string_view(wire).substr(0, cut), keep).ok());
    ASSERT_TRUE(decoder.FeedEach(std::string_view(wire).substr(cut), keep).ok());
    EXPECT_EQ(copies, expected) << "split at byte " << cut;
  }
}

}  // namespace
}  // namespace bakeoff::net
