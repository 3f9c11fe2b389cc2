// tests/unit/net/ndjson_test.cc
//
// Owns: the tests of net/ndjson.h: line ends, blank lines, the unterminated final line, the size
// limit, and grind tests that split an Ollama-style stream at every byte.
#include "net/ndjson.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"
#include "support/test_data.h"

namespace bakeoff::net {
namespace {

using bakeoff::testing::ReadTestData;

using Lines = std::vector<std::string>;

struct DecodedLines {
  Lines lines;
  bool ok = true;
  std::string error;
};

// Feeds `pieces` in order, then Finish(); stops feeding at the first error as a caller would.
DecodedLines DecodeLinePieces(const std::vector<std::string_view>& pieces,
                     std::size_t max_line_bytes = NdjsonDecoder::kDefaultMaxLineBytes) {
  NdjsonDecoder decoder(max_line_bytes);
  DecodedLines result;
  for (const std::string_view piece : pieces) {
    const Status status = decoder.Feed(piece, &result.lines);
    if (!status.ok()) {
      result.ok = false;
      result.error = status.error().message;
      EXPECT_EQ(status.error().code, ErrorCode::kProtocol);
      break;
    }
  }
  decoder.Finish(&result.lines);
  return result;
}

DecodedLines DecodeLines(std::string_view wire,
               std::size_t max_line_bytes = NdjsonDecoder::kDefaultMaxLineBytes) {
  return DecodeLinePieces({wire}, max_line_bytes);
}

TEST(NdjsonDecoderTest, EmptyStream) {
  const DecodedLines d = DecodeLines("");
  EXPECT_TRUE(d.ok);
  EXPECT_TRUE(d.lines.empty());
}

TEST(NdjsonDecoderTest, LfLineEnds) {
  EXPECT_EQ(DecodeLines("{\"a\":1}\n{\"b\":2}\n").lines, (Lines{"{\"a\":1}", "{\"b\":2}"}));
}

TEST(NdjsonDecoderTest, CrlfLineEnds) {
  EXPECT_EQ(DecodeLines("{\"a\":1}\r\n{\"b\":2}\r\n").lines, (Lines{"{\"a\":1}", "{\"b\":2}"}));
}

TEST(NdjsonDecoderTest, CrLfSplitAcrossFeeds) {
  EXPECT_EQ(DecodeLinePieces({"{\"a\":1}\r", "\n{\"b\":2}\r", "\n"}).lines,
            (Lines{"{\"a\":1}", "{\"b\":2}"}));
}

TEST(NdjsonDecoderTest, LoneCrIsNotALineEnd) {
  EXPECT_EQ(DecodeLines("{\"a\":1}\r{\"b\":2}\n").lines, (Lines{"{\"a\":1}\r{\"b\":2}"}));
}

TEST(NdjsonDecoderTest, BlankLinesSkipped) {
  EXPECT_EQ(DecodeLines("\n{}\n\r\n  \t\n\n[]\n \r\n").lines, (Lines{"{}", "[]"}));
}

TEST(NdjsonDecoderTest, LineSplitAcrossFeeds) {
  EXPECT_EQ(DecodeLinePieces({"{\"resp", "onse\":\"hi\"", "}\n"}).lines,
            (Lines{"{\"response\":\"hi\"}"}));
}

TEST(NdjsonDecoderTest, MissingFinalNewlineDeliveredByFinish) {
  EXPECT_EQ(DecodeLines("{\"a\":1}\n{\"done\":true}").lines, (Lines{"{\"a\":1}", "{\"done\":true}"}));
}

TEST(NdjsonDecoderTest, MissingFinalLfAfterCrStripsTheCr) {
  EXPECT_EQ(DecodeLines("{\"done\":true}\r").lines, (Lines{"{\"done\":true}"}));
}

TEST(NdjsonDecoderTest, WhitespaceInsideALineKept) {
  EXPECT_EQ(DecodeLines(" {\"a\": 1} \n").lines, (Lines{" {\"a\": 1} "}));
}

TEST(NdjsonDecoderTest, LineTooLarge) {
  const DecodedLines d = DecodeLines("{\"a\":1}\n" + std::string(100, 'x') + "\n{}\n", 64);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find("max_line_bytes (64 bytes)"), std::string::npos) << d.error;
  EXPECT_EQ(d.lines, (Lines{"{\"a\":1}"}));  // lines before the oversized one still delivered
}

TEST(NdjsonDecoderTest, LineAtTheLimitAccepted) {
  EXPECT_TRUE(DecodeLines(std::string(64, 'x') + "\n", 64).ok);
  EXPECT_FALSE(DecodeLines(std::string(65, 'x') + "\n", 64).ok);
  EXPECT_FALSE(DecodeLines(std::string(65, 'x'), 64).ok);  // unterminated counts too
  EXPECT_FALSE(DecodeLinePieces({std::string(40, 'x'), std::string(25, 'x')}, 64).ok);
}

TEST(NdjsonDecoderTest, GarbageWithoutNewlineStopsAtTheLimit) {
  constexpr std::size_t kLimit = 16 * 1024 * 1024;
  constexpr std::size_t kChunk = 1024 * 1024;
  const std::string chunk(kChunk, 'x');
  NdjsonDecoder decoder(kLimit);
  Lines lines;
  std::size_t fed = 0;
  Status status = Ok{};
  while (fed < (std::size_t{1} << 30)) {
    status = decoder.Feed(chunk, &lines);
    if (!status.ok()) break;
    fed += kChunk;
  }
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("16777216"), std::string::npos);
  EXPECT_EQ(fed, kLimit);
  decoder.Finish(&lines);
  EXPECT_TRUE(lines.empty());  // nothing delivered after an error
}

TEST(NdjsonDecoderTest, FeedAfterErrorFails) {
  NdjsonDecoder decoder(4);
  Lines lines;
  EXPECT_FALSE(decoder.Feed("0123456789\n", &lines).ok());
  EXPECT_FALSE(decoder.Feed("{}\n", &lines).ok());
  EXPECT_TRUE(lines.empty());
}

void ExpectSameLinesForEverySplit(const std::string& wire) {
  const DecodedLines whole = DecodeLines(wire);
  ASSERT_TRUE(whole.ok);
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    const std::string_view view(wire);
    ASSERT_EQ(DecodeLinePieces({view.substr(0, cut), view.substr(cut)}).lines, whole.lines)
        << "split at byte " << cut;
  }
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < wire.size(); ++i) {
    bytes.push_back(std::string_view(wire).substr(i, 1));
  }
  EXPECT_EQ(DecodeLinePieces(bytes).lines, whole.lines);
}

TEST(NdjsonDecoderTest, RecordedOllamaStreamDecodes) {
  const DecodedLines d = DecodeLines(ReadTestData("ndjson/ollama_generate_stream.ndjson"));
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.lines.size(), 5u);
  EXPECT_NE(d.lines[0].find("\"response\":\"The\""), std::string::npos);
  EXPECT_NE(d.lines[4].find("\"done\":true"), std::string::npos);
}

TEST(NdjsonDecoderTest, SameLinesHoweverTheBytesAreSplit) {
  ExpectSameLinesForEverySplit(ReadTestData("ndjson/ollama_generate_stream.ndjson"));
}

TEST(NdjsonDecoderTest, SameLinesHoweverTheBytesAreSplitCrlfNoFinalNewline) {
  std::string wire;
  for (const char c : ReadTestData("ndjson/ollama_generate_stream.ndjson")) {
    if (c == '\n') wire += '\r';
    wire += c;
  }
  wire.resize(wire.size() - 2);  // drop the final CRLF
  EXPECT_EQ(DecodeLines(wire).lines, DecodeLines(ReadTestData("ndjson/ollama_generate_stream.ndjson")).lines);
  ExpectSameLinesForEverySplit(wire);
}

}  // namespace
}  // namespace bakeoff::net
