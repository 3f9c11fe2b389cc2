// emulate/server.h
//
// Owns: `bakeoff emulate`'s HTTP server: an OpenAI-compatible endpoint (vLLM's shapes) on
// Boost.Beast whose token timing comes from the engine model (emulate/scheduler.h) run in real
// time: engine steps run back to back while there is work and the server idles otherwise; each
// step's tokens are written to their streams when the step completes, one write per connection
// (spread over `write_threads` threads: net/http_server.h WriteFanout).
// With `instant`, the model is bypassed and every request's tokens are written as fast as the
// socket takes them, for measuring clients.
// Also owns the server's life cycle as an engine shows it to a client: a staged start-up (each
// stage logged, /health 503 until ready), a bounded waiting queue (503 with Retry-After beyond
// it), client disconnects that abort their sequence, graceful drain or abort on shutdown, the
// output of each choice (answers, JSON, tool calls, stop strings: emulate/output_text.h), and
// the fault and quirk knobs that imitate misbehaving engines (docs/emulator.md, "Faults and
// quirks"). Endpoints: GET /health, GET /metrics (emulate/metrics.h), GET /v1/models, POST
// /v1/completions, POST /v1/chat/completions, POST /tokenize (docs/emulator.md). Every response
// carries `X-Bakeoff-Emulated: true`. Does not own: the engine model, the OpenAI body formats
// (emulate/openai_api.h), the metric names (emulate/metrics.h), signals and process exit
// (cli/emulate_command.cc).
//
// Threading: Start() spawns one I/O thread that owns every socket, timer, the scheduler and the
// metrics; nothing in it is locked (the write threads send only while it waits for them). The
// public methods are safe from any other thread. The `log` and `on_crash` callbacks run on the
// I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "emulate/output_text.h"
#include "emulate/scheduler.h"

namespace bakeoff::emulate {

// The emulated start-up: stages run in this order for their durations, starting at Start();
// each stage with a non-zero duration is logged when it starts, and "ready" when all are done.
// Until ready, /health and the API answer 503 (GET /metrics answers throughout).
struct StartupStages {
  Nanos download{0};  // fetching weights
  Nanos load{0};      // loading weights into memory
  Nanos compile{0};   // graph capture / compilation
  Nanos warmup{0};    // profiling and warm-up passes
  Nanos total() const { return download + load + compile + warmup; }
};

// Fault and quirk knobs; every one is off by default. Rates are probabilities in [0, 1] drawn,
// per generation request in arrival order, from one Rng seeded with `seed`.
struct FaultConfig {
  // A generation request fails with 500 (OpenAI-shaped body) before anything is streamed.
  double error_rate = 0.0;
  // A stream pauses for `stall` after half of its max_tokens (nothing is written meanwhile; the
  // engine keeps generating, and what it produced is written when the pause ends).
  double stall_rate = 0.0;
  Nanos stall{0};
  // When the N-th generation request arrives, the server stops hard: every connection is reset
  // (that request is never answered), the listener closes and on_crash runs. 0 = never.
  std::uint64_t crash_after = 0;
  // From the N-th generation request on, every step lasts slow_factor times what the cost model
  // says: a machine whose speed changes mid-run (a noisy neighbour, thermal throttling). 0 = never.
  std::uint64_t slow_after = 0;
  double slow_factor = 1.0;
  // /health answers 200 from the start, while the API still answers 503 until ready.
  bool health_lies = false;
  // Streams end without `data: [DONE]`.
  bool no_done = false;
  // A stream sends `data: {"error":{...}}` after half of its max_tokens instead of the rest,
  // then `data: [DONE]` (vLLM's shape for an error after the 200 header) and ends; the sequence
  // is aborted.
  double stream_error_rate = 0.0;
  // A client that disconnects does not abort its sequence: it keeps running in the engine model
  // (counted in /metrics, holding its KV and its running slot) until it finishes. Modelled mode
  // only (instant mode has no engine to keep busy).
  bool ignore_disconnect = false;
  // While any sequence runs or waits, GET /health answers only after this long, or as soon as the
  // engine goes idle, whichever comes first ("health blocks while busy"). 0 = at once.
  Nanos health_busy_delay{0};
  // /health keeps answering not_ready_status for this long after ready, while the API already
  // serves ("able to serve long before /health says so"). 0 = none.
  Nanos health_late{0};
  // Invalid generation and /tokenize bodies (malformed JSON, wrong field types, out-of-range
  // values; every 400 of openai_api.h) get 500 InternalServerError instead.
  bool bad_input_500 = false;
  // A prompt over the context limit is left-truncated to fit and served (openai_api.h
  // ServedModel::truncate_prompts) instead of a 400.
  bool truncate_prompts = false;
  // The output text varies per request: the same prompt and seed (or temperature 0) give
  // different words each time.
  bool nondeterministic = false;
  // Stop strings (`stop`) are ignored.
  bool ignore_stop = false;
  // Text cut inside multibyte UTF-8 characters wherever the server writes text: every streamed
  // token starts or ends inside a character (ChoiceText::CutUtf8), error messages start with a
  // cut character, and /v1/models lists a second id that ends in one. The bytes go out raw.
  bool cut_utf8 = false;
  std::uint64_t seed = 0;
};

// The model name the emulated engine serves unless told otherwise (bakeoff emulate --model); the
// simulator serves only this one.
inline constexpr std::string_view kDefaultServedModelName = "emulated-model";

inline constexpr int kMaxWriteThreads = 64;

struct EmulatorConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;  // 0 = an ephemeral port (see EmulatorServer::port())
  // Non-empty: listen on this Unix-domain socket file instead of host and port (as vLLM's --uds).
  std::string unix_socket;
  std::string served_model_name = std::string(kDefaultServedModelName);
  // LoRA adapter names served beside the model (a request naming one runs with it; the engine
  // model holds engine.max_loras of them at once, loading others at cost.lora_load_ms).
  std::vector<std::string> lora_adapters;
  EngineConfig engine;
  StartupStages startup;
  // Ignore the cost model: emit tokens as fast as possible.
  bool instant = false;
  // A generation request arriving while this many requests wait in the engine's queue gets 503
  // ("The request queue is full."). 0 = no limit (vLLM's default). Not applied in instant mode.
  std::int64_t max_waiting = 0;
  // Streams carry the usage chunk even when stream_options.include_usage was not asked (vLLM's
  // --enable-force-include-usage); by default only when asked.
  bool usage_always = false;
  // Output tokens per SSE event (the last event of a stream may carry fewer). >= 1.
  std::int64_t tokens_per_event = 1;
  // Threads that write a step's tokens to the streams (the I/O thread and write_threads - 1
  // helpers; net/http_server.h WriteFanout): on loopback one thread needs 6-8 us a stream.
  int write_threads = 1;
  // A step's sends go to the kernel in io_uring batches where it allows (net/socket_batch.h);
  // false: one sendmsg each.
  bool io_uring_writes = true;
  // While a stream has written nothing for this long (e.g. queued), write the SSE comment
  // ": keep-alive". 0 = never.
  Nanos keepalive_comments{0};
  FaultConfig faults;
  // What GET /health answers before ready (and while faults.health_late holds it back): 503 with
  // an empty body by default; any other status in [200, 599] comes with the body
  // {"status":"loading"} (e.g. 200, as some engines say "loading" with a 200).
  int not_ready_status = 503;
  // GET /metrics answers 404 (an engine without a metrics endpoint).
  bool no_metrics = false;
  // POST /v1/embeddings, /v1/rerank and /rerank answer 404 (an engine serving a generative model,
  // whose pooling routes are absent).
  bool no_pooling = false;
  // --answers: a request whose answer key (openai_api.h GenerationSpec::answer_key) is in the
  // table outputs that answer (finish_reason "stop" when it fits max_tokens). Empty = none.
  AnswerTable answers;
  // A keep-alive connection with no request bytes for this long is closed.
  Nanos idle_timeout = std::chrono::seconds(60);
  // A request whose headers and body have not fully arrived this long after its first byte is
  // closed (slowloris defence).
  Nanos request_timeout = std::chrono::seconds(10);
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = 32 * 1024 * 1024;
  // Receives each start-up log line, without a newline: "bakeoff emulate: stage=load state=start
  // t=0.000", "bakeoff emulate: ready t=3.002" (docs/emulator.md, "Start-up"). May be empty.
  std::function<void(std::string_view line)> log;
  // Runs after a crash fault has stopped the server hard (the command exits the process there).
  // May be empty.
  std::function<void()> on_crash;
};

// OK when the config can be served; kInvalidInput naming the field otherwise.
Status ValidateEmulatorConfig(const EmulatorConfig& config);

// Counters readable from any thread (updated by the I/O thread).
struct EmulatorStats {
  std::uint64_t connections_open = 0;
  std::uint64_t requests_total = 0;    // HTTP requests parsed
  std::uint64_t running = 0;           // sequences running in the engine model
  std::uint64_t waiting = 0;           // sequences queued
  std::uint64_t finished = 0;          // generations the engine finished (stop or length)
  std::uint64_t aborted = 0;           // generations ended early (disconnect, shutdown, fault)
  std::uint64_t rejected = 0;          // generation requests answered 503
  std::uint64_t steps = 0;             // engine steps completed
  std::uint64_t steps_fanned_out = 0;  // ... whose writes the write threads shared (--write-threads)
  bool ready = false;                  // the start-up stages are over
  bool crashed = false;                // a crash fault stopped the server
};

// How a shutdown (BeginDrain or AbortAll) ended the generations in flight when it began.
struct ShutdownReport {
  std::uint64_t finished = 0;  // completed normally
  std::uint64_t cut = 0;       // ended early: drain timeout, abort, or the client went away
};

class EmulatorServer {
 public:
  // Validates the config, binds and listens, and starts the I/O thread (which begins the
  // start-up stages). kInvalidInput for a bad config, kIo when the address cannot be bound.
  static Result<std::unique_ptr<EmulatorServer>> Start(EmulatorConfig config);

  // Stops (as Stop()) and joins.
  ~EmulatorServer();
  EmulatorServer(const EmulatorServer&) = delete;
  EmulatorServer& operator=(const EmulatorServer&) = delete;

  // The bound port (the ephemeral one when config.port was 0).
  std::uint16_t port() const;
  const EmulatorConfig& config() const;
  // Empty when a step's sends go in io_uring batches; otherwise why they go one sendmsg each
  // ("turned off", or the kernel's refusal of a ring), as at start-up.
  const std::string& unbatched_writes() const;

  // Graceful shutdown: closes the listener, answers every new request (on open keep-alive
  // connections) with 503 and /health with 503, lets the generations in flight finish for up to
  // `timeout`, then closes every connection (cutting what is left). Progress: WaitShutdown().
  // No-op once a shutdown has begun or the server has stopped.
  void BeginDrain(Nanos timeout);

  // Immediate shutdown: closes the listener and aborts every generation in flight: a stream gets
  // an error event (503, "aborted: the server is shutting down") and ends without [DONE]; a
  // non-streaming request gets a 503 error body; their sequences are aborted. Every connection
  // closes once those last bytes are written (or after 2 s). Progress: WaitShutdown().
  // No-op once a shutdown has begun or the server has stopped.
  void AbortAll();

  // Waits up to `max_wait` for a shutdown to complete and returns its report; nullopt when it has
  // not completed yet. After Stop() or a crash, returns at once (counts as of then).
  std::optional<ShutdownReport> WaitShutdown(Nanos max_wait);

  // Stops accepting, closes every connection (open streams end abruptly, their sequences are
  // aborted) and joins the I/O thread. Idempotent.
  // REQUIRES: not called from the I/O thread.
  void Stop();

  EmulatorStats stats() const;

  class Impl;

 private:
  explicit EmulatorServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bakeoff::emulate
