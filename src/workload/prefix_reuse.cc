// workload/prefix_reuse.cc
//
// Owns: the chain table behind PrefixReuseCounter. Each distinct chain of leading blocks is a node
// of a trie; an open-addressing table maps (parent node, block id) to the child node, which keeps
// the memory per block to one 16-byte slot instead of a tree of allocated nodes.
#include "workload/prefix_reuse.h"

#include <algorithm>

#include "core/check.h"

namespace bakeoff::workload {

namespace {

std::uint64_t Mix(std::uint32_t parent, std::uint64_t id) {
  // A SplitMix64 finaliser over both halves: block ids are often small consecutive integers.
  std::uint64_t x = id * 0x9e3779b97f4a7c15ULL ^ (static_cast<std::uint64_t>(parent) << 1 | 1) * 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

PrefixReuseCounter::PrefixReuseCounter(std::uint32_t block_tokens)
    : block_tokens_(block_tokens), slots_(1024) {
  BAKEOFF_CHECK(block_tokens > 0);
}

std::uint32_t PrefixReuseCounter::Find(std::uint32_t parent, std::uint64_t id) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = Mix(parent, id) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.node == 0) return 0;
    if (s.id == id && s.parent == parent) return s.node;
  }
}

std::uint32_t PrefixReuseCounter::Insert(std::uint32_t parent, std::uint64_t id) {
  if ((size_ + 1) * 10 > slots_.size() * 7) Grow();
  BAKEOFF_CHECK(size_ < UINT32_MAX - 1) << "more than 4 billion distinct prefix blocks";
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = Mix(parent, id) & mask;
  while (slots_[i].node != 0) i = (i + 1) & mask;
  slots_[i] = Slot{id, parent, static_cast<std::uint32_t>(++size_)};
  return slots_[i].node;
}

void PrefixReuseCounter::Grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.node == 0) continue;
    std::size_t i = Mix(s.parent, s.id) & mask;
    while (slots_[i].node != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

std::uint64_t PrefixReuseCounter::Add(std::span<const std::uint64_t> block_ids, std::uint32_t input_tokens) {
  std::uint32_t node = 0;  // the root: the empty prefix
  std::size_t matched = 0;
  while (matched < block_ids.size()) {
    const std::uint32_t child = Find(node, block_ids[matched]);
    if (child == 0) break;
    node = child;
    ++matched;
  }
  // Within one request every (parent, id) pair below the match is new: each step goes one level
  // deeper, so the request cannot meet its own blocks.
  for (std::size_t i = matched; i < block_ids.size(); ++i) node = Insert(node, block_ids[i]);
  return std::min<std::uint64_t>(static_cast<std::uint64_t>(matched) * block_tokens_, input_tokens);
}

}  // namespace bakeoff::workload
