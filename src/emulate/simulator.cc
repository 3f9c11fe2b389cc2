// emulate/simulator.cc: the discrete-event loop over replicas of the engine model (contract and
// event order in simulator.h).
#include "emulate/simulator.h"

#include <algorithm>
#include <array>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"

namespace bakeoff::emulate {

namespace {

constexpr std::array<std::pair<Router, std::string_view>, 4> kRouterNames = {{
    {Router::kRoundRobin, "round-robin"},
    {Router::kLeastOutstanding, "least-outstanding"},
    {Router::kPrefixAffinity, "prefix-affinity"},
    {Router::kKvAware, "kv-aware"},
}};

MonoTime At(Nanos since_t0) { return MonoTime(since_t0); }
Nanos Since(MonoTime at) { return at.time_since_epoch(); }

// FNV-1a over the first `count` token ids, finished with a SplitMix64 step.
std::uint64_t PrefixHash(const std::vector<TokenId>& tokens, std::int64_t count) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto n = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < n; ++i) {
    h = (h ^ tokens[i]) * 0x100000001b3ULL;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}

// The replica with the fewest outstanding requests, ties to the lowest index, kept in a tournament
// tree: O(log n) per change, O(1) per query.
class LeastLoaded {
 public:
  explicit LeastLoaded(std::size_t replicas) : size_(1) {
    while (size_ < replicas) size_ *= 2;
    load_.assign(replicas, 0);
    tree_.assign(2 * size_, kNone);
    for (std::size_t r = 0; r < replicas; ++r) tree_[size_ + r] = r;
    for (std::size_t i = size_ - 1; i >= 1; --i) tree_[i] = Better(tree_[2 * i], tree_[2 * i + 1]);
  }
  std::size_t best() const { return tree_[1]; }
  std::int64_t load(std::size_t replica) const { return load_[replica]; }
  void Add(std::size_t replica, std::int64_t delta) {
    load_[replica] += delta;
    for (std::size_t i = (size_ + replica) / 2; i >= 1; i /= 2) tree_[i] = Better(tree_[2 * i], tree_[2 * i + 1]);
  }

 private:
  static constexpr std::size_t kNone = SIZE_MAX;
  std::size_t Better(std::size_t a, std::size_t b) const {
    if (a == kNone) return b;
    if (b == kNone) return a;
    return load_[b] < load_[a] ? b : a;  // a < b in index: ties keep a
  }
  std::size_t size_;
  std::vector<std::int64_t> load_;
  std::vector<std::size_t> tree_;
};

// kv-aware: which replicas the router sent each chain of leading prompt blocks to, most recent
// first (at most kPerChain). Bounded: when the current generation holds kGeneration chains it
// becomes the previous one and the one before is dropped, so chains not seen for two generations
// are forgotten, as an engine's cache evicts them. The index only nominates candidates; how much a
// candidate holds is asked of its cache (Scheduler::CachedPrefixLength).
class PrefixIndex {
 public:
  static constexpr std::size_t kPerChain = 4;
  static constexpr std::size_t kGeneration = 1 << 20;
  using Replicas = std::array<std::int32_t, kPerChain>;  // -1: empty

  // The chain hash of each whole block of `prompt` (kKvAwareBlockTokens tokens), in order.
  static void Chains(const std::vector<TokenId>& prompt, std::vector<std::uint64_t>& out) {
    out.clear();
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    const std::size_t block = static_cast<std::size_t>(kKvAwareBlockTokens);
    for (std::size_t i = 0; i < prompt.size(); ++i) {
      h = (h ^ prompt[i]) * 0x100000001b3ULL;
      if ((i + 1) % block == 0) {
        std::uint64_t x = h ^ (h >> 31);
        x *= 0xbf58476d1ce4e5b9ULL;
        out.push_back(x ^ (x >> 29));
      }
    }
  }

  const Replicas* Find(std::uint64_t chain) const {
    if (auto it = current_.find(chain); it != current_.end()) return &it->second;
    if (auto it = previous_.find(chain); it != previous_.end()) return &it->second;
    return nullptr;
  }

  void Remember(const std::vector<std::uint64_t>& chains, std::int32_t replica) {
    for (std::uint64_t chain : chains) {
      Replicas seen;
      seen.fill(-1);
      if (const Replicas* known = Find(chain)) seen = *known;
      Replicas updated;
      updated.fill(-1);
      updated[0] = replica;
      std::size_t n = 1;
      for (std::int32_t r : seen) {
        if (r >= 0 && r != replica && n < kPerChain) updated[n++] = r;
      }
      if (current_.size() >= kGeneration && !current_.contains(chain)) {
        previous_ = std::move(current_);
        current_.clear();
      }
      current_[chain] = updated;
    }
  }

 private:
  std::unordered_map<std::uint64_t, Replicas> current_;
  std::unordered_map<std::uint64_t, Replicas> previous_;
};

}  // namespace

std::string_view RouterName(Router router) {
  for (const auto& [r, name] : kRouterNames) {
    if (r == router) return name;
  }
  return "?";
}

std::optional<Router> ParseRouter(std::string_view name) {
  for (const auto& [r, n] : kRouterNames) {
    if (n == name) return r;
  }
  return std::nullopt;
}

Status ValidateSimConfig(const SimConfig& config) {
  if (config.replicas < 1) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("replicas must be >= 1, got {}", config.replicas));
  }
  if (config.affinity_tokens < 1) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("affinity_tokens must be >= 1, got {}", config.affinity_tokens));
  }
  if (config.max_waiting < 0) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("max_waiting must be >= 0, got {}", config.max_waiting));
  }
  return ValidateEngineConfig(config.engine);
}

struct Simulator::Impl {
  // A request's client deadlines (SimRequest) and its last progress (arrival, then each token).
  struct ClientLimits {
    std::optional<Nanos> give_up_at;
    std::optional<Nanos> max_silence;
    Nanos last_progress{0};
    std::optional<Nanos> Deadline() const {
      std::optional<Nanos> at = give_up_at;
      if (max_silence && (!at || last_progress + *max_silence < *at)) at = last_progress + *max_silence;
      return at;
    }
  };
  // A request in an engine: its result so far, the prompt tokens it added to waiting_prefill
  // until its first token, and its client's deadlines. Freed when the request leaves.
  struct InFlight {
    SimResult result;
    std::int64_t prefill = 0;
    ClientLimits limits;
  };
  // A deadline to look at: (instant, order set, replica, sequence). Stale entries (the request
  // finished, or a token moved its silence deadline) are skipped or pushed again when they come up.
  using ClientDeadline = std::tuple<Nanos, std::uint64_t, std::size_t, SequenceId>;

  struct Replica {
    std::unique_ptr<Scheduler> scheduler;
    bool busy = false;
    // Requests in the engine, by SequenceId (the scheduler's ids are dense from 1).
    std::vector<std::unique_ptr<InFlight>> by_sequence;
    std::uint64_t routed = 0;
    std::uint64_t refused = 0;
  };

  struct Queued {
    Nanos at;
    std::uint64_t order;  // submission order: ties at one instant keep it
    SimRequest request;
  };
  struct Later {
    bool operator()(const Queued& a, const Queued& b) const {
      return a.at != b.at ? a.at > b.at : a.order > b.order;
    }
  };
  using StepEnd = std::pair<Nanos, std::size_t>;  // (instant, replica)

  explicit Impl(SimConfig c)
      : config(std::move(c)), replicas(static_cast<std::size_t>(config.replicas)), least_loaded(replicas.size()),
        waiting_prefill(replicas.size()), touched_flag(replicas.size(), 0) {}

  SimConfig config;
  std::vector<Replica> replicas;
  std::priority_queue<Queued, std::vector<Queued>, Later> queued;
  std::optional<Queued> peeked;  // the source's next arrival, already pulled
  bool source_done = false;
  std::uint64_t next_order = 0;
  std::uint64_t arrivals = 0;
  Nanos now{0};
  // Busy replicas by the instant their step ends (earliest first, then lowest index).
  std::priority_queue<StepEnd, std::vector<StepEnd>, std::greater<>> step_ends;
  std::priority_queue<ClientDeadline, std::vector<ClientDeadline>, std::greater<>> client_deadlines;
  std::uint64_t next_deadline_order = 0;
  LeastLoaded least_loaded;  // outstanding (waiting + running) requests per replica
  // Prompt tokens routed to each replica whose request has no first token yet (less what the
  // cache held when routed, for kv-aware).
  LeastLoaded waiting_prefill;
  std::int64_t routed_match = 0;  // kv-aware: the routed replica's cached prefix, set by Route
  // Replicas whose state changed at `now` (a step ended, a request arrived): only they may begin
  // a step, as an untouched idle replica that had no step to begin still has none.
  std::vector<std::size_t> touched;
  std::vector<char> touched_flag;
  PrefixIndex prefix_index;
  std::vector<std::uint64_t> chains;  // scratch: the arriving prompt's block chains

  void Touch(std::size_t r) {
    if (touched_flag[r]) return;
    touched_flag[r] = 1;
    touched.push_back(r);
  }

  // kv-aware: the replica where the request's first token is least work away: the prompt tokens
  // waiting for prefill there (requests routed that have no first token yet) plus the part of this
  // prompt its prefix cache does not hold. Candidates: the replica with the least waiting prefill,
  // the one with the fewest outstanding requests (when no prefill waits anywhere, the one whose
  // decodes are fewest), and the replicas the index saw the prompt's deepest known block chain go
  // to. Ties: fewer outstanding requests, then the lower index. Sets `routed_match` to the chosen
  // one's match; the index learns the choice once the request is admitted (Arrive).
  std::size_t RouteKvAware(const std::vector<TokenId>& prompt) {
    PrefixIndex::Chains(prompt, chains);
    std::array<std::size_t, PrefixIndex::kPerChain + 2> candidates{};
    std::size_t count = 0;
    const auto add = [&](std::size_t replica) {
      if (std::find(candidates.begin(), candidates.begin() + count, replica) == candidates.begin() + count) {
        candidates[count++] = replica;
      }
    };
    add(waiting_prefill.best());
    add(least_loaded.best());
    for (std::size_t depth = chains.size(); depth-- > 0;) {
      const PrefixIndex::Replicas* seen = prefix_index.Find(chains[depth]);
      if (seen == nullptr) continue;
      for (std::int32_t r : *seen) {
        if (r >= 0) add(static_cast<std::size_t>(r));
      }
      break;  // the deepest chain known: its replicas hold the most of this prompt
    }
    std::size_t best = candidates[0];
    std::int64_t best_cost = INT64_MAX, best_match = 0;
    const auto size = static_cast<std::int64_t>(prompt.size());
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t r = candidates[i];
      const std::int64_t match = replicas[r].scheduler->CachedPrefixLength(prompt);
      const std::int64_t cost = waiting_prefill.load(r) + size - match;
      const bool better = cost < best_cost ||
                          (cost == best_cost && (least_loaded.load(r) < least_loaded.load(best) ||
                                                 (least_loaded.load(r) == least_loaded.load(best) && r < best)));
      if (better) {
        best = r;
        best_cost = cost;
        best_match = match;
      }
    }
    routed_match = best_match;
    return best;
  }

  std::size_t Route(const SimRequest& request) {
    switch (config.router) {
      case Router::kRoundRobin:
        return arrivals % replicas.size();
      case Router::kLeastOutstanding:
        return least_loaded.best();
      case Router::kPrefixAffinity:
        return PrefixHash(request.request.prompt, config.affinity_tokens) % replicas.size();
      case Router::kKvAware:
        return RouteKvAware(request.request.prompt);
    }
    return 0;
  }

  void Arrive(SimRequest&& request, const std::function<void(SimResult&&)>& on_result) {
    routed_match = 0;
    const std::size_t r = Route(request);
    const std::int64_t prefill = static_cast<std::int64_t>(request.request.prompt.size()) - routed_match;
    ++arrivals;
    Replica& replica = replicas[r];
    auto in_flight = std::make_unique<InFlight>();
    SimResult& result = in_flight->result;
    result.id = request.id;
    result.replica = static_cast<std::int64_t>(r);
    result.arrival = now;
    result.prompt_tokens = static_cast<std::int64_t>(request.request.prompt.size());
    if (config.max_waiting > 0 &&
        static_cast<std::int64_t>(replica.scheduler->num_waiting()) >= config.max_waiting) {
      ++replica.refused;
      result.finished = now;
      result.http_status = 503;
      result.error = fmt::format("replica {} has {} requests waiting (max_waiting)", r,
                                 replica.scheduler->num_waiting());
      on_result(std::move(result));
      return;
    }
    Result<SequenceId> id = replica.scheduler->Add(std::move(request.request));
    if (!id.ok()) {
      ++replica.refused;
      result.finished = now;
      result.http_status = 400;
      result.error = id.error().message;
      on_result(std::move(result));
      return;
    }
    ++replica.routed;
    least_loaded.Add(r, 1);
    waiting_prefill.Add(r, prefill);
    if (config.router == Router::kKvAware) prefix_index.Remember(chains, static_cast<std::int32_t>(r));
    Touch(r);
    if (config.keep_token_times) result.token_times.reserve(64);
    const auto index = static_cast<std::size_t>(id.value());
    if (replica.by_sequence.size() <= index) replica.by_sequence.resize(index + 1);
    in_flight->prefill = prefill;
    if (request.give_up_at || request.max_silence) {
      in_flight->limits = ClientLimits{request.give_up_at, request.max_silence, now};
      client_deadlines.emplace(*in_flight->limits.Deadline(), next_deadline_order++, r, id.value());
    }
    replica.by_sequence[index] = std::move(in_flight);
  }

  // Takes request `id` out of replica `r`'s engine as it stands now (its client gave up on it).
  SimResult TakeOut(std::size_t r, std::size_t id) {
    Replica& replica = replicas[r];
    std::unique_ptr<InFlight> slot = std::move(replica.by_sequence[id]);
    replica.scheduler->Abort(static_cast<SequenceId>(id));
    least_loaded.Add(r, -1);
    if (!slot->result.first_token) waiting_prefill.Add(r, -slot->prefill);
    Touch(r);  // an idle replica may now have room to begin a step
    slot->result.finished = now;
    return std::move(slot->result);
  }

  // The earliest client deadline of a request still in an engine (those of finished requests are
  // dropped here, so they never hold the clock back from ending).
  std::optional<Nanos> NextClientDeadline() {
    while (!client_deadlines.empty()) {
      const auto& [at, order, r, sequence] = client_deadlines.top();
      if (replicas[r].by_sequence[static_cast<std::size_t>(sequence)]) return at;
      client_deadlines.pop();
    }
    return std::nullopt;
  }

  // The requests whose client deadline is now, given up in the order their deadlines were set.
  void GiveUpDue(const std::function<void(SimResult&&)>& on_result) {
    while (!client_deadlines.empty() && std::get<0>(client_deadlines.top()) == now) {
      const auto [at, order, r, sequence] = client_deadlines.top();
      client_deadlines.pop();
      const auto id = static_cast<std::size_t>(sequence);
      if (!replicas[r].by_sequence[id]) continue;  // finished or cut before its deadline
      const ClientLimits& limits = replicas[r].by_sequence[id]->limits;
      const Nanos deadline = *limits.Deadline();
      if (deadline > now) {  // a token came since: the silence deadline moved
        client_deadlines.emplace(deadline, order, r, sequence);
        continue;
      }
      const bool silent = !limits.give_up_at || deadline < *limits.give_up_at;
      SimResult result = TakeOut(r, id);
      result.gave_up = silent ? GaveUp::kSilence : GaveUp::kAtDeadline;
      on_result(std::move(result));
    }
  }

  void CompleteStep(std::size_t r, const std::function<void(SimResult&&)>& on_result) {
    Replica& replica = replicas[r];
    replica.busy = false;
    Touch(r);
    const std::span<const TokenEvent> events = replica.scheduler->FinishStep();
    // A fleet holds far more requests than the processor's caches: start loading the requests
    // a few events ahead (their entry in by_sequence, then what a token updates).
    constexpr std::size_t kAhead = 8;
    const auto entry = [&](std::size_t i) -> std::unique_ptr<InFlight>& {
      return replica.by_sequence[static_cast<std::size_t>(events[i].id)];
    };
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (i + kAhead < events.size()) __builtin_prefetch(&entry(i + kAhead));
      if (i + kAhead / 2 < events.size()) {
        const InFlight* later = entry(i + kAhead / 2).get();
        __builtin_prefetch(&later->result.output_tokens, 1);
        __builtin_prefetch(&later->limits, 1);
      }
      const TokenEvent& event = events[i];
      std::unique_ptr<InFlight>& slot = entry(i);
      SimResult& result = slot->result;
      if (event.index == 0) {
        waiting_prefill.Add(r, -slot->prefill);
        result.first_token = now;
        result.admitted = Since(event.admitted);
        result.cached_tokens = event.cached_prompt_tokens;
      }
      if (config.keep_token_times) result.token_times.push_back(now);
      result.output_tokens = event.index + 1;
      slot->limits.last_progress = now;
      if (event.finish) {
        result.finish = *event.finish;
        result.finished = now;
        least_loaded.Add(r, -1);
        std::unique_ptr<InFlight> done = std::move(slot);
        on_result(std::move(done->result));
      }
    }
  }

  // The earliest of the peeked source arrival and the queued submissions, if any.
  std::optional<Nanos> NextArrivalTime(const ArrivalSource& source) {
    if (!peeked && !source_done) {
      std::optional<SimRequest> next = source ? source() : std::nullopt;
      if (next) {
        BAKEOFF_CHECK(next->arrival >= now) << "source arrivals must not go back in time";
        const Nanos at = next->arrival;
        peeked = Queued{at, next_order++, std::move(*next)};
      } else {
        source_done = true;
      }
    }
    std::optional<Nanos> at;
    if (peeked) at = peeked->at;
    if (!queued.empty() && (!at || queued.top().at < *at)) at = queued.top().at;
    return at;
  }

  // Takes the next arrival due at `now`, in (instant, order) order.
  std::optional<SimRequest> TakeDueArrival(const ArrivalSource& source) {
    const std::optional<Nanos> at = NextArrivalTime(source);
    if (!at || *at != now) return std::nullopt;
    const bool from_queue =
        !queued.empty() && queued.top().at == now && (!peeked || peeked->at != now || queued.top().order < peeked->order);
    if (from_queue) {
      SimRequest request = std::move(const_cast<Queued&>(queued.top()).request);
      queued.pop();
      return request;
    }
    SimRequest request = std::move(peeked->request);
    peeked.reset();
    return request;
  }
};

Simulator::Simulator(SimConfig config) {
  Status valid = ValidateSimConfig(config);
  BAKEOFF_CHECK(valid.ok()) << valid.error().message;
  impl_ = std::make_unique<Impl>(std::move(config));
  for (Impl::Replica& replica : impl_->replicas) {
    replica.scheduler = std::make_unique<Scheduler>(impl_->config.engine);
  }
}

Simulator::~Simulator() = default;

Nanos Simulator::now() const { return impl_->now; }

void Simulator::Submit(SimRequest request) {
  BAKEOFF_CHECK(request.arrival >= impl_->now) << "Submit in the past";
  const Nanos at = request.arrival;
  impl_->queued.push(Impl::Queued{at, impl_->next_order++, std::move(request)});
}

std::vector<ReplicaCounters> Simulator::counters() const {
  std::vector<ReplicaCounters> out;
  for (const Impl::Replica& replica : impl_->replicas) {
    out.push_back(ReplicaCounters{replica.scheduler->counters(), replica.routed, replica.refused});
  }
  return out;
}

std::size_t Simulator::queued_arrivals() const { return impl_->queued.size(); }

std::vector<SimResult> Simulator::CutInFlight() {
  Impl& m = *impl_;
  std::vector<SimResult> cut;
  for (std::size_t r = 0; r < m.replicas.size(); ++r) {
    Impl::Replica& replica = m.replicas[r];
    for (std::size_t id = 0; id < replica.by_sequence.size(); ++id) {
      if (!replica.by_sequence[id]) continue;
      cut.push_back(m.TakeOut(r, id));
      cut.back().cut = true;
    }
  }
  return cut;
}

void Simulator::Run(const ArrivalSource& source, const std::function<void(SimResult&&)>& on_result,
                    const Deadline& until) {
  Impl& m = *impl_;
  std::vector<std::size_t> ending;
  for (;;) {
    std::optional<Nanos> next = m.NextArrivalTime(source);
    if (!m.step_ends.empty() && (!next || m.step_ends.top().first < *next)) next = m.step_ends.top().first;
    if (const std::optional<Nanos> deadline = m.NextClientDeadline(); deadline && (!next || *deadline < *next)) {
      next = deadline;
    }
    if (!next) return;
    if (until) {
      if (const std::optional<Nanos> deadline = until(); deadline && *next > *deadline) return;
    }
    m.now = *next;
    // 1. Steps ending now, in replica order (the heap orders equal instants by index).
    ending.clear();
    while (!m.step_ends.empty() && m.step_ends.top().first == m.now) {
      ending.push_back(m.step_ends.top().second);
      m.step_ends.pop();
    }
    for (std::size_t r : ending) m.CompleteStep(r, on_result);
    m.GiveUpDue(on_result);
    // 2. Arrivals due now, in submission order (results above may have added some).
    while (std::optional<SimRequest> request = m.TakeDueArrival(source)) {
      m.Arrive(std::move(*request), on_result);
    }
    // 3. Idle replicas with work begin a step, in index order; only those touched now can have one.
    std::sort(m.touched.begin(), m.touched.end());
    for (std::size_t r : m.touched) {
      m.touched_flag[r] = 0;
      Impl::Replica& replica = m.replicas[r];
      if (replica.busy) continue;
      std::optional<StepPlan> plan = replica.scheduler->BeginStep(At(m.now));
      if (!plan) continue;
      replica.busy = true;
      m.step_ends.emplace(Since(plan->end), r);
    }
    m.touched.clear();
  }
}

}  // namespace bakeoff::emulate
