// emulate/engine_config.cc: names and validation of the engine settings (engine_config.h).
#include "emulate/engine_config.h"

#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace bakeoff::emulate {

namespace {

constexpr std::array<std::pair<SchedulingPolicy, std::string_view>, 5> kPolicyNames = {{
    {SchedulingPolicy::kFcfs, "fcfs"},
    {SchedulingPolicy::kPrefillFirst, "prefill-first"},
    {SchedulingPolicy::kDecodeFirst, "decode-first"},
    {SchedulingPolicy::kLongestPrefixMatch, "lpm"},
    {SchedulingPolicy::kStaticBatch, "static-batch"},
}};

constexpr std::array<std::pair<PrefixCaching, std::string_view>, 3> kCachingNames = {{
    {PrefixCaching::kNone, "none"},
    {PrefixCaching::kHashedBlocks, "hashed-blocks"},
    {PrefixCaching::kRadix, "radix"},
}};

template <typename Enum, std::size_t N>
std::string_view NameOf(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "?";
}

template <typename Enum, std::size_t N>
std::optional<Enum> Parse(const std::array<std::pair<Enum, std::string_view>, N>& names,
                          std::string_view text) {
  for (const auto& [v, name] : names) {
    if (name == text) return v;
  }
  return std::nullopt;
}


}  // namespace

std::string_view PolicyName(SchedulingPolicy policy) { return NameOf(kPolicyNames, policy); }
std::optional<SchedulingPolicy> ParsePolicy(std::string_view name) { return Parse(kPolicyNames, name); }
std::string_view PrefixCachingName(PrefixCaching caching) { return NameOf(kCachingNames, caching); }
std::optional<PrefixCaching> ParsePrefixCaching(std::string_view name) {
  return Parse(kCachingNames, name);
}

Status ValidateEngineConfig(const EngineConfig& config) {
  // Upper bounds far beyond any engine, so that no product below can overflow.
  constexpr std::int64_t kMaxTokens = std::int64_t{1} << 30;
  constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 31;
  const struct {
    const char* field;
    std::int64_t value;
    std::int64_t limit;
  } bounded[] = {{"max_num_seqs", config.max_num_seqs, kMaxTokens},
                 {"max_batched_tokens", config.max_batched_tokens, kMaxTokens},
                 {"max_model_len", config.max_model_len, kMaxTokens},
                 {"prefill_chunk_tokens", config.prefill_chunk_tokens, kMaxTokens},
                 {"kv.block_tokens", config.kv.block_tokens, kMaxTokens},
                 {"kv.num_blocks", config.kv.num_blocks, kMaxBlocks}};
  for (const auto& b : bounded) {
    if (b.value > b.limit) return InvalidInput(fmt::format("{} must be <= {}, got {}", b.field, b.limit, b.value));
  }
  if (config.max_loras < 1) return InvalidInput(fmt::format("max_loras must be >= 1, got {}", config.max_loras));
  if (config.max_num_seqs < 1) {
    return InvalidInput(fmt::format("max_num_seqs must be >= 1, got {}", config.max_num_seqs));
  }
  if (config.max_batched_tokens < config.max_num_seqs) {
    return InvalidInput(fmt::format("max_batched_tokens ({}) must be >= max_num_seqs ({})",
                               config.max_batched_tokens, config.max_num_seqs));
  }
  if (config.max_model_len < 2) {
    return InvalidInput(fmt::format("max_model_len must be >= 2, got {}", config.max_model_len));
  }
  if (!config.chunked_prefill && config.policy != SchedulingPolicy::kStaticBatch &&
      config.max_batched_tokens < config.max_model_len) {
    return InvalidInput(fmt::format(
        "max_batched_tokens ({}) must be >= max_model_len ({}) without chunked_prefill, or a long "
        "prompt could never be scheduled",
        config.max_batched_tokens, config.max_model_len));
  }
  if (config.prefill_chunk_tokens < 0) {
    return InvalidInput(fmt::format("prefill_chunk_tokens must be >= 0, got {}", config.prefill_chunk_tokens));
  }
  const KvCacheConfig& kv = config.kv;
  if (kv.block_tokens < 1) return InvalidInput(fmt::format("kv.block_tokens must be >= 1, got {}", kv.block_tokens));
  if (kv.num_blocks < 1) return InvalidInput(fmt::format("kv.num_blocks must be >= 1, got {}", kv.num_blocks));
  if (kv.num_blocks * kv.block_tokens > (std::int64_t{1} << 40)) {
    return InvalidInput(fmt::format("kv.num_blocks * kv.block_tokens must be <= 2^40 tokens, got {} * {}",
                               kv.num_blocks, kv.block_tokens));
  }
  if (!(kv.watermark >= 0.0 && kv.watermark < 1.0)) {
    return InvalidInput(fmt::format("kv.watermark must be in [0, 1), got {}", kv.watermark));
  }
  const auto watermark_blocks = static_cast<std::int64_t>(std::ceil(kv.watermark * kv.num_blocks));
  const std::int64_t blocks_per_request = (config.max_model_len + kv.block_tokens - 1) / kv.block_tokens;
  if (kv.num_blocks - watermark_blocks < blocks_per_request) {
    return InvalidInput(fmt::format(
        "kv.num_blocks ({}) minus the watermark ({} blocks) cannot hold one max_model_len ({}) "
        "request, which needs {} blocks of {} tokens",
        kv.num_blocks, watermark_blocks, config.max_model_len, blocks_per_request, kv.block_tokens));
  }
  if (config.policy == SchedulingPolicy::kLongestPrefixMatch && kv.prefix_caching == PrefixCaching::kNone) {
    return InvalidInput("policy lpm needs a prefix cache (kv.prefix_caching hashed-blocks or radix)");
  }
  if (!(config.step_noise_cv >= 0.0 && config.step_noise_cv <= 10.0)) {
    return InvalidInput(fmt::format("step_noise_cv must be in [0, 10], got {}", config.step_noise_cv));
  }
  if (!(config.eos_probability >= 0.0 && config.eos_probability <= 1.0)) {
    return InvalidInput(fmt::format("eos_probability must be in [0, 1], got {}", config.eos_probability));
  }
  return ValidateCostModel(config.cost);
}

}  // namespace bakeoff::emulate
