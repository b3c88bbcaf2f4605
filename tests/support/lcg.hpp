// tests/support/lcg.hpp - a small deterministic generator for test streams (independent of
// specdec::rng, so a change there does not reshuffle the streams the tests were written on).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec::test {

/// Knuth's MMIX linear congruential generator; next() gives the high 31 bits of the state.
struct lcg {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

}  // namespace specdec::test
