// run/simulate.cc: load steps on the virtual clock (contract in simulate.h).
#include "run/simulate.h"

#include <fmt/format.h>

#include <unordered_map>

#include "emulate/tokenizer.h"
#include "load/dispatcher.h"
#include "load/plan.h"
#include "target/prompt_calibration.h"

namespace bakeoff::run {
namespace {

// What the emulated engine's tokenizer makes of a request (emulate/openai_api.h, "Prompt
// tokens"): chat counts every message's content joined with newlines; completions the prompt. A
// pooling request is one sequence of its texts' tokens, a rerank's query before each document
// (emulate/pooling_api.h).
std::vector<emulate::TokenId> PromptTokenIds(const dialect::GenerationRequest& request) {
  if (!dialect::ApiGenerates(request.api)) {
    const std::string query = request.api == dialect::Api::kRerank ? request.prompt : std::string();
    std::vector<emulate::TokenId> ids;
    for (const std::string& input : request.inputs) {
      for (const std::string* text : {&query, &input}) {
        for (emulate::TokenId id : emulate::TokenIds(*text)) ids.push_back(id);
      }
    }
    return ids;
  }
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
  bool generates = true;  // false: a pooling request, whose one token is not an output
  std::uint32_t prompt_tokens_planned = 0;
  std::uint32_t max_tokens = 0;
  std::uint64_t output_seed = 0;
  bool continues_session = false;
};

// The token instants a streamed answer delivered before it ended or was cut.
void AddTokenInstants(const emulate::SimResult& r, measure::RequestRecord& record) {
  if (!r.first_token) return;
  record.first_chunk = record.first_token = record.first_answer_token = At(*r.first_token);
  record.token_events.reserve(r.token_times.size());
  for (Nanos t : r.token_times) record.token_events.push_back({At(t), 1, false, true});
  record.counted_tokens = r.token_times.size();
  if (!r.token_times.empty()) record.last_token = At(r.token_times.back());
}

measure::RequestRecord ToRecord(const emulate::SimResult& r, const Pending& pending, std::uint32_t step,
                                const load::RunSpec& run) {
  measure::RequestRecord record;
  record.id = r.id;
  record.step = step;
  record.phase = pending.phase;
  record.intended_send = At(r.arrival);
  record.send_start = record.connected = record.request_written = At(r.arrival);
  // A stream's headers come at once; a whole response's with its body, so never when it timed out.
  if (pending.stream || r.gave_up == emulate::GaveUp::kNo) record.headers_received = At(r.arrival);
  record.prompt_tokens_planned = pending.prompt_tokens_planned;
  record.max_tokens = pending.max_tokens;
  record.http_status = r.http_status;
  record.finished = At(r.finished);
  if (r.cut || r.gave_up != emulate::GaveUp::kNo) {
    // As bench's client gives up: what arrived is kept, and the request ends cancelled (at the
    // drain deadline) or timed out (at one of its own deadlines).
    const net::Deadlines& deadlines = run.target.client.deadlines;
    if (r.cut) {
      record.outcome = measure::Outcome::kCancelled;
      record.error = fmt::format("request {}: cancelled: still running {} s after the last send (the drain "
                                 "timeout, where bench's client gives up)",
                                 r.id, ToSeconds(run.drain_timeout));
    } else {
      record.outcome = measure::Outcome::kTimeout;
      record.error = r.gave_up == emulate::GaveUp::kSilence
                         ? fmt::format("request {}: timed out: no response bytes for the idle deadline of {} ms",
                                       r.id, ToMillis(deadlines.idle))
                         : fmt::format("request {}: timed out: no complete answer within {} ms of the send", r.id,
                                       ToMillis(pending.stream ? deadlines.total
                                                               : std::min(deadlines.total, deadlines.first_byte)));
    }
    if (pending.stream) AddTokenInstants(r, record);
    return record;
  }
  if (r.http_status != 200) {
    record.outcome = measure::Outcome::kHttpError;
    record.error = fmt::format("request {}: HTTP {}: {}", r.id, r.http_status, r.error);
    return record;
  }
  record.outcome = measure::Outcome::kOk;
  if (pending.stream) {
    AddTokenInstants(r, record);
  } else {
    // A whole response: every instant is the end of its body, as load/exchange.cc records it.
    record.first_token = At(r.finished);
    // A pooling answer has vectors or scores, no text: it has no answer token and no finish.
    if (pending.generates) record.first_answer_token = At(r.finished);
  }
  record.last_token = At(r.finished);
  record.usage_prompt_tokens = static_cast<std::uint64_t>(r.prompt_tokens);
  record.usage_cached_tokens = static_cast<std::uint64_t>(r.cached_tokens);
  // A pooling answer's usage counts no completion (dialect/pooling.h), and it has no finish.
  record.usage_completion_tokens =
      pending.generates ? static_cast<std::uint64_t>(r.output_tokens) : 0;
  if (pending.generates)
    record.finish_reason = r.finish == emulate::FinishReason::kStop ? "stop" : "length";
  return record;
}

// The simulator's virtual clock, as the dispatcher reads time (t0 is its zero).
class SimulatorClock final : public Clock {
 public:
  explicit SimulatorClock(const emulate::Simulator& simulator) : simulator_(simulator) {}
  MonoTime Now() const override { return At(simulator_.now()); }
  WallTime WallNow() const override { return WallTime(simulator_.now()); }

 private:
  const emulate::Simulator& simulator_;
};

// One step on the virtual clock: the load::Dispatcher decides what is sent when, as it does for
// bench, and this is its transport: each request goes to the simulator at its instant, with the
// client's deadlines, and its result comes back as the record bench would have written.
class StepSimulation final : public load::Sender {
 public:
  StepSimulation(const SimulateConfig& config, std::uint32_t index, const load::PromptText& prompts,
                 load::RecordSink* sink, const std::atomic<bool>& stop)
      : config_(config), spec_(config.run.steps[index]), index_(index), sink_(sink), stop_(stop),
        simulator_(config.sim), clock_(simulator_), trace_plan_(PlanTrace(spec_)),
        dispatcher_(config.run, index, prompts, spec_.mode == load::LoopMode::kTrace ? &trace_plan_ : nullptr,
                    dispatch_state_, 0, 1, MonoTime{}, clock_, *this) {}

  load::StepResult Run() {
    load::StepResult result;
    result.recorder = measure::StepRecorder(config_.slo.RequestThresholds());
    result.spec = spec_;
    result.t0 = MonoTime{};
    result.planned = dispatcher_.PlannedSends();
    stride_ = sink_ == nullptr ? 0 : Stride(spec_.mode == load::LoopMode::kClosed ? spec_.limits.requests.value_or(0) : result.planned);
    dispatcher_.Start();
    auto source = [&]() -> std::optional<emulate::SimRequest> {
      if (stop_.load(std::memory_order_relaxed)) dispatcher_.Stop();
      if (!dispatcher_.HasScheduled()) {
        source_exhausted_ = true;
        return std::nullopt;
      }
      return Make(dispatcher_.TakeScheduled());
    };
    // As bench: once nothing is left to send, the requests still running get --drain-timeout, then
    // the client gives up on them (load/runner.cc); the deadline is set once, when first reached.
    auto drain_deadline = [&]() -> std::optional<Nanos> {
      // (The simulator takes a planned arrival before its instant: sending is done once it asked
      // for one more.)
      // A stop is no deadline: what is in the engines then finishes (simulate.h).
      if (!drain_from_ && source_exhausted_ && dispatcher_.SendingDone() && simulator_.queued_arrivals() == 0 &&
          !stop_.load(std::memory_order_relaxed)) {
        drain_from_ = simulator_.now();
      }
      if (!drain_from_) return std::nullopt;
      return *drain_from_ + config_.run.drain_timeout;
    };
    simulator_.Run(source, [&](emulate::SimResult&& r) { OnResult(std::move(r), result); }, drain_deadline);
    for (emulate::SimResult& r : simulator_.CutInFlight()) OnResult(std::move(r), result);
    result.interrupted = stop_.load();
    result.session_turns_skipped = dispatch_state_.session_turns_skipped.load();
    counters_ = simulator_.counters();
    return result;
  }

  // load::Sender: a closed-loop slot's next request or a session's next turn, at its instant.
  void Send(load::DispatchOrder order) override { simulator_.Submit(Make(std::move(order))); }

  const std::vector<emulate::ReplicaCounters>& counters() const { return counters_; }
  // records.jsonl of this step: every stride-th request (0: none), how many were written.
  std::uint64_t stride() const { return stride_; }
  std::uint64_t kept() const { return kept_; }

 private:
  static load::TracePlan PlanTrace(const load::StepSpec& spec) {
    if (spec.mode != load::LoopMode::kTrace) return {};
    return load::BuildTracePlan(*spec.trace, spec.time_scale, spec.limits);
  }

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

  emulate::SimRequest Make(load::DispatchOrder order) {
    const dialect::GenerationRequest& request = order.request;
    Pending pending;
    pending.phase = order.phase;
    pending.stream = request.stream;
    pending.generates = dialect::ApiGenerates(request.api);
    pending.max_tokens = request.max_tokens;
    pending.prompt_tokens_planned = order.prompt_tokens_planned;
    pending.output_seed = request.seed.value_or(0);
    pending.continues_session = order.continues_session;
    emulate::SimRequest sim;
    sim.id = order.id;
    sim.arrival = order.at.time_since_epoch();
    sim.request.prompt = PromptTokenIds(request);
    if (pending.generates) {
      sim.request.max_tokens = request.max_tokens;
      sim.request.min_tokens = request.min_tokens.value_or(0);
      sim.request.ignore_eos = request.ignore_eos;
    } else {
      // As the emulated server reads a pooling request: one prefill that makes one token.
      sim.request.max_tokens = 1;
      sim.request.ignore_eos = true;
    }
    sim.request.output_seed = pending.output_seed;
    // bench's client deadlines (net/http_client.h): a stream's headers come at once, then each
    // read may wait `idle`; a whole response's headers come with its body, within `first_byte`.
    const net::Deadlines& deadlines = config_.run.target.client.deadlines;
    if (request.stream) {
      sim.give_up_at = sim.arrival + deadlines.total;
      sim.max_silence = deadlines.idle;
    } else {
      sim.give_up_at = sim.arrival + std::min(deadlines.total, deadlines.first_byte);
    }
    pending_.emplace(order.id, pending);
    return sim;
  }

  void OnResult(emulate::SimResult&& r, load::StepResult& result) {
    auto node = pending_.extract(r.id);
    const Pending& pending = node.mapped();
    measure::RequestRecord record = ToRecord(r, pending, index_, config_.run);
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
    if (stop_.load(std::memory_order_relaxed)) dispatcher_.Stop();
    dispatcher_.OnFinished(record, pending.continues_session && record.outcome == measure::Outcome::kOk
                                       ? AnswerText(pending.output_seed, r.output_tokens)
                                       : std::string());
    result.recorder.Add(record);
  }

  const SimulateConfig& config_;
  const load::StepSpec& spec_;
  std::uint32_t index_;
  load::RecordSink* sink_;  // null: no records kept
  const std::atomic<bool>& stop_;
  emulate::Simulator simulator_;
  SimulatorClock clock_;
  load::TracePlan trace_plan_;
  load::StepDispatchState dispatch_state_;
  load::Dispatcher dispatcher_;
  std::unordered_map<std::uint64_t, Pending> pending_;
  bool source_exhausted_ = false;      // the simulator asked for a planned arrival and none was left
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
  if (!dialect::ApiGenerates(config.run.target.request.api)) {
    summary["pooling"] =
        PoolingSummaryJson(config.run.target.request.api, config.run.shape.batch, outcome.steps);
  }
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
