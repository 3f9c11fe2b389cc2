// Tests for emulate/simulator.h: timing against the cost formula, the documented event order,
// determinism, routers, refusals, and follow-up submissions (closed loops).
#include "emulate/simulator.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"

namespace bakeoff::emulate {
namespace {

using std::chrono::milliseconds;

std::vector<TokenId> Prompt(std::int64_t tokens, TokenId first) {
  std::vector<TokenId> prompt;
  for (std::int64_t i = 0; i < tokens; ++i) prompt.push_back(static_cast<TokenId>((first + i) % 32000));
  return prompt;
}

SimRequest Request(std::uint64_t id, Nanos arrival, std::int64_t prompt, std::int64_t output,
                   TokenId first_token_id) {
  SimRequest request;
  request.id = id;
  request.arrival = arrival;
  request.request.prompt = Prompt(prompt, first_token_id);
  request.request.max_tokens = output;
  return request;
}

// Feeds `requests` (sorted by arrival) as the pull source and collects every result.
std::vector<SimResult> RunAll(Simulator& simulator, std::vector<SimRequest> requests) {
  std::size_t next = 0;
  std::vector<SimResult> results;
  simulator.Run(
      [&]() -> std::optional<SimRequest> {
        if (next == requests.size()) return std::nullopt;
        return std::move(requests[next++]);
      },
      [&](SimResult&& result) { results.push_back(std::move(result)); });
  return results;
}

std::string Serialize(const std::vector<SimResult>& results) {
  std::string out;
  for (const SimResult& r : results) {
    out += fmt::format("{} r{} a{} f{} e{} p{} c{} o{} s{}:", r.id, r.replica, r.arrival.count(),
                       r.first_token ? r.first_token->count() : -1, r.finished.count(), r.prompt_tokens,
                       r.cached_tokens, r.output_tokens, r.http_status);
    for (Nanos t : r.token_times) out += fmt::format(" {}", t.count());
    out += "\n";
  }
  return out;
}

std::vector<SimRequest> PoissonLoad(std::uint64_t seed, int count, double rate_per_s) {
  Rng rng(seed);
  std::vector<SimRequest> requests;
  double t = 0;
  for (int i = 0; i < count; ++i) {
    t += rng.Exponential(1.0 / rate_per_s);
    requests.push_back(Request(static_cast<std::uint64_t>(i), FromSeconds(t),
                               50 + static_cast<std::int64_t>(rng.Below(500)),
                               1 + static_cast<std::int64_t>(rng.Below(100)),
                               static_cast<TokenId>(rng.Below(32000))));
  }
  return requests;
}

TEST(SimulatorTest, LoneRequestMatchesTheCostFormula) {
  SimConfig config;
  Simulator simulator(config);
  auto results = RunAll(simulator, {Request(7, milliseconds(5), 1000, 50, 1)});
  ASSERT_EQ(results.size(), 1u);
  const SimResult& r = results[0];
  const SingleRequestTiming expected = ExpectedSingleRequest(config.engine, 1000, 50);
  EXPECT_EQ(r.id, 7u);
  EXPECT_EQ(r.http_status, 200);
  ASSERT_TRUE(r.first_token);
  EXPECT_EQ(*r.first_token - r.arrival, expected.ttft);
  EXPECT_EQ(r.finished - r.arrival, expected.e2e);
  EXPECT_EQ(r.output_tokens, 50);
  ASSERT_EQ(r.token_times.size(), 50u);
  EXPECT_EQ(r.token_times.back(), r.finished);
}

TEST(SimulatorTest, SameInputGivesByteIdenticalOutput) {
  SimConfig config;
  config.replicas = 3;
  config.router = Router::kLeastOutstanding;
  config.engine.step_noise_cv = 0.1;
  config.engine.eos_probability = 0.01;
  config.engine.seed = 11;
  std::string first;
  for (int run = 0; run < 2; ++run) {
    Simulator simulator(config);
    const std::string out = Serialize(RunAll(simulator, PoissonLoad(5, 400, 40)));
    if (run == 0) {
      first = out;
    } else {
      EXPECT_EQ(out, first);
    }
  }
  EXPECT_GT(first.size(), 1000u);
}

TEST(SimulatorTest, ArrivalsAtOneInstantKeepSubmissionOrder) {
  SimConfig config;
  config.engine.max_num_seqs = 1;
  Simulator simulator(config);
  std::vector<SimRequest> requests;
  for (std::uint64_t i = 0; i < 5; ++i) requests.push_back(Request(i, milliseconds(1), 10, 2, 100 * i));
  std::vector<std::uint64_t> order;
  for (const SimResult& r : RunAll(simulator, std::move(requests))) order.push_back(r.id);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
}

TEST(SimulatorTest, SourceIsPulledLazily) {
  SimConfig config;
  Simulator simulator(config);
  int pulled = 0;
  int finished = 0;
  int most_ahead = 0;
  simulator.Run(
      [&]() -> std::optional<SimRequest> {
        if (pulled == 200) return std::nullopt;
        most_ahead = std::max(most_ahead, pulled - finished);
        ++pulled;
        return Request(static_cast<std::uint64_t>(pulled), std::chrono::seconds(pulled), 10, 3, 5);
      },
      [&](SimResult&&) { ++finished; });
  EXPECT_EQ(finished, 200);
  EXPECT_LE(most_ahead, 2) << "one request a second, each done in well under a second";
}

TEST(SimulatorTest, RoutersSpreadAsDocumented) {
  auto replicas_used = [](Router router, bool shared_prefix) {
    SimConfig config;
    config.replicas = 4;
    config.router = router;
    Simulator simulator(config);
    std::vector<SimRequest> requests;
    for (std::uint64_t i = 0; i < 40; ++i) {
      requests.push_back(Request(i, milliseconds(10 * i), 300, 5, shared_prefix ? 0 : 1000 * i));
    }
    std::map<std::int64_t, int> per_replica;
    for (const SimResult& r : RunAll(simulator, std::move(requests))) ++per_replica[r.replica];
    return per_replica;
  };
  EXPECT_EQ(replicas_used(Router::kRoundRobin, true),
            (std::map<std::int64_t, int>{{0, 10}, {1, 10}, {2, 10}, {3, 10}}));
  EXPECT_EQ(replicas_used(Router::kPrefixAffinity, true).size(), 1u) << "one prefix, one replica";
  EXPECT_GT(replicas_used(Router::kPrefixAffinity, false).size(), 1u);
  // A 300-token prefill alone takes 24 ms, longer than the 10 ms between arrivals, so
  // least-outstanding keeps moving on to idle replicas.
  EXPECT_EQ(replicas_used(Router::kLeastOutstanding, false).size(), 4u);
}

// kv-aware: requests of three conversations (each a distinct 512-token prefix, then its own
// question) arrive one at a time at four replicas; each conversation's later requests meet the
// replica that computed its prefix, so every prefix is computed once, where round-robin spreads
// each conversation over every replica and computes each prefix four times.
TEST(SimulatorTest, KvAwareRoutesToTheReplicaHoldingThePrefix) {
  auto run = [](Router router) {
    SimConfig config;
    config.replicas = 4;
    config.router = router;
    config.engine.kv.prefix_caching = PrefixCaching::kHashedBlocks;
    Simulator simulator(config);
    std::vector<SimRequest> requests;
    for (std::uint64_t i = 0; i < 40; ++i) {
      SimRequest r = Request(i, milliseconds(200 * i), 512, 4, static_cast<TokenId>(5000 * (i % 3)));
      for (TokenId q = 0; q < 40; ++q) r.request.prompt.push_back(20000 + static_cast<TokenId>(i) * 40 + q);
      requests.push_back(std::move(r));
    }
    std::map<std::uint64_t, std::set<std::int64_t>> replicas_of_conversation;
    std::int64_t cached = 0;
    for (const SimResult& r : RunAll(simulator, std::move(requests))) {
      replicas_of_conversation[r.id % 3].insert(r.replica);
      cached += r.cached_tokens;
    }
    return std::make_pair(replicas_of_conversation, cached);
  };
  const auto [kv_spread, kv_cached] = run(Router::kKvAware);
  for (const auto& [conversation, used] : kv_spread) EXPECT_EQ(used.size(), 1u) << "conversation " << conversation;
  const auto [rr_spread, rr_cached] = run(Router::kRoundRobin);
  // 37 of 40 requests find their 512-token prefix (32 whole 16-token blocks) cached; round-robin
  // computes each prefix once on each replica, 12 times in all.
  EXPECT_EQ(kv_spread.size(), 3u);
  EXPECT_EQ(kv_cached, 37 * 512);
  EXPECT_EQ(rr_cached, 28 * 512);
}

// kv-aware with nothing cached: arrivals 20 ms apart, each prefilled in well under 20 ms (so no
// prefill ever waits) but decoding for about 300 ms. The decodes do not pile onto the lowest index:
// the replica with the fewest outstanding requests is a candidate, and wins the tie.
TEST(SimulatorTest, KvAwareSpreadsDecodesWhenNoPrefillWaits) {
  SimConfig config;
  config.replicas = 4;
  config.router = Router::kKvAware;
  Simulator simulator(config);
  std::vector<SimRequest> requests;
  for (std::uint64_t i = 0; i < 40; ++i) requests.push_back(Request(i, milliseconds(20 * i), 100, 50, 1000 * i));
  std::map<std::int64_t, int> per_replica;
  for (const SimResult& r : RunAll(simulator, std::move(requests))) ++per_replica[r.replica];
  EXPECT_EQ(per_replica.size(), 4u);
  for (const auto& [replica, count] : per_replica) {
    EXPECT_GE(count, 8) << "replica " << replica;
    EXPECT_LE(count, 12) << "replica " << replica;
  }
}

// kv-aware does not pile a burst onto the replica holding the one shared prefix (as
// prefix-affinity does): once the prefill waiting there outweighs the cached prefix, an idle
// replica is the nearer first token.
TEST(SimulatorTest, KvAwareSpreadsABurstOfOnePrefix) {
  SimConfig config;
  config.replicas = 4;
  config.router = Router::kKvAware;
  Simulator simulator(config);
  std::vector<SimRequest> requests;
  for (std::uint64_t i = 0; i < 40; ++i) requests.push_back(Request(i, milliseconds(i), 512, 50, 0));
  std::map<std::int64_t, int> per_replica;
  for (const SimResult& r : RunAll(simulator, std::move(requests))) ++per_replica[r.replica];
  EXPECT_EQ(per_replica.size(), 4u);
  for (const auto& [replica, count] : per_replica) EXPECT_LE(count, 16) << "replica " << replica;
  EXPECT_TRUE(ParseRouter("kv-aware").has_value());
  EXPECT_EQ(RouterName(Router::kKvAware), "kv-aware");
}

TEST(SimulatorTest, RefusesOverTheContextLimitAndBeyondTheQueueLimit) {
  SimConfig config;
  config.engine.max_model_len = 1000;
  config.engine.max_num_seqs = 1;
  config.max_waiting = 2;
  Simulator simulator(config);
  std::vector<SimRequest> requests;
  requests.push_back(Request(0, milliseconds(0), 990, 20, 1));  // over the context limit
  for (std::uint64_t i = 1; i <= 5; ++i) requests.push_back(Request(i, milliseconds(1), 100, 50, 1));
  std::map<std::uint64_t, int> status;
  for (const SimResult& r : RunAll(simulator, std::move(requests))) status[r.id] = r.http_status;
  EXPECT_EQ(status[0], 400);
  // At 1 ms all five arrive before any step starts: two queue, three are refused.
  EXPECT_EQ(status[1], 200);
  EXPECT_EQ(status[2], 200);
  EXPECT_EQ(status[3], 503);
  EXPECT_EQ(status[4], 503);
  EXPECT_EQ(status[5], 503);
}

TEST(SimulatorTest, ResultsMaySubmitFollowUps) {
  // A closed loop of concurrency 3: each result submits the next request at its instant.
  SimConfig config;
  Simulator simulator(config);
  std::uint64_t next_id = 0;
  for (int i = 0; i < 3; ++i) simulator.Submit(Request(next_id++, Nanos{0}, 100, 10, 1));
  std::vector<SimResult> results;
  simulator.Run(nullptr, [&](SimResult&& result) {
    if (next_id < 30) simulator.Submit(Request(next_id++, simulator.now(), 100, 10, 1));
    results.push_back(std::move(result));
  });
  ASSERT_EQ(results.size(), 30u);
  for (const SimResult& r : results) EXPECT_EQ(r.output_tokens, 10);
  const auto counters = simulator.counters();
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].routed, 30u);
  EXPECT_EQ(counters[0].engine.generation_tokens, 300u);
}

// One sequence at a time, so a second request waits for the whole first one.
SimConfig OneAtATime() {
  SimConfig config;
  config.engine.max_num_seqs = 1;
  return config;
}

TEST(SimulatorTest, AClientThatHearsNothingForItsSilenceGivesUpAndFreesTheSlot) {
  const SingleRequestTiming lone = ExpectedSingleRequest(SimConfig{}.engine, 100, 200);
  Simulator simulator(OneAtATime());
  SimRequest first = Request(0, Nanos{0}, 100, 200, 1);
  SimRequest impatient = Request(1, Nanos{0}, 100, 200, 7);
  impatient.max_silence = lone.e2e / 4;  // gives up long before the first request ends
  SimRequest third = Request(2, Nanos{0}, 100, 200, 9);
  auto results = RunAll(simulator, {std::move(first), std::move(impatient), std::move(third)});
  ASSERT_EQ(results.size(), 3u);
  std::map<std::uint64_t, const SimResult*> by_id;
  for (const SimResult& r : results) by_id[r.id] = &r;
  const SimResult& gave_up = *by_id[1];
  EXPECT_EQ(gave_up.gave_up, GaveUp::kSilence);
  EXPECT_FALSE(gave_up.cut);
  EXPECT_EQ(gave_up.finished, lone.e2e / 4);
  EXPECT_FALSE(gave_up.first_token);
  EXPECT_EQ(gave_up.output_tokens, 0);
  // The third request no longer waits behind it: it starts right after the first.
  EXPECT_EQ(by_id[0]->gave_up, GaveUp::kNo);
  EXPECT_EQ(by_id[2]->gave_up, GaveUp::kNo);
  ASSERT_TRUE(by_id[2]->admitted);
  EXPECT_EQ(*by_id[2]->admitted, by_id[0]->finished);
  EXPECT_EQ(by_id[2]->output_tokens, 200);
}

TEST(SimulatorTest, TokensMoveTheSilenceDeadlineAndTheGiveUpInstantCutsAStreamMidway) {
  const SingleRequestTiming lone = ExpectedSingleRequest(SimConfig{}.engine, 100, 200);
  // Silent for at most the first token's wait plus a little: tokens keep coming faster than that.
  SimRequest steady = Request(0, Nanos{0}, 100, 200, 1);
  steady.max_silence = lone.ttft + milliseconds(1);
  {
    Simulator simulator(SimConfig{});
    auto results = RunAll(simulator, {std::move(steady)});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].gave_up, GaveUp::kNo);
    EXPECT_EQ(results[0].output_tokens, 200);
  }
  SimRequest cut = Request(0, Nanos{0}, 100, 200, 1);
  cut.give_up_at = lone.e2e / 2;
  cut.max_silence = lone.e2e;  // later than the give-up instant: the instant decides
  Simulator simulator(SimConfig{});
  auto results = RunAll(simulator, {std::move(cut)});
  ASSERT_EQ(results.size(), 1u);
  const SimResult& r = results[0];
  EXPECT_EQ(r.gave_up, GaveUp::kAtDeadline);
  EXPECT_EQ(r.finished, lone.e2e / 2);
  EXPECT_GT(r.output_tokens, 0);
  EXPECT_LT(r.output_tokens, 200);
  EXPECT_EQ(r.token_times.size(), static_cast<std::size_t>(r.output_tokens));
  EXPECT_LE(r.token_times.back(), r.finished);
}

TEST(SimulatorTest, DeadlinesOfFinishedRequestsDoNotHoldTheClockBack) {
  const SingleRequestTiming lone = ExpectedSingleRequest(SimConfig{}.engine, 100, 20);
  SimRequest request = Request(0, Nanos{0}, 100, 20, 1);
  request.give_up_at = std::chrono::hours(1);
  request.max_silence = std::chrono::minutes(1);
  Simulator simulator(SimConfig{});
  auto results = RunAll(simulator, {std::move(request)});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].gave_up, GaveUp::kNo);
  EXPECT_EQ(simulator.now(), lone.e2e);
}

TEST(SimulatorTest, ValidatesItsConfig) {
  SimConfig config;
  config.replicas = 0;
  EXPECT_FALSE(ValidateSimConfig(config).ok());
  config = SimConfig{};
  config.max_waiting = -1;
  EXPECT_FALSE(ValidateSimConfig(config).ok());
  EXPECT_TRUE(ParseRouter("prefix-affinity").has_value());
  EXPECT_FALSE(ParseRouter("random").has_value());
}

}  // namespace
}  // namespace bakeoff::emulate
