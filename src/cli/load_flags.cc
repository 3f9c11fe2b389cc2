// cli/load_flags.cc: the load flags shared by bench and simulate (contract in load_flags.h).
#include "cli/load_flags.h"

#include <algorithm>
#include <ctime>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/file.h"
#include "core/yaml_doc.h"
#include "workload/importers.h"

namespace bakeoff::cli {

void AddLoadOptions(CLI::App& c, LoadFlags& f) {
  c.add_option("--model", f.model, "Model name (bench default: the first listed by /v1/models)");
  c.add_option("--api", f.api,
               "Route and wire format: chat, completions (OpenAI), or an engine's native route: "
               "ollama-generate, ollama-chat, tgi-generate, triton-generate, kserve-infer")
      ->capture_default_str();
  c.add_flag("--no-stream", f.no_stream, "Ask for whole responses instead of SSE streams");
  c.add_option("--prompt-tokens", f.prompt_tokens, "Prompt length in tokens")
      ->capture_default_str();
  c.add_option("--output-tokens", f.output_tokens, "max_tokens per request")->capture_default_str();
  c.add_flag("--ignore-eos", f.ignore_eos,
             "Send ignore_eos and min_tokens so every answer has --output-tokens tokens");
  c.add_option("--rate", f.rates, "Open loop: requests per second; a list sweeps")->delimiter(',');
  c.add_option("--concurrency", f.concurrencies, "Closed loop: requests in flight; a list sweeps")
      ->delimiter(',');
  c.add_option("--arrival", f.arrival, "Open-loop arrivals: constant, poisson or gamma")
      ->capture_default_str();
  c.add_option("--burstiness", f.burstiness, "Gamma shape: 1 = Poisson, below 1 = burstier")
      ->capture_default_str();
  c.add_option("--duration", f.duration, "Measurement window per step, e.g. 30s");
  c.add_option("--requests", f.requests, "Measured requests per step");
  c.add_option("--warmup", f.warmup,
               "Warm-up before each step's measurement, by intended send time")
      ->capture_default_str();
  c.add_option("--warmup-requests", f.warmup_requests, "Warm-up requests per step");
  c.add_option("--seed", f.seed, "Seed for arrivals and prompt text")->capture_default_str();
  c.add_option("--out", f.out, "Output folder (default out/<command>-<time>)");
  c.add_option("--slo", f.slo, "SLO terms, e.g. ttft_p99=500ms,tpot_p99=50ms,e2e_p99=20s");
  c.add_option("--trace", f.trace,
               "Replay a request trace (a file, - for standard input, gzip or zstd): its arrivals, "
               "lengths, prefixes and sessions");
  c.add_option("--trace-format", f.trace_format, "Trace format (see bakeoff fingerprint --help)")
      ->capture_default_str();
  c.add_option("--time-scale", f.time_scale,
               "Replay: multiply arrival and think times (0.1 = ten times faster)")
      ->capture_default_str();
  c.add_flag("--skip-invalid", f.skip_invalid,
             "Replay: skip malformed trace rows (counted and reported)");
  c.add_option("--batch", f.batch, "--api embeddings: texts per request; rerank: documents per request")
      ->capture_default_str();
  c.add_option("--structured", f.structured,
               "Structured output: json_schema, choice, regex or tool; each step runs plain, then "
               "constrained, on the same prompts");
  c.add_option("--structured-spec", f.structured_spec,
               "File with the JSON schema (json_schema, tool), a JSON list of choices, or the regex");
  c.add_option("--lora-adapters", f.lora_adapters,
               "LoRA adapter names (comma-separated); each step runs on the base model, then with an "
               "adapter drawn per request")
      ->delimiter(',');
  c.add_option("--lora-distribution", f.lora_distribution, "How adapters are drawn: uniform or zipf:S")
      ->capture_default_str();
}

namespace {

// The built-in constraint of each kind: an answer record, three choices, a short code.
constexpr const char* kDefaultSchema =
    R"({"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number"}},"required":["answer","confidence"]})";
constexpr const char* kDefaultChoices = R"(["yes","no","unsure"])";
constexpr const char* kDefaultRegex = "[A-Z]{3}-[0-9]{4}";

Result<dialect::OutputConstraint> ParseConstraint(const LoadFlags& f) {
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  dialect::OutputConstraint c;
  const char* fallback = nullptr;
  if (f.structured == "json_schema") {
    c.kind = dialect::OutputConstraint::Kind::kJsonSchema;
    fallback = kDefaultSchema;
  } else if (f.structured == "choice") {
    c.kind = dialect::OutputConstraint::Kind::kChoice;
    fallback = kDefaultChoices;
  } else if (f.structured == "regex") {
    c.kind = dialect::OutputConstraint::Kind::kRegex;
    fallback = kDefaultRegex;
  } else if (f.structured == "tool") {
    c.kind = dialect::OutputConstraint::Kind::kTool;
    fallback = kDefaultSchema;
  } else {
    return usage("--structured: '" + f.structured + "' (expected json_schema, choice, regex or tool)");
  }
  c.spec = fallback;
  if (!f.structured_spec.empty()) {
    Result<std::string> text = ReadFile(f.structured_spec);
    if (!text.ok()) return usage("--structured-spec: " + text.error().message);
    c.spec = text.value();
    while (!c.spec.empty() && (c.spec.back() == '\n' || c.spec.back() == '\r')) c.spec.pop_back();
  }
  if (c.kind == dialect::OutputConstraint::Kind::kRegex) return c;
  // A schema or a list is put into the body as it is: it must be JSON of the right shape.
  const nlohmann::json doc = nlohmann::json::parse(c.spec, nullptr, /*allow_exceptions=*/false);
  const bool list = c.kind == dialect::OutputConstraint::Kind::kChoice;
  if (doc.is_discarded() || (list ? !doc.is_array() || doc.empty() : !doc.is_object())) {
    return usage(fmt::format("--structured-spec {}: not {}", f.structured_spec,
                             list ? "a JSON list of choices" : "a JSON schema (an object)"));
  }
  if (list) {
    for (const nlohmann::json& choice : doc) {
      if (!choice.is_string()) return usage("--structured-spec " + f.structured_spec + ": every choice must be a string");
    }
  }
  c.spec = doc.dump();
  return c;
}

}  // namespace

void ApplyVariantTo(const LoadSetup& setup, load::TargetSpec& target) {
  target.constraint = setup.constraint;
  target.lora_adapters = setup.lora_adapters;
  target.lora_zipf = setup.lora_zipf;
}

Result<double> ParsePercent(const std::string& flag, std::string text) {
  if (text.ends_with('%')) text.pop_back();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(value >= 0) || value > 1000) {
    return MakeError(ErrorCode::kInvalidInput, flag + ": '" + text + "' is not a percentage (e.g. 5%)");
  }
  return value / 100;
}

Result<Nanos> ParseDuration(const std::string& flag, std::string text) {
  double scale = 1;
  for (const auto& [suffix, factor] : std::initializer_list<std::pair<const char*, double>>{
           {"ms", 1e-3}, {"min", 60}, {"h", 3600}, {"s", 1}}) {
    const std::string_view s = suffix;
    if (text.size() > s.size() && text.ends_with(s)) {
      text.resize(text.size() - s.size());
      scale = factor;
      break;
    }
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(value >= 0)) {
    return MakeError(ErrorCode::kInvalidInput,
                     flag + ": '" + text + "' is not a duration (e.g. 250ms, 30s, 5min)");
  }
  if (value * scale > kMaxDurationSeconds) {
    return MakeError(
        ErrorCode::kInvalidInput,
        fmt::format("{}: longer than bakeoff accepts ({:g} s)", flag, kMaxDurationSeconds));
  }
  return FromSeconds(value * scale);
}

Status ParsePositiveDurations(std::initializer_list<DurationFlag> flags) {
  for (const DurationFlag& d : flags) {
    Result<Nanos> parsed = ParseDuration(d.name, *d.text);
    if (!parsed.ok()) return MakeError(ErrorCode::kInvalidInput, parsed.error().message);
    if (parsed.value() <= Nanos(0)) return MakeError(ErrorCode::kInvalidInput, std::string(d.name) + ": must be positive");
    *d.into = parsed.value();
  }
  return Ok{};
}

Result<LoadSetup> BuildLoad(const LoadFlags& f, const std::string& command) {
  LoadSetup setup;
  auto usage = [](std::string message) {
    return MakeError(ErrorCode::kInvalidInput, std::move(message));
  };
  dialect::GenerationRequest& request = setup.request;
  const std::optional<dialect::Api> api = dialect::ParseApiName(f.api);
  if (!api) return usage("--api: '" + f.api + "' (expected one of: " + dialect::ApiNames() + ")");
  request.api = *api;
  if (!f.no_stream && !dialect::ApiStreams(*api)) {
    return usage("--api " + f.api + ": this route answers whole; pass --no-stream");
  }
  request.model = f.model;
  request.stream = !f.no_stream;
  request.ignore_eos = f.ignore_eos;
  if (f.ignore_eos) request.min_tokens = f.output_tokens;
  if (f.prompt_tokens == 0 || f.prompt_tokens > kMaxRequestTokens) {
    return usage(
        fmt::format("--prompt-tokens: {} is not in [1, {}]", f.prompt_tokens, kMaxRequestTokens));
  }
  if (f.output_tokens == 0 || f.output_tokens > kMaxRequestTokens) {
    return usage(
        fmt::format("--output-tokens: {} is not in [1, {}]", f.output_tokens, kMaxRequestTokens));
  }
  setup.shape = {f.prompt_tokens, f.output_tokens};
  Result<Nanos> warmup = ParseDuration("--warmup", f.warmup);
  if (!warmup.ok()) return usage(warmup.error().message);
  std::optional<Nanos> duration;
  if (!f.duration.empty()) {
    Result<Nanos> parsed = ParseDuration("--duration", f.duration);
    if (!parsed.ok()) return usage(parsed.error().message);
    if (parsed.value() <= Nanos(0)) return usage("--duration: must be positive");
    duration = parsed.value();
  }
  if (!duration && f.requests == 0 && f.trace.empty()) {
    return usage("--duration or --requests: give at least one limit");
  }
  if (!f.rates.empty() + !f.concurrencies.empty() + !f.trace.empty() > 1) {
    return usage(
        "--rate, --concurrency and --trace: choose one (open loop, closed loop or replay)");
  }
  if (!(f.time_scale > 0) || f.time_scale > 1e6) return usage("--time-scale: must be positive");
  Result<load::ArrivalProcess> arrival = load::ParseArrivalProcess(f.arrival);
  if (!arrival.ok()) return usage("--arrival: " + arrival.error().message);
  if (!(f.burstiness >= 1e-3 && f.burstiness <= 1e3)) {
    return usage(fmt::format("--burstiness: {} is not in [0.001, 1000]", f.burstiness));
  }
  load::StepLimits limits;
  limits.duration = duration;
  if (f.requests > 0) limits.requests = f.requests;
  limits.warmup = warmup.value();
  limits.warmup_requests = f.warmup_requests;
  for (double rate : f.rates) {
    if (!(rate > 0) || rate > 1e6) return usage(fmt::format("--rate: {} is not in (0, 1e6]", rate));
    // The schedule's last instant must be representable (it is generated lazily, never held).
    const double planned =
        static_cast<double>(limits.requests.value_or(0) + limits.warmup_requests);
    const double span_s = duration ? ToSeconds(*duration + limits.warmup) : planned / rate;
    if (std::min(planned / rate, duration ? span_s : INFINITY) > kMaxDurationSeconds) {
      return usage(
          fmt::format("--rate: at {:g}/s, {:g} requests would take {:g} s, longer than bakeoff "
                      "plans ({:g} s); raise --rate or lower --requests",
                      rate, planned, planned / rate, kMaxDurationSeconds));
    }
    load::StepSpec step;
    step.mode = load::LoopMode::kOpen;
    step.open = {rate, arrival.value(), f.burstiness};
    step.limits = limits;
    step.label = fmt::format("rate={}/s", rate);
    setup.steps.push_back(step);
  }
  if (!f.trace.empty()) {
    workload::ImportOptions import;
    Result<workload::TraceFormat> format = workload::ParseTraceFormat(f.trace_format);
    if (!format.ok()) return usage("--trace-format: " + format.error().message);
    import.format = format.value();
    import.skip_invalid = f.skip_invalid;
    workload::ImportReport report;
    Result<workload::Trace> trace = workload::LoadTrace(f.trace, import, &report);
    if (!trace.ok()) return usage("--trace: " + trace.error().message);
    if (!report.SkippedSummary().empty()) {
      fmt::print(stderr, "{}: --trace: {}\n", command, report.SkippedSummary());
    }
    setup.trace_import = {{"file", f.trace},
                          {"format", workload::TraceFormatName(report.format)},
                          {"rows", report.rows},
                          {"rows_skipped", report.SkippedTotal()},
                          {"skipped", report.SkippedSummary()}};
    if (!trace->arrivals_known) {
      fmt::print(stderr,
                 "{}: --trace: the source has no arrival times; every request "
                 "arrives at once (use --rate with its lengths via bakeoff synth)\n",
                 command);
    }
    double longest_s = 0;
    std::uint64_t too_long = 0;
    for (const workload::TraceRequest& r : trace->requests) {
      longest_s = std::max({longest_s, r.arrival_s, r.think_time_s.value_or(0)});
      if (r.input_tokens > kMaxRequestTokens || r.output_tokens > kMaxRequestTokens) ++too_long;
    }
    if (too_long > 0) {
      return usage(
          fmt::format("--trace: {} requests ask for more than {} prompt or output tokens, more "
                      "than bakeoff sends (filter them out of the trace)",
                      too_long, kMaxRequestTokens));
    }
    if (longest_s * f.time_scale > kMaxDurationSeconds) {
      return usage(
          fmt::format("--trace: arrival or think times up to {:g} s, scaled by --time-scale {:g}, "
                      "are longer than bakeoff plans ({:g} s)",
                      longest_s, f.time_scale, kMaxDurationSeconds));
    }
    setup.trace = std::make_shared<workload::Trace>(std::move(trace.value()));
    load::StepSpec step;
    step.mode = load::LoopMode::kTrace;
    step.trace = setup.trace.get();
    step.time_scale = f.time_scale;
    step.limits = limits;
    step.label = fmt::format("trace x{}", f.time_scale);
    setup.steps.push_back(step);
  }
  setup.concurrencies = f.concurrencies;
  if (f.rates.empty() && setup.concurrencies.empty() && f.trace.empty())
    setup.concurrencies.push_back(1);
  for (std::uint32_t c : setup.concurrencies) {
    if (c == 0 || c > 100000)
      return usage(fmt::format("--concurrency: {} is not in [1, 100000]", c));
    load::StepSpec step;
    step.mode = load::LoopMode::kClosed;
    step.concurrency = c;
    step.limits = limits;
    step.label = fmt::format("concurrency={}", c);
    setup.steps.push_back(step);
  }
  if (!f.slo.empty()) {
    Result<analyze::Slo> slo = analyze::ParseSlo(f.slo);
    if (!slo.ok()) return usage(slo.error().message);
    setup.slo = slo.value();
  }
  if (f.batch == 0 || f.batch > 4096) return usage("--batch: must be between 1 and 4096");
  if (f.batch > 1 && dialect::ApiGenerates(request.api)) return usage("--batch: only for --api embeddings or rerank");
  if (!dialect::ApiGenerates(request.api)) {
    if (!f.trace.empty()) return usage("--api " + f.api + ": a trace replays generation traffic; pooling loads are synthetic");
    if (!f.no_stream) return usage("--api " + f.api + ": answers are whole; pass --no-stream");
    setup.shape.batch = f.batch;
  }
  if (!f.structured.empty() && !f.lora_adapters.empty()) {
    return usage("--structured and --lora-adapters: one comparison at a time");
  }
  if (!f.structured.empty()) {
    if (!dialect::IsOpenAiApi(request.api)) return usage("--structured: only on the OpenAI routes (chat, completions)");
    Result<dialect::OutputConstraint> constraint = ParseConstraint(f);
    if (!constraint.ok()) return constraint.error();
    if (constraint->kind == dialect::OutputConstraint::Kind::kTool && request.api != dialect::Api::kChat) {
      return usage("--structured tool: only with --api chat");
    }
    setup.constraint = constraint.value();
    setup.variant = f.structured;
  }
  if (!f.lora_adapters.empty()) {
    for (const std::string& adapter : f.lora_adapters) {
      if (adapter.empty()) return usage("--lora-adapters: an empty name");
    }
    setup.lora_adapters = f.lora_adapters;
    setup.variant = "lora";
    if (f.lora_distribution.starts_with("zipf:")) {
      char* end = nullptr;
      const std::string exponent = f.lora_distribution.substr(5);
      setup.lora_zipf = std::strtod(exponent.c_str(), &end);
      if (exponent.empty() || end != exponent.c_str() + exponent.size() || !(setup.lora_zipf > 0) || setup.lora_zipf > 10) {
        return usage("--lora-distribution: zipf:S with S in (0, 10]");
      }
    } else if (f.lora_distribution != "uniform") {
      return usage("--lora-distribution: '" + f.lora_distribution + "' (expected uniform or zipf:S)");
    }
  }
  if (!setup.variant.empty()) {
    // Each step, then its variant on the same arrivals and prompts.
    std::vector<load::StepSpec> paired;
    for (std::size_t i = 0; i < setup.steps.size(); ++i) {
      paired.push_back(setup.steps[i]);
      load::StepSpec variant = setup.steps[i];
      variant.variant = true;
      variant.baseline = static_cast<std::uint32_t>(paired.size() - 1);
      variant.label += " " + setup.variant;
      paired.push_back(std::move(variant));
    }
    setup.steps = std::move(paired);
  }
  const std::string name = command.substr(command.find(' ') + 1);  // "bakeoff bench" -> "bench"
  setup.out_dir = f.out.empty()
                      ? std::filesystem::path("out") / fmt::format("{}-{}", name, ::time(nullptr))
                      : std::filesystem::path(f.out);
  return setup;
}

nlohmann::json LoadFlagsJson(const LoadFlags& f, const LoadSetup& setup) {
  return {{"model", f.model},
          {"api", f.api},
          {"stream", !f.no_stream},
          {"prompt_tokens", f.prompt_tokens},
          {"output_tokens", f.output_tokens},
          {"ignore_eos", f.ignore_eos},
          {"rates", f.rates},
          {"concurrencies", setup.concurrencies},
          {"arrival", f.arrival},
          {"burstiness", f.burstiness},
          {"duration", f.duration},
          {"requests", f.requests},
          {"warmup", f.warmup},
          {"warmup_requests", f.warmup_requests},
          {"seed", f.seed},
          {"slo", f.slo},
          {"trace", f.trace},
          {"trace_format", f.trace_format},
          {"time_scale", f.time_scale},
          {"skip_invalid", f.skip_invalid},
          {"batch", f.batch},
          {"structured", f.structured},
          {"structured_spec", f.structured_spec},
          {"lora_adapters", f.lora_adapters},
          {"lora_distribution", f.lora_distribution},
          {"trace_import", setup.trace_import}};
}



}  // namespace bakeoff::cli
