#include <catch2/catch.hpp>
#include <specdec/math/sample.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "support/chi_square.hpp"

TEST_CASE("sample: argmax ties go to the lowest id - NaN is refused") {
  std::vector<float> row{1.f, 3.f, 3.f, 2.f};
  CHECK(specdec::argmax(row) == 1);
  std::vector<float> nan_row{1.f, std::nanf(""), 3.f};
  REQUIRE_THROWS_WITH(specdec::argmax(nan_row), "logits: NaN at token 1");
}

TEST_CASE("sample: draws follow the distribution (chi-square) and never a zero") {
  std::vector<float> p{0.1f, 0.0f, 0.45f, 0.25f, 0.2f, 0.0f};
  specdec::rng g(3);
  std::vector<std::size_t> counts(p.size());
  const int n = 200000;
  for (int i = 0; i < n; ++i) counts[static_cast<std::size_t>(specdec::sample(p, g))]++;
  CHECK(counts[1] == 0);
  CHECK(counts[5] == 0);
  std::vector<double> expected(p.begin(), p.end());
  const auto r = specdec::test::chi_square(counts, expected);
  INFO(r.describe());
  CHECK(r.pass());
}

TEST_CASE("sample: unnormalised weights are fine - an empty total is refused") {
  std::vector<float> w{0.f, 2.f, 0.f};
  specdec::rng g(1);
  CHECK(specdec::sample(w, g) == 1);
  std::vector<float> zero{0.f, 0.f};
  REQUIRE_THROWS_WITH(specdec::sample(zero, g),
                      "sample: probabilities must have a positive, finite total");
}

TEST_CASE("sample: residual is max(0, p - q), falling back to p only when it is empty") {
  std::vector<float> p{0.5f, 0.3f, 0.2f}, q{0.6f, 0.3f, 0.1f}, out(3);
  CHECK(specdec::residual(p, q, out) == Approx(0.1));
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 0.0f);
  CHECK(out[2] == Approx(0.1f));
  CHECK(specdec::residual(p, p, out) == Approx(1.0));
  CHECK(out[0] == 0.5f);
  CHECK(specdec::residual_one_hot(p, 0, out) == Approx(0.5));
  CHECK(out[0] == 0.0f);
  std::vector<float> sure{1.0f, 0.0f, 0.0f};
  CHECK(specdec::residual_one_hot(sure, 0, out) == Approx(1.0));  // falls back to p
  CHECK(out[0] == 1.0f);
  // However small the rest, the rejected token is removed: p(0) = 0.9999995.
  std::vector<float> confident{0.9999995f, 3e-7f, 1e-7f, 1e-7f}, q0{1.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> out4(4);
  CHECK(specdec::residual_one_hot(confident, 0, out4) == Approx(5e-7).epsilon(1e-6));
  CHECK(out4[0] == 0.0f);
  CHECK(out4[1] == 3e-7f);
  CHECK(specdec::residual(confident, q0, out4) == Approx(5e-7).epsilon(1e-6));
  CHECK(out4[0] == 0.0f);
  CHECK(out4[1] == 3e-7f);
  // Denormal remainders count too (no floor; with FTZ/DAZ on they read as 0).
  std::vector<float> tiny{1.0f, 1e-40f};
  std::vector<float> out2(2);
  if (tiny[1] > 0.0f) {
    CHECK(specdec::residual_one_hot(tiny, 0, out2) > 0.0);
    CHECK(out2[0] == 0.0f);
  }
}

TEST_CASE("sample: argmax over many blocks keeps the lowest id among ties") {
  for (std::size_t v : {7u, 255u, 256u, 257u, 1000u, 5003u}) {
    std::vector<float> row(v, -1.0f);
    for (std::size_t i = 0; i < v; ++i) row[i] = static_cast<float>((i * 37) % 101) * 0.01f;
    const float top = 5.0f;
    std::vector<std::size_t> at{v - 1, v / 2, v / 3};
    for (auto i : at) row[i] = top;
    INFO("V = " << v);
    CHECK(specdec::argmax(row) == static_cast<specdec::token_id>(v / 3 < v / 2 ? v / 3 : v / 2));
    row[v - 1] = std::nanf("");
    REQUIRE_THROWS_WITH(specdec::argmax(row), "logits: NaN at token " + std::to_string(v - 1));
  }
}

namespace {

// The width of the interval of u in (0, 1) that sample() maps to token `t` (its probability as
// sample() draws it), found by bisection on u: the draw is monotone in u.
double drawn_width(std::span<const float> row, std::size_t t) {
  const auto at = [&](double u) {
    return static_cast<std::size_t>(specdec::detail::sample_with(row, [u] { return u; }));
  };
  const auto edge = [&](std::size_t token) {  // the least u drawing a token > `token`
    double lo = 0x1p-60, hi = 1.0 - 0x1p-53;
    if (at(hi) <= token) return 1.0;
    for (int i = 0; i < 200 && std::nextafter(lo, 1.0) < hi; ++i) {
      const double mid = lo + (hi - lo) / 2;
      (at(mid) <= token ? lo : hi) = mid;
    }
    return hi;
  };
  return edge(t) - (t == 0 ? 0.0 : edge(t - 1));
}

}  // namespace

TEST_CASE("sample: a token at a block's end is drawn with its own probability") {
  // Rows of random weights with a token of tiny probability on each side of block boundaries
  // (1024 values per block): the block is chosen from float block sums and the token inside it
  // from a double running sum, which must agree, or the last token of a block gets (or loses)
  // the sums' difference. Each tiny token's draw width must be its probability.
  std::uint64_t state = 12345;
  const auto uniform = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(state >> 40) * 0x1p-24f;
  };
  for (const std::size_t v : {2048u, 32000u, 151936u}) {
    std::vector<float> row(v);
    for (int trial = 0; trial < (v == 2048 ? 40 : 2); ++trial) {
      for (float& x : row) x = uniform();
      std::vector<std::size_t> tiny;
      for (std::size_t b = 1024; b <= v; b += 1024) {
        tiny.push_back(b - 1);
        if (b < v) tiny.push_back(b);
      }
      tiny.push_back(v - 1);
      long double total = 0;
      for (const std::size_t t : tiny) row[t] = 1e-9f * static_cast<float>(v / 2);
      for (const float x : row) total += x;
      // Probe a few of them (each probe bisects over the whole row).
      for (std::size_t j = 0; j < tiny.size(); j += 1 + tiny.size() / 6) {
        const std::size_t t = tiny[j];
        const double expected = static_cast<double>(row[t] / total);
        const double width = drawn_width(row, t);
        INFO("V = " << v << ", trial " << trial << ", token " << t << ": width " << width
                    << ", probability " << expected);
        CHECK(std::abs(width / expected - 1.0) < 1e-3);
      }
    }
  }
}

TEST_CASE("sample: past 256 Ki tokens, block sums formed again draw what kept ones draw") {
  // More blocks of 1024 than sample() keeps on its stack: it forms each block's sum again while
  // walking to the draw. The token must be the one the kept sums give, at every point u.
  const std::size_t v = 300'000;
  std::vector<float> probs(v, 0.0f);
  std::uint64_t x = 12345;
  for (std::size_t i = 0; i < v; i += 7) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    probs[i] = static_cast<float>((x >> 40) % 1000) * 1e-3f;  // zeros and ties included
  }
  probs[v - 1] = 0.25f;  // mass at the very end
  std::vector<double> blocks(specdec::detail::block_count(v));
  const double total = specdec::detail::block_sums(probs, blocks.data());
  for (const double u : {1e-9, 0.001, 0.25, 0.5, 0.7071, 0.999, 1.0 - 1e-12}) {
    const auto kept = specdec::detail::draw_in_blocks(blocks, total, u,
                                                      specdec::detail::blocks_of(probs));
    const auto formed = specdec::detail::sample_with(probs, [u] { return u; });
    CHECK(formed == kept);
    CHECK(probs[static_cast<std::size_t>(formed)] > 0.0f);
  }
}
