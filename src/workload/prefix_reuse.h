// workload/prefix_reuse.h
//
// Owns: the share of prompt tokens an ideal prefix cache would serve (docs/workloads.md, "Prefix
// reuse"). The cache is infinite and never evicts; request by request, in the order given, it
// serves the longest chain of the request's leading blocks that some earlier request already had:
// block i counts only when blocks 0..i all matched, as a chain, an earlier request's blocks 0..i.
// Served tokens = min(matched blocks * block_tokens, input_tokens), so a matched partial last
// block counts only its own tokens.
// Does not own: where block ids come from (importers.h).
//
// How: every chain of leading blocks h0..hi is one 64-bit chain hash c_i = Chain(c_{i-1}, h_i),
// and the cache is the set of chain hashes seen. All of a request's chain hashes are computed
// before the first lookup, so the table slots of its blocks are fetched from memory in parallel
// rather than one dependent miss after another. Two different chains with the same 64-bit hash
// would be counted as one: with N distinct chains the chance that any pair collides is below
// N^2 / 2^65 (3e-7 for 4 million chains, 6e-4 for 150 million), and a collision changes the
// served tokens of one request by at most its length.
//
// Thread-safety: none; one counter per thread.
// Memory: one 8-byte slot per distinct chain at a load factor of at most 0.7 (a power-of-two table,
// so 11.4 to 22.9 bytes per distinct chain), and while the table doubles, the old one as well.
// Tables of 2 MiB and more are mapped with transparent huge pages requested (madvise), since
// nearly every lookup in a large table would otherwise also miss the TLB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bakeoff::workload {

class PrefixReuseCounter {
 public:
  // REQUIRES: block_tokens > 0.
  explicit PrefixReuseCounter(std::uint32_t block_tokens);

  // Returns the tokens an ideal cache serves for a request with these block ids and prompt
  // length, then remembers its chain for later requests. Processes the queue (Push) first.
  std::uint64_t Add(std::span<const std::uint64_t> block_ids, std::uint32_t input_tokens);

  // The same as Add, for a caller that needs only the total: the request joins a queue and is
  // counted a few requests later, which lets the table slots of the requests behind it be fetched
  // from memory meanwhile. Requests are counted in the order given, as by Add.
  void Push(std::span<const std::uint64_t> block_ids, std::uint32_t input_tokens);
  // Counts every queued request.
  void Flush();
  // Tokens served to every request counted so far, by Add and Push (after Flush: all of them).
  std::uint64_t served_tokens() const { return served_tokens_; }

  // Distinct chains counted so far (after Flush: all of them).
  std::uint64_t distinct_blocks() const { return size_; }
  std::uint32_t block_tokens() const { return block_tokens_; }

 private:
  // A zero-filled array of slots in its own anonymous mapping.
  class Slots {
   public:
    explicit Slots(std::size_t count);
    Slots(Slots&& other) noexcept;
    Slots& operator=(Slots&& other) noexcept;
    ~Slots();
    std::size_t size() const { return count_; }
    std::uint64_t& operator[](std::size_t i) { return data_[i]; }
    const std::uint64_t& operator[](std::size_t i) const { return data_[i]; }

   private:
    std::uint64_t* data_ = nullptr;
    std::size_t count_ = 0;
    std::size_t mapped_bytes_ = 0;
  };

  struct Queued {
    std::size_t first_key;  // in queued_keys_
    std::size_t keys;
    std::uint32_t input_tokens;
  };

  // Appends the chain hashes of `block_ids` to `keys`.
  static void ChainKeys(std::span<const std::uint64_t> block_ids, std::vector<std::uint64_t>& keys);
  void Prefetch(std::uint64_t key) const { __builtin_prefetch(&slots_[key >> shift_]); }
  // Counts one request given its chain hashes.
  std::uint64_t Count(const std::uint64_t* keys, std::size_t n, std::uint32_t input_tokens);
  void CountFront();
  bool Contains(std::uint64_t key) const;
  void InsertNew(std::uint64_t key);  // REQUIRES: key is not in the table and there is room
  void Grow();

  std::uint32_t block_tokens_;
  Slots slots_;     // chain hashes; 0: empty
  unsigned shift_;  // 64 - log2(slots_.size()): the home slot is key >> shift_
  std::uint64_t size_ = 0;
  std::uint64_t served_tokens_ = 0;
  std::vector<std::uint64_t> keys_;         // Add's request's chain hashes (reused)
  std::vector<std::uint64_t> queued_keys_;  // chain hashes of the queued requests
  std::vector<Queued> queued_;              // requests pushed; those before queue_head_ are counted
  std::size_t queue_head_ = 0;
  std::size_t queued_ahead_ = 0;  // keys of the requests not yet counted
};

}  // namespace bakeoff::workload
