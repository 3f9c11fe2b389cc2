// stats/sketch.cc: QuantileSketch (contract in sketch.h).
#include "stats/sketch.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/check.h"

namespace bakeoff::stats {
namespace {

constexpr int kDropBits = 52 - QuantileSketch::kSubBucketBits;  // mantissa bits below a bucket
constexpr std::uint32_t kBucketsPerOctave = 1u << QuantileSketch::kSubBucketBits;

// A positive finite double's bucket: its exponent and top mantissa bits. IEEE-754 patterns of
// non-negative doubles order like their values, so buckets do too.
std::uint32_t BucketOf(double magnitude) {
  return static_cast<std::uint32_t>(std::bit_cast<std::uint64_t>(magnitude) >> kDropBits);
}

// The midpoint of a bucket: its lower edge with the next mantissa bit set. Within one exponent a
// double's value is linear in its mantissa, so this is the exact middle, and it cannot overflow
// (the top bucket's midpoint is below the largest double).
double Midpoint(std::uint32_t bucket) {
  return std::bit_cast<double>((std::uint64_t{bucket} << kDropBits) | (std::uint64_t{1} << (kDropBits - 1)));
}

}  // namespace

void QuantileSketch::Buckets::Add(std::uint32_t index, std::uint64_t n) {
  // Storage grows by whole powers of two, to exactly the span seen (no spare capacity: growth is
  // rare, at most once per power of two, and the memory stays what the values need).
  const std::uint32_t octave_start = index & ~(kBucketsPerOctave - 1);
  if (counts.empty()) {
    first = octave_start;
    counts.assign(kBucketsPerOctave, 0);
  } else if (index < first) {
    std::vector<std::uint64_t> grown(first - octave_start + counts.size(), 0);
    std::copy(counts.begin(), counts.end(), grown.begin() + (first - octave_start));
    counts.swap(grown);
    first = octave_start;
  } else if (index - first >= counts.size()) {
    const std::size_t size = octave_start + kBucketsPerOctave - first;
    counts.reserve(size);
    counts.resize(size, 0);
  }
  counts[index - first] += n;
}

void QuantileSketch::Add(double value, std::uint64_t count) {
  BAKEOFF_CHECK(std::isfinite(value)) << "QuantileSketch::Add(" << value << ")";
  if (count == 0) return;
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  // Chan et al.'s pairwise update with a group of `count` equal values (variance 0); for
  // count == 1 it is Welford's update.
  const double n = static_cast<double>(count);
  const double total = static_cast<double>(count_ + count);
  const double delta = value - mean_;
  mean_ += delta * n / total;
  m2_ += delta * delta * static_cast<double>(count_) * n / total;
  count_ += count;

  if (!folded_ && samples_.size() + count <= exact_cap_) {
    samples_.insert(samples_.end(), count, value);
    return;
  }
  if (!folded_) Fold();
  AddToHistogram(value, count);
}

void QuantileSketch::Merge(const QuantileSketch& other) {
  BAKEOFF_CHECK(&other != this) << "a sketch cannot merge itself";
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  const double na = static_cast<double>(count_);
  const double nb = static_cast<double>(other.count_);
  const double delta = other.mean_ - mean_;
  mean_ += delta * nb / (na + nb);
  m2_ += other.m2_ + delta * delta * na * nb / (na + nb);
  count_ += other.count_;

  if (!folded_ && !other.folded_ && samples_.size() + other.samples_.size() <= exact_cap_) {
    samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
    return;
  }
  if (!folded_) Fold();
  if (!other.folded_) {
    for (double v : other.samples_) AddToHistogram(v, 1);
    return;
  }
  zeros_ += other.zeros_;
  for (const auto* side : {&other.positive_, &other.negative_}) {
    Buckets& mine = side == &other.positive_ ? positive_ : negative_;
    for (std::size_t i = 0; i < side->counts.size(); ++i) {
      if (side->counts[i] > 0) mine.Add(side->first + static_cast<std::uint32_t>(i), side->counts[i]);
    }
  }
}

void QuantileSketch::Fold() {
  folded_ = true;
  for (double v : samples_) AddToHistogram(v, 1);
  std::vector<double>().swap(samples_);  // release the storage, not just the size
}

void QuantileSketch::AddToHistogram(double value, std::uint64_t n) {
  if (value == 0) {
    zeros_ += n;
  } else if (value > 0) {
    positive_.Add(BucketOf(value), n);
  } else {
    negative_.Add(BucketOf(-value), n);
  }
}

double QuantileSketch::ValueAtRank(std::uint64_t rank) const {
  // Ascending order: negatives from the largest magnitude down, then zeros, then positives.
  std::uint64_t seen = 0;
  double value = max_;
  bool found = false;
  for (std::size_t i = negative_.counts.size(); i-- > 0 && !found;) {
    seen += negative_.counts[i];
    if (seen >= rank) {
      value = -Midpoint(negative_.first + static_cast<std::uint32_t>(i));
      found = true;
    }
  }
  if (!found) {
    seen += zeros_;
    if (seen >= rank) {
      value = 0;
      found = true;
    }
  }
  for (std::size_t i = 0; i < positive_.counts.size() && !found; ++i) {
    seen += positive_.counts[i];
    if (seen >= rank) {
      value = Midpoint(positive_.first + static_cast<std::uint32_t>(i));
      found = true;
    }
  }
  BAKEOFF_CHECK(found) << "rank " << rank << " of " << count_;
  // The true order statistic lies in [min, max]; clamping can only move the answer towards it.
  return std::clamp(value, min_, max_);
}

std::vector<double> QuantileSketch::Quantiles(std::span<const double> qs) const {
  std::vector<double> values;
  if (count_ == 0) return values;
  values.reserve(qs.size());
  if (!folded_) {
    std::vector<double> sorted = samples_;
    std::sort(sorted.begin(), sorted.end());
    for (double q : qs) values.push_back(NearestRank(sorted, q));
  } else {
    for (double q : qs) values.push_back(ValueAtRank(NearestRankIndex(count_, q)));
  }
  return values;
}

std::size_t QuantileSketch::HeapBytes() const {
  return samples_.capacity() * sizeof(double) +
         (positive_.counts.capacity() + negative_.counts.capacity()) * sizeof(std::uint64_t);
}

Summary QuantileSketch::Summarize(double coverage) const {
  if (!folded_) return stats::Summarize(samples_, coverage);
  BAKEOFF_CHECK(coverage > 0 && coverage < 1);
  Summary s;
  s.count = count_;
  s.mean = mean_;
  s.stddev = count_ > 1 ? std::sqrt(m2_ / static_cast<double>(count_ - 1)) : 0;
  s.min = min_;
  s.max = max_;
  s.percentiles_exact = false;
  s.percentile_max_relative_error = kMaxRelativeError;
  const auto estimate = [&](double q) {
    QuantileEstimate e;
    e.q = q;
    e.value = ValueAtRank(NearestRankIndex(count_, q));
    const RankInterval ranks = ConfidenceRanks(count_, q, coverage);
    e.bounded = ranks.bounded;
    e.lower = ValueAtRank(ranks.lower);
    e.upper = ValueAtRank(ranks.upper);
    return e;
  };
  s.p50 = estimate(0.50);
  s.p90 = estimate(0.90);
  s.p95 = estimate(0.95);
  s.p99 = estimate(0.99);
  s.p999 = estimate(0.999);
  return s;
}

}  // namespace bakeoff::stats
