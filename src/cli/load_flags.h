// cli/load_flags.h
//
// Owns: the flags that describe a load (shape, steps, limits, trace replay, SLO, output folder),
// shared by `bakeoff bench` (against a server) and `bakeoff simulate` (on the virtual clock), so
// the same command line means the same load in both; their registration, validation (one-line
// errors naming the flag) and their record in summary.json.
// Does not own: the network flags of bench or the engine flags of simulate.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/slo.h"
#include "core/result.h"
#include "load/runner.h"
#include "workload/trace.h"

namespace CLI {
class App;
}

namespace bakeoff::cli {

struct LoadFlags {
  std::string model;
  std::string api = "chat";
  bool no_stream = false;
  std::uint32_t prompt_tokens = 256;
  std::uint32_t output_tokens = 128;
  bool ignore_eos = false;
  std::vector<double> rates;
  std::vector<std::uint32_t> concurrencies;
  std::string arrival = "poisson";
  double burstiness = 1;
  std::string duration;
  std::uint64_t requests = 0;
  std::string warmup = "0s";
  std::uint64_t warmup_requests = 0;
  std::uint64_t seed = 1;
  std::string out;
  std::string slo;
  std::string trace;
  std::string trace_format = "auto";
  double time_scale = 1;
  bool skip_invalid = false;
  std::uint32_t batch = 1;          // embeddings / rerank: texts or documents per request
  std::string structured;           // json_schema, choice, regex or tool: compare against plain
  std::string structured_spec;      // a file with the schema / choices / pattern ("" = built in)
  std::vector<std::string> lora_adapters;  // compare adapters drawn per request against the base
  std::string lora_distribution = "uniform";  // or zipf:S
};

// The largest prompt or answer a flag may ask for, in tokens: beyond every served context today,
// and small enough that building such a prompt cannot exhaust the client's memory. A target's
// own context limit, where it says one, is checked before a run (run/bench.h).
inline constexpr std::uint32_t kMaxRequestTokens = 1'000'000;

// Registers the load flags on `command`.
void AddLoadOptions(CLI::App& command, LoadFlags& flags);

// The load a LoadFlags describes.
struct LoadSetup {
  std::vector<load::StepSpec> steps;  // point into `trace` for replay steps
  load::RequestShape shape;
  dialect::GenerationRequest request;  // the template: api, model, stream, ignore_eos
  std::shared_ptr<workload::Trace> trace;
  analyze::Slo slo;
  std::filesystem::path out_dir;
  std::vector<std::uint32_t> concurrencies;  // as run (1 when no step kind was chosen)
  nlohmann::json trace_import;  // replay: rows read and skipped (--skip-invalid), for summary.json
  // --structured or --lora-adapters: every step is followed by its variant (StepSpec::variant),
  // which changes requests as these say.
  std::optional<dialect::OutputConstraint> constraint;
  std::vector<std::string> lora_adapters;
  double lora_zipf = 0;
  std::string variant;  // "json_schema", "lora", ... ("" = no variant steps)
};

// Copies a setup's variant (constraint, adapters) into the target every request is built from.
void ApplyVariantTo(const LoadSetup& setup, load::TargetSpec& target);

// Validates the flags and builds the steps; kInvalidInput with a message naming the flag.
// `command` prefixes warnings printed to stderr (e.g. rows skipped in the trace).
Result<LoadSetup> BuildLoad(const LoadFlags& flags, const std::string& command);

// Parses "250ms", "30s", "5min", "1h" or a bare number of seconds.
Result<Nanos> ParseDuration(const std::string& flag, std::string text);

// A duration flag (a deadline, a timeout): its name, its text, and where its value goes.
struct DurationFlag {
  const char* name;
  const std::string* text;
  Nanos* into;
};
// Parses each flag into its place, every one a positive duration; kInvalidInput naming the first
// flag that is not.
Status ParsePositiveDurations(std::initializer_list<DurationFlag> flags);

// "5%" or "5": a percentage (0 to 1000), as a fraction.
Result<double> ParsePercent(const std::string& flag, std::string text);


// The load flags as given, for summary.json's "config".
nlohmann::json LoadFlagsJson(const LoadFlags& flags, const LoadSetup& setup);

}  // namespace bakeoff::cli
