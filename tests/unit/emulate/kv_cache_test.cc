// Tests for emulate/kv_cache.h: exact accounting, prefix hits, LRU eviction, the watermark and
// failure atomicity, for each prefix-caching flavour.
#include "emulate/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/rng.h"

namespace bakeoff::emulate {
namespace {

// first, first + 1, ..., n ids.
std::vector<TokenId> Range(TokenId first, int n) {
  std::vector<TokenId> ids;
  for (int i = 0; i < n; ++i) ids.push_back(first + static_cast<TokenId>(i));
  return ids;
}

std::vector<TokenId> Concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<TokenId> Head(const std::vector<TokenId>& ids, std::size_t n) {
  return {ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)};
}

KvCacheConfig Config(PrefixCaching caching, std::int64_t block_tokens, std::int64_t num_blocks,
                     double watermark = 0.0) {
  KvCacheConfig config;
  config.block_tokens = block_tokens;
  config.num_blocks = num_blocks;
  config.watermark = watermark;
  config.prefix_caching = caching;
  return config;
}

// Begin on `prompt` and Grow to all of it, as the scheduler admits a prompt in one step.
void Admit(KvCache& cache, KvSequence& seq, const std::vector<TokenId>& prompt) {
  cache.Begin(seq, prompt);
  ASSERT_TRUE(cache.Grow(seq, prompt, static_cast<std::int64_t>(prompt.size()), false));
}

std::int64_t FreeTokens(const KvCacheStats& s) {
  return s.capacity_tokens - s.used_tokens - s.cached_tokens;
}

bool SameStats(const KvCacheStats& a, const KvCacheStats& b) {
  return a.capacity_tokens == b.capacity_tokens && a.used_tokens == b.used_tokens &&
         a.cached_tokens == b.cached_tokens && a.prefix_queries_tokens == b.prefix_queries_tokens &&
         a.prefix_hit_tokens == b.prefix_hit_tokens && a.evicted_tokens == b.evicted_tokens;
}

bool SameSequence(const KvSequence& a, const KvSequence& b) {
  return a.tokens == b.tokens && a.cached_tokens == b.cached_tokens && a.blocks == b.blocks &&
         a.registered_tokens == b.registered_tokens && a.last_hash == b.last_hash &&
         a.radix_node == b.radix_node && a.private_slots == b.private_slots;
}

class KvCacheFlavourTest : public ::testing::TestWithParam<PrefixCaching> {};

std::string FlavourName(const ::testing::TestParamInfo<PrefixCaching>& info) {
  switch (info.param) {
    case PrefixCaching::kNone:
      return "None";
    case PrefixCaching::kHashedBlocks:
      return "HashedBlocks";
    case PrefixCaching::kRadix:
      return "Radix";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(AllFlavours, KvCacheFlavourTest,
                         ::testing::Values(PrefixCaching::kNone, PrefixCaching::kHashedBlocks,
                                           PrefixCaching::kRadix),
                         FlavourName);

// ---- Hits ----------------------------------------------------------------------------------

TEST(KvCacheTest, SharedTwoBlockPrefixHitsTwoBlocks) {
  const auto a = Range(100, 10);
  const auto b = Concat(Head(a, 8), Range(500, 5));
  for (PrefixCaching caching : {PrefixCaching::kHashedBlocks, PrefixCaching::kRadix}) {
    KvCache cache(Config(caching, 4, 16));
    KvSequence sa, sb;
    Admit(cache, sa, a);
    EXPECT_EQ(sa.cached_tokens, 0);
    EXPECT_EQ(cache.MatchLength(b), 8);
    Admit(cache, sb, b);
    EXPECT_EQ(sb.cached_tokens, 8);
    EXPECT_EQ(sb.tokens, 13);
    const KvCacheStats s = cache.stats();
    EXPECT_EQ(s.prefix_queries_tokens, 23u);
    EXPECT_EQ(s.prefix_hit_tokens, 8u);
    if (caching == PrefixCaching::kHashedBlocks) {
      // a: 3 blocks; b: 2 shared + 2 of its own.
      EXPECT_EQ(s.used_tokens, 5 * 4);
      EXPECT_EQ(sb.blocks[0], sa.blocks[0]);
      EXPECT_EQ(sb.blocks[1], sa.blocks[1]);
      EXPECT_NE(sb.blocks[2], sa.blocks[2]);
    } else {
      EXPECT_EQ(s.used_tokens, 10 + 5);
    }
    EXPECT_EQ(s.cached_tokens, 0);
  }
}

TEST(KvCacheTest, PartialLastBlockMatchesOnlyInRadix) {
  const auto a = Range(100, 10);            // 2 full blocks of 4 and 2 tokens
  const auto b = Concat(a, Range(900, 2));  // a, then 2 more
  for (bool release_first : {false, true}) {
    KvCache hashed(Config(PrefixCaching::kHashedBlocks, 4, 16));
    KvCache radix(Config(PrefixCaching::kRadix, 4, 16));
    KvSequence ha, hb, ra, rb;
    Admit(hashed, ha, a);
    Admit(radix, ra, a);
    if (release_first) {
      hashed.Release(ha);
      radix.Release(ra);
    }
    hashed.Begin(hb, b);
    radix.Begin(rb, b);
    EXPECT_EQ(hb.cached_tokens, 8) << release_first;
    EXPECT_EQ(rb.cached_tokens, 10) << release_first;
    EXPECT_EQ(hashed.stats().prefix_hit_tokens, 8u);
    EXPECT_EQ(radix.stats().prefix_hit_tokens, 10u);
  }
}

TEST(KvCacheTest, WholePromptIsNeverMatched) {
  const auto a = Range(100, 8);  // exactly 2 blocks of 4
  {
    KvCache cache(Config(PrefixCaching::kHashedBlocks, 4, 16));
    KvSequence first, second;
    Admit(cache, first, a);
    EXPECT_EQ(cache.MatchLength(a), 4);  // floor((8 - 1) / 4) blocks
    Admit(cache, second, a);
    EXPECT_EQ(second.cached_tokens, 4);
    // Same prompt, admitted one after the other: the second shares the first's first block;
    // its last block is recomputed into a block of its own.
    EXPECT_EQ(second.blocks[0], first.blocks[0]);
    EXPECT_NE(second.blocks[1], first.blocks[1]);
    EXPECT_EQ(cache.stats().used_tokens, 3 * 4);
    cache.Release(first);
    cache.Release(second);
    // The duplicate of the last block was never registered: it is free, not cached.
    EXPECT_EQ(cache.stats().cached_tokens, 8);
    EXPECT_EQ(cache.stats().used_tokens, 0);
  }
  {
    KvCache cache(Config(PrefixCaching::kRadix, 4, 16));
    KvSequence first, second;
    Admit(cache, first, a);
    EXPECT_EQ(cache.MatchLength(a), 7);
    Admit(cache, second, a);
    EXPECT_EQ(second.cached_tokens, 7);
    EXPECT_EQ(cache.stats().used_tokens, 8);  // the recomputed last token is shared, not copied
    cache.Release(first);
    cache.Release(second);
    EXPECT_EQ(cache.stats().cached_tokens, 8);
  }
  for (PrefixCaching caching : {PrefixCaching::kHashedBlocks, PrefixCaching::kRadix}) {
    KvCache cache(Config(caching, 1, 16));
    KvSequence seq;
    Admit(cache, seq, Range(7, 1));
    EXPECT_EQ(cache.MatchLength(Range(7, 1)), 0);
    EXPECT_EQ(cache.MatchLength({}), 0);
    EXPECT_EQ(cache.MatchLength(Range(7, 2)), 1);
  }
}

TEST(KvCacheTest, ConcurrentIdenticalPromptsAreCountedOnceInRadix) {
  KvCache cache(Config(PrefixCaching::kRadix, 4, 16));
  const auto prompt = Range(0, 10);
  KvSequence a, b;
  cache.Begin(a, prompt);
  cache.Begin(b, prompt);  // nothing is cached yet: both start empty
  EXPECT_EQ(b.cached_tokens, 0);
  ASSERT_TRUE(cache.Grow(a, prompt, 10, false));
  ASSERT_TRUE(cache.Grow(b, prompt, 10, false));
  EXPECT_EQ(cache.stats().used_tokens, 10);
  // The same output, one token at a time, in lockstep: still shared.
  const auto same = Concat(prompt, Range(50, 5));
  for (std::int64_t n = 11; n <= 15; ++n) {
    ASSERT_TRUE(cache.Grow(a, same, n, false));
    ASSERT_TRUE(cache.Grow(b, same, n, false));
    EXPECT_EQ(cache.stats().used_tokens, n);
  }
  // Diverging outputs take a slot each.
  const auto a_out = Concat(same, Range(70, 1));
  const auto b_out = Concat(same, Range(80, 1));
  ASSERT_TRUE(cache.Grow(a, a_out, 16, false));
  ASSERT_TRUE(cache.Grow(b, b_out, 16, false));
  EXPECT_EQ(cache.stats().used_tokens, 17);
  cache.Release(a);
  EXPECT_EQ(cache.stats().used_tokens, 16);
  EXPECT_EQ(cache.stats().cached_tokens, 1);
  cache.Release(b);
  EXPECT_EQ(cache.stats().cached_tokens, 17);
  EXPECT_EQ(cache.MatchLength(Concat(a_out, Range(1, 1))), 16);
  EXPECT_EQ(cache.MatchLength(Concat(b_out, Range(1, 1))), 16);
}

TEST(KvCacheTest, RadixSequencesFollowingEachOtherShareEveryToken) {
  // Identical prompts and outputs, admitted at different times: the later ones follow the first
  // along the same tokens, at their own distance, and a group decodes in lockstep.
  KvCache cache(Config(PrefixCaching::kRadix, 4, 64));
  const auto tokens = Concat(Range(0, 12), Range(100, 40));
  std::vector<KvSequence> seqs(4);
  std::int64_t deepest = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    cache.Begin(seqs[i], Head(tokens, 12));
    EXPECT_EQ(seqs[i].cached_tokens, i == 0 ? 0 : 11);
    ASSERT_TRUE(cache.Grow(seqs[i], tokens, 12, false));
    deepest = std::max<std::int64_t>(deepest, 12);
    // seqs 2 and 3 start together (same step); the others a few steps apart.
    const int steps = i == 2 ? 0 : 5;
    for (int step = 0; step < steps; ++step) {
      for (std::size_t j = 0; j <= i; ++j) {
        ASSERT_TRUE(cache.Grow(seqs[j], tokens, seqs[j].tokens + 1, false));
        deepest = std::max(deepest, seqs[j].tokens);
        ASSERT_EQ(cache.stats().used_tokens, deepest) << i << " " << step << " " << j;
      }
    }
  }
  while (seqs.back().tokens < static_cast<std::int64_t>(tokens.size())) {
    for (KvSequence& seq : seqs) {
      if (seq.tokens == static_cast<std::int64_t>(tokens.size())) continue;
      ASSERT_TRUE(cache.Grow(seq, tokens, seq.tokens + 1, false));
      deepest = std::max(deepest, seq.tokens);
      ASSERT_EQ(cache.stats().used_tokens, deepest);
    }
  }
  EXPECT_EQ(cache.stats().used_tokens, 52);
  cache.Release(seqs[0]);  // the others hold everything too
  EXPECT_EQ(cache.stats().used_tokens, 52);
  for (std::size_t i = 1; i < seqs.size(); ++i) cache.Release(seqs[i]);
  EXPECT_EQ(cache.stats().cached_tokens, 52);
  EXPECT_EQ(cache.MatchLength(Concat(tokens, Range(9, 1))), 52);
  // Everything cached is evictable.
  KvSequence big;
  Admit(cache, big, Range(5000, 256));
  EXPECT_EQ(cache.stats().evicted_tokens, 52u);
  EXPECT_EQ(cache.stats().cached_tokens, 0);
}

TEST(KvCacheTest, RadixMatchEndingInsideAnEdgeSplitsIt) {
  KvCache cache(Config(PrefixCaching::kRadix, 4, 16));
  const auto a = Range(0, 10);
  const auto b = Concat(Range(0, 4), Range(50, 3));
  KvSequence sa, sb;
  Admit(cache, sa, a);
  cache.Release(sa);
  Admit(cache, sb, b);
  EXPECT_EQ(sb.cached_tokens, 4);
  EXPECT_EQ(cache.stats().used_tokens, 7);    // 4 shared with a, 3 of b's own
  EXPECT_EQ(cache.stats().cached_tokens, 6);  // the rest of a
  EXPECT_EQ(cache.MatchLength(a), 9);
  EXPECT_EQ(cache.MatchLength(Concat(b, Range(1, 1))), 7);
  EXPECT_EQ(cache.MatchLength(Concat(Range(0, 6), Range(99, 1))), 6);
}

TEST(KvCacheTest, DecodedTokensBecomeFindable) {
  // Multi-turn: the next prompt quotes the previous answer.
  const auto turn1 = Concat(Range(0, 6), Range(40, 4));  // 6 prompt + 4 output tokens
  const auto turn2 = Concat(turn1, Range(90, 3));
  for (PrefixCaching caching : {PrefixCaching::kHashedBlocks, PrefixCaching::kRadix}) {
    KvCache cache(Config(caching, 4, 16));
    KvSequence seq;
    Admit(cache, seq, Head(turn1, 6));
    const std::vector<std::size_t> blocks_after = {2, 2, 3, 3};  // at 7, 8, 9, 10 tokens
    for (std::int64_t n = 7; n <= 10; ++n) {
      ASSERT_TRUE(cache.Grow(seq, turn1, n, false));
      EXPECT_EQ(seq.tokens, n);
      if (caching == PrefixCaching::kHashedBlocks) {
        EXPECT_EQ(seq.blocks.size(), blocks_after[static_cast<std::size_t>(n - 7)]);
        EXPECT_EQ(cache.stats().used_tokens, static_cast<std::int64_t>(seq.blocks.size()) * 4);
      } else {
        EXPECT_EQ(cache.stats().used_tokens, n);
      }
    }
    // Findable while still running, too.
    EXPECT_EQ(cache.MatchLength(turn2), caching == PrefixCaching::kRadix ? 10 : 8);
    cache.Release(seq);
    KvSequence next;
    Admit(cache, next, turn2);
    EXPECT_EQ(next.cached_tokens, caching == PrefixCaching::kRadix ? 10 : 8);
  }
}

TEST(KvCacheTest, NoneNeverHits) {
  KvCache cache(Config(PrefixCaching::kNone, 4, 16));
  const auto prompt = Range(0, 13);
  for (int round = 0; round < 3; ++round) {
    KvSequence seq;
    EXPECT_EQ(cache.MatchLength(prompt), 0);
    Admit(cache, seq, prompt);
    EXPECT_EQ(seq.cached_tokens, 0);
    EXPECT_EQ(seq.blocks.size(), 4u);
    EXPECT_EQ(cache.stats().used_tokens, 16);
    cache.Release(seq);
    EXPECT_EQ(cache.stats().cached_tokens, 0);
    EXPECT_EQ(cache.stats().used_tokens, 0);
  }
  const KvCacheStats s = cache.stats();
  EXPECT_EQ(s.prefix_queries_tokens, 39u);  // Begin counts the queried tokens in every flavour
  EXPECT_EQ(s.prefix_hit_tokens, 0u);
  EXPECT_EQ(s.evicted_tokens, 0u);
}

// ---- Release ---------------------------------------------------------------------------------

TEST_P(KvCacheFlavourTest, ReleaseOfAPreemptedSequenceKeepsRegisteredAndFreesTheRest) {
  KvCache cache(Config(GetParam(), 4, 8));
  const auto tokens = Concat(Range(0, 6), Range(60, 4));
  KvSequence seq;
  Admit(cache, seq, Head(tokens, 6));
  for (std::int64_t n = 7; n <= 10; ++n) ASSERT_TRUE(cache.Grow(seq, tokens, n, false));
  cache.Release(seq);  // preempted mid-decode
  EXPECT_EQ(seq.tokens, 0);
  EXPECT_EQ(seq.cached_tokens, 0);
  EXPECT_TRUE(seq.blocks.empty());
  EXPECT_EQ(seq.radix_node, -1);
  const KvCacheStats s = cache.stats();
  EXPECT_EQ(s.used_tokens, 0);
  const std::int64_t expected_cached = GetParam() == PrefixCaching::kNone           ? 0
                                       : GetParam() == PrefixCaching::kHashedBlocks ? 8
                                                                                    : 10;
  EXPECT_EQ(s.cached_tokens, expected_cached);
  EXPECT_EQ(FreeTokens(s), 32 - expected_cached);
  EXPECT_EQ(cache.AvailableTokens(), 32);
  // Readmission (recompute) finds what was registered.
  KvSequence again;
  Admit(cache, again, tokens);
  EXPECT_EQ(again.cached_tokens, GetParam() == PrefixCaching::kRadix ? 9 : expected_cached);
}

// ---- Eviction --------------------------------------------------------------------------------

TEST(KvCacheTest, HashedUsesFreeBlocksBeforeEvictingLeastRecentlyReleased) {
  const auto x = Range(0, 5);    // 1 full block + 1 partial
  const auto y = Range(100, 5);  // 1 full block + 1 partial
  const auto z = Range(200, 12);
  for (bool touch_x : {false, true}) {
    KvCache cache(Config(PrefixCaching::kHashedBlocks, 4, 4));
    KvSequence sx, sy, sz;
    Admit(cache, sx, x);
    Admit(cache, sy, y);
    cache.Release(sx);
    cache.Release(sy);
    if (touch_x) {  // a later Begin on x's prefix makes it the most recently used
      KvSequence probe;
      cache.Begin(probe, x);
      EXPECT_EQ(probe.cached_tokens, 4);
      cache.Release(probe);
    }
    EXPECT_EQ(cache.stats().cached_tokens, 8);
    Admit(cache, sz, z);  // 3 blocks: the 2 free ones, then 1 evicted
    EXPECT_EQ(cache.stats().evicted_tokens, 4u);
    EXPECT_EQ(cache.MatchLength(x), touch_x ? 4 : 0) << touch_x;
    EXPECT_EQ(cache.MatchLength(y), touch_x ? 0 : 4) << touch_x;
    EXPECT_EQ(cache.stats().used_tokens, 12);
    EXPECT_EQ(cache.stats().cached_tokens, 4);
  }
}

TEST(KvCacheTest, HashedEvictsTheTailOfAReleasedSequenceFirst) {
  KvCache cache(Config(PrefixCaching::kHashedBlocks, 2, 4));
  const auto a = Range(0, 8);  // 4 full blocks
  KvSequence sa, sb;
  Admit(cache, sa, a);
  cache.Release(sa);
  EXPECT_EQ(cache.MatchLength(Concat(a, Range(50, 1))), 8);
  Admit(cache, sb, Range(100, 2));  // evicts one block: a's last
  EXPECT_EQ(cache.MatchLength(Concat(a, Range(50, 1))), 6);
}

TEST(KvCacheTest, RadixEvictsLeastRecentlyUsedLeavesFirst) {
  KvCache cache(Config(PrefixCaching::kRadix, 4, 4));  // 16 slots
  const auto p = Range(0, 4);
  const auto a = Concat(p, Range(50, 2));
  const auto b = Concat(p, Range(60, 2));
  const auto c = Range(300, 10);
  KvSequence sa, sb, sc, sd, se;
  Admit(cache, sa, a);
  cache.Release(sa);
  Admit(cache, sb, b);
  EXPECT_EQ(sb.cached_tokens, 4);
  cache.Release(sb);  // tree: p -> {a's 2, b's 2}, p touched with b
  EXPECT_EQ(cache.stats().cached_tokens, 8);
  Admit(cache, sc, c);  // needs 10, 8 free: evicts a's leaf (2), the least recently used
  EXPECT_EQ(cache.stats().evicted_tokens, 2u);
  EXPECT_EQ(cache.MatchLength(a), 4);
  EXPECT_EQ(cache.MatchLength(b), 5);
  cache.Release(sc);
  EXPECT_EQ(cache.stats().cached_tokens, 16);
  // Needs 6: b's leaf (2) goes, which leaves p a leaf older than c, so p (4) goes before c.
  Admit(cache, sd, Range(400, 6));
  EXPECT_EQ(cache.stats().evicted_tokens, 8u);
  EXPECT_EQ(cache.MatchLength(b), 0);
  EXPECT_EQ(cache.MatchLength(c), 9);
  cache.Release(sd);
  // Touching c by a Begin makes d the least recently used.
  cache.Begin(se, c);
  cache.Release(se);
  KvSequence sf;
  Admit(cache, sf, Range(500, 6));
  EXPECT_EQ(cache.MatchLength(c), 9);
  EXPECT_EQ(cache.MatchLength(Range(400, 6)), 0);
  // The match stopped one token short of c (never a whole prompt), so c's last token was not
  // touched and went first, then d.
  EXPECT_EQ(cache.stats().evicted_tokens, 8u + 1 + 6);
}

// ---- Capacity --------------------------------------------------------------------------------

TEST_P(KvCacheFlavourTest, WatermarkRefusesAdmissionButNotRunningSequences) {
  // 100 blocks of 4, watermark 5%: 5 blocks (20 tokens) an admission must leave.
  KvCache cache(Config(GetParam(), 4, 100, 0.05));
  const auto tokens = Range(0, 401);
  KvSequence seq;
  cache.Begin(seq, Head(tokens, 380));
  EXPECT_TRUE(cache.Grow(seq, tokens, 380, true));
  EXPECT_FALSE(cache.Grow(seq, tokens, 381, true));
  EXPECT_EQ(seq.tokens, 380);
  EXPECT_TRUE(cache.Grow(seq, tokens, 400, false));
  EXPECT_FALSE(cache.Grow(seq, tokens, 401, false));
  EXPECT_EQ(cache.stats().used_tokens, 400);
  EXPECT_EQ(cache.AvailableTokens(), 0);
}

TEST_P(KvCacheFlavourTest, WatermarkRoundsUpToWholeBlocksAndCountsEvictable) {
  // 10 blocks of 4, watermark 1%: ceil(0.1) = 1 block reserved.
  KvCache cache(Config(GetParam(), 4, 10, 0.01));
  KvSequence first;
  Admit(cache, first, Range(0, 36));
  cache.Release(first);  // cached (or free, without caching)
  KvSequence seq;
  const auto tokens = Range(1000, 40);
  cache.Begin(seq, Head(tokens, 36));
  EXPECT_TRUE(cache.Grow(seq, tokens, 36, true));
  EXPECT_FALSE(cache.Grow(seq, tokens, 37, true));
  EXPECT_TRUE(cache.Grow(seq, tokens, 40, false));
}

TEST_P(KvCacheFlavourTest, FailedGrowChangesNothing) {
  KvCache cache(Config(GetParam(), 4, 8));  // 32 tokens
  const auto a = Range(0, 20);
  KvSequence sa;
  Admit(cache, sa, a);
  cache.Release(sa);
  KvSequence sb;
  const auto b = Concat(Head(a, 6), Range(500, 30));
  Admit(cache, sb, Head(b, 7));
  const KvCacheStats before = cache.stats();
  const KvSequence seq_before = sb;
  const std::int64_t match_a = cache.MatchLength(a);
  const std::int64_t match_b = cache.MatchLength(b);
  EXPECT_FALSE(cache.Grow(sb, b, 36, false));
  EXPECT_FALSE(cache.Grow(sb, b, 33, false));
  EXPECT_TRUE(SameStats(before, cache.stats()));
  EXPECT_TRUE(SameSequence(seq_before, sb));
  EXPECT_EQ(cache.MatchLength(a), match_a);
  EXPECT_EQ(cache.MatchLength(b), match_b);
  EXPECT_TRUE(cache.Grow(sb, b, 32, false));
  EXPECT_EQ(cache.stats().used_tokens, 32);
  EXPECT_EQ(cache.stats().cached_tokens, 0);
}

TEST(KvCacheTest, RadixGrowAlongACachedPathCountsThePinnedSlots) {
  // Growing onto a cached path pins it: those slots stop being evictable, so they cannot also
  // pay for the new ones.
  KvCache cache(Config(PrefixCaching::kRadix, 4, 4));  // 16 slots
  const auto a = Range(0, 12);
  KvSequence sa;
  Admit(cache, sa, a);
  cache.Release(sa);  // cached 12, free 4
  KvSequence sb;
  Admit(cache, sb, Head(a, 6));
  EXPECT_EQ(sb.cached_tokens, 5);
  EXPECT_EQ(cache.stats().used_tokens, 6);
  const auto b = Concat(a, Range(500, 5));  // a's other 6 tokens are shared, 5 are new
  const KvCacheStats before = cache.stats();
  const KvSequence seq_before = sb;
  EXPECT_FALSE(cache.Grow(sb, b, 17, false));  // 4 free + 0 evictable left after pinning a
  EXPECT_TRUE(SameStats(before, cache.stats()));
  EXPECT_TRUE(SameSequence(seq_before, sb));
  EXPECT_TRUE(cache.Grow(sb, b, 16, false));
  EXPECT_EQ(cache.stats().used_tokens, 16);
  EXPECT_EQ(cache.stats().evicted_tokens, 0u);
}

// ---- Randomized invariants ---------------------------------------------------------------------

// A running sequence of the random test: its whole token list and its hold.
struct Running {
  std::vector<TokenId> tokens;  // prompt then output
  std::int64_t prompt = 0;
  KvSequence kv;
};

// Slots the held sequences need when every common prefix is stored once (radix).
std::int64_t DistinctPrefixes(const std::vector<Running>& running) {
  std::map<std::pair<int, TokenId>, int> trie;
  for (const Running& r : running) {
    int node = 0;
    for (std::int64_t i = 0; i < r.kv.tokens; ++i) {
      auto [it, added] = trie.emplace(std::make_pair(node, r.tokens[static_cast<std::size_t>(i)]),
                                      static_cast<int>(trie.size()) + 1);
      node = it->second;
    }
  }
  return static_cast<std::int64_t>(trie.size());
}

void ExpectConsistent(const KvCache& cache, const std::vector<Running>& running,
                      const std::string& where) {
  SCOPED_TRACE(where);
  const KvCacheStats s = cache.stats();
  const std::int64_t bt = cache.config().block_tokens;
  EXPECT_EQ(s.capacity_tokens, cache.config().num_blocks * bt);
  EXPECT_GE(s.used_tokens, 0);
  EXPECT_GE(s.cached_tokens, 0);
  EXPECT_GE(FreeTokens(s), 0);
  EXPECT_EQ(cache.AvailableTokens(), s.capacity_tokens - s.used_tokens);
  if (cache.config().prefix_caching == PrefixCaching::kRadix) {
    EXPECT_EQ(s.used_tokens, DistinctPrefixes(running));
    for (const Running& r : running) {
      // Everything a sequence holds is findable (capped below the whole prompt).
      const auto held = std::span<const TokenId>(r.tokens).first(static_cast<std::size_t>(
          std::min<std::int64_t>(r.kv.tokens + 1, static_cast<std::int64_t>(r.tokens.size()))));
      EXPECT_GE(cache.MatchLength(held), static_cast<std::int64_t>(held.size()) - 1);
    }
  } else {
    std::set<std::int32_t> blocks;
    for (const Running& r : running) {
      EXPECT_EQ(static_cast<std::int64_t>(r.kv.blocks.size()), (r.kv.tokens + bt - 1) / bt);
      blocks.insert(r.kv.blocks.begin(), r.kv.blocks.end());
    }
    EXPECT_EQ(s.used_tokens, static_cast<std::int64_t>(blocks.size()) * bt);
    EXPECT_EQ(s.cached_tokens % bt, 0);
    if (cache.config().prefix_caching == PrefixCaching::kNone) {
      EXPECT_EQ(s.cached_tokens, 0);
      EXPECT_EQ(s.prefix_hit_tokens, 0u);
    }
  }
}

TEST_P(KvCacheFlavourTest, AccountingAddsUpUnderRandomOperations) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Rng rng(seed);
    // Small pools (and a 1-token block size once) so that eviction and refusals are frequent.
    const std::int64_t bt = seed == 4 ? 1 : static_cast<std::int64_t>(2 + rng.Below(4));
    KvCache cache(Config(GetParam(), bt, static_cast<std::int64_t>(96 / bt), 0.05));
    // Prompts start with one of a few shared prefixes over a tiny alphabet, so matches end at
    // arbitrary points; outputs of some sequences coincide.
    std::vector<std::vector<TokenId>> prefixes;
    for (int i = 0; i < 4; ++i) {
      std::vector<TokenId> prefix;
      const auto n = rng.Below(30);
      for (std::uint64_t j = 0; j < n; ++j) prefix.push_back(static_cast<TokenId>(rng.Below(3)));
      prefixes.push_back(prefix);
    }
    std::vector<Running> running;
    std::uint64_t queried = 0;
    for (int op = 0; op < 3000; ++op) {
      const std::string where = "seed " + std::to_string(seed) + " op " + std::to_string(op);
      const std::uint64_t dice = rng.Below(12);
      if (dice >= 10) {
        // A decode step: every running sequence grows by one token, in order, as the scheduler
        // does; sequences on the same tokens then advance in lockstep.
        for (Running& r : running) {
          if (r.kv.tokens < static_cast<std::int64_t>(r.tokens.size())) {
            cache.Grow(r.kv, r.tokens, r.kv.tokens + 1, false);
          }
          ExpectConsistent(cache, running, where + " (step)");
        }
      } else if (dice < 2 && running.size() < 8) {
        Running r;
        r.tokens = prefixes[rng.Below(prefixes.size())];
        const auto own = rng.Below(12);
        for (std::uint64_t j = 0; j < own; ++j) {
          r.tokens.push_back(static_cast<TokenId>(rng.Below(3)));
        }
        r.prompt = static_cast<std::int64_t>(r.tokens.size());
        const std::uint64_t output_seed = rng.Below(2);
        for (std::uint64_t j = 0; j < 20; ++j) {
          r.tokens.push_back(static_cast<TokenId>(100 + output_seed * 10 + j % 7));
        }
        const std::span<const TokenId> prompt =
            std::span<const TokenId>(r.tokens).first(static_cast<std::size_t>(r.prompt));
        const std::int64_t expected = cache.MatchLength(prompt);
        const std::uint64_t hits_before = cache.stats().prefix_hit_tokens;
        cache.Begin(r.kv, prompt);
        queried += prompt.size();
        EXPECT_EQ(r.kv.cached_tokens, expected) << where;
        EXPECT_EQ(r.kv.tokens, expected) << where;
        EXPECT_LE(r.kv.cached_tokens, std::max<std::int64_t>(r.prompt - 1, 0)) << where;
        if (GetParam() == PrefixCaching::kHashedBlocks) {
          EXPECT_EQ(r.kv.cached_tokens % bt, 0) << where;
        }
        EXPECT_EQ(cache.stats().prefix_hit_tokens - hits_before,
                  static_cast<std::uint64_t>(expected));
        running.push_back(std::move(r));
      } else if (dice < 8 && !running.empty()) {
        Running& r = running[rng.Below(running.size())];
        const auto room = static_cast<std::int64_t>(r.tokens.size()) - r.kv.tokens;
        if (room == 0) continue;
        // Mostly one token (decode); sometimes a chunk.
        const std::int64_t step =
            rng.Below(3) == 0 ? 1 + static_cast<std::int64_t>(rng.Below(room)) : 1;
        const bool keep_watermark = rng.Below(2) == 0;
        const KvCacheStats before = cache.stats();
        const KvSequence seq_before = r.kv;
        const std::int64_t available = cache.AvailableTokens();
        if (cache.Grow(r.kv, r.tokens, r.kv.tokens + step, keep_watermark)) {
          EXPECT_EQ(r.kv.tokens, seq_before.tokens + step) << where;
          EXPECT_GE(cache.stats().used_tokens, before.used_tokens) << where;
          EXPECT_LE(cache.stats().used_tokens - before.used_tokens, available) << where;
        } else {
          EXPECT_TRUE(SameStats(before, cache.stats())) << where;
          EXPECT_TRUE(SameSequence(seq_before, r.kv)) << where;
          // Refused only when even evicting every cached slot would not do.
          const std::int64_t needed = (seq_before.tokens + step + bt - 1) / bt * bt -
                                      static_cast<std::int64_t>(seq_before.blocks.size()) * bt;
          const std::int64_t reserve =
              keep_watermark ? static_cast<std::int64_t>(std::ceil(
                                   0.05 * static_cast<double>(cache.config().num_blocks))) *
                                   bt
                             : 0;
          // kRadix needs at most `step` slots, fewer when some are shared (but those, if
          // cached, stop being evictable when pinned).
          EXPECT_GT(GetParam() == PrefixCaching::kRadix ? step : needed, available - reserve)
              << where;
        }
      } else if (!running.empty()) {
        const std::size_t i = rng.Below(running.size());
        cache.Release(running[i].kv);
        EXPECT_EQ(running[i].kv.tokens, 0);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      }
      ExpectConsistent(cache, running, where);
      if (::testing::Test::HasFailure()) return;
    }
    for (Running& r : running) cache.Release(r.kv);
    running.clear();
    const KvCacheStats s = cache.stats();
    EXPECT_EQ(s.used_tokens, 0);
    EXPECT_EQ(s.prefix_queries_tokens, queried);
    EXPECT_EQ(cache.AvailableTokens(), s.capacity_tokens);
  }
}

TEST_P(KvCacheFlavourTest, ManySequencesThroughASmallPool) {
  // A shape like the simulator's: shared system prompts, chunked prefill, one-token decodes,
  // a pool that holds a few sequences, so nearly every admission evicts.
  KvCache cache(Config(GetParam(), 16, 64));
  Rng rng(7);
  std::uint64_t hits = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<TokenId> tokens = Range(static_cast<TokenId>(1000 * rng.Below(3)), 96);
    const auto own = Range(static_cast<TokenId>(10000 + i * 100), 32);
    tokens.insert(tokens.end(), own.begin(), own.end());
    const auto output = Range(static_cast<TokenId>(500000 + i * 100), 64);
    tokens.insert(tokens.end(), output.begin(), output.end());
    KvSequence seq;
    cache.Begin(seq, std::span<const TokenId>(tokens).first(128));
    hits += static_cast<std::uint64_t>(seq.cached_tokens);
    ASSERT_TRUE(cache.Grow(seq, tokens, std::min<std::int64_t>(seq.tokens + 64, 128), true));
    ASSERT_TRUE(cache.Grow(seq, tokens, 128, true));
    for (std::int64_t n = 129; n <= 192; ++n) ASSERT_TRUE(cache.Grow(seq, tokens, n, false));
    cache.Release(seq);
    const KvCacheStats s = cache.stats();
    ASSERT_EQ(s.used_tokens, 0);
    ASSERT_LE(s.cached_tokens, s.capacity_tokens);
  }
  const KvCacheStats s = cache.stats();
  EXPECT_EQ(s.prefix_hit_tokens, hits);
  if (GetParam() == PrefixCaching::kNone) {
    EXPECT_EQ(hits, 0u);
  } else {
    EXPECT_GT(hits, 1000u * 96);  // most system prompts survive eviction
    EXPECT_GT(s.evicted_tokens, 0u);
  }
}

}  // namespace
}  // namespace bakeoff::emulate
