// tests/unit/workload/importers_test.cc
//
// Owns: the importers' contract on small hand-made files (tests/testdata/traces/), one or more per
// format, including broken ones: exact field values, `file:line: what` messages, skip counts by
// kind, mixed time units, unsorted timestamps, files with no usable rows, format detection, the
// canonical JSONL round trip (with its wall-clock origin), and the Mooncake fast path reading every
// line exactly as the general parser does.
#include "workload/importers.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "workload/trace_jsonl.h"
#include "support/scratch.h"
#include "import_test_util.h"

namespace bakeoff::workload {
namespace {

Imported Import(const std::string& name, const ImportOptions& options = {}) {
  return ImportPath(TraceData(name), options);
}

TEST(ImportersTest, AzureCsvWallClockWithSevenFractionalDigits) {
  Imported im = Import("azure_small.csv");
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.report->format, TraceFormat::kAzureCsv);
  ASSERT_EQ(im.rows.size(), 3u);
  EXPECT_EQ(im.rows[0].input_tokens, 374u);
  EXPECT_EQ(im.rows[0].output_tokens, 44u);
  EXPECT_DOUBLE_EQ(im.rows[0].arrival_s, 0);
  EXPECT_NEAR(im.rows[1].arrival_s, 4.314579, 1e-9);  // 50.9951690 - 46.6805900
  EXPECT_NEAR(im.rows[2].arrival_s, 4.31941, 1e-9);
  EXPECT_EQ(im.rows[2].source_line, 4u);
  ASSERT_TRUE(im.report->origin_unix_ns.has_value());
  EXPECT_EQ(*im.report->origin_unix_ns, 1700158546680590000LL);  // 2023-11-16T18:15:46.68059Z
}

TEST(ImportersTest, AzureBrokenStopsAtFirstBadRowWithFileAndLine) {
  Imported im = Import("azure_broken.csv");
  ASSERT_FALSE(im.report.ok());
  EXPECT_EQ(im.report.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(im.report.error().message,
            TraceData("azure_broken.csv") +
                ":3: column \"ContextTokens\" is not a non-negative integer (\"abc\")");
}

TEST(ImportersTest, AzureBrokenWithSkipInvalidCountsEachKind) {
  ImportOptions options;
  options.skip_invalid = true;
  Imported im = Import("azure_broken.csv", options);
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.rows.size(), 2u);
  EXPECT_EQ(im.report->SkippedTotal(), 4u);
  ASSERT_EQ(im.report->skipped.size(), 3u);
  EXPECT_EQ(im.report->skipped[0].kind, "bad number");
  EXPECT_EQ(im.report->skipped[0].count, 2u);  // "abc" and "-5"
  EXPECT_EQ(im.report->skipped[1].kind, "wrong column count");
  EXPECT_EQ(im.report->skipped[1].first_message,
            TraceData("azure_broken.csv") + ":4: expected 3 fields as in the header, found 2");
  EXPECT_EQ(im.report->skipped[2].kind, "bad timestamp");
  EXPECT_NE(im.report->SkippedSummary().find("skipped 4 rows: 2 bad number"), std::string::npos);
}

TEST(ImportersTest, BurstGptSecondsModelsAndFailedRowsNoted) {
  Imported im = Import("burstgpt_small.csv");
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.report->format, TraceFormat::kBurstGptCsv);
  ASSERT_EQ(im.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(im.rows[1].arrival_s, 40);
  EXPECT_EQ(im.rows[2].model, "GPT-4");
  EXPECT_EQ(im.rows[1].input_tokens, 1087u);
  EXPECT_EQ(im.rows[3].output_tokens, 0u);
  ASSERT_EQ(im.report->notes.size(), 1u);
  EXPECT_NE(im.report->notes[0].find("1 rows have 0 response tokens"), std::string::npos);
}

TEST(ImportersTest, BurstGptSessionColumnsGiveTurns) {
  Imported im = Import("burstgpt_sessions.csv");
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  ASSERT_EQ(im.rows.size(), 3u);
  EXPECT_EQ(im.rows[0].session_id, "s1");
  EXPECT_EQ(im.rows[0].turn, 0u);
  EXPECT_EQ(im.rows[2].session_id, "s1");
  EXPECT_EQ(im.rows[2].turn, 1u);
  EXPECT_EQ(im.rows[1].turn, 0u);
}

TEST(ImportersTest, MooncakeMillisecondsAndBlocks) {
  Imported im = Import("mooncake_small.jsonl");
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.report->format, TraceFormat::kMooncake);
  EXPECT_EQ(im.report->block_tokens, 512u);
  ASSERT_EQ(im.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(im.rows[1].arrival_s, 0.25);
  EXPECT_EQ(im.rows[2].prefix_hashes, (std::vector<std::uint64_t>{4, 1}));
  EXPECT_EQ(im.blocks[0], 512u);
}

TEST(ImportersTest, MooncakeBrokenRowsEachExplained) {
  Imported stop = Import("mooncake_broken.jsonl");
  ASSERT_FALSE(stop.report.ok());
  EXPECT_EQ(stop.report.error().message, TraceData("mooncake_broken.jsonl") + ":2: not valid JSON");
  ImportOptions options;
  options.skip_invalid = true;
  Imported im = Import("mooncake_broken.jsonl", options);
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.rows.size(), 2u);
  EXPECT_EQ(im.report->SkippedTotal(), 5u);
  std::string all;
  for (const SkippedRows& s : im.report->skipped)
    all += s.kind + "=" + std::to_string(s.count) + ";";
  EXPECT_EQ(all, "bad JSON=2;missing field=1;bad number=2;");
  EXPECT_EQ(im.report->skipped[1].first_message,
            TraceData("mooncake_broken.jsonl") + ":3: missing field \"input_length\"");
}

TEST(ImportersTest, ShareGptTurnsBecomeRequestsWithUnknownArrivals) {
  ImportOptions options;
  options.block_tokens = 4;  // 16-byte blocks, so the short first turn spans several
  Imported im = Import("sharegpt_small.json", options);
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.report->format, TraceFormat::kShareGpt);
  EXPECT_FALSE(im.report->arrivals_known);
  ASSERT_EQ(im.rows.size(), 3u);  // two turns of conv1, one of conv2 (its last turn has no reply)
  EXPECT_EQ(im.rows[0].session_id, "conv1");
  EXPECT_EQ(im.rows[1].turn, 1u);
  EXPECT_EQ(im.rows[1].messages.size(), 4u);  // system, user, assistant, user
  EXPECT_EQ(im.rows[1].messages[2].role, "assistant");
  EXPECT_TRUE(im.rows[0].tokens_estimated);
  // "You are a helpful assistant." (28 bytes) + "What is a KV cache?" (19 bytes) -> ceil(47 / 4).
  EXPECT_EQ(im.rows[0].input_tokens, 12u);
  EXPECT_EQ(im.rows[0].arrival_s, 0);
  // The second turn's prompt starts with the first turn's text ("system\n...\nuser\n...\n", 61
  // bytes), so it shares the first three 16-byte blocks; the fourth is partial in the first turn.
  ASSERT_EQ(im.rows[0].prefix_hashes.size(), 4u);
  ASSERT_GT(im.rows[1].prefix_hashes.size(), 4u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(im.rows[1].prefix_hashes[i], im.rows[0].prefix_hashes[i]) << i;
  EXPECT_NE(im.rows[1].prefix_hashes[3], im.rows[0].prefix_hashes[3]);
  EXPECT_EQ(im.blocks[0], 4u);
  bool noted = false;
  for (const std::string& n : im.report->notes)
    noted = noted || n.find("1 user turns have no model reply") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(ImportersTest, GenericCsvWithColumnMappingAndEpochMilliseconds) {
  ImportOptions options;
  options.format = TraceFormat::kCsv;
  options.columns = *ParseCsvColumns(
      "time=ts_ms,input=prompt,output=completion,group=tenant,model=lora,structured=json");
  Imported im = Import("generic.csv", options);
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  ASSERT_EQ(im.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(im.rows[1].arrival_s, 0.5);
  EXPECT_EQ(im.rows[1].model, "sql-lora");
  EXPECT_TRUE(im.rows[1].structured_output);
  EXPECT_FALSE(im.rows[2].structured_output);
  EXPECT_EQ(im.rows[2].prefix_group, "b");
  ASSERT_TRUE(im.report->origin_unix_ns.has_value());
  EXPECT_EQ(*im.report->origin_unix_ns, 1700000000000000000LL);
}

TEST(ImportersTest, GenericCsvNeedsMappingAndNamesMissingColumn) {
  Imported detected = Import("generic.csv");
  ASSERT_FALSE(detected.report.ok());
  EXPECT_NE(detected.report.error().message.find("--columns"), std::string::npos);
  ImportOptions options;
  options.format = TraceFormat::kCsv;
  options.columns = *ParseCsvColumns("time=when,input=prompt,output=completion");
  Imported im = Import("generic.csv", options);
  ASSERT_FALSE(im.report.ok());
  EXPECT_EQ(im.report.error().message,
            TraceData("generic.csv") + ":1: no column \"when\" in the header");
}

TEST(ImportersTest, MixedEpochUnitsAreDetected) {
  ImportOptions options;
  options.format = TraceFormat::kCsv;
  options.columns = *ParseCsvColumns("time=ts,input=in,output=out");
  Imported im = Import("mixed_units.csv", options);
  ASSERT_FALSE(im.report.ok());
  EXPECT_EQ(im.report.error().message,
            TraceData("mixed_units.csv") +
                ":4: timestamp \"1700000002000\" has a different unit or origin than the "
                "first row's (\"1700000000\" at " +
                TraceData("mixed_units.csv") + ":2, read as Unix epoch seconds)");
}

TEST(ImportersTest, NumbersMixedWithDateTimesAreDetected) {
  ImportOptions options;
  options.format = TraceFormat::kCsv;
  options.skip_invalid = true;
  options.columns = *ParseCsvColumns("time=ts,input=in,output=out");
  Imported im = Import("mixed_kinds.csv", options);
  ASSERT_TRUE(im.report.ok());
  ASSERT_EQ(im.report->skipped.size(), 1u);
  EXPECT_EQ(im.report->skipped[0].kind, "mixed time units");
  EXPECT_NE(im.report->skipped[0].first_message.find("is a date-time but the first row's"),
            std::string::npos);
}

TEST(ImportersTest, UnsortedTimestampsAreCountedAndLoadTraceSorts) {
  Imported im = Import("azure_unsorted.csv");
  ASSERT_TRUE(im.report.ok());
  EXPECT_EQ(im.report->rows_out_of_order, 1u);
  EXPECT_EQ(im.report->first_out_of_order, TraceData("azure_unsorted.csv") + ":3");
  EXPECT_DOUBLE_EQ(im.rows[1].arrival_s, -3.5);
  ImportReport report;
  Result<Trace> trace = LoadTrace(TraceData("azure_unsorted.csv"), {}, &report);
  ASSERT_TRUE(trace.ok());
  ASSERT_EQ(trace->requests.size(), 3u);
  EXPECT_EQ(trace->requests[0].input_tokens, 20u);
  EXPECT_DOUBLE_EQ(trace->requests[0].arrival_s, 0);
  EXPECT_DOUBLE_EQ(trace->requests[1].arrival_s, 3.5);
  EXPECT_DOUBLE_EQ(trace->requests[2].arrival_s, 5.5);
  bool noted = false;
  for (const std::string& n : report.notes)
    noted = noted || n.find("timestamps are not sorted") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(ImportersTest, FilesWithNoUsableRowsAreExplained) {
  Imported header_only = Import("azure_header_only.csv");
  ASSERT_FALSE(header_only.report.ok());
  EXPECT_EQ(header_only.report.error().message,
            TraceData("azure_header_only.csv") + ": no usable rows (1 lines read)");
  ImportOptions options;
  options.skip_invalid = true;
  Imported none = Import("azure_no_usable.csv", options);
  ASSERT_FALSE(none.report.ok());
  EXPECT_NE(none.report.error().message.find(": no usable rows (3 lines read, skipped 2 rows:"),
            std::string::npos)
      << none.report.error().message;
  Result<ImportReport> empty =
      ImportTraceBuffer("", "empty.jsonl", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "empty.jsonl: no usable rows (the file is empty)");
}

TEST(ImportersTest, OpenAiLogBodiesUsageAndStructuredOutput) {
  ImportOptions options;
  options.skip_invalid = true;
  Imported im = Import("openai_log.jsonl", options);
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.report->format, TraceFormat::kOpenAiLog);
  ASSERT_EQ(im.rows.size(), 3u);
  EXPECT_EQ(im.rows[0].input_tokens, 21u);
  EXPECT_EQ(im.rows[0].output_tokens, 17u);
  EXPECT_FALSE(im.rows[0].tokens_estimated);
  EXPECT_TRUE(im.rows[0].structured_output);
  EXPECT_EQ(im.rows[0].messages.size(), 2u);
  EXPECT_DOUBLE_EQ(im.rows[1].arrival_s, 0.75);
  EXPECT_EQ(im.rows[1].input_tokens, 2u);  // "SELECT": ceil(6 / 4)
  EXPECT_EQ(im.rows[1].output_tokens, 32u);
  EXPECT_TRUE(im.rows[1].tokens_estimated);
  EXPECT_EQ(im.rows[1].model, "sql-lora");
  EXPECT_EQ(im.rows[2].session_id, "u7");
  EXPECT_EQ(im.rows[2].priority, 2);
  EXPECT_EQ(im.rows[2].output_tokens, 100u);
  ASSERT_EQ(im.report->skipped.size(), 1u);
  EXPECT_EQ(
      im.report->skipped[0].first_message,
      TraceData("openai_log.jsonl") +
          ":4: no usage.completion_tokens and no \"max_tokens\" or \"max_completion_tokens\"");
}

TEST(ImportersTest, CanonicalTraceFieldsAndRoundTrip) {
  Imported im = Import("trace_small.jsonl");
  ASSERT_TRUE(im.report.ok()) << im.report.error().message;
  EXPECT_EQ(im.report->format, TraceFormat::kTrace);
  EXPECT_EQ(im.report->block_tokens, 512u);
  ASSERT_EQ(im.rows.size(), 3u);
  const TraceRequest& r = im.rows[1];
  EXPECT_DOUBLE_EQ(r.arrival_s, 2.5);
  EXPECT_EQ(r.prefix_hashes, (std::vector<std::uint64_t>{11, 12, 14}));
  EXPECT_EQ(r.prefix_group, "sys-a");
  EXPECT_EQ(r.turn, 1u);
  EXPECT_EQ(r.think_time_s, 1.5);
  EXPECT_TRUE(r.structured_output);
  EXPECT_EQ(r.model, "lora-x");
  EXPECT_EQ(r.priority, -1);
  EXPECT_EQ(im.rows[2].messages, (std::vector<ChatMessage>{{"user", "hi"}}));

  Trace trace;
  trace.source = "round trip";
  trace.block_tokens = 512;
  for (const TraceRequest& row : im.rows) trace.requests.push_back(row);
  const std::filesystem::path out =
      bakeoff::testing::ScratchRoot() / "bakeoff_trace_round_trip.jsonl";
  ASSERT_TRUE(WriteTraceJsonl(trace, out).ok());
  std::vector<TraceRequest> again;
  Result<ImportReport> reread = ImportTraceFile(
      out, {}, [&again](const TraceRequest& row, std::uint32_t) { again.push_back(row); });
  std::filesystem::remove(out);
  ASSERT_TRUE(reread.ok()) << reread.error().message;
  ASSERT_EQ(again.size(), im.rows.size());
  for (std::size_t i = 0; i < again.size(); ++i) {
    TraceRequest expected = im.rows[i];
    expected.source_line = i + 2;  // after the header line
    EXPECT_EQ(again[i], expected) << "row " << i;
  }
}

// Mooncake rows of the plain shape take a fast path; every row must come out exactly as the
// general (DOM) parser reads it, and every other line must be left to that parser, whose messages
// are the contract. Each line below is imported alone, with and without the fast path.
TEST(ImportersTest, MooncakeFastPathReadsEveryLineAsTheGeneralParser) {
  const std::vector<std::string> lines = {
      R"({"timestamp": 0, "input_length": 1200, "output_length": 50, "hash_ids": [0, 1, 2]})",
      R"({"timestamp":27,"input_length":1,"output_length":0,"hash_ids":[]})",
      "\t{ \"hash_ids\" : [ 18446744073709551615 , 9999999999999999999 ] ,\"output_length\":7, "
      "\"input_length\": 4294967295 , \"timestamp\": 999999999999999 }  ",
      R"({"timestamp": 5, "input_length": 10, "output_length": 5})",                 // no ids
      R"({"timestamp": 1000000000000000, "input_length": 10, "output_length": 5})",  // 16 digits
      R"({"timestamp": 12345678901234567890, "input_length": 1, "output_length": 1})",
      R"({"timestamp": 5.5, "input_length": 10, "output_length": 5})",
      R"({"timestamp": 5e3, "input_length": 10, "output_length": 5})",
      R"({"timestamp": -5, "input_length": 10, "output_length": 5})",
      R"({"timestamp": "5", "input_length": 10, "output_length": 5})",
      R"({"timestamp": 05, "input_length": 10, "output_length": 5})",
      R"({"timestamp": 0, "input_length": 4294967296, "output_length": 5})",
      R"({"timestamp": 0, "input_length": 10.0, "output_length": 5})",
      R"({"timestamp": 0, "input_length": 1e2, "output_length": 5})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1, -2]})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1, 2.5]})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [18446744073709551616]})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1,]})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1 2]})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": 3})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "input_length": 11})",  // duplicate
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1], "hash_ids": [2]})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5, "extra": {"a": [1]}})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5})",  // escaped key
      R"({"timestamp": 0, "input_length": 10})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5} x)",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5,})",
      R"({"timestamp": 0 "input_length": 10, "output_length": 5})",
      R"({"timestamp": 0, "input_length": 10, "output_length": 5)",
      R"([{"timestamp": 0, "input_length": 10, "output_length": 5}])",
      std::string("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\0", 57),
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\r",
  };
  for (const std::string& line : lines) {
    for (const bool skip : {false, true}) {
      std::string result[2];
      for (const bool fast : {false, true}) {
        ImportOptions options;
        options.format = TraceFormat::kMooncake;
        options.fast_paths = fast;
        options.skip_invalid = skip;
        std::string& out = result[fast ? 1 : 0];
        Result<ImportReport> r = ImportTraceBuffer(
            line + "\n", "m.jsonl", options, [&](const TraceRequest& row, std::uint32_t block) {
              out += fmt::format("row {} {} {} {} {} [", row.arrival_s, row.input_tokens,
                                 row.output_tokens, row.source_line, block);
              for (const std::uint64_t id : row.prefix_hashes) out += fmt::format("{},", id);
              out += "]";
            });
        out += r.ok() ? " ok " + r->SkippedSummary() : " error " + r.error().message;
      }
      EXPECT_EQ(result[1], result[0]) << line << (skip ? " (skip invalid)" : "");
    }
  }
  // The file-level results agree too, and a broken row still names its line.
  for (const bool fast : {false, true}) {
    ImportOptions options;
    options.fast_paths = fast;
    Imported im = Import("mooncake_broken.jsonl", options);
    ASSERT_FALSE(im.report.ok());
    EXPECT_EQ(im.report.error().message, TraceData("mooncake_broken.jsonl") + ":2: not valid JSON");
  }
}

TEST(ImportersTest, CanonicalOriginUtcGivesTheWallClock) {
  Trace trace;
  trace.source = "t";
  trace.origin_unix_ns = 1'700'000'000'250'000'000LL;  // 2023-11-14T22:13:20.25Z
  std::string text = FormatTraceHeader(trace) + "\n";
  EXPECT_NE(text.find("\"origin_utc\":\"2023-11-14T22:13:20.25Z\""), std::string::npos) << text;
  text += "{\"arrival_s\":5,\"input_tokens\":1,\"output_tokens\":1}\n";
  text += "{\"arrival_s\":2,\"input_tokens\":1,\"output_tokens\":1}\n";
  Result<ImportReport> r =
      ImportTraceBuffer(text, "t.jsonl", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->origin_unix_ns.has_value());
  EXPECT_EQ(*r->origin_unix_ns, 1'700'000'005'250'000'000LL);  // the first row's wall clock

  const std::filesystem::path path =
      bakeoff::testing::ScratchRoot() / "bakeoff_origin_utc.jsonl";
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  Result<Trace> loaded = LoadTrace(path, {});
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  ASSERT_TRUE(loaded->origin_unix_ns.has_value());
  EXPECT_EQ(*loaded->origin_unix_ns, 1'700'000'002'250'000'000LL);  // moved to the earliest arrival
  EXPECT_DOUBLE_EQ(loaded->requests.front().arrival_s, 0);

  const std::string bad = "{\"format\":\"bakeoff-trace\",\"origin_utc\":\"noon\"}\n";
  Result<ImportReport> e =
      ImportTraceBuffer(bad, "b.jsonl", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message,
            "b.jsonl:1: field \"origin_utc\" is not a date-time like \"2023-11-16T18:15:46Z\"");
}

TEST(ImportersTest, CanonicalRejectsHashesWithoutBlockSize) {
  const std::string text =
      "{\"arrival_s\":0,\"input_tokens\":10,\"output_tokens\":1,\"prefix_hashes\":[1]}\n";
  Result<ImportReport> r =
      ImportTraceBuffer(text, "t.jsonl", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "t.jsonl:1: field \"prefix_hashes\" needs \"block_tokens\" in the header line");
}

TEST(ImportersTest, DetectsEachFormatFromTheFirstLine) {
  auto detect = [](std::string_view head) {
    Result<TraceFormat> f = DetectTraceFormat(head, "x");
    return f.ok() ? std::string(TraceFormatName(*f)) : f.error().message;
  };
  EXPECT_EQ(detect("TIMESTAMP,ContextTokens,GeneratedTokens\n"), "azure-csv");
  EXPECT_EQ(
      detect(
          "\xEF\xBB\xBFTimestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n"),
      "burstgpt-csv");
  EXPECT_EQ(
      detect("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": []}"),
      "mooncake");
  EXPECT_EQ(detect("{\"format\":\"bakeoff-trace\",\"version\":1}\n"), "trace");
  EXPECT_EQ(detect("\n\n[{\"id\": \"a\"}]"), "sharegpt");
  EXPECT_EQ(detect("{\"timestamp\": 1, \"body\": {}}"), "openai-log");
  EXPECT_EQ(detect("a,b,c\n"), "csv");
  EXPECT_EQ(detect("{\"x\": 1}"),
            "x:1: cannot tell the JSON format from the first line; pass --format");
}

TEST(ImportersTest, LongLinesAndCrlfAndMissingFinalNewline) {
  std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n";
  text += "2023-11-16 18:15:46,1,2\r\n";
  text += "2023-11-16 18:15:47+01:00,3,4";  // an hour earlier in UTC: out of order
  std::vector<TraceRequest> rows;
  Result<ImportReport> r = ImportTraceBuffer(
      text, "x.csv", {}, [&rows](const TraceRequest& row, std::uint32_t) { rows.push_back(row); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1].arrival_s, -3599);
  // A JSONL line longer than the 4 MiB read buffer.
  std::string big = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": [";
  while (big.size() < (5u << 20)) big += "1,";
  big += "1]}\n";
  std::size_t ids = 0;
  Result<ImportReport> m = ImportTraceBuffer(
      big, "big.jsonl", {},
      [&ids](const TraceRequest& row, std::uint32_t) { ids = row.prefix_hashes.size(); });
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_GT(ids, 2'000'000u);
}

// Year 4046 is past what nanoseconds since 1970 hold in 64 bits: a bad timestamp, not an overflow.
TEST(ImportersTest, DateTimesBeyondTheNanosecondRangeAreBadTimestamps) {
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\n4046-11-16 18:15:46.6805900,374,44\n";
  Result<ImportReport> r =
      ImportTraceBuffer(text, "a.csv", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "a.csv:2: timestamp \"4046-11-16 18:15:46.6805900\" is not a date-time (YYYY-MM-DD "
            "HH:MM:SS[.fffffff]) "
            "or a number");
}

// Enough quoted fields that the splitter's storage grows while it splits: the fields read so far
// must not point into strings that moved.
TEST(ImportersTest, ManyQuotedFieldsOnOneLine) {
  std::string header = "\"ts\",\"in\",\"out\"";
  std::string row = "\"1\",\"2\",\"3\"";
  for (int i = 0; i < 40; ++i) {
    header += ",\"x" + std::to_string(i) + "\"";
    row += ",\"v\"\"" + std::to_string(i) + "\"";
  }
  ImportOptions options;
  options.format = TraceFormat::kCsv;
  options.columns = *ParseCsvColumns("time=ts,input=in,output=out,model=x39");
  std::vector<TraceRequest> rows;
  Result<ImportReport> r =
      ImportTraceBuffer(header + "\n" + row + "\n", "q.csv", options,
                        [&rows](const TraceRequest& t, std::uint32_t) { rows.push_back(t); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].input_tokens, 2u);
  EXPECT_EQ(rows[0].model, "v\"39");
}

// A canonical trace is seconds since the start by definition: a first row at 1.9e8 s is not read
// as Unix epoch seconds, nor a later 0 as a change of units.
TEST(ImportersTest, SinceStartFormatsDoNotGuessEpochUnits) {
  const std::string text =
      "{\"format\":\"bakeoff-trace\",\"version\":1}\n"
      "{\"arrival_s\":189388802.5,\"input_tokens\":1,\"output_tokens\":1}\n"
      "{\"arrival_s\":0,\"input_tokens\":1,\"output_tokens\":1}\n";
  std::vector<TraceRequest> rows;
  Result<ImportReport> r = ImportTraceBuffer(
      text, "t.jsonl", {}, [&rows](const TraceRequest& t, std::uint32_t) { rows.push_back(t); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1].arrival_s, -189388802.5);
  EXPECT_EQ(r->rows_out_of_order, 1u);
  EXPECT_FALSE(r->origin_unix_ns.has_value());
}

TEST(ImportersTest, CsvNamesMustBeUtf8) {
  const std::string text =
      "Timestamp,Model,Request tokens,Response tokens\n1,GPT\xF1,10,2\n2,GPT-4,10,2\n";
  Result<ImportReport> r =
      ImportTraceBuffer(text, "b.csv", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_FALSE(r.ok());
  // The message quotes the name with the bad byte replaced, so the message itself is UTF-8.
  EXPECT_EQ(r.error().message, "b.csv:2: name \"GPT\xEF\xBF\xBD\" is not UTF-8");
}

TEST(ImportersTest, OptionParsers) {
  EXPECT_FALSE(ParseTraceFormat("parquet").ok());
  EXPECT_EQ(*ParseTraceFormat("burstgpt-csv"), TraceFormat::kBurstGptCsv);
  EXPECT_EQ(*ParseTimeUnit("ms"), TimeUnit::kMillis);
  EXPECT_FALSE(ParseTimeUnit("h").ok());
  EXPECT_FALSE(ParseCsvColumns("time=a,input=b").ok());
  EXPECT_FALSE(ParseCsvColumns("time=a,input=b,output=c,colour=d").ok());
  EXPECT_EQ(ParseCsvColumns("time=a,input=b,output=c,session=d")->session, "d");
}

TEST(ImportersTest, TextBlockIdsCutEveryFourBytesPerToken) {
  const std::string text(100, 'a');
  const std::vector<std::uint64_t> ids =
      TextBlockIds(text, 4);  // 16-byte blocks: 6 full + 1 partial
  ASSERT_EQ(ids.size(), 7u);
  EXPECT_EQ(ids[0], ids[5]);
  EXPECT_NE(ids[5], ids[6]);
  EXPECT_EQ(EstimateTokens(0), 0u);
  EXPECT_EQ(EstimateTokens(5), 2u);
}

// ShareGPT edge cases.
Result<ImportReport> Buffer(const std::string& text, const std::string& name,
                            std::vector<TraceRequest>* rows, ImportOptions options = {}) {
  return ImportTraceBuffer(text, name, options, [rows](const TraceRequest& r, std::uint32_t) {
    if (rows != nullptr) rows->push_back(r);
  });
}

TEST(ImportersTest, ShareGptWithAByteOrderMarkReadsAsWithout) {
  const std::string plain = ReadFile(TraceData("sharegpt_small.json")).value();
  std::vector<TraceRequest> without, with;
  Result<ImportReport> a = Buffer(plain, "s.json", &without);
  Result<ImportReport> b = Buffer("\xEF\xBB\xBF" + plain, "s.json", &with);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->format, TraceFormat::kShareGpt);
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with, without);
}

TEST(ImportersTest, TruncatedShareGptSaysWhereTheJsonEnds) {
  const std::string plain = ReadFile(TraceData("sharegpt_small.json")).value();
  const std::string cut =
      plain.substr(0, 200);  // inside a string of the first conversation, line 5
  Result<ImportReport> r = Buffer(cut, "cut.json", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
  const std::string& m = r.error().message;
  EXPECT_EQ(m.rfind("cut.json: not valid JSON at line 5, column 41 (byte 200): ", 0), 0u) << m;
  EXPECT_NE(m.find("(the file ends there: truncated?)"), std::string::npos) << m;
  // A syntax error in the middle names its own place, and is not called a truncation.
  std::string broken = plain;
  broken.replace(broken.find("\"conv2\""), 7, "conv2");
  r = Buffer(broken, "broken.json", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("broken.json: not valid JSON at line 9, column 10 (byte 443)"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("truncated"), std::string::npos) << r.error().message;
}

TEST(ImportersTest, ShareGptWithoutItsArrayNamesTheConversationId) {
  const std::string text =
      R"([{"id": "abc-123", "turns": []}, {"id": "ok", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}])";
  Result<ImportReport> r = Buffer(text, "s.json", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.error().message,
      "s.json: conversation 1 (id \"abc-123\"): no \"conversations\" (or \"messages\") array");
  ImportOptions skip;
  skip.skip_invalid = true;
  r = Buffer(text, "s.json", nullptr, skip);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->rows, 1u);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_NE(r->skipped[0].first_message.find("(id \"abc-123\")"), std::string::npos);
}

TEST(ImportersTest, ShareGptRowsAsJsonlAreShareGpt) {
  // The array file, one conversation a line, reads to the same requests (source lines differ).
  const std::string jsonl =
      R"({"id": "conv1", "conversations": [{"from": "system", "value": "You are a helpful assistant."}, {"from": "human", "value": "What is a KV cache?"}, {"from": "gpt", "value": "It stores the keys and values of earlier tokens so they are not recomputed."}, {"from": "human", "value": "And paged attention?"}, {"from": "gpt", "value": "It keeps the KV cache in fixed-size blocks, like virtual memory pages."}]})"
      "\n"
      R"({"id": "conv2", "conversations": [{"from": "human", "value": "Hello"}, {"from": "gpt", "value": "Hi! How can I help?"}, {"from": "human", "value": "Never mind"}]})"
      "\n";
  std::vector<TraceRequest> from_lines, from_array;
  Result<ImportReport> lines = Buffer(jsonl, "s.jsonl", &from_lines);
  ASSERT_TRUE(lines.ok()) << lines.error().message;
  EXPECT_EQ(lines->format, TraceFormat::kShareGpt);
  EXPECT_FALSE(lines->arrivals_known);
  ASSERT_TRUE(Buffer(ReadFile(TraceData("sharegpt_small.json")).value(), "s.json", &from_array).ok());
  ASSERT_EQ(from_lines.size(), from_array.size());
  for (std::size_t i = 0; i < from_lines.size(); ++i) {
    from_lines[i].source_line = from_array[i].source_line = 0;
    EXPECT_EQ(from_lines[i], from_array[i]) << i;
  }
  // Chat "messages" without a timestamp are conversations too, not OpenAI log rows missing one.
  const std::string messages =
      R"({"id": 7, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]})"
      "\n";
  std::vector<TraceRequest> rows;
  Result<ImportReport> m = Buffer(messages, "m.jsonl", &rows);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->format, TraceFormat::kShareGpt);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].session_id, "7");
  // With a timestamp, the same line is an OpenAI log row.
  EXPECT_EQ(*DetectTraceFormat(R"({"timestamp": 1, "messages": [], "max_tokens": 5})", "x"),
            TraceFormat::kOpenAiLog);
  // A bad line names file:line and the conversation id.
  const std::string bad = jsonl + R"({"id": "conv3", "conversations": 5})" + "\n";
  Result<ImportReport> b = Buffer(bad, "b.jsonl", nullptr);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message,
            "b.jsonl:3 (id \"conv3\"): no \"conversations\" (or \"messages\") array");
}

// A line holding only white space is a blank line in every format: ignored, with or without
// --skip-invalid, and counted in a note.
TEST(ImportersTest, WhitespaceOnlyLinesAreBlankLinesAndNoted) {
  const std::string mooncake =
      "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n \n"
      "{\"timestamp\": 10, \"input_length\": 6, \"output_length\": 2}\n\t \n\n";
  const std::string csv =
      "Timestamp,Model,Request tokens,Response tokens\n1,GPT,10,2\n   \n2,GPT,10,2\n";
  for (const auto& [text, name] : {std::pair{mooncake, "m.jsonl"}, std::pair{csv, "b.csv"}}) {
    for (const bool skip : {false, true}) {
      ImportOptions options;
      options.skip_invalid = skip;
      Result<ImportReport> r = Buffer(text, name, nullptr, options);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->rows, 2u);
      EXPECT_EQ(r->SkippedTotal(), 0u);
      const std::string first = std::string(name) + (std::string(name) == "m.jsonl" ? ":2" : ":3");
      const std::string note =
          std::string(name) == "m.jsonl"
              ? "3 blank lines (empty or only spaces and tabs) ignored (first: " + first + ")"
              : "1 blank line (empty or only spaces and tabs) ignored (first: " + first + ")";
      EXPECT_NE(std::find(r->notes.begin(), r->notes.end(), note), r->notes.end()) << name;
    }
  }
}

TEST(ImportersTest, BurstGptRowCutInsideItsLastColumnIsReported) {
  const std::string whole = ReadFile(TraceData("burstgpt_sessions.csv")).value();
  ASSERT_EQ(whole.back(), '\n');
  Result<ImportReport> ok = Buffer(whole, "b.csv", nullptr);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  // Cut inside "Conversation log" of the last row.
  const std::string cut = whole.substr(0, whole.size() - 5);
  Result<ImportReport> r = Buffer(cut, "b.csv", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.error().message,
      "b.csv:4: the last row ends without a line end and its \"Log Type\" \"Conversation\" is not "
      "\"Conversation log\" or \"API log\": the file looks cut short");
  // The same whole row without a final line end is fine.
  Result<ImportReport> unterminated = Buffer(whole.substr(0, whole.size() - 1), "b.csv", nullptr);
  ASSERT_TRUE(unterminated.ok()) << unterminated.error().message;
  EXPECT_EQ(unterminated->rows, ok->rows);
  // Cut inside "Total tokens" when it is the last column.
  const std::string totals =
      "Timestamp,Model,Request tokens,Response tokens,Total "
      "tokens\n1,GPT,100,20,120\n2,GPT,180,40,22";
  r = Buffer(totals, "t.csv", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(
                "t.csv:3: the last row ends without a line end and its \"Total tokens\" \"22\""),
            std::string::npos)
      << r.error().message;
  // With --skip-invalid it is counted.
  ImportOptions skip;
  skip.skip_invalid = true;
  r = Buffer(totals, "t.csv", nullptr, skip);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 1u);
  EXPECT_EQ(r->SkippedTotal(), 1u);
}

}  // namespace
}  // namespace bakeoff::workload
