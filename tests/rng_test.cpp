#include <catch2/catch.hpp>
#include <specdec/math/rng.hpp>

#include <random>

TEST_CASE("rng: same seed, same stream - different seed, different stream") {
  specdec::rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const auto x = a();
    CHECK(x == b());
    CHECK(x != c());
  }
  a.reseed(42);
  b.reseed(42);
  CHECK(a() == b());
}

TEST_CASE("rng: the stream is pinned, so a seed means the same tokens everywhere") {
  // Values of this implementation, recorded once: a change here breaks users' reproducibility.
  specdec::rng g(0);
  const std::uint64_t first = g();
  specdec::rng h(0);
  CHECK(first == h());
  CHECK(first == 0x99EC5F36CB75F2B4ULL);
}

TEST_CASE("rng: uniform_open stays strictly inside (0, 1) with mean 1/2") {
  specdec::rng g(7);
  double sum = 0.0;
  for (int i = 0; i < 200000; ++i) {
    const double u = g.uniform_open();
    REQUIRE(u > 0.0);
    REQUIRE(u < 1.0);
    sum += u;
  }
  CHECK(sum / 200000 == Approx(0.5).margin(0.005));
  STATIC_REQUIRE(std::uniform_random_bit_generator<specdec::rng>);
}
