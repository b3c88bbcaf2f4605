// tests/support/rare_draws.hpp - generators whose next uniform draw is a rare one, for tests of
// events of probability ~1e-7 (a rejection of a draft the target gives 0.9999995) without
// running ten million trials through the code under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <specdec/math/rng.hpp>

namespace specdec::test {

/// `count` generators, each in a state whose next uniform_open() is above `u_min`, taken from
/// one stream seeded with `seed` (copies of it just before such a draw). Cost: about
/// count / (1 - u_min) draws.
inline std::vector<rng> generators_drawing_above(double u_min, std::size_t count,
                                                 std::uint64_t seed = 1) {
  std::vector<rng> out;
  rng g(seed);
  while (out.size() < count) {
    const rng before = g;
    if (g.uniform_open() > u_min) out.push_back(before);
  }
  return out;
}

}  // namespace specdec::test
