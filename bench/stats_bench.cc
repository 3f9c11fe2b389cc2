// bench/stats_bench.cc
//
// Owns: the micro-benchmarks of stats::Summarize on 1e6 values (the size of a large step's ITL
// sample), against a baseline in the same binary: copying and std::sort-ing the same values,
// which Summarize must do anyway; and of stats::QuantileSketch, which a step's figures are kept
// in (adding the same 1e6 values one at a time, past its exact cap, then summarising), against
// Summarize of the same values. The input is a fixed shuffle of 1..1e6, so every figure has a
// known answer; a wrong mean, extreme or percentile (for the sketch: one outside its stated
// relative error) fails the benchmark.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "stats/quantile.h"
#include "stats/sketch.h"

namespace bakeoff::bench {
namespace {

constexpr std::size_t kValues = 1'000'000;

const std::vector<double>& Shuffled() {
  static const std::vector<double> values = [] {
    std::vector<double> v(kValues);
    std::iota(v.begin(), v.end(), 1.0);
    std::mt19937_64 rng(42);  // fixed: the same permutation every run
    std::shuffle(v.begin(), v.end(), rng);
    return v;
  }();
  return values;
}

// Empty when `s` is the summary of 1..kValues; otherwise what is wrong. Nearest rank:
// the q-quantile of 1..n is ceil(q * n).
std::string Mismatch(const stats::Summary& s) {
  const double n = static_cast<double>(kValues);
  const auto rank = [n](double q) { return std::ceil(q * n); };
  const bool ok = s.count == kValues && s.min == 1 && s.max == n &&
                  std::abs(s.mean - (n + 1) / 2) < 1e-6 && s.p50.value == rank(0.5) &&
                  s.p90.value == rank(0.9) && s.p99.value == rank(0.99) &&
                  s.p999.value == rank(0.999) && s.p99.bounded && s.p99.lower <= s.p99.value &&
                  s.p99.value <= s.p99.upper;
  if (ok) return {};
  return fmt::format("count {} min {} max {} mean {} p50 {} p99 {} p99.9 {}", s.count, s.min,
                     s.max, s.mean, s.p50.value, s.p99.value, s.p999.value);
}

void BM_Summarize1e6(benchmark::State& state) {
  const std::vector<double>& values = Shuffled();
  for (auto _ : state) {
    stats::Summary summary = stats::Summarize(values);  // copies, as every caller's sample is
    if (std::string wrong = Mismatch(summary); !wrong.empty()) {
      state.SkipWithError(wrong.c_str());
      return;
    }
    benchmark::DoNotOptimize(summary);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kValues));
}
BENCHMARK(BM_Summarize1e6)->Unit(benchmark::kMillisecond);

// The sketch past its cap: count, extremes and mean exact (to rounding), percentiles within the
// stated relative error of the nearest-rank answers.
std::string SketchMismatch(const stats::Summary& s) {
  const double n = static_cast<double>(kValues);
  const double e = stats::QuantileSketch::kMaxRelativeError;
  const auto near = [e](double got, double want) { return std::abs(got - want) <= e * want; };
  const bool ok = s.count == kValues && s.min == 1 && s.max == n && !s.percentiles_exact &&
                  std::abs(s.mean - (n + 1) / 2) < 1e-6 * n && near(s.p50.value, std::ceil(0.5 * n)) &&
                  near(s.p90.value, std::ceil(0.9 * n)) && near(s.p99.value, std::ceil(0.99 * n)) &&
                  near(s.p999.value, std::ceil(0.999 * n)) && s.p99.bounded;
  if (ok) return {};
  return fmt::format("sketch: count {} min {} max {} mean {} p50 {} p99 {} p99.9 {} exact {}", s.count,
                     s.min, s.max, s.mean, s.p50.value, s.p99.value, s.p999.value, s.percentiles_exact);
}

void BM_QuantileSketch1e6(benchmark::State& state) {
  const std::vector<double>& values = Shuffled();
  for (auto _ : state) {
    stats::QuantileSketch sketch;  // the default cap, as a step's figures use
    for (double v : values) sketch.Add(v);
    stats::Summary summary = sketch.Summarize();
    if (std::string wrong = SketchMismatch(summary); !wrong.empty()) {
      state.SkipWithError(wrong.c_str());
      return;
    }
    benchmark::DoNotOptimize(summary);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kValues));
}
BENCHMARK(BM_QuantileSketch1e6)->Unit(benchmark::kMillisecond);

// Baseline: copy and sort the same values.
void BM_Baseline_CopyAndSort1e6(benchmark::State& state) {
  const std::vector<double>& values = Shuffled();
  for (auto _ : state) {
    std::vector<double> copy = values;
    std::sort(copy.begin(), copy.end());
    if (copy.front() != 1 || copy[kValues / 2 - 1] != kValues / 2 || copy.back() != kValues) {
      state.SkipWithError("the sorted copy is wrong");
      return;
    }
    benchmark::DoNotOptimize(copy.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kValues));
}
BENCHMARK(BM_Baseline_CopyAndSort1e6)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bakeoff::bench
