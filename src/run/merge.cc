// run/merge.cc: the shards of one load merged into one run folder (contract in merge.h).
#include "run/merge.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/slo.h"
#include "core/file.h"
#include "measure/record.h"

namespace bakeoff::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;


// What merge needs of one shard's summary.json, checked for type as it is read.
struct Shard {
  fs::path dir;
  json summary;
  json step;  // its one step
  std::uint32_t index = 0, count = 1;  // config.shard
  std::string schedule_sha256;
  std::string start_at;  // config.start_at; empty when none
  fs::path records;
};

const json* Member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// The value at `path` of nested keys; null when some key is missing.
const json* At(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    at = Member(*at, key);
    if (at == nullptr) return nullptr;
  }
  return at;
}

std::optional<double> NumberAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = At(j, path);
  return at != nullptr && at->is_number() ? std::optional<double>(at->get<double>()) : std::nullopt;
}

std::string StringAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = At(j, path);
  return at != nullptr && at->is_string() ? at->get<std::string>() : "";
}

bool TrueAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = At(j, path);
  return at != nullptr && *at == true;
}

// A count at `path`: 0 unless it is a non-negative integer.
std::uint64_t CountAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = At(j, path);
  return at != nullptr && at->is_number_unsigned() ? at->get<std::uint64_t>() : 0;
}

// A copy of the object at `path`, or an empty object when it is absent or not an object.
json ObjectAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = At(j, path);
  return at != nullptr && at->is_object() ? *at : json::object();
}

// A copy of the value at `path`, or `otherwise`.
json CopyAt(const json& j, std::initializer_list<const char*> path, json otherwise = nullptr) {
  const json* at = At(j, path);
  return at != nullptr ? *at : otherwise;
}

Result<Shard> ReadShard(const fs::path& dir) {
  Shard shard;
  shard.dir = dir;
  const fs::path file = dir / "summary.json";
  Result<std::string> text = ReadFile(file);
  if (!text.ok()) return InvalidInput(fmt::format("{}: {}", dir.string(), text.error().message));
  shard.summary = json::parse(text.value(), nullptr, false);
  if (!shard.summary.is_object()) return InvalidInput(file.string() + ": not a JSON object");
  if (Member(shard.summary, "merged") != nullptr) {
    return InvalidInput(fmt::format("{}: is a merged run, not a shard: merge the shards themselves", dir.string()));
  }
  const json* config = Member(shard.summary, "config");
  const std::string shard_text = StringAt(shard.summary, {"config", "shard"});
  if (config == nullptr || !config->is_object() || shard_text.empty()) {
    return InvalidInput(fmt::format("{}: not a bench run's folder (its config names no shard; bench --shard I/N writes one)",
                               dir.string()));
  }
  const std::optional<load::ShardId> id = load::ParseShard(shard_text);
  if (!id) {
    return InvalidInput(fmt::format("{}: config.shard '{}' is not I/N with 0 <= I < N <= {}", file.string(), shard_text,
                               load::kMaxShards));
  }
  shard.index = id->index;
  shard.count = id->count;
  shard.start_at = StringAt(*config, {"start_at"});
  const json* schedule = Member(shard.summary, "schedule");
  shard.schedule_sha256 = schedule != nullptr ? StringAt(*schedule, {"sha256"}) : "";
  if (shard.schedule_sha256.empty()) {
    return InvalidInput(fmt::format("{}: holds no schedule sha256 (written by a bakeoff older than merge): run the shards again",
                               file.string()));
  }
  const json* steps = Member(shard.summary, "steps");
  if (steps == nullptr || !steps->is_array() || steps->size() != 1 || !(*steps)[0].is_object()) {
    return InvalidInput(fmt::format("{}: a shard holds one step (bench --shard runs one); this holds {}", file.string(),
                               steps != nullptr && steps->is_array() ? std::to_string(steps->size()) : "none"));
  }
  shard.step = (*steps)[0];
  const std::string records = StringAt(shard.summary, {"records_file"});
  shard.records = dir / (records.empty() ? "records.jsonl" : records);
  return shard;
}

// What differs between two shards' schedules, for the refusal: the first schedule-defining field
// of their configurations, else the trace's content, else what the digest alone covers.
std::string FirstDifference(const Shard& a, const Shard& b) {
  const json left = ScheduleDefiningConfig(a.summary["config"]), right = ScheduleDefiningConfig(b.summary["config"]);
  std::set<std::string> keys;
  for (auto it = left.begin(); it != left.end(); ++it) keys.insert(it.key());
  for (auto it = right.begin(); it != right.end(); ++it) keys.insert(it.key());
  for (const std::string& key : keys) {
    const json l = left.value(key, json()), r = right.value(key, json());
    if (l != r) return fmt::format("config.{} {} against {}", key, l.dump(), r.dump());
  }
  if (StringAt(a.summary, {"schedule", "trace_sha256"}) != StringAt(b.summary, {"schedule", "trace_sha256"})) {
    return "the trace's content";
  }
  return "the structured output spec, or a field this bakeoff does not know";
}

// Every shard of one load, each once, sorted by index.
Status CheckShards(std::vector<Shard>& shards, std::vector<std::string>& notes) {
  std::sort(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) { return a.index < b.index; });
  const Shard& first = shards.front();
  for (const Shard& s : shards) {
    if (s.count != first.count) {
      return InvalidInput(fmt::format("{} is shard {} of {}, but {} is shard {} of {}: not one load", first.dir.string(),
                                 first.index, first.count, s.dir.string(), s.index, s.count));
    }
    if (s.schedule_sha256 != first.schedule_sha256) {
      return InvalidInput(fmt::format("{} is not a shard of the same load as {}: its schedule differs ({})", s.dir.string(),
                                 first.dir.string(), FirstDifference(first, s)));
    }
    if (s.start_at != first.start_at &&
        (s.start_at.empty() || first.start_at.empty() || ParseInstant(s.start_at) != ParseInstant(first.start_at))) {
      return InvalidInput(fmt::format("{} started at {}, {} at {}: shards of one load share --start-at", s.dir.string(),
                                 s.start_at.empty() ? "no set instant" : s.start_at, first.dir.string(),
                                 first.start_at.empty() ? "no set instant" : first.start_at));
    }
    if (StringAt(s.summary, {"target", "model"}) != StringAt(first.summary, {"target", "model"})) {
      return InvalidInput(fmt::format("{} loaded the model '{}', {} '{}': not one load", s.dir.string(),
                                 StringAt(s.summary, {"target", "model"}), first.dir.string(),
                                 StringAt(first.summary, {"target", "model"})));
    }
    const std::string url = StringAt(s.summary, {"target", "url"});
    const std::string first_url = StringAt(first.summary, {"target", "url"});
    if (url != first_url) notes.push_back(fmt::format("shard {} loaded {}, shard 0 {}", s.index, url, first_url));
  }
  // Every index once: fewer folders than shards means some are missing (the first few are named).
  constexpr std::size_t kNamed = 10;
  std::vector<std::uint32_t> missing;
  std::uint32_t missing_count = 0;
  for (std::uint32_t i = 0, at = 0; i < first.count; ++i) {
    if (at < shards.size() && shards[at].index == i) {
      if (at + 1 < shards.size() && shards[at + 1].index == i) {
        return InvalidInput(fmt::format("shard {} of {} is given twice: {} and {}", i, first.count, shards[at].dir.string(),
                                   shards[at + 1].dir.string()));
      }
      ++at;
    } else {
      if (missing.size() < kNamed) missing.push_back(i);
      ++missing_count;
    }
  }
  if (missing_count > 0) {
    std::vector<std::uint32_t> given;
    for (const Shard& s : shards) given.push_back(s.index);
    given.resize(std::min(given.size(), kNamed));
    return InvalidInput(fmt::format(
        "shard{} {}{} of {} {} missing (given: {}{}): a merge of part of a load would not be the load",
        missing_count > 1 ? "s" : "", fmt::join(missing, ", "),
        missing_count > missing.size() ? fmt::format(" and {} more", missing_count - missing.size()) : "", first.count,
        missing_count > 1 ? "are" : "is", fmt::join(given, ", "), shards.size() > given.size() ? ", ..." : ""));
  }
  return Ok{};
}

// Reads one shard's records into the step's recorder and the merged records file. Returns how
// many it read.
Result<std::uint64_t> MergeRecords(const Shard& shard, measure::StepRecorder& recorder, JsonlRecordSink& sink,
                                   std::vector<std::string>& notes) {
  std::ifstream in(shard.records);
  if (!in) return InvalidInput(fmt::format("{}: cannot be read", shard.records.string()));
  measure::RecordLineReader reader;
  std::string line;
  std::uint64_t line_number = 0, read = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<measure::RequestRecord> record = reader.Read(line, MonoTime{});
    if (!record.ok()) {
      // Only the last line can be cut by a run killed while writing it (it has no newline).
      if (in.eof()) {
        notes.push_back(fmt::format("{}:{}: the last line was cut (the shard was stopped while writing it); "
                                    "that request is left out",
                                    shard.records.string(), line_number));
        break;
      }
      return InvalidInput(fmt::format("{}:{}: {}", shard.records.string(), line_number, record.error().message));
    }
    if (record->step != 0) {
      return InvalidInput(fmt::format("{}:{}: a record of step {}; the shard ran one step", shard.records.string(),
                                 line_number, record->step));
    }
    recorder.Add(record.value());
    sink.Write(record.value(), MonoTime{});
    ++read;
  }
  if (in.bad()) return InvalidInput(fmt::format("{}: read failed after line {}", shard.records.string(), line_number));
  return read;
}

// The shards' clocks against the target's, and how far apart they are.
json ClockJson(const std::vector<Shard>& shards, std::vector<std::string>& notes) {
  json per_shard = json::array();
  std::optional<double> lowest, highest;
  double uncertainty = 0;
  std::vector<std::uint32_t> unmeasured;
  for (const Shard& s : shards) {
    const json* clock = Member(s.summary, "clock");
    const std::optional<double> offset = clock ? NumberAt(*clock, {"offset_ms"}) : std::nullopt;
    if (!offset) {
      unmeasured.push_back(s.index);
      per_shard.push_back({{"shard", s.index},
                           {"not_measured", clock ? StringAt(*clock, {"not_measured"}) : "the shard recorded no clock"}});
      continue;
    }
    const double plus_minus = NumberAt(*clock, {"uncertainty_ms"}).value_or(0);
    per_shard.push_back({{"shard", s.index}, {"offset_ms", *offset}, {"uncertainty_ms", plus_minus}});
    lowest = std::min(lowest.value_or(*offset), *offset);
    highest = std::max(highest.value_or(*offset), *offset);
    uncertainty = std::max(uncertainty, plus_minus);
  }
  json clock = {{"method", "date_header"}, {"shards", per_shard}};
  if (lowest) {
    clock["spread_ms"] = *highest - *lowest;
    clock["uncertainty_ms"] = uncertainty;
    notes.push_back(fmt::format("clock: the target's clock is {:+.1f} to {:+.1f} ms from the shards' (spread {:.1f} ms, "
                                "each +- {:.1f} ms); a shard's sends are on its own clock",
                                *lowest, *highest, *highest - *lowest, uncertainty));
  }
  if (!unmeasured.empty() && shards.size() > 1) {
    notes.push_back(fmt::format("clock: not measured by shard {}: their skew against the others is unknown",
                                fmt::join(unmeasured, ", ")));
  }
  return clock;
}

// summary.json "fairness" of the merged load: what every request was meant to carry (the same in
// every shard: shard 0's), the counts over all shards' answers, and each shard's unequal work.
json FairnessJson(const std::vector<Shard>& shards, const analyze::StepAnalysis& step, BenchOutcome& outcome) {
  json fairness = ObjectAt(shards.front().summary, {"fairness"});
  if (fairness.contains("ok_answers")) fairness["ok_answers"] = step.ok_requests;
  if (At(fairness, {"usage", "answers_counted_by_server"})) fairness["usage"]["answers_counted_by_server"] = step.output_counted_by_server;
  if (At(fairness, {"forced_length", "answers_before_max_tokens"})) {
    fairness["forced_length"]["answers_before_max_tokens"] = step.ended_before_max_tokens;
  }
  json unequal = json::array();
  for (const Shard& s : shards) {
    const json* lines = At(s.summary, {"fairness", "unequal_work"});
    for (const json& line : lines != nullptr && lines->is_array() ? *lines : json::array()) {
      if (!line.is_string()) continue;
      outcome.unequal_work.push_back(fmt::format("shard {}: {}", s.index, line.get<std::string>()));
      unequal.push_back(outcome.unequal_work.back());
    }
  }
  fairness["unequal_work"] = std::move(unequal);
  return fairness;
}

}  // namespace

Result<BenchOutcome> MergeShards(const MergeConfig& config, const std::function<void(const std::string&)>& log) {
  if (config.shard_dirs.empty()) return InvalidInput("no shard folders given");
  BenchOutcome outcome;
  std::vector<Shard> shards;
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(config.out_dir, ec);
  for (const fs::path& dir : config.shard_dirs) {
    std::error_code dir_ec;
    if (!ec && fs::weakly_canonical(dir, dir_ec) == out && !dir_ec) {
      return InvalidInput(fmt::format("--out {} is one of the shards: the merged run goes to a folder of its own", dir.string()));
    }
    Result<Shard> shard = ReadShard(dir);
    if (!shard.ok()) return shard.error();
    shards.push_back(std::move(shard.value()));
  }
  if (Status whole = CheckShards(shards, outcome.notes); !whole.ok()) return whole.error();
  const Shard& first = shards.front();
  const std::string slo_text = StringAt(first.summary, {"config", "slo"});
  Result<analyze::Slo> slo = slo_text.empty() ? analyze::Slo{} : analyze::ParseSlo(slo_text);
  if (!slo.ok()) return InvalidInput(fmt::format("{}: config.slo: {}", (first.dir / "summary.json").string(), slo.error().message));

  fs::create_directories(config.out_dir, ec);
  if (ec) return MakeError(ErrorCode::kIo, fmt::format("cannot create --out {}: {}", config.out_dir.string(), ec.message()));
  outcome.records_path = config.out_dir / "records.jsonl";
  outcome.summary_path = config.out_dir / "summary.json";
  Result<std::unique_ptr<LineWriter>> writer = LineWriter::Open(outcome.records_path);
  if (!writer.ok()) return writer.error();
  JsonlRecordSink sink(*writer.value());

  load::StepResult merged;
  merged.spec.label = StringAt(first.step, {"label"});
  merged.recorder = measure::StepRecorder(slo->RequestThresholds());
  json shards_json = json::array();
  const json* worst_loop_lag = nullptr;  // the shard's with the highest p99
  double worst_loop_lag_p99 = 0;
  std::uint32_t worst_loop_lag_shard = 0;
  std::vector<std::string> stopped;
  std::string started_at, finished_at;
  for (const Shard& s : shards) {
    log(fmt::format("shard {} of {}: {}", s.index, s.count, s.records.string()));
    Result<std::uint64_t> read = MergeRecords(s, merged.recorder, sink, outcome.notes);
    if (!read.ok()) return read.error();
    const json& step = s.step;
    const std::uint64_t counted = CountAt(step, {"requests", "warmup"}) + CountAt(step, {"requests", "measured"});
    if (read.value() < counted) {
      outcome.notes.push_back(fmt::format("shard {}: {} holds {} of the {} requests its summary counts{}: the merged "
                                          "figures lack the rest",
                                          s.index, s.records.string(), read.value(), counted,
                                          TrueAt(s.summary, {"records_write_failed"}) ? " (some could not be written)" : ""));
    }
    merged.planned += CountAt(step, {"requests", "planned"});
    merged.session_turns_skipped += CountAt(step, {"requests", "session_turns_skipped"});
    merged.interrupted = merged.interrupted || TrueAt(step, {"interrupted"});
    outcome.interrupted = outcome.interrupted || TrueAt(s.summary, {"interrupted"});
    if (const std::string reason = StringAt(step, {"stopped_reason"}); !reason.empty()) {
      stopped.push_back(fmt::format("shard {}: {}", s.index, reason));
    }
    merged.backoff_waits += CountAt(step, {"connection_backoff", "waits"});
    merged.backoff_total += FromSeconds(std::clamp(NumberAt(step, {"connection_backoff", "total_s"}).value_or(0), 0.0, 1e7));
    merged.busiest_worker_cpu = std::max(
        merged.busiest_worker_cpu, std::clamp(NumberAt(step, {"generator_limited", "busiest_worker_cpu"}).value_or(0), 0.0, 64.0));
    const std::optional<double> loop_lag_p99 = NumberAt(step, {"latency", "event_loop_lag_ms", "p99", "value"});
    if (loop_lag_p99 && (worst_loop_lag == nullptr || *loop_lag_p99 > worst_loop_lag_p99)) {
      worst_loop_lag = At(step, {"latency", "event_loop_lag_ms"});
      worst_loop_lag_p99 = *loop_lag_p99;
      worst_loop_lag_shard = s.index;
    }
    const std::string started = StringAt(s.summary, {"started_at"}), finished = StringAt(s.summary, {"finished_at"});
    if (started_at.empty() || (!started.empty() && started < started_at)) started_at = started;
    finished_at = std::max(finished_at, finished);
    outcome.emulated = outcome.emulated || TrueAt(s.summary, {"target", "emulated"});
    shards_json.push_back({{"shard", s.index},
                           {"dir", s.dir.string()},
                           {"records", read.value()},
                           {"url", StringAt(s.summary, {"target", "url"})},
                           {"workers", CopyAt(s.summary, {"config", "workers"})},
                           {"started_at", started},
                           {"finished_at", finished},
                           {"interrupted", CopyAt(s.summary, {"interrupted"})},
                           {"prompt_calibration", CopyAt(s.summary, {"prompt_calibration"})}});
  }
  if (!stopped.empty()) merged.stopped_reason = fmt::format("{}", fmt::join(stopped, "; "));

  analyze::StepAnalysis& step = outcome.steps.emplace_back(analyze::AnalyzeStep(merged, slo.value()));
  // A shard whose client shaped its own numbers (its send or event-loop lag, its busiest thread)
  // shaped the load's, even when the union's percentiles dilute it.
  for (const Shard& s : shards) {
    if (!TrueAt(s.step, {"generator_limited", "limited"})) continue;
    step.generator_limited = true;
    const json* reasons = At(s.step, {"generator_limited", "reasons"});
    for (const json& reason : reasons != nullptr && reasons->is_array() ? *reasons : json::array()) {
      if (reason.is_string()) step.generator_limited_reasons.push_back(fmt::format("shard {}: {}", s.index, reason.get<std::string>()));
    }
  }
  json steps = json::array({analyze::ToJson(step)});
  if (worst_loop_lag != nullptr) {
    json lag = *worst_loop_lag;
    lag["shard"] = worst_loop_lag_shard;
    lag["note"] = "one client process's: the shard with the highest p99";
    steps[0]["latency"]["event_loop_lag_ms"] = std::move(lag);
  }
  // The engine's own figures are the same engine's whichever shard scraped them: shard 0's.
  if (const json* server = Member(first.step, "server"); server != nullptr && server->is_object()) {
    steps[0]["server"] = *server;
    steps[0]["server"]["scraped_by_shard"] = first.index;
  }

  json flags = first.summary["config"];
  flags["shard"] = fmt::format("all {}", first.count);
  json summary = SummaryPreamble(CountAt(first.summary, {"seed"}), flags);
  summary["schedule"] = first.summary["schedule"];
  summary["started_at"] = started_at;
  summary["finished_at"] = finished_at;
  summary["target"] = ObjectAt(first.summary, {"target"});
  summary["target"]["emulated"] = outcome.emulated;
  summary["prompt_calibration"] = CopyAt(first.summary, {"prompt_calibration"});
  summary["clock"] = ClockJson(shards, outcome.notes);
  summary["merged"] = {{"shards", std::move(shards_json)},
                       {"from", "every shard's records.jsonl, analysed together as one load"}};
  summary["metrics_file"] = nullptr;
  if (fs::exists(first.dir / "metrics.jsonl", ec)) {
    fs::copy_file(first.dir / "metrics.jsonl", config.out_dir / "metrics.jsonl", fs::copy_options::overwrite_existing, ec);
    if (!ec) summary["metrics_file"] = "metrics.jsonl";
  }
  summary["metrics_problems"] = CopyAt(first.summary, {"metrics_problems"}, json::array());
  summary["resources"] = {{"telemetry_file", nullptr},
                          {"note", "each shard's folder keeps what its machine sampled; the merged run holds none"}};
  summary["fairness"] = FairnessJson(shards, step, outcome);
  if (const json* pooling = At(first.summary, {"pooling"}); pooling != nullptr && pooling->is_object()) {
    summary["pooling"] = *pooling;
    const json* per_step = At(*pooling, {"steps"});
    const double inputs = per_step != nullptr && per_step->is_array() && !per_step->empty()
                              ? NumberAt((*per_step)[0], {"inputs_per_request"}).value_or(1)
                              : 1;
    summary["pooling"]["steps"] = json::array(
        {{{"step", step.label}, {"inputs_per_request", inputs}, {"inputs_per_s", step.request_rate_per_s * inputs}}});
  }
  WriteSummary(std::move(summary), std::move(steps), outcome, sink);
  return outcome;
}

}  // namespace bakeoff::run
