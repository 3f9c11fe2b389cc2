// Scenario tests of the engine model, run on the virtual clock (emulate/simulator.h): each checks
// a relation the seeds name as deciding engine choices, never an exact figure.
// Every workload is seeded, so a failure reproduces.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "emulate/simulator.h"
#include "stats/quantile.h"

namespace bakeoff::emulate {
namespace {

using std::chrono::milliseconds;

struct Shape {
  double rate_per_s = 5;
  int requests = 200;
  std::function<std::int64_t(Rng&)> prompt = [](Rng&) { return 500; };
  std::function<std::int64_t(Rng&)> output = [](Rng&) { return 100; };
  // Tokens of a shared prefix drawn from `prefix_groups` groups (0 = none), before the prompt.
  std::int64_t prefix_tokens = 0;
  int prefix_groups = 1;
  std::uint64_t seed = 1;
};

struct SimRun {
  std::vector<SimResult> results;
  std::vector<ReplicaCounters> counters;
};

SimRun SimulateWithCounters(const SimConfig& config, const Shape& shape) {
  Simulator simulator(config);
  Rng rng(shape.seed);
  double t = 0;
  int made = 0;
  TokenId next_unique = 0;
  std::vector<SimResult> results;
  simulator.Run(
      [&]() -> std::optional<SimRequest> {
        if (made == shape.requests) return std::nullopt;
        t += rng.Exponential(1.0 / shape.rate_per_s);
        SimRequest request;
        request.id = static_cast<std::uint64_t>(made++);
        request.arrival = FromSeconds(t);
        if (shape.prefix_tokens > 0) {
          const auto group = static_cast<TokenId>(rng.Below(static_cast<std::uint64_t>(shape.prefix_groups)));
          for (std::int64_t i = 0; i < shape.prefix_tokens; ++i) {
            request.request.prompt.push_back(static_cast<TokenId>((group * 7919 + i) % 20000));
          }
        }
        const std::int64_t own = shape.prompt(rng);
        for (std::int64_t i = 0; i < own; ++i) {
          request.request.prompt.push_back(20000 + next_unique++ % 12000);
        }
        request.request.max_tokens = shape.output(rng);
        return request;
      },
      [&](SimResult&& result) { results.push_back(std::move(result)); });
  return {std::move(results), simulator.counters()};
}

std::vector<SimResult> Simulate(const SimConfig& config, const Shape& shape) {
  return SimulateWithCounters(config, shape).results;
}

double Percentile(std::vector<double> values, double q) {
  EXPECT_FALSE(values.empty());
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return stats::NearestRank(values, q);
}

std::vector<double> Ttfts(const std::vector<SimResult>& results) {
  std::vector<double> out;
  for (const SimResult& r : results) {
    if (r.first_token) out.push_back(ToMillis(*r.first_token - r.arrival));
  }
  return out;
}

std::vector<double> Tpots(const std::vector<SimResult>& results) {
  std::vector<double> out;
  for (const SimResult& r : results) {
    if (r.output_tokens > 1 && r.first_token) {
      out.push_back(ToMillis(r.finished - *r.first_token) / static_cast<double>(r.output_tokens - 1));
    }
  }
  return out;
}

std::vector<double> Itls(const std::vector<SimResult>& results) {
  std::vector<double> out;
  for (const SimResult& r : results) {
    for (std::size_t i = 1; i < r.token_times.size(); ++i) {
      out.push_back(ToMillis(r.token_times[i] - r.token_times[i - 1]));
    }
  }
  return out;
}

TEST(ScenarioTest, AboveCapacityResponseTimeGrowsWhileServiceTimeStaysFlat) {
  SimConfig config;
  config.engine.max_num_seqs = 64;
  Shape shape;
  shape.rate_per_s = 60;  // about twice what 64 sequences of 500 in / 100 out sustain
  shape.requests = 3000;
  const std::vector<SimResult> results = Simulate(config, shape);
  ASSERT_EQ(results.size(), 3000u);
  // Compare the second tenth of arrivals (the batch already full) with the last tenth.
  std::vector<SimResult> by_arrival = results;
  std::sort(by_arrival.begin(), by_arrival.end(), [](const SimResult& a, const SimResult& b) { return a.id < b.id; });
  auto slice = [&](std::size_t from, std::size_t to, bool response) {
    std::vector<double> out;
    for (std::size_t i = from; i < to; ++i) {
      const SimResult& r = by_arrival[i];
      out.push_back(ToMillis(r.finished - (response ? r.arrival : *r.admitted)));
    }
    return Percentile(out, 0.5);
  };
  const double early_response = slice(300, 600, true), late_response = slice(2700, 3000, true);
  const double early_service = slice(300, 600, false), late_service = slice(2700, 3000, false);
  EXPECT_GT(late_response, 3 * early_response) << "the waiting queue keeps growing";
  EXPECT_NEAR(late_service / early_service, 1.0, 0.25) << "a full batch serves at a steady pace";
}

TEST(ScenarioTest, ASharedSystemPromptCutsTtftWithEitherPrefixCacheOnly) {
  Shape shape;
  shape.prefix_tokens = 2000;
  shape.prompt = [](Rng&) { return 100; };
  shape.output = [](Rng&) { return 50; };
  shape.requests = 300;
  double ttft_p50[3];
  const PrefixCaching flavours[3] = {PrefixCaching::kNone, PrefixCaching::kHashedBlocks, PrefixCaching::kRadix};
  for (int i = 0; i < 3; ++i) {
    SimConfig config;
    config.engine.kv.prefix_caching = flavours[i];
    const auto results = Simulate(config, shape);
    ttft_p50[i] = Percentile(Ttfts(results), 0.5);
    std::int64_t cached = 0;
    for (const SimResult& r : results) cached += r.cached_tokens;
    if (i == 0) {
      EXPECT_EQ(cached, 0);
    } else {
      EXPECT_GT(cached, 299 * 1984) << "every request after the first finds the system prompt";
    }
  }
  EXPECT_LT(ttft_p50[1], 0.3 * ttft_p50[0]);
  EXPECT_LT(ttft_p50[2], 0.3 * ttft_p50[0]);
}

TEST(ScenarioTest, ChunkedPrefillLowersDecodeItlTailWhenLongPromptsArrive) {
  // Short prompts with long answers; one request in four is an 8k-token document.
  Shape shape;
  shape.rate_per_s = 4;
  shape.requests = 300;
  shape.prompt = [](Rng& rng) { return rng.Below(4) == 0 ? 8000 : 100; };
  shape.output = [](Rng&) { return 300; };
  SimConfig whole;
  whole.engine.max_model_len = 16384;
  whole.engine.max_batched_tokens = 16384;
  whole.engine.chunked_prefill = false;
  SimConfig chunked = whole;
  chunked.engine.chunked_prefill = true;
  chunked.engine.prefill_chunk_tokens = 512;
  const double whole_p99 = Percentile(Itls(Simulate(whole, shape)), 0.99);
  const double chunked_p99 = Percentile(Itls(Simulate(chunked, shape)), 0.99);
  EXPECT_LT(chunked_p99, 0.5 * whole_p99) << "whole " << whole_p99 << " ms, chunked " << chunked_p99 << " ms";
}

TEST(ScenarioTest, RunningOutOfKvBlocksPreemptsAndStretchesTpot) {
  Shape shape;
  shape.rate_per_s = 5;
  shape.requests = 400;
  shape.prompt = [](Rng&) { return 200; };
  shape.output = [](Rng&) { return 400; };
  SimConfig roomy;
  roomy.engine.max_model_len = 2048;
  SimConfig tight = roomy;
  tight.engine.kv.num_blocks = 300;  // 4,800 tokens: 8 sequences at full length
  const auto roomy_results = Simulate(roomy, shape);
  const SimRun tight_run = SimulateWithCounters(tight, shape);
  EXPECT_GT(tight_run.counters[0].engine.preemptions, 10u) << "preemptions show in the counters";
  // A preempted request waits for blocks and recomputes its context between two of its tokens.
  EXPECT_GT(Percentile(Tpots(tight_run.results), 0.9), 1.3 * Percentile(Tpots(roomy_results), 0.9));
}

TEST(ScenarioTest, PrefixAffinityRoutingRaisesTheHitRateOverRoundRobin) {
  Shape shape;
  shape.rate_per_s = 20;
  shape.requests = 800;
  shape.prefix_tokens = 1500;
  shape.prefix_groups = 16;
  shape.prompt = [](Rng&) { return 50; };
  shape.output = [](Rng&) { return 20; };
  auto hit_rate = [&](Router router) {
    SimConfig config;
    config.replicas = 4;
    config.router = router;
    config.engine.max_model_len = 4096;
    config.engine.kv.num_blocks = 512;  // 8,192 tokens: about five of the sixteen prefixes
    config.engine.kv.prefix_caching = PrefixCaching::kHashedBlocks;
    std::int64_t cached = 0, prompt = 0;
    for (const SimResult& r : Simulate(config, shape)) {
      cached += r.cached_tokens;
      prompt += r.prompt_tokens;
    }
    return static_cast<double>(cached) / static_cast<double>(prompt);
  };
  const double round_robin = hit_rate(Router::kRoundRobin);
  const double affinity = hit_rate(Router::kPrefixAffinity);
  EXPECT_GT(affinity, round_robin + 0.2) << "round-robin " << round_robin << ", affinity " << affinity;
}

TEST(ScenarioTest, StaticBatchingHasAWorseTtftTailThanContinuousBatching) {
  Shape shape;
  shape.rate_per_s = 8;
  shape.requests = 400;
  shape.prompt = [](Rng& rng) { return 100 + static_cast<std::int64_t>(rng.Below(400)); };
  shape.output = [](Rng& rng) { return 20 + static_cast<std::int64_t>(rng.Below(300)); };
  SimConfig continuous;
  continuous.engine.max_num_seqs = 16;
  SimConfig batched = continuous;
  batched.engine.policy = SchedulingPolicy::kStaticBatch;
  const double continuous_p99 = Percentile(Ttfts(Simulate(continuous, shape)), 0.99);
  const double static_p99 = Percentile(Ttfts(Simulate(batched, shape)), 0.99);
  EXPECT_GT(static_p99, 2 * continuous_p99) << "continuous " << continuous_p99 << " ms, static " << static_p99 << " ms";
}

}  // namespace
}  // namespace bakeoff::emulate
