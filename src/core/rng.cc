#include "core/rng.h"

#include <cmath>

#include "core/check.h"

namespace bakeoff {
namespace {

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t RotateLeft(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(std::uint64_t seed) {
  std::uint64_t state = seed;
  for (auto& word : s_) word = SplitMix64(state);
}

std::uint64_t Rng::Next() {
  const std::uint64_t result = RotateLeft(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = RotateLeft(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

std::uint64_t Rng::Below(std::uint64_t n) {
  BAKEOFF_CHECK(n > 0);
  // Lemire's nearly-divisionless method would be faster; rejection keeps it exact and simple.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x = Next();
  while (x >= limit) x = Next();
  return x % n;
}

double Rng::Exponential(double mean) {
  BAKEOFF_CHECK(mean > 0);
  return -mean * std::log1p(-Uniform());
}

double Rng::Normal() {
  double u = 0;
  double v = 0;
  double s = 0;
  do {
    u = 2 * Uniform() - 1;
    v = 2 * Uniform() - 1;
    s = u * u + v * v;
  } while (s >= 1 || s == 0);
  return u * std::sqrt(-2 * std::log(s) / s);
}

double Rng::Gamma(double shape, double scale) {
  BAKEOFF_CHECK(shape > 0 && scale > 0);
  if (shape < 1) {
    // Boost a shape < 1 draw: Gamma(k) = Gamma(k + 1) * U^(1/k).
    return Gamma(shape + 1, scale) * std::pow(Uniform() + 0x1.0p-60, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9 * d);
  while (true) {
    double x = 0;
    double v = 0;
    do {
      x = Normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = Uniform();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v * scale;
  }
}

Rng Rng::Fork() { return Rng(Next()); }

}  // namespace bakeoff
