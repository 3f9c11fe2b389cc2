// emulate/kv_cache.h
//
// Owns: the emulated engine's KV memory: a pool of fixed-size blocks, which sequence holds which,
// and the prefix cache that lets a new sequence reuse the KV of tokens an earlier one computed, in
// the flavours of engine_config.h (none, hashed full blocks, radix tree). docs/emulator.md, "KV
// cache", is the user-facing description.
// Does not own: when sequences are admitted, preempted or finished (emulate/scheduler.h).
//
// Model:
// - Capacity is num_blocks * block_tokens token slots. kNone and kHashedBlocks allocate whole
//   blocks: a sequence holding T tokens of KV occupies ceil(T / block_tokens) blocks, of which the
//   full blocks of an identical leading token chain may be shared with other sequences. kRadix
//   allocates token slots (SGLang's page size 1): a sequence occupies one slot per token, and
//   tree nodes shared by sequences are counted once.
// - A sequence's token ids (prompt, then generated) are passed in by the caller; KV exists only
//   for the first `KvSequence::tokens` of them.
// - Caching (kHashedBlocks): a block becomes cached (findable by later sequences) as soon as it
//   is full and allocated, keyed by the hash of its tokens chained to the previous block's hash.
//   Blocks no sequence references stay cached and are evicted least-recently-used first, only
//   when a new allocation finds no free uncached block.
// - Caching (kRadix): the tokens a sequence holds are inserted into the tree as they are
//   allocated; nodes no sequence references are evicted LRU, leaves first.
// - Matching never covers a whole prompt: at least its last token is computed (so the step that
//   produces the first output token exists), as vLLM and SGLang do. kHashedBlocks matches whole
//   blocks only; kRadix any token count.
//
// Thread-safety: none; one owner (the scheduler).
// Units: token counts; blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "emulate/engine_config.h"

namespace bakeoff::emulate {

using TokenId = std::uint32_t;

// One sequence's hold on the cache. Created empty by the caller, filled by KvCache; the caller
// reads only `tokens` and `cached_tokens`.
struct KvSequence {
  std::int64_t tokens = 0;         // leading tokens whose KV this sequence holds
  std::int64_t cached_tokens = 0;  // of them, how many Begin() found in the prefix cache
  // Internal to KvCache.
  std::vector<std::int32_t> blocks;    // kNone, kHashedBlocks: block indices in token order
  std::int64_t registered_tokens = 0;  // leading tokens already made findable in the cache
  std::uint64_t last_hash = 0;         // kHashedBlocks: chained hash of the last registered block
  std::int32_t radix_node = -1;        // kRadix: deepest tree node this sequence pins
  std::int64_t private_slots = 0;      // kRadix: slots held beyond the pinned tree path
};

struct KvCacheStats {
  std::int64_t capacity_tokens = 0;
  std::int64_t used_tokens = 0;    // slots (kRadix) or blocks * block_tokens held by sequences
  std::int64_t cached_tokens = 0;  // slots held only by the cache (evictable)
  std::uint64_t prefix_queries_tokens = 0;  // prompt tokens looked up by Begin()
  std::uint64_t prefix_hit_tokens = 0;      // of them, found in the cache
  std::uint64_t evicted_tokens = 0;         // cached slots reclaimed for new allocations
  // used_tokens / capacity_tokens, the figure vLLM reports as KV-cache usage.
  double usage() const {
    return capacity_tokens > 0 ? static_cast<double>(used_tokens) / capacity_tokens : 0.0;
  }
};

class KvCache {
 public:
  // REQUIRES: config validated (block_tokens >= 1, num_blocks >= 1, watermark in [0, 1)).
  explicit KvCache(const KvCacheConfig& config);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return config_; }

  // How many leading tokens of `prompt` Begin() would find cached now (0 without caching).
  // Read-only (no LRU touch, no counters); the longest-prefix-match policy ranks with it.
  std::int64_t MatchLength(std::span<const TokenId> prompt) const;

  // Starts `seq` (which must be empty) on `prompt`: pins the longest cached prefix (touching it
  // for LRU) and sets seq.tokens = seq.cached_tokens = its length; counts prompt.size() queried
  // and that many hit tokens. Pinned cached blocks leave the evictable set.
  void Begin(KvSequence& seq, std::span<const TokenId> prompt);

  // Makes seq hold the KV of the first `total_tokens` entries of `tokens` (total_tokens >=
  // seq.tokens, tokens.size() >= total_tokens), allocating blocks or slots and evicting
  // unreferenced cached ones LRU when no free capacity is left, and registering newly full blocks
  // (or tokens) in the prefix cache. Returns false, changing nothing, when the capacity free or
  // evictable (minus the watermark when `keep_watermark`) is too small.
  bool Grow(KvSequence& seq, std::span<const TokenId> tokens, std::int64_t total_tokens,
            bool keep_watermark);

  // Ends `seq` (finished, aborted or preempted): unpins everything it holds; what is registered
  // in the prefix cache stays there as evictable, the rest becomes free. seq is left empty.
  void Release(KvSequence& seq);

  // Tokens that could be allocated now: free plus evictable capacity.
  std::int64_t AvailableTokens() const;

  KvCacheStats stats() const;

 private:
  // Implementation state (blocks, hash map, LRU, radix tree) lives in kv_cache.cc's types,
  // behind this pointer, so the header stays stable.
  struct State;
  KvCacheConfig config_;
  std::unique_ptr<State> state_;
};

}  // namespace bakeoff::emulate
