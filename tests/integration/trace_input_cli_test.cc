// The built binary reads traces however they are handed to it: `bakeoff fingerprint` of a file
// through `-` (standard input), `<(cat f)`, `/dev/stdin`, gzip and zstd files, and compressed
// bytes through a pipe, writes the same fingerprint.json as of the plain file; `synth
// --from-trace -` and `simulate --trace` of a compressed pipe work; a rate scale or a window on a
// trace without arrival times is refused with exit 2.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file.h"
#include "support/scratch.h"

namespace bakeoff {
namespace {

namespace fs = std::filesystem;

fs::path Scratch() {
  const fs::path dir = bakeoff::testing::ScratchRoot() / fmt::format("bakeoff_trace_cli_{}", ::getpid());
  fs::create_directories(dir);
  return dir;
}

std::string Data(const std::string& name) {
  return (fs::path(BAKEOFF_SOURCE_DIR) / "tests" / "testdata" / "traces" / name).string();
}

struct Shell {
  int exit_code = -1;
  std::string output;
};

// Runs `script` with bash (for <(...)), BAKEOFF set to the binary; stdout and stderr together.
Shell Bash(const std::string& script) {
  const fs::path out = Scratch() / "shell.out";
  const fs::path file = Scratch() / "script.sh";
  EXPECT_TRUE(
      WriteFileAtomically(file, fmt::format("BAKEOFF='{}'\n{}\n", BAKEOFF_BINARY, script)).ok());
  const std::string command = fmt::format("bash '{}' > '{}' 2>&1", file.string(), out.string());
  const int status = std::system(command.c_str());
  Shell s;
  s.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  Result<std::string> output = ReadFile(out);
  if (output.ok()) s.output = *output;
  return s;
}

// fingerprint.json without the fields that name the input.
nlohmann::json Comparable(const fs::path& dir) {
  nlohmann::json j = nlohmann::json::parse(ReadFile(dir / "fingerprint.json").value());
  j.erase("source");
  nlohmann::json notes = nlohmann::json::array();
  for (const auto& n : j["notes"]) {
    if (n.get<std::string>().find("-compressed input") == std::string::npos) notes.push_back(n);
  }
  j["notes"] = notes;
  return j;
}

TEST(TraceInputCliTest, FingerprintReadsStdinPipesAndCompressedInputLikeTheFile) {
  for (const char* name : {"azure_small.csv", "burstgpt_sessions.csv", "mooncake_small.jsonl",
                           "sharegpt_small.json", "trace_small.jsonl"}) {
    SCOPED_TRACE(name);
    const fs::path dir = Scratch() / name;
    const std::string f = Data(name);
    const std::string script = fmt::format(
        "set -e\nd='{0}'\nf='{1}'\n"
        "$BAKEOFF fingerprint \"$f\" --out \"$d/plain\" > /dev/null\n"
        "cat \"$f\" | $BAKEOFF fingerprint - --out \"$d/stdin\" > /dev/null\n"
        "$BAKEOFF fingerprint <(cat \"$f\") --out \"$d/subst\" > /dev/null\n"
        "cat \"$f\" | $BAKEOFF fingerprint /dev/stdin --out \"$d/devstdin\" > /dev/null\n"
        "gzip -c \"$f\" > \"$d/t.gz\"\n"
        "$BAKEOFF fingerprint \"$d/t.gz\" --out \"$d/gzip\" > /dev/null\n"
        "zstd -q -c \"$f\" > \"$d/t.zst\"\n"
        "$BAKEOFF fingerprint \"$d/t.zst\" --out \"$d/zstd\" > /dev/null\n"
        "zstd -q -c \"$f\" | $BAKEOFF fingerprint - --out \"$d/zstd-pipe\" > /dev/null\n"
        "$BAKEOFF fingerprint <(gzip -c \"$f\") --out \"$d/gzip-subst\" > /dev/null\n",
        dir.string(), f);
    const Shell s = Bash(script);
    ASSERT_EQ(s.exit_code, 0) << s.output;
    const nlohmann::json plain = Comparable(dir / "plain");
    for (const char* way :
         {"stdin", "subst", "devstdin", "gzip", "zstd", "zstd-pipe", "gzip-subst"}) {
      EXPECT_EQ(Comparable(dir / way), plain) << way;
    }
  }
}

TEST(TraceInputCliTest, SynthAndSimulateReadPipedAndCompressedTraces) {
  const fs::path dir = Scratch() / "synth";
  const Shell s = Bash(
      fmt::format("set -e\nd='{0}'\nmkdir -p \"$d\"\n"
                  "cat '{1}' | $BAKEOFF synth --from-trace - --out \"$d/a.jsonl\" > /dev/null\n"
                  "$BAKEOFF synth --from-trace '{1}' --out \"$d/b.jsonl\" > /dev/null\n"
                  "gzip -c '{1}' | $BAKEOFF simulate --trace - --out \"$d/sim\" > /dev/null\n",
                  dir.string(), Data("mooncake_small.jsonl")));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  // The written traces differ only in the source they name.
  auto body = [](const fs::path& p) {
    const std::string text = ReadFile(p).value();
    return text.substr(text.find('\n'));
  };
  EXPECT_EQ(body(dir / "a.jsonl"), body(dir / "b.jsonl"));
  const auto summary = nlohmann::json::parse(ReadFile(dir / "sim" / "summary.json").value());
  EXPECT_EQ(summary["steps"][0]["requests"]["outcomes"].value("ok", 0), 4)
      << summary["steps"][0]["requests"].dump();
}

TEST(TraceInputCliTest, RateScaleAndWindowWithoutArrivalTimesExitTwo) {
  for (const char* flags : {"--rate-scale 2", "--window 0:10", "--time-scale 3"}) {
    const Shell s =
        Bash(fmt::format("$BAKEOFF synth --from-trace '{}' {} --out '{}'",
                         Data("sharegpt_small.json"), flags, (Scratch() / "no.jsonl").string()));
    EXPECT_EQ(s.exit_code, 2) << flags << ": " << s.output;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_NE(s.output.find("(" + flag + "): "), std::string::npos) << s.output;
    EXPECT_NE(s.output.find("has no arrival"), std::string::npos) << s.output;
  }
}

}  // namespace
}  // namespace bakeoff
