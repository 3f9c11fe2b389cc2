// cli/synth_command.cc: `bakeoff synth`: makes a canonical JSONL trace from a fingerprint.json, a
// YAML workload shape, or an existing trace (rescaled or windowed), deterministically for a seed
// (workload/synthesis.h), and prints the fingerprint table of what it wrote. docs/workloads.md,
// "Synthesis", describes the model. A bad flag is one line naming it, exit 2.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/file.h"
#include "workload/fingerprint.h"
#include "workload/importers.h"
#include "workload/synthesis.h"
#include "workload/trace_jsonl.h"

namespace bakeoff::cli {

namespace {

struct SynthFlags {
  std::string from_fingerprint, from_shape, from_trace;
  std::uint64_t seed = 1;
  std::uint64_t requests = 0;
  double duration_s = 0;
  double rate_scale = 1;
  double time_scale = 1;
  std::string window;
  std::string out;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "bakeoff synth: %s\n", message.c_str());
  return kExitUsage;
}

// "START:END" in seconds.
bool ParseWindow(const std::string& text, std::pair<double, double>* window) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  try {
    std::size_t used = 0;
    const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    window->first = std::stod(a, &used);
    if (used != a.size()) return false;
    window->second = std::stod(b, &used);
    return used == b.size();
  } catch (const std::exception&) {
    return false;
  }
}

int RunSynth(const SynthFlags& f, bool has_requests, bool has_duration) {
  const int sources = !f.from_fingerprint.empty() + !f.from_shape.empty() + !f.from_trace.empty();
  if (sources != 1)
    return Usage("give exactly one of --from-fingerprint, --from-shape, --from-trace");
  if (f.out.empty()) return Usage("--out: required");
  workload::SynthesisOptions options;
  options.seed = f.seed;
  if (has_requests) {
    if (f.requests == 0) return Usage("--requests: must be at least 1");
    options.requests = f.requests;
  }
  if (has_duration) {
    if (!(f.duration_s > 0)) return Usage("--duration: must be > 0 seconds");
    options.duration_s = f.duration_s;
  }
  if (!(f.rate_scale > 0)) return Usage("--rate-scale: must be > 0");
  if (!(f.time_scale > 0)) return Usage("--time-scale: must be > 0");
  options.rate_scale = f.rate_scale;
  options.time_scale = f.time_scale;
  if (!f.window.empty()) {
    std::pair<double, double> w;
    if (!ParseWindow(f.window, &w) || !(w.first >= 0 && w.second > w.first)) {
      return Usage(
          fmt::format("--window: '{}' is not START:END seconds with 0 <= START < END", f.window));
    }
    options.window = w;
  }
  if (options.window && options.duration_s)
    return Usage("--window: give a window or --duration, not both");
  if (!f.from_trace.empty() && options.duration_s)
    return Usage("--duration: does not apply to --from-trace; use --window");

  Result<workload::Trace> trace = MakeError(ErrorCode::kInternal, "no source");
  if (!f.from_fingerprint.empty()) {
    Result<std::string> text = ReadFile(f.from_fingerprint);
    if (!text.ok()) return Usage("--from-fingerprint: " + text.error().message);
    Result<workload::Fingerprint> fingerprint = workload::ParseFingerprintJson(*text);
    if (!fingerprint.ok()) {
      return Usage(fmt::format("--from-fingerprint: {}: {}", f.from_fingerprint,
                               fingerprint.error().message));
    }
    trace = workload::SynthesizeFromFingerprint(*fingerprint, options);
  } else if (!f.from_shape.empty()) {
    Result<workload::WorkloadShape> shape = workload::LoadWorkloadShape(f.from_shape);
    if (!shape.ok()) return Usage("--from-shape: " + shape.error().message);
    trace = workload::SynthesizeFromShape(*shape, options);
  } else {
    workload::ImportOptions import;
    Result<workload::Trace> loaded = workload::LoadTrace(f.from_trace, import);
    if (!loaded.ok()) return Usage("--from-trace: " + loaded.error().message);
    if (Status applied = workload::ApplyTimeOptions(*loaded, options); !applied.ok()) {
      return Usage(applied.error().message);
    }
    trace = std::move(loaded);
  }
  if (!trace.ok()) {
    std::fprintf(stderr, "bakeoff synth: %s\n", trace.error().message.c_str());
    return trace.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
  }
  if (Status written = workload::WriteTraceJsonl(*trace, f.out); !written.ok()) {
    std::fprintf(stderr, "bakeoff synth: %s\n", written.error().message.c_str());
    return kExitFailure;
  }
  workload::Fingerprint fingerprint = workload::FingerprintTrace(*trace);
  fingerprint.source = f.out;
  const std::string table = workload::FormatFingerprintTable(fingerprint);
  std::fwrite(table.data(), 1, table.size(), stdout);
  return kExitOk;
}

}  // namespace

void AddSynthCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<SynthFlags>();
  auto* c = app.add_subcommand(
      "synth", "Make a trace from a fingerprint, a YAML shape or a trace (docs/workloads.md)");
  c->add_option("--from-fingerprint", flags->from_fingerprint,
                "fingerprint.json written by `bakeoff fingerprint --out`");
  c->add_option("--from-shape", flags->from_shape,
                "YAML workload shape (examples/workloads/*.yaml)");
  c->add_option("--from-trace", flags->from_trace,
                "Existing trace in any supported format (- for standard input; gzip or zstd), to "
                "rescale or window");
  c->add_option("--seed", flags->seed, "Random seed; the same seed gives the same trace")
      ->capture_default_str();
  auto* requests =
      c->add_option("--requests", flags->requests, "Requests to make (default: the source's)");
  auto* duration = c->add_option("--duration", flags->duration_s,
                                 "Seconds of arrivals to make, before --time-scale");
  requests->excludes(duration);
  c->add_option("--rate-scale", flags->rate_scale,
                "Multiply the request rate (think times unchanged)")
      ->capture_default_str();
  c->add_option("--time-scale", flags->time_scale,
                "Multiply every time (2 stretches, 0.5 compresses)")
      ->capture_default_str();
  c->add_option("--window", flags->window,
                "START:END seconds: keep arrivals in [START, END), moved to start at 0");
  c->add_option("--out", flags->out, "Canonical JSONL trace to write")->required();
  c->callback([flags, exit_code, requests, duration] {
    *exit_code = RunSynth(*flags, requests->count() > 0, duration->count() > 0);
  });
}

}  // namespace bakeoff::cli
