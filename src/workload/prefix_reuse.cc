// workload/prefix_reuse.cc
//
// Owns: the chain set behind PrefixReuseCounter: an open-addressing table (linear probing) of
// 64-bit chain hashes, 8 bytes a slot. A request's chain hashes depend only on its ids, so they
// are computed first and the slot of each is prefetched before any is probed: the cache misses of
// one request overlap instead of waiting on each other, as they would if each lookup needed
// what the previous one returned (a tree walked node by node). Push goes further: a request is
// counted only once the slots of the next requests' blocks are on their way too
// (kQueueAheadKeys).
#include "workload/prefix_reuse.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <sys/mman.h>

#include "core/check.h"

namespace bakeoff::workload {

namespace {

constexpr unsigned kInitialLog2Slots = 10;
constexpr std::size_t kPrefetchAhead = 16;  // slots requested from memory ahead of the probe
// Push counts a request once this many keys of later requests are queued (and prefetched) behind
// it.
constexpr std::size_t kQueueAheadKeys = 64;
constexpr std::size_t kCompactAfter = 1024;  // counted requests kept before the queue is compacted
constexpr std::uint64_t kRootChain = 0x243f6a8885a308d3ULL;  // the empty prefix

// The chain hash of a chain `parent` extended by block `id`. For one parent the map from id is a
// bijection (odd multiplier, then the invertible SplitMix64 finaliser), so two children of the
// same chain never collide; across chains, collisions are those of a random 64-bit function.
std::uint64_t Chain(std::uint64_t parent, std::uint64_t id) {
  std::uint64_t x = parent + id * 0x9e3779b97f4a7c15ULL;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x != 0 ? x : 1;  // 0 marks an empty slot
}

constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

}  // namespace

PrefixReuseCounter::Slots::Slots(std::size_t count) : count_(count) {
  const std::size_t bytes = count * sizeof(std::uint64_t);
  const bool huge = bytes >= kHugePageBytes;
  // A huge-page table is mapped with one huge page to spare and trimmed to a 2 MiB boundary, so
  // that the kernel can back all of it with huge pages.
  mapped_bytes_ = huge ? bytes + kHugePageBytes : bytes;
  void* p =
      mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  BAKEOFF_CHECK(p != MAP_FAILED) << "cannot map " << mapped_bytes_
                                 << " bytes for the prefix table: " << std::strerror(errno);
  auto* base = static_cast<char*>(p);
  if (huge) {
    const auto address = reinterpret_cast<std::uintptr_t>(base);
    const std::size_t head = (kHugePageBytes - address % kHugePageBytes) % kHugePageBytes;
    if (head > 0) munmap(base, head);
    const std::size_t tail = kHugePageBytes - head;
    if (tail > 0) munmap(base + head + bytes, tail);
    base += head;
    mapped_bytes_ = bytes;
    madvise(base, bytes, MADV_HUGEPAGE);  // advice only: without huge pages the table still works
  }
  data_ = reinterpret_cast<std::uint64_t*>(base);  // anonymous mappings are zero-filled
}

PrefixReuseCounter::Slots::Slots(Slots&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

PrefixReuseCounter::Slots& PrefixReuseCounter::Slots::operator=(Slots&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

PrefixReuseCounter::Slots::~Slots() {
  if (data_ != nullptr) munmap(data_, mapped_bytes_);
}

PrefixReuseCounter::PrefixReuseCounter(std::uint32_t block_tokens)
    : block_tokens_(block_tokens),
      slots_(std::size_t{1} << kInitialLog2Slots),
      shift_(64 - kInitialLog2Slots) {
  BAKEOFF_CHECK(block_tokens > 0);
}

bool PrefixReuseCounter::Contains(std::uint64_t key) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = key >> shift_;; i = (i + 1) & mask) {
    const std::uint64_t s = slots_[i];
    if (s == key) return true;
    if (s == 0) return false;
  }
}

void PrefixReuseCounter::InsertNew(std::uint64_t key) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = key >> shift_;
  while (slots_[i] != 0) i = (i + 1) & mask;
  slots_[i] = key;
  ++size_;
}

void PrefixReuseCounter::Grow() {
  Slots old = std::exchange(slots_, Slots(slots_.size() * 2));
  --shift_;
  size_ = 0;
  for (std::size_t i = 0; i < old.size(); ++i) {
    if (old[i] != 0) InsertNew(old[i]);
  }
}

void PrefixReuseCounter::ChainKeys(std::span<const std::uint64_t> block_ids,
                                   std::vector<std::uint64_t>& keys) {
  std::uint64_t chain = kRootChain;
  for (const std::uint64_t id : block_ids) keys.push_back(chain = Chain(chain, id));
}

std::uint64_t PrefixReuseCounter::Count(const std::uint64_t* keys, std::size_t n,
                                        std::uint32_t input_tokens) {
  // Room for every block first, so that the table does not move while the request is counted.
  while ((size_ + n) * 10 > slots_.size() * 7) Grow();
  std::size_t matched = 0;
  while (matched < n) {
    if (matched + kPrefetchAhead < n) Prefetch(keys[matched + kPrefetchAhead]);
    if (!Contains(keys[matched])) break;
    ++matched;
  }
  // The chains below the first miss are new too: each extends a chain that was not in the set.
  for (std::size_t i = matched; i < n; ++i) {
    if (i + kPrefetchAhead < n) Prefetch(keys[i + kPrefetchAhead]);
    InsertNew(keys[i]);
  }
  const std::uint64_t served =
      std::min<std::uint64_t>(static_cast<std::uint64_t>(matched) * block_tokens_, input_tokens);
  served_tokens_ += served;
  return served;
}

std::uint64_t PrefixReuseCounter::Add(std::span<const std::uint64_t> block_ids,
                                      std::uint32_t input_tokens) {
  Flush();
  keys_.clear();
  ChainKeys(block_ids, keys_);
  for (std::size_t i = 0; i < keys_.size() && i < kPrefetchAhead; ++i) Prefetch(keys_[i]);
  return Count(keys_.data(), keys_.size(), input_tokens);
}

void PrefixReuseCounter::CountFront() {
  const Queued q = queued_[queue_head_++];
  queued_ahead_ -= q.keys;
  Count(queued_keys_.data() + q.first_key, q.keys, q.input_tokens);
  if (queue_head_ == queued_.size()) {
    queued_.clear();
    queued_keys_.clear();
    queue_head_ = 0;
  } else if (queue_head_ >= kCompactAfter && queue_head_ * 2 >= queued_.size()) {
    // Drop the counted requests, keeping the queue's memory bounded.
    const std::size_t key_shift = queued_[queue_head_].first_key;
    queued_keys_.erase(queued_keys_.begin(),
                       queued_keys_.begin() + static_cast<std::ptrdiff_t>(key_shift));
    queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
    for (Queued& r : queued_) r.first_key -= key_shift;
    queue_head_ = 0;
  }
}

void PrefixReuseCounter::Push(std::span<const std::uint64_t> block_ids,
                              std::uint32_t input_tokens) {
  const std::size_t first = queued_keys_.size();
  ChainKeys(block_ids, queued_keys_);
  for (std::size_t i = first; i < queued_keys_.size(); ++i) Prefetch(queued_keys_[i]);
  queued_.push_back(Queued{first, block_ids.size(), input_tokens});
  queued_ahead_ += block_ids.size();
  // Count the oldest requests while enough keys stand behind them to hide their memory latency.
  while (queue_head_ < queued_.size() &&
         queued_ahead_ - queued_[queue_head_].keys >= kQueueAheadKeys)
    CountFront();
}

void PrefixReuseCounter::Flush() {
  while (queue_head_ < queued_.size()) CountFront();
}

}  // namespace bakeoff::workload
