#include <catch2/catch.hpp>
#include <specdec/math/sample.hpp>

#include <cmath>
#include <vector>

#include "support/chi_square.hpp"

TEST_CASE("sample: argmax ties go to the lowest id; NaN is refused") {
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

TEST_CASE("sample: unnormalised weights are fine; an empty total is refused") {
  std::vector<float> w{0.f, 2.f, 0.f};
  specdec::rng g(1);
  CHECK(specdec::sample(w, g) == 1);
  std::vector<float> zero{0.f, 0.f};
  REQUIRE_THROWS_WITH(specdec::sample(zero, g),
                      "sample: probabilities must have a positive, finite total");
}

TEST_CASE("sample: residual is max(0, p - q), falling back to p when it rounds to zero") {
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
