// emulate/kv_cache.cc: the emulated KV memory of kv_cache.h: the block pool with vLLM-style
// hashed-block prefix caching (kNone, kHashedBlocks) and the SGLang-style radix tree of token
// slots (kRadix), their LRU eviction, and the capacity and hit accounting.
//
// Both flavours keep their state in flat, index-based pools (no per-node heap allocation in the
// steady state) because the simulator drives on the order of 10^9 token allocations through here:
// growing a sequence by one token is O(1) amortized, and Begin/Grow over a prompt are O(prompt
// length) (one hash per block, or one child lookup per tree edge plus a span comparison).
#include "emulate/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "core/check.h"

namespace bakeoff::emulate {

namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// Map from a 64-bit key to a non-negative int32, open addressing with linear probing and
// backward-shift deletion (no tombstones, so probe lengths stay short however many keys come
// and go). Keys are spread by Fibonacci hashing, so they need not be well mixed themselves.
class FlatIndex {
 public:
  FlatIndex() { Rehash(16); }

  // The value stored for `key`, or -1.
  std::int32_t Find(std::uint64_t key) const {
    for (std::size_t i = Home(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.value < 0) return -1;
      if (slot.key == key) return slot.value;
    }
  }

  // Starts loading the slot where a lookup of `key` begins: the pool is larger than the
  // cache, so looking up a prompt's blocks one after the other would wait on memory each time.
  void Prefetch(std::uint64_t key) const { __builtin_prefetch(&slots_[Home(key)]); }

  // Stores key -> value unless key is present; returns whether it stored. REQUIRES: value >= 0.
  bool Insert(std::uint64_t key, std::int32_t value) {
    if (2 * (size_ + 1) > slots_.size()) Rehash(2 * slots_.size());
    std::size_t i = Home(key);
    for (; slots_[i].value >= 0; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return false;
    }
    slots_[i] = Slot{key, value};
    ++size_;
    return true;
  }

  // Stores key -> value, overwriting an existing entry. REQUIRES: value >= 0.
  void Put(std::uint64_t key, std::int32_t value) {
    if (2 * (size_ + 1) > slots_.size()) Rehash(2 * slots_.size());
    std::size_t i = Home(key);
    while (slots_[i].value >= 0 && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].value < 0) ++size_;
    slots_[i] = Slot{key, value};
  }

  // REQUIRES: key is present.
  void Erase(std::uint64_t key) {
    std::size_t hole = Home(key);
    while (slots_[hole].key != key || slots_[hole].value < 0) hole = (hole + 1) & mask_;
    // Backward shift: move each later entry of the cluster into the hole unless its home lies
    // cyclically in (hole, j], where it must stay to remain reachable.
    for (std::size_t j = (hole + 1) & mask_; slots_[j].value >= 0; j = (j + 1) & mask_) {
      const std::size_t home = Home(slots_[j].key);
      const bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole].value = -1;
    --size_;
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    std::int32_t value = -1;  // -1: empty
  };

  std::size_t Home(std::uint64_t key) const { return (key * kGolden) >> shift_; }

  void Rehash(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (const Slot& slot : old) {
      if (slot.value >= 0) Put(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

// The chained hash of one full block: its token ids, two per 64-bit word, folded into the
// previous block's hash, so that it identifies the block by its whole prefix, as vLLM's does.
// Two independent lanes of xxHash64's round (a public-domain design by Yann Collet) and its
// final avalanche: a few cycles per token. A 64-bit collision between two different prefixes is
// treated as impossible, as in vLLM.
std::uint64_t HashBlock(std::uint64_t previous, std::span<const TokenId> block) {
  constexpr std::uint64_t kP1 = 0x9e3779b185ebca87ULL;
  constexpr std::uint64_t kP2 = 0xc2b2ae3d27d4eb4fULL;
  const auto round = [](std::uint64_t acc, std::uint64_t word) {
    return std::rotl(acc + word * kP2, 31) * kP1;
  };
  const auto word = [&block](std::size_t i) {  // tokens i and i + 1 in one load
    std::uint64_t w;
    std::memcpy(&w, &block[i], sizeof w);
    return w;
  };
  std::uint64_t a = previous + kP1;
  std::uint64_t b = previous - kP2;
  std::size_t i = 0;
  for (; i + 4 <= block.size(); i += 4) {
    a = round(a, word(i));
    b = round(b, word(i + 2));
  }
  if (i + 2 <= block.size()) {
    a = round(a, word(i));
    i += 2;
  }
  if (i < block.size()) b = round(b, block[i]);
  std::uint64_t h = std::rotl(a, 1) + std::rotl(b, 7) + block.size();
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= 0x165667b19e3779f9ULL;
  return h ^ (h >> 32);
}

// kNone and kHashedBlocks. Every block is in exactly one state:
//   used:   ref > 0 (held by sequences; registered in index_ or not);
//   cached: ref == 0 and registered: findable, on the LRU list, evictable;
//   free:   ref == 0 and unregistered: on the free stack.
// Allocation takes a free block first and evicts the LRU cached block only when none is left.
class BlockPool {
 public:
  BlockPool(std::int64_t num_blocks, std::int64_t block_tokens, bool caching)
      : block_tokens_(block_tokens),
        caching_(caching),
        blocks_(static_cast<std::size_t>(num_blocks) + 1) {
    BAKEOFF_CHECK(num_blocks < std::numeric_limits<std::int32_t>::max())
        << "num_blocks " << num_blocks;
    const auto sentinel = static_cast<std::int32_t>(num_blocks);
    blocks_[sentinel].prev = blocks_[sentinel].next = sentinel;
    lru_ = sentinel;
    free_.reserve(static_cast<std::size_t>(num_blocks));
    for (std::int32_t b = sentinel - 1; b >= 0; --b) free_.push_back(b);  // block 0 pops first
  }

  std::int64_t used_blocks() const { return used_; }
  std::int64_t cached_blocks() const { return cached_; }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t evicted_blocks() const { return evicted_; }

  // Full blocks of `prompt` found cached, never the block holding the prompt's last token.
  std::int64_t MatchBlocks(std::span<const TokenId> prompt) const {
    return Match(prompt, [](std::int32_t, std::uint64_t) {});
  }

  // Pins the cached leading blocks of `prompt` into the empty `seq`; returns the tokens matched.
  std::int64_t Begin(KvSequence& seq, std::span<const TokenId> prompt) {
    seq.blocks.reserve(prompt.size() / static_cast<std::size_t>(block_tokens_) + 1);
    const std::int64_t matched = Match(prompt, [&](std::int32_t b, std::uint64_t hash) {
      Pin(b);
      seq.blocks.push_back(b);
      seq.last_hash = hash;
    });
    seq.registered_tokens = matched * block_tokens_;
    return seq.registered_tokens;
  }

  // Whether growing seq to total_tokens needs neither a new block nor a newly full one: most
  // decodes (the caller then only sets seq.tokens).
  bool GrowsInPlace(const KvSequence& seq, std::int64_t total_tokens) const {
    return total_tokens <= static_cast<std::int64_t>(seq.blocks.size()) * block_tokens_ &&
           (!caching_ || seq.registered_tokens + block_tokens_ > total_tokens);
  }

  // Gives seq the blocks it needs to hold total_tokens (free ones first, then LRU cached ones
  // evicted) and registers its newly full blocks. Refused, changing nothing, when free plus
  // cached blocks, less `reserve_blocks`, are too few.
  [[gnu::noinline]] bool Grow(KvSequence& seq, std::span<const TokenId> tokens,
                              std::int64_t total_tokens, std::int64_t reserve_blocks) {
    const auto held = static_cast<std::int64_t>(seq.blocks.size());
    const std::int64_t needed =
        std::max<std::int64_t>(0, (total_tokens + block_tokens_ - 1) / block_tokens_ - held);
    if (needed > free_blocks() + cached_ - reserve_blocks) return false;
    for (std::int64_t i = 0; i < needed; ++i) seq.blocks.push_back(Allocate());
    seq.tokens = total_tokens;
    if (caching_) Register(seq, tokens);
    return true;
  }

  // Unpins the blocks last to first, so that among one sequence's cached blocks the later ones
  // are evicted first (the earlier ones are the prefix other prompts are likelier to share), as
  // vLLM does.
  void Release(KvSequence& seq) {
    for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) {
      Block& block = blocks_[*it];
      if (--block.ref > 0) continue;
      --used_;
      if (block.registered) {
        LinkMostRecent(*it);
        ++cached_;
      } else {
        free_.push_back(*it);
      }
    }
  }

 private:
  struct Block {
    std::uint64_t hash = 0;
    std::int32_t ref = 0;
    std::int32_t prev = -1;  // LRU list links, while cached
    std::int32_t next = -1;
    bool registered = false;
  };

  std::span<const TokenId> BlockSpan(std::span<const TokenId> tokens, std::int64_t n) const {
    return tokens.subspan(static_cast<std::size_t>(n * block_tokens_),
                          static_cast<std::size_t>(block_tokens_));
  }

  void Pin(std::int32_t b) {
    if (blocks_[b].ref++ > 0) return;
    Unlink(b);
    --cached_;
    ++used_;
  }

  std::int32_t Allocate() {
    std::int32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = blocks_[lru_].next;  // least recently used cached block
      BAKEOFF_CHECK(b != lru_) << "no block to allocate";
      Unlink(b);
      index_.Erase(blocks_[b].hash);
      blocks_[b].registered = false;
      --cached_;
      ++evicted_;
      // The next victim's block is in cache now (Unlink touched it); start loading its index
      // slot and its successor, which the next eviction will need.
      const Block& next = blocks_[blocks_[lru_].next];
      index_.Prefetch(next.hash);
      __builtin_prefetch(&blocks_[next.next]);
    }
    blocks_[b].ref = 1;
    ++used_;
    return b;
  }

  // Makes the newly full blocks of seq findable, chaining each hash to the previous block's.
  // A block whose hash is already registered (another sequence computed the same prefix
  // without sharing it, e.g. a whole prompt's last block) stays a private duplicate: the first
  // block keeps the entry, and the duplicate becomes free, not cached, when released.
  void Register(KvSequence& seq, std::span<const TokenId> tokens) {
    const std::int64_t first = seq.registered_tokens / block_tokens_;
    const std::int64_t count = seq.tokens / block_tokens_ - first;
    HashBlocks(seq.last_hash, tokens, first, count);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::uint64_t hash = hashes_[static_cast<std::size_t>(i)];
      const std::int32_t b = seq.blocks[static_cast<std::size_t>(first + i)];
      if (index_.Insert(hash, b)) {
        blocks_[b].hash = hash;
        blocks_[b].registered = true;
      }
      seq.last_hash = hash;
    }
    seq.registered_tokens += count * block_tokens_;
  }

  // Calls found(block, hash) for each leading full block of `prompt` found cached, never the
  // block holding its last token; returns how many. Hashes go in batches, so that the index
  // lookups of a batch overlap their waits on memory.
  template <typename Found>
  std::int64_t Match(std::span<const TokenId> prompt, Found found) const {
    if (!caching_ || prompt.empty()) return 0;
    const std::int64_t most = (static_cast<std::int64_t>(prompt.size()) - 1) / block_tokens_;
    constexpr std::int64_t kBatch = 8;
    std::uint64_t previous = 0;
    for (std::int64_t n = 0; n < most; n += kBatch) {
      const std::int64_t count = std::min(kBatch, most - n);
      HashBlocks(previous, prompt, n, count);
      for (std::int64_t i = 0; i < count; ++i) {
        const std::uint64_t hash = hashes_[static_cast<std::size_t>(i)];
        const std::int32_t b = index_.Find(hash);
        if (b < 0) return n + i;
        found(b, hash);
      }
      previous = hashes_.back();
    }
    return most;
  }

  // Fills hashes_ with the chained hashes of blocks first .. first + count - 1 of `tokens`
  // (`previous`: the hash of the block before), prefetching their index slots as it goes.
  void HashBlocks(std::uint64_t previous, std::span<const TokenId> tokens, std::int64_t first,
                  std::int64_t count) const {
    hashes_.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      previous = HashBlock(previous, BlockSpan(tokens, first + i));
      hashes_[static_cast<std::size_t>(i)] = previous;
      index_.Prefetch(previous);
    }
  }

  void Unlink(std::int32_t b) {
    Block& block = blocks_[b];
    blocks_[block.prev].next = block.next;
    blocks_[block.next].prev = block.prev;
    block.prev = block.next = -1;
  }

  void LinkMostRecent(std::int32_t b) {
    Block& sentinel = blocks_[lru_];
    blocks_[b].prev = sentinel.prev;
    blocks_[b].next = lru_;
    blocks_[sentinel.prev].next = b;
    sentinel.prev = b;
  }

  const std::int64_t block_tokens_;
  const bool caching_;
  std::vector<Block> blocks_;  // the pool, then the LRU list's sentinel at index num_blocks
  std::int32_t lru_ = 0;       // the sentinel: next is least recently used, prev most recently
  std::vector<std::int32_t> free_;
  FlatIndex index_;  // chained block hash -> registered block
  // Scratch for HashBlocks (const lookups use it too: the pool has one owner, no threads).
  mutable std::vector<std::uint64_t> hashes_;
  std::int64_t used_ = 0;
  std::int64_t cached_ = 0;
  std::int64_t evicted_ = 0;
};

// kRadix. A radix tree over token ids with compressed edges; node 0 is the root (no tokens).
// Each node's edge is key[begin, key.size()). A node's ref counts the sequences pinning it or a
// node below it; every node with ref == 0 is cached (evictable), so used and cached slots are
// the edge lengths of the pinned and unpinned nodes. A sequence pins one node (its deepest) and
// through it the whole path from the root; all the tokens it holds are on that path (Grow
// inserts them at once, sharing what is already there), so private_slots stays 0 between calls.
class RadixTree {
 public:
  explicit RadixTree(std::int64_t capacity_tokens) : capacity_(capacity_tokens) {
    nodes_.emplace_back();
    nodes_[kRoot].live = true;
  }

  std::int64_t used_tokens() const { return used_; }
  std::int64_t cached_tokens() const { return cached_; }
  std::int64_t free_tokens() const { return capacity_ - used_ - cached_; }
  std::int64_t evicted_tokens() const { return evicted_; }

  std::int64_t Match(std::span<const TokenId> prompt) const {
    if (prompt.empty()) return 0;
    const Walk walk = Descend(kRoot, prompt.first(prompt.size() - 1));
    return walk.whole + walk.partial;
  }

  std::int64_t Begin(KvSequence& seq, std::span<const TokenId> prompt) {
    ++clock_;
    std::int32_t node = kRoot;
    std::int64_t matched = 0;
    if (!prompt.empty()) {
      const Walk walk = Descend(kRoot, prompt.first(prompt.size() - 1));
      node = walk.partial > 0 ? Split(walk.partial_child, walk.partial) : walk.node;
      matched = walk.whole + walk.partial;
    }
    PinPath(node, kRoot);  // touches the whole matched path for LRU
    seq.radix_node = node;
    seq.registered_tokens = matched;
    return matched;
  }

  // Appends in place in the decode case: one token, to a leaf only seq holds (nothing below it
  // to share), with a free slot. Otherwise GrowPath.
  [[gnu::noinline]] bool Grow(KvSequence& seq, std::span<const TokenId> tokens,
                              std::int64_t total_tokens, std::int64_t reserve_tokens) {
    if (total_tokens == seq.tokens + 1 && seq.radix_node > kRoot &&
        IsExclusiveLeaf(seq.radix_node) && free_tokens() >= 1 &&
        1 <= free_tokens() + cached_ - reserve_tokens) {
      nodes_[seq.radix_node].key.push_back(tokens[static_cast<std::size_t>(seq.tokens)]);
      ++used_;
      seq.tokens = total_tokens;
      seq.registered_tokens = total_tokens;
      return true;
    }
    return GrowPath(seq, tokens, total_tokens, reserve_tokens);
  }

  // The general case: shares what the tree already holds of the new tokens (or takes it from
  // the only child, or merges the node it leaves), then appends the rest. Refused, changing
  // nothing, when the slots free or evictable (after pinning the shared part) are too few.
  [[gnu::noinline]] bool GrowPath(KvSequence& seq, std::span<const TokenId> tokens,
                                  std::int64_t total_tokens, std::int64_t reserve_tokens) {
    BAKEOFF_CHECK(seq.private_slots == 0);
    const std::span<const TokenId> fresh_tokens = tokens.subspan(
        static_cast<std::size_t>(seq.tokens), static_cast<std::size_t>(total_tokens - seq.tokens));
    if (fresh_tokens.empty()) return true;
    // Where seq is pinned; the root when Grow comes without Begin (nothing matched).
    const std::int32_t old_pin = std::max(seq.radix_node, kRoot);
    std::int32_t node = old_pin;
    Walk walk{node};
    if (!IsExclusiveLeaf(node)) walk = Descend(node, fresh_tokens);  // a leaf has nothing below
    const std::int64_t shared = walk.whole + walk.partial;
    const auto fresh = static_cast<std::int64_t>(fresh_tokens.size()) - shared;
    // Pinning the shared part takes its cached slots out of the evictable ones.
    if (fresh > free_tokens() + cached_ - walk.evictable - reserve_tokens) return false;
    ++clock_;

    if (walk.node == node && walk.partial > 0 && CanShift(node, walk.partial_child)) {
      Shift(node, walk.partial_child, walk.partial);
    } else if (shared > 0) {
      node = walk.partial > 0 ? Split(walk.partial_child, walk.partial) : walk.node;
      PinPath(node, old_pin);
    }
    if (fresh > 0) {
      while (free_tokens() < fresh) EvictOne();  // never evicts `node`: it is pinned
      const std::span<const TokenId> rest = fresh_tokens.subspan(static_cast<std::size_t>(shared));
      if (IsExclusiveLeaf(node)) {
        std::vector<TokenId>& key = nodes_[node].key;
        key.insert(key.end(), rest.begin(), rest.end());
      } else {
        node = AddLeaf(node, rest);
      }
      used_ += fresh;
    }
    if (node != old_pin && old_pin != kRoot && nodes_[node].parent == old_pin &&
        nodes_[old_pin].children == 1 && nodes_[old_pin].ref == nodes_[node].ref) {
      MergeIntoChild(old_pin, node);
    }
    seq.radix_node = node;
    seq.tokens = total_tokens;
    seq.registered_tokens = total_tokens;
    return true;
  }

  // Unpins seq's path, touching it for LRU; nodes left unreferenced become cached, and the
  // deepest of them, a leaf, becomes evictable at once.
  void Release(KvSequence& seq) {
    ++clock_;
    used_ -= seq.private_slots;
    for (std::int32_t n = seq.radix_node; n > kRoot; n = nodes_[n].parent) {
      Node& node = nodes_[n];
      node.last_access = clock_;
      if (--node.ref > 0) continue;
      used_ -= node.size();
      cached_ += node.size();
      if (node.children == 0) PushEvictable(n);
    }
  }

 private:
  static constexpr std::int32_t kRoot = 0;

  struct Node {
    std::vector<TokenId> key;  // edge tokens from `begin` (a split leaves a dead head behind)
    std::int32_t begin = 0;
    std::int32_t parent = -1;
    std::int32_t ref = 0;
    std::int32_t children = 0;
    std::uint64_t last_access = 0;
    bool live = false;
    std::int64_t size() const { return static_cast<std::int64_t>(key.size()) - begin; }
    std::span<const TokenId> edge() const { return std::span<const TokenId>(key).subspan(begin); }
  };

  // Where following some tokens down from a node ends: `node` is the deepest node whose whole
  // edge matched (`whole` tokens below the start); `partial` more tokens matched a proper prefix
  // of `partial_child`'s edge. `evictable`: of the matched tokens, those in unpinned nodes.
  struct Walk {
    std::int32_t node = kRoot;
    std::int64_t whole = 0;
    std::int32_t partial_child = -1;
    std::int64_t partial = 0;
    std::int64_t evictable = 0;
  };

  struct HeapEntry {
    std::uint64_t last_access;
    std::int32_t node;
    // Orders the std heap functions into a min-heap: least recently used on top.
    bool operator<(const HeapEntry& other) const {
      return last_access != other.last_access ? last_access > other.last_access : node > other.node;
    }
  };

  static std::uint64_t ChildKey(std::int32_t parent, TokenId first) {
    return (static_cast<std::uint64_t>(parent) << 32) | first;
  }

  bool IsExclusiveLeaf(std::int32_t n) const {
    return n != kRoot && nodes_[n].ref == 1 && nodes_[n].children == 0;
  }

  Walk Descend(std::int32_t from, std::span<const TokenId> tokens) const {
    Walk walk{from};
    std::size_t i = 0;
    while (i < tokens.size()) {
      const std::int32_t child = children_.Find(ChildKey(walk.node, tokens[i]));
      if (child < 0) break;
      const Node& node = nodes_[child];
      const std::span<const TokenId> edge = node.edge();
      const std::size_t limit = std::min(edge.size(), tokens.size() - i);
      const auto end = tokens.begin() + static_cast<std::ptrdiff_t>(i + limit);
      const auto k = static_cast<std::int64_t>(
          std::mismatch(tokens.begin() + static_cast<std::ptrdiff_t>(i), end, edge.begin()).first -
          (tokens.begin() + static_cast<std::ptrdiff_t>(i)));
      if (node.ref == 0) walk.evictable += k;
      if (k < static_cast<std::int64_t>(edge.size())) {
        walk.partial_child = child;
        walk.partial = k;
        break;
      }
      walk.node = child;
      walk.whole += k;
      i += static_cast<std::size_t>(k);
    }
    return walk;
  }

  // Pins and touches the nodes from n up to, not including, `stop` (an ancestor of n).
  void PinPath(std::int32_t n, std::int32_t stop) {
    for (; n != stop; n = nodes_[n].parent) {
      Node& node = nodes_[n];
      node.last_access = clock_;
      if (node.ref++ > 0) continue;
      cached_ -= node.size();
      used_ += node.size();
    }
  }

  // Whether the sequence growing at node p may take the head of p's child c into p's edge
  // instead of splitting c: c is p's only child, and no other sequence is pinned at p itself
  // (all other pinners of p are below c, so they hold all of c anyway). This keeps a sequence
  // that follows another along the same tokens (identical prompts, identical outputs) on one
  // node that it extends, instead of splitting off a one-token node at every decode.
  bool CanShift(std::int32_t p, std::int32_t c) const {
    return p != kRoot && nodes_[p].children == 1 && nodes_[p].ref - nodes_[c].ref == 1;
  }

  // Moves the first k edge tokens of p's child c to the end of p's edge (0 < k < c's size).
  void Shift(std::int32_t p, std::int32_t c, std::int64_t k) {
    Node& parent = nodes_[p];
    Node& child = nodes_[c];
    const auto head = child.key.begin() + child.begin;
    parent.key.insert(parent.key.end(), head, head + k);
    parent.last_access = clock_;
    if (child.ref == 0) {  // they were cached; now p's pinners hold them
      cached_ -= k;
      used_ += k;
    }
    children_.Erase(ChildKey(p, child.key[static_cast<std::size_t>(child.begin)]));
    child.begin += static_cast<std::int32_t>(k);
    children_.Put(ChildKey(p, child.key[static_cast<std::size_t>(child.begin)]), c);
    CompactHead(child);
  }

  // Joins p into its only child c, which keeps its index (sequences pinning it or below stay
  // where they are). REQUIRES: no sequence is pinned at p itself (p.ref == c.ref). When several
  // sequences advance in lockstep over the same tokens, the last one to leave a node merges it
  // into the next, so the path stays one node instead of a chain of one-token nodes. c takes
  // p's buffer and appends its own edge: O(c's edge), not O(p's).
  void MergeIntoChild(std::int32_t p, std::int32_t c) {
    Node& parent = nodes_[p];
    Node& child = nodes_[c];
    const TokenId parent_first = parent.key[static_cast<std::size_t>(parent.begin)];
    children_.Erase(ChildKey(p, child.key[static_cast<std::size_t>(child.begin)]));
    parent.key.insert(parent.key.end(), child.key.begin() + child.begin, child.key.end());
    child.key.swap(parent.key);  // p's old buffer goes back to the pool with p
    child.begin = parent.begin;
    child.parent = parent.parent;
    children_.Put(ChildKey(child.parent, parent_first), c);
    FreeNode(p);
  }

  // Drops a node's dead head once it outweighs the edge (amortized by the copies that made it).
  static void CompactHead(Node& node) {
    if (node.begin >= 64 && node.begin >= node.size()) {
      node.key.erase(node.key.begin(), node.key.begin() + node.begin);
      node.begin = 0;
    }
  }

  // Splits node c after its first k edge tokens (0 < k < edge size) into a new parent holding
  // them; c keeps its index (sequences pinning it stay pinned at the deepest node) and the rest.
  std::int32_t Split(std::int32_t c, std::int64_t k) {
    const std::int32_t upper = NewNode();
    Node& lower = nodes_[c];
    Node& node = nodes_[upper];
    const auto head = lower.key.begin() + lower.begin;
    node.key.assign(head, head + k);
    node.parent = lower.parent;
    node.ref = lower.ref;
    node.children = 1;
    node.last_access = lower.last_access;
    children_.Put(ChildKey(lower.parent, node.key[0]), upper);
    lower.begin += static_cast<std::int32_t>(k);
    lower.parent = upper;
    children_.Put(ChildKey(upper, lower.key[static_cast<std::size_t>(lower.begin)]), c);
    CompactHead(lower);
    return upper;
  }

  // A new leaf under `parent` holding `tokens`, pinned once (by the growing sequence).
  std::int32_t AddLeaf(std::int32_t parent, std::span<const TokenId> tokens) {
    const std::int32_t leaf = NewNode();
    Node& node = nodes_[leaf];
    node.key.assign(tokens.begin(), tokens.end());
    node.parent = parent;
    node.ref = 1;
    node.last_access = clock_;
    children_.Put(ChildKey(parent, tokens[0]), leaf);
    ++nodes_[parent].children;
    return leaf;
  }

  std::int32_t NewNode() {
    std::int32_t n;
    if (!free_nodes_.empty()) {
      n = free_nodes_.back();
      free_nodes_.pop_back();
    } else {
      BAKEOFF_CHECK(nodes_.size() <
                    static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()));
      n = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    Node& node = nodes_[n];
    node.begin = 0;
    node.children = 0;
    node.live = true;
    return n;
  }

  void FreeNode(std::int32_t n) {
    Node& node = nodes_[n];
    node.live = false;
    node.parent = -1;
    node.ref = 0;
    node.children = 0;
    // Pooled nodes keep short buffers for reuse but not long ones: a pool of many short nodes
    // must not come to hold many long buffers.
    if (node.key.capacity() > 256) {
      std::vector<TokenId>().swap(node.key);
    } else {
      node.key.clear();
    }
    free_nodes_.push_back(n);
  }

  void PushEvictable(std::int32_t n) {
    // Entries are not removed when a node is pinned again or freed; they are checked when
    // popped and dropped when stale. Compacting at twice the pool keeps the heap bounded.
    if (heap_.size() > 2 * nodes_.size() + 64) {
      std::erase_if(heap_, [this](const HeapEntry& e) { return !IsEvictable(e); });
      std::make_heap(heap_.begin(), heap_.end());
    }
    heap_.push_back(HeapEntry{nodes_[n].last_access, n});
    std::push_heap(heap_.begin(), heap_.end());
  }

  bool IsEvictable(const HeapEntry& e) const {
    const Node& node = nodes_[e.node];
    return node.live && node.ref == 0 && node.children == 0 && node.last_access == e.last_access;
  }

  // Evicts the least recently used unreferenced leaf; its parent may become one.
  void EvictOne() {
    while (true) {
      BAKEOFF_CHECK(!heap_.empty()) << "no evictable node";
      std::pop_heap(heap_.begin(), heap_.end());
      const HeapEntry top = heap_.back();
      heap_.pop_back();
      if (IsEvictable(top)) {
        Evict(top.node);
        return;
      }
    }
  }

  void Evict(std::int32_t n) {
    Node& node = nodes_[n];
    const std::int32_t parent = node.parent;
    cached_ -= node.size();
    evicted_ += node.size();
    children_.Erase(ChildKey(parent, node.key[static_cast<std::size_t>(node.begin)]));
    FreeNode(n);
    Node& up = nodes_[parent];
    --up.children;
    if (parent != kRoot && up.ref == 0 && up.children == 0) PushEvictable(parent);
  }

  const std::int64_t capacity_;
  std::vector<Node> nodes_;  // the pool; dead nodes are listed in free_nodes_
  std::vector<std::int32_t> free_nodes_;
  FlatIndex children_;           // (parent, first edge token) -> child
  std::vector<HeapEntry> heap_;  // candidate evictable leaves, by last access
  std::uint64_t clock_ = 0;      // logical time: one tick per Begin, Grow and Release
  std::int64_t used_ = 0;
  std::int64_t cached_ = 0;
  std::int64_t evicted_ = 0;
};

// Out of line so that the argument checks cost the decode fast path no stack frame.
[[gnu::noinline, noreturn]] void FailGrow(const KvSequence& seq, std::size_t token_ids,
                                          std::int64_t total_tokens) {
  BAKEOFF_CHECK(false) << "Grow to " << total_tokens << " tokens from " << seq.tokens << " with "
                       << token_ids << " token ids";
  std::abort();
}

}  // namespace

struct KvCache::State {
  State(const KvCacheConfig& config)
      : radix(config.prefix_caching == PrefixCaching::kRadix),
        capacity_tokens(config.num_blocks * config.block_tokens),
        reserve_blocks(static_cast<std::int64_t>(
            std::ceil(config.watermark * static_cast<double>(config.num_blocks)))),
        reserve_tokens(reserve_blocks * config.block_tokens),
        blocks(radix ? 0 : config.num_blocks, config.block_tokens,
               config.prefix_caching == PrefixCaching::kHashedBlocks),
        tree(capacity_tokens) {}

  const bool radix;
  const std::int64_t capacity_tokens;
  const std::int64_t reserve_blocks;  // ceil(watermark * num_blocks): kept by admissions
  const std::int64_t reserve_tokens;  // the same in tokens
  BlockPool blocks;                   // kNone, kHashedBlocks
  RadixTree tree;                     // kRadix
  std::uint64_t prefix_queries_tokens = 0;
  std::uint64_t prefix_hit_tokens = 0;
};

KvCache::KvCache(const KvCacheConfig& config) : config_(config) {
  BAKEOFF_CHECK(config.block_tokens >= 1) << "block_tokens " << config.block_tokens;
  BAKEOFF_CHECK(config.num_blocks >= 1) << "num_blocks " << config.num_blocks;
  BAKEOFF_CHECK(config.watermark >= 0.0 && config.watermark < 1.0)
      << "watermark " << config.watermark;
  state_ = std::make_unique<State>(config);
}

KvCache::~KvCache() = default;

std::int64_t KvCache::MatchLength(std::span<const TokenId> prompt) const {
  if (state_->radix) return state_->tree.Match(prompt);
  return state_->blocks.MatchBlocks(prompt) * config_.block_tokens;
}

void KvCache::Begin(KvSequence& seq, std::span<const TokenId> prompt) {
  BAKEOFF_CHECK(seq.tokens == 0 && seq.blocks.empty() && seq.radix_node < 0)
      << "Begin on a sequence that holds KV";
  const std::int64_t matched =
      state_->radix ? state_->tree.Begin(seq, prompt) : state_->blocks.Begin(seq, prompt);
  seq.tokens = matched;
  seq.cached_tokens = matched;
  state_->prefix_queries_tokens += prompt.size();
  state_->prefix_hit_tokens += static_cast<std::uint64_t>(matched);
}

bool KvCache::Grow(KvSequence& seq, std::span<const TokenId> tokens, std::int64_t total_tokens,
                   bool keep_watermark) {
  if (total_tokens < seq.tokens || static_cast<std::int64_t>(tokens.size()) < total_tokens)
      [[unlikely]] {
    FailGrow(seq, tokens.size(), total_tokens);
  }
  State& state = *state_;
  if (state.radix) {
    return state.tree.Grow(seq, tokens, total_tokens, keep_watermark ? state.reserve_tokens : 0);
  }
  if (state.blocks.GrowsInPlace(seq, total_tokens)) {
    seq.tokens = total_tokens;
    return true;
  }
  return state.blocks.Grow(seq, tokens, total_tokens, keep_watermark ? state.reserve_blocks : 0);
}

void KvCache::Release(KvSequence& seq) {
  if (state_->radix) {
    if (seq.radix_node >= 0) state_->tree.Release(seq);
  } else {
    state_->blocks.Release(seq);
  }
  seq.tokens = 0;
  seq.cached_tokens = 0;
  seq.blocks.clear();  // keeps the capacity for the sequence's readmission
  seq.registered_tokens = 0;
  seq.last_hash = 0;
  seq.radix_node = -1;
  seq.private_slots = 0;
}

std::int64_t KvCache::AvailableTokens() const {
  const KvCacheStats s = stats();
  return s.capacity_tokens - s.used_tokens;
}

KvCacheStats KvCache::stats() const {
  KvCacheStats s;
  s.capacity_tokens = state_->capacity_tokens;
  if (state_->radix) {
    s.used_tokens = state_->tree.used_tokens();
    s.cached_tokens = state_->tree.cached_tokens();
    s.evicted_tokens = static_cast<std::uint64_t>(state_->tree.evicted_tokens());
  } else {
    const std::int64_t bt = config_.block_tokens;
    s.used_tokens = state_->blocks.used_blocks() * bt;
    s.cached_tokens = state_->blocks.cached_blocks() * bt;
    s.evicted_tokens = static_cast<std::uint64_t>(state_->blocks.evicted_blocks() * bt);
  }
  s.prefix_queries_tokens = state_->prefix_queries_tokens;
  s.prefix_hit_tokens = state_->prefix_hit_tokens;
  return s;
}

}  // namespace bakeoff::emulate
