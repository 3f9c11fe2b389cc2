// workload/synthesis.h
//
// Owns: making traces that have a given shape (docs/workloads.md, "Synthesis"): from a fingerprint
// (arrival rate, its profile over time or by hour of day, burstiness and same-instant batches,
// the two length distributions and their correlation, prefix reuse, sessions, the model and
// structured-output mix) or from a small YAML shape
// (WorkloadShape); and the time transforms (rate scale, stretch, window) on any trace. The same
// seed and options give the same trace, byte for byte once written (trace_jsonl.h).
// Does not own: measuring a trace (fingerprint.h) or reading files other than the shape YAML.
//
// Thread-safety: pure functions.
// Units: seconds, requests per second, tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "workload/fingerprint.h"
#include "workload/trace.h"

namespace bakeoff::workload {

struct SynthesisOptions {
  std::uint64_t seed = 1;
  // How much to make; at most one of the two. Neither: the source's request count (a fingerprint)
  // or duration (a shape), or up to the window's end when a window is given.
  std::optional<std::uint64_t> requests;
  std::optional<double> duration_s;  // of arrivals, before time_scale and window
  double rate_scale = 1;  // > 0: x times the request rate (session think times unchanged)
  double time_scale = 1;  // > 0: every time (arrivals, think times) multiplied by it; 2 = stretch
  // Keep only arrivals in [start, end) after scaling, moved so that `start` becomes 0.
  std::optional<std::pair<double, double>> window;
};

// Checks the option ranges; the message names the option.
Status ValidateSynthesisOptions(const SynthesisOptions& options);

// A length distribution of a shape.
struct LengthShape {
  enum class Kind { kFixed, kLognormal, kUniform };
  Kind kind = Kind::kFixed;
  double fixed = 0;            // kFixed
  double median = 0, p99 = 0;  // kLognormal; REQUIRES: 0 < median <= p99
  double min = 0, max = 0;     // kUniform; REQUIRES: 0 <= min <= max
};

struct WorkloadShape {
  std::string source;  // the file it came from, for the trace's header
  double rate_per_s = 1;
  enum class Arrival { kPoisson, kGamma, kConstant };
  Arrival arrival = Arrival::kPoisson;
  double burstiness = 1;    // Gamma shape k (kGamma); CV = 1 / sqrt(k)
  std::optional<double> duration_s;
  std::optional<std::uint64_t> requests;
  LengthShape input_tokens, output_tokens;
  double correlation = 0;   // of log lengths, -1..1 (Gaussian copula)
  std::uint32_t block_tokens = 512;
  std::uint32_t prefix_tokens = 0;  // shared prefix (system prompt) length; 0: none
  double prefix_share = 0;          // share of requests that carry it
  std::uint32_t prefix_groups = 1;  // distinct shared prefixes, chosen uniformly
  double turns_mean = 0;            // sessions when >= 1: turns per session, geometric
  double think_time_s = 0;          // mean think time between turns, exponential
  double structured_share = 0;
  std::vector<std::pair<std::string, double>> models;  // name, weight
};

// Parses the YAML shape; errors read "file:line: field: what is wrong" (kInvalidInput).
Result<WorkloadShape> ParseWorkloadShape(std::string_view yaml, const std::string& file_name);
Result<WorkloadShape> LoadWorkloadShape(const std::filesystem::path& path);

// REQUIRES nothing of the fingerprint; a fingerprint without arrival times gives arrivals at 0.
Result<Trace> SynthesizeFromFingerprint(const Fingerprint& fingerprint, const SynthesisOptions& options);
Result<Trace> SynthesizeFromShape(const WorkloadShape& shape, const SynthesisOptions& options);

// Transforms of an existing trace (sorted by arrival_s), applied in this order by ApplyTimeOptions.
// Rate scale divides arrival times by `factor` (think times unchanged); time scale multiplies
// arrival and think times; the window keeps [start, end) and subtracts start.
void ScaleRate(Trace& trace, double factor);
void ScaleTime(Trace& trace, double factor);
void ApplyWindow(Trace& trace, double start_s, double end_s);
// Rate scale, time scale, window and then the request cap of `options` (seed and duration unused).
Status ApplyTimeOptions(Trace& trace, const SynthesisOptions& options);

// The fingerprint of an in-memory trace, as `bakeoff fingerprint` of its canonical JSONL gives.
Fingerprint FingerprintTrace(const Trace& trace);

}  // namespace bakeoff::workload
