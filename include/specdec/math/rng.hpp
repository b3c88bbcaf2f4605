// specdec/math/rng.hpp - the library's own seedable random generator.
#pragma once

#include <cstdint>

namespace specdec {

/**
 * xoshiro256** seeded through splitmix64. Everything that draws a random number in specdec takes
 * an `rng&`, so one seed reproduces the same tokens on every platform and standard library (the
 * std distributions are implementation-defined; this is not). Not thread-safe: one per decoder.
 * Models std::uniform_random_bit_generator.
 */
class rng {
 public:
  using result_type = std::uint64_t;

  explicit rng(std::uint64_t seed = 0) noexcept { reseed(seed); }

  /// Restarts the stream: the same seed always gives the same sequence.
  void reseed(std::uint64_t seed) noexcept {
    for (auto& word : s_) {
      seed += 0x9E3779B97F4A7C15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      word = z ^ (z >> 31);
    }
  }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return ~result_type{0}; }

  /// 64 uniformly distributed bits.
  result_type operator()() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// A double uniformly distributed in the open interval (0, 1): never 0, never 1.
  double uniform_open() noexcept {
    return (static_cast<double>((*this)() >> 11) + 0.5) * 0x1.0p-53;
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4]{};
};

}  // namespace specdec
