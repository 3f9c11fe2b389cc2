// core/rng.h
//
// Owns: the deterministic random source. Every random choice in bakeoff (arrival gaps, prompt
// text, emulator noise) comes from an Rng seeded from the run's seed, so a seed reproduces a run.
// The generator is SplitMix64-seeded xoshiro256** (public-domain algorithms by Blackman and
// Vigna), implemented here from the published description; its output does not depend on the
// standard library, unlike std::*_distribution.
//
// Thread-safety: none; give each thread its own Rng (Fork()).
#pragma once

#include <array>
#include <cstdint>

namespace bakeoff {

class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  std::uint64_t Next();
  // Uniform in [0, 1), 53 random bits.
  double Uniform();
  // Uniform integer in [0, n). REQUIRES: n > 0.
  std::uint64_t Below(std::uint64_t n);
  // Exponential with the given mean. REQUIRES: mean > 0.
  double Exponential(double mean);
  // Standard normal (Marsaglia polar method).
  double Normal();
  // Gamma with shape k and scale theta (Marsaglia-Tsang). REQUIRES: k > 0, theta > 0.
  double Gamma(double shape, double scale);
  // An independent generator derived from this one (for per-worker streams).
  Rng Fork();

 private:
  std::array<std::uint64_t, 4> s_{};
};

}  // namespace bakeoff
