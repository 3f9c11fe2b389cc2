// emulate/simulator.h
//
// Owns: the virtual-clock simulator behind `bakeoff simulate`: N replicas of the engine model
// (emulate/scheduler.h, the same code the real-time server runs), a router in front of them, and
// a discrete-event loop that advances a virtual clock from event to event, so a whole trace is
// predicted in seconds. Output is one SimResult per request, with every token's instant.
// Does not own: where requests come from (the caller submits them, possibly in reaction to
// earlier results: closed loops, sessions), or records and summaries (cli/, analyze/).
//
// Event order (docs/emulator.md, "Simulator"): at one instant, first every replica whose step ends
// then completes it (replicas in index order; a step's tokens in the scheduler's order, and the
// results of requests it finished are delivered in that order); then the requests whose client
// deadline is that instant are given up (a token at the deadline instant still counts), in the
// order their deadlines were set; then arrivals due at that instant,
// in the order they were submitted; then every idle replica with work begins its next step, in
// index order. Nothing depends on wall time, hashing of pointers or thread timing, so the same
// submissions give byte-identical results.
//
// Routers: round-robin (arrival count modulo replicas); least-outstanding (fewest waiting +
// running, ties to the lowest index); prefix-affinity (a hash of the first `affinity_tokens`
// prompt tokens picks the replica, so requests sharing that prefix meet the same prefix cache);
// kv-aware (scores replicas by cached prefix and load, as Gateway API inference extensions and
// llm-d route): the router remembers which replicas it sent each chain of 64-token prompt blocks
// to; for the replicas that saw the prompt's deepest known chain, the replica with the least
// prefill waiting and the one with the fewest outstanding requests, it asks the prefix cache how
// much of the prompt it holds now, and sends the
// request where its first token is least work away: the prompt tokens already waiting for prefill
// there plus the part of this prompt not cached (docs/simulator.md, "Routers").
//
// Cost: each event costs O(log replicas) plus the replicas it touches (a heap of step ends, a
// tournament tree of outstanding counts), never a scan of every replica, so a fleet of thousands
// of replicas simulates at about the speed of one.
//
// Thread-safety: none; one thread.
// Units: Nanos since the simulation's t0.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "emulate/scheduler.h"

namespace bakeoff::emulate {

enum class Router : std::uint8_t { kRoundRobin, kLeastOutstanding, kPrefixAffinity, kKvAware };
// "round-robin", "least-outstanding", "prefix-affinity", "kv-aware"
std::string_view RouterName(Router router);
std::optional<Router> ParseRouter(std::string_view name);
inline constexpr Router kAllRouters[] = {Router::kRoundRobin, Router::kLeastOutstanding, Router::kPrefixAffinity,
                                         Router::kKvAware};

// kv-aware: the router's index remembers prompts by chains of blocks of this many tokens.
inline constexpr std::int64_t kKvAwareBlockTokens = 64;

struct SimConfig {
  EngineConfig engine;
  std::int64_t replicas = 1;
  Router router = Router::kRoundRobin;
  std::int64_t affinity_tokens = 256;  // kPrefixAffinity: prompt tokens hashed
  // A request routed to a replica that already has this many waiting gets 503; 0 = no limit.
  std::int64_t max_waiting = 0;
  bool keep_token_times = true;  // fill SimResult::token_times (else only first/last/count)
};

// OK, or kInvalidInput naming the field (replicas >= 1, affinity_tokens >= 1, max_waiting >= 0,
// and the engine config).
Status ValidateSimConfig(const SimConfig& config);

struct SimRequest {
  std::uint64_t id = 0;  // the caller's; echoed in the result
  Nanos arrival{0};
  SequenceRequest request;
  // The client's deadlines, as bench's HTTP client keeps them (net/http_client.h Deadlines): it
  // gives up at `give_up_at`, or once `max_silence` has passed since the arrival or the last
  // token without a next one; the engine then aborts the request, as a server does when its
  // client goes away. Unset: never.
  std::optional<Nanos> give_up_at;
  std::optional<Nanos> max_silence;
};

// Why a request ended without finishing (SimResult::gave_up).
enum class GaveUp : std::uint8_t { kNo, kAtDeadline, kSilence };

struct SimResult {
  std::uint64_t id = 0;
  std::int64_t replica = -1;  // -1 when refused before routing (never, today)
  Nanos arrival{0};
  std::optional<Nanos> admitted;  // first scheduled (service starts; queue time before it)
  std::optional<Nanos> first_token;
  Nanos finished{0};             // last token, or the refusal instant
  std::vector<Nanos> token_times;  // one per output token (when keep_token_times)
  std::int64_t prompt_tokens = 0;
  std::int64_t cached_tokens = 0;
  std::int64_t output_tokens = 0;
  FinishReason finish = FinishReason::kLength;
  int http_status = 200;  // 400 over the context limit, 503 queue full
  std::string error;      // empty when 200
  bool cut = false;       // taken out unfinished by CutInFlight
  GaveUp gave_up = GaveUp::kNo;  // the client gave up on it at `finished` (SimRequest's deadlines)
};

struct ReplicaCounters {
  EngineCounters engine;
  std::uint64_t routed = 0;
  std::uint64_t refused = 0;
};

class Simulator {
 public:
  // REQUIRES: ValidateSimConfig(config).ok().
  explicit Simulator(SimConfig config);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Queues an arrival. REQUIRES: request.arrival >= now().
  void Submit(SimRequest request);

  // A pull source of arrivals in nondecreasing arrival order, consulted lazily (so a million
  // requests never sit in memory at once); nullopt when exhausted.
  using ArrivalSource = std::function<std::optional<SimRequest>()>;

  // Runs until no event is left (the source is exhausted, nothing queued, every replica idle) or
  // the next event would pass the instant `until` returns (asked before every event; null or
  // nullopt: no bound). Every finished or refused request is handed to `on_result` at its instant;
  // it may Submit() follow-up arrivals at or after now().
  using Deadline = std::function<std::optional<Nanos>()>;
  void Run(const ArrivalSource& source, const std::function<void(SimResult&&)>& on_result,
           const Deadline& until = nullptr);

  // Takes every request still in an engine (waiting or running) out of it, as a client that gives
  // up on them does, and returns each as it stands now: the tokens it produced so far, `finished`
  // = now(), `cut` set. Replicas, in index order; within one, in admission order of their ids.
  std::vector<SimResult> CutInFlight();

  // Follow-up arrivals Submit() queued that have not arrived yet.
  std::size_t queued_arrivals() const;

  Nanos now() const;
  std::vector<ReplicaCounters> counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bakeoff::emulate
