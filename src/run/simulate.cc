// run/simulate.cc: load steps on the virtual clock (contract in simulate.h).
#include "run/simulate.h"

#include <fmt/format.h>

#include <unordered_map>

#include "emulate/tokenizer.h"
#include "load/plan.h"
#include "load/request_builder.h"
#include "target/prompt_calibration.h"

namespace bakeoff::run {
namespace {

// What the emulated engine's tokenizer makes of a request (emulate/openai_api.h, "Prompt
// tokens"): chat counts every message's content joined with newlines; completions the prompt.
std::vector<emulate::TokenId> PromptTokenIds(const dialect::GenerationRequest& request) {
  std::string text;
  if (dialect::ApiTakesMessages(request.api)) {
    if (!request.system.empty()) text += request.system + "\n";
    for (const auto& [role, content] : request.history) text += content + "\n";
  }
  text += request.prompt;
  return emulate::TokenIds(text);
}

// The answer text the emulated engine streams for `tokens` tokens of a request (tokenizer.h).
std::string AnswerText(std::uint64_t output_seed, std::int64_t tokens) {
  std::string text;
  for (std::int64_t i = 0; i < tokens; ++i) {
    text += emulate::OutputPiece(output_seed, static_cast<std::uint64_t>(i));
  }
  return text;
}

MonoTime At(Nanos since_t0) { return MonoTime(since_t0); }

// One request between its submission and its result.
struct Pending {
  measure::Phase phase = measure::Phase::kMeasure;
  bool stream = true;
  std::uint32_t prompt_tokens_planned = 0;
  std::uint32_t max_tokens = 0;
  std::uint64_t output_seed = 0;
  load::History conversation;  // sessions: the turns so far, this request's user turn last
};

measure::RequestRecord ToRecord(const emulate::SimResult& r, const Pending& pending, std::uint32_t step,
                                Nanos drain_timeout) {
  measure::RequestRecord record;
  record.id = r.id;
  record.step = step;
  record.phase = pending.phase;
  record.intended_send = At(r.arrival);
  record.send_start = record.connected = record.request_written = At(r.arrival);
  record.headers_received = At(r.arrival);
  record.prompt_tokens_planned = pending.prompt_tokens_planned;
  record.max_tokens = pending.max_tokens;
  record.http_status = r.http_status;
  record.finished = At(r.finished);
  if (r.cut) {
    // As bench's client shut down at its drain deadline: what arrived is kept, the request cancelled.
    record.outcome = measure::Outcome::kCancelled;
    record.error = fmt::format("request {}: cancelled: still running {} s after the last send (the drain "
                               "timeout, where bench's client gives up)",
                               r.id, ToSeconds(drain_timeout));
    if (pending.stream && r.first_token) {
      record.first_chunk = record.first_token = record.first_answer_token = At(*r.first_token);
      for (Nanos t : r.token_times) record.token_events.push_back({At(t), 1, false, true});
      record.counted_tokens = r.token_times.size();
      if (!r.token_times.empty()) record.last_token = At(r.token_times.back());
    }
    return record;
  }
  if (r.http_status != 200) {
    record.outcome = measure::Outcome::kHttpError;
    record.error = fmt::format("request {}: HTTP {}: {}", r.id, r.http_status, r.error);
    return record;
  }
  record.outcome = measure::Outcome::kOk;
  if (pending.stream) {
    if (r.first_token) {
      record.first_chunk = record.first_token = record.first_answer_token = At(*r.first_token);
    }
    record.token_events.reserve(r.token_times.size());
    for (Nanos t : r.token_times) record.token_events.push_back({At(t), 1, false, true});
    record.counted_tokens = r.token_times.size();
  } else {
    // A whole response: every instant is the end of its body, as load/exchange.cc records it.
    record.first_token = record.first_answer_token = At(r.finished);
  }
  record.last_token = At(r.finished);
  record.usage_prompt_tokens = static_cast<std::uint64_t>(r.prompt_tokens);
  record.usage_completion_tokens = static_cast<std::uint64_t>(r.output_tokens);
  record.usage_cached_tokens = static_cast<std::uint64_t>(r.cached_tokens);
  record.finish_reason = r.finish == emulate::FinishReason::kStop ? "stop" : "length";
  return record;
}

class StepSimulation {
 public:
  StepSimulation(const SimulateConfig& config, std::uint32_t index, const load::PromptText& prompts,
                 load::RecordSink* sink, const std::atomic<bool>& stop)
      : config_(config), spec_(config.run.steps[index]), index_(index), prompts_(prompts),
        sink_(sink), stop_(stop), simulator_(config.sim) {}

  load::StepResult Run() {
    load::StepResult result;
    result.recorder = measure::StepRecorder(config_.slo.RequestThresholds());
    result.spec = spec_;
    result.t0 = MonoTime{};
    std::vector<load::PlannedSend> schedule;
    if (spec_.mode == load::LoopMode::kOpen) {
      schedule = load::BuildOpenLoopSchedule(spec_.open, spec_.limits,
                                             load::ArrivalSeed(config_.run.seed, index_));
    } else if (spec_.mode == load::LoopMode::kTrace) {
      trace_plan_ = load::BuildTracePlan(*spec_.trace, spec_.time_scale, spec_.limits);
      schedule = trace_plan_.schedule;
    } else {
      for (std::uint32_t i = 0; i < spec_.concurrency; ++i) SubmitClosedLoop();
    }
    result.planned = schedule.size();
    stride_ = sink_ == nullptr ? 0 : Stride(spec_.mode == load::LoopMode::kClosed ? spec_.limits.requests.value_or(0) : result.planned);
    std::size_t next = 0;
    auto source = [&]() -> std::optional<emulate::SimRequest> {
      if (next == schedule.size()) schedule_done_ = true;
      if (next == schedule.size() || stop_.load(std::memory_order_relaxed)) return std::nullopt;
      const load::PlannedSend& planned = schedule[next];
      const std::uint64_t id = spec_.mode == load::LoopMode::kTrace ? planned.item : next;
      ++next;
      const measure::Phase phase = planned.warmup ? measure::Phase::kWarmup : measure::Phase::kMeasure;
      return Make(id, planned.offset, phase, Build(id, {}));
    };
    // As bench: once nothing is left to send, the requests still running get --drain-timeout, then
    // the client gives up on them (load/runner.cc); the deadline is set once, when first reached.
    auto drain_deadline = [&]() -> std::optional<Nanos> {
      const bool sending_done = spec_.mode == load::LoopMode::kClosed ? closed_done_ : schedule_done_;
      if (!drain_from_ && sending_done && simulator_.queued_arrivals() == 0) drain_from_ = simulator_.now();
      if (!drain_from_) return std::nullopt;
      return *drain_from_ + config_.run.drain_timeout;
    };
    simulator_.Run(source, [&](emulate::SimResult&& r) { OnResult(std::move(r), result); }, drain_deadline);
    for (emulate::SimResult& r : simulator_.CutInFlight()) OnResult(std::move(r), result);
    result.interrupted = stop_.load();
    result.session_turns_skipped = session_turns_skipped_;
    counters_ = simulator_.counters();
    return result;
  }

  const std::vector<emulate::ReplicaCounters>& counters() const { return counters_; }
  // records.jsonl of this step: every stride-th request (0: none), how many were written.
  std::uint64_t stride() const { return stride_; }
  std::uint64_t kept() const { return kept_; }

 private:
  // Which requests of a step of `planned` requests (0: not known ahead, a closed loop by duration)
  // records.jsonl keeps: every stride-th, 0 for none.
  std::uint64_t Stride(std::uint64_t planned) const {
    const RecordsKept& keep = config_.keep;
    const auto sampled = [&] { return std::max<std::uint64_t>(1, (planned + keep.sample_size - 1) / std::max<std::uint64_t>(1, keep.sample_size)); };
    switch (keep.mode) {
      case RecordsKept::Mode::kAll:
      case RecordsKept::Mode::kNoTokens: return 1;
      case RecordsKept::Mode::kNone: return 0;
      case RecordsKept::Mode::kSample: return sampled();
      case RecordsKept::Mode::kAuto: return planned > RecordsKept::kAutoAllUpTo ? sampled() : 1;
    }
    return 1;
  }

  dialect::GenerationRequest Build(std::uint64_t id, load::History history) const {
    if (spec_.mode == load::LoopMode::kTrace) {
      return load::BuildTraceRequest(config_.run, *spec_.trace, prompts_, index_,
                                     static_cast<std::size_t>(id), std::move(history));
    }
    return load::BuildSyntheticRequest(config_.run, prompts_, index_, id);
  }

  emulate::SimRequest Make(std::uint64_t id, Nanos at, measure::Phase phase,
                           dialect::GenerationRequest request) {
    Pending pending;
    pending.phase = phase;
    pending.stream = request.stream;
    pending.max_tokens = request.max_tokens;
    pending.prompt_tokens_planned = spec_.mode == load::LoopMode::kTrace
                                        ? spec_.trace->requests[id].input_tokens
                                        : config_.run.shape.prompt_tokens;
    pending.output_seed = request.seed.value_or(0);
    emulate::SimRequest sim;
    sim.id = id;
    sim.arrival = at;
    sim.request.prompt = PromptTokenIds(request);
    sim.request.max_tokens = request.max_tokens;
    sim.request.min_tokens = request.min_tokens.value_or(0);
    sim.request.ignore_eos = request.ignore_eos;
    sim.request.output_seed = pending.output_seed;
    if (spec_.mode == load::LoopMode::kTrace && trace_plan_.next_turn[id] >= 0) {
      pending.conversation = std::move(request.history);
      pending.conversation.emplace_back("user", std::move(request.prompt));
    }
    pending_.emplace(id, std::move(pending));
    return sim;
  }

  void SubmitClosedLoop() {
    if (closed_done_ || stop_.load(std::memory_order_relaxed)) return;
    const Nanos now = simulator_.now();
    const load::StepLimits& limits = spec_.limits;
    const std::uint64_t id = closed_next_id_++;
    const bool warmup = now < limits.warmup || id < limits.warmup_requests;
    if (!warmup) {
      const bool past_window = limits.duration && now >= limits.warmup + *limits.duration;
      const bool count_reached = limits.requests && closed_measured_++ >= *limits.requests;
      if (past_window || count_reached) {
        closed_done_ = true;
        return;
      }
    }
    simulator_.Submit(Make(id, now, warmup ? measure::Phase::kWarmup : measure::Phase::kMeasure,
                           Build(id, {})));
  }

  void OnResult(emulate::SimResult&& r, load::StepResult& result) {
    auto node = pending_.extract(r.id);
    measure::RequestRecord record = ToRecord(r, node.mapped(), index_, config_.run.drain_timeout);
    if (stride_ > 0 && record.id % stride_ == 0) {
      ++kept_;
      if (config_.keep.mode == RecordsKept::Mode::kNoTokens) {
        measure::RequestRecord without_tokens = record;
        without_tokens.token_events.clear();
        sink_->Write(without_tokens, result.t0);
      } else {
        sink_->Write(record, result.t0);
      }
    }
    if (spec_.mode == load::LoopMode::kClosed) SubmitClosedLoop();
    if (spec_.mode == load::LoopMode::kTrace) ContinueSession(r, node.mapped());
    result.recorder.Add(record);
  }

  // As the live runner: the next turn follows the real answer after its think time; a failed
  // turn ends its session and the turns it would have led to are counted.
  void ContinueSession(const emulate::SimResult& r, Pending& pending) {
    const std::int64_t next = trace_plan_.next_turn[r.id];
    if (next < 0) return;
    if (r.http_status != 200 || r.cut || stop_.load(std::memory_order_relaxed)) {
      for (std::int64_t k = next; k >= 0; k = trace_plan_.next_turn[k]) ++session_turns_skipped_;
      return;
    }
    load::History history = std::move(pending.conversation);
    history.emplace_back("assistant", AnswerText(pending.output_seed, r.output_tokens));
    const workload::TraceRequest& turn = spec_.trace->requests[static_cast<std::size_t>(next)];
    const Nanos at = simulator_.now() + FromSeconds(turn.think_time_s.value_or(0) * spec_.time_scale);
    simulator_.Submit(Make(static_cast<std::uint64_t>(next), at, pending.phase,
                           Build(static_cast<std::uint64_t>(next), std::move(history))));
  }

  const SimulateConfig& config_;
  const load::StepSpec& spec_;
  std::uint32_t index_;
  const load::PromptText& prompts_;
  load::RecordSink* sink_;  // null: no records kept
  const std::atomic<bool>& stop_;
  emulate::Simulator simulator_;
  load::TracePlan trace_plan_;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::uint64_t closed_next_id_ = 0;
  std::uint64_t closed_measured_ = 0;
  bool closed_done_ = false;
  std::uint64_t session_turns_skipped_ = 0;
  bool schedule_done_ = false;         // open loop, replay: every planned send was made
  std::optional<Nanos> drain_from_;    // when nothing was left to send (the drain timeout's start)
  std::vector<emulate::ReplicaCounters> counters_;
  std::uint64_t stride_ = 1;
  std::uint64_t kept_ = 0;
};

nlohmann::json CountersJson(const std::vector<emulate::ReplicaCounters>& replicas) {
  nlohmann::json out = nlohmann::json::array();
  for (const emulate::ReplicaCounters& c : replicas) {
    const emulate::EngineCounters& e = c.engine;
    out.push_back({{"routed", c.routed},
                   {"refused", c.refused},
                   {"steps", e.steps},
                   {"preemptions", e.preemptions},
                   {"prompt_tokens", e.prompt_tokens},
                   {"prefill_tokens", e.prefill_tokens},
                   {"generation_tokens", e.generation_tokens},
                   {"prefix_cache_queries_tokens", e.prefix_queries_tokens},
                   {"prefix_cache_hit_tokens", e.prefix_hit_tokens},
                   {"prefix_cache_resumed_queries_tokens", e.resumed_queries_tokens},
                   {"prefix_cache_resumed_hit_tokens", e.resumed_hit_tokens},
                   {"kv_evicted_tokens", e.kv.evicted_tokens}});
  }
  return out;
}

// How evenly the router spread one step over the replicas, by requests and by work (prefilled and
// generated tokens), with a note when one replica carried much more than its share or some none.
nlohmann::json BalanceJson(const std::vector<emulate::ReplicaCounters>& replicas, const emulate::SimConfig& sim,
                           const std::string& step_label, std::vector<std::string>& notes) {
  std::uint64_t requests = 0, tokens = 0, idle = 0, most_routed = 0;
  std::size_t busiest = 0;
  const auto work = [](const emulate::ReplicaCounters& c) { return c.engine.prefill_tokens + c.engine.generation_tokens; };
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    requests += replicas[i].routed;
    tokens += work(replicas[i]);
    if (replicas[i].routed == 0) ++idle;
    most_routed = std::max(most_routed, replicas[i].routed);
    if (work(replicas[i]) > work(replicas[busiest])) busiest = i;
  }
  const double n = static_cast<double>(replicas.size());
  // The busiest replica's load over the mean replica's: 1 is an even spread, n all on one.
  const auto over_mean = [n](std::uint64_t part, std::uint64_t total) {
    return total > 0 ? static_cast<double>(part) * n / static_cast<double>(total) : 0.0;
  };
  const double work_ratio = over_mean(work(replicas[busiest]), tokens);
  const double request_share = requests > 0 ? static_cast<double>(replicas[busiest].routed) / static_cast<double>(requests) : 0;
  nlohmann::json balance = {{"busiest_replica", busiest},
                            {"busiest_requests_share", request_share},
                            {"busiest_work_over_mean", work_ratio},
                            {"max_requests_over_mean", over_mean(most_routed, requests)},
                            {"idle_replicas", idle}};
  // Fewer requests than replicas leave some idle whatever the router: not worth a note.
  if (replicas.size() > 1 && requests >= replicas.size() && (idle > 0 || work_ratio > kImbalanceNoted)) {
    std::string why;
    if (sim.router == emulate::Router::kPrefixAffinity) {
      why = fmt::format(": prefix-affinity routes by the first {} prompt tokens (--affinity-tokens), and most requests "
                        "share them",
                        sim.affinity_tokens);
    }
    notes.push_back(fmt::format("{}: replica {} did {:.2f}x the mean replica's work ({:.1f}% of the requests){}{}",
                                step_label, busiest, work_ratio, 100 * request_share,
                                idle > 0 ? fmt::format(", {} of {} replicas got none", idle, replicas.size()) : "", why));
  }
  return balance;
}

}  // namespace

std::string_view RecordsKeptName(RecordsKept::Mode mode) {
  switch (mode) {
    case RecordsKept::Mode::kAuto: return "auto";
    case RecordsKept::Mode::kAll: return "all";
    case RecordsKept::Mode::kNoTokens: return "records";
    case RecordsKept::Mode::kSample: return "sample";
    case RecordsKept::Mode::kNone: return "summary";
  }
  return "?";
}

// As bench calibrates prompt sizes against a server's /tokenize, against the emulated tokenizer.
double EmulatedWordsPerToken() {
  const load::PromptText prompts;
  return target::kCalibrationSampleWords /
         static_cast<double>(emulate::CountTokens(prompts.Build(target::kCalibrationSampleWords, 1)));
}

SimulatedStep SimulateStep(const SimulateConfig& config, std::uint32_t step, load::RecordSink* sink,
                           const std::atomic<bool>& stop) {
  SimulateConfig calibrated = config;
  calibrated.run.target.prompt_sizing.words_per_token = EmulatedWordsPerToken();
  const load::PromptText prompts;
  StepSimulation simulation(calibrated, step, prompts, sink, stop);
  const load::StepResult result = simulation.Run();
  SimulatedStep out;
  out.analysis = analyze::AnalyzeStep(result, config.slo);
  out.replicas = simulation.counters();
  out.balance = BalanceJson(out.replicas, config.sim, out.analysis.label, out.notes);
  out.kept_every = simulation.stride();
  out.kept = simulation.kept();
  return out;
}

Result<BenchOutcome> RunSimulate(const SimulateConfig& config, const std::atomic<bool>& stop,
                                 const std::function<void(const std::string&)>& log) {
  Status valid = emulate::ValidateSimConfig(config.sim);
  if (!valid.ok()) return valid.error();
  BenchOutcome outcome;
  outcome.emulated = true;
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "cannot create --out " + config.out_dir.string() + ": " + ec.message());
  }
  outcome.records_path = config.out_dir / "records.jsonl";
  outcome.summary_path = config.out_dir / "summary.json";
  Result<std::unique_ptr<LineWriter>> writer = LineWriter::Open(outcome.records_path);
  if (!writer.ok()) return writer.error();
  JsonlRecordSink sink(*writer.value());

  const double words_per_token = EmulatedWordsPerToken();
  nlohmann::json steps = nlohmann::json::array();
  nlohmann::json kept = nlohmann::json::array();
  for (std::uint32_t s = 0; s < config.run.steps.size() && !stop.load(); ++s) {
    log(fmt::format("step {}/{}: {} on {} simulated replica(s)", s + 1, config.run.steps.size(),
                    config.run.steps[s].label, config.sim.replicas));
    SimulatedStep simulated = SimulateStep(config, s, &sink, stop);
    outcome.steps.push_back(std::move(simulated.analysis));
    nlohmann::json step = analyze::ToJson(outcome.steps.back());
    step["simulator"] = {{"replicas", CountersJson(simulated.replicas)}, {"balance", std::move(simulated.balance)}};
    for (std::string& note : simulated.notes) outcome.notes.push_back(std::move(note));
    steps.push_back(std::move(step));
    kept.push_back({{"step", s}, {"every", simulated.kept_every}, {"records", simulated.kept}});
  }
  outcome.interrupted = stop.load();

  nlohmann::json summary = SummaryPreamble(config.run.seed, config.flags);
  summary["target"] = {{"url", nullptr},
                       {"model", config.run.target.request.model},
                       {"emulated", true},
                       {"simulated", true},
                       {"engine_preset", config.preset},
                       {"replicas", config.sim.replicas},
                       {"router", emulate::RouterName(config.sim.router)},
                       {"note", "emulated engine on a virtual clock (bakeoff simulate): these figures "
                                "describe bakeoff's model of an engine, not a real engine"}};
  summary["prompt_calibration"] = {{"checked", true},
                                   {"words_per_token", words_per_token},
                                   {"by", "the emulated engine's tokenizer"}};
  summary["records_kept"] = {{"mode", RecordsKeptName(config.keep.mode)},
                             {"with_token_instants", config.keep.mode != RecordsKept::Mode::kNoTokens},
                             {"steps", kept}};
  if (config.keep.mode == RecordsKept::Mode::kNone) {
    writer.value().reset();
    std::filesystem::remove(outcome.records_path, ec);
    outcome.records_path.clear();
    summary["records_file"] = nullptr;
  }
  WriteSummary(std::move(summary), std::move(steps), outcome, sink);
  return outcome;
}

}  // namespace bakeoff::run
