// cli/fingerprint_command.cc: `bakeoff fingerprint FILE`: imports a trace in any supported format
// (workload/importers.h), prints the fingerprint table and writes fingerprint.json to --out;
// --write-trace also writes the canonical JSONL. A malformed row stops the command with
// `file:line: what is wrong` (exit 2) unless --skip-invalid, which reports what was skipped.
// docs/workloads.md explains the figures.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/file.h"
#include "workload/fingerprint.h"
#include "workload/importers.h"
#include "workload/trace_jsonl.h"

namespace bakeoff::cli {

namespace {

struct FingerprintFlags {
  std::string file;
  std::string format = "auto";
  std::string out;
  std::string write_trace;
  bool skip_invalid = false;
  unsigned block_tokens = 0;
  std::string columns;
  std::string time_unit = "auto";
  bool json = false;
};

int ExitFor(const Error& error) {
  return error.code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
}

int RunFingerprint(const FingerprintFlags& f) {
  workload::ImportOptions options;
  Result<workload::TraceFormat> format = workload::ParseTraceFormat(f.format);
  if (!format.ok()) {
    std::fprintf(stderr, "bakeoff fingerprint: --format: %s\n", format.error().message.c_str());
    return kExitUsage;
  }
  options.format = *format;
  Result<workload::TimeUnit> unit = workload::ParseTimeUnit(f.time_unit);
  if (!unit.ok()) {
    std::fprintf(stderr, "bakeoff fingerprint: --time-unit: %s\n", unit.error().message.c_str());
    return kExitUsage;
  }
  options.time_unit = *unit;
  if (!f.columns.empty()) {
    Result<workload::CsvColumns> columns = workload::ParseCsvColumns(f.columns);
    if (!columns.ok()) {
      std::fprintf(stderr, "bakeoff fingerprint: --columns: %s\n", columns.error().message.c_str());
      return kExitUsage;
    }
    options.columns = *columns;
  }
  options.skip_invalid = f.skip_invalid;
  options.block_tokens = f.block_tokens;

  workload::ImportReport report;
  std::optional<workload::Fingerprint> fingerprint;
  if (!f.write_trace.empty()) {
    // The canonical file is written sorted, so the whole trace is held in memory here.
    Result<workload::Trace> trace = workload::LoadTrace(f.file, options, &report);
    if (!trace.ok()) {
      std::fprintf(stderr, "bakeoff fingerprint: %s\n", trace.error().message.c_str());
      return ExitFor(trace.error());
    }
    if (Status written = workload::WriteTraceJsonl(*trace, f.write_trace); !written.ok()) {
      std::fprintf(stderr, "bakeoff fingerprint: %s\n", written.error().message.c_str());
      return kExitFailure;
    }
    workload::FingerprintBuilder builder;
    for (const workload::TraceRequest& r : trace->requests) {
      builder.Add(r, r.prefix_hashes.empty() ? 0 : trace->block_tokens);
    }
    report.origin_unix_ns =
        trace->origin_unix_ns;  // LoadTrace moved arrivals (and it) to the earliest
    fingerprint = builder.Finish(report);
  } else {
    Result<workload::Fingerprint> computed = workload::FingerprintFile(f.file, options, &report);
    if (!computed.ok()) {
      std::fprintf(stderr, "bakeoff fingerprint: %s\n", computed.error().message.c_str());
      return ExitFor(computed.error());
    }
    fingerprint = std::move(*computed);
  }
  if (report.SkippedTotal() > 0)
    std::fprintf(stderr, "bakeoff fingerprint: %s\n", report.SkippedSummary().c_str());
  const std::string json = workload::FingerprintJson(*fingerprint);
  if (!f.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.out, ec);
    if (ec) {
      std::fprintf(stderr, "bakeoff fingerprint: --out %s: %s\n", f.out.c_str(),
                   ec.message().c_str());
      return kExitFailure;
    }
    const std::filesystem::path path = std::filesystem::path(f.out) / "fingerprint.json";
    if (Status written = WriteFileAtomically(path, json); !written.ok()) {
      std::fprintf(stderr, "bakeoff fingerprint: %s\n", written.error().message.c_str());
      return kExitFailure;
    }
  }
  const std::string text = f.json ? json : workload::FormatFingerprintTable(*fingerprint);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace

void AddFingerprintCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<FingerprintFlags>();
  auto* c =
      app.add_subcommand("fingerprint", "Describe a request trace's shape (docs/workloads.md)");
  c->add_option("file", flags->file,
                "Trace file, or - for standard input; gzip and zstd are read directly (format "
                "detected from the content)")
      ->required();
  c->add_option("--format", flags->format,
                "auto, trace, mooncake, azure-csv, burstgpt-csv, sharegpt, csv or openai-log")
      ->capture_default_str();
  c->add_option("--out", flags->out, "Folder to write fingerprint.json into");
  c->add_option("--write-trace", flags->write_trace,
                "Also write the trace as canonical JSONL to this file");
  c->add_flag("--skip-invalid", flags->skip_invalid,
              "Skip malformed rows (counted by kind) instead of stopping");
  c->add_option(
      "--block-tokens", flags->block_tokens,
      "Tokens per prefix block (default: the source's, 512 for Mooncake; 16 for ids from text)");
  c->add_option(
      "--columns", flags->columns,
      "Generic CSV mapping: "
      "time=COL,input=COL,output=COL[,session=,turn=,model=,priority=,group=,structured=]");
  c->add_option("--time-unit", flags->time_unit, "Numeric timestamps: auto, s, ms, us or ns")
      ->capture_default_str();
  c->add_flag("--json", flags->json, "Print fingerprint.json instead of the table");
  c->callback([flags, exit_code] { *exit_code = RunFingerprint(*flags); });
}

}  // namespace bakeoff::cli
