#include "analyze/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "core/file.h"
#include "dialect/openai_control.h"
#include "load/prompt_text.h"

namespace bakeoff::analyze {
namespace {

std::string IsoTimeNow() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// Finds the model to use and whether the server is the emulated engine.
Status Discover(BenchConfig& config, BenchOutcome& outcome,
                const std::function<void(const std::string&)>& log) {
  load::TargetSpec& target = config.run.target;
  net::HttpRequest request;
  request.method = "GET";
  request.path = "/v1/models";
  request.body.clear();
  Result<net::FetchedResponse> response = net::Fetch(target.endpoint, request, target.client);
  if (!response.ok()) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot reach " + target.endpoint.ToString() + ": " + response.error().message);
  }
  if (response->head.Header("X-Bakeoff-Emulated") == "true") outcome.emulated = true;
  if (response->head.status != 200) {
    if (target.request.model.empty()) {
      return MakeError(ErrorCode::kUnavailable,
                       fmt::format("GET {}/v1/models answered HTTP {}; pass --model",
                                   target.endpoint.ToString(), response->head.status));
    }
    return Ok{};
  }
  Result<std::vector<dialect::ModelCard>> models = dialect::DecodeModelList(response->body);
  if (!models.ok()) {
    if (target.request.model.empty()) return models.error();
    return Ok{};
  }
  for (const dialect::ModelCard& card : models.value()) {
    if (card.owned_by == dialect::kEmulatedOwner) outcome.emulated = true;
  }
  if (target.request.model.empty()) {
    if (models->empty()) {
      return MakeError(ErrorCode::kUnavailable, "the server lists no models; pass --model");
    }
    target.request.model = models->front().id;
    log("model: " + target.request.model + " (first listed by /v1/models)");
  }
  return Ok{};
}

Result<std::uint64_t> CountTokens(const load::TargetSpec& target, const std::string& text) {
  net::HttpRequest request;
  request.path = "/tokenize";
  request.body = dialect::EncodeTokenizeRequest(target.request.model, text);
  Result<net::FetchedResponse> response = net::Fetch(target.endpoint, request, target.client);
  if (!response.ok()) return response.error();
  if (response->head.status != 200) {
    return MakeError(ErrorCode::kUnavailable, fmt::format("HTTP {}", response->head.status));
  }
  return dialect::DecodeTokenizeCount(response->body);
}

// Measures the server's tokens per corpus word and checks the achieved prompt length.
void Calibrate(BenchConfig& config, BenchOutcome& outcome, nlohmann::json& calibration) {
  load::TargetSpec& target = config.run.target;
  const load::PromptText prompts;
  Result<std::uint64_t> sample = CountTokens(target, CalibrationSample(prompts));
  if (!sample.ok() || sample.value() == 0) {
    const std::string why = sample.ok() ? "it counted 0 tokens" : sample.error().message;
    outcome.notes.push_back("prompt lengths not checked: no usable /tokenize endpoint (" + why +
                            "); lengths assume one token per word");
    calibration = {{"checked", false}, {"reason", why}};
    return;
  }
  target.words_per_token = kCalibrationWords / static_cast<double>(sample.value());
  const bool replay = std::any_of(config.run.steps.begin(), config.run.steps.end(),
                                  [](const load::StepSpec& s) { return s.mode == load::LoopMode::kTrace; });
  if (replay) {
    // Each replayed request has its own length; the ratio is what makes them right.
    outcome.notes.push_back(fmt::format("prompt lengths scaled by the server's {:.3f} words per token",
                                        target.words_per_token));
    calibration = {{"checked", true}, {"words_per_token", target.words_per_token}};
    return;
  }
  const std::uint32_t planned = config.run.shape.prompt_tokens;
  Result<std::uint64_t> achieved =
      CountTokens(target, prompts.Build(load::WordsForTokens(planned, target.words_per_token), 2));
  calibration = {{"checked", true},
                 {"words_per_token", target.words_per_token},
                 {"planned_prompt_tokens", planned}};
  if (achieved.ok()) {
    calibration["achieved_prompt_tokens"] = achieved.value();
    outcome.notes.push_back(fmt::format("prompt length: planned {} tokens, server counts {}",
                                        planned, achieved.value()));
  }
}

}  // namespace

std::string CalibrationSample(const load::PromptText& prompts) { return prompts.Build(kCalibrationWords, 1); }

void JsonlRecordSink::Write(const measure::RequestRecord& record, MonoTime t0) {
  Status written = writer_.Append(measure::RecordToJsonLine(record, t0));
  if (!written.ok() && !failed_.exchange(true)) {
    fmt::print(stderr, "bakeoff: {}\n", written.error().message);
  }
}

nlohmann::json SummaryPreamble(std::uint64_t seed, const nlohmann::json& flags) {
  nlohmann::json summary;
  summary["schema_version"] = kSummarySchemaVersion;
  summary["tool"] = {{"name", "bakeoff"}, {"version", BAKEOFF_VERSION}};
  summary["seed"] = seed;
  summary["config"] = flags;
  return summary;
}

Status WriteSummary(nlohmann::json summary, nlohmann::json steps, const BenchOutcome& outcome,
                    const JsonlRecordSink& sink) {
  summary["interrupted"] = outcome.interrupted;
  summary["records_file"] = "records.jsonl";
  summary["records_write_failed"] = sink.failed();
  summary["steps"] = std::move(steps);
  Status written = WriteFileAtomically(outcome.summary_path, summary.dump(2) + "\n");
  if (!written.ok()) return written;
  if (sink.failed()) {
    return MakeError(ErrorCode::kIo, "some records could not be written to " + outcome.records_path.string());
  }
  return Ok{};
}

Result<BenchOutcome> RunBench(BenchConfig config, const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log,
                              const std::function<void(std::size_t, const load::Progress&)>& on_tick) {
  BenchOutcome outcome;
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo,
                     "cannot create --out " + config.out_dir.string() + ": " + ec.message());
  }
  Status discovered = Discover(config, outcome, log);
  if (!discovered.ok()) return discovered.error();
  nlohmann::json calibration = {{"checked", false}, {"reason", "disabled"}};
  if (config.calibrate_prompt) Calibrate(config, outcome, calibration);

  outcome.records_path = config.out_dir / "records.jsonl";
  outcome.summary_path = config.out_dir / "summary.json";
  Result<std::unique_ptr<LineWriter>> writer = LineWriter::Open(outcome.records_path);
  if (!writer.ok()) return writer.error();
  JsonlRecordSink sink(*writer.value());

  const std::string started = IsoTimeNow();
  config.run.slo = config.slo.RequestThresholds();
  std::vector<load::StepResult> results = load::RunLoad(config.run, sink, stop, on_tick);
  outcome.interrupted = stop.load();

  nlohmann::json steps = nlohmann::json::array();
  for (const load::StepResult& result : results) {
    outcome.steps.push_back(AnalyzeStep(result, config.slo));
    steps.push_back(ToJson(outcome.steps.back()));
  }
  nlohmann::json summary = SummaryPreamble(config.run.seed, config.flags);
  summary["started_at"] = started;
  summary["finished_at"] = IsoTimeNow();
  summary["target"] = {{"url", config.url},
                       {"model", config.run.target.request.model},
                       {"emulated", outcome.emulated}};
  if (outcome.emulated) {
    summary["target"]["note"] =
        "emulated engine: these figures describe bakeoff's model of an engine, not a real engine";
  }
  summary["prompt_calibration"] = calibration;
  Status written = WriteSummary(std::move(summary), std::move(steps), outcome, sink);
  if (!written.ok()) return written.error();
  return outcome;
}

}  // namespace bakeoff::analyze
