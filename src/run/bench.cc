#include "run/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include <cmath>

#include "core/digest.h"
#include "core/file.h"
#include "core/json_dump.h"
#include "dialect/tokenize.h"
#include "load/prompt_text.h"
#include "target/discovery.h"
#include "target/clock_offset.h"
#include "target/prompt_calibration.h"

namespace bakeoff::run {
namespace {

// The calibration as summary.json shows it (docs/formats/summary.md).
nlohmann::json CalibrationJson(const target::PromptCalibration& c) {
  nlohmann::json j = {{"checked", c.checked}};
  if (!c.checked) {
    j["reason"] = c.reason;
    j["notes"] = c.notes;
    return j;
  }
  j["method"] = c.method;
  if (c.tokenize_dialect) {
    j["tokenize_dialect"] = dialect::TokenizeDialectName(*c.tokenize_dialect);
    j["tokenize_path"] = dialect::TokenizePath(*c.tokenize_dialect);
  }
  j["words_per_token"] = c.sizing.words_per_token;
  j["overhead_tokens"] = c.sizing.overhead_tokens;
  j["overhead_measured"] = c.overhead_measured;
  j["probe_requests"] = c.probes_sent;
  if (c.planned_tokens) j["planned_prompt_tokens"] = *c.planned_tokens;
  if (c.achieved_tokens) {
    j["achieved_prompt_tokens"] = *c.achieved_tokens;
    j["achieved_by"] = c.achieved_by;
    j["deviation"] = *c.Deviation();
  }
  j["notes"] = c.notes;
  return j;
}

// What the user reads about the calibration.
void NoteCalibration(const target::PromptCalibration& c, std::vector<std::string>& notes) {
  for (const std::string& note : c.notes) notes.push_back("prompt calibration: " + note);
  if (!c.checked) {
    notes.push_back("prompt lengths not checked: " + c.reason + "; lengths assume one token per word");
    return;
  }
  std::string line = fmt::format("prompt sizing ({}{}): {:.3f} words per token, {:.1f} tokens added by "
                                 "the server{}",
                                 c.method,
                                 c.tokenize_dialect ? fmt::format(", {} dialect",
                                                                  dialect::TokenizeDialectName(*c.tokenize_dialect))
                                                    : "",
                                 c.sizing.words_per_token, c.sizing.overhead_tokens,
                                 c.overhead_measured ? "" : " (not measured)");
  notes.push_back(std::move(line));
  if (c.achieved_tokens) {
    notes.push_back(fmt::format("prompt length: planned {} tokens, the server counts {:.1f} ({:+.1f}%, by {})",
                                *c.planned_tokens, *c.achieved_tokens, 100 * *c.Deviation(), c.achieved_by));
  }
}

// Whether some step sends the run's fixed-shape prompts (not a trace's own lengths).
bool HasSyntheticSteps(const load::RunSpec& run) {
  return std::any_of(run.steps.begin(), run.steps.end(),
                     [](const load::StepSpec& s) { return s.mode != load::LoopMode::kTrace; });
}

// Refuses lengths the target cannot take, where it says its context limit.
Status CheckContextLimit(const BenchConfig& config, const target::TargetFacts& facts,
                         std::vector<std::string>& notes) {
  if (!facts.max_context_tokens) return Ok{};
  const std::uint64_t limit = *facts.max_context_tokens;
  const bool synthetic = HasSyntheticSteps(config.run);
  const std::uint64_t asked = std::uint64_t{config.run.shape.prompt_tokens} + config.run.shape.output_tokens;
  if (synthetic && asked > limit) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("--prompt-tokens {} + --output-tokens {} = {} tokens, more than the "
                                 "server's context of {} tokens ({})",
                                 config.run.shape.prompt_tokens, config.run.shape.output_tokens, asked,
                                 limit, facts.max_context_source));
  }
  if (config.trace) {
    std::uint64_t over = 0;
    for (const workload::TraceRequest& r : config.trace->requests) {
      if (std::uint64_t{r.input_tokens} + r.output_tokens > limit) ++over;
    }
    if (over > 0) {
      notes.push_back(fmt::format("{} trace requests ask for more than the server's context of {} tokens "
                                  "({}); expect them to fail", over, limit, facts.max_context_source));
    }
  }
  return Ok{};
}

// Measures how the server counts prompts; refuses (kInvalidInput) when prompts built as the run's
// would still be off the plan by more than the tolerance.
Result<target::PromptCalibration> CalibrateWithinTolerance(const BenchConfig& config,
                                                           const target::TargetFacts& facts,
                                                           const std::atomic<bool>& stop) {
  target::CalibrationPlan plan;
  plan.endpoint = config.run.target.endpoint;
  plan.client = config.run.target.client;
  plan.request = config.run.target.request;
  plan.seed = config.run.seed;
  plan.max_context_tokens = facts.max_context_tokens;
  plan.stop = &stop;
  if (HasSyntheticSteps(config.run)) plan.planned_prompt_tokens = config.run.shape.prompt_tokens;
  target::PromptCalibration calibrated = target::CalibratePrompts(plan, load::PromptText());
  const std::optional<double> deviation = calibrated.Deviation();
  if (!deviation || std::abs(*deviation) <= config.prompt_tolerance) return calibrated;
  std::string message = fmt::format(
      "prompts planned at {} tokens are counted as {:.1f} by the server ({:+.1f}%, more than the "
      "{:.1f}% tolerance) even after calibration; the run would not measure the planned load. Pass "
      "--prompt-tolerance to accept it or --no-calibrate to skip the check",
      *calibrated.planned_tokens, *calibrated.achieved_tokens, 100 * *deviation, 100 * config.prompt_tolerance);
  for (const std::string& note : calibrated.notes) message += " (calibration: " + note + ")";
  return MakeError(ErrorCode::kInvalidInput, std::move(message));
}

}  // namespace

void JsonlRecordSink::Write(const measure::RequestRecord& record, MonoTime t0) {
  Status written = writer_.Append(measure::RecordToJsonLine(record, t0));
  if (!written.ok() && !failed_.exchange(true)) {
    fmt::print(stderr, "bakeoff: {}\n", written.error().message);
  }
}

namespace {

// The engine's own figures for step `index` beside the client's, and any gap between the two.
void AddServerFigures(BenchOutcome& outcome, std::size_t index, nlohmann::json& step_json) {
  for (const target::StepServerFigures& f : outcome.server) {
    if (f.step != index) continue;
    const analyze::StepAnalysis& client = outcome.steps[index];
    nlohmann::json server = target::ToJson(f);
    nlohmann::json gaps = nlohmann::json::array();
    for (std::optional<std::string> gap :
         {target::CrossCheck("TTFT", f.ttft_mean_ms, client.ttft_ms.mean, client.ttft_ms.count),
          target::CrossCheck("E2E", f.e2e_mean_ms, client.e2e_ms.mean, client.e2e_ms.count)}) {
      if (!gap) continue;
      gaps.push_back(*gap);
      outcome.notes.push_back(client.label + ": " + *gap);
    }
    server["client_gaps"] = std::move(gaps);
    step_json["server"] = std::move(server);
  }
}

// What the engine used, with energy and cost per output token over the whole run.
nlohmann::json ResourcesJson(const BenchOutcome& outcome, double price_per_hour) {
  nlohmann::json j = outcome.resources ? target::ToJson(*outcome.resources) : nlohmann::json::object();
  j["telemetry_file"] = outcome.resources ? nlohmann::json("telemetry.jsonl") : nlohmann::json();
  double output_tokens = 0;
  for (const analyze::StepAnalysis& s : outcome.steps) output_tokens += s.output_tokens_per_s * s.duration_s;
  const std::optional<double> energy = outcome.resources ? outcome.resources->Energy() : std::nullopt;
  // The energy of the whole run window (warm-up, gaps between steps and the drain included) over
  // the measured requests' tokens: an upper bound, and said so.
  j["joules_per_output_token"] = energy && output_tokens > 0 ? nlohmann::json(*energy / output_tokens) : nlohmann::json();
  j["joules_per_output_token_basis"] =
      "GPU energy over the whole run window (warm-up, gaps and drain included) / output tokens of measured "
      "requests: an upper bound";
  // Cost per million output tokens at each step's own throughput: the price of the time the
  // engine needs to produce them at that pace.
  nlohmann::json cost = nlohmann::json::array();
  for (const analyze::StepAnalysis& s : outcome.steps) {
    cost.push_back({{"step", s.label},
                    {"per_million_output_tokens",
                     price_per_hour > 0 && s.output_tokens_per_s > 0
                         ? nlohmann::json(price_per_hour / (s.output_tokens_per_s * 3600) * 1e6)
                         : nlohmann::json()}});
  }
  j["price_per_hour"] = price_per_hour > 0 ? nlohmann::json(price_per_hour) : nlohmann::json();
  j["cost"] = std::move(cost);
  return j;
}

// What the requests asked for against what this engine's route sent and what its answers show:
// where they differ, a comparison with another engine compares unequal work, and says so.
nlohmann::json FairnessJson(const BenchConfig& config, const std::vector<analyze::StepAnalysis>& steps,
                            std::vector<std::string>& notes, std::vector<std::string>& unequal_out) {
  const dialect::GenerationRequest& request = config.run.target.request;
  if (!dialect::ApiGenerates(request.api)) {  // vectors and scores: no output length to compare
    return {{"api", dialect::ApiName(request.api)}, {"unequal_work", nlohmann::json::array()}};
  }
  std::uint64_t ok = 0, counted = 0, short_answers = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const analyze::StepAnalysis& s = steps[i];
    ok += s.ok_requests;
    counted += s.output_counted_by_server;
    // A constrained answer (--structured) ends with its schema, whatever the forced length.
    const bool constrained = i < config.run.steps.size() && config.run.steps[i].variant && config.run.target.constraint;
    if (!constrained) short_answers += s.ended_before_max_tokens;
  }
  std::vector<std::string> unequal;
  if (!config.intent.forced_length_not_sent.empty()) {
    unequal.push_back("forced output length asked (--ignore-eos) but not sent: " + config.intent.forced_length_not_sent +
                      fmt::format("; {} of {} answers ended before max_tokens", short_answers, ok));
  } else if (request.ignore_eos && short_answers > 0) {
    unequal.push_back(fmt::format("forced output length sent, yet {} of {} answers ended before max_tokens: the "
                                  "engine did not honour it",
                                  short_answers, ok));
  }
  if (ok > counted) {
    unequal.push_back(fmt::format(
        "{} of {} answers came without the server's output token count{}: their tokens were counted by the client",
        ok - counted, ok,
        dialect::ApiReportsOutputTokens(request.api) ? "" : fmt::format(" (the {} route reports none)", dialect::ApiName(request.api))));
  }
  for (const std::string& line : unequal) notes.push_back("fairness: " + line);
  unequal_out = unequal;
  return {{"api", dialect::ApiName(request.api)},
          {"forced_length", {{"asked", config.intent.forced_length},
                             {"sent", request.ignore_eos},
                             {"not_sent_because", config.intent.forced_length_not_sent.empty()
                                                      ? nlohmann::json()
                                                      : nlohmann::json(config.intent.forced_length_not_sent)},
                             {"answers_before_max_tokens", short_answers}}},
          {"usage", {{"route_reports_output_tokens", dialect::ApiReportsOutputTokens(request.api)},
                     {"route_reports_prompt_tokens", dialect::ApiReportsPromptTokens(request.api)},
                     {"answers_counted_by_server", counted}}},
          {"ok_answers", ok},
          {"unequal_work", unequal}};
}

// One percentile of a step and of its variant: the change, and whether their confidence bounds
// separate (a change the sample can tell from noise).
nlohmann::json PercentileChange(const stats::QuantileEstimate& base, const stats::QuantileEstimate& variant) {
  const bool both = base.bounded && variant.bounded;
  return {{"baseline", base.value},
          {"variant", variant.value},
          {"ratio", base.value > 0 ? nlohmann::json(variant.value / base.value) : nlohmann::json()},
          {"detectable", both && (variant.lower > base.upper || variant.upper < base.lower)},
          {"bounded", both}};
}

// Each variant step (--structured, --lora-adapters) against its baseline: the same arrivals and
// prompts with one change, so the difference is that change's cost.
nlohmann::json VariantsJson(const BenchConfig& config, const std::vector<analyze::StepAnalysis>& steps,
                            std::vector<std::string>& notes) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < steps.size() && i < config.run.steps.size(); ++i) {
    const load::StepSpec& spec = config.run.steps[i];
    if (!spec.variant || spec.baseline >= steps.size()) continue;
    const analyze::StepAnalysis& base = steps[spec.baseline];
    const analyze::StepAnalysis& variant = steps[i];
    nlohmann::json change = {{"baseline_step", base.label},
                             {"variant_step", variant.label},
                             {"ttft_p50_ms", PercentileChange(base.ttft_ms.p50, variant.ttft_ms.p50)},
                             {"ttft_p90_ms", PercentileChange(base.ttft_ms.p90, variant.ttft_ms.p90)},
                             {"tpot_p50_ms", PercentileChange(base.tpot_ms.p50, variant.tpot_ms.p50)},
                             {"e2e_p50_ms", PercentileChange(base.e2e_ms.p50, variant.e2e_ms.p50)},
                             {"e2e_p90_ms", PercentileChange(base.e2e_ms.p90, variant.e2e_ms.p90)},
                             {"output_tokens_per_s_ratio",
                              base.output_tokens_per_s > 0 ? nlohmann::json(variant.output_tokens_per_s / base.output_tokens_per_s)
                                                           : nlohmann::json()},
                             {"requests_per_s_ratio", base.request_rate_per_s > 0
                                                          ? nlohmann::json(variant.request_rate_per_s / base.request_rate_per_s)
                                                          : nlohmann::json()},
                             {"output_tokens_mean", {{"baseline", base.output_tokens.mean},
                                                     {"variant", variant.output_tokens.mean}}}};
    // A constrained answer has its own length (a schema's record, one choice): then only the
    // per-token figures compare the same work.
    const double length_ratio = base.output_tokens.mean > 0 ? variant.output_tokens.mean / base.output_tokens.mean : 1;
    change["same_answer_length"] = std::abs(length_ratio - 1) <= 0.1;
    if (!change["same_answer_length"].get<bool>()) {
      notes.push_back(fmt::format("{}: its answers are {:.1f} tokens on average against {:.1f}: E2E and throughput "
                                  "reflect the length; TPOT and TTFT compare the same work",
                                  variant.label, variant.output_tokens.mean, base.output_tokens.mean));
    }
    if (base.tpot_ms.p50.value > 0 && base.e2e_ms.p50.value > 0) {
      notes.push_back(fmt::format("{} against {}: TPOT p50 {:+.1f}%, E2E p50 {:+.1f}%", variant.label, base.label,
                                  100 * (variant.tpot_ms.p50.value / base.tpot_ms.p50.value - 1),
                                  100 * (variant.e2e_ms.p50.value / base.e2e_ms.p50.value - 1)));
    }
    out.push_back(std::move(change));
  }
  return out;
}

}  // namespace

RequestIntent FitRequestToEngine(dialect::GenerationRequest& request, const target::EngineAdapter* adapter) {
  RequestIntent intent;
  intent.forced_length = request.ignore_eos;
  if (!request.ignore_eos) return intent;
  if (!dialect::ApiCanForceLength(request.api)) {
    intent.forced_length_not_sent =
        fmt::format("the {} route has no field that forces an output length", dialect::ApiName(request.api));
  } else if (adapter != nullptr && adapter->request.ignore_eos.empty()) {
    intent.forced_length_not_sent = fmt::format("{} cannot force an output length (no ignore_eos)", adapter->display_name);
  }
  if (!intent.forced_length_not_sent.empty()) {
    request.ignore_eos = false;
    request.min_tokens.reset();
  } else if (adapter != nullptr && adapter->request.min_tokens.empty()) {
    request.min_tokens.reset();  // ignore_eos alone (llama.cpp has no min_tokens)
  } else if (adapter != nullptr) {
    request.min_tokens_field = adapter->request.min_tokens.data();
  }
  return intent;
}

namespace {

// The trace's content as the schedule uses it, request by request (its path and source lines aside).
std::string TraceContentSha256(const workload::Trace& trace) {
  Sha256 digest;
  std::string buffer = fmt::format("block_tokens {} arrivals_known {}\n", trace.block_tokens, trace.arrivals_known);
  const auto field = [&](std::string_view text) {
    fmt::format_to(std::back_inserter(buffer), "{}:", text.size());
    buffer.append(text);
  };
  for (const workload::TraceRequest& r : trace.requests) {
    fmt::format_to(std::back_inserter(buffer), "{} {} {} {} {} {} {} {}", r.arrival_s, r.input_tokens, r.output_tokens,
                   r.turn.value_or(~0U), r.think_time_s.value_or(-1), r.structured_output, r.priority.value_or(-1),
                   r.tokens_estimated);
    for (const std::optional<std::string>* text : {&r.prompt, &r.prefix_group, &r.session_id, &r.model}) {
      buffer.push_back(text->has_value() ? '+' : '-');
      if (text->has_value()) field(**text);
    }
    for (const workload::ChatMessage& m : r.messages) {
      field(m.role);
      field(m.content);
    }
    buffer.push_back('|');
    for (std::uint64_t hash : r.prefix_hashes) fmt::format_to(std::back_inserter(buffer), "{},", hash);
    buffer.push_back('\n');
    if (buffer.size() > (1 << 16)) {
      digest.Update(buffer);
      buffer.clear();
    }
  }
  digest.Update(buffer);
  return digest.FinishHex();
}

}  // namespace

nlohmann::json ScheduleDefiningConfig(const nlohmann::json& flags) {
  nlohmann::json schedule = flags;
  if (!schedule.is_object()) return schedule;
  for (const char* key : kPerProcessConfigKeys) schedule.erase(key);
  for (const char* key : kContentConfigKeys) schedule.erase(key);
  if (schedule.contains("trace_import") && schedule["trace_import"].is_object()) schedule["trace_import"].erase("file");
  return schedule;
}

nlohmann::json ScheduleIdentity(const nlohmann::json& flags, const workload::Trace* trace,
                                const std::optional<dialect::OutputConstraint>& constraint) {
  nlohmann::json identity = {
      {"covers", "the configuration but its per-process fields, the trace's content and the structured output spec"}};
  std::string hashed = ScheduleDefiningConfig(flags).dump();
  if (trace != nullptr) {
    const std::string trace_sha256 = TraceContentSha256(*trace);
    identity["trace_sha256"] = trace_sha256;
    hashed += "\ntrace " + trace_sha256;
  }
  if (constraint) hashed += fmt::format("\nconstraint {}:{}", static_cast<int>(constraint->kind), Sha256Hex(constraint->spec));
  identity["sha256"] = Sha256Hex(hashed);
  return identity;
}

nlohmann::json SummaryPreamble(std::uint64_t seed, const nlohmann::json& flags) {
  nlohmann::json summary;
  summary["schema_version"] = kSummarySchemaVersion;
  summary["tool"] = {{"name", "bakeoff"}, {"version", BAKEOFF_VERSION}};
  summary["seed"] = seed;
  summary["config"] = flags;
  return summary;
}

void WriteSummary(nlohmann::json summary, nlohmann::json steps, BenchOutcome& outcome,
                  const JsonlRecordSink& sink) {
  summary["interrupted"] = outcome.interrupted;
  if (!summary.contains("records_file")) summary["records_file"] = "records.jsonl";
  summary["records_write_failed"] = sink.failed();
  summary["steps"] = std::move(steps);
  // Server text (a metrics page's error, an engine's message) may hold any bytes.
  Status written = WriteFileAtomically(
      outcome.summary_path, DumpJson(summary, 2));
  if (!written.ok()) {
    outcome.summary_error = written.error().message;
  } else if (sink.failed()) {
    outcome.summary_error = "some records could not be written to " + outcome.records_path.string();
  }
}

nlohmann::json PoolingSummaryJson(dialect::Api api, std::uint32_t inputs_per_request,
                                  const std::vector<analyze::StepAnalysis>& steps) {
  nlohmann::json pooling = nlohmann::json::array();
  for (const analyze::StepAnalysis& s : steps) {
    pooling.push_back({{"step", s.label},
                       {"inputs_per_request", inputs_per_request},
                       {"inputs_per_s", s.request_rate_per_s * inputs_per_request}});
  }
  return {{"api", dialect::ApiName(api)}, {"steps", std::move(pooling)}};
}

Result<BenchOutcome> RunBench(BenchConfig config, const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log,
                              const std::function<void(std::size_t, const load::Progress&)>& on_tick) {
  BenchOutcome outcome;
  load::TargetSpec& target = config.run.target;
  // A stop signal before the load ends the run there: nothing was measured, nothing is written.
  const auto stopped_early = [&] {
    return MakeError(ErrorCode::kCancelled, "stopped by a signal before the load began; nothing was measured");
  };
  Result<target::TargetFacts> facts = target::Discover(target.endpoint, target.client, target.request.model);
  if (stop.load()) return stopped_early();
  if (!facts.ok()) return facts.error();
  if (facts->model_from_listing) log("model: " + facts->model + " (first listed by /v1/models)");
  target.request.model = facts->model;
  outcome.emulated = facts->emulated;
  Status fits = CheckContextLimit(config, facts.value(), outcome.notes);
  if (!fits.ok()) return fits.error();

  nlohmann::json calibration = {{"checked", false}, {"reason", "disabled (--no-calibrate)"}};
  if (config.calibrate_prompt) {
    Result<target::PromptCalibration> calibrated = CalibrateWithinTolerance(config, facts.value(), stop);
    if (stop.load()) return stopped_early();
    if (!calibrated.ok()) return calibrated.error();
    if (calibrated->checked) target.prompt_sizing = calibrated->sizing;
    NoteCalibration(calibrated.value(), outcome.notes);
    calibration = CalibrationJson(calibrated.value());
    calibration["tolerance"] = config.prompt_tolerance;
  }

  // Shards start at an instant of their own clocks: how far each is from the target's is recorded,
  // so merged shards can be judged (clock skew shifts a shard's sends against the others').
  nlohmann::json clock = nullptr;
  if (config.run.start_at) {
    const Nanos until_start = *config.run.start_at - RealClock().Now();
    const Nanos budget = std::min<Nanos>(std::chrono::seconds(3), until_start - std::chrono::milliseconds(500));
    Result<target::ClockOffset> offset =
        budget > std::chrono::milliseconds(1200)
            ? target::MeasureClockOffset(target.endpoint, target.client, "/v1/models", budget)
            : Result<target::ClockOffset>(MakeError(ErrorCode::kUnavailable, "the start was too near to measure it"));
    if (offset.ok()) {
      clock = {{"method", "date_header"}, {"path", offset->path}, {"offset_ms", offset->offset_ms},
               {"uncertainty_ms", offset->uncertainty_ms}, {"requests", offset->requests}};
      log(fmt::format("clock: the target's is {:+.1f} ms from this machine's (+- {:.1f} ms, from its Date headers)",
                      offset->offset_ms, offset->uncertainty_ms));
    } else {
      clock = {{"method", nullptr}, {"not_measured", offset.error().message}};
      log("clock: not measured against the target: " + offset.error().message);
    }
    if (stop.load()) return stopped_early();
  }

  std::error_code ec;
  const bool out_existed = std::filesystem::exists(config.out_dir, ec);
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "cannot create --out " + config.out_dir.string() + ": " + ec.message());
  }
  outcome.records_path = config.out_dir / "records.jsonl";
  outcome.summary_path = config.out_dir / "summary.json";
  Result<std::unique_ptr<LineWriter>> writer = LineWriter::Open(outcome.records_path);
  if (!writer.ok()) {
    if (!out_existed) std::filesystem::remove(config.out_dir, ec);  // leave no empty folder
    return writer.error();
  }
  JsonlRecordSink sink(*writer.value());

  const std::string started = UtcNowIso();
  config.run.slo = config.slo.RequestThresholds();
  std::unique_ptr<target::MetricsTimeline> timeline;
  if (!config.metrics_path.empty() && config.metrics_interval > Nanos(0)) {
    target::TimelineOptions scrape;
    scrape.endpoint = target.endpoint;
    // A separate metrics port is a TCP one; an engine on a Unix socket serves its metrics there.
    if (config.adapter != nullptr && !config.adapter->metrics_port.empty() && scrape.endpoint.unix_socket.empty()) {
      scrape.endpoint.port = std::string(config.adapter->metrics_port);
    }
    scrape.client = target.client;
    scrape.path = config.metrics_path;
    scrape.interval = config.metrics_interval;
    scrape.adapter = config.adapter;
    scrape.jsonl = outcome.metrics_path = config.out_dir / "metrics.jsonl";
    scrape.raw_dir = config.out_dir / "metrics-pages";
    timeline = target::MetricsTimeline::Start(std::move(scrape), log);
  }
  std::unique_ptr<target::ResourceTelemetry> telemetry;
  // This host's GPUs say something about the engine only when it runs here.
  const bool local = target.endpoint.host == "127.0.0.1" || target.endpoint.host == "localhost" ||
                     target.endpoint.host == "::1" || config.engine_pid.has_value();
  if (config.telemetry_interval > Nanos(0) && (config.engine_pid || (config.gpu_telemetry && local))) {
    target::TelemetryOptions sample;
    sample.process = config.engine_pid;
    sample.gpus = config.gpu_telemetry && local;
    sample.interval = config.telemetry_interval;
    sample.jsonl = config.out_dir / "telemetry.jsonl";
    telemetry = target::ResourceTelemetry::Start(std::move(sample), log);
  }
  auto tick = [&](std::size_t step, const load::Progress& progress) {
    if (timeline) timeline->SetStep(step);
    if (on_tick) on_tick(step, progress);
  };
  std::vector<load::StepResult> results = load::RunLoad(config.run, sink, stop, tick);
  outcome.interrupted = stop.load();
  if (telemetry) outcome.resources = telemetry->Stop();  // first: its window is the load's
  if (timeline) outcome.server = timeline->Stop();

  nlohmann::json steps = nlohmann::json::array();
  for (const load::StepResult& result : results) {
    const analyze::StepAnalysis& step = outcome.steps.emplace_back(analyze::AnalyzeStep(result, config.slo));
    steps.push_back(analyze::ToJson(step));
    AddServerFigures(outcome, outcome.steps.size() - 1, steps.back());
    if (std::optional<double> deviation = step.PromptDeviation();
        deviation && std::abs(*deviation) > config.prompt_tolerance) {
      outcome.notes.push_back(fmt::format(
          "{}: the server counted prompts {:+.1f}% off the plan ({:.1f} tokens planned on average, "
          "{:.1f} counted): its figures are not for the planned lengths",
          step.label, 100 * *deviation, *step.prompt_planned_mean, *step.prompt_counted_mean));
    }
  }
  nlohmann::json summary = SummaryPreamble(config.run.seed, config.flags);
  summary["schedule"] = ScheduleIdentity(config.flags, config.trace.get(), config.run.target.constraint);
  summary["started_at"] = started;
  summary["finished_at"] = UtcNowIso();
  summary["target"] = {{"url", config.url},
                       {"model", target.request.model},
                       {"emulated", outcome.emulated}};
  if (facts->max_context_tokens) {
    summary["target"]["max_context_tokens"] = *facts->max_context_tokens;
    summary["target"]["max_context_source"] = facts->max_context_source;
  }
  if (outcome.emulated) {
    summary["target"]["note"] =
        "emulated engine: these figures describe bakeoff's model of an engine, not a real engine";
  }
  summary["prompt_calibration"] = calibration;
  if (!clock.is_null()) summary["clock"] = clock;
  summary["metrics_file"] = timeline ? nlohmann::json("metrics.jsonl") : nlohmann::json();
  summary["resources"] = ResourcesJson(outcome, config.price_per_hour);
  summary["metrics_problems"] = timeline ? nlohmann::json(timeline->Problems()) : nlohmann::json::array();
  summary["fairness"] = FairnessJson(config, outcome.steps, outcome.notes, outcome.unequal_work);
  summary["variants"] = VariantsJson(config, outcome.steps, outcome.notes);
  if (!dialect::ApiGenerates(target.request.api)) {
    summary["pooling"] =
        PoolingSummaryJson(target.request.api, config.run.shape.batch, outcome.steps);
  }
  WriteSummary(std::move(summary), std::move(steps), outcome, sink);
  return outcome;
}

}  // namespace bakeoff::run
