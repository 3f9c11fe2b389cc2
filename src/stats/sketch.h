// stats/sketch.h
//
// Owns: QuantileSketch, the bounded-memory form of a sample that a long run's figures are kept
// in. It keeps every sample exactly up to a cap (default 65,536); past the cap it folds them into
// a log-linear histogram (HDR-style: 128 linear sub-buckets per power of two) and keeps adding
// there, so its memory stops growing however long the run.
// Does not own: the rank rules and the Summary type (stats/quantile.h), which it shares.
//
// Summaries (Summarize): count, mean and stddev come from streaming sums (Welford/Chan) and
// min/max are exact, exact or not. While the sketch is under its cap the whole Summary is
// bit-identical to stats::Summarize of the same samples. Past it, each percentile and each of its
// confidence bounds is the order statistic at the same rank as stats/quantile.cc computes it,
// read from the histogram: the midpoint of the bucket holding that rank, clamped to [min, max].
// Precision: a bucket spans [L, L + 2^e/128) with L = 2^e * (1 + k/128), k in 0..127, so its
// midpoint is within half a bucket, at most L/256, of every value in it: within
// kMaxRelativeError = 1/256 (0.39%) relative to that value, |reported - x(r)| <= |x(r)| / 256.
// The Summary says which case applies (percentiles_exact, percentile_max_relative_error).
// Values: 0 has its own bucket (read back as exactly 0); negative values (latencies never have
// them, but a clock step or a bug must not crash the run) go into a mirrored histogram and keep
// the same relative bound; subnormal magnitudes (below 2.2e-308) are binned linearly, so for them
// the bound is absolute (2^-1030) rather than relative. NaN and infinities are programmer errors.
// Memory: at most exact_cap doubles before folding; after it, 1 KiB per power of two spanned by
// the values (latencies from 1 us to 1,000 s in ms span 30: 30 KiB), never more than ~4 MiB.
//
// Thread-safety: none; one sketch per thread, merged afterwards (Merge).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "stats/quantile.h"

namespace bakeoff::stats {

class QuantileSketch {
 public:
  static constexpr std::size_t kDefaultExactCap = 65'536;
  static constexpr int kSubBucketBits = 7;  // 2^7 = 128 sub-buckets per power of two
  static constexpr double kMaxRelativeError = 1.0 / (2 << kSubBucketBits);  // 1/256

  explicit QuantileSketch(std::size_t exact_cap = kDefaultExactCap) : exact_cap_(exact_cap) {}

  // Adds one sample. REQUIRES: value is finite.
  void Add(double value) { Add(value, 1); }
  // Adds `count` samples of the same value (an event of n tokens gives n per-token gaps);
  // the same as `count` calls of Add(value) (up to rounding of mean and stddev).
  // REQUIRES: value is finite.
  void Add(double value, std::uint64_t count);

  // Adds every sample of `other`, as if they had been added here. Keeps this sketch's cap.
  void Merge(const QuantileSketch& other);

  std::uint64_t count() const { return count_; }
  // True while every sample is kept (count() <= exact_cap()).
  bool exact() const { return !folded_; }
  std::size_t exact_cap() const { return exact_cap_; }
  // Heap memory held (the kept samples' or the histogram's storage), for memory tests.
  std::size_t HeapBytes() const;

  // The summary figures (see the module comment for which are exact).
  // REQUIRES: 0 < coverage < 1.
  Summary Summarize(double coverage = 0.95) const;

  // The nearest-rank value of each quantile in `qs` (0 <= q <= 1), with the same exactness as
  // Summarize: observed samples under the cap, histogram midpoints within 1/256 past it. What a
  // report's CDF curve is drawn from. Empty when the sketch is.
  std::vector<double> Quantiles(std::span<const double> qs) const;

 private:
  // Counts of one sign's magnitudes, by bucket index (the top 12 + kSubBucketBits bits of the
  // IEEE-754 pattern, which order like the magnitudes), stored densely from `first`, in whole
  // powers of two.
  struct Buckets {
    std::uint32_t first = 0;
    std::vector<std::uint64_t> counts;
    void Add(std::uint32_t index, std::uint64_t n);
  };

  void Fold();  // moves the kept samples into the histogram; the sketch is inexact from now on
  void AddToHistogram(double value, std::uint64_t n);
  double ValueAtRank(std::uint64_t rank) const;  // 1-based; histogram only

  std::size_t exact_cap_;
  bool folded_ = false;
  std::vector<double> samples_;  // every sample while !folded_
  Buckets positive_;
  Buckets negative_;  // by magnitude
  std::uint64_t zeros_ = 0;

  std::uint64_t count_ = 0;
  double mean_ = 0;
  double m2_ = 0;  // sum of squared deviations from the mean
  double min_ = 0;
  double max_ = 0;
};

}  // namespace bakeoff::stats
