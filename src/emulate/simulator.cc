// emulate/simulator.cc: the discrete-event loop over replicas of the engine model (contract and
// event order in simulator.h).
#include "emulate/simulator.h"

#include <algorithm>
#include <array>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"

namespace bakeoff::emulate {

namespace {

constexpr std::array<std::pair<Router, std::string_view>, 3> kRouterNames = {{
    {Router::kRoundRobin, "round-robin"},
    {Router::kLeastOutstanding, "least-outstanding"},
    {Router::kPrefixAffinity, "prefix-affinity"},
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
  struct Replica {
    std::unique_ptr<Scheduler> scheduler;
    bool busy = false;
    Nanos step_end{0};
    // Requests in the engine, by SequenceId (the scheduler's ids are dense from 1).
    std::vector<std::unique_ptr<SimResult>> by_sequence;
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

  SimConfig config;
  std::vector<Replica> replicas;
  std::priority_queue<Queued, std::vector<Queued>, Later> queued;
  std::optional<Queued> peeked;  // the source's next arrival, already pulled
  bool source_done = false;
  std::uint64_t next_order = 0;
  std::uint64_t arrivals = 0;
  Nanos now{0};

  std::size_t Route(const SimRequest& request) {
    const auto n = replicas.size();
    switch (config.router) {
      case Router::kRoundRobin:
        return arrivals % n;
      case Router::kLeastOutstanding: {
        std::size_t best = 0;
        std::size_t best_load = SIZE_MAX;
        for (std::size_t r = 0; r < n; ++r) {
          const Scheduler& s = *replicas[r].scheduler;
          const std::size_t load = s.num_running() + s.num_waiting();
          if (load < best_load) {
            best = r;
            best_load = load;
          }
        }
        return best;
      }
      case Router::kPrefixAffinity:
        return PrefixHash(request.request.prompt, config.affinity_tokens) % n;
    }
    return 0;
  }

  void Arrive(SimRequest&& request, const std::function<void(SimResult&&)>& on_result) {
    const std::size_t r = Route(request);
    ++arrivals;
    Replica& replica = replicas[r];
    auto result = std::make_unique<SimResult>();
    result->id = request.id;
    result->replica = static_cast<std::int64_t>(r);
    result->arrival = now;
    result->prompt_tokens = static_cast<std::int64_t>(request.request.prompt.size());
    if (config.max_waiting > 0 &&
        static_cast<std::int64_t>(replica.scheduler->num_waiting()) >= config.max_waiting) {
      ++replica.refused;
      result->finished = now;
      result->http_status = 503;
      result->error = fmt::format("replica {} has {} requests waiting (max_waiting)", r,
                                  replica.scheduler->num_waiting());
      on_result(std::move(*result));
      return;
    }
    Result<SequenceId> id = replica.scheduler->Add(std::move(request.request));
    if (!id.ok()) {
      ++replica.refused;
      result->finished = now;
      result->http_status = 400;
      result->error = id.error().message;
      on_result(std::move(*result));
      return;
    }
    ++replica.routed;
    if (config.keep_token_times) result->token_times.reserve(64);
    const auto index = static_cast<std::size_t>(id.value());
    if (replica.by_sequence.size() <= index) replica.by_sequence.resize(index + 1);
    replica.by_sequence[index] = std::move(result);
  }

  void CompleteStep(Replica& replica, const std::function<void(SimResult&&)>& on_result) {
    replica.busy = false;
    for (const TokenEvent& event : replica.scheduler->FinishStep()) {
      std::unique_ptr<SimResult>& slot = replica.by_sequence[static_cast<std::size_t>(event.id)];
      SimResult& result = *slot;
      if (event.index == 0) {
        result.first_token = now;
        result.admitted = Since(event.admitted);
        result.cached_tokens = event.cached_prompt_tokens;
      }
      if (config.keep_token_times) result.token_times.push_back(now);
      result.output_tokens = event.index + 1;
      if (event.finish) {
        result.finish = *event.finish;
        result.finished = now;
        std::unique_ptr<SimResult> done = std::move(slot);
        on_result(std::move(*done));
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

Simulator::Simulator(SimConfig config) : impl_(std::make_unique<Impl>()) {
  Status valid = ValidateSimConfig(config);
  BAKEOFF_CHECK(valid.ok()) << valid.error().message;
  impl_->config = std::move(config);
  impl_->replicas.resize(static_cast<std::size_t>(impl_->config.replicas));
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

void Simulator::Run(const ArrivalSource& source, const std::function<void(SimResult&&)>& on_result,
                    std::optional<Nanos> until) {
  Impl& m = *impl_;
  for (;;) {
    std::optional<Nanos> next = m.NextArrivalTime(source);
    for (const Impl::Replica& replica : m.replicas) {
      if (replica.busy && (!next || replica.step_end < *next)) next = replica.step_end;
    }
    if (!next || (until && *next > *until)) return;
    m.now = *next;
    // 1. Steps ending now, in replica order.
    for (Impl::Replica& replica : m.replicas) {
      if (replica.busy && replica.step_end == m.now) m.CompleteStep(replica, on_result);
    }
    // 2. Arrivals due now, in submission order (results above may have added some).
    while (std::optional<SimRequest> request = m.TakeDueArrival(source)) {
      m.Arrive(std::move(*request), on_result);
    }
    // 3. Idle replicas with work begin a step.
    for (Impl::Replica& replica : m.replicas) {
      if (replica.busy) continue;
      std::optional<StepPlan> plan = replica.scheduler->BeginStep(At(m.now));
      if (!plan) continue;
      replica.busy = true;
      replica.step_end = Since(plan->end);
    }
  }
}

}  // namespace bakeoff::emulate
