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
// Thread-safety: none; one counter per thread.
// Memory: 16 bytes per distinct chain node at a load factor of at most 0.7.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bakeoff::workload {

class PrefixReuseCounter {
 public:
  // REQUIRES: block_tokens > 0.
  explicit PrefixReuseCounter(std::uint32_t block_tokens);

  // Returns the tokens an ideal cache serves for a request with these block ids and prompt
  // length, then remembers its chain for later requests.
  std::uint64_t Add(std::span<const std::uint64_t> block_ids, std::uint32_t input_tokens);

  std::uint64_t distinct_blocks() const { return size_; }
  std::uint32_t block_tokens() const { return block_tokens_; }

 private:
  struct Slot {
    std::uint64_t id = 0;
    std::uint32_t parent = 0;
    std::uint32_t node = 0;  // 0: empty
  };
  std::uint32_t Find(std::uint32_t parent, std::uint64_t id) const;
  std::uint32_t Insert(std::uint32_t parent, std::uint64_t id);
  void Grow();

  std::uint32_t block_tokens_;
  std::vector<Slot> slots_;
  std::uint64_t size_ = 0;
};

}  // namespace bakeoff::workload
