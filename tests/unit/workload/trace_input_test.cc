// tests/unit/workload/trace_input_test.cc
//
// Owns: reading traces in one pass (workload/trace_input.h) through every importer: each small
// trace of tests/testdata/traces/ and the two real traces of ../shared/data (when present) read
// through standard input ("-"), a pipe (/dev/fd/N, as `<(cat f)` gives), gzip and zstd files
// (made at test time with the gzip and zstd tools) and compressed bytes through a pipe, give
// exactly the rows and report of the plain file; concatenated gzip members read as one; truncated
// and corrupt compressed input, other compressions and folders are refused with a message.
#include "workload/trace_input.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/file.h"
#include "workload/importers.h"
#include "support/scratch.h"
#include "import_test_util.h"

namespace bakeoff::workload {
namespace {

namespace fs = std::filesystem;

fs::path Scratch() {
  const fs::path dir =
      bakeoff::testing::ScratchRoot() / fmt::format("bakeoff_trace_input_{}", ::getpid());
  fs::create_directories(dir);
  return dir;
}

// Writes `bytes` into a pipe from another thread while `read` runs with the pipe's read end.
template <typename Read>
Imported ThroughPipe(const std::string& bytes, Read&& read) {
  std::signal(SIGPIPE, SIG_IGN);  // the writer of a pipe whose reader stopped gets EPIPE instead
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  std::thread writer([&bytes, fd = fds[1]] {
    std::size_t at = 0;
    while (at < bytes.size()) {
      // Small writes, so the reader sees many short reads, as from a slow producer.
      const ssize_t n =
          ::write(fd, bytes.data() + at, std::min<std::size_t>(bytes.size() - at, 1000));
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::close(fd);
  });
  Imported out = read(fds[0]);
  ::close(fds[0]);  // a reader that stopped early must not leave the writer blocked
  writer.join();
  return out;
}

Imported ViaDevFd(const std::string& bytes, const ImportOptions& options) {
  return ThroughPipe(bytes, [&](int fd) { return ImportPath(fmt::format("/dev/fd/{}", fd), options); });
}

Imported ViaStdin(const std::string& bytes, const ImportOptions& options) {
  return ThroughPipe(bytes, [&](int fd) {
    const int saved = ::dup(STDIN_FILENO);
    ::dup2(fd, STDIN_FILENO);
    Imported out = ImportPath("-", options);
    ::dup2(saved, STDIN_FILENO);
    ::close(saved);
    return out;
  });
}

std::string Compressed(const std::string& tool, const std::string& path) {
  const fs::path out = Scratch() / (fs::path(path).filename().string() + "." + tool);
  const std::string command = fmt::format("{} -c -q '{}' > '{}'", tool, path, out.string());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return out.string();
}

// The same rows, and the same report but for the source's name and the compression note.
void ExpectSame(const Imported& plain, const Imported& other, const std::string& what) {
  ASSERT_TRUE(plain.report.ok()) << plain.report.error().message;
  ASSERT_TRUE(other.report.ok()) << what << ": " << other.report.error().message;
  EXPECT_EQ(other.rows, plain.rows) << what;
  EXPECT_EQ(other.blocks, plain.blocks) << what;
  const ImportReport& a = *plain.report;
  const ImportReport& b = *other.report;
  EXPECT_EQ(b.format, a.format) << what;
  EXPECT_EQ(b.block_tokens, a.block_tokens) << what;
  EXPECT_EQ(b.arrivals_known, a.arrivals_known) << what;
  EXPECT_EQ(b.origin_unix_ns, a.origin_unix_ns) << what;
  EXPECT_EQ(b.lines, a.lines) << what;
  EXPECT_EQ(b.rows, a.rows) << what;
  EXPECT_EQ(b.rows_out_of_order, a.rows_out_of_order) << what;
  EXPECT_EQ(b.rows_tokens_estimated, a.rows_tokens_estimated) << what;
  EXPECT_EQ(b.SkippedTotal(), a.SkippedTotal()) << what;
  std::vector<std::string> notes;
  for (const std::string& n : b.notes) {
    if (n.find("-compressed input") == std::string::npos) notes.push_back(n);
  }
  // Notes name lines as "file:line"; compare them without the file.
  auto strip = [](std::vector<std::string> v, const std::string& name) {
    for (std::string& s : v) {
      for (std::size_t at; (at = s.find(name)) != std::string::npos;) s.erase(at, name.size());
    }
    return v;
  };
  EXPECT_EQ(strip(notes, b.source), strip(a.notes, a.source)) << what;
}

void ExpectEveryWayReadsTheSame(const std::string& path, const ImportOptions& options) {
  const Imported plain = ImportPath(path, options);
  ASSERT_TRUE(plain.report.ok()) << path << ": " << plain.report.error().message;
  ASSERT_GT(plain.rows.size(), 0u);
  const std::string bytes = ReadFile(path).value();
  ExpectSame(plain, ViaStdin(bytes, options), path + " through stdin");
  ExpectSame(plain, ViaDevFd(bytes, options), path + " through a pipe");
  for (const std::string tool : {"gzip", "zstd"}) {
    const std::string packed = Compressed(tool, path);
    const Imported unpacked = ImportPath(packed, options);
    ExpectSame(plain, unpacked, packed);
    ASSERT_TRUE(unpacked.report.ok());
    EXPECT_NE(std::find(unpacked.report->notes.begin(), unpacked.report->notes.end(),
                        fmt::format("read {}-compressed input", tool)),
              unpacked.report->notes.end());
    ExpectSame(plain, ViaStdin(ReadFile(packed).value(), options), packed + " through stdin");
  }
}

TEST(TraceInputTest, EveryImporterReadsStdinPipesGzipAndZstdAsThePlainFile) {
  for (const char* name :
       {"azure_small.csv", "azure_unsorted.csv", "burstgpt_small.csv", "burstgpt_sessions.csv",
        "mooncake_small.jsonl", "openai_log.jsonl", "sharegpt_small.json", "trace_small.jsonl"}) {
    SCOPED_TRACE(name);
    ImportOptions options;
    options.skip_invalid = true;  // openai_log.jsonl has a row to skip; the counts must agree too
    ExpectEveryWayReadsTheSame(TraceData(name), options);
  }
  ImportOptions generic;
  generic.format = TraceFormat::kCsv;
  generic.columns = *ParseCsvColumns(
      "time=ts_ms,input=prompt,output=completion,group=tenant,model=lora,structured=json");
  ExpectEveryWayReadsTheSame(TraceData("generic.csv"), generic);
  // With an explicit format too (`--format` given with a pipe).
  ImportOptions mooncake;
  mooncake.format = TraceFormat::kMooncake;
  ExpectEveryWayReadsTheSame(TraceData("mooncake_small.jsonl"), mooncake);
  // Skipped rows are counted the same way.
  ImportOptions skip;
  skip.skip_invalid = true;
  ExpectEveryWayReadsTheSame(TraceData("mooncake_broken.jsonl"), skip);
}

TEST(TraceInputTest, TheRealTracesReadTheSameCompressedAndPiped) {
  const fs::path shared =
      fs::path(BAKEOFF_TESTDATA_DIR).parent_path().parent_path().parent_path() / "shared";
  const fs::path traces = shared / "data" / "traces";
  if (!fs::exists(traces)) GTEST_SKIP() << "no " << traces;
  ExpectEveryWayReadsTheSame((traces / "AzureLLMInferenceTrace_conv.csv").string(), {});
  ExpectEveryWayReadsTheSame((traces / "mooncake_conversation_trace.jsonl").string(), {});
}

TEST(TraceInputTest, HeadDoesNotConsumeAndConcatenatedGzipMembersReadAsOne) {
  const fs::path dir = Scratch();
  const fs::path a = dir / "a.txt", b = dir / "b.txt", both = dir / "ab.gz";
  ASSERT_TRUE(WriteFileAtomically(a, "first member\n").ok());
  ASSERT_TRUE(WriteFileAtomically(b, "second member\n").ok());
  const std::string command =
      fmt::format("(gzip -c '{}'; gzip -c '{}') > '{}'", a.string(), b.string(), both.string());
  ASSERT_EQ(std::system(command.c_str()), 0);
  Result<std::unique_ptr<TraceInput>> in = TraceInput::Open(both);
  ASSERT_TRUE(in.ok()) << in.error().message;
  EXPECT_EQ((*in)->compression(), Compression::kGzip);
  Result<std::string_view> head = (*in)->Head(5);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "first");
  Result<std::string> all = (*in)->ReadAll();
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(*all, "first member\nsecond member\n");
}

TEST(TraceInputTest, TruncatedOrCorruptCompressedInputIsRefusedWithWhere) {
  const std::string path = TraceData("mooncake_small.jsonl");
  for (const std::string tool : {"gzip", "zstd"}) {
    const std::string packed = ReadFile(Compressed(tool, path)).value();
    const std::string cut = packed.substr(0, packed.size() - 6);
    Result<ImportReport> r =
        ImportTraceBuffer(cut, "cut." + tool, {}, [](const TraceRequest&, std::uint32_t) {});
    ASSERT_FALSE(r.ok()) << tool;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
    EXPECT_NE(r.error().message.find(fmt::format("cut.{}: {} data ends early", tool, tool)),
              std::string::npos)
        << r.error().message;
    std::string corrupt = packed;
    for (std::size_t i = 12; i < corrupt.size() - 8; i += 3)
      corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    r = ImportTraceBuffer(corrupt, "bad." + tool, {}, [](const TraceRequest&, std::uint32_t) {});
    ASSERT_FALSE(r.ok()) << tool;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
    EXPECT_NE(r.error().message.find(
                  fmt::format("bad.{}: {} data is corrupt near compressed byte", tool, tool)),
              std::string::npos)
        << r.error().message;
  }
}

TEST(TraceInputTest, OtherCompressionsAndFoldersAreRefusedWithAClearMessage) {
  Result<ImportReport> xz =
      ImportTraceBuffer(std::string("\xfd"
                                    "7zXZ\0\0",
                                    7),
                        "t.csv.xz", {}, [](const TraceRequest&, std::uint32_t) {});
  ASSERT_FALSE(xz.ok());
  EXPECT_NE(xz.error().message.find("t.csv.xz: the content is xz-compressed"), std::string::npos)
      << xz.error().message;
  EXPECT_NE(xz.error().message.find("xz -dc FILE | bakeoff fingerprint -"), std::string::npos);
  const Imported folder = ImportPath(Scratch().string(), {});
  ASSERT_FALSE(folder.report.ok());
  EXPECT_EQ(folder.report.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(folder.report.error().message.find("is a folder"), std::string::npos)
      << folder.report.error().message;
  const Imported missing = ImportPath("/nonexistent/trace.csv.gz", {});
  ASSERT_FALSE(missing.report.ok());
  EXPECT_NE(missing.report.error().message.find("/nonexistent/trace.csv.gz: cannot open"),
            std::string::npos);
}

TEST(TraceInputTest, StdinIsNamedInMessages) {
  const Imported bad =
      ViaStdin("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}\n{oops\n", {});
  ASSERT_FALSE(bad.report.ok());
  EXPECT_EQ(bad.report.error().message, "<stdin>:2: not valid JSON");
}

}  // namespace
}  // namespace bakeoff::workload
