// load/runner.h
//
// Owns: running a load against one target over HTTP: one or more steps (a rate or concurrency
// sweep), on several worker threads with one event loop each, each worker the transport of its
// share of the step as its load::Dispatcher (load/dispatcher.h) decides it: open-loop, closed-loop
// or a trace replay. Every finished request is handed to a RecordSink at once (so raw records
// reach disk as they happen) and then to its worker's measure::StepRecorder, which keeps only what
// the step's figures need (so memory stays flat however long the step); the workers' recorders are
// merged when the step ends. A step is given up when nothing succeeds for long, and closed-loop
// slots back off after connection failures.
// Does not own: what is sent when (load/dispatcher.h, load/plan.h), one exchange's decoding
// (load/exchange.h), or any aggregate figure (analyze/).
//
// Thread-safety: RunLoad blocks the calling thread; the RecordSink is called from worker threads
// concurrently. `stop` may be set from any thread (a SIGINT watcher) to end the run early: in-flight
// requests are cancelled and recorded as such. A server that cannot be reached stops a step the
// same way (RunSpec::give_up_after), and closed-loop slots back off after connection failures.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dialect/openai.h"
#include "load/plan.h"
#include "load/prompt_text.h"
#include "measure/record.h"
#include "measure/step_recorder.h"
#include "net/http_client.h"
#include "workload/trace.h"

namespace bakeoff::load {

struct TargetSpec {
  net::Endpoint endpoint;
  net::ClientOptions client;
  dialect::GenerationRequest request;  // template: api, model, stream, sampling; prompt filled per request
  PromptSizing prompt_sizing;          // measured through the server (target/prompt_calibration.h)
  // What a variant step (StepSpec::variant) changes in every request: a structured-output
  // constraint, or LoRA adapters drawn per request instead of the base model.
  std::optional<dialect::OutputConstraint> constraint;
  std::vector<std::string> lora_adapters;
  double lora_zipf = 0;  // adapter k (1-based) is drawn with weight k^-s; 0: uniformly
};

struct RequestShape {
  std::uint32_t prompt_tokens = 256;
  std::uint32_t output_tokens = 128;
  std::uint32_t batch = 1;  // embeddings: texts per request; rerank: documents per request
};

// kOpen: planned arrivals; kClosed: N in flight; kTrace: a trace's arrivals and sessions replayed.
enum class LoopMode { kOpen, kClosed, kTrace };

struct StepSpec {
  LoopMode mode = LoopMode::kOpen;
  OpenLoopShape open;             // used when mode == kOpen
  std::uint32_t concurrency = 1;  // used when mode == kClosed
  const workload::Trace* trace = nullptr;  // used when mode == kTrace; outlives the run
  double time_scale = 1;  // kTrace: arrival and think times are multiplied by this
  StepLimits limits;
  std::string label;              // "rate=5/s" or "concurrency=16"
  // A variant of step `baseline` (its index): the same arrivals and the same prompts (its request
  // seeds), with TargetSpec's constraint or LoRA adapters applied, so the two compare one change.
  bool variant = false;
  std::uint32_t baseline = 0;
};

// One process's place in a sharded load: shard `index` (from 0) of `count`.
struct ShardId {
  std::uint32_t index = 0;
  std::uint32_t count = 1;
};
inline constexpr std::uint32_t kMaxShards = 10000;
// "I/N" (digits only) with 0 <= I < N <= kMaxShards; nullopt for anything else.
std::optional<ShardId> ParseShard(std::string_view text);

struct RunSpec {
  TargetSpec target;
  RequestShape shape;
  std::vector<StepSpec> steps;
  std::uint32_t workers = 1;
  std::uint64_t seed = 1;
  Nanos drain_timeout = std::chrono::seconds(60);  // after the last send, then cancel the rest
  // A step stops (and the run with it) when no request has succeeded for this long: at least
  // kGiveUpMinFailures failures in a row (of any kind but cancelled), the first this long ago.
  Nanos give_up_after = std::chrono::seconds(10);
  Nanos start_lead = std::chrono::milliseconds(50);  // t0 = now + lead, so workers start together
  // Shard `shard_index` of `shard_count` processes that run one load together (bench --shard): this
  // one sends the open-loop and trace sends whose index is shard_index modulo shard_count (a trace's
  // later turns go with their session's first), and its share of a closed loop's concurrency and
  // measured requests, under ids no other shard uses. Every shard must run the same steps, seed and
  // --workers. REQUIRES: shard_index < shard_count.
  std::uint32_t shard_index = 0;
  std::uint32_t shard_count = 1;
  // The first step's t0 (bench --start-at, the same instant in every shard); unset: now + start_lead.
  std::optional<MonoTime> start_at;
  std::vector<measure::SloThreshold> slo;  // per-request thresholds the recorders count goodput by
};

// Receives each finished record (the only place the whole record is seen: tests that need records
// collect them here). Called concurrently from worker threads.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void Write(const measure::RequestRecord& record, MonoTime t0) = 0;
};

// Failures in a row (no success between) before a step may be given up.
inline constexpr std::uint64_t kGiveUpMinFailures = 3;
// Closed loop: after a connection failure a slot waits before its next request, doubling from
// the first wait up to the longest, so a dead server is not hammered (and records.jsonl not
// flooded). A success resets the wait.
inline constexpr Nanos kFirstBackoff = std::chrono::milliseconds(10);
inline constexpr Nanos kLongestBackoff = std::chrono::milliseconds(500);

struct StepResult {
  StepSpec spec;
  MonoTime t0;                      // the step's start; schedule offsets are relative to it
  measure::StepRecorder recorder;   // merged from the workers' (event-loop lag samples included)
  double busiest_worker_cpu = 0;    // highest share of one core a worker thread used (0..1)
  std::uint64_t planned = 0;        // requests the plan held (open loop)
  bool interrupted = false;         // `stop` was set during this step
  std::uint64_t session_turns_skipped = 0;  // trace replay: turns not sent after a failed turn
  std::string stopped_reason;       // non-empty: the step was given up (nothing succeeded for long)
  std::uint64_t backoff_waits = 0;  // closed loop: sends delayed after connection failures
  Nanos backoff_total{0};           // their total delay
};

// Live counters for a progress display (read with relaxed loads from any thread).
struct Progress {
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> finished{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> tokens{0};
};

// Runs every step in order (stopping early when `stop` is set, or after a step that was given
// up). `on_tick` is called on the calling thread about four times a second with
// the current step's index and its live counters.
std::vector<StepResult> RunLoad(const RunSpec& spec, RecordSink& sink, const std::atomic<bool>& stop,
                                const std::function<void(std::size_t, const Progress&)>& on_tick);

}  // namespace bakeoff::load
