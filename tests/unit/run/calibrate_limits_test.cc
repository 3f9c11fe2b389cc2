// The smallest KV pool a calibrated preset may have: one max_model_len request beside the
// watermark, by emulate::ValidateEngineConfig's own rule.
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

}  // namespace
}  // namespace bakeoff::run
