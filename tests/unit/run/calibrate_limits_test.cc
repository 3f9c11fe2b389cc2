// The smallest KV pool a calibrated preset may have: one max_model_len request beside the
// watermark, by emulate::ValidateEngineConfig's own rule; the prefix cache's block size read off
// the cached-token counts.
#include "run/calibrate_limits.h"

#include <gtest/gtest.h>

namespace bakeoff::run {
namespace {

TEST(CalibrateLimitsTest, SmallestValidPoolHoldsOneLongestRequestBesideTheWatermark) {
  for (const auto& [block, length, watermark] :
       std::vector<std::tuple<std::int64_t, std::int64_t, double>>{{16, 32768, 0.01}, {1, 2048, 0}, {16, 100, 0.5}, {32, 32767, 0.2}}) {
    emulate::EngineConfig config;
    config.max_model_len = length;
    config.max_batched_tokens = std::max<std::int64_t>(config.max_batched_tokens, length);
    config.kv.block_tokens = block;
    config.kv.watermark = watermark;
    config.kv.num_blocks = SmallestValidPoolBlocks(config);
    EXPECT_TRUE(emulate::ValidateEngineConfig(config).ok()) << block << " " << length << " " << watermark;
    config.kv.num_blocks -= 1;
    EXPECT_FALSE(emulate::ValidateEngineConfig(config).ok()) << block << " " << length << " " << watermark;
  }
}

TEST(CalibrateLimitsTest, PrefixBlockIsTheLargestPowerOfTwoDividingEveryCount) {
  // vLLM's 16-token blocks on the probes' prompts sharing 6 to 17 blocks of 50 tokens, and the
  // 1,000-token repeat.
  EXPECT_EQ(PrefixBlockOfCounts({288, 448, 544, 688, 848, 992}), 16u);
  // Counts that all happen to be multiples of 48 are still 16-token blocks, not 48.
  EXPECT_EQ(PrefixBlockOfCounts({48, 96, 240, 960}), 16u);
  EXPECT_EQ(PrefixBlockOfCounts({64, 448, 960}), 64u);
  // llama.cpp b4748's slot reuse can give counts whose divisor is 5: read as token-granular.
  EXPECT_EQ(PrefixBlockOfCounts({10, 560, 705, 1020, 1050}), 1u);
  // A token-granular cache that matched every shared 50-token block exactly.
  EXPECT_EQ(PrefixBlockOfCounts({300, 450, 550, 700, 850, 1000}), 2u);
  // A divisor beyond the largest block read is returned as it is (the caller leaves the base's).
  EXPECT_EQ(PrefixBlockOfCounts({528, 1056}), 528u);
  EXPECT_EQ(PrefixBlockOfCounts({}), 0u);
}

}  // namespace
}  // namespace bakeoff::run
